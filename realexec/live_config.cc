#include "realexec/live_config.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "json/strict_object.h"
#include "policies/module.h"
#include "realexec/net/wire.h"

namespace faultline::live {

namespace {

using nlohmann::json;

// The live config's reader, one per JSON object: errors "FILE: PATH: expected ...", thrown
// as LiveConfigError. Each object's keys are checked before its fields are read (only()), so
// that a misspelt key is reported as such rather than as what its absence led to.
using Reader = StrictObject<LiveConfigError>;

std::string resolve(const std::string& dir, const std::string& p) {
  if (p.empty() || std::filesystem::path(p).is_absolute()) return p;
  return (std::filesystem::path(dir) / p).lexically_normal().string();
}

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return false;
  return true;
}

bool valid_host(const std::string& s) {
  if (s.empty() || s.size() > 255 || s.front() == '-') return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '.' || c == '_' || c == ':' || c == '-';
  });
}

bool valid_ssh_destination(const std::string& s) {
  if (s.empty() || s.size() > 255 || s.front() == '-') return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '.' || c == '_' || c == '@' || c == ':' || c == '-';
  });
}

// The PCI bus ids of a machine's GPUs (to match kernel Xid lines), into *out when given.
void read_gpu_pci(Reader& r, std::vector<std::string>* out) {
  const json* g = r.get("gpu_pci");
  if (!g) return;
  if (!g->is_array())
    r.fail(r.at("gpu_pci"), "expected an array of PCI bus id strings, got " + json_type_of(*g) +
                                " " + json_brief(*g));
  *out = r.strings("gpu_pci");
}

LiveMachine read_machine(const json& m, const std::string& path, const std::string& file,
                         const std::string& dir) {
  Reader r(m, path, file);
  r.only({"name", "addr", "workdir", "nic", "gpu_pci", "ssh", "slurm_node"});
  LiveMachine out;
  out.name = r.string("name", "", true);
  if (!valid_name(out.name)) r.fail(r.at("name"), "expected 1-64 characters of [A-Za-z0-9._-]");
  out.addr = r.string("addr", "127.0.0.1");
  // It becomes an ssh destination, a rendezvous address (MASTER_ADDR) and a probe's peer: one
  // host name or IP address (IPv6 as is, no brackets), never a list or a command.
  if (!valid_host(out.addr))
    r.fail(r.at("addr"),
           "expected one host name or IP address: 1-255 characters of [A-Za-z0-9._:-], not "
           "starting with '-'");
  const std::string workdir = r.string("workdir", "work/" + out.name);
  // Where the agent writes its ranks' files, the fault file and checkpoints: a path.
  if (workdir.empty() || std::any_of(workdir.begin(), workdir.end(),
                                     [](unsigned char ch) { return std::iscntrl(ch) != 0; }))
    r.fail(r.at("workdir"), "expected a non-empty path without control characters");
  out.workdir = resolve(dir, workdir);
  out.nic = r.string("nic", "");
  out.ssh = r.string("ssh", "");
  // It becomes an ssh destination: nothing that ssh could read as an option or a shell as
  // more than a word.
  if (r.has("ssh") && !valid_ssh_destination(out.ssh))
    r.fail(r.at("ssh"),
           "expected [user@]host: 1-255 characters of [A-Za-z0-9._@:-], not starting with '-'");
  out.slurm_node = r.string("slurm_node", "");
  // It becomes srun's --nodelist and scontrol's nodename: one host name, never a list or
  // an expression.
  if (r.has("slurm_node") && (!valid_name(out.slurm_node) || out.slurm_node.front() == '-'))
    r.fail(
        r.at("slurm_node"),
        "expected one Slurm node name: 1-64 characters of [A-Za-z0-9._-], not starting with '-'");
  read_gpu_pci(r, &out.gpu_pci);
  return out;
}

