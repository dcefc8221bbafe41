// The decisions half of `faultline sim replay` (sim/replay_decisions.h): the live run's and
// the simulator's actions reduced to decisions, named alike, aligned, and each mismatch
// explained by a listed unmodelled difference or reported.
#include "sim/replay_decisions.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <map>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <variant>

#include "eventlog/event_codec.h"

namespace faultline::sim {

namespace {

using nlohmann::json;

// The differences, each with the test that says a one-sided decision is one of them.
// Keep the names and the reasons in step with docs/running-live.md ("Replaying a live
// incident").
const std::vector<UnmodelledDifference> kDifferences = {
    {"set-up start attempts",
     "live mode tries to start the job before every agent has connected; those attempts fail "
     "and the policy handles the failure (tests, evictions, replacements) until a start "
     "succeeds. The simulated job starts at the live run's first successful start, with every "
     "machine there: the live decisions from the first failed start to the first successful "
     "one have no counterpart (nor has the simulated start when no live start succeeded)"},
    {"controller restart",
     "a restarted live controller (a `restart` record) builds the policy afresh from its "
     "journal and issues its set-up again (checkpoint plan, step watch, inspections, standby "
     "pool, a start or requeue for a job it cannot adopt) within restart_window_s (5 s); the "
     "simulated controller never restarts"},
    {"unrecorded fault",
     "the simulator replays the faults the log records (those `faultline live inject` made), "
     "nothing else: what the live run reacted to without a fault record since the job last "
     "started (an agent killed or a host lost by other means, a real NCCL or disk error) has "
     "no counterpart in the replay"},
    {"end of the run",
     "the two runs end at the same clock time, but the live run's timings scatter by seconds: "
     "a decision taken in the last end_window_s (30 s, at most a tenth of the run) on one "
     "side can fall after the other's end"},
};

std::string fixed_point(double v, int prec) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(prec) << v;
  return o.str();
}

std::string join_names(std::vector<std::string> xs, bool sorted) {
  if (sorted) std::sort(xs.begin(), xs.end());
  std::string o = "[";
  for (std::size_t i = 0; i < xs.size(); ++i) o += (i ? "," : "") + xs[i];
  return o + "]";
}

template <class F>
std::string machines(const MachineSet& ms, F name) {
  std::vector<std::string> xs;
  for (MachineId m : ms) xs.push_back(name(m));
  return join_names(xs, true);
}

std::string slots(const std::vector<SlotId>& ss) {
  std::vector<SlotId> sorted = ss;
  std::sort(sorted.begin(), sorted.end());
  std::string o = "slots [";
  for (std::size_t i = 0; i < sorted.size(); ++i) o += (i ? "," : "") + std::to_string(sorted[i]);
  return o + "]";
}

std::string mech(Mechanism m) { return m == Mechanism::kNone ? "" : mechanism_name(m); }

// What an action names, machines by `name`; the reason goes separately.
template <class F>
std::string what_of(const Action& a, F name) {
  return std::visit(
      [&](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, StartJob>)
          return mech(x.mechanism) + (x.version.empty() ? "" : " version " + x.version) +
                 (x.in_place ? " in-place" : "");
        if constexpr (std::is_same_v<T, EvictMachines>)
          return machines(x.machines, name) + " " + mech(x.mechanism) + (x.retire ? " retire" : "");
        if constexpr (std::is_same_v<T, AcquireMachines>)
          return std::string(mode_name(x.mode)) + " " + slots(x.slots) + " " + mech(x.mechanism) +
                 (x.same_domain ? " in-domain" : "");
        if constexpr (std::is_same_v<T, SetCheckpointPlan>) return tier_name(x.tier);
        if constexpr (std::is_same_v<T, EnableInspection>) return x.kind;
        if constexpr (std::is_same_v<T, RunProbe>) {
          std::vector<std::string> groups;
          for (const auto& g : x.groups) groups.push_back(machines(g, name));
          return std::string(probe_name(x.test)) + " " + machines(x.machines, name) +
                 (groups.empty() ? "" : " groups " + join_names(groups, true));
        }
        if constexpr (std::is_same_v<T, RunReplay>) {
          std::vector<std::string> groups;
          for (const auto& g : x.groups) groups.push_back(machines(g, name));
          return "groups " + join_names(groups, true);
        }
        if constexpr (std::is_same_v<T, HotUpdate>) return x.version;
        if constexpr (std::is_same_v<T, SetStandbyPool>) return std::to_string(x.size);
        if constexpr (std::is_same_v<T, EndRun>) return x.verdict;
        if constexpr (std::is_same_v<T, MitigateSlowdown>)
          return std::string(mitigation_name(x.how)) + " slot " + std::to_string(x.slot);
        if constexpr (std::is_same_v<T, AvoidMachines>) return machines(x.machines, name);
        if constexpr (std::is_same_v<T, RejoinReplica>) return std::to_string(x.replica);
        if constexpr (std::is_same_v<T, MigrateMachines>) return machines(x.machines, name);
        return "";
      },
      a);
}

