// `faultline`: the one command-line front (dispatch.cc holds its commands).
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "plugins/loader.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // Plugins first: scenarios and configs are validated against the modules they add.
  if (auto err = faultline::plugins::load_plugins(args)) {
    std::fprintf(stderr, "faultline: plugin %s\n", err->c_str());
    return 2;
  }
  return faultline::cli::dispatch(args);
}