// The Prometheus endpoint's keys; REQUIRES c's controller and token files already read.
void read_metrics(Reader& r, LiveConfig* c) {
  const std::string listen = r.string("metrics_listen", "");
  if (listen.empty()) {
    for (const char* key : {"metrics_token_file", "metrics_linger_s"})
      if (r.has(key)) r.fail(r.at(key), "expected only together with metrics_listen");
    return;
  }
  if (!split_host_port(listen, &c->metrics_host, &c->metrics_port) || c->metrics_port < 1)
    r.fail("metrics_listen",
           "expected \"host:port\" with a port in 1..65535, got \"" + listen + "\"");
  if (c->metrics_port == c->controller_port)
    r.fail("metrics_listen", "expected a port other than the controller's (" +
                                 std::to_string(c->controller_port) +
                                 "): the metrics endpoint speaks HTTP, not the control protocol");
  if (const std::string t = r.string("metrics_token_file", ""); !t.empty()) {
    c->metrics_token_file = resolve(c->dir, t);
    // Prometheus sends it in every scrape, in the clear unless behind TLS: it must never be
    // a credential that can do more than read the metrics.
    if (c->metrics_token_file == c->token_file || c->metrics_token_file == c->status_token_file)
      r.fail("metrics_token_file",
             "expected a file of its own (not token_file or status_token_file)");
  }
  c->metrics_linger_s = r.number("metrics_linger_s", 0, 0, 600);
}

// The description, the controller's address and the credential files; REQUIRES c->dir.
void read_controller(Reader& r, LiveConfig* c) {
  c->description = r.string("description", "");
  const std::string ctl = r.string("controller", "127.0.0.1:7700");
  if (!split_host_port(ctl, &c->controller_host, &c->controller_port) || c->controller_port < 1)
    r.fail("controller", "expected \"host:port\" with a port in 1..65535, got \"" + ctl + "\"");
  c->token_file = resolve(c->dir, r.string("token_file", "", true));
  if (const std::string st = r.string("status_token_file", ""); !st.empty()) {
    c->status_token_file = resolve(c->dir, st);
    if (c->status_token_file == c->token_file)
      r.fail("status_token_file",
             "expected a file other than token_file (the read-only credential is its own)");
  }
}

// "machines" (required, at least one), then "standby": each name once across both.
void read_machines(Reader& r, LiveConfig* c) {
  std::set<std::string> names;
  for (const char* key : {"machines", "standby"}) {
    const json* arr = r.get(key);
    if (!arr) {
      if (std::string(key) == "machines") r.fail("machines", "required (an array of machines)");
      continue;
    }
    if (!arr->is_array()) r.fail(key, "expected an array of machines");
    for (size_t i = 0; i < arr->size(); ++i) {
      const std::string path = std::string(key) + "[" + std::to_string(i) + "]";
      LiveMachine m = read_machine((*arr)[i], path, r.file(), c->dir);
      if (!names.insert(m.name).second)
        r.fail(path + ".name", "duplicate machine name \"" + m.name + "\"");
      (std::string(key) == "machines" ? c->machines : c->standby).push_back(std::move(m));
    }
  }
  if (c->machines.empty()) r.fail("machines", "expected at least one machine");
}

// job.versions: each version's argv, a path in argv[0] resolved against c's directory.
void read_versions(Reader& r, LiveConfig* c) {
  const json* versions = r.get("versions");
  if (!versions || !versions->is_object() || versions->empty())
    r.fail("job.versions", "expected an object mapping version names to argv arrays");
  for (const auto& [name, argv] : versions->items()) {
    const std::string path = "job.versions." + name;
    if (!valid_name(name)) r.fail(path, "version names are 1-64 characters of [A-Za-z0-9._-]");
    if (!argv.is_array() || argv.empty()) r.fail(path, "expected a non-empty array of strings");
    std::vector<std::string> args;
    for (size_t i = 0; i < argv.size(); ++i) {
      if (!argv[i].is_string()) r.fail(path + "[" + std::to_string(i) + "]", "expected a string");
      args.push_back(argv[i].get<std::string>());
    }
    if (args[0].find('/') != std::string::npos) args[0] = resolve(c->dir, args[0]);
    c->job.versions[name] = std::move(args);
  }
}

