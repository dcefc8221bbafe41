// The controller's operator clients (`faultline live inject|update|status|stop`): their
// requests, and replies that fit a frame (the status document in parts).
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "realexec/controller/controller_internal.h"
#include "realexec/controller/live_controller.h"
#include "traces/config.h"

namespace faultline::live {

using nlohmann::json;
using namespace controller_detail;

namespace {

// Injectable faults and whether each leaves the machine broken until it is evicted.
const std::map<std::string, bool>& fault_kinds() {
  static const std::map<std::string, bool> kinds = {
      {"kill", false},        {"stop", true},    {"crash", false}, {"hang", false},
      {"nan", false},         {"slow", true},    {"sdc", true},    {"nic_down", true},
      {"machine_down", true}, {"repair", false}, {"warn", false}};
  return kinds;
}

// Each status_part's items, dumped, at most this many bytes: a part is well under the 1 MiB
// frame (kMaxFrameBytes) whatever the document holds.
constexpr std::size_t kStatusPartBytes = 256 << 10;

std::size_t dumped_size(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace).size();
}

std::string frame_limit_error(std::size_t bytes) {
  return "the reply is " + std::to_string(bytes) + " bytes, over the " +
         std::to_string(kMaxFrameBytes) + "-byte frame limit";
}

// Moves the items of every top-level array of `st` into status_part messages of request
// `req`, each under kStatusPartBytes (an item over it alone: one part of its own, refused when
// over a frame); the arrays stay in `st`, empty. Order: the document's keys, then the items'.
std::vector<json> status_parts(json& st, const json& req) {
  std::vector<json> parts;
  for (auto& [field, value] : st.items()) {
    if (!value.is_array() || value.empty()) continue;
    json items = json::array();
    std::size_t bytes = 0;
    for (auto& item : value) {
      const std::size_t n = dumped_size(item) + 1;
      if (!items.empty() && bytes + n > kStatusPartBytes) {
        parts.push_back(
            {{"type", "status_part"}, {"req", req}, {"field", field}, {"items", items}});
        items = json::array();
        bytes = 0;
      }
      items.push_back(std::move(item));
      bytes += n;
    }
    parts.push_back({{"type", "status_part"}, {"req", req}, {"field", field}, {"items", items}});
    value = json::array();
  }
  return parts;
}
}  // namespace

void Controller::send_reply(Session& s, const json& reply) {
  // A reply over the frame limit would be dropped by the wire without a word: the client is
  // told in one line instead.
  const std::size_t bytes = dumped_size(reply);
  if (bytes <= kMaxFrameBytes) {
    s.conn->send(reply);
    return;
  }
  s.conn->send(json{{"type", "done"},
                    {"req", reply.value("req", json(0))},
                    {"ok", false},
                    {"detail", frame_limit_error(bytes)}});
}

void Controller::send_status(Session& s, const json& req, bool parts) {
  json done{
      {"type", "done"}, {"req", req}, {"ok", true}, {"detail", ""}, {"status", world_->status()}};
  const std::size_t bytes = dumped_size(done);
  if (bytes <= kMaxFrameBytes) return s.conn->send(done), void();
  if (!parts)
    return send_reply(s, {{"type", "done"},
                          {"req", req},
                          {"ok", false},
                          {"detail", "status: " + frame_limit_error(bytes) +
                                         "; a client of this release takes it in parts"}});
  if (bytes > kMaxQueuedBytes / 2)
    return send_reply(s, {{"type", "done"},
                          {"req", req},
                          {"ok", false},
                          {"detail", "status: the document is " + std::to_string(bytes) +
                                         " bytes, more than a client's connection may queue"}});
  const std::vector<json> pieces = status_parts(done["status"], req);
  for (const json& p : pieces) send_reply(s, p);
  done["status_parts"] = pieces.size();
  send_reply(s, done);
}

void Controller::on_client(std::uint64_t sid, Session& s, const ClientRequest& request) {
  auto reply = [&](bool ok, const std::string& detail, json extra = json::object()) {
    extra["type"] = "done";
    extra["req"] = request.req;
    extra["ok"] = ok;
    extra["detail"] = detail;
    send_reply(s, extra);
  };
  if (const auto* st = std::get_if<StatusRequest>(&request.body))
    return send_status(s, request.req, st->parts);
  if (s.read_only) {
    note_refusal(s, "a read-only session may only ask for status");
    return reply(false, "refused: a read-only session may only ask for status");
  }
  if (std::holds_alternative<StopRequest>(request.body)) {
    reply(true, "stopping");
    return shutdown("stopped by an operator");
  }
  if (const auto* u = std::get_if<UpdateRequest>(&request.body)) {
    if (!config_.job.versions.count(u->version))
      return reply(false, "update: version: expected one of job.versions");
    world_->request_code_update(u->version, u->urgent);
    return reply(true, "code update " + u->version + " requested");
  }
  const auto& in = std::get<InjectRequest>(request.body);
  const MachineId m = machine_id(in.machine);
  if (m == kNoMachine)
    return reply(false, "inject: machine: expected a machine name from the config");
  auto k = fault_kinds().find(in.fault);
  if (k == fault_kinds().end())
    return reply(false,
                 "inject: fault: expected "
                 "kill|stop|crash|hang|nan|slow|sdc|nic_down|machine_down|repair|warn");
  if (!connected(m)) return reply(false, "inject: machine " + in.machine + " is not connected");
  if (in.fault == "repair") {
    // Clear the machine's injected faults, then return it to the pool if evicted.
    send(m,
         json{{"type", "inject"}, {"req", kOwnReqBase + 1}, {"fault", in.fault}, {"detail", ""}});
    const bool pooled = world_->repaired(m);
    return reply(true, in.machine + " repaired" + (pooled ? "; back in the standby pool" : ""));
  }
  if (auto why = inject_detail_error(in.fault, in.detail))
    return reply(false, "inject: detail: " + *why);
  if (in.fault == "warn") {
    // A failure predictor's warning, which the controller sends (the agents have none):
    // nothing is done on the machine.
    const double lead = in.detail.empty() ? kDefaultWarnLeadS : std::stod(in.detail);
    world_->warn(m, lead);
    return reply(true, "warn injected on " + in.machine + ": a failure in " +
                           traces::json_brief(lead) + " s");
  }
  // Answered once the agent applied it: the operator's "injected" and the log's fault
  // record both mean it happened.
  world_->inject(
      m, in.fault, in.detail, k->second,
      [this, sid, req = request.req, fault = in.fault, name = in.machine](bool ok,
                                                                          const std::string& why) {
        Session* s = sessions_.find(sid);
        if (!s || !s->open()) return;
        s->conn->send(json{{"type", "done"},
                           {"req", req},
                           {"ok", ok},
                           {"detail", ok ? fault + " injected on " + name
                                         : "inject: the agent of " + name + " refused: " + why}});
      });
}

}  // namespace faultline::live