std::string reason_of(const Action& a) {
  return std::visit(
      [](const auto& x) -> std::string {
        if constexpr (requires { x.reason; }) return x.reason;
        return "";
      },
      a);
}

template <class F>
Decision decision(const Action& a, double t_s, std::size_t index, F name) {
  Decision d;
  d.index = index;
  d.t_s = t_s;
  d.kind = traces::to_json(a).at("type").get<std::string>();
  d.what = what_of(a, name);
  while (!d.what.empty() && d.what.back() == ' ') d.what.pop_back();
  d.reason = reason_of(a);
  d.reason_kind = reason_kind(d.reason);
  return d;
}

std::vector<std::string> names_from_json(const json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.is_object() || !j.contains(key) || !j.at(key).is_array()) return out;
  for (const auto& x : j.at(key)) {
    if (x.is_string())
      out.push_back(x.get<std::string>());
    else if (x.is_object() && x.contains("name") && x.at("name").is_string())
      out.push_back(x.at("name").get<std::string>());
    else
      return {};
  }
  return out;
}

json read_json(const std::filesystem::path& p) {
  std::ifstream f(p);
  if (!f) return json();
  return json::parse(f, nullptr, /*allow_exceptions=*/false);
}

// The mismatch `d` (one side's decision) is one of the listed differences: its name.
std::string explain(const Decision& d, bool live_side, const DecisionContext& ctx) {
  if (live_side && d.setup) return kDifferences[0].name;
  if (!live_side && !ctx.live_started && d.kind == "StartJob") return kDifferences[0].name;
  if (live_side)
    for (double t : ctx.restarts)
      if (d.t_s >= t && d.t_s <= t + ctx.restart_window_s) return kDifferences[1].name;
  if (live_side) {
    double since = 0;  // the live job's last start before d
    for (double t : ctx.live_starts)
      if (t < d.t_s) since = t;
    if (std::none_of(ctx.fault_times.begin(), ctx.fault_times.end(),
                     [&](double t) { return t >= since && t <= d.t_s; }))
      return kDifferences[2].name;
  }
  if (d.t_s >= ctx.horizon_s - std::min(ctx.end_window_s, ctx.horizon_s / 10))
    return kDifferences[3].name;
  return "";
}

json decision_json(const Decision& d) {
  return {{"index", d.index}, {"t_s", d.t_s},       {"kind", d.kind},
          {"what", d.what},   {"reason", d.reason}, {"reason_kind", d.reason_kind},
          {"text", d.text()}};
}

// The longest common subsequence of equal decisions, as pairs (live index, sim index) in
// order. A table of (N+1) x (M+1) lengths; runs too long for it are aligned greedily.
std::vector<std::pair<std::size_t, std::size_t>> align(const std::vector<Decision>& a,
                                                       const std::vector<Decision>& b) {
  std::vector<std::pair<std::size_t, std::size_t>> pairs;
  const std::size_t n = a.size(), m = b.size();
  if ((n + 1) * (m + 1) > (std::size_t{1} << 24)) {
    for (std::size_t i = 0, j = 0; i < n && j < m; ++i)
      for (std::size_t k = j; k < m && k < j + 64; ++k)
        if (a[i].same_as(b[k])) {
          pairs.emplace_back(i, k);
          j = k + 1;
          break;
        }
    return pairs;
  }
  std::vector<std::uint32_t> len((n + 1) * (m + 1), 0);
  auto at = [&](std::size_t i, std::size_t j) -> std::uint32_t& { return len[i * (m + 1) + j]; };
  for (std::size_t i = n; i-- > 0;)
    for (std::size_t j = m; j-- > 0;)
      at(i, j) = a[i].same_as(b[j]) ? at(i + 1, j + 1) + 1 : std::max(at(i + 1, j), at(i, j + 1));
  for (std::size_t i = 0, j = 0; i < n && j < m;) {
    if (a[i].same_as(b[j]) && at(i, j) == at(i + 1, j + 1) + 1) {
      pairs.emplace_back(i++, j++);
    } else if (at(i + 1, j) >= at(i, j + 1)) {
      ++i;
    } else {
      ++j;
    }
  }
  return pairs;
}

}  // namespace

