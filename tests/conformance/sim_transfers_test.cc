// SimWorld's transfers: an abandoned restore stops loading the network, and the closed form
// of a batch's time agrees with SimGrid (each in a death-test child: one SimGrid engine per
// process).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <simgrid/s4u.hpp>
#include <string>
#include <utility>
#include <vector>

#include "sim/network.h"
#include "tests/conformance/conformance_support.h"

namespace faultline {
namespace {

using namespace conformance;

// A start that is abandoned (stopped while restoring its checkpoint) stops its transfers:
// the restore of the next start has the storage link to itself, so it takes exactly what a
// restore on an idle network takes, by the closed form of max-min sharing. SimGrid allows
// one engine per process, so the run happens in a fresh process (a death-test child).
TEST(SimWorldTransfers, AnAbandonedRestoreStopsLoadingTheNetwork) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto body = [] {
    const json doc = {
        {"description", "eight machines restoring 50 GB each from one storage host"},
        {"seed", 1},
        {"replicas", 1},
        {"cluster",
         {{"machines", 8},
          {"gpus_per_machine", 1},
          {"rack_size", 8},
          {"storage_hosts", 1},
          {"standby_machines", 0},
          {"storage_gbps", 400},
          {"link_latency_us", 2}}},
        {"job",
         {{"tp", 1},
          {"pp", 2},
          {"dp", 4},
          {"step_time_s", 2},
          {"checkpoint_bytes_per_machine", 50e9},
          {"image_bytes", 0},
          {"init_s", 0},
          {"horizon_days", 0.01},
          {"collective_timeout_s", 0}}},
        {"faults",
         {{"categories", json::array({{{"name", "crash"}, {"rate_per_machine_day", 0}}})}}},
        {"policy", {{"stack", "conformance-script"}}}};
    const Registry reg = registry();
    const scenarios::Scenario sc = scenarios::parse_scenario(doc.dump(), "abandon.json", {}, reg);
    // Restore: 8 flows share the 50 GB/s storage link; each also loads it with 5% of its
    // rate in the other direction (SimGrid's cross-traffic), so all end at
    // 8 x 1.05 x 50 GB / 50 GB/s, after the route's latency (4 links of 2 us).
    const double want = 8 * 1.05 * 50e9 / 50e9 + 4 * 2e-6;
    std::vector<double> took;  // seconds from each StartJob to its JobStarted
    double started_at = 0;
    Script s;
    s.start = [&](World& w) {
      started_at = 0;
      w.act(StartJob{"first: abandoned half-way through its restore"});
      w.set_timer(Duration::seconds(4), 1);
    };
    s.on = [&](const Event& e, World& w) {
      auto restart = [&](const char* why) {
        w.act(StopJob{why});
        started_at = static_cast<double>(w.now().ns) * 1e-9;
        w.act(StartJob{why});
      };
      if (auto* t = std::get_if<TimerFired>(&e); t && t->tag == 1) {
        if (!took.empty()) std::exit(3);  // the first restore was not under way at 4 s
        restart("second: right after the abandoned one");
      } else if (std::holds_alternative<JobStarted>(e)) {
        took.push_back(static_cast<double>(w.now().ns) * 1e-9 - started_at);
        if (took.size() == 1) restart("third: on a network nobody else uses");
      }
    };
    g_script = &s;
    g_seen.clear();
    sim::ReplicaRunner runner(sc, reg);
    runner.run(0, {});
    std::fprintf(stderr, "restores took");
    for (double t : took) std::fprintf(stderr, " %.9f s", t);
    std::fprintf(stderr, "; closed form %.9f s\n", want);
    bool ok = took.size() == 2;
    for (double t : took) ok = ok && std::abs(t - want) < 1e-6;
    std::exit(ok ? 0 : 1);
  };
  EXPECT_EXIT(body(), ::testing::ExitedWithCode(0), "restores took");
}

// The closed form of a batch's time on an idle network (what replaces SimGrid for
// whole-job batches, whose SimGrid cost is quadratic) against SimGrid itself, on batches
// small enough to run through both: whole-job restores (one storage host's link shared),
// peer copies (same-rack pairs cross their ToR link twice), pulls to new machines and
// standbys (shorter routes, so other sharing weights), mixed sizes (several completion
// waves) and a lone transfer (bounded by the TCP window, not a link).
TEST(SimWorldTransfers, TheClosedFormAgreesWithSimGridToTheNanosecond) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto body = [] {
    ClusterSpec spec;
    spec.machines = 96;
    spec.rack_size = 8;
    spec.standby_machines = 4;
    spec.storage_hosts = 3;
    ClusterView view(spec);
    sim::Platform platform(view);
    sim::FlowNet flows(platform);
    using sim::Transfer;
    std::vector<std::pair<std::string, std::vector<Transfer>>> cases;
    const int n = spec.machines;
    for (double bytes : {50e9, 3.3e9}) {
      std::vector<Transfer> b;
      for (int s = 0; s < n; ++s)
        b.push_back({platform.storage_host(s % 3), platform.slot_host(s), bytes});
      cases.emplace_back("whole-job restore " + std::to_string(bytes), b);
    }
    {
      std::vector<Transfer> b;
      for (int s = 0; s < n; s += 3)
        b.push_back({platform.slot_host((s + 1) % n), platform.slot_host(s), 20e9});
      cases.emplace_back("peer copies", b);
    }
    {
      std::vector<Transfer> b;
      for (int s : {5, 17, 40, 41, 90})
        b.push_back({platform.storage_host(s % 3), platform.slot_host(s), 8e9});
      for (int i = 0; i < 4; ++i)
        b.push_back({platform.storage_host(i % 3), platform.standby_host(i), 8e9});
      b.push_back({platform.standby_host(0), platform.slot_host(7), 30e9});
      cases.emplace_back("pulls to new machines and standbys", b);
    }
    {
      std::vector<Transfer> b;
      for (int s = 0; s < n; ++s)
        b.push_back({platform.storage_host(s % 3), platform.slot_host(s), 1e9 * (1 + s % 5)});
      cases.emplace_back("mixed sizes", b);
    }
    cases.emplace_back("one transfer",
                       std::vector<Transfer>{{platform.slot_host(3), platform.slot_host(60), 1e9}});
    std::vector<std::int64_t> got(cases.size(), -1);
    simgrid::s4u::Actor::create("driver", platform.control_host(), [&] {
      for (std::size_t i = 0; i < cases.size(); ++i) {
        bool finished = false;
        flows.start(cases[i].second, sim::FlowNet::key_of(cases[i].second), [&, i](std::int64_t d) {
          got[i] = d;
          finished = true;
        });
        while (!finished) simgrid::s4u::this_actor::sleep_for(1);
      }
    });
    platform.engine().run();
    bool ok = true;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const std::int64_t closed = flows.fluid_duration(cases[i].second);
      std::fprintf(stderr, "%s: SimGrid %lld ns, closed form %lld ns\n", cases[i].first.c_str(),
                   static_cast<long long>(got[i]), static_cast<long long>(closed));
      ok = ok && got[i] > 0 && std::llabs(closed - got[i]) <= 1;
    }
    std::exit(ok ? 0 : 1);
  };
  EXPECT_EXIT(body(), ::testing::ExitedWithCode(0), "closed form");
}

}  // namespace
}  // namespace faultline
