#include "traces/model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "traces/config.h"

namespace faultline::traces {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

double round_sig(double v, int digits) {
  if (!std::isfinite(v) || v == 0) return v;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return std::strtod(buf, nullptr);
}

int fleet_of(const Trace& t, int override_nodes) {
  if (override_nodes > 0) return override_nodes;
  if (t.fleet_nodes > 0) return t.fleet_nodes;
  return static_cast<int>(t.nodes.size());
}

// Scenario keys in the order a person would read them.
const char* kKeyOrder[] = {"name",
                           "class",
                           "rate_per_machine_day",
                           "rate_per_job_day",
                           "weibull_shape",
                           "lognormal_sigma",
                           "scope",
                           "symptom",
                           "persistent",
                           "code_bug",
                           "fix_h",
                           "repair_h",
                           "observe_after_s",
                           "slowdown_factor",
                           "duration_s",
                           "alert",
                           "alert_coverage",
                           "signature",
                           "exit_code"};

ordered_json ordered(const json& c) {
  ordered_json o;
  for (const char* k : kKeyOrder)
    if (c.contains(k)) o[k] = c[k];
  for (auto it = c.begin(); it != c.end(); ++it)
    if (!o.contains(it.key())) o[it.key()] = it.value();
  return o;
}

}  // namespace

std::string SchemaRange::text() const {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%c%.15g, %.15g]", lo_open ? '(' : '[', lo, hi);
  return buf;
}

std::string ModelField::outside() const {
  if (within()) return "";
  char buf[192];
  std::snprintf(buf, sizeof buf, "%s %.4g is outside the scenario schema's %s", range->key, fitted,
                range->text().c_str());
  return buf;
}

ModelField model_field(const Dist& d) {
  ModelField f;
  switch (d.family) {
    case Family::kExponential:
      return f;
    case Family::kWeibull:
      f.range = &kWeibullShapeRange;
      f.fitted = d.a;
      break;
    case Family::kLognormal:
      f.range = &kLognormalSigmaRange;
      f.fitted = d.b;
      break;
  }
  f.written = round_sig(f.fitted, 3);
  return f;
}

