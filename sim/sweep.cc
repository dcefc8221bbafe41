#include "sim/sweep.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>

#include "sim/costs.h"
#include "sim/fork_pool.h"
#include "sim/metrics.h"
#include "sim/report.h"
#include "sim/runner.h"
#include "traces/stats.h"

namespace faultline::sim {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// A chunk's first 8 bytes: the format (3: results as sim/metrics.h's encode writes them
// with standby_machine_s; 2 without it; 1 held them as msgpack).
constexpr char kChunkMagic[8] = {'F', 'L', 'C', 'H', 'U', 'N', 'K', '3'};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot read");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes through a temporary name and renames, so a reader never sees half a file.
void write_atomic(const fs::path& path, const std::string& bytes) {
  const fs::path tmp = path.string() + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw std::runtime_error(tmp.string() + ": cannot write");
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.flush();
    if (!f) throw std::runtime_error(tmp.string() + ": write failed");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw std::runtime_error(path.string() + ": " + ec.message());
}

void put_u64(std::string& out, std::uint64_t v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// The value a --set would give: JSON when it parses, else the text as a string.
json param_value(const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::exception&) {
    return text;
  }
}

// One replica's metrics, in metric_names() order.
std::vector<double> replica_metrics(const ReplicaResult& r, const scenarios::Scenario& sc) {
  const Breakdown& b = r.breakdown;
  std::vector<double> m;
  m.push_back(r.ettr);
  for (const auto& k : kBuckets) m.push_back(static_cast<double>(b.*k.field) * 1e-9);
  m.push_back(static_cast<double>(b.total() - b.productive) * 1e-9);
  m.push_back(static_cast<double>(r.incident_count));
  m.push_back(static_cast<double>(r.faults_injected));
  m.push_back(static_cast<double>(r.evictions_true));
  m.push_back(static_cast<double>(r.evictions_false));
  m.push_back(static_cast<double>(r.checkpoints));
  const double gpus = static_cast<double>(sc.cluster.machines) * sc.cluster.gpus_per_machine;
  // A job of fixed work runs for its own time: what it did not train of it.
  if (sc.job.work_days > 0)
    m.push_back((r.elapsed_s - static_cast<double>(b.productive) * 1e-9) / 3600.0 * gpus);
  else
    m.push_back((1.0 - r.ettr) * sc.job.horizon_days * 24.0 * gpus);
  m.push_back(static_cast<double>(r.evictions_false_positive));
  m.push_back(static_cast<double>(r.standby_exhaustions));
  m.push_back(static_cast<double>(r.remote_fallbacks));
  return m;
}

struct Chunk {
  int first = 0, last = 0;
  fs::path path;
};

std::vector<Chunk> list_chunks(const fs::path& dir) {
  std::vector<Chunk> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    int a = 0, b = 0;
    char tail = 0;
    if (std::sscanf(name.c_str(), "chunk-%d-%d.bi%c", &a, &b, &tail) == 3 && tail == 'n' &&
        name == "chunk-" + std::to_string(a) + "-" + std::to_string(b) + ".bin" && a < b)
      out.push_back({a, b, e.path()});
  }
  std::sort(out.begin(), out.end(), [](const Chunk& x, const Chunk& y) {
    return std::tie(x.first, x.last) < std::tie(y.first, y.last);
  });
  return out;
}

// Reads a chunk file into (replica, encoded result) records.
std::vector<std::pair<std::uint64_t, std::vector<std::uint8_t>>> read_chunk(const fs::path& path) {
  const std::string bytes = read_file(path.string());
  if (bytes.size() >= sizeof kChunkMagic &&
      std::memcmp(bytes.data(), kChunkMagic, sizeof kChunkMagic - 1) == 0 &&
      bytes[sizeof kChunkMagic - 1] != kChunkMagic[sizeof kChunkMagic - 1])
    throw std::runtime_error(path.string() + ": a chunk of format " +
                             bytes[sizeof kChunkMagic - 1] + ", this build reads format " +
                             kChunkMagic[sizeof kChunkMagic - 1] +
                             ": sweep into a new --out (or delete the point's chunks)");
  if (bytes.size() < sizeof kChunkMagic ||
      std::memcmp(bytes.data(), kChunkMagic, sizeof kChunkMagic) != 0)
    throw std::runtime_error(path.string() + ": not a faultline chunk file");
  std::vector<std::pair<std::uint64_t, std::vector<std::uint8_t>>> out;
  size_t at = sizeof kChunkMagic;
  while (at < bytes.size()) {
    std::uint64_t replica = 0, len = 0;
    if (bytes.size() - at < 16) throw std::runtime_error(path.string() + ": truncated");
    std::memcpy(&replica, bytes.data() + at, 8);
    std::memcpy(&len, bytes.data() + at + 8, 8);
    at += 16;
    if (bytes.size() - at < len) throw std::runtime_error(path.string() + ": truncated");
    out.emplace_back(replica,
                     std::vector<std::uint8_t>(bytes.begin() + at, bytes.begin() + at + len));
    at += len;
  }
  return out;
}

