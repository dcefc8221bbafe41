// Real-time host inspection for the agent: NIC link state from sysfs, GPU Xid and
// machine-check lines from the kernel log, and a full or read-only work filesystem.
//
// Every reader takes its root or path as a parameter so tests run against a fake sysfs
// tree and a plain file instead of /sys and /dev/kmsg. The matchers are pure functions
// over one kernel-log message.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::live {

// The state of interface `nic` under `sysfs_root` (normally "/sys").
struct NicState {
  bool up = false;
  std::string detail;  // e.g. "nic eth0 is down (operstate down)"; "" when up
};
// Up when <root>/class/net/<nic>/operstate is "up", or "unknown" with the IFF_UP flag set
// in <root>/class/net/<nic>/flags (loopback and some virtual links never report "up").
// A missing interface is down. Requires a non-empty interface name without '/'.
NicState read_nic_state(const std::string& sysfs_root, const std::string& nic);

// A PCI address (domain:bus:device; the function is ignored: every function of a GPU
// is the same GPU for Xid purposes).
struct PciAddress {
  unsigned domain = 0;
  unsigned bus = 0;
  unsigned device = 0;
  bool operator==(const PciAddress&) const = default;
};
// Parses "0000:3b:00.0", "00000000:3B:00.0", "3b:00.0", "0000:3b:00" (hex, any case).
std::optional<PciAddress> parse_pci_address(std::string_view text);

// True when `message` is an NVIDIA Xid line ("NVRM: Xid (PCI:0000:3b:00): 79, ...") about
// one of `gpu_pci`; *matched (may be null) gets that entry. Config entries that do not
// parse as PCI addresses match as case-insensitive substrings.
bool is_xid_line(std::string_view message, const std::vector<std::string>& gpu_pci,
                 std::string* matched);
// True for kernel machine-check lines ("Machine check", "mce: [Hardware Error]", ...).
bool is_machine_check_line(std::string_view message);

// The message of one /dev/kmsg record ("6,1234,5678,-;text" -> "text"); a line without
// the record prefix is returned as is. Continuation lines (leading space) give "".
std::string kmsg_message(std::string_view record_line);

// "" when `dir`'s filesystem is writable with at least 1 MiB available; otherwise what
// is wrong ("filesystem of DIR is read-only", "... is full (N bytes available)", or that
// it cannot be examined).
std::string filesystem_problem(const std::string& dir);

// Reads new kernel-log messages without blocking, starting from the end of the log as
// it was when opened. Works on /dev/kmsg (one record per read) and, for tests, on a
// plain file that is appended to.
class KernelLogReader {
 public:
  KernelLogReader() = default;
  ~KernelLogReader();
  KernelLogReader(const KernelLogReader&) = delete;
  KernelLogReader& operator=(const KernelLogReader&) = delete;

  // Returns false with *err ("cannot read PATH: reason") when the log cannot be opened.
  bool open(const std::string& path, std::string* err);
  bool is_open() const { return fd_ >= 0; }
  // Messages written since the last call (record prefixes removed).
  std::vector<std::string> read_new();

 private:
  int fd_ = -1;
  std::string partial_;
};

}  // namespace faultline::live
