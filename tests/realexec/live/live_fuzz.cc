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
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

using namespace faultline::live_fuzz;

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  if (argc > 1 && std::string(argv[1]) == "rank-wrap") return rank_wrap(argc, argv);
  Options o;
  o.self = fs::canonical("/proc/self/exe").string();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "faultline_live_fuzz: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--target")
      o.target = value();
    else if (a == "--frames")
      o.frames = std::atol(value().c_str());
    else if (a == "--seed")
      o.seed = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "--dir")
      o.dir = value();
    else if (a == "--faultline")
      o.faultline = value();
    else if (a == "--trainjob")
      o.trainjob = value();
    else {
      std::fprintf(stderr,
                   "usage: faultline_live_fuzz [--target "
                   "controller|agent|config|journal|rank-pipe|all] [--frames N]\n"
                   "                           [--seed S] [--dir DIR]\n"
                   "                           [--faultline BIN] [--trainjob BIN]\n");
      return 2;
    }
  }
  const std::vector<std::string> targets = {"controller", "agent",     "config",
                                            "journal",    "rank-pipe", "all"};
  if (o.frames <= 0 || std::find(targets.begin(), targets.end(), o.target) == targets.end()) {
    std::fprintf(stderr,
                 "faultline_live_fuzz: --frames must be positive, --target controller, agent, "
                 "config, journal, "
                 "rank-pipe or all\n");
    return 2;
  }
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
