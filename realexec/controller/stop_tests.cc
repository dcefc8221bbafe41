// Stop-time tests, run on the agents for the policy: host inspections, probes (one machine
// each, or inter_all_gather across machines with its NCCL unique id relayed by the
// controller), grouped probes, stack capture and replays. Bit-wise probes and replays are
// compared with a reference run on the controller's own host (run_reference). The
// StopTests part (stop_tests.h).
#include "realexec/controller/stop_tests.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "realexec/controller/live_world_internal.h"

extern char** environ;

namespace faultline::live {

using nlohmann::json;
using world_detail::kRequestTimeoutS;

namespace {

constexpr double kReplayTimeoutS = 300;

const char* probe_wire_name(ProbeKind k) { return probe_key(k); }

// The machines whose hash is not the right answer: the reference run's, or without it the
// one a strict majority of machines computed; with neither, the test is inconclusive and
// fails nobody on its hash.
MachineSet wrong_hashes(const std::optional<std::string>& reference,
                        const std::map<MachineId, std::string>& hashes) {
  std::optional<std::string> expected = reference;
  if (!expected) {
    std::map<std::string, int> votes;
    for (const auto& [m, h] : hashes) ++votes[h];
    for (const auto& [h, n] : votes)
      if (2 * n > static_cast<int>(hashes.size())) expected = h;
  }
  MachineSet wrong;
  if (expected)
    for (const auto& [m, h] : hashes)
      if (h != *expected) wrong.push_back(m);
  return wrong;
}

}  // namespace

void StopTests::inspect(const EnableInspection& a) {
  probes_.inspect(a.kind, a.interval.to_seconds());
  json kinds = json::object();
  for (const auto& [k, v] : probes_.inspections()) kinds[k] = v;
  for (MachineId m = 0; m < j_.cluster.machine_count(); ++m)
    if (j_.link.connected(m))
      j_.requests.send(m, json{{"type", "inspect"}, {"kinds", kinds}},
                       Duration::seconds(kRequestTimeoutS), [](const AgentReply&) {});
}

void StopTests::run_reference(std::vector<std::string> argv,
                              std::function<void(std::optional<std::string>)> done) {
  // The controller's host is trusted hardware outside the job: it computes the
  // fault-free answer that bit-wise probes and replays are compared with.
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    j_.reactor.defer([done] { done(std::nullopt); });
    return;
  }
  const std::string dir = j_.config.state_dir + "/reference";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::vector<std::string> env_s = {"FAULTLINE_CKPT_DIR=" + dir,
                                    "FAULTLINE_FAULT_FILE=" + dir + "/none",
                                    "RANK=0",
                                    "WORLD_SIZE=1",
                                    "LOCAL_RANK=0",
                                    "MASTER_ADDR=127.0.0.1",
                                    "MASTER_PORT=29399",
                                    "FAULTLINE_HOST_ADDR=127.0.0.1",
                                    "PATH=/usr/bin:/bin"};
  std::vector<char*> args, env;
  for (auto& s : argv) args.push_back(s.data());
  args.push_back(nullptr);
  for (auto& s : env_s) env.push_back(s.data());
  env.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    j_.reactor.defer([done] { done(std::nullopt); });
    return;
  }
  auto buf = std::make_shared<std::string>();
  const int fd = out[0];
  j_.reactor.add_fd(fd, EPOLLIN, [this, fd, buf](std::uint32_t) {
    char tmp[4096];
    const ssize_t n = ::read(fd, tmp, sizeof tmp);
    if (n > 0 && buf->size() < (1 << 16)) buf->append(tmp, static_cast<size_t>(n));
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) j_.reactor.remove_fd(fd);
  });
  j_.reactor.watch_child(pid, [this, fd, buf, done](int status) {
    // Drain what is left, then parse the last JSON line with a hash.
    char tmp[4096];
    ssize_t n;
    while ((n = ::read(fd, tmp, sizeof tmp)) > 0) buf->append(tmp, static_cast<size_t>(n));
    j_.reactor.remove_fd(fd);
    ::close(fd);
    std::optional<std::string> hash;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      size_t pos = 0;
      while (pos < buf->size()) {
        size_t nl = buf->find('\n', pos);
        if (nl == std::string::npos) nl = buf->size();
        const json j = json::parse(buf->substr(pos, nl - pos), nullptr, false);
        if (j.is_object() && j.contains("hash") && j["hash"].is_string())
          hash = j["hash"].get<std::string>();
        pos = nl + 1;
      }
    }
    done(hash);
  });
}