std::string Decision::text() const {
  std::string o = kind;
  if (!what.empty()) o += " " + what;
  if (!reason_kind.empty()) o += " (" + reason_kind + ")";
  return o;
}

std::string reason_kind(const std::string& reason) {
  std::string r = reason.substr(0, reason.find(": "));
  std::string out;
  int depth = 0;
  bool digits = false;
  for (char c : r) {
    if (c == '(') ++depth;
    if (depth == 0) {
      const bool digit = std::isdigit(static_cast<unsigned char>(c)) != 0;
      if (digit && !digits) out += '#';
      if (!digit) out += c;
      digits = digit;
    }
    if (c == ')' && depth > 0) --depth;
  }
  std::string squeezed;
  for (char c : out)
    if (c != ' ' || (!squeezed.empty() && squeezed.back() != ' ')) squeezed += c;
  while (!squeezed.empty() && squeezed.back() == ' ') squeezed.pop_back();
  return squeezed;
}

const std::vector<UnmodelledDifference>& unmodelled_differences() { return kDifferences; }

std::vector<std::string> live_machine_names(const traces::EventLog& log, const std::string& path) {
  std::vector<std::string> names;
  if (!log.records.empty()) names = names_from_json(log.records.front().json, "machine_names");
  namespace fs = std::filesystem;
  if (names.empty()) {
    std::error_code ec;
    const fs::path journal = fs::path(path).parent_path() / "journal.json";
    if (fs::exists(journal, ec)) names = names_from_json(read_json(journal), "machine_names");
  }
  if (names.empty() && !log.header.config_file.empty()) {
    const json cfg = read_json(log.header.config_file);
    names = names_from_json(cfg, "machines");
    const auto standby = names_from_json(cfg, "standby");
    if (!names.empty()) names.insert(names.end(), standby.begin(), standby.end());
  }
  return names;
}

std::vector<std::vector<MachineId>> live_slot_entries(const traces::EventLog& log) {
  const int n = log.header.machines;
  std::vector<std::vector<MachineId>> entries(static_cast<std::size_t>(n));
  std::vector<MachineId> in(static_cast<std::size_t>(n));
  for (int s = 0; s < n; ++s) entries[s] = {s}, in[s] = s;
  std::map<ActionId, const AcquireMachines*> acquires;
  for (const auto& a : log.actions)
    if (auto* x = std::get_if<AcquireMachines>(&a.value.action)) acquires[a.value.id] = x;
  // Actions and events in log order: evictions empty slots, MachinesReady fills them in the
  // order live mode fills them (the slots asked for, then, for a requeue or no slots given,
  // every other empty slot in order).
  std::size_t ai = 0, ei = 0;
  while (ai < log.actions.size() || ei < log.events.size()) {
    const bool action_next =
        ei >= log.events.size() ||
        (ai < log.actions.size() && log.actions[ai].line < log.events[ei].line);
    if (action_next) {
      if (auto* x = std::get_if<EvictMachines>(&log.actions[ai].value.action))
        for (SlotId s = 0; s < n; ++s)
          if (std::find(x->machines.begin(), x->machines.end(), in[s]) != x->machines.end())
            in[s] = kNoMachine;
      ++ai;
      continue;
    }
    const auto* ready = std::get_if<MachinesReady>(&log.events[ei++].value);
    if (!ready || ready->machines.empty()) continue;
    auto acq = acquires.find(ready->action);
    std::vector<SlotId> empty;
    if (acq != acquires.end())
      for (SlotId s : acq->second->slots)
        if (s >= 0 && s < n && in[s] == kNoMachine) empty.push_back(s);
    if (acq == acquires.end() || acq->second->slots.empty() ||
        acq->second->mode == AcquireMode::kRequeue)
      for (SlotId s = 0; s < n; ++s)
        if (in[s] == kNoMachine && std::find(empty.begin(), empty.end(), s) == empty.end())
          empty.push_back(s);
    for (std::size_t i = 0; i < empty.size() && i < ready->machines.size(); ++i) {
      in[empty[i]] = ready->machines[i];
      entries[empty[i]].push_back(ready->machines[i]);
    }
  }
  return entries;
}