// In a forked child (execute's pool): replicas [first, last) of one point, computed by
// run_replica_list as `sim run` and `sim compare` compute them (replica 0 in this process
// first, every other replica in a fork of the state after it; a fork runs further replicas
// for as long as none of them needed SimGrid), written as one chunk file. Ticks once per
// replica.
void run_chunk(const PlannedPoint& p, int first, int last, const Registry& registry,
               const fs::path& file, const std::function<void()>& tick) {
  std::vector<std::uint64_t> which;
  for (int r = first; r < last; ++r) which.push_back(static_cast<std::uint64_t>(r));
  const std::vector<ReplicaResult> rs = run_replica_list(
      p.scenario, which, 1, RunOptions{}, registry, nullptr, [&](int, int) { tick(); });
  std::string out(kChunkMagic, sizeof kChunkMagic);
  for (std::size_t i = 0; i < rs.size(); ++i) {
    const std::vector<std::uint8_t> bytes = encode(rs[i]);
    put_u64(out, which[i]);
    put_u64(out, bytes.size());
    out.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  write_atomic(file, out);
}

std::string assignment_text(const analysis::Assignment& a) {
  std::string s;
  for (const auto& [k, v] : a) s += (s.empty() ? "" : ", ") + k + "=" + v;
  return s.empty() ? "the base scenario" : s;
}

}  // namespace

const std::vector<std::string>& metric_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n{"ettr"};
    for (const auto& k : kBuckets) n.push_back(std::string(k.name) + "_s");
    for (const char* x :
         {"unproductive_s", "incidents", "faults_injected", "evictions_true", "evictions_false",
          "checkpoints", "gpu_hours_lost", "evictions_false_positive", "standby_exhaustions",
          "remote_checkpoint_fallbacks"})
      n.push_back(x);
    return n;
  }();
  return names;
}

std::vector<PlannedPoint> plan_points(const SweepSpec& spec,
                                      const std::vector<analysis::Assignment>& points,
                                      const Registry& registry) {
  std::vector<PlannedPoint> out;
  for (const auto& params : points) {
    PlannedPoint p;
    p.point.params = params;
    p.point.id = analysis::point_id(spec.base, params);
    std::vector<std::string> sets = spec.base.sets;
    for (const auto& [k, v] : params) sets.push_back(k + "=" + v);
    if (spec.base.seed >= 0) sets.push_back("seed=" + std::to_string(spec.base.seed));
    if (spec.base.replicas > 0) sets.push_back("replicas=" + std::to_string(spec.base.replicas));
    try {
      // A field some point reads is not ignored (a grid over policy.stack): refused below
      // only when no point reads it.
      p.scenario = scenarios::load_scenario(spec.scenario_path, sets, registry,
                                            {.refuse_unread_fields = false});
    } catch (const scenarios::ScenarioError& e) {
      if (params.empty()) throw;
      throw scenarios::ScenarioError(std::string(e.what()) + " (sweep point " +
                                     assignment_text(params) + ")");
    }
    out.push_back(std::move(p));
  }
  std::vector<const scenarios::Scenario*> runs;
  std::vector<std::string> labels;  // each point's assignments, PATH=VALUE+PATH=VALUE
  for (const auto& p : out) {
    runs.push_back(&p.scenario);
    std::string label;
    for (const auto& [k, v] : p.point.params) label += (label.empty() ? "" : "+") + k + "=" + v;
    labels.push_back(label.empty() ? "the base scenario" : label);
  }
  scenarios::refuse_unread_by_all(runs, labels);
  return out;
}

