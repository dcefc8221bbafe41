// Slurm's side of the launcher: an allocation's job id and nodes, the machines' nodes, a
// drain on eviction, and the effective config of an allocation (`faultline live
// slurm-config`) (launcher.h).
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "policies/builtin.h"
#include "realexec/launch/launch_internal.h"
#include "realexec/launch/launcher.h"

namespace faultline::live {

std::string resolve_slurm_job(std::string* job) {
  const char* env_job = std::getenv("SLURM_JOB_ID");
  if (job->empty() && env_job) *job = env_job;
  if (job->empty())
    return "not inside a Slurm allocation (no SLURM_JOB_ID; run it under salloc or sbatch, or give "
           "--slurm-job)";
  if (job->find_first_not_of("0123456789_") != std::string::npos)
    return "--slurm-job: expected a job id, got \"" + *job + "\"";
  return "";
}

std::string read_allocation(const std::string& job, std::vector<std::string>* nodes) {
  std::string nodelist;
  const int rc = run_capture({"squeue", "--noheader", "--jobs=" + job, "--format=%N"}, &nodelist);
  if (rc != 0 || nodelist.empty() || nodelist.find('\n') != std::string::npos)
    return "slurm job " + job + ": cannot read its nodes (squeue: " +
           (nodelist.empty() ? "exit " + std::to_string(rc)
                             : nodelist.substr(0, nodelist.find('\n'))) +
           ")";
  std::string hosts;
  if (run_capture({"scontrol", "show", "hostnames", nodelist}, &hosts) != 0)
    return "slurm job " + job + ": scontrol show hostnames " + nodelist + ": " + hosts;
  *nodes = parse_hostnames(hosts);
  return "";
}

std::string slurm_node_of(const LiveMachine& m) {
  return m.slurm_node.empty() ? m.name : m.slurm_node;
}

std::vector<std::string> parse_hostnames(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    const auto e = line.find_last_not_of(" \t\r");
    out.push_back(line.substr(b, e - b + 1));
  }
  return out;
}

std::string check_slurm_nodes(const std::vector<const LiveMachine*>& machines,
                              const std::vector<std::string>& allocation, const std::string& job,
                              std::vector<std::string>* spare) {
  std::map<std::string, std::string> taken;  // node -> machine
  for (const LiveMachine* m : machines) {
    const std::string node = slurm_node_of(*m);
    if (std::find(allocation.begin(), allocation.end(), node) == allocation.end()) {
      std::string nodes;
      for (const auto& a : allocation) nodes += (nodes.empty() ? "" : ",") + a;
      return m->name + ": slurm node \"" + node + "\" is not in allocation " + job +
             " (its nodes: " + (nodes.empty() ? "none" : nodes) + ")";
    }
    if (!taken.emplace(node, m->name).second)
      return m->name + ": slurm node \"" + node + "\" is already machine " + taken[node] + "'s";
  }
  spare->clear();
  for (const auto& a : allocation)
    if (!taken.count(a)) spare->push_back(a);
  return "";
}

std::vector<std::string> drain_command(const std::string& node, const std::string& reason) {
  return {"scontrol", "update", "nodename=" + node, "state=drain", "reason=faultline: " + reason};
}

std::vector<std::string> evicted_by(const LiveConfig& config, const std::string& line,
                                    std::string* reason) {
  std::vector<std::string> out;
  if (line.find("EvictMachines") == std::string::npos) return out;
  const auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("kind", "") != "action" ||
      !j.contains("action") || !j["action"].is_object() ||
      j["action"].value("type", "") != "EvictMachines" || !j["action"].contains("machines") ||
      !j["action"]["machines"].is_array())
    return out;
  *reason = j["action"].value("reason", "");
  for (const auto& id : j["action"]["machines"]) {
    if (!id.is_number_integer()) continue;
    const long i = id.get<long>();
    const long n = static_cast<long>(config.machines.size());
    if (i >= 0 && i < n)
      out.push_back(config.machines[i].name);
    else if (i >= n && i < n + static_cast<long>(config.standby.size()))
      out.push_back(config.standby[i - n].name);
  }
  return out;
}

std::map<std::string, std::string> parse_node_addrs(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  auto field = [](const std::string& l, const std::string& key) -> std::string {
    // At the line's start or after a blank: "Key=" inside another field's value is no key.
    for (std::size_t at = l.find(key + "="); at != std::string::npos;
         at = l.find(key + "=", at + 1)) {
      if (at != 0 && l[at - 1] != ' ' && l[at - 1] != '\t') continue;
      const std::size_t b = at + key.size() + 1;
      return l.substr(b, l.find_first_of(" \t\r", b) - b);
    }
    return "";
  };
  while (std::getline(in, line)) {
    const auto b = line.find_first_not_of(" \t");
    if (b == std::string::npos) continue;
    line = line.substr(b);
    const std::string name = field(line, "NodeName"), addr = field(line, "NodeAddr");
    if (!name.empty() && !addr.empty()) out[name] = addr;
  }
  return out;
}

