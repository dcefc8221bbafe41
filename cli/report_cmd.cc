// `faultline report`: a self-contained HTML page of figures from result directories.
// The figures are drawn by analysis/report.py with matplotlib (Debian's
// python3-matplotlib); this command checks the inputs, finds the script and an
// interpreter, and runs it.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/analysis_commands.h"
#include "cli/flag_table.h"

namespace faultline::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kReportAbout =
    R"(Writes one self-contained HTML page (figures embedded as PNG, drawn at the size the page
shows them, text 11 pt or larger) from result directories and live state directories,
each recognised by its files:
  run      `sim run --out DIR` (result.json, replicas.csv; timeline.csv with --timeline,
           incidents.csv with --incidents, decisions.log with --decisions)
  compare  `sim compare --out DIR` (compare.json, one STACK/ directory per stack)
  sweep    `sim sweep --out DIR` (sweep.json, points/)
  tune     `sim tune --out DIR` (tune.json)
  live     a live run's state directory, STATE_DIR of `faultline live run` (events.jsonl;
           journal.json for machine names). Give a `sim replay --out DIR` of the same log
           with it to set the live run and its replay side by side
The page opens with the headline numbers: per stack, ETTR mean [95% CI], the paired
ETTR difference from the baseline [95% CI] and the replicas won/tied/lost, unproductive
hours, incidents and GPU-hours lost per replica. Then, per kind:
  compare  ETTR CDF over replicas per stack; paired differences from the baseline with
           95% CIs (and the wider unpaired CI); unproductive time by phase per stack;
           resolution time per fault category across stacks
  runs     the same cross-stack views when two or more run directories are given (paired
           against the first when they ran the same scenario and seed); per run,
           cumulative and 1-hour ETTR over time, unproductive time by phase, one
           replica's incident timeline, shares by fault category and by mechanism
  sweep    ETTR against each swept parameter with 95% CI bands (CI bars on a
           categorical axis for non-numeric values such as stacks), a heatmap for two
           axes, unproductive time per point
  tune     the tuning trace: every candidate with its mean and 95% CI by round, the
           best marked, the not-distinguishable range, the best after each round
  live     the headline from the log's summary (live ETTR, elapsed, productive,
           incidents, lost time) and lost time by phase from its last "account" record;
           cumulative and sliding-window ETTR over time (1 hour, or a tenth of a run
           shorter than 4 hours); lost time by phase (beside the replay's, given one);
           the incidents on the run's timeline with a table of what happened, the actions
           taken on which machines and the resolution; faults and actions by kind. A log
           without account records (older runs) gets a note instead of the phases
A directory of none of these kinds is refused (exit 2).
)";

constexpr const char* kReportEpilog =
    R"(Needs python3 with matplotlib (Debian: python3-matplotlib). FAULTLINE_PYTHON picks the
interpreter (default /usr/bin/python3, else python3 on PATH); FAULTLINE_REPORT_SCRIPT
the script (default: faultline_report.py next to this binary, else the checkout's
analysis/report.py).)";

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "faultline: %s (see --help)\n", msg.c_str());
  return 2;
}

std::string find_script() {
  if (const char* env = std::getenv("FAULTLINE_REPORT_SCRIPT"); env && *env) return env;
  const fs::path exe = self_exe();
  for (const fs::path& p : {exe.parent_path() / "faultline_report.py",
                            exe.parent_path() / ".." / "share" / "faultline" / "report.py",
                            fs::path(FAULTLINE_SOURCE_DIR) / "analysis" / "report.py"})
    if (fs::exists(p)) return p.string();
  return "";
}

std::string find_python() {
  if (const char* env = std::getenv("FAULTLINE_PYTHON"); env && *env) return env;
  // Debian's interpreter sees python3-matplotlib; a python3 earlier on PATH may not.
  if (::access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

}  // namespace

int report(const std::vector<std::string>& args) {
  std::vector<std::string> dirs;
  std::string out, replica = "0", title;
  FlagTable t("faultline", "faultline report DIR [DIR...] -o report.html [options]", kReportAbout);
  t.add({"--out", "FILE", "a value", "the HTML file to write (required)",
         [&out](const std::string& v) {
           out = v;
           return std::string();
         },
         "-o"});
  t.add({"--replica", "R", "", "the replica whose timelines and incidents are drawn (default 0)",
         [&replica](const std::string& v) {
           char* end = nullptr;
           const long r = std::strtol(v.c_str(), &end, 10);
           if (v.empty() || *end || r < 0)
             return std::string("--replica: expected an integer >= 0");
           replica = v;
           return std::string();
         }});
  t.add({"--title", "TEXT", "a value", "the page title", [&title](const std::string& v) {
           title = v;
           return std::string();
         }});
  t.positional([&dirs](const std::string& d) {
    dirs.push_back(d);
    return std::string();
  });
  t.epilog(kReportEpilog);
  if (const int rc = t.parse(args); rc >= 0) return rc;
  if (dirs.empty())
    return usage_error("report: expected at least one result or live state directory");
  if (out.empty()) return usage_error("report: expected -o report.html");
  for (const auto& d : dirs) {
    if (!fs::is_directory(d)) {
      std::fprintf(stderr, "faultline: report: %s: not a directory\n", d.c_str());
      return 2;
    }
    bool known = false;
    for (const char* f : {"result.json", "compare.json", "sweep.json", "tune.json", "events.jsonl"})
      known = known || fs::exists(fs::path(d) / f);
    if (!known) {
      std::fprintf(stderr,
                   "faultline: report: %s: not a result directory: expected result.json (sim run "
                   "--out), compare.json (sim compare --out), sweep.json (sim sweep --out), "
                   "tune.json (sim tune --out) or events.jsonl (a live state directory)\n",
                   d.c_str());
      return 2;
    }
  }
  const std::string script = find_script();
  if (script.empty()) {
    std::fprintf(
        stderr, "faultline: report: cannot find the report script (set FAULTLINE_REPORT_SCRIPT)\n");
    return 1;
  }
  const std::string python = find_python();
  std::vector<std::string> argv{python, script, "--out", out, "--replica", replica};
  if (!title.empty()) {
    argv.push_back("--title");
    argv.push_back(title);
  }
  argv.insert(argv.end(), dirs.begin(), dirs.end());
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> cargv;
    for (auto& s : argv) cargv.push_back(s.data());
    cargv.push_back(nullptr);
    ::execvp(cargv[0], cargv.data());
    std::fprintf(stderr, "faultline: report: cannot run %s: %s (install python3-matplotlib)\n",
                 cargv[0], std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status)) return 1;
  return WEXITSTATUS(status) == 0 ? 0 : (WEXITSTATUS(status) == 2 ? 2 : 1);
}

}  // namespace faultline::cli
