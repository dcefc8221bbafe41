// Inspection readers on a fake sysfs tree and kernel-log lines.
#include "realexec/agent/inspect.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace faultline::live {
namespace {

namespace fs = std::filesystem;

class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/faultline-sysfs-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }
  void nic(const std::string& name, const std::string& operstate, const std::string& flags) {
    fs::create_directories(root_ + "/class/net/" + name);
    std::ofstream(root_ + "/class/net/" + name + "/operstate") << operstate << "\n";
    std::ofstream(root_ + "/class/net/" + name + "/flags") << flags << "\n";
  }
  std::string root_;
};

TEST_F(FakeSysfs, OperstateUpIsUp) {
  nic("eth0", "up", "0x1003");
  NicState st = read_nic_state(root_, "eth0");
  EXPECT_TRUE(st.up);
  EXPECT_EQ(st.detail, "");
}

TEST_F(FakeSysfs, OperstateDownIsDown) {
  nic("eth0", "down", "0x1002");
  NicState st = read_nic_state(root_, "eth0");
  EXPECT_FALSE(st.up);
  EXPECT_EQ(st.detail, "nic eth0 is down (operstate down)");
  nic("ib0", "lowerlayerdown", "0x1003");
  EXPECT_FALSE(read_nic_state(root_, "ib0").up);
}

TEST_F(FakeSysfs, UnknownOperstateFollowsTheUpFlag) {
  nic("lo", "unknown", "0x9");
  EXPECT_TRUE(read_nic_state(root_, "lo").up);
  nic("lo", "unknown", "0x8");
  NicState st = read_nic_state(root_, "lo");
  EXPECT_FALSE(st.up);
  EXPECT_NE(st.detail.find("administratively down"), std::string::npos);
}

TEST_F(FakeSysfs, MissingInterfaceIsDown) {
  NicState st = read_nic_state(root_, "eth9");
  EXPECT_FALSE(st.up);
  EXPECT_NE(st.detail.find("nic eth9 is missing"), std::string::npos);
}

TEST(Inspect, PciAddresses) {
  auto a = parse_pci_address("0000:3b:00.0");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->domain, 0u);
  EXPECT_EQ(a->bus, 0x3bu);
  EXPECT_EQ(a->device, 0u);
  EXPECT_EQ(parse_pci_address("00000000:3B:00.0"), a);
  EXPECT_EQ(parse_pci_address("3b:00.0"), a);
  EXPECT_EQ(parse_pci_address("0000:3b:00"), a);
  EXPECT_FALSE(parse_pci_address("3b"));
  EXPECT_FALSE(parse_pci_address("zz:00.0"));
  EXPECT_FALSE(parse_pci_address("0000:3b:00.0.1"));
}

TEST(Inspect, XidLinesMatchThisMachinesGpus) {
  const std::vector<std::string> gpus = {"00000000:3B:00.0", "0000:86:00.0"};
  std::string which;
  EXPECT_TRUE(
      is_xid_line("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has "
                  "fallen off the bus.",
                  gpus, &which));
  EXPECT_EQ(which, "00000000:3B:00.0");
  EXPECT_TRUE(is_xid_line("NVRM: Xid (PCI:0000:86:00): 48, An uncorrectable double bit error", gpus,
                          &which));
  EXPECT_EQ(which, "0000:86:00.0");
  // Another machine's GPU, or not an Xid line.
  EXPECT_FALSE(
      is_xid_line("NVRM: Xid (PCI:0000:af:00): 79, GPU has fallen off the bus.", gpus, nullptr));
  EXPECT_FALSE(is_xid_line("pcieport 0000:3b:00.0: AER: Corrected error received", gpus, nullptr));
  EXPECT_FALSE(is_xid_line("NVRM: Xid (PCI:0000:3b:00): 79", {}, nullptr));
  // Entries that are not PCI addresses match as substrings.
  EXPECT_TRUE(is_xid_line("NVRM: Xid (PCI:GPU-abc): 13", {"gpu-ABC"}, nullptr));
}

TEST(Inspect, MachineCheckLines) {
  EXPECT_TRUE(is_machine_check_line("mce: [Hardware Error]: Machine check events logged"));
  EXPECT_TRUE(is_machine_check_line("Machine check: Processor context corrupt"));
  EXPECT_TRUE(is_machine_check_line("{1}[Hardware Error]: Hardware error from APEI"));
  EXPECT_FALSE(is_machine_check_line("eth0: link up"));
  EXPECT_FALSE(is_machine_check_line("commerce: mcelog started"));
}

TEST(Inspect, KmsgRecords) {
  EXPECT_EQ(kmsg_message("4,1234,5678901,-;NVRM: Xid (PCI:0000:3b:00): 79"),
            "NVRM: Xid (PCI:0000:3b:00): 79");
  EXPECT_EQ(kmsg_message("6,2,3,-,caller=T1;hello; world"), "hello; world");
  EXPECT_EQ(kmsg_message(" SUBSYSTEM=pci"), "");
  EXPECT_EQ(kmsg_message("plain line"), "plain line");
}

TEST(Inspect, KernelLogReaderReadsOnlyNewLines) {
  char tmpl[] = "/tmp/faultline-kmsg-XXXXXX";
  int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::string path = tmpl;
  std::ofstream(path) << "6,1,1,-;old line\n";
  KernelLogReader r;
  std::string err;
  ASSERT_TRUE(r.open(path, &err)) << err;
  EXPECT_TRUE(r.read_new().empty());
  {
    std::ofstream out(path, std::ios::app);
    out << "4,2,2,-;NVRM: Xid (PCI:0000:3b:00): 79\n SUBSYSTEM=pci\n6,3,3,-;partial";
  }
  auto lines = r.read_new();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "NVRM: Xid (PCI:0000:3b:00): 79");
  std::ofstream(path, std::ios::app) << " line\n";
  lines = r.read_new();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "partial line");
  std::remove(path.c_str());
  KernelLogReader missing;
  EXPECT_FALSE(missing.open("/nonexistent/kmsg", &err));
  EXPECT_NE(err.find("cannot read /nonexistent/kmsg"), std::string::npos);
}

TEST(Inspect, FilesystemProblems) {
  EXPECT_EQ(filesystem_problem(fs::temp_directory_path().string()), "");
  EXPECT_NE(filesystem_problem("/nonexistent/dir").find("cannot examine"), std::string::npos);
}

}  // namespace
}  // namespace faultline::live