void StopTests::probe(ActionId id, const RunProbe& a) {
  if (!a.groups.empty()) return grouped_probe(id, a);
  const Instant t = j_.now();
  MachineSet machines;
  for (MachineId m : a.machines)
    if (m >= 0 && m < j_.cluster.machine_count()) machines.push_back(m);
  run(a.test, machines, a.deadline,
      [this, id, t, test = a.test](const MachineSet& failed, bool timed_out,
                                   const std::string& details) {
        std::string names;
        for (MachineId m : failed) names += (names.empty() ? "" : ", ") + j_.config.machine(m).name;
        j_.outcome(id, true,
                   std::string(probe_wire_name(test)) + ": " +
                       (failed.empty() ? "all passed" : "failed on " + names) + details,
                   t);
        j_.deliver(ProbeResult{id, test, failed, timed_out});
      });
}

void StopTests::grouped_probe(ActionId id, const RunProbe& a) {
  const Instant t = j_.now();
  // act() refused what the contract refuses (policies/api/refusals.h): another test than
  // inter_all_gather, a group of one, a machine outside the fleet or in two groups.
  // `machines` is not used: the groups say who takes part.
  // Each group's rank 0 listens on a master port on its host; only groups whose rank 0 share
  // a host (agents side by side) need ports apart, so a fleet of hosts never runs out of them.
  std::map<std::string, int> on_host;
  std::vector<int> ports;
  for (size_t g = 0; g < a.groups.size(); ++g) {
    const std::string at = "groups[" + std::to_string(g) + "]";
    const int port =
        j_.config.job.master_port + 100 + on_host[j_.config.machine(a.groups[g][0]).addr]++;
    if (port > 65535)
      return j_.refuse(id,
                       at + ": master port " + std::to_string(port) +
                           " is above 65535 (too many groups on one host)",
                       t);
    ports.push_back(port);
  }
  struct State {
    std::vector<MachineSet> groups;
    size_t remaining = 0;
    std::vector<bool> group_failed;
    std::vector<double> group_seconds;
    std::vector<std::string> details;
    std::vector<std::map<MachineId, double>>
        collective_s;  // each machine's own time of its group's all-gather
    bool timed_out = false;
  };
  auto st = std::make_shared<State>();
  st->groups = a.groups;
  st->remaining = a.groups.size();  // before any probe starts: a group may end at once
  st->group_failed.assign(a.groups.size(), false);
  st->group_seconds.assign(a.groups.size(), 0.0);
  st->details.resize(a.groups.size());
  st->collective_s.resize(a.groups.size());
  for (size_t g = 0; g < a.groups.size(); ++g) {
    run(
        a.test, a.groups[g], a.deadline,
        [this, id, t, st, g](const MachineSet& failed, bool timed_out, const std::string& details) {
          // The collective's own time when every machine of the group reported it (the
          // slowest sets it), as the simulator times it; else from the sending to the last
          // reply, process start included.
          st->group_seconds[g] = (j_.now() - t).to_seconds();
          if (st->collective_s[g].size() == st->groups[g].size()) {
            st->group_seconds[g] = 0;
            for (const auto& [m, s] : st->collective_s[g])
              st->group_seconds[g] = std::max(st->group_seconds[g], s);
          }
          st->group_failed[g] = !failed.empty() || timed_out;
          st->timed_out |= timed_out;
          st->details[g] = details;
          if (--st->remaining > 0) return;
          // The whole of a failed group is listed (the contract): in a pair, which machine is at
          // fault is the caller's call, across the groups; the detail keeps what the agents said.
          MachineSet failed_all;
          std::string summary;
          for (size_t i = 0; i < st->groups.size(); ++i) {
            if (st->group_failed[i])
              failed_all.insert(failed_all.end(), st->groups[i].begin(), st->groups[i].end());
            char secs[32];
            std::snprintf(secs, sizeof secs, "%.2f", st->group_seconds[i]);
            summary += (i ? ", g" : "g") + std::to_string(i) + " " + secs + "s " +
                       (st->group_failed[i] ? "failed" : "ok");
            if (!st->details[i].empty())
              summary += " (" + st->details[i].substr(2) + ")";  // past its "; "
          }
          std::sort(failed_all.begin(), failed_all.end());
          failed_all.erase(std::unique(failed_all.begin(), failed_all.end()), failed_all.end());
          j_.outcome(
              id, true,
              std::string(probe_wire_name(ProbeKind::kInterAllGather)) + " per group: " + summary,
              t);
          j_.deliver(ProbeResult{id, ProbeKind::kInterAllGather, failed_all, st->timed_out,
                                 st->group_failed, st->group_seconds});
        },
        ports[g], [st, g](MachineId m, double s) { st->collective_s[g][m] = s; });
  }
}

