// Stack signatures from gdb, eu-stack or faulthandler text, and the captures: a debugger child,
// or a Python rank's own dump on a signal.
#include "realexec/agent/stack_capture.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

namespace faultline::live {
namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(line);
  }
  return out;
}

std::string trim(std::string_view s) {
  std::size_t b = 0;
  std::size_t e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// Index of the " (" that opens the argument list: the first one outside template
// brackets and parentheses. Operator names ("operator<", "operator()") are skipped.
std::size_t argument_list_start(std::string_view s) {
  int angle = 0;
  int paren = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 8, "operator") == 0) {
      std::size_t j = i + 8;
      while (j < s.size() && s[j] == ' ') ++j;
      // Skip the operator's symbol characters; "()" and "[]" count as symbols.
      if (s.compare(j, 2, "()") == 0 || s.compare(j, 2, "[]") == 0) {
        j += 2;
      } else {
        while (j < s.size() && std::string_view("<>=!+-*/%&|^~,").find(s[j]) != std::string::npos) {
          ++j;
        }
      }
      i = j - 1;
      continue;
    }
    char c = s[i];
    if (c == '<') ++angle;
    if (c == '>' && angle > 0) --angle;
    if (c == '(') {
      if (angle == 0 && paren == 0 && i > 0 && s[i - 1] == ' ') return i - 1;
      ++paren;
    }
    if (c == ')' && paren > 0) --paren;
  }
  return std::string::npos;
}

// "ns::f(int, char) const" -> "ns::f"; "X::operator()(int)" -> "X::operator()".
std::string strip_parameter_types(std::string name) {
  if (name.size() > 6 && name.compare(name.size() - 6, 6, " const") == 0) {
    name.resize(name.size() - 6);
  }
  if (name.empty() || name.back() != ')') return name;
  if (name.size() >= 10 && name.compare(name.size() - 10, 10, "operator()") == 0) return name;
  int depth = 0;
  for (std::size_t i = name.size(); i-- > 0;) {
    if (name[i] == ')') ++depth;
    if (name[i] == '(') {
      if (--depth == 0) {
        if (i == 0) return name;
        name.resize(i);
        return name;
      }
    }
  }
  return name;
}

std::string clean_function_name(std::string name) {
  auto clone = name.find(" [clone ");
  if (clone != std::string::npos) {
    auto end = name.find(']', clone);
    name.erase(clone, end == std::string::npos ? std::string::npos : end - clone + 1);
  }
  name = strip_parameter_types(trim(name));
  if (name.rfind("__GI_", 0) == 0) name.erase(0, 5);
  if (name.empty() || name == "??" || name.find("??") == 0) return "";
  return name;
}

std::string join_frames(const std::vector<std::string>& names) {
  std::string out;
  std::size_t n = 0;
  for (const auto& f : names) {
    if (f.empty()) continue;
    if (n == kMaxSignatureFrames) {
      out += " < ...";
      break;
    }
    if (!out.empty()) out += " < ";
    out += f;
    ++n;
  }
  return out;
}

// A thread block of debugger output: its header id, LWP and frame lines.
struct ThreadBlock {
  long number = -1;
  long lwp = -1;
  std::vector<std::string> frames;
};

long parse_number_after(const std::string& s, const std::string& key) {
  auto at = s.find(key);
  if (at == std::string::npos) return -1;
  std::size_t i = at + key.size();
  long v = 0;
  bool any = false;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    v = v * 10 + (s[i] - '0');
    any = true;
    ++i;
  }
  return any ? v : -1;
}

const ThreadBlock* pick_main_thread(const std::vector<ThreadBlock>& blocks, pid_t pid) {
  for (const auto& b : blocks) {
    if (b.lwp == pid) return &b;
  }
  for (const auto& b : blocks) {
    if (b.number == 1) return &b;
  }
  if (blocks.size() == 1) return &blocks[0];
  return nullptr;
}

}  // namespace

std::string gdb_frame_function(const std::string& line) {
  std::string_view s = line;
  if (s.empty() || s[0] != '#') return "";
  std::size_t i = 1;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == 1) return "";
  while (i < s.size() && s[i] == ' ') ++i;
  s.remove_prefix(i);
  if (s.rfind("0x", 0) == 0) {
    std::size_t j = 2;
    while (j < s.size() && std::isxdigit(static_cast<unsigned char>(s[j]))) ++j;
    s.remove_prefix(j);
    if (s.rfind(" in ", 0) != 0) return "";
    s.remove_prefix(4);
  }
  if (s.rfind("<signal handler called>", 0) == 0) return "<signal handler>";
  if (s.rfind("??", 0) == 0) return "";
  std::size_t args = argument_list_start(s);
  std::string name(args == std::string::npos ? s : s.substr(0, args));
  if (args == std::string::npos) {
    // No argument list: cut a trailing " at FILE:LINE" or " from LIB".
    for (const char* cut : {" from ", " at "}) {
      auto p = name.rfind(cut);
      if (p != std::string::npos) name.resize(p);
    }
  }
  return clean_function_name(name);
}

