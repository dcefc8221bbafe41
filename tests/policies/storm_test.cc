// Storms of overlapping faults against the byterobust stack and each of its recovery and
// localization modules (StormWorld, tests/support/storm_world.h): a second, third, ...
// fault lands in every phase of an open incident (detection, stop-time tests, replay or
// bisection, acquisition, restart, the run after it), and the stack must keep the overlap
// contract (docs/policies-and-modules.md, "When faults overlap") after every decision.
//
// Each case is drawn from its seed: the cluster, the modules, the faults (kind, machine,
// time, alert, misattributed log, warning) and every delay. A failing case prints its
// seed, its modules and the shortest decision log that shows the violation: faults are
// taken out one at a time while the same violation still happens.
//
// FAULTLINE_STORM_CASES sets the number of cases (the quick label runs the default; the
// storm label runs many more).
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "policies/builtin.h"
#include "policies/module.h"
#include "tests/support/storm_world.h"

namespace faultline {
namespace {

using testing::StormArrival;
using testing::StormKind;
using testing::StormOptions;
using testing::StormResult;
using testing::StormWorld;

struct StormCase {
  std::uint64_t seed = 0;
  std::string stack = "byterobust";
  std::map<std::string, std::string> modules;  // kind -> module name
  StormOptions options;
};

std::string describe_case(const StormCase& c) {
  std::ostringstream s;
  s << "seed " << c.seed << ", " << c.stack;
  for (const auto& [k, v] : c.modules) s << " " << k << "=" << v;
  s << ", " << c.options.spec.machines << " slots (PP " << c.options.spec.pp << ", DP "
    << c.options.spec.dp << "), recall " << c.options.recall << ", faults:";
  for (const StormArrival& a : c.options.arrivals) {
    s << "\n  t=" << a.at_s << " " << testing::storm_kind_name(a.kind) << " slot " << a.slot;
    if (a.alert) s << " alert+" << a.alert_after_s << "s";
    if (a.warned) s << " warned";
    if (a.misattributed) s << " misattributed";
    s << " strikes+" << a.strike_after_s << "s";
  }
  return s.str();
}

// The index of module `name` among the registered modules of `kind` (a stack's choice
// parameter is that index).
double choice(policies::ModuleKind kind, const std::string& name) {
  const std::vector<std::string> names = policies::modules().names(kind);
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<double>(i);
  ADD_FAILURE() << "no module " << name;
  return 0;
}

template <class T>
const T& pick(Rng& rng, const std::vector<T>& from) {
  return from[rng.below(from.size())];
}

StormCase make_case(std::uint64_t seed) {
  StormCase c;
  c.seed = seed;
  Rng rng({seed, 0x5709});
  ClusterSpec& spec = c.options.spec;
  spec.gpus_per_machine = 2;
  spec.tp = 2;
  const int layout = static_cast<int>(rng.below(3));
  spec.pp = layout == 1 ? 2 : 4;
  spec.dp = layout == 2 ? 8 : 4;
  spec.machines = spec.pp * spec.dp;
  c.modules["recovery"] = pick<std::string>(rng, {"standby", "reschedule", "requeue", "lemon",
                                                  "scored", "replica-drop", "flash", "migrate"});
  // Every built-in localizer, as registered: one added to the tree joins the storm.
  const auto localizers = policies::modules().names(policies::ModuleKind::kLocalization);
  c.modules["localization"] = pick(rng, localizers);
  c.modules["detection"] = rng.bernoulli(0.85) ? "realtime" : "timeout";
  c.options.seed = seed;
  c.options.recall = rng.bernoulli(0.5) ? 1.0 : 0.8;
  const int n = 2 + static_cast<int>(rng.below(11));
  const double window = 600.0 * n;  // one fault every ten minutes or so: they overlap
  for (int i = 0; i < n; ++i) {
    StormArrival a;
    a.at_s = std::floor(rng.uniform() * window);
    const double k = rng.uniform();
    a.kind = k < 0.30   ? StormKind::kGpu
             : k < 0.40 ? StormKind::kNic
             : k < 0.60 ? StormKind::kTransient
             : k < 0.75 ? StormKind::kSdc
             : k < 0.85 ? StormKind::kHang
             : k < 0.90 ? StormKind::kJobCrash
                        : StormKind::kUpdate;
    a.slot = static_cast<int>(rng.below(static_cast<std::uint64_t>(spec.machines)));
    const bool alerting = a.kind == StormKind::kGpu || a.kind == StormKind::kNic;
    a.alert = alerting ? rng.bernoulli(0.7) : rng.bernoulli(0.5);  // kUpdate: urgent
    a.alert_after_s = rng.bernoulli(0.3) ? 0 : std::floor(rng.uniform() * 120);
    a.warned = a.kind == StormKind::kGpu && rng.bernoulli(0.3);
    a.misattributed = rng.bernoulli(0.2);
    a.strike_after_s = std::floor(5 + rng.uniform() * 295);
    c.options.arrivals.push_back(a);
  }
  std::sort(c.options.arrivals.begin(), c.options.arrivals.end(),
            [](const StormArrival& x, const StormArrival& y) { return x.at_s < y.at_s; });
  return c;
}

StormResult run_case(const StormCase& c) {
  Registry r = policies::builtin_registry();
  const PolicyInfo& info = *r.find(c.stack);
  std::map<std::string, double> over;
  if (c.stack == "byterobust") {
    over["recovery"] = choice(policies::ModuleKind::kRecovery, c.modules.at("recovery"));
    over["localization"] =
        choice(policies::ModuleKind::kLocalization, c.modules.at("localization"));
    over["detection"] = choice(policies::ModuleKind::kDetection, c.modules.at("detection"));
  }
  Params params;
  if (auto err = Params::resolve(info.params, over, &params)) {
    StormResult bad;
    bad.violation = "parameters: " + *err;
    return bad;
  }
  auto policy = r.make(c.stack, params);
  StormWorld w(c.options);
  return w.run(*policy);
}

// The kind of a violation (its words before the first number), to keep the same one
// while shrinking.
std::string kind_of(const std::string& v) {
  const auto at = v.find_first_of("0123456789");
  return v.substr(0, at);
}

// Takes faults out one at a time while the same kind of violation still happens.
StormCase shrink(StormCase c, const std::string& violation) {
  const std::string want = kind_of(violation);
  for (std::size_t i = 0; i < c.options.arrivals.size();) {
    StormCase less = c;
    less.options.arrivals.erase(less.options.arrivals.begin() + static_cast<std::ptrdiff_t>(i));
    if (kind_of(run_case(less).violation) == want)
      c = std::move(less);
    else
      ++i;
  }
  return c;
}

std::string report(const StormCase& c) {
  const StormResult r = run_case(c);
  std::ostringstream s;
  s << r.violation << "\n" << describe_case(c) << "\ndecision log:\n";
  for (const std::string& line : r.log) s << "  " << line << "\n";
  return s.str();
}

int cases_to_run(int quick) {
  const char* env = std::getenv("FAULTLINE_STORM_CASES");
  return env ? std::max(1, std::atoi(env)) : quick;
}

TEST(Storm, ByteRobustAndEveryRecoveryAndLocalizationModuleKeepTheOverlapContract) {
  const int n = cases_to_run(2000);
  int failed = 0, decisions = 0, struck = 0;
  std::map<std::string, int> by_kind;
  std::vector<std::string> reports;
  for (int i = 0; i < n; ++i) {
    const StormCase c = make_case(static_cast<std::uint64_t>(i) + 1);
    const StormResult r = run_case(c);
    decisions += r.decisions;
    struck += r.faults_struck;
    if (r.violation.empty()) continue;
    ++failed;
    ++by_kind[kind_of(r.violation)];
    const char* show = std::getenv("FAULTLINE_STORM_SHOW");  // a violation's first words
    if (reports.size() < 3 && (!show || r.violation.rfind(show, 0) == 0))
      reports.push_back(report(shrink(c, r.violation)));
  }
  std::ostringstream kinds;
  for (const auto& [k, count] : by_kind) kinds << "\n  " << count << " x " << k;
  EXPECT_EQ(failed, 0) << failed << " of " << n << " storms broke the contract:" << kinds.str();
  for (const std::string& r : reports) ADD_FAILURE() << r;
  // The storms do storm: thousands of decisions, most faults reach the job.
  EXPECT_GT(decisions, 20 * n);
  EXPECT_GT(struck, 2 * n);
  std::printf("%d storms, %d decisions, %d faults struck\n", n, decisions, struck);
}

}  // namespace
}  // namespace faultline