std::vector<Decision> live_decisions(const traces::EventLog& log,
                                     const std::vector<std::string>& names) {
  auto name = [&](MachineId m) {
    return m >= 0 && static_cast<std::size_t>(m) < names.size() ? names[m]
                                                                : "machine " + std::to_string(m);
  };
  std::map<ActionId, bool> ok;
  for (const auto& o : log.outcomes) ok[o.value.id] = o.value.ok;
  // From the first failed start to the first successful one: set-up (agents connecting).
  bool started = false, failed = false;
  std::vector<Decision> out;
  for (const auto& a : log.actions) {
    if (std::holds_alternative<Note>(a.value.action)) continue;
    Decision d = decision(a.value.action, a.t_s, out.size(), name);
    if (std::holds_alternative<StartJob>(a.value.action) && !started) {
      auto it = ok.find(a.value.id);
      started = it == ok.end() || it->second;
      failed |= !started;
    }
    d.setup = failed && !started;
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<Decision> sim_decisions(const std::vector<std::string>& records, double offset_s,
                                    int job_machines,
                                    const std::vector<std::vector<MachineId>>& live_entries,
                                    const std::vector<std::string>& names) {
  std::map<MachineId, std::string> sim_name;  // simulated machine -> live name
  auto live_name = [&](MachineId m) {
    return m >= 0 && static_cast<std::size_t>(m) < names.size() ? names[m]
                                                                : "machine " + std::to_string(m);
  };
  std::vector<std::size_t> joins(live_entries.size(), 0);
  for (int s = 0; s < job_machines && static_cast<std::size_t>(s) < live_entries.size(); ++s)
    sim_name[s] = live_name(live_entries[s].front()), joins[s] = 1;
  auto name = [&](MachineId m) {
    auto it = sim_name.find(m);
    return it != sim_name.end() ? it->second : "sim:" + std::to_string(m);
  };
  std::vector<Decision> out;
  for (const auto& r : records) {
    std::istringstream in(r);
    std::string tag, what;
    long long ns = 0;
    if (!(in >> tag >> ns >> what) || tag != "R")
      throw std::runtime_error("replay: malformed simulator record \"" + r + "\"");
    if (what == "J") {
      MachineId m = kNoMachine;
      SlotId s = -1;
      in >> m >> s;
      if (s < 0 || static_cast<std::size_t>(s) >= live_entries.size()) continue;
      const std::size_t k = joins[s]++;
      if (k < live_entries[s].size())
        sim_name[m] = live_name(live_entries[s][k]);
      else
        sim_name.erase(m);
      continue;
    }
    std::string rest;
    std::getline(in, rest);
    const Action a = traces::action_from_json(json::parse(rest));
    if (std::holds_alternative<Note>(a)) continue;
    out.push_back(decision(a, static_cast<double>(ns) * 1e-9 + offset_s, out.size(), name));
  }
  return out;
}

DecisionComparison compare_decisions(const std::vector<Decision>& live,
                                     const std::vector<Decision>& sim, const DecisionContext& ctx) {
  DecisionComparison c;
  c.live = live.size();
  c.sim = sim.size();
  const auto pairs = align(live, sim);
  c.matched = pairs.size();
  std::size_t stretch = 0;
  auto add = [&](const Decision* l, const Decision* s) {
    DecisionMismatch m;
    m.stretch = stretch;
    if (l) m.live = *l;
    if (s) m.sim = *s;
    m.explained_by = explain(l ? *l : *s, l != nullptr, ctx);
    if (m.explained_by.empty()) {
      ++c.unexplained;
      if (!c.first_unexplained) c.first_unexplained = c.mismatches.size();
    } else {
      ++c.explained;
    }
    c.mismatches.push_back(std::move(m));
  };
  std::size_t i = 0, j = 0;
  for (std::size_t p = 0; p <= pairs.size(); ++p) {
    const std::size_t li = p < pairs.size() ? pairs[p].first : live.size();
    const std::size_t sj = p < pairs.size() ? pairs[p].second : sim.size();
    // The unmatched stretch before this pair, both sides, merged by time.
    while (i < li || j < sj) {
      if (j >= sj || (i < li && live[i].t_s <= sim[j].t_s))
        add(&live[i++], nullptr);
      else
        add(nullptr, &sim[j++]);
    }
    i = li + 1;
    j = sj + 1;
    ++stretch;
  }
  return c;
}

json decisions_json(const DecisionComparison& c, std::uint64_t seed) {
  json mismatches = json::array();
  for (const auto& m : c.mismatches)
    mismatches.push_back(
        {{"live", m.live ? decision_json(*m.live) : json()},
         {"sim", m.sim ? decision_json(*m.sim) : json()},
         {"explained_by", m.explained_by.empty() ? json() : json(m.explained_by)}});
  json differences = json::array();
  for (const auto& d : kDifferences) differences.push_back({{"name", d.name}, {"why", d.why}});
  // The first mismatch with both sides: the one-sided decision and, on the other side, the
  // first one-sided decision between the same two matches (what the other World did there
  // instead), if any.
  auto first = [&](std::optional<std::size_t> k) -> json {
    if (!k) return json();
    json f = mismatches[*k];
    f["at"] = *k;
    const bool live_side = c.mismatches[*k].live.has_value();
    for (std::size_t q = *k + 1;
         q < c.mismatches.size() && c.mismatches[q].stretch == c.mismatches[*k].stretch; ++q)
      if (live_side ? c.mismatches[q].sim.has_value() : c.mismatches[q].live.has_value()) {
        f[live_side ? "sim" : "live"] = mismatches[q][live_side ? "sim" : "live"];
        break;
      }
    return f;
  };
  return {{"replica", 0},
          {"seed", seed},
          {"live", c.live},
          {"sim", c.sim},
          {"matched", c.matched},
          {"explained", c.explained},
          {"unexplained", c.unexplained},
          {"ok", c.ok()},
          {"first_mismatch",
           first(c.mismatches.empty() ? std::nullopt : std::optional<std::size_t>(0))},
          {"first_unexplained", first(c.first_unexplained)},
          {"mismatches", mismatches},
          {"unmodelled_differences", differences}};
}

std::vector<std::string> take_action_records(std::vector<ReplicaResult>& results) {
  std::vector<std::string> records;
  for (auto& r : results) {
    auto is_record = [](const std::string& d) { return d.rfind("R ", 0) == 0; };
    if (r.replica == 0)
      std::copy_if(r.decisions.begin(), r.decisions.end(), std::back_inserter(records), is_record);
    r.decisions.erase(std::remove_if(r.decisions.begin(), r.decisions.end(), is_record),
                      r.decisions.end());
  }
  return records;
}

json compare_with_live(const traces::EventLog& log, const std::string& path,
                       const std::vector<std::string>& records, double start_offset_s,
                       double horizon_s, std::uint64_t seed) {
  const auto names = live_machine_names(log, path);
  const auto sim =
      sim_decisions(records, start_offset_s, log.header.machines, live_slot_entries(log), names);
  DecisionContext ctx;
  ctx.horizon_s = horizon_s;
  for (const auto& f : log.faults) ctx.fault_times.push_back(f.t_s);
  for (const auto& a : log.actions)
    if (std::holds_alternative<StartJob>(a.value.action)) ctx.live_starts.push_back(a.t_s);
  for (const auto& r : log.restarts) ctx.restarts.push_back(r.t_s);
  const auto live = live_decisions(log, names);
  ctx.live_started = std::any_of(
      live.begin(), live.end(), [](const Decision& d) { return d.kind == "StartJob" && !d.setup; });
  return decisions_json(compare_decisions(live, sim, ctx), seed);
}

std::string format_decisions_text(const json& d) {
  std::ostringstream o;
  o << "decisions: " << d.at("matched").get<std::size_t>() << " of "
    << d.at("live").get<std::size_t>() << " match the live run (simulated replica 0, seed "
    << d.at("seed").get<std::uint64_t>() << ", took " << d.at("sim").get<std::size_t>() << "); "
    << d.at("explained").get<std::size_t>() << " mismatches explained by unmodelled differences, "
    << d.at("unexplained").get<std::size_t>() << " unexplained\n";
  auto side = [](const json& x) {
    if (x.is_null()) return std::string("(nothing)");
    return "#" + std::to_string(x.at("index").get<std::size_t>()) +
           " t=" + fixed_point(x.at("t_s").get<double>(), 2) + " s  " +
           x.at("text").get<std::string>() + "  \"" + x.at("reason").get<std::string>() + "\"";
  };
  auto show = [&](const char* title, const json& m) {
    if (m.is_null()) return;
    o << "  " << title << ":";
    if (!m.at("explained_by").is_null())
      o << " (explained: " << m.at("explained_by").get<std::string>() << ")";
    o << "\n    live " << side(m.at("live")) << "\n    sim  " << side(m.at("sim")) << "\n";
  };
  show("first mismatch", d.at("first_mismatch"));
  if (d.at("first_unexplained") != d.at("first_mismatch"))
    show("first unexplained mismatch", d.at("first_unexplained"));
  return o.str();
}

}  // namespace faultline::sim