std::string gdb_signature(const std::string& gdb_output, pid_t pid) {
  std::vector<ThreadBlock> blocks;
  ThreadBlock loose;  // frames before any "Thread" header (single-threaded `bt`)
  for (const auto& line : split_lines(gdb_output)) {
    if (line.rfind("Thread ", 0) == 0 && line.find('(') != std::string::npos) {
      ThreadBlock b;
      b.number = parse_number_after(line, "Thread ");
      b.lwp = parse_number_after(line, "(LWP ");
      if (b.lwp < 0) b.lwp = parse_number_after(line, "(process ");
      blocks.push_back(std::move(b));
      continue;
    }
    if (line.empty() || line[0] != '#') continue;
    (blocks.empty() ? loose : blocks.back()).frames.push_back(line);
  }
  if (blocks.empty() && !loose.frames.empty()) blocks.push_back(loose);
  const ThreadBlock* main = pick_main_thread(blocks, pid);
  if (main == nullptr) return "";
  std::vector<std::string> names;
  for (const auto& f : main->frames) names.push_back(gdb_frame_function(f));
  return join_frames(names);
}

std::string eu_stack_signature(const std::string& eu_output, pid_t pid) {
  std::vector<ThreadBlock> blocks;
  for (const auto& line : split_lines(eu_output)) {
    if (line.rfind("TID ", 0) == 0) {
      ThreadBlock b;
      b.lwp = parse_number_after(line, "TID ");
      blocks.push_back(std::move(b));
      continue;
    }
    if (line.empty() || line[0] != '#' || blocks.empty()) continue;
    blocks.back().frames.push_back(line);
  }
  const ThreadBlock* main = pick_main_thread(blocks, pid);
  if (main == nullptr) {
    for (const auto& b : blocks) {
      if (b.lwp >= 0 && (main == nullptr || b.lwp < main->lwp)) main = &b;
    }
  }
  if (main == nullptr) return "";
  std::vector<std::string> names;
  for (const auto& line : main->frames) {
    // "#0  0x00007f...  name" or "#0  0x00007f... name - 1" with optional " (module)".
    std::istringstream in(line);
    std::string num, addr;
    in >> num >> addr;
    std::string rest;
    std::getline(in, rest);
    rest = trim(rest);
    auto dash = rest.find(" - ");
    if (dash != std::string::npos) rest.resize(dash);
    names.push_back(clean_function_name(rest));
  }
  return join_frames(names);
}

std::optional<char> process_state(pid_t pid, const std::string& proc_root) {
  std::ifstream in(proc_root + "/" + std::to_string(pid) + "/stat");
  if (!in) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');  // the command name may contain spaces and parentheses
  if (close == std::string::npos || close + 2 >= text.size()) return std::nullopt;
  return text[close + 2];
}

std::shared_ptr<ChildRun> capture_stack(Reactor& r, pid_t pid, const StackCaptureOptions& options,
                                        std::function<void(const std::string&)> done) {
  // Read before attaching: the debugger's own attach stops the process (state t).
  std::optional<char> state = process_state(pid);
  if (!state) {
    r.defer([done] { done("capture failed: process is gone"); });
    return nullptr;
  }
  const std::string prefix = (*state == 'T' || *state == 't') ? "[stopped] " : "";
  SpawnSpec spec;
  bool use_gdb = true;
  std::string program = options.gdb.empty() ? "" : find_program(options.gdb);
  if (program.empty()) {
    use_gdb = false;
    program = options.eu_stack.empty() ? "" : find_program(options.eu_stack);
  }
  if (program.empty()) {
    r.defer([done] { done("capture failed: neither gdb nor eu-stack found"); });
    return nullptr;
  }
  if (use_gdb) {
    spec.argv = {program, "-p", std::to_string(pid), "-batch", "-nx", "-ex", "thread apply all bt"};
  } else {
    spec.argv = {program, "-p", std::to_string(pid)};
  }
  spec.env = make_env({{"LC_ALL", "C"}});
  return run_child(
      r, std::move(spec), options.deadline,
      [pid, use_gdb, prefix, done](const ChildResult& res) {
        if (!res.started) {
          done("capture failed: " + res.spawn_error);
          return;
        }
        if (res.timed_out) {
          done(prefix + "capture failed: timed out");
          return;
        }
        std::string sig = use_gdb ? gdb_signature(res.out, pid) : eu_stack_signature(res.out, pid);
        if (!sig.empty()) {
          done(prefix + sig);
          return;
        }
        // Say why: the debugger's last complaint.
        std::string why = "no frames (" + describe_wait_status(res.wait_status) + ")";
        for (const auto& l : split_lines(res.err)) {
          std::string t = trim(l);
          if (!t.empty() && t.find("warning:") != 0) why = t;
        }
        if (why.size() > 200) why.resize(200);
        done(prefix + "capture failed: " + why);
      },
      64 * 1024 * 16);
}

