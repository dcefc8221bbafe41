// The live-mode protocol fuzzer: generated and mutated frames, authenticated and not, sent
// to a real controller, to a real agent, and down a real agent's rank pipe, while the
// reference training job they manage keeps training. Run by ctest (label e2e) with the
// issue's million frames per target, and by hand for longer runs:
//
//   faultline_live_fuzz [--target controller|agent|config|journal|rank-pipe|all] [--frames N]
//   [--seed S]
//                       [--dir DIR]
//
// Each target is a deployment of its own, on loopback:
//   controller  `faultline live run` with two job machines and a standby (real agents, the
//               training job) and a second standby slot the fuzzer holds as an agent. It
//               sends: mutated hellos, handshakes and raw bytes on fresh connections; mutated
//               requests on an operator session and on a read-only session; mutated agent
//               messages (reports and exits of the running generation included) on its
//               authenticated agent session.
//   agent       `faultline agent` of one machine whose controller is the fuzzer: first a
//               rogue controller (challenges with wrong proofs, requests before any proof),
//               then the real handshake, a launch of the training job, and mutated requests.
//               The job's rank is this program in `rank-wrap` mode: it runs the training job
//               and passes its report lines on, interleaved with mutated and broken ones.
//   rank pipe   the lines `rank-wrap` writes (the agent target's deployment).
//   config, journal, rank-pipe (in process, first): mutated live configs to the config
//               loader, mutated journals to the journal reader, mutated report lines to the
//               rank-report parser; each must take the input or refuse it in one line naming
//               the file, never throw anything else or crash.
// After every batch a valid request must be answered (status by the controller, an inspect
// by the agent); at the end the process must be alive, the job must have trained through the
// fuzzing, the controller's progress must never run ahead of what the job logged, and the
// refusals must be noted without flooding the event log. One summary line per target; exit
// status 0 when every check held, 1 (with the reason) otherwise.
#include "tests/realexec/live/live_fuzz.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/flag_table.h"

using namespace faultline::live_fuzz;

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  if (argc > 1 && std::string(argv[1]) == "rank-wrap") return rank_wrap(argc, argv);
  Options o;
  o.self = fs::canonical("/proc/self/exe").string();
  long long frames = o.frames;
  faultline::cli::FlagTable flags("faultline_live_fuzz", "faultline_live_fuzz [options]");
  flags
      .choice("--target", "what to fuzz (default all)",
              {"controller", "agent", "config", "journal", "rank-pipe", "all"}, &o.target)
      .integer("--frames", "N", "N >= 1", "frames per target (default 1000000)", 1, LLONG_MAX,
               &frames)
      .value("--seed", "S", "an unsigned integer", "the seed (default 1)",
             [&o](const std::string& v) {
               long long x;
               if (!faultline::cli::parse_int(v, 0, LLONG_MAX, &x)) return false;
               o.seed = static_cast<std::uint64_t>(x);
               return true;
             })
      .text("--dir", "DIR", "work here and keep it (default: a temporary directory)", &o.dir)
      .text("--faultline", "BIN", "the faultline program", &o.faultline)
      .text("--trainjob", "BIN", "the training job", &o.trainjob);
  if (const int rc = flags.parse({argv + 1, argv + argc}); rc >= 0) return rc;
  o.frames = static_cast<long>(frames);
  const bool keep = !o.dir.empty();
  if (o.dir.empty())
    o.dir = (fs::temp_directory_path() / ("faultline-live-fuzz-" + std::to_string(::getpid())))
                .string();
  fs::create_directories(o.dir);
  g_dir = o.dir;
  std::printf("faultline_live_fuzz: seed %llu, %ld frames per target, in %s\n",
              static_cast<unsigned long long>(o.seed), o.frames, o.dir.c_str());
  std::fflush(stdout);
  const auto wanted = [&](const char* t) { return o.target == "all" || o.target == t; };
  if (wanted("config")) fuzz_config(o);
  if (wanted("journal")) fuzz_journal(o);
  if (wanted("rank-pipe")) fuzz_rank_lines(o);
  std::fflush(stdout);
  if (wanted("controller")) fuzz_controller(o);
  std::fflush(stdout);
  if (wanted("agent")) fuzz_agent(o);
  if (!keep) fs::remove_all(o.dir);
  return 0;
}
