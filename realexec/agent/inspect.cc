// Host inspection readers and kernel-log matchers.
#include "realexec/agent/inspect.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <fstream>

namespace faultline::live {
namespace {

constexpr unsigned kIffUp = 0x1;
constexpr unsigned long long kMinFreeBytes = 1ull << 20;

std::optional<std::string> read_first_line(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string line;
  std::getline(in, line);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool parse_hex(std::string_view s, unsigned* out) {
  if (s.empty() || s.size() > 8) return false;
  unsigned v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return false;
    }
    v = v * 16 + static_cast<unsigned>(d);
  }
  *out = v;
  return true;
}

bool is_pci_char(char c) {
  return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
}

}  // namespace

NicState read_nic_state(const std::string& sysfs_root, const std::string& nic) {
  NicState st;
  const std::string dir = sysfs_root + "/class/net/" + nic;
  auto oper = read_first_line(dir + "/operstate");
  if (!oper) {
    st.detail = "nic " + nic + " is missing (no " + dir + ")";
    return st;
  }
  if (*oper == "up") {
    st.up = true;
    return st;
  }
  if (*oper == "unknown") {
    auto flags = read_first_line(dir + "/flags");
    unsigned long v = 0;
    if (flags) v = std::strtoul(flags->c_str(), nullptr, 0);
    if (flags && (v & kIffUp) != 0) {
      st.up = true;
      return st;
    }
    st.detail = "nic " + nic + " is down (operstate unknown, link administratively down)";
    return st;
  }
  st.detail = "nic " + nic + " is down (operstate " + *oper + ")";
  return st;
}

std::optional<PciAddress> parse_pci_address(std::string_view text) {
  // Drop ".function".
  auto dot = text.rfind('.');
  if (dot != std::string_view::npos) {
    std::string_view fn = text.substr(dot + 1);
    unsigned f;
    if (!parse_hex(fn, &f) || fn.size() > 1) return std::nullopt;
    text = text.substr(0, dot);
  }
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    auto colon = text.find(':', start);
    parts.push_back(text.substr(
        start, colon == std::string_view::npos ? std::string_view::npos : colon - start));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  PciAddress a;
  if (parts.size() == 3) {
    if (!parse_hex(parts[0], &a.domain) || parts[0].size() < 4) return std::nullopt;
    parts.erase(parts.begin());
  }
  if (parts.size() != 2) return std::nullopt;
  if (parts[0].size() != 2 || parts[1].size() != 2) return std::nullopt;
  if (!parse_hex(parts[0], &a.bus) || !parse_hex(parts[1], &a.device)) return std::nullopt;
  return a;
}

bool is_xid_line(std::string_view message, const std::vector<std::string>& gpu_pci,
                 std::string* matched) {
  if (message.find("Xid") == std::string_view::npos) return false;
  // Every PCI-looking token of the line.
  std::vector<PciAddress> in_line;
  for (std::size_t i = 0; i < message.size();) {
    if (!is_pci_char(message[i])) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < message.size() && is_pci_char(message[j])) ++j;
    std::string_view tok = message.substr(i, j - i);
    while (!tok.empty() && (tok.back() == ':' || tok.back() == '.')) tok.remove_suffix(1);
    while (!tok.empty() && (tok.front() == ':' || tok.front() == '.')) tok.remove_prefix(1);
    if (auto a = parse_pci_address(tok)) in_line.push_back(*a);
    i = j;
  }
  const std::string low = lower(message);
  for (const auto& id : gpu_pci) {
    if (id.empty()) continue;
    bool hit = false;
    if (auto want = parse_pci_address(id)) {
      for (const auto& a : in_line) hit = hit || a == *want;
    } else {
      hit = low.find(lower(id)) != std::string::npos;
    }
    if (hit) {
      if (matched) *matched = id;
      return true;
    }
  }
  return false;
}

bool is_machine_check_line(std::string_view message) {
  const std::string low = lower(message);
  return low.find("machine check") != std::string::npos ||
         low.find("[hardware error]") != std::string::npos || low.rfind("mce:", 0) == 0 ||
         low.find(" mce:") != std::string::npos;
}

std::string kmsg_message(std::string_view line) {
  if (!line.empty() && line[0] == ' ') return "";  // continuation (KEY=value) line
  // "PRI,SEQ,TIME,FLAGS[,...];message"
  std::size_t i = 0;
  while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
  if (i > 0 && i < line.size() && line[i] == ',') {
    auto semi = line.find(';');
    if (semi != std::string_view::npos) return std::string(line.substr(semi + 1));
  }
  return std::string(line);
}

std::string filesystem_problem(const std::string& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) {
    return "cannot examine the filesystem of " + dir + ": " + std::strerror(errno);
  }
  if (st.f_flag & ST_RDONLY) return "filesystem of " + dir + " is read-only";
  unsigned long long avail = static_cast<unsigned long long>(st.f_bavail) * st.f_frsize;
  if (avail < kMinFreeBytes) {
    return "filesystem of " + dir + " is full (" + std::to_string(avail) + " bytes available)";
  }
  return "";
}

KernelLogReader::~KernelLogReader() {
  if (fd_ >= 0) ::close(fd_);
}

bool KernelLogReader::open(const std::string& path, std::string* err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) {
    if (err) *err = "cannot read " + path + ": " + std::strerror(errno);
    return false;
  }
  ::lseek(fd_, 0, SEEK_END);  // /dev/kmsg: skip the records already in the buffer
  partial_.clear();
  return true;
}

std::vector<std::string> KernelLogReader::read_new() {
  std::vector<std::string> out;
  if (fd_ < 0) return out;
  char buf[8192];  // larger than one kmsg record
  for (int i = 0; i < 4096; ++i) {
    ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EPIPE) continue;  // records overwritten before we read them
    if (n <= 0) break;                      // EAGAIN, end of a plain file, or an error
    partial_.append(buf, static_cast<std::size_t>(n));
    std::size_t start = 0;
    while (true) {
      auto nl = partial_.find('\n', start);
      if (nl == std::string::npos) break;
      std::string msg = kmsg_message(std::string_view(partial_).substr(start, nl - start));
      if (!msg.empty()) out.push_back(std::move(msg));
      start = nl + 1;
    }
    partial_.erase(0, start);
    if (partial_.size() > 65536) partial_.clear();
  }
  return out;
}

}  // namespace faultline::live