// ---------------------------------------------------------------------------------------
// Python ranks

namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// NAME of '  File "PATH", line N in NAME' (N digits, or "???" when unknown); nullopt when the
// line is not a frame. PATH may hold anything, NAME not ", line ": the last match counts.
std::optional<std::string> python_frame_function(std::string_view line) {
  if (!starts_with(line, "  File \"")) return std::nullopt;
  std::size_t at = line.size();
  while (at > 0) {
    at = line.rfind("\", line ", at - 1);
    if (at == std::string_view::npos) return std::nullopt;
    std::size_t i = at + 8;
    std::size_t digits = i;
    while (digits < line.size() && std::isdigit(static_cast<unsigned char>(line[digits]))) ++digits;
    if (digits == i && line.substr(i, 3) == "???") digits = i + 3;
    if (digits > i && line.substr(digits, 4) == " in ") {
      // Printable ASCII only (faulthandler escapes the rest as \xNN): a signature goes on the
      // wire as JSON, and a name past 200 characters is cut.
      std::string name;
      for (char c : line.substr(digits + 4, 200)) name += (c >= 0x20 && c < 0x7f) ? c : '?';
      return name;
    }
    if (at == 0) break;
  }
  return std::nullopt;
}

bool is_main_block(const PythonDump::Block& b) {
  return !b.functions.empty() &&
         (b.functions.back() == "<module>" || b.functions.back() == "_run_module_as_main");
}

}  // namespace

PythonDump parse_python_dump(const std::string& text) {
  PythonDump d;
  const std::size_t whole = text.rfind('\n');
  if (whole == std::string::npos) return d;
  std::size_t start = 0;
  int number = 0;
  while (start <= whole) {
    const std::size_t nl = text.find('\n', start);
    std::string_view line(text.data() + start, nl - start);
    start = nl + 1;
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line == "...") continue;  // between blocks; after the 100th thread
    if (ends_with(line, "(most recent call first):") &&
        (starts_with(line, "Thread ") || starts_with(line, "Current thread") ||
         starts_with(line, "Stack "))) {
      d.blocks.emplace_back();
      continue;
    }
    if (auto name = python_frame_function(line)) {
      if (d.blocks.empty()) {
        d.error = "line " + std::to_string(number) + ": a frame before any thread header";
        return d;
      }
      d.blocks.back().functions.push_back(*name);
      continue;
    }
    // "  ...", "  <no Python frame>" and what later Pythons add inside a block.
    if (starts_with(line, "  ") && !d.blocks.empty()) continue;
    std::string shown(line.substr(0, 60));
    for (char& c : shown)
      if (c < 0x20 || c >= 0x7f) c = '?';
    d.error = "line " + std::to_string(number) + " is not faulthandler's (\"" + shown + "\")";
    return d;
  }
  for (std::size_t i = 0; i < d.blocks.size(); ++i) {
    if (is_main_block(d.blocks[i])) {
      d.main = static_cast<int>(i);
      d.main_followed = i + 1 < d.blocks.size();
      break;
    }
  }
  return d;
}

std::string python_signature(const PythonDump& dump) {
  if (dump.blocks.empty()) return "";
  const auto& b =
      dump.main >= 0 ? dump.blocks[static_cast<std::size_t>(dump.main)] : dump.blocks.back();
  return join_frames(b.functions);
}

std::string faulthandler_signature(const std::string& text) {
  return python_signature(parse_python_dump(text));
}

int stack_signal_number(const std::string& name) {
  if (name == "SIGUSR1") return SIGUSR1;
  if (name == "SIGUSR2") return SIGUSR2;
  return 0;
}

bool catches_signal(pid_t pid, int signo, const std::string& proc_root) {
  std::ifstream in(proc_root + "/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("SigCgt:", 0) != 0) continue;
    std::string hex = trim(std::string_view(line).substr(7));
    if (hex.empty() || hex.size() > 16 || signo < 1 || signo > 64) return false;
    std::uint64_t mask = 0;
    for (char c : hex) {
      if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
      mask = mask << 4 | static_cast<std::uint64_t>(std::isdigit(static_cast<unsigned char>(c))
                                                        ? c - '0'
                                                        : std::tolower(c) - 'a' + 10);
    }
    return (mask >> (signo - 1)) & 1u;
  }
  return false;
}