void StopTests::run(ProbeKind test, const MachineSet& machines, Duration deadline, ProbeDone done,
                    int master_port, std::function<void(MachineId, double)> timed) {
  if (master_port == 0) master_port = j_.config.job.master_port + 100;
  const int deadline_ms = static_cast<int>(std::min(deadline.to_seconds(), 600.0) * 1000);
  struct State {
    int remaining = 0;
    MachineSet failed;
    std::map<MachineId, std::string> hashes;
    std::optional<std::string> reference;
    bool timed_out = false;
    std::string details;
    std::shared_ptr<ProbeRelays::Group> relay;  // a relayed inter_all_gather
    std::uint64_t relay_key = 0;                // its key in probes_
    std::map<MachineId, std::string> joined;  // machine -> how far its probe got in the rendezvous
  };
  auto st = std::make_shared<State>();
  const bool hashed = test == ProbeKind::kBitwise || test == ProbeKind::kStress;
  const int steps = j_.config.job.bitwise_steps * (test == ProbeKind::kStress ? 10 : 1);
  st->remaining = static_cast<int>(machines.size()) + (hashed ? 1 : 0) + 1;
  auto finish = [this, st, hashed, done, machines] {
    if (--st->remaining > 0) return;
    if (st->relay) {
      probes_.remove(st->relay_key);
      ProbeRelays::attribute(*st->relay, machines, st->joined, st->failed, st->details,
                             [this](MachineId x) { return j_.config.machine(x).name; });
    }
    if (hashed) {
      const MachineSet wrong = wrong_hashes(st->reference, st->hashes);
      st->failed.insert(st->failed.end(), wrong.begin(), wrong.end());
    }
    std::sort(st->failed.begin(), st->failed.end());
    st->failed.erase(std::unique(st->failed.begin(), st->failed.end()), st->failed.end());
    done(st->failed, st->timed_out, st->details);
  };
  if (hashed) {
    run_reference({j_.config.trainjob_bin, "--probe", "bitwise", "--seed",
                   std::to_string(j_.config.seed), "--steps", std::to_string(steps)},
                  [st, finish](std::optional<std::string> h) {
                    st->reference = h;
                    if (!h) st->details += "; the reference run failed";
                    finish();
                  });
  }
  const std::string master = machines.empty() ? "127.0.0.1" : j_.config.machine(machines[0]).addr;
  // With probe_bin, inter_all_gather is faultline-probe's NCCL all-gather across the machines,
  // its unique id relayed by this controller (ProbeRelays, on_rendezvous).
  const bool relayed =
      test == ProbeKind::kInterAllGather && !j_.config.probe_bin.empty() && !machines.empty();
  if (relayed) {
    st->relay = ProbeRelays::make(machines[0]);
  }
  for (size_t i = 0; i < machines.size(); ++i) {
    const MachineId m = machines[i];
    json msg{{"type", "probe"},
             {"test", probe_wire_name(test)},
             {"deadline_ms", deadline_ms},
             {"rank", static_cast<int>(i)},
             {"world_size", static_cast<int>(machines.size())},
             {"master_addr", master},
             {"master_port", master_port},
             {"seed", j_.config.seed},
             {"steps", steps}};
    if (relayed) msg["rendezvous"] = true;
    const std::uint64_t req =
        j_.requests.send(m, msg, Duration::millis(deadline_ms + 10000),
                         [this, m, st, finish, hashed, timed](const AgentReply& r) {
                           if (st->relay)
                             st->joined[m] = r.rendezvous.value_or(r.ok ? "" : "unknown");
                           if (timed && r.ok && r.collective_s) timed(m, *r.collective_s);
                           if (!r.ok) {
                             st->failed.push_back(m);
                             if (r.timed_out) st->timed_out = true;
                             st->details += "; " + j_.config.machine(m).name + ": " + r.detail;
                           } else if (hashed) {
                             if (r.hash)
                               st->hashes[m] = *r.hash;
                             else
                               st->failed.push_back(m);
                           }
                           finish();
                         });
    if (relayed) {
      if (i == 0) {
        probes_.add(req, st->relay);
        st->relay_key = req;
      } else {
        st->relay->others.emplace_back(m, req);
      }
    }
  }
  finish();
}