// "job" (required): versions, the parallelism that fills the machines' GPUs, timing and the
// ranks' environment. REQUIRES the machines read.
void read_job(Reader& doc, LiveConfig* c) {
  const json* job = doc.get("job");
  if (!job) doc.fail("job", "required (an object)");
  Reader r(*job, "job", doc.file());
  r.only({"versions", "version", "gpus_per_machine", "tp", "pp", "dp", "master_port",
          "nominal_step_time_s", "env", "replay_steps", "bitwise_steps", "startup_timeout_s",
          "replica_groups", "in_place"});
  read_versions(r, c);
  c->job.version = r.string("version", c->job.versions.begin()->first);
  if (!c->job.versions.count(c->job.version))
    r.fail("job.version", "expected one of the names in job.versions");
  c->job.gpus_per_machine = static_cast<int>(r.integer("gpus_per_machine", 1, 1, 64));
  c->job.tp = static_cast<int>(r.integer("tp", 1, 1, 64));
  c->job.pp = static_cast<int>(r.integer("pp", 1, 1, 1024));
  const int ranks = static_cast<int>(c->machines.size()) * c->job.gpus_per_machine;
  c->job.dp = static_cast<int>(r.integer("dp", 0, 0, 1 << 20));
  if (c->job.dp == 0) c->job.dp = ranks / (c->job.tp * c->job.pp);
  if (c->job.tp * c->job.pp * c->job.dp != ranks)
    r.fail("job", "expected tp * pp * dp = machines * gpus_per_machine = " + std::to_string(ranks));
  if (c->job.gpus_per_machine % c->job.tp != 0)
    r.fail("job.tp", "expected a divisor of gpus_per_machine");
  c->job.master_port = static_cast<int>(r.integer("master_port", 29500, 1024, 65000));
  c->job.nominal_step_time_s = r.number("nominal_step_time_s", 0.2, 1e-3, 3600);
  c->job.startup_timeout_s = r.number("startup_timeout_s", 120, 1, 7 * 86400);
  c->job.replay_steps = static_cast<int>(r.integer("replay_steps", 20, 1, 1000000));
  c->job.bitwise_steps = static_cast<int>(r.integer("bitwise_steps", 1, 1, 1000000));
  c->job.replica_groups = r.boolean("replica_groups", false);
  if (c->job.replica_groups && (c->job.gpus_per_machine != 1 || c->job.tp * c->job.pp != 1))
    r.fail("job.replica_groups",
           "expected gpus_per_machine = tp = pp = 1 (the job library runs one process per "
           "replica)");
  c->job.in_place = r.boolean("in_place", false);
  if (c->job.in_place && c->job.replica_groups)
    r.fail("job.in_place",
           "expected false with job.replica_groups (replica groups rejoin a peer, they restart "
           "no one in place)");
  if (c->job.in_place && c->job.master_port > 64998)
    r.fail("job.in_place", "expected job.master_port + 2 <= 65000 (the in-place re-forms' ports)");
  if (c->job.replica_groups && c->job.dp > 99)
    r.fail("job.replica_groups",
           "expected at most 99 replicas (each hosts a store on "
           "job.master_port + 1 + its id)");
  if (const json* e = r.get("env")) {
    if (!e->is_object()) r.fail("job.env", "expected an object of strings");
    for (const auto& [k, v] : e->items()) {
      if (!v.is_string()) r.fail("job.env." + k, "expected a string");
      c->job.env[k] = v.get<std::string>();
    }
  }
}

