// `faultline live ...`: the controller and its operator commands.
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/flag_table.h"
#include "policies/builtin.h"
#include "realexec/cli.h"
#include "realexec/controller/live_controller.h"
#include "realexec/launch/launcher.h"
#include "realexec/live_config.h"
#include "realexec/net/auth.h"
#include "realexec/net/messages.h"
#include "realexec/net/wire.h"
#include "traces/time_phases.h"

namespace faultline::live {

namespace {

using nlohmann::json;

const char* kUsage =
    "usage: faultline live run CONFIG [--fresh] [--duration SECONDS]\n"
    "       faultline live inject CONFIG --machine NAME --fault KIND [--detail TEXT]\n"
    "       faultline live update CONFIG --version NAME [--deferred]\n"
    "       faultline live status CONFIG [--json]\n"
    "       faultline live stop CONFIG\n"
    "       faultline live launch CONFIG [--via local|ssh|slurm] [options]   (--help: its "
    "options)\n"
    "       faultline live slurm-config CONFIG [--slurm-job ID] [--out FILE]\n"
    "\n"
    "run     runs the controller: the config's policy stack against the job on the\n"
    "        config's machines (start `faultline agent CONFIG --name NAME` on each).\n"
    "        Resumes from STATE_DIR/journal.json when present (--fresh discards it);\n"
    "        the event log is STATE_DIR/events.jsonl. SIGTERM stops the controller only\n"
    "        (agents keep the job running for a restarted controller); `stop` ends the run.\n"
    "inject  injects a fault through the machine's agent and records it as ground truth:\n"
    "        kill | stop | crash | hang | nan | slow | sdc | nic_down | machine_down | repair\n"
    "update  asks the policy for a code update (urgent unless --deferred)\n"
    "status  prints the controller's view: the run, ETTR so far, storage (ok, or failing\n"
    "        since when, with records pending and lost), every machine by state, the pool,\n"
    "        recent incidents and their phase (--json: the same as JSON)\n"
    "stop    writes the summary (measured ETTR), shuts the agents down and exits\n"
    "launch  starts an agent for every machine, locally, over ssh or as Slurm job steps, and\n"
    "        restarts them\n"
    "slurm-config  writes CONFIG with the spare nodes of a Slurm allocation as standbys, for\n"
    "        the controller and `launch --via slurm` (--help: how)\n"
    "\n"
    "exit status of run: 0 when stopped or the job finished, 3 when the policy ended the run\n"
    "(the same incident kept recurring: code or data at fault, do not requeue), 4 when event\n"
    "log records were lost to write failures (a full disk outlasted the in-memory backlog;\n"
    "3 takes precedence), 2 for a bad config or token, 1 for other failures.\n"
    "\n"
    "`faultline live COMMAND --help` lists a command's options.\n";

// The status's account of lost time: productive and every lost phase, in the simulator's
// names and order (traces/time_phases.h). Empty when the reply has none (an older controller).
std::string account_lines(const json& st) {
  if (!st.contains("account") || !st["account"].is_object()) return "";
  const json& a = st["account"];
  const auto num = [](const json& o, const std::string& k) {
    return o.is_object() && o.contains(k) && o[k].is_number() ? o[k].get<double>() : 0.0;
  };
  const json none = json::object();
  const json& lost = a.contains("lost_s") && a["lost_s"].is_object() ? a["lost_s"] : none;
  char buf[96];
  std::snprintf(buf, sizeof buf,
                "time: elapsed %.1f s, productive %.1f s; lost (s):", num(a, "elapsed_s"),
                num(a, "productive_s"));
  std::string out = buf;
  for (std::size_t i = 1; i < kTimePhaseCount; ++i) {
    std::snprintf(buf, sizeof buf, " %s %.1f", kTimePhaseNames[i], num(lost, kTimePhaseNames[i]));
    out += buf;
  }
  return out + "\n";
}

// The operator's table of a status reply. Reads defensively: the reply came off a socket.
std::string status_table(const json& st) {
  auto str = [&](const json& o, const char* k, const std::string& d = "") {
    return o.is_object() && o.contains(k) && o[k].is_string() ? o[k].get<std::string>() : d;
  };
  auto num = [&](const json& o, const char* k, double d = 0) {
    return o.is_object() && o.contains(k) && o[k].is_number() ? o[k].get<double>() : d;
  };
  char buf[256];
  std::ostringstream out;
  std::snprintf(buf, sizeof buf, "%s  run %.0f s, generation %.0f, code %s, step %.0f, %s\n",
                log_stamp().c_str(), num(st, "t_s"), num(st, "gen"),
                str(st, "version", "?").c_str(), num(st, "step", -1),
                st.value("running", false) ? "training" : "not training");
  out << buf;
  std::snprintf(buf, sizeof buf, "ETTR so far %.1f %%   stack %s   incidents %.0f\n",
                100 * num(st, "ettr_so_far"), str(st, "stack", "?").c_str(),
                num(st, "incident_count"));
  out << buf << account_lines(st);
  if (!str(st, "ended_verdict").empty()) out << "RUN ENDED: " << str(st, "ended_verdict") << "\n";
  if (st.contains("storage") && st["storage"].is_object()) {
    const json& sto = st["storage"];
    const json none = json::object();
    const json& ev =
        sto.contains("event_log") && sto["event_log"].is_object() ? sto["event_log"] : none;
    const json& jo = sto.contains("journal") && sto["journal"].is_object() ? sto["journal"] : none;
    const bool ev_failing = ev.value("failing", false) == true,
               jo_failing = jo.value("failing", false) == true;
    if (!ev_failing && !jo_failing) {
      out << "storage: ok";
      if (num(ev, "lost") > 0) {
        std::snprintf(buf, sizeof buf, " (%.0f event log records lost in earlier write failures)",
                      num(ev, "lost"));
        out << buf;
      }
      out << "\n";
    }
    if (ev_failing) {
      std::snprintf(
          buf, sizeof buf,
          "storage: FAILING since %s (%.0f s): event log %.0f records pending, %.0f lost: ",
          str(ev, "since", "?").c_str(), num(ev, "failing_for_s"), num(ev, "pending"),
          num(ev, "lost"));
      out << buf << str(ev, "last_error").substr(0, 200) << "\n";
    }
    if (jo_failing) {
      std::snprintf(
          buf, sizeof buf,
          "storage: FAILING since %s (%.0f s): journal not saved (the previous one stays): ",
          str(jo, "since", "?").c_str(), num(jo, "failing_for_s"));
      out << buf << str(jo, "last_error").substr(0, 200) << "\n";
    }
  }
  const json standby =
      st.contains("standby") && st["standby"].is_array() ? st["standby"] : json::array();
  out << "\nMACHINE          STATE                   CONNECTED  STRIKES\n";
  if (st.contains("machines") && st["machines"].is_array())
    for (const auto& m : st["machines"]) {
      std::snprintf(buf, sizeof buf, "%-16s %-23s %-10s %.0f\n", str(m, "machine", "?").c_str(),
                    str(m, "state", "?").c_str(), m.value("connected", false) ? "yes" : "NO",
                    num(m, "strikes"));
      out << buf;
    }
  out << "standby pool: " << standby.size() << "\n";
  if (st.contains("replicas") && st["replicas"].is_object()) {
    const json& rp = st["replicas"];
    std::string joining;
    if (rp.contains("joining") && rp["joining"].is_array())
      for (const auto& r : rp["joining"]) joining += " " + r.dump();
    std::snprintf(buf, sizeof buf,
                  "replica groups: %s, %.0f of %.0f replicas train, quorum %.0f%s\n",
                  rp.value("enabled", false) ? "on" : "off (every failure stops the job)",
                  num(rp, "live"), num(rp, "replicas"), num(rp, "quorum"),
                  joining.empty() ? "" : (", rejoining:" + joining).c_str());
    out << buf;
  }
  if (st.contains("incidents") && st["incidents"].is_array() && !st["incidents"].empty()) {
    out << "\nINCIDENT  BEGAN (s)  LASTED (s)  PHASE                   CAUSE\n";
    int i = static_cast<int>(num(st, "incident_count")) - static_cast<int>(st["incidents"].size());
    for (const auto& in : st["incidents"]) {
      const double began = num(in, "began_s");
      const bool resolved = in.contains("resolved_s") && in["resolved_s"].is_number();
      const double lasted = (resolved ? in["resolved_s"].get<double>() : num(st, "t_s")) - began;
      std::snprintf(buf, sizeof buf, "%-9d %-10.1f %-11.1f %-23s ", ++i, began, lasted,
                    str(in, "phase", "?").c_str());
      out << buf << str(in, "cause").substr(0, 100) << "\n";
    }
  }
  return out.str();
}

// A status document that came in parts (realexec/PROTOCOL.md, "Status in parts"): each
// status_part's items appended to its field, then put into the done's document, whose arrays
// the controller left empty. Read defensively: the parts came off a socket.
class StatusParts {
 public:
  void add(const json& m) {
    // The controller sends no more than a connection may queue (16 MiB, 256 KiB a part).
    if (++received_ > kMaxParts) bad("status_part: more than " + std::to_string(kMaxParts));
    const std::string field = need_string(m, "field", 64);
    if (!m.contains("items") || !m["items"].is_array()) bad("status_part: items: expected a list");
    json& into = acc_[field];
    if (into.is_null()) into = json::array();
    for (const auto& item : m["items"]) into.push_back(item);
  }
  // The whole document: `st` (the done's) with the parts' items; throws BadMessage when the
  // done announces another number of parts than came.
  json whole(const json& done) const {
    json st = done["status"];
    const std::int64_t announced = opt_int(done, "status_parts", 0, kMaxParts).value_or(0);
    if (announced != received_)
      bad("status: " + std::to_string(announced) + " parts announced, " +
          std::to_string(received_) + " received");
    if (!st.is_object()) return st;
    for (const auto& [field, items] : acc_.items()) {
      json& f = st[field];
      json all = items;
      if (f.is_array())
        for (const auto& item : f) all.push_back(item);
      f = std::move(all);
    }
    return st;
  }