void StopTests::rendezvous(MachineId m, const AgentRendezvous& msg) {
  // Only rank 0 of a probe still waiting for its reply, once: anything else is refused and
  // noted, and relays nothing.
  const std::string req = std::to_string(msg.probe_req);
  ProbeRelays::Group* group = probes_.find(msg.probe_req);
  if (!group || !j_.requests.waits(msg.probe_req, m) || group->root != m)
    bad("rendezvous: probe_req: " + req +
        " is not a running inter_all_gather probe of this machine as rank 0");
  ProbeRelays::Group& g = *group;
  if (g.published) bad("rendezvous: probe_req: " + req + " already published its blob");
  g.published = true;
  const std::string hex = to_hex(msg.blob);
  for (const auto& [other, other_req] : g.others) {
    // The agent writes it for its probe and answers; a refusal or a lost agent shows up as
    // that machine's probe not joining.
    j_.requests.send(other, json{{"type", "rendezvous"}, {"probe_req", other_req}, {"blob", hex}},
                     Duration::seconds(kRequestTimeoutS), [this, other](const AgentReply& r) {
                       if (!r.ok)
                         j_.note("rendezvous relay to " + j_.config.machine(other).name +
                                 " failed: " + r.detail);
                     });
  }
}

void StopTests::capture(ActionId id) {
  const Instant t = j_.now();
  struct State {
    int remaining = 0;
    std::vector<std::string> by_slot;
    std::map<MachineId, double> silent;  // machines whose agent is silent: seconds
  };
  auto st = std::make_shared<State>();
  st->by_slot.assign(j_.cluster.slots(), "");
  const MachineSet ms = j_.job_machines();
  st->remaining = static_cast<int>(ms.size()) + 1;
  auto finish = [this, id, t, st] {
    if (--st->remaining > 0) return;
    if (!st->silent.empty()) return silent_capture(id, st->silent, t);
    j_.outcome(id, true, "stacks of " + std::to_string(st->by_slot.size()) + " slots", t);
    j_.deliver(StacksCaptured{id, StackSignatures(st->by_slot)});
  };
  for (MachineId m : ms) {
    const SlotId slot = j_.cluster.slot_of(m);
    j_.requests.send(
        m, json{{"type", "capture"}}, Duration::seconds(kRequestTimeoutS),
        [this, st, slot, m, finish](const AgentReply& r) {
          std::string sig;
          for (const auto& [rank, s] : r.by_rank)
            sig += (sig.empty() ? "" : " | ") + s;  // by rank: stable
          if (sig.empty() && r.timed_out && j_.link.silent_s(m) >= j_.config.heartbeat_timeout_s)
            st->silent[m] = j_.link.silent_s(m);
          if (sig.empty()) sig = r.timed_out ? "<no answer>" : "<no process>";
          st->by_slot[slot] = sig;
          finish();
        });
  }
  finish();
}