std::string slurm_effective_config(const std::string& text, const std::string& file,
                                   const std::string& out_file,
                                   const std::vector<SlurmNode>& allocation, const std::string& job,
                                   const Registry& registry, std::vector<std::string>* added) {
  const LiveConfig c = parse_live_config(text, file, registry);
  auto fail = [&](const std::string& field, const std::string& what) {
    throw LiveConfigError(file + ": " + field + ": " + what);
  };
  std::string nodes;
  for (const auto& n : allocation) nodes += (nodes.empty() ? "" : ",") + n.name;
  std::map<std::string, std::string> taken;     // node -> the entry that runs on it
  std::map<std::string, std::string> field_of;  // machine name -> its entry
  for (const char* list : {"machines", "standby"}) {
    const auto& ms = std::string(list) == "machines" ? c.machines : c.standby;
    for (std::size_t i = 0; i < ms.size(); ++i) {
      const std::string field = std::string(list) + "[" + std::to_string(i) + "]";
      const std::string node = slurm_node_of(ms[i]);
      field_of[ms[i].name] = field;
      const std::string key = field + (ms[i].slurm_node.empty() ? ".name" : ".slurm_node");
      if (std::none_of(allocation.begin(), allocation.end(),
                       [&](const SlurmNode& n) { return n.name == node; }))
        fail(key, "expected a node of slurm job " + job + " (its nodes: " +
                      (nodes.empty() ? "none" : nodes) + "), got \"" + node + "\"");
      if (!taken.emplace(node, field).second)
        fail(key, "expected a node no other machine runs on, got \"" + node + "\" (" + taken[node] +
                      "'s)");
    }
  }
  std::string spare;
  for (const auto& n : allocation)
    if (!taken.count(n.name)) spare += (spare.empty() ? "" : ",") + n.name;
  if (!spare.empty() && !c.slurm_standby.given)
    fail("slurm_standby",
         "required: slurm job " + job + " has nodes no machine runs on (" + spare +
             "), which become standbys after this template, e.g. {\"workdir\": "
             "\"/var/tmp/faultline/{node}\"}; or name them in machines or standby");
  auto doc = nlohmann::ordered_json::parse(text);
  if (!doc.contains("standby")) doc["standby"] = nlohmann::ordered_json::array();
  added->clear();
  for (const auto& n : allocation) {
    if (taken.count(n.name)) continue;
    if (const auto it = field_of.find(n.name); it != field_of.end())
      fail(it->second + ".name", "expected a name other than \"" + n.name +
                                     "\": it is a spare node of slurm job " + job +
                                     ", which becomes a standby of that name");
    const bool name_ok = !n.name.empty() && n.name.size() <= 64 && n.name.front() != '-' &&
                         std::all_of(n.name.begin(), n.name.end(), [](unsigned char ch) {
                           return std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.';
                         });
    if (!name_ok)
      fail("slurm_standby",
           "spare node \"" + n.name + "\" of slurm job " + job +
               " cannot name a standby: expected 1-64 characters of [A-Za-z0-9._-]");
    if (n.addr.empty())
      fail("slurm_standby",
           "spare node \"" + n.name + "\" of slurm job " + job + ": expected its NodeAddr");
    std::string workdir = c.slurm_standby.workdir;
    for (std::size_t at; (at = workdir.find("{node}")) != std::string::npos;)
      workdir.replace(at, 6, n.name);
    nlohmann::ordered_json m = {
        {"name", n.name}, {"slurm_node", n.name}, {"addr", n.addr}, {"workdir", workdir}};
    if (!c.slurm_standby.nic.empty()) m["nic"] = c.slurm_standby.nic;
    if (!c.slurm_standby.gpu_pci.empty()) m["gpu_pci"] = c.slurm_standby.gpu_pci;
    doc["standby"].push_back(std::move(m));
    added->push_back(n.name);
  }
  const std::string out = doc.dump(2) + "\n";
  // What every reader of the result will see: valid, and the same paths from its own place.
  const LiveConfig here = parse_live_config(out, file, registry);
  if (!out_file.empty() && out_file != file) {
    const LiveConfig there = parse_live_config(out, out_file, registry);
    auto same = [&](const std::string& field, const std::string& a, const std::string& b) {
      if (a != b)
        fail(field,
             "a relative path (as written or by default), resolved against the config's directory: "
             "expected the output (" +
                 out_file + ") in " + c.dir + ", or an absolute path here");
    };
    same("token_file", here.token_file, there.token_file);
    same("status_token_file", here.status_token_file, there.status_token_file);
    same("metrics_token_file", here.metrics_token_file, there.metrics_token_file);
    same("state_dir", here.state_dir, there.state_dir);
    same("trainjob_bin", here.trainjob_bin, there.trainjob_bin);
    same("probe_bin", here.probe_bin, there.probe_bin);
    for (std::size_t i = 0; i < here.machines.size(); ++i)
      same("machines[" + std::to_string(i) + "].workdir", here.machines[i].workdir,
           there.machines[i].workdir);
    for (std::size_t i = 0; i < here.standby.size(); ++i)
      same(i < c.standby.size() ? "standby[" + std::to_string(i) + "].workdir"
                                : std::string("slurm_standby.workdir"),
           here.standby[i].workdir, there.standby[i].workdir);
    for (const auto& [v, argv] : here.job.versions)
      same("job.versions." + v + "[0]", argv[0], there.job.versions.at(v)[0]);
  }
  return out;
}

}  // namespace faultline::live