std::vector<PlannedPoint> make_plan(SweepSpec& spec, const Registry& registry) {
  try {
    spec.base.scenario_text = read_file(spec.scenario_path);
  } catch (const std::runtime_error&) {
    throw scenarios::ScenarioError(spec.scenario_path + ": cannot open file");
  }
  for (const auto& a : spec.axes)
    for (const auto& k : a.keys)
      if ((k == "seed" && spec.base.seed >= 0) || (k == "replicas" && spec.base.replicas > 0))
        throw analysis::PlanError("--" + k + " and a sweep over " + k + " contradict each other");
  std::vector<analysis::Assignment> params;
  for (auto& p : analysis::expand(spec.base, spec.axes)) params.push_back(std::move(p.params));
  return plan_points(spec, params, registry);
}

SweepStore::SweepStore(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  fs::create_directories(fs::path(dir_) / "points", ec);
  if (ec) throw std::runtime_error(dir_ + "/points: " + ec.message());
}

std::string SweepStore::point_dir(const PlannedPoint& p) const {
  return (fs::path(dir_) / "points" / p.point.id).string();
}

bool SweepStore::done(const PlannedPoint& p) const {
  return fs::exists(fs::path(point_dir(p)) / "result.json");
}

std::vector<std::pair<int, int>> SweepStore::pending(const PlannedPoint& p) const {
  const int n = p.scenario.replicas;
  std::vector<bool> have(n, false);
  for (const auto& c : list_chunks(point_dir(p)))
    for (int r = std::max(0, c.first); r < std::min(n, c.last); ++r) have[r] = true;
  std::vector<std::pair<int, int>> out;
  for (int r = 0; r < n;) {
    if (have[r]) {
      ++r;
      continue;
    }
    int e = r;
    while (e < n && !have[e]) ++e;
    out.emplace_back(r, e);
    r = e;
  }
  return out;
}