// A capture that a job machine's agent did not answer while its heartbeats are late (a frozen
// agent, a host stopped: its ranks' peers wait on it): the stall is that machine's. It is
// reported as a host alert, and the capture fails: its stacks would name the peers that wait
// on the silent machine (a stall window shorter than stalled_agent_timeout_s evicted the
// frozen agent's healthy partner).
void StopTests::silent_capture(ActionId id, const std::map<MachineId, double>& silent, Instant t) {
  std::string names;
  for (const auto& [m, s] : silent) {
    names += (names.empty() ? "" : ", ") + j_.config.machine(m).name;
    j_.deliver(InspectionAlert{m, "host",
                               "agent silent for " + std::to_string(static_cast<int>(s)) +
                                   " s (heartbeats late): no answer to the stack capture"});
  }
  j_.refuse(id, "the agent of " + names + " is silent: the stall is attributed to it", t);
}

void StopTests::replay(ActionId id, const RunReplay& a) {
  const Instant t = j_.now();
  struct State {
    int remaining = 0;
    std::vector<bool> failed;
    std::vector<std::vector<std::string>> hashes;
    std::optional<std::string> reference;
    std::string why;  // the first member's failure, in its agent's words
  };
  auto st = std::make_shared<State>();
  st->failed.assign(a.groups.size(), false);
  st->hashes.resize(a.groups.size());
  int requests = 0;
  for (const auto& g : a.groups) requests += static_cast<int>(g.size());
  st->remaining = requests + 2;
  auto finish = [this, id, t, st] {
    if (--st->remaining > 0) return;
    std::string verdict;
    for (size_t g = 0; g < st->failed.size(); ++g) {
      for (const auto& h : st->hashes[g])
        if (!st->reference || h != *st->reference) st->failed[g] = true;
      verdict += st->failed[g] ? "F" : ".";
    }
    j_.outcome(id, st->reference.has_value(),
               "groups " + verdict + (st->reference ? "" : " (reference run failed)") +
                   (st->why.empty() ? "" : "; " + st->why),
               t);
    j_.deliver(ReplayResult{id, st->failed});
  };
  const int steps = j_.config.job.replay_steps;
  run_reference({j_.config.trainjob_bin, "--replay", "--steps", std::to_string(steps), "--seed",
                 std::to_string(j_.config.seed)},
                [st, finish](std::optional<std::string> h) {
                  st->reference = h;
                  finish();
                });
  for (size_t g = 0; g < a.groups.size(); ++g) {
    const auto& group = a.groups[g];
    if (group.empty()) continue;
    const std::string master = j_.config.machine(group[0]).addr;
    for (size_t i = 0; i < group.size(); ++i) {
      const MachineId m = group[i];
      json msg{{"type", "replay"},
               {"steps", steps},
               {"rank", static_cast<int>(i)},
               {"world_size", static_cast<int>(group.size())},
               {"master_addr", master},
               {"master_port", j_.config.job.master_port + 200 + static_cast<int>(g)},
               {"deadline_ms", static_cast<int>(kReplayTimeoutS * 1000)},
               {"from_init", true},
               {"seed", j_.config.seed}};
      j_.requests.send(m, msg, Duration::seconds(kReplayTimeoutS + 10),
                       [this, st, g, i, m, finish](const AgentReply& r) {
                         if (!r.ok) st->failed[g] = true;
                         if (!r.ok && st->why.empty())
                           st->why = j_.config.machine(m).name + ": " +
                                     (r.detail.empty() ? std::string("failed") : r.detail);
                         if (i == 0) {
                           if (r.hash)
                             st->hashes[g].push_back(*r.hash);
                           else
                             st->failed[g] = true;
                         }
                         finish();
                       });
    }
  }
  finish();
}

}  // namespace faultline::live
