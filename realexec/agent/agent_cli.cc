// `faultline agent CONFIG --name NAME`: loads the live config and the shared token,
// then runs one Agent on a Reactor until it is told to shut down.
#include <signal.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/flag_table.h"
#include "policies/builtin.h"
#include "realexec/agent/agent.h"
#include "realexec/cli.h"
#include "realexec/live_config.h"
#include "realexec/net/wire.h"

namespace faultline::live {
namespace {

constexpr const char* kAgentAbout =
    R"(Runs the live-mode agent of machine NAME (a job or standby machine of the live config
CONFIG). The agent dials the controller at the config's controller_host:controller_port,
authenticates with the shared token (token_file, mode 0600), and launches, watches,
probes and inspects the training ranks of this machine as the controller asks. It keeps
redialling (0.5 s doubling to 5 s) while the controller is unreachable or refuses it;
ranks keep running meanwhile. See realexec/PROTOCOL.md.
)";

constexpr const char* kAgentEpilog =
    R"(exit codes: 0 after a shutdown request, 137 after an injected machine_down, 2 for a bad
command line, config or token, 1 for runtime failures, 128+N after signal N.)";

int usage(const std::string& msg) {
  std::fprintf(stderr, "faultline agent: %s (see --help)\n", msg.c_str());
  return 2;
}

}  // namespace

int agent_main(const std::vector<std::string>& args) {
  std::string config_path;
  std::string name;
  cli::FlagTable t("faultline agent", "faultline agent CONFIG --name NAME", kAgentAbout);
  t.inline_values();
  t.text("--name", "NAME", "this machine's name in CONFIG (required)", &name);
  t.positional(&config_path);
  t.epilog(kAgentEpilog);
  if (const int rc = t.parse(args); rc >= 0) return rc;
  if (config_path.empty()) return usage("missing CONFIG");
  if (name.empty()) return usage("missing --name NAME");

  LiveConfig config;
  try {
    config = load_live_config(config_path, policies::builtin_registry());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "faultline agent: %s\n", e.what());
    return 2;
  }
  std::string token;
  std::string err;
  if (!load_token(config.token_file, &token, &err)) {
    std::fprintf(stderr, "faultline agent: %s\n", err.c_str());
    return 2;
  }
  try {
    ::signal(SIGPIPE, SIG_IGN);
    Reactor reactor;
    int signalled = 0;
    for (int s : {SIGTERM, SIGINT, SIGHUP}) {
      reactor.on_signal(s, [&reactor, &signalled, s] {
        signalled = s;
        reactor.stop();
      });
    }
    Agent agent(reactor, config, name, token);
    agent.start();
    reactor.run();
    if (agent.finished()) return agent.exit_code();
    std::fprintf(stderr, "faultline agent %s: stopped by signal %d; killing its ranks\n",
                 name.c_str(), signalled);
    return 128 + signalled;
  } catch (const LiveConfigError& e) {
    std::fprintf(stderr, "faultline agent: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "faultline agent %s: %s\n", name.c_str(), e.what());
    return 1;
  }
}

}  // namespace faultline::live