FaultModel fault_model(const Trace& t, const CategoryMap& map, const ModelOptions& opt) {
  FaultModel out;
  const int fleet = fleet_of(t, opt.nodes);
  auto [w0, w1] = t.observation_window();
  const double days = (w1 - w0) / 86400.0;
  const PairingResult p = pair_faults(t);
  const MappedFaults mf = map_faults(t, p.faults, map);
  auto note = [&](std::string s) { out.notes.push_back(std::move(s)); };
  if (mf.unmapped)
    note(std::to_string(mf.unmapped) + " faults match no rule of " + map.file +
         " and are left out");
  if (mf.scope_mismatch)
    note(std::to_string(mf.scope_mismatch) +
         " rack/switch/job-scope faults map to a narrower category and are left out");
  if (mf.merged)
    note(std::to_string(mf.merged) + " per-node records of rack/switch/job incidents merged");
  note("rates: faults per fleet node-day, fleet " + std::to_string(fleet) + " nodes over " +
       std::to_string(days).substr(0, std::to_string(days).find('.') + 3) + " days");
  ordered_json cats = ordered_json::array();
  for (std::size_t c = 0; c < map.categories.size(); ++c) {
    json cat = map.categories[c];
    const std::string who = "category \"" + map.names[c] + "\": ";
    // A value the loader would refuse: say so, write nothing.
    auto check = [&](const SchemaRange& r, double fitted, double written, const char* what) {
      if (r.contains(written)) return true;
      char buf[256];
      std::snprintf(buf, sizeof buf, "%s %.4g (%s) is outside the scenario schema's %s", r.key,
                    fitted, what, r.text().c_str());
      out.refused.push_back(who + buf);
      return false;
    };
    std::vector<char> sel(p.faults.size(), 0);
    std::size_t count = 0;
    std::vector<double> repair;
    for (std::size_t i = 0; i < p.faults.size(); ++i)
      if (mf.category[i] == static_cast<int>(c)) {
        sel[i] = 1;
        ++count;
        if (!p.faults[i].open()) repair.push_back(p.faults[i].duration_s() / 3600.0);
      }
    const double rate = fleet > 0 && days > 0 ? static_cast<double>(count) / (fleet * days) : 0;
    cat["rate_per_machine_day"] = round_sig(rate, 4);
    check(kRateRange, rate, round_sig(rate, 4), "its faults per fleet node-day");
    cat.erase("weibull_shape");
    cat.erase("lognormal_sigma");
    if (map.scopes[c] != Scope::kNode && count > 0)
      note(map.names[c] + ": " + (map.scopes[c] == Scope::kRack ? "rack" : "job") +
           "-scope incidents, no per-node gaps to fit: the exponential, one parameter");
    if (map.scopes[c] == Scope::kNode && count > 0) {
      // The fit report's test on the same sample picks the family (FitSet::recommended):
      // the note is its recommendation line, so the text and the file say the same.
      const FitSet fs = fit_all(tbf_sample_days(t, p.faults, fleet, sel));
      const std::string name = map.names[c] + ": ";
      const FitResult* r = fs.recommended();
      if (fs.observed < opt.min_samples || !r) {
        note(name + std::to_string(fs.observed) + " observed gap" + (fs.observed == 1 ? "" : "s") +
             ", fewer than " + std::to_string(opt.min_samples) +
             ": the exponential, one parameter");
      } else {
        const ModelField f = model_field(r->dist);
        if (f.range && check(*f.range, f.fitted, f.written, "fitted to its times between failures"))
          cat[f.range->key] = f.written;
        note(name + fs.lr.recommendation);
      }
    }
    if (!repair.empty()) {
      double sum = 0;
      for (double r : repair) sum += r;
      const double mean = sum / static_cast<double>(repair.size());
      cat["repair_h"] = round_sig(mean, 4);
      check(kRepairRange, mean, round_sig(mean, 4), "its mean repair time");
    }
    cats.push_back(ordered(cat));
  }
  if (out.ok()) out.model = ordered_json{{"categories", cats}};
  return out;
}

// ---------------------------------------------------------------- published mixes

