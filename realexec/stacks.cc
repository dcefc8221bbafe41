// Stack signatures from gdb or eu-stack text, and the capture child.
#include "realexec/stacks.h"

#include <cctype>
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

}  // namespace faultline::live