 private:
  static constexpr std::int64_t kMaxParts = 128;
  std::int64_t received_ = 0;
  json acc_ = json::object();
};

// `faultline live`'s own usage errors (before a command has its table).
int usage_error(const std::string& msg) {
  return cli::FlagTable("faultline live", "faultline live COMMAND CONFIG [options]")
      .usage_error(msg);
}

// The options of the operator commands, each command's table filling its part.
struct LiveArgs {
  std::string config;
  bool fresh = false, deferred = false, as_json = false;
  double duration = 0;
  std::string machine, fault, detail, version;
};

// The table of command `cmd` (run, inject, update, status or stop); CONFIG is its one argument.
cli::FlagTable command_table(const std::string& cmd, LiveArgs* a) {
  struct Text {
    const char *name, *usage, *about;
  };
  static const Text kTexts[] = {
      {"run", "faultline live run CONFIG [--fresh] [--duration SECONDS]",
       "Runs the controller: the config's policy stack against the job on the config's\n"
       "machines (start `faultline agent CONFIG --name NAME` on each). Resumes from\n"
       "STATE_DIR/journal.json when present; the event log is STATE_DIR/events.jsonl. SIGTERM\n"
       "stops the controller only (agents keep the job running for a restarted controller);\n"
       "`faultline live stop` ends the run."},
      {"inject", "faultline live inject CONFIG --machine NAME --fault KIND [--detail TEXT]",
       "Injects a fault through the machine's agent and records it as ground truth."},
      {"update", "faultline live update CONFIG --version NAME [--deferred]",
       "Asks the policy for a code update (urgent unless --deferred)."},
      {"status", "faultline live status CONFIG [--json]",
       "Prints the controller's view: the run, ETTR so far, storage (ok, or failing since\n"
       "when, with records pending and lost), every machine by state, the pool, recent\n"
       "incidents and their phase."},
      {"stop", "faultline live stop CONFIG",
       "Writes the summary (measured ETTR), shuts the agents down and exits."},
  };
  const Text* text = kTexts;
  while (text->name != cmd) ++text;
  cli::FlagTable t("faultline live " + cmd, text->usage, text->about);
  t.positional(&a->config);
  if (cmd == "run") {
    t.toggle("--fresh", "discard STATE_DIR/journal.json and start anew", &a->fresh);
    t.value("--duration", "SECONDS", "a positive number of seconds",
            "stop the run after SECONDS (default: run until stopped)",
            [a](const std::string& v) { return cli::parse_double(v, 1e-9, 1e12, &a->duration); });
    t.epilog(
        "exit status: 0 when stopped or the job finished, 3 when the policy ended the run\n"
        "(the same incident kept recurring: code or data at fault, do not requeue), 4 when\n"
        "event log records were lost to write failures (a full disk outlasted the in-memory\n"
        "backlog; 3 takes precedence), 2 for a bad config or token, 1 for other failures.");
  } else if (cmd == "inject") {
    t.text("--machine", "NAME", "the machine whose agent injects it (required)", &a->machine);
    t.text("--fault", "KIND",
           "kill | stop | crash | hang | nan | slow | sdc | nic_down | machine_down |\n"
           "repair (required)",
           &a->fault);
    t.text("--detail", "TEXT", "recorded with the fault", &a->detail);
  } else if (cmd == "update") {
    t.text("--version", "NAME", "the version to run (required)", &a->version);
    t.toggle("--deferred", "a non-urgent update (the policy may defer it)", &a->deferred);
  } else if (cmd == "status") {
    t.toggle("--json", "the same as JSON", &a->as_json);
  }
  return t;
}

// Sends one request as an operator client and prints the reply. Returns the exit code.
// `read_only`: authenticate with the status credential (status_token_file).
int client_request(const LiveConfig& config, json request, bool read_only = false,
                   bool as_json = true) {
  std::string token, err;
  if (!load_token(read_only ? config.status_token_file : config.token_file, &token, &err)) {
    std::cerr << "faultline live: " << err << "\n";
    return 2;
  }
  PeerHandshake handshake(read_only ? "client-read" : "client", "");
  Reactor reactor;
  const int fd = connect_tcp(config.controller_host, config.controller_port, &err);
  if (fd < 0) {
    std::cerr << "faultline live: cannot reach the controller at " << config.controller_host << ":"
              << config.controller_port << ": " << err << "\n";
    return 1;
  }
  int rc = 1;
  StatusParts parts;
  std::unique_ptr<Conn> conn;
  conn = std::make_unique<Conn>(
      reactor, fd, config.controller_host,
      Conn::Handlers{[&](const json& m) {
                       // The controller's answers are decoded like any other input.
                       try {
                         const std::string type = need_string(m, "type", 64);
                         if (type == "challenge") {
                           auto answer = handshake.answer(token, decode_challenge(m));
                           if (!answer) {
                             std::cerr
                                 << "faultline live: the controller at " << config.controller_host
                                 << ":" << config.controller_port
                                 << " failed authentication: its proof does not match the token\n";
                             rc = 1;
                             reactor.stop();
                             return;
                           }
                           conn->send(*answer);
                         } else if (type == "welcome" && handshake.verified()) {
                           request["req"] = 1;
                           conn->send(request);
                         } else if (type == "refused") {
                           std::cerr << "faultline live: refused: "
                                     << opt_text(m, "reason", kMaxText).value_or("") << "\n";
                           reactor.stop();
                         } else if (!handshake.verified()) {
                           std::cerr << "faultline live: the controller sent '" << type
                                     << "' before proving the token; not talking to it\n";
                           rc = 1;
                           reactor.stop();
                         } else if (type == "status_part") {
                           parts.add(m);
                         } else if (type == "done") {
                           rc = opt_bool(m, "ok", false) ? 0 : 1;
                           if (m.contains("status")) {
                             const json st = parts.whole(m);
                             std::cout << (as_json ? st.dump(2) + "\n" : status_table(st));
                           } else {
                             (rc == 0 ? std::cout : std::cerr)
                                 << opt_text(m, "detail", kMaxText).value_or("") << "\n";
                           }
                           reactor.stop();
                         }
                       } catch (const BadMessage& e) {
                         std::cerr << "faultline live: the controller sent an invalid message: "
                                   << e.reason << "\n";
                         rc = 1;
                         reactor.stop();
                       }
                     },
                     [&](const std::string& why) {
                       if (!reactor.stopped())
                         std::cerr << "faultline live: connection closed: " << why << "\n";
                       reactor.stop();
                     }},
      true);
  conn->send(handshake.hello(kProtocolVersion));
  // An injection is answered once its agent applied it (the agent's own deadline is 15 s).
  const double answer_s = request.value("type", "") == "inject" ? 20 : 10;
  reactor.add_timer(Duration::seconds(answer_s), [&, answer_s] {
    std::cerr << "faultline live: the controller did not answer within " << answer_s << " s\n";
    reactor.stop();
  });
  reactor.run();
  return rc;
}

}  // namespace

int live_main(const std::vector<std::string>& args) {
  if (args.empty() || cli::is_help(args[0])) {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  const std::string cmd = args[0];
  if (cmd == "launch") return launch_main(args);
  if (cmd == "slurm-config") return slurm_config_main(args);
  if (cmd != "run" && cmd != "inject" && cmd != "update" && cmd != "status" && cmd != "stop")
    return usage_error("unknown subcommand \"" + cmd + "\"");
  LiveArgs a;
  const cli::FlagTable table = command_table(cmd, &a);
  if (const int rc = table.parse({args.begin() + 1, args.end()}); rc >= 0) return rc;
  if (a.config.empty()) return table.usage_error("expected a CONFIG file");
  const Registry registry = policies::builtin_registry();
  LiveConfig config;
  try {
    config = load_live_config(a.config, registry);
  } catch (const LiveConfigError& e) {
    std::cerr << "faultline: " << e.what() << "\n";
    return 2;
  }
  if (cmd == "run") {
    try {
      Reactor reactor;
      Controller controller(config, registry, reactor, a.fresh);
      return controller.run(a.duration);
    } catch (const std::exception& e) {
      std::cerr << "faultline: " << e.what() << "\n";
      return 2;
    }
  }
  if (cmd == "inject") {
    if (a.machine.empty() || a.fault.empty())
      return table.usage_error("--machine and --fault are required");
    return client_request(
        config,
        json{{"type", "inject"}, {"machine", a.machine}, {"fault", a.fault}, {"detail", a.detail}});
  }
  if (cmd == "update") {
    if (a.version.empty()) return table.usage_error("--version is required");
    return client_request(
        config, json{{"type", "update"}, {"version", a.version}, {"urgent", !a.deferred}});
  }
  // status asks with the read-only credential when the config has one.
  json request{{"type", cmd}};
  if (cmd == "status") request["parts"] = true;  // a document over one frame comes in parts
  return client_request(config, request, cmd == "status" && !config.status_token_file.empty(),
                        a.as_json);
}

}  // namespace faultline::live