// The controller's ports (the control port, metrics_listen's) and the job's (job.master_port,
// where rank 0 takes registrations; with replica groups each replica's store above it; grouped
// probes from job.master_port + 100, a replay's groups from job.master_port + 200) never meet: a
// rank that binds the controller's port fails every start, and the job is relaunched without end.
// REQUIRES the controller, the metrics endpoint, the machines and the job read.
void check_ports(const Reader& r, const LiveConfig& c) {
  const int mp = c.job.master_port;
  const int machines = static_cast<int>(c.machines.size() + c.standby.size());
  struct Range {
    int lo, hi;
    std::string what;
  };
  std::vector<Range> job{{mp, mp, "job.master_port " + std::to_string(mp)}};
  if (c.job.in_place)
    job.push_back({mp + 1, mp + 2,
                   "the in-place re-forms' ports job.master_port + 1 and + 2 (" +
                       std::to_string(mp + 1) + "-" + std::to_string(mp + 2) + ")"});
  if (c.job.replica_groups)
    job.push_back({mp + 1, mp + c.job.dp,
                   "the replicas' stores on job.master_port + 1 + id (" + std::to_string(mp + 1) +
                       "-" + std::to_string(mp + c.job.dp) + ")"});
  job.push_back({mp + 100, mp + 99 + machines,
                 "the grouped probes' ports from job.master_port + 100 (" +
                     std::to_string(mp + 100) + "-" + std::to_string(mp + 99 + machines) + ")"});
  job.push_back({mp + 200, mp + 199 + machines,
                 "the replays' ports from job.master_port + 200 (" + std::to_string(mp + 200) +
                     "-" + std::to_string(mp + 199 + machines) + ")"});
  const std::vector<std::pair<std::string, int>> own{{"controller", c.controller_port},
                                                     {"metrics_listen", c.metrics_port}};
  for (const auto& [field, port] : own) {
    if (port <= 0) continue;
    for (const Range& j : job)
      if (port >= j.lo && port <= j.hi)
        r.fail("job.master_port", "expected the job's ports apart from the controller's: " + field +
                                      "'s port " + std::to_string(port) + " is one of " + j.what);
  }
}

// policy.params: numbers, and module names for a module choice (an index becomes its name in
// Params::resolve).
void read_param_overrides(const Reader& r, const json& params, const PolicyInfo& info,
                          LiveConfig* c) {
  for (const auto& [k, v] : params.items()) {
    // A module is chosen by name, as in scenarios ("localization": "bisection").
    const ParamSpec* spec = info.find_param(k);
    if (v.is_string() && spec && !spec->choices.empty()) {
      const int i = spec->choice_index(v.get<std::string>());
      if (i < 0) {
        std::string all;
        for (const auto& ch : spec->choices) all += (all.empty() ? "" : "|") + ch;
        r.fail("policy.params." + k,
               "expected one of " + all + ", got \"" + v.get<std::string>() + "\"");
      }
      c->param_overrides[k] = v.get<std::string>();
      continue;
    }
    if (!v.is_number())
      r.fail("policy.params." + k, spec && !spec->choices.empty()
                                       ? "expected a module name or its index"
                                       : "expected a number");
    c->param_overrides[k] = v.get<double>();
  }
}

// A module live mode cannot run (policies::live_refusal) is refused here, at the start,
// rather than found out at its first decision: the run would not be the stack it names.
void refuse_simulator_only(const Reader& r, const PolicyInfo& info, const LiveConfig& c) {
  for (const auto& [param, module] : c.params.choices())
    if (auto why = policies::live_refusal(param, module, c.job.replica_groups, c.job.in_place))
      r.fail("policy.params." + param,
             "expected a module that runs live, got \"" + module + "\": " + *why);
}

// "policy": the stack (a registered one) and its parameters, resolved against what it declares.
void read_policy(Reader& r, const Registry& registry, LiveConfig* c) {
  const json* params = nullptr;
  if (const json* policy = r.get("policy")) {
    Reader p(*policy, "policy", r.file());
    p.only({"stack", "params"});
    c->stack = p.string("stack", c->stack);
    params = p.get("params");
    if (params && !params->is_object())
      r.fail("policy.params", "expected an object of numbers and module names");
  }
  const PolicyInfo* info = registry.find(c->stack);
  if (!info) {
    std::string known;
    for (const auto& n : registry.names()) known += (known.empty() ? "" : ", ") + n;
    r.fail("policy.stack", "expected a registered stack (" + known + "), got \"" + c->stack + "\"");
  }
  if (params) read_param_overrides(r, *params, *info, c);
  if (auto err = Params::resolve(info->params, c->param_overrides, &c->params))
    r.fail("policy.params", *err);
  refuse_simulator_only(r, *info, *c);
}

