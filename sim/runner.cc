#include "sim/runner.h"

#include <chrono>
#include <cstring>
#include <ctime>
#include <optional>
#include <simgrid/s4u.hpp>

#include "policies/module.h"
#include "sim/fork_pool.h"

namespace faultline::sim {

namespace sg4 = simgrid::s4u;

ReplicaRunner::ReplicaRunner(const scenarios::Scenario& sc, const Registry& registry)
    : sc_(sc),
      registry_(registry),
      view_(std::make_unique<ClusterView>(sc.cluster)),
      platform_(std::make_unique<Platform>(*view_)),
      flows_(std::make_unique<FlowNet>(*platform_)) {}

ReplicaRunner::~ReplicaRunner() = default;

double ReplicaRunner::platform_build_s() const { return platform_->build_seconds(); }

void ReplicaRunner::mark() {
  marked_clock_ = sg4::Engine::get_clock();
  marked_real_ = flows_->real_batches();
}

bool ReplicaRunner::unchanged_since_mark() const {
  return sg4::Engine::get_clock() == marked_clock_ && flows_->real_batches() == marked_real_ &&
         flows_->in_flight() == 0;
}

namespace {
double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
}  // namespace

ReplicaResult ReplicaRunner::run(std::uint64_t replica, const RunOptions& opt) {
  ReplicaResult out;
  const double cpu0 = thread_cpu_s();
  // A failed policy module ends the run (exit 2); it is carried out of SimGrid's actor, which
  // would abort on an exception, and thrown here.
  std::optional<policies::ModuleError> failed;
  sg4::Actor::create("replica", platform_->control_host(), [&]() {
    try {
      SimWorld world(sc_, *view_, *platform_, *flows_, registry_, replica, opt);
      out = world.run();
    } catch (const policies::ModuleError& e) {
      failed = e;
      sg4::Actor::kill_all();
    }
  });
  platform_->engine().run();
  if (failed) throw *failed;
  out.cpu_s = thread_cpu_s() - cpu0;
  return out;
}

std::vector<ReplicaResult> run_replicas(const scenarios::Scenario& sc, int replicas, int jobs,
                                        const RunOptions& opt, const Registry& registry,
                                        RunStats* stats,
                                        const std::function<void(int, int)>& on_done,
                                        CategoryTotals* fold) {
  std::vector<std::uint64_t> all(static_cast<std::size_t>(replicas));
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  return run_replica_list(sc, all, jobs, opt, registry, stats, on_done, fold);
}

std::vector<ReplicaResult> run_replica_list(const scenarios::Scenario& sc,
                                            const std::vector<std::uint64_t>& which, int jobs,
                                            const RunOptions& opt, const Registry& registry,
                                            RunStats* stats,
                                            const std::function<void(int, int)>& on_done,
                                            CategoryTotals* fold) {
  const auto t0 = std::chrono::steady_clock::now();
  ReplicaRunner runner(sc, registry);
  if (stats) stats->platform_build_s = runner.platform_build_s();

  const int total = static_cast<int>(which.size());
  std::vector<ReplicaResult> results(which.size());
  // With `fold`, results are folded into it in `which` order as soon as every earlier one
  // has arrived (forks finish out of order by at most the pool's width), then released.
  std::vector<bool> arrived(which.size(), false);
  std::size_t folded = 0;
  auto arrive = [&](std::size_t i) {
    arrived[i] = true;
    if (!fold) return;
    for (; folded < results.size() && arrived[folded]; ++folded) {
      fold->add(results[folded]);
      release_categories(results[folded]);
    }
  };
  // Replica 0 always runs here first: the others start from the state it leaves (platform
  // built, routes cached, transfer memo), so a replica's result is the same whichever of
  // the others run beside it.
  const ReplicaResult first = runner.run(0, opt);
  std::vector<std::size_t> forked;  // positions in `which` of the replicas run in forks
  int done = 0;
  for (std::size_t i = 0; i < which.size(); ++i) {
    if (which[i] != 0) {
      forked.push_back(i);
      continue;
    }
    results[i] = first;
    arrive(i);
    if (on_done) on_done(++done, total);
  }
  // Each child runs replicas one after another for as long as none of them needed SimGrid
  // (then it is still in the state replica 0 left: memo entries aside, which only hold
  // closed-form times); one that did leaves the child for a fresh fork.
  runner.mark();
  ForkPoolOptions pool{jobs, nullptr, {}};
  pool.child_reusable = [&runner] { return runner.unchanged_since_mark(); };
  try {
    fork_pool(
        forked.size(), pool,
        [&](std::size_t k, const std::function<void()>&) {
          return encode(runner.run(which[forked[k]], opt));
        },
        [&](std::size_t k, std::vector<std::uint8_t> bytes) {
          results[forked[k]] = decode(bytes);
          arrive(forked[k]);
          if (on_done) on_done(++done, total);
        },
        [&](std::size_t k) { return "replica " + std::to_string(which[forked[k]]); });
  } catch (const policies::ModuleError&) {
    throw;  // the user's module failed: exit 2, not a run error
  } catch (const std::runtime_error& e) {
    throw RunError(e.what());
  }
  if (stats)
    stats->wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return results;
}

std::vector<ReplicaResult> run_replicas_in_child(const scenarios::Scenario& sc, int jobs,
                                                 const RunOptions& opt, const Registry& registry,
                                                 const std::function<void(long long)>& on_done) {
  // One child runs them all (it builds its own SimGrid engine) and sends them framed; it
  // ticks once per finished replica.
  std::vector<std::uint8_t> data;
  try {
    fork_pool(
        1, ForkPoolOptions{1, on_done, {}},
        [&](std::size_t, const std::function<void()>& tick) {
          std::vector<std::uint8_t> out;
          for (const auto& r : run_replicas(sc, sc.replicas, jobs, opt, registry, nullptr,
                                            [&](int, int) { tick(); })) {
            const std::vector<std::uint8_t> bytes = encode(r);
            const std::uint64_t n = bytes.size();
            const auto* len = reinterpret_cast<const std::uint8_t*>(&n);
            out.insert(out.end(), len, len + sizeof n);
            out.insert(out.end(), bytes.begin(), bytes.end());
          }
          return out;
        },
        [&](std::size_t, std::vector<std::uint8_t> bytes) { data = std::move(bytes); },
        [&](std::size_t) { return sc.policy; });
  } catch (const policies::ModuleError&) {
    throw;  // the user's module failed: exit 2, not a run error
  } catch (const std::runtime_error& e) {
    throw RunError(e.what());
  }
  std::vector<ReplicaResult> out;
  std::size_t off = 0;
  while (off + sizeof(std::uint64_t) <= data.size()) {
    std::uint64_t n;
    std::memcpy(&n, data.data() + off, sizeof n);
    off += sizeof n;
    if (off + n > data.size()) throw RunError(sc.policy + ": truncated result");
    out.push_back(decode({data.begin() + off, data.begin() + off + n}));
    off += n;
  }
  return out;
}

}  // namespace faultline::sim