json SweepStore::result(const PlannedPoint& p) const {
  const std::string path = (fs::path(point_dir(p)) / "result.json").string();
  try {
    return json::parse(read_file(path));
  } catch (const json::exception& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

void SweepStore::describe(const PlannedPoint& p, const std::string& scenario_path) const {
  ordered_json j;
  j["id"] = p.point.id;
  ordered_json params = ordered_json::object();
  for (const auto& [k, v] : p.point.params) params[k] = param_value(v);
  j["params"] = params;
  j["scenario"] = scenario_path;
  j["seed"] = p.scenario.seed;
  j["replicas"] = p.scenario.replicas;
  const fs::path dir = point_dir(p);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error(dir.string() + ": " + ec.message());
  if (!fs::exists(dir / "point.json")) write_atomic(dir / "point.json", j.dump(2) + "\n");
}

json SweepStore::finish(const PlannedPoint& p) const {
  const fs::path dir = point_dir(p);
  const int n = p.scenario.replicas;
  std::vector<ReplicaResult> rs(n);
  std::vector<bool> have(n, false);
  const auto chunks = list_chunks(dir);
  for (const auto& c : chunks)
    for (auto& [replica, bytes] : read_chunk(c.path)) {
      if (replica >= static_cast<std::uint64_t>(n) || have[replica]) continue;
      try {
        rs[replica] = decode(bytes);
      } catch (const std::runtime_error& e) {
        throw std::runtime_error(c.path.string() + ": replica " + std::to_string(replica) + ": " +
                                 e.what());
      }
      have[replica] = true;
    }
  for (int r = 0; r < n; ++r)
    if (!have[r])
      throw std::runtime_error(dir.string() + ": replica " + std::to_string(r) + " is missing");

  json result = aggregate(p.scenario, rs, 0);
  result.erase("wall_s");  // the only field that differs between identical runs
  json params = json::object();
  for (const auto& [k, v] : p.point.params) params[k] = param_value(v);
  result["sweep_point"] = {{"id", p.point.id}, {"params", params}};
  const auto& names = metric_names();
  std::vector<std::vector<double>> per(names.size());
  for (const auto& r : rs) {
    const auto m = replica_metrics(r, p.scenario);
    for (size_t i = 0; i < names.size(); ++i) per[i].push_back(m[i]);
  }
  json metrics = json::object(), per_replica = json::object();
  auto add_metric = [&](const std::string& name, const std::vector<double>& xs) {
    const Summary s = summarize(xs);
    metrics[name] = {{"mean", s.mean}, {"lo", s.lo}, {"hi", s.hi}};
    per_replica[name] = xs;
  };
  for (size_t i = 0; i < names.size(); ++i) add_metric(names[i], per[i]);
  if (p.scenario.costs) {  // the cost metrics (sim/costs.h), only with the scenario's costs
    const auto& cnames = cost_metric_names();
    std::vector<std::vector<double>> cper(cnames.size());
    for (const auto& r : rs) {
      const auto m = cost_metrics(replica_cost(*p.scenario.costs, p.scenario, r));
      for (size_t i = 0; i < cnames.size(); ++i) cper[i].push_back(m[i]);
    }
    for (size_t i = 0; i < cnames.size(); ++i) add_metric(cnames[i], cper[i]);
  }
  // A job of fixed work: each replica's time to train in days, null when the cap stopped it
  // first (the paired differences of --baseline use the replicas both points finished).
  if (p.scenario.job.work_days > 0) {
    json days = json::array();
    for (const auto& r : rs) days.push_back(r.finished ? json(r.elapsed_s / 86400) : json(nullptr));
    per_replica["time_to_train_days"] = days;
  }
  result["metrics"] = metrics;
  result["per_replica"] = per_replica;
  write_atomic(dir / "result.json", result.dump(1) + "\n");
  for (const auto& c : chunks) fs::remove(c.path);
  return result;
}

std::vector<WorkItem> pending_items(const std::vector<PlannedPoint>& points,
                                    const SweepStore& store, int jobs) {
  std::vector<WorkItem> items;
  for (size_t i = 0; i < points.size(); ++i) {
    if (store.done(points[i])) continue;
    for (const auto& [a, b] : store.pending(points[i]))
      items.push_back({static_cast<int>(i), a, b});
  }
  return split_items(std::move(items), jobs);
}

std::vector<WorkItem> split_items(std::vector<WorkItem> items, int jobs) {
  while (static_cast<int>(items.size()) < jobs) {
    auto it = std::max_element(
        items.begin(), items.end(),
        [](const WorkItem& x, const WorkItem& y) { return x.last - x.first < y.last - y.first; });
    if (it == items.end() || it->last - it->first < 2) break;
    const int mid = it->first + (it->last - it->first) / 2;
    WorkItem second{it->point, mid, it->last};
    it->last = mid;
    items.insert(it + 1, second);
  }
  return items;
}

void execute(const std::vector<PlannedPoint>& points, const std::vector<WorkItem>& items,
             const Registry& registry, const SweepStore& store, const ExecOptions& opt) {
  if (items.empty()) return;
  long long total = 0;
  for (const auto& it : items) total += it.last - it.first;
  // Points whose replicas are all computed: those with no item, then each as its last
  // item ends.
  std::vector<int> left(points.size(), 0);
  for (const auto& it : items) ++left[static_cast<std::size_t>(it.point)];
  const auto npoints = static_cast<long long>(points.size());
  long long points_done = std::count(left.begin(), left.end(), 0);
  if (opt.on_points) opt.on_points(points_done, npoints);
  if (opt.on_progress) opt.on_progress(0, total);
  ForkPoolOptions pool{opt.jobs, nullptr, {}};
  if (opt.on_progress)
    pool.on_tick = [&](long long done) { opt.on_progress(std::min(done, total), total); };
  fork_pool(
      items.size(), pool,
      [&](std::size_t i, const std::function<void()>& tick) {
        const WorkItem& it = items[i];
        const PlannedPoint& p = points[it.point];
        run_chunk(p, it.first, it.last, registry,
                  fs::path(store.point_dir(p)) / ("chunk-" + std::to_string(it.first) + "-" +
                                                  std::to_string(it.last) + ".bin"),
                  tick);
        return std::vector<std::uint8_t>{};
      },
      [&](std::size_t i, std::vector<std::uint8_t>) {
        if (--left[static_cast<std::size_t>(items[i].point)] == 0 && opt.on_points)
          opt.on_points(++points_done, npoints);
      },
      [&](std::size_t i) {
        const WorkItem& it = items[i];
        return "sweep point " + assignment_text(points[it.point].point.params) + ", replicas " +
               std::to_string(it.first) + ".." + std::to_string(it.last - 1);
      });
  if (opt.on_progress) opt.on_progress(total, total);
}

std::vector<json> run_points(const std::vector<PlannedPoint>& points, const Registry& registry,
                             const SweepStore& store, const ExecOptions& opt) {
  const auto items = pending_items(points, store, opt.jobs);
  std::vector<bool> touched(points.size(), false);
  for (const auto& it : items) {
    if (!touched[it.point]) store.describe(points[it.point], points[it.point].scenario.file);
    touched[it.point] = true;
  }
  execute(points, items, registry, store, opt);
  std::vector<json> out;
  for (const auto& p : points) {
    out.push_back(store.done(p) ? store.result(p) : store.finish(p));
    for (const auto& m : metric_names())
      if (!out.back().contains("metrics") || !out.back()["metrics"].contains(m) ||
          !out.back().contains("per_replica") || !out.back()["per_replica"].contains(m))
        throw std::runtime_error(store.point_dir(p) + "/result.json: has no metric " + m +
                                 " (an older faultline wrote it): sweep into a new --out DIR");
  }
  return out;
}

namespace {

// The metrics of the table: metric_names(), and the cost metrics when every point has them
// (its scenario has costs).
std::vector<std::string> table_metrics(const std::vector<json>& results) {
  std::vector<std::string> names = metric_names();
  bool costs = !results.empty();
  for (const auto& r : results) costs = costs && r["metrics"].contains("cost");
  if (costs)
    for (const auto& m : cost_metric_names()) names.push_back(m);
  return names;
}

std::vector<std::string> param_keys(const SweepSpec& spec,
                                    const std::vector<PlannedPoint>& points) {
  std::vector<std::string> keys;
  for (const auto& a : spec.axes)
    for (const auto& k : a.keys) keys.push_back(k);
  if (keys.empty() && !points.empty())
    for (const auto& [k, v] : points[0].point.params) keys.push_back(k);
  return keys;
}

std::string value_of(const PlannedPoint& p, const std::string& key) {
  for (const auto& [k, v] : p.point.params)
    if (k == key) return v;
  return "";
}

// A point's per-replica values of `metric` (result.json's per_replica; null: NaN).
std::vector<double> per_replica(const json& result, const std::string& metric) {
  std::vector<double> out;
  for (const auto& x : result["per_replica"][metric])
    out.push_back(x.is_number() ? x.get<double>() : std::nan(""));
  return out;
}

// A point against the baseline point on the same replicas (common random numbers): for
// every metric the mean and 95% CI of the per-replica differences (paired); for ETTR also
// the CI an unpaired comparison of the same replicas would give (difference of the means,
// Student t with 2n - 2 degrees of freedom, pooled standard error) and the shares of
// replicas where the point's ETTR is above, equal to or below the baseline's; for a job of
// fixed work the paired difference of the time to train in days, over the replicas both
// finished. The fields and their meaning are sim compare's vs_baseline.
ordered_json vs_baseline(const json& a, const json& b) {
  ordered_json out;
  const std::vector<double> ea = per_replica(a, "ettr"), eb = per_replica(b, "ettr");
  const std::size_t n = std::min(ea.size(), eb.size());
  std::size_t wins = 0, ties = 0;
  for (std::size_t i = 0; i < n; ++i) {
    wins += ea[i] > eb[i];
    ties += ea[i] == eb[i];
  }
  const double share = n > 0 ? 1.0 / static_cast<double>(n) : 0;
  out["replicas"] = n;
  ordered_json diff = ordered_json::object();
  for (const auto& m : metric_names()) {
    const std::vector<double> xa = per_replica(a, m), xb = per_replica(b, m);
    std::vector<double> d;
    for (std::size_t i = 0; i < std::min(xa.size(), xb.size()); ++i) d.push_back(xa[i] - xb[i]);
    const Summary s = summarize(d);
    diff[m] = {{"mean", s.mean}, {"lo", s.lo}, {"hi", s.hi}};
  }
  const Summary sa = summarize({ea.begin(), ea.begin() + static_cast<std::ptrdiff_t>(n)}),
                sb = summarize({eb.begin(), eb.begin() + static_cast<std::ptrdiff_t>(n)});
  const double se =
      n > 1 ? std::sqrt((sa.stddev * sa.stddev + sb.stddev * sb.stddev) / static_cast<double>(n))
            : 0;
  const double half = n > 1 ? traces::student_t95(2 * n - 2) * se : 0;
  const double mean = diff["ettr"]["mean"].get<double>();
  out["mean"] = mean;
  out["ci95"] = {diff["ettr"]["lo"], diff["ettr"]["hi"]};
  out["unpaired_ci95"] = {mean - half, mean + half};
  out["wins"] = static_cast<double>(wins) * share;
  out["ties"] = static_cast<double>(ties) * share;
  out["losses"] = static_cast<double>(n - wins - ties) * share;
  if (a["per_replica"].contains("time_to_train_days") &&
      b["per_replica"].contains("time_to_train_days")) {
    const std::vector<double> ta = per_replica(a, "time_to_train_days"),
                              tb = per_replica(b, "time_to_train_days");
    std::vector<double> dt;
    for (std::size_t i = 0; i < std::min(ta.size(), tb.size()); ++i)
      if (!std::isnan(ta[i]) && !std::isnan(tb[i])) dt.push_back(ta[i] - tb[i]);
    if (!dt.empty()) {
      const Summary t = summarize(dt);
      out["time_to_train_days"] = {
          {"replicas", dt.size()}, {"mean", t.mean}, {"ci95", {t.lo, t.hi}}};
    }
  }
  out["metrics"] = diff;
  return out;
}

// A number of the CSV; empty for null (a quantile a censored replica reaches).
std::string csv_number(const json& x) {
  return x.is_number() ? analysis::format_double(x.get<double>()) : "";
}

// Whether any point is a job of fixed work (its result has a time_to_train).
bool any_time_to_train(const std::vector<json>& results) {
  for (const auto& r : results)
    if (r.contains("time_to_train")) return true;
  return false;
}

// The time-to-train columns of sweep.csv, in order: (column, path into time_to_train).
const std::vector<std::pair<std::string, std::vector<std::string>>>& time_to_train_columns() {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> cols = {
      {"time_to_train_days_mean", {"mean"}},
      {"time_to_train_days_lo", {"ci95", "0"}},
      {"time_to_train_days_hi", {"ci95", "1"}},
      {"time_to_train_days_p50", {"p50"}},
      {"time_to_train_days_p50_lo", {"p50_ci95", "0"}},
      {"time_to_train_days_p50_hi", {"p50_ci95", "1"}},
      {"time_to_train_days_p90", {"p90"}},
      {"time_to_train_days_p90_lo", {"p90_ci95", "0"}},
      {"time_to_train_days_p90_hi", {"p90_ci95", "1"}},
      {"time_to_train_days_p99", {"p99"}},
      {"time_to_train_days_p99_lo", {"p99_ci95", "0"}},
      {"time_to_train_days_p99_hi", {"p99_ci95", "1"}},
      {"time_to_train_censored", {"censored"}}};
  return cols;
}

json at_path(const json& x, const std::vector<std::string>& path) {
  const json* cur = &x;
  for (const auto& k : path) {
    if (cur->is_array()) {
      const std::size_t i = static_cast<std::size_t>(std::stoul(k));
      if (i >= cur->size()) return nullptr;
      cur = &(*cur)[i];
    } else if (cur->is_object() && cur->contains(k)) {
      cur = &(*cur)[k];
    } else {
      return nullptr;
    }
  }
  return *cur;
}

}  // namespace

int find_point(const SweepSpec& spec, const std::vector<PlannedPoint>& points,
               const std::string& text) {
  const auto keys = param_keys(spec, points);
  std::string all;
  for (const auto& k : keys) all += (all.empty() ? "" : ", ") + k;
  std::vector<std::pair<std::string, json>> want;  // (full key, value)
  std::stringstream ss(text);
  for (std::string part; std::getline(ss, part, '+');) {
    const auto eq = part.find('=');
    if (eq == std::string::npos || eq == 0)
      throw analysis::PlanError("--baseline " + text +
                                ": expected KEY=VALUE[+KEY=VALUE...], got '" + part +
                                "' (swept: " + all + ")");
    const std::string key = part.substr(0, eq);
    std::vector<std::string> hits;  // the swept keys it names: the whole path or its last part
    for (const auto& k : keys)
      if (k == key ||
          (k.size() > key.size() && k.compare(k.size() - key.size(), key.size(), key) == 0 &&
           k[k.size() - key.size() - 1] == '.'))
        hits.push_back(k);
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) hits = {key};
    if (hits.size() != 1)
      throw analysis::PlanError(
          "--baseline " + text + ": " + key +
          (hits.empty() ? " is not a swept field" : " names several swept fields") +
          " (swept: " + all + ")");
    want.emplace_back(hits[0], param_value(part.substr(eq + 1)));
  }
  std::vector<int> found;
  for (std::size_t i = 0; i < points.size(); ++i) {
    bool match = true;
    for (const auto& [k, v] : want) match = match && param_value(value_of(points[i], k)) == v;
    if (match) found.push_back(static_cast<int>(i));
  }
  if (found.size() == 1) return found[0];
  throw analysis::PlanError("--baseline " + text +
                            (found.empty() ? ": no point of the grid has these values"
                                           : ": " + std::to_string(found.size()) +
                                                 " points have these values; give a value of "
                                                 "every swept field") +
                            " (swept: " + all + ")");
}

std::string sweep_csv(const SweepSpec& spec, const std::vector<PlannedPoint>& points,
                      const std::vector<json>& results) {
  const auto keys = param_keys(spec, points);
  const bool ttt = any_time_to_train(results);
  const bool base = spec.baseline >= 0 && spec.baseline < static_cast<int>(results.size());
  std::string out;
  for (const auto& k : keys) out += analysis::csv_field(k) + ",";
  out += "replicas";
  const std::vector<std::string> metrics = table_metrics(results);
  for (const auto& m : metrics) out += "," + m + "_mean," + m + "_lo," + m + "_hi";
  if (ttt)
    for (const auto& col : time_to_train_columns()) out += "," + col.first;
  if (base) {
    for (const auto& m : metric_names())
      out += "," + m + "_diff_mean," + m + "_diff_lo," + m + "_diff_hi";
    out += ",ettr_diff_unpaired_lo,ettr_diff_unpaired_hi,wins,ties,losses";
    if (ttt)
      out += ",time_to_train_days_diff_mean,time_to_train_days_diff_lo,time_to_train_days_diff_hi";
  }
  out += "\n";
  for (size_t i = 0; i < points.size(); ++i) {
    for (const auto& k : keys) out += analysis::csv_field(value_of(points[i], k)) + ",";
    out += std::to_string(points[i].scenario.replicas);
    const json& ms = results[i]["metrics"];
    for (const auto& m : metrics)
      for (const char* f : {"mean", "lo", "hi"})
        out += "," + analysis::format_double(ms[m][f].get<double>());
    if (ttt) {
      const json t = results[i].contains("time_to_train") ? results[i]["time_to_train"] : json();
      for (const auto& col : time_to_train_columns())
        out += "," + csv_number(at_path(t, col.second));
    }
    if (base) {
      const ordered_json v =
          vs_baseline(results[i], results[static_cast<std::size_t>(spec.baseline)]);
      for (const auto& m : metric_names())
        for (const char* f : {"mean", "lo", "hi"})
          out += "," + analysis::format_double(v["metrics"][m][f].get<double>());
      for (const auto& x :
           {v["unpaired_ci95"][0], v["unpaired_ci95"][1], v["wins"], v["ties"], v["losses"]})
        out += "," + analysis::format_double(x.get<double>());
      if (ttt && v.contains("time_to_train_days")) {
        const ordered_json& t = v["time_to_train_days"];
        for (const auto& x : {t["mean"], t["ci95"][0], t["ci95"][1]})
          out += "," + analysis::format_double(x.get<double>());
      } else if (ttt) {
        out += ",,,";
      }
    }
    out += "\n";
  }
  return out;
}

ordered_json sweep_json(const SweepSpec& spec, const std::vector<PlannedPoint>& points,
                        const std::vector<json>& results) {
  const bool base = spec.baseline >= 0 && spec.baseline < static_cast<int>(results.size());
  ordered_json j;
  j["scenario"] = spec.scenario_path;
  j["scenario_name"] = points.empty() ? "" : points[0].scenario.name;
  j["sets"] = spec.base.sets;
  ordered_json axes = ordered_json::array();
  for (const auto& a : spec.axes) {
    ordered_json values = ordered_json::array();
    for (const auto& v : a.values) {
      ordered_json row = ordered_json::array();
      for (const auto& x : v) row.push_back(ordered_json(param_value(x)));
      values.push_back(row);
    }
    axes.push_back({{"keys", a.keys}, {"values", values}});
  }
  j["axes"] = axes;
  const std::vector<std::string> metrics = table_metrics(results);
  j["metrics"] = metrics;
  if (base) {
    const auto& bp = points[static_cast<std::size_t>(spec.baseline)];
    ordered_json params = ordered_json::object();
    for (const auto& [k, v] : bp.point.params) params[k] = ordered_json(param_value(v));
    j["baseline"] = {{"index", spec.baseline}, {"id", bp.point.id}, {"params", params}};
  }
  ordered_json rows = ordered_json::array();
  for (size_t i = 0; i < points.size(); ++i) {
    const auto& p = points[i];
    const json& r = results[i];
    ordered_json row;
    row["id"] = p.point.id;
    ordered_json params = ordered_json::object();
    for (const auto& [k, v] : p.point.params) params[k] = ordered_json(param_value(v));
    row["params"] = params;
    row["policy"] = p.scenario.policy;
    row["seed"] = p.scenario.seed;
    row["replicas"] = p.scenario.replicas;
    ordered_json ms = ordered_json::object();
    for (const auto& m : metrics) {
      const json& x = r["metrics"][m];
      ms[m] = {{"mean", x["mean"].get<double>()},
               {"lo", x["lo"].get<double>()},
               {"hi", x["hi"].get<double>()}};
    }
    row["metrics"] = ms;
    // What sim compare shows of a stack beside the metrics, as its JSON names it.
    for (const char* k :
         {"ettr", "time_to_train", "resolved_by_per_replica", "evictions", "max_fruitless_rounds",
          "standby_exhaustions_per_replica", "remote_checkpoint_fallbacks_per_replica"})
      if (r.contains(k)) row[k] = ordered_json::parse(r[k].dump());
    if (base && static_cast<int>(i) != spec.baseline)  // as sim compare: none on the baseline
      row["vs_baseline"] = vs_baseline(r, results[static_cast<std::size_t>(spec.baseline)]);
    row["result"] = "points/" + p.point.id + "/result.json";
    rows.push_back(row);
  }
  j["points"] = rows;
  return j;
}

std::string sweep_table(const SweepSpec& spec, const std::vector<PlannedPoint>& points,
                        const std::vector<json>& results) {
  const auto keys = param_keys(spec, points);
  const bool base = spec.baseline >= 0 && spec.baseline < static_cast<int>(results.size());
  std::vector<std::string> heads;
  for (const auto& k : keys) {
    const auto dot = k.rfind('.');
    heads.push_back(dot == std::string::npos ? k : k.substr(dot + 1));
  }
  std::vector<size_t> width;
  for (size_t c = 0; c < keys.size(); ++c) {
    size_t w = heads[c].size();
    for (const auto& p : points) w = std::max(w, value_of(p, keys[c]).size());
    width.push_back(w);
  }
  std::ostringstream o;
  o << std::fixed;
  for (size_t c = 0; c < keys.size(); ++c)
    o << std::setw(static_cast<int>(width[c])) << heads[c] << "  ";
  o << "    ETTR %   95% CI            unproductive h  incidents";
  if (base) o << "   paired diff, pts [95% CI]   won/tied/lost %";
  o << "\n";
  for (size_t i = 0; i < points.size(); ++i) {
    for (size_t c = 0; c < keys.size(); ++c)
      o << std::setw(static_cast<int>(width[c])) << value_of(points[i], keys[c]) << "  ";
    const json& m = results[i]["metrics"];
    o << std::setprecision(3) << std::setw(10) << 100 * m["ettr"]["mean"].get<double>() << "   ["
      << std::setw(6) << 100 * m["ettr"]["lo"].get<double>() << ", " << std::setw(6)
      << 100 * m["ettr"]["hi"].get<double>() << "]" << std::setprecision(1) << std::setw(16)
      << m["unproductive_s"]["mean"].get<double>() / 3600 << std::setw(11)
      << m["incidents"]["mean"].get<double>();
    if (base && static_cast<int>(i) == spec.baseline) {
      o << "   baseline";
    } else if (base) {
      const ordered_json v =
          vs_baseline(results[i], results[static_cast<std::size_t>(spec.baseline)]);
      char cell[96];
      std::snprintf(cell, sizeof cell, "   %+7.3f [%+7.3f, %+7.3f]   %3.0f/%3.0f/%3.0f",
                    100 * v["mean"].get<double>(), 100 * v["ci95"][0].get<double>(),
                    100 * v["ci95"][1].get<double>(), 100 * v["wins"].get<double>(),
                    100 * v["ties"].get<double>(), 100 * v["losses"].get<double>());
      o << cell;
    }
    o << "\n";
  }
  return o.str();
}

}  // namespace faultline::sim
