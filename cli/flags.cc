#include "cli/flags.h"

#include <cstdio>

namespace faultline::cli {

std::vector<std::string> SimFlags::scenario_sets() const {
  std::vector<std::string> out = sets;
  if (seed >= 0) out.push_back("seed=" + std::to_string(seed));
  if (replicas > 0) out.push_back("replicas=" + std::to_string(replicas));
  if (allow_unused) out.push_back("policy.allow_unused_params=true");
  return out;
}

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "faultline: %s (see --help)\n", msg.c_str());
  return 2;
}

FlagTable command_table(const std::string& usage, const std::string& about) {
  return FlagTable("faultline", usage, about);
}

void add_sim_flags(FlagTable& t, SimFlags& f, const std::vector<std::string>& formats,
                   const std::string& format_help, const std::string& out_help) {
  t.integer("--replicas", "N", "N >= 1",
            "number of replicas (default: the scenario's \"replicas\")", 1, 1LL << 62, &f.replicas);
  t.integer("--jobs", "J", "J in [1, 4096]",
            "replicas run in parallel as forked processes (default: 1)", 1, 4096, &f.jobs);
  t.integer("--seed", "S", "S >= 0", "scenario seed (default: the scenario's \"seed\")", 0,
            1LL << 62, &f.seed);
  t.texts("--set", "PATH=VALUE",
          "override a scenario field before validation; repeatable.\n"
          "PATH is dotted JSON, e.g. job.pp=4, cluster.machines=2400,\n"
          "policy.params.checkpoint=remote,\n"
          "faults.categories.cuda_error.rate_per_machine_day=0.002\n"
          "(array elements by index or by \"name\"). VALUE is JSON, or a string.",
          &f.sets);
  t.choice("--format", format_help, formats, &f.format);
  t.add({"--out", "DIR", "a directory", out_help, [&f](const std::string& v) {
           if (v.empty()) return std::string("--out: expected a directory");
           f.out_dir = v;
           return std::string();
         }});
}

void add_sim_switches(FlagTable& t, SimFlags& f) {
  t.toggle("--quiet", "no progress bar", &f.quiet);
  t.toggle("--progress",
           "the progress bar on stderr also when it is not a terminal (one line\n"
           "every 2 s); never with --quiet",
           &f.progress);
  t.toggle("--allow-unused",
           "run even if a policy parameter is set that the stack does not read\n"
           "(with its module choices); refused otherwise, naming when it is read",
           &f.allow_unused);
}

}  // namespace faultline::cli