namespace {

struct MixRow {
  const char* name;
  const char* cls;
  const char* symptom;
  const char* scope;
  bool persistent;
  int count;
  const char* alert;
  double observe_after_s;
  double repair_h;         // 0 = the scenario default
  double slowdown_factor;  // 0 = not a slowdown
  int exit_code;           // 0 = the scenario default
  const char* signature;
};

// ByteRobust (SOSP'25) Table 1: incidents over three months on ByteDance's production
// platform, 55,365 in all. Symptom, scope and persistence are our reading of each row.
const MixRow kByteRobustTable1[] = {
    {"cuda_error", "explicit", "crash", "machine", true, 19968, "gpu", 10, 48, 0, 0,
     "RuntimeError: CUDA error: an illegal memory access was encountered"},
    {"cpu_overload", "explicit", "crash", "machine", false, 6095, "host", 10, 0, 0, 0,
     "RuntimeError: DataLoader timed out after 600 seconds"},
    {"cpu_oom", "explicit", "crash", "machine", false, 5567, "host", 10, 0, 0, 137,
     "Out of memory: Killed process 4242 (python3)"},
    {"disk_full", "explicit", "crash", "machine", false, 2755, "host", 10, 0, 0, 0,
     "OSError: [Errno 28] No space left on device"},
    {"infiniband", "explicit", "crash", "machine", true, 1599, "nic", 30, 24, 0, 0,
     "NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129"},
    {"filesystem_mount", "explicit", "crash", "machine", false, 1176, "storage", 10, 0, 0, 0,
     "OSError: [Errno 107] Transport endpoint is not connected: '/mnt/fs'"},
    {"hdfs_error", "explicit", "crash", "job", false, 1104, "storage", 30, 0, 0, 0,
     "OSError: [Errno 5] Input/output error: '/mnt/hdfs/dataset/shard-00731'"},
    {"container_error", "explicit", "crash", "machine", false, 781, "host", 10, 0, 0, 0,
     "OCI runtime exec failed: container not running"},
    {"os_kernel_panic", "explicit", "crash", "machine", true, 203, "host", 10, 4, 0, 0,
     "Kernel panic - not syncing: Fatal exception"},
    {"gpu_memory_error", "explicit", "crash", "machine", true, 188, "gpu", 10, 72, 0, 0,
     "NVRM: Xid (PCI:0000:1b:00): 48, An uncorrectable double bit error (DBE) has been detected"},
    {"external_service", "explicit", "crash", "job", false, 128, "", 30, 0, 0, 0,
     "ConnectionError: external service unavailable"},
    {"gpu_unavailable", "explicit", "crash", "machine", true, 76, "gpu", 10, 72, 0, 0,
     "NVRM: Xid (PCI:0000:1b:00): 79, GPU has fallen off the bus"},
    {"disk_fault", "explicit", "crash", "machine", true, 47, "host", 10, 48, 0, 0,
     "blk_update_request: I/O error, dev nvme0n1, sector 0"},
    {"job_hang", "implicit", "hang", "machine", true, 5506, "", 0, 24, 0, 0, ""},
    {"mfu_decline", "implicit", "slowdown", "machine", true, 442, "", 0, 24, 1.3, 0, ""},
    {"nan_value", "implicit", "nan", "machine", true, 148, "", 20, 72, 0, 0,
     "RuntimeError: Rank 0: found NaN in local grad norm"},
    {"code_data_adjustment", "manual", "manual", "job", false, 9582, "", 0, 0, 0, 0, ""},
};

// Llama 3 405B's pre-training (The Llama 3 Herd of Models, arXiv 2407.21783, Table 5): 419
// unexpected interruptions in 54 days on 16,384 H100 GPUs, 2,048 machines of 8, by root
// cause, one category per row in the table's order. Each row is a scenario category without
// its rate, and its count; traces/models/README.md gives each choice and why. The fields
// follow scenarios/llama3-16k.json, which groups the same rows into 11 categories.
constexpr const char* kLlama3Table5 = R"JSON([
  {"count": 148, "name": "faulty_gpu", "class": "explicit", "scope": "machine", "symptom": "crash",
   "persistent": true, "repair_h": 48, "observe_after_s": 60, "alert": "gpu", "alert_coverage": 0.71,
   "signature": "RuntimeError: CUDA error: an illegal memory access was encountered"},
  {"count": 72, "name": "gpu_hbm3", "class": "explicit", "scope": "machine", "symptom": "crash",
   "persistent": true, "repair_h": 72, "observe_after_s": 60, "alert": "gpu", "alert_coverage": 0.71,
   "signature": "RuntimeError: CUDA error: uncorrectable ECC error encountered"},
  {"count": 54, "name": "software_bug", "class": "explicit", "scope": "job", "symptom": "crash",
   "code_bug": true, "fix_h": 4, "observe_after_s": 60,
   "signature": "AssertionError: expected a contiguous tensor in the pipeline send buffer"},
  {"count": 35, "name": "network_switch_cable", "class": "explicit", "scope": "machine",
   "symptom": "crash", "persistent": true, "repair_h": 24, "observe_after_s": 60, "alert": "nic",
   "signature": "NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129"},
  {"count": 32, "name": "host_maintenance", "class": "explicit", "scope": "machine",
   "symptom": "crash", "persistent": true, "repair_h": 12, "observe_after_s": 60, "alert": "host",
   "signature": "torch.distributed.DistNetworkError: Connection reset by peer"},
  {"count": 19, "name": "gpu_sram", "class": "explicit", "scope": "machine", "symptom": "crash",
   "persistent": true, "repair_h": 72, "observe_after_s": 60, "alert": "gpu", "alert_coverage": 0.71,
   "signature": "NVRM: Xid (PCI:0000:1b:00): 48, An uncorrectable double bit error (DBE) has been detected"},
  {"count": 17, "name": "gpu_system_processor", "class": "explicit", "scope": "machine",
   "symptom": "crash", "persistent": true, "repair_h": 72, "observe_after_s": 60, "alert": "gpu",
   "alert_coverage": 0.71,
   "signature": "NVRM: Xid (PCI:0000:1b:00): 119, Timeout waiting for RPC from GSP"},
  {"count": 7, "name": "nic", "class": "explicit", "scope": "machine", "symptom": "crash",
   "persistent": true, "repair_h": 24, "observe_after_s": 60, "alert": "nic",
   "signature": "NCCL WARN NET/IB : mlx5_0:1 port down"},
  {"count": 7, "name": "nccl_watchdog", "class": "implicit", "scope": "machine", "symptom": "hang",
   "persistent": false, "duration_s": 0, "repair_h": 24},
  {"count": 6, "name": "silent_data_corruption", "class": "implicit", "scope": "machine",
   "symptom": "nan", "persistent": true, "repair_h": 72, "observe_after_s": 20,
   "signature": "RuntimeError: Rank 0: found NaN in local grad norm"},
  {"count": 6, "name": "gpu_thermal", "class": "explicit", "scope": "machine", "symptom": "crash",
   "persistent": true, "repair_h": 72, "observe_after_s": 60, "alert": "gpu", "alert_coverage": 0.71,
   "signature": "RuntimeError: CUDA error: unspecified launch failure"},
  {"count": 3, "name": "host_ssd", "class": "explicit", "scope": "machine", "symptom": "crash",
   "persistent": true, "repair_h": 72, "observe_after_s": 60, "alert": "host",
   "signature": "RuntimeError: NCCL communicator was aborted on rank 1403 (remote process exited)"},
  {"count": 3, "name": "host_power_supply", "class": "explicit", "scope": "machine",
   "symptom": "crash", "persistent": true, "repair_h": 72, "observe_after_s": 60, "alert": "host",
   "signature": "RuntimeError: NCCL communicator was aborted on rank 1403 (remote process exited)"},
  {"count": 2, "name": "host_chassis", "class": "explicit", "scope": "machine", "symptom": "crash",
   "persistent": true, "repair_h": 72, "observe_after_s": 60, "alert": "host",
   "signature": "RuntimeError: NCCL communicator was aborted on rank 1403 (remote process exited)"},
  {"count": 2, "name": "host_io_board", "class": "explicit", "scope": "machine", "symptom": "crash",
   "persistent": true, "repair_h": 72, "observe_after_s": 60, "alert": "host",
   "signature": "RuntimeError: NCCL communicator was aborted on rank 1403 (remote process exited)"},
  {"count": 2, "name": "dependency", "class": "explicit", "scope": "job", "symptom": "crash",
   "persistent": false, "observe_after_s": 60, "alert": "storage",
   "signature": "OSError: [Errno 5] Input/output error: '/mnt/checkpoints/step-812000/model_optim_rng.pt'"},
  {"count": 2, "name": "host_cpu", "class": "explicit", "scope": "machine", "symptom": "crash",
   "persistent": true, "repair_h": 72, "observe_after_s": 60, "alert": "host",
   "signature": "RuntimeError: NCCL communicator was aborted on rank 1403 (remote process exited)"},
  {"count": 2, "name": "host_memory", "class": "explicit", "scope": "machine", "symptom": "crash",
   "persistent": true, "repair_h": 72, "observe_after_s": 60, "alert": "host",
   "signature": "RuntimeError: NCCL communicator was aborted on rank 1403 (remote process exited)"}
])JSON";

