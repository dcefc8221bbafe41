#include "tests/support/cli.h"

#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace faultline::testing {

std::string faultline_binary() { return FAULTLINE_BIN; }
std::string scenarios_dir() { return FAULTLINE_SOURCE_DIR "/scenarios"; }
std::string tests_dir() { return FAULTLINE_SOURCE_DIR "/tests"; }

std::filesystem::path scratch_dir(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("faultline-" + name + "-" + std::to_string(::getpid()));
}

CliResult run_argv(const std::vector<std::string>& argv) {
  char out_tmpl[] = "/tmp/faultline-test-outXXXXXX";
  char err_tmpl[] = "/tmp/faultline-test-errXXXXXX";
  const int out_fd = mkstemp(out_tmpl);
  const int err_fd = mkstemp(err_tmpl);
  if (out_fd < 0 || err_fd < 0) throw std::runtime_error("mkstemp failed");
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    std::vector<std::string> all = argv;
    std::vector<char*> args;
    for (auto& a : all) args.push_back(a.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  auto slurp = [](const char* path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  r.out = slurp(out_tmpl);
  r.err = slurp(err_tmpl);
  close(out_fd);
  close(err_fd);
  unlink(out_tmpl);
  unlink(err_tmpl);
  return r;
}

CliResult run_cli(const std::vector<std::string>& args) {
  std::vector<std::string> argv{faultline_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_argv(argv);
}

}  // namespace faultline::testing
