// StopTests: the stop-time tests live mode runs on the agents for the policy (stop_tests.cc):
// host inspections, probes (one machine each, or inter_all_gather across machines with its
// NCCL unique id relayed by the controller), grouped probes, stack capture and replays.
// Bit-wise probes and replays are compared with a reference run on the controller's own host.
//
// LiveWorld owns the state these read (handed in as Job) and routes the actions and the
// agents' rendezvous messages here; the repair pipeline runs its probes through run().
// Unit-tested in tests/realexec/agent/live_world_parts_test.cc.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policies/api/action.h"
#include "policies/api/cluster_view.h"
#include "policies/api/event.h"
#include "policies/api/ids.h"
#include "policies/api/time.h"
#include "realexec/controller/agent_requests.h"
#include "realexec/controller/machine_link.h"
#include "realexec/controller/probe_relays.h"
#include "realexec/live_config.h"
#include "realexec/net/messages.h"
#include "realexec/net/reactor.h"

namespace faultline::live {

class StopTests {
 public:
  // What the tests read and act on, owned by the world.
  struct Job {
    const LiveConfig& config;
    const ClusterView& cluster;
    Reactor& reactor;
    MachineLink& link;
    AgentRequests& requests;
    std::function<Instant()> now;
    std::function<MachineSet()> job_machines;  // the machines in the job's slots
    std::function<void(std::string_view)> note;
    std::function<void(ActionId, bool ok, const std::string&, Instant started)> outcome;
    std::function<void(ActionId, const std::string& why, Instant t)> refuse;
    std::function<void(Event)> deliver;
  };

  explicit StopTests(Job job) : j_(std::move(job)) {}

  // The actions, after act()'s contract refusals: their outcome and result event.
  void probe(ActionId id, const RunProbe& a);
  void capture(ActionId id);
  void replay(ActionId id, const RunReplay& a);
  void inspect(const EnableInspection& a);
  // The inspections enabled (every agent that connects is told them).
  const std::map<std::string, double>& inspections() const { return probes_.inspections(); }

  // Runs `test` on `machines` (bit-wise and stress compared with a reference run on this
  // host); `done` gets the machines that failed, whether one timed out, and details.
  // inter_all_gather's rank 0 listens on `master_port` (0: the job's master_port + 100);
  // `timed` hears each machine's own time of the collective, when its probe reported one.
  using ProbeDone =
      std::function<void(const MachineSet& failed, bool timed_out, const std::string& details)>;
  void run(ProbeKind test, const MachineSet& machines, Duration deadline, ProbeDone done,
           int master_port = 0, std::function<void(MachineId, double)> timed = nullptr);
  // A relayed rendezvous of an inter_all_gather probe (throws BadMessage when it is no
  // running probe's rank 0).
  void rendezvous(MachineId m, const AgentRendezvous& msg);

 private:
  // RunProbe::groups: one inter_all_gather per group, all at once, each its own rendezvous.
  void grouped_probe(ActionId id, const RunProbe& a);
  // A capture that agents with late heartbeats did not answer (machine -> seconds silent).
  void silent_capture(ActionId id, const std::map<MachineId, double>& silent, Instant t);
  // Runs the reference computation (bit-wise probe or replay) on the controller host.
  void run_reference(std::vector<std::string> argv,
                     std::function<void(std::optional<std::string>)> done);

  Job j_;
  ProbeRelays probes_;  // relayed rendezvous of inter_all_gather probes, the inspections enabled
};

}  // namespace faultline::live