// A built-in mix: its rows (scenario categories with a "count", no rate) and, where its
// source gives one, its published rate.
struct Mix {
  const char* name;
  const char* description;
  PublishedRate rate;
  json rows;
};

json byterobust_rows() {
  json rows = json::array();
  for (const MixRow& r : kByteRobustTable1) {
    json c;
    c["count"] = r.count;
    c["name"] = r.name;
    c["class"] = r.cls;
    c["scope"] = r.scope;
    c["symptom"] = r.symptom;
    c["persistent"] = r.persistent;
    if (r.repair_h > 0) c["repair_h"] = r.repair_h;
    if (r.observe_after_s > 0) c["observe_after_s"] = r.observe_after_s;
    if (r.slowdown_factor > 0) c["slowdown_factor"] = r.slowdown_factor;
    if (r.alert[0]) c["alert"] = r.alert;
    if (r.signature[0]) c["signature"] = r.signature;
    if (r.exit_code) c["exit_code"] = r.exit_code;
    rows.push_back(c);
  }
  return rows;
}

const std::vector<Mix>& mixes() {
  static const std::vector<Mix> all = {
      {"byterobust-table1",
       "ByteRobust (SOSP'25) Table 1: 55,365 incidents over three months of production LLM "
       "training, 17 symptoms (explicit 70.7%, implicit 11.0%, manual 17.3%); no rate for one "
       "job: give --incidents-per-day",
       {},
       byterobust_rows()},
      {"llama3-405b",
       "Llama 3 405B pre-training (arXiv 2407.21783, Table 5): 419 unexpected interruptions in "
       "54 days on 16,384 GPUs (2,048 machines of 8), 18 root causes; the published rate by "
       "default",
       {419, 54, 2048, 8},
       json::parse(kLlama3Table5)}};
  return all;
}