// The seed, the state directory, the programs to run and the heartbeat timing.
void read_runtime(Reader& r, LiveConfig* c) {
  c->seed = r.unsigned_integer("seed", c->seed);
  c->state_dir = resolve(c->dir, r.string("state_dir", "state"));
  c->trainjob_bin = resolve(c->dir, r.string("trainjob_bin", "", true));
  c->probe_bin = resolve(c->dir, r.string("probe_bin", ""));
  c->heartbeat_s = r.number("heartbeat_s", 1, 0.05, 60);
  c->heartbeat_timeout_s = r.number("heartbeat_timeout_s", 5, 0.2, 600);
  c->stalled_agent_timeout_s =
      r.number("stalled_agent_timeout_s", std::max(60.0, c->heartbeat_timeout_s), 0.2, 3600);
}

// "repair": when the controller checks a lost machine again, and when it retires it.
void read_repair(Reader& doc, LiveConfig* c) {
  const json* repair = doc.get("repair");
  if (!repair) return;
  Reader r(*repair, "repair", doc.file());
  r.only({"check_after_s", "retry_after_s", "max_checks", "retire_after"});
  c->repair.check_after_s = r.number("check_after_s", c->repair.check_after_s, 0, 86400);
  c->repair.retry_after_s = r.number("retry_after_s", c->repair.retry_after_s, 0.1, 86400);
  c->repair.max_checks = static_cast<int>(r.integer("max_checks", c->repair.max_checks, 1, 1000));
  c->repair.retire_after =
      static_cast<int>(r.integer("retire_after", c->repair.retire_after, 0, 1000));
}

// "slurm_standby": the template of the standbys `live slurm-config` adds for spare nodes.
void read_slurm_standby(Reader& doc, LiveConfig* c) {
  const json* standby = doc.get("slurm_standby");
  if (!standby) return;
  Reader r(*standby, "slurm_standby", doc.file());
  r.only({"workdir", "nic", "gpu_pci"});
  c->slurm_standby.given = true;
  c->slurm_standby.workdir = r.string("workdir", c->slurm_standby.workdir);
  // {node} is the only placeholder: any other brace is a typo that would name one
  // directory for every node.
  std::string rest = c->slurm_standby.workdir;
  for (std::size_t at; (at = rest.find("{node}")) != std::string::npos;) rest.erase(at, 6);
  if (c->slurm_standby.workdir.empty() || rest.find_first_of("{}") != std::string::npos)
    r.fail("slurm_standby.workdir",
           "expected a path in which {node} is the only placeholder, got \"" +
               c->slurm_standby.workdir + "\"");
  c->slurm_standby.nic = r.string("nic", "");
  read_gpu_pci(r, &c->slurm_standby.gpu_pci);
}

}  // namespace

ClusterSpec LiveConfig::cluster_spec() const {
  ClusterSpec s;
  s.machines = static_cast<int>(machines.size());
  s.gpus_per_machine = job.gpus_per_machine;
  s.rack_size = std::max(1, s.machines);
  s.racks_per_pod = 1;
  s.spines = 1;
  s.standby_machines = static_cast<int>(standby.size());
  s.storage_hosts = 1;
  s.tp = job.tp;
  s.pp = job.pp;
  s.dp = job.dp;
  return s;
}

std::string LiveConfigError::one_line(const std::string& s) { return json_one_line(s); }

const LiveMachine* LiveConfig::find(const std::string& name) const {
  for (const auto& m : machines)
    if (m.name == name) return &m;
  for (const auto& m : standby)
    if (m.name == name) return &m;
  return nullptr;
}

