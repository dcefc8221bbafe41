#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cli/analysis_commands.h"

namespace faultline::cli {

std::string self_exe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "faultline";
  buf[n] = 0;
  return buf;
}

std::string exe_dir() {
  const std::string self = self_exe();
  const auto slash = self.rfind('/');
  return slash == std::string::npos ? "." : self.substr(0, slash);
}

int exec_sibling(const std::string& name, const std::vector<std::string>& args) {
  const std::string exe = exe_dir() + "/" + name;
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv(exe.c_str(), argv.data());
  std::fprintf(stderr, "faultline: cannot run %s: %s%s%s%s\n", exe.c_str(), std::strerror(errno),
               errno == ENOENT ? " (build it: cmake --build BUILD_DIR --target " : "",
               errno == ENOENT ? name.c_str() : "", errno == ENOENT ? ")" : "");
  return 2;
}

}  // namespace faultline::cli