const Mix& find_mix(const std::string& name) {
  for (const Mix& m : mixes())
    if (name == m.name) return m;
  std::string all;
  for (const auto& n : mix_names()) all += (all.empty() ? "" : "|") + n;
  throw TraceError("unknown mix \"" + name + "\" (expected " + all + ")");
}

}  // namespace

std::vector<std::string> mix_names() {
  std::vector<std::string> names;
  for (const Mix& m : mixes()) names.push_back(m.name);
  return names;
}

std::string mix_description(const std::string& name) {
  for (const Mix& m : mixes())
    if (name == m.name) return m.description;
  return "";
}

PublishedRate mix_published_rate(const std::string& name) { return find_mix(name).rate; }

ordered_json published_mix(const std::string& name, double incidents_per_day, int machines) {
  const Mix& mix = find_mix(name);
  const bool published = std::isnan(incidents_per_day);
  if (published && !mix.rate.published())
    throw TraceError("mix \"" + name + "\" has no published rate: expected --incidents-per-day");
  if (!published && (!(incidents_per_day > 0) || !std::isfinite(incidents_per_day)))
    throw TraceError("--incidents-per-day: expected a number > 0");
  if (machines <= 0) throw TraceError("--machines: expected an integer >= 1");
  double total = 0;
  for (const auto& r : mix.rows) total += r["count"].get<double>();
  ordered_json cats = ordered_json::array();
  for (const auto& r : mix.rows) {
    const double count = r["count"].get<double>();
    const double share = count / total;
    const bool job = r["scope"] == "job";
    // Published: the source's count per machine-day (machine scope) or per day (job scope),
    // whatever the job's size. Given a rate: its share of the job's incidents a day.
    const double rate =
        published ? (job ? count / mix.rate.days : count / (mix.rate.days * mix.rate.machines))
                  : (job ? incidents_per_day * share : incidents_per_day * share / machines);
    json c = r;
    c.erase("count");
    c[job ? "rate_per_job_day" : "rate_per_machine_day"] = round_sig(rate, 4);
    cats.push_back(ordered(c));
  }
  return ordered_json{{"categories", cats}};
}