namespace {

// One Python capture in flight: its own descriptor of the dump, what was read, the clock.
struct PythonCapture {
  Reactor* r = nullptr;
  pid_t pid = -1;
  int fd = -1;
  int signo = 0;
  StackCaptureOptions options;
  std::function<void(const std::string&)> done;
  Instant signalled;
  Instant grew;  // the last time the dump grew (the signal's time before it did)
  std::string text;
  PythonDump parsed;
  ~PythonCapture() {
    if (fd >= 0) ::close(fd);
  }
};

void finish_python(const std::shared_ptr<PythonCapture>& c, const std::string& signature) {
  auto done = std::move(c->done);
  c->done = nullptr;
  if (done) done(signature);
}

void poll_python(const std::shared_ptr<PythonCapture>& c) {
  const Instant now = c->r->now();
  bool grew = false;
  while (c->text.size() < kMaxPythonDump) {
    char buf[16384];
    const std::size_t want = std::min(sizeof buf, kMaxPythonDump - c->text.size());
    const ssize_t n = ::pread(c->fd, buf, want, static_cast<off_t>(c->text.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    c->text.append(buf, static_cast<std::size_t>(n));
    grew = true;
  }
  if (grew) {
    c->grew = now;
    c->parsed = parse_python_dump(c->text);
  }
  const PythonDump& d = c->parsed;
  const std::string sig = python_signature(d);
  if (!d.error.empty())
    return finish_python(c, "capture failed: not a faulthandler dump: " + d.error);
  const Duration still = now - c->grew;
  const bool some = !c->text.empty();
  if ((d.main >= 0 && (d.main_followed || (some && still >= c->options.python_settle))) ||
      (d.main < 0 && !d.blocks.empty() && still >= c->options.python_settle_no_main)) {
    return finish_python(c, sig.empty() ? "capture failed: the main thread's dump holds no Python "
                                          "frame"
                                        : sig);
  }
  // Not complete yet: a process that died or was stopped meanwhile writes no more.
  const std::optional<char> state = process_state(c->pid);
  if (!state || *state == 'Z' || *state == 'X')
    return finish_python(c, "capture failed: process is gone");
  if (*state == 'T' || *state == 't')
    return finish_python(c, std::string("[stopped] ") + kStoppedNoPython);
  if (now - c->signalled >= c->options.deadline) {
    if (!sig.empty() && d.main >= 0) return finish_python(c, sig);
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g", c->options.deadline.to_seconds());
    return finish_python(c, "capture failed: no complete Python stack dump within " +
                                std::string(secs) + " s of " + signal_name(c->signo) + " (" +
                                std::to_string(c->text.size()) + " bytes)");
  }
  c->r->add_timer(c->options.python_poll, [c] { poll_python(c); });
}

}  // namespace

std::shared_ptr<ChildRun> capture_python_stack(Reactor& r, pid_t pid, int dump_fd, int signo,
                                               const StackCaptureOptions& options,
                                               std::function<void(const std::string&)> done) {
  const std::optional<char> state = process_state(pid);
  if (!state || *state == 'Z' || *state == 'X') {
    r.defer([done] { done("capture failed: process is gone"); });
    return nullptr;
  }
  if (*state == 'T' || *state == 't') {
    r.defer([done] { done(std::string("[stopped] ") + kStoppedNoPython); });
    return nullptr;
  }
  // A process that does not catch the signal would die of it (SIGUSR1 and SIGUSR2 terminate
  // by default): one that announced it and then reset it, or exec'd, is read with gdb.
  if (stack_signal_number(signal_name(signo)) == 0 || !catches_signal(pid, signo))
    return capture_stack(r, pid, options, std::move(done));
  auto c = std::make_shared<PythonCapture>();
  c->r = &r;
  c->pid = pid;
  c->signo = signo;
  c->options = options;
  c->done = std::move(done);
  c->fd = ::fcntl(dump_fd, F_DUPFD_CLOEXEC, 0);
  if (c->fd < 0 || ::ftruncate(c->fd, 0) != 0) {
    const std::string why = std::strerror(errno);
    r.defer([c, why] { finish_python(c, "capture failed: cannot empty the stack dump: " + why); });
    return nullptr;
  }
  // To the process alone, not its group: its children (data loader workers) registered
  // nothing, and the signal would end them.
  if (::kill(pid, signo) != 0) {
    const std::string why = std::strerror(errno);
    r.defer([c, why] { finish_python(c, "capture failed: cannot signal the process: " + why); });
    return nullptr;
  }
  c->signalled = r.now();
  c->grew = c->signalled;
  r.add_timer(options.python_poll, [c] { poll_python(c); });
  return nullptr;
}

}  // namespace faultline::live
