// `faultline agent` as its own small program for the tests (the faultline binary itself
// dispatches to the same agent_main).
#include <string>
#include <vector>

#include "realexec/cli.h"

int main(int argc, char** argv) {
  return faultline::live::agent_main(std::vector<std::string>(argv + 1, argv + argc));
}