double mix_incidents_per_day(const ordered_json& model, int machines) {
  double sum = 0;
  for (const auto& c : model["categories"]) {
    if (c.contains("rate_per_job_day")) sum += c["rate_per_job_day"].get<double>();
    if (c.contains("rate_per_machine_day"))
      sum += c["rate_per_machine_day"].get<double>() * machines;
  }
  return sum;
}

// ---------------------------------------------------------------- generation

namespace {

// A renewal process's gap distribution with a given mean (days).
struct Gap {
  double shape = 1, scale = 1;
  double draw(Rng& rng) const {
    return shape == 1 ? rng.exponential(scale) : rng.weibull(shape, scale);
  }
};

Gap gap_for(double rate_per_day, const FitSet& tbf, std::size_t min_samples) {
  Gap g;
  const double mean = 1 / rate_per_day;
  const FitResult& e = tbf.exponential;
  const FitResult& w = tbf.weibull;
  if (e.ok && w.ok && tbf.observed >= min_samples && w.aic < e.aic)
    g.shape = std::clamp(w.dist.a, 0.05, 20.0);
  g.scale = g.shape == 1 ? mean : mean / std::tgamma(1 + 1 / g.shape);
  return g;
}

const FitResult* repair_for(const GroupFit& g, const GroupFit& overall, std::size_t min_samples) {
  if (g.repair_h.observed >= min_samples && g.repair_h.best()) return g.repair_h.best();
  return overall.repair_h.best();
}

}  // namespace

Trace generate_trace(const TraceFit& fit, const GenerateOptions& opt) {
  Trace t;
  t.source = "generated from " + fit.source;
  t.format = "generated";
  const int nodes = opt.nodes > 0 ? opt.nodes : fit.fleet_nodes;
  const double days = opt.days > 0 ? opt.days : fit.window_days;
  t.fleet_nodes = nodes;
  t.window = std::make_pair(0.0, days * 86400.0);
  t.origin = "generated";
  for (int n = 0; n < nodes; ++n) {
    char name[32];
    std::snprintf(name, sizeof name, "node-%05d", n);
    t.intern_node(name);
  }
  for (std::size_t gi = 0; gi < fit.by_class.size(); ++gi) {
    const GroupFit& g = fit.by_class[gi];
    if (!(g.rate_per_node_day > 0) || g.members.empty()) continue;
    const Gap gap = gap_for(g.rate_per_node_day, g.tbf_days, opt.min_samples);
    const FitResult* repair = repair_for(g, fit.overall, opt.min_samples);
    std::vector<std::int32_t> cats;
    std::vector<double> cum;
    double total = 0;
    for (const auto& [c, n] : g.members) {
      cats.push_back(t.intern_category(c.level, c.cls, c.desc));
      total += static_cast<double>(n);
      cum.push_back(total);
    }
    Rng rng({opt.seed, 0x6E4ull, gi});
    const double mean = 1 / g.rate_per_node_day;
    for (int n = 0; n < nodes; ++n) {
      // Start in equilibrium: run through a warm-up of ten mean gaps.
      double at = -10 * mean;
      while (at < 0) at += gap.draw(rng);
      for (; at < days; at += gap.draw(rng)) {
        const double u = rng.uniform() * total;
        const std::size_t k =
            static_cast<std::size_t>(std::upper_bound(cum.begin(), cum.end(), u) - cum.begin());
        Event e;
        e.time_s = at * 86400.0;
        e.node = n;
        e.category = cats[std::min(k, cats.size() - 1)];
        e.kind = EventKind::kFaultStart;
        t.events.push_back(e);
        if (repair) {
          Event end = e;
          end.kind = EventKind::kFaultEnd;
          end.time_s += repair->dist.sample(rng) * 3600.0;
          t.events.push_back(end);
        }
      }
    }
  }
  t.sort_by_time();
  return t;
}

}  // namespace faultline::traces