const LiveMachine& LiveConfig::machine(MachineId m) const {
  const int jobs = static_cast<int>(machines.size());
  return m < jobs ? machines[m] : standby[m - jobs];
}

json parse_strict_json(const std::string& text, const std::string& file) {
  // A repeated key would silently take the last value, and a number out of double range
  // (1e999) throws out_of_range where parse_error was expected: both become the one-line
  // error of any other bad input. The parser callback sees every key of an object before
  // the next object starts, so one set per open object finds a repeat.
  std::vector<std::set<std::string>> open;
  std::vector<std::string> path;
  std::string pending_key;
  auto where = [&] {
    std::string p;
    for (const auto& k : path)
      if (!k.empty()) p += (p.empty() ? "" : ".") + k;
    return p.empty() ? std::string("(top level)") : p;
  };
  const json::parser_callback_t cb = [&](int, json::parse_event_t ev, json& parsed) {
    switch (ev) {
      case json::parse_event_t::object_start:
        open.emplace_back();
        path.push_back(pending_key);
        pending_key.clear();
        break;
      case json::parse_event_t::object_end:
        if (!open.empty()) open.pop_back();
        if (!path.empty()) path.pop_back();
        pending_key.clear();
        break;
      case json::parse_event_t::array_start:
        path.push_back(pending_key);
        pending_key.clear();
        break;
      case json::parse_event_t::array_end:
        if (!path.empty()) path.pop_back();
        pending_key.clear();
        break;
      case json::parse_event_t::key: {
        const std::string k = parsed.get<std::string>();
        if (!open.empty() && !open.back().insert(k).second) {
          path.push_back(k);
          throw LiveConfigError(
              file + ": " + where() +
              ": repeated key (each key once: a repeat would silently replace the first)");
        }
        pending_key = k;
        break;
      }
      case json::parse_event_t::value:
        pending_key.clear();
        break;
    }
    return true;
  };
  try {
    return json::parse(text, cb);
  } catch (const LiveConfigError&) {
    throw;
  } catch (const json::out_of_range& e) {
    throw LiveConfigError(file + ": (top level): expected numbers within double range (" +
                          std::string(e.what()) + ")");
  } catch (const json::exception& e) {
    throw LiveConfigError(file + ": (top level): expected JSON (" + std::string(e.what()) + ")");
  }
}

LiveConfig parse_live_config(const std::string& text, const std::string& file,
                             const Registry& registry) {
  const json doc = parse_strict_json(text, file);
  Reader r(doc, "", file);
  r.only({"description",
          "controller",
          "token_file",
          "status_token_file",
          "metrics_listen",
          "metrics_token_file",
          "metrics_linger_s",
          "machines",
          "standby",
          "job",
          "policy",
          "seed",
          "state_dir",
          "trainjob_bin",
          "probe_bin",
          "heartbeat_s",
          "heartbeat_timeout_s",
          "stalled_agent_timeout_s",
          "repair",
          "slurm_standby"});
  LiveConfig c;
  c.file = file;
  c.dir = std::filesystem::path(file).parent_path().string();
  if (c.dir.empty()) c.dir = ".";
  // The sections in the order they are read (the first error found is the one reported).
  read_controller(r, &c);
  read_metrics(r, &c);
  read_machines(r, &c);
  read_job(r, &c);
  check_ports(r, c);
  read_policy(r, registry, &c);
  read_runtime(r, &c);
  read_repair(r, &c);
  read_slurm_standby(r, &c);
  if (c.heartbeat_timeout_s <= c.heartbeat_s)
    r.fail("heartbeat_timeout_s", "expected more than heartbeat_s");
  if (c.stalled_agent_timeout_s < c.heartbeat_timeout_s)
    r.fail("stalled_agent_timeout_s", "expected at least heartbeat_timeout_s");
  return c;
}

LiveConfig load_live_config(const std::string& path, const Registry& registry) {
  std::ifstream in(path);
  if (!in) throw LiveConfigError(path + ": (file): cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_live_config(ss.str(), path, registry);
}

}  // namespace faultline::live
