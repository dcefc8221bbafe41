#pragma once

// Reports of a training rank to its faultline-agent: JSON Lines written to the stream socket
// the agent passed as FAULTLINE_REPORT_FD. One object per line; non-finite numbers (JSON has no
// NaN) are written as null with a "<name>_nan": true flag. A dead agent never kills the rank:
// write errors (EPIPE with SIGPIPE ignored) just stop the reporting.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::live::trainjob {

class Reporter {
 public:
  // fd < 0: reports are dropped. The fd is not owned (the process exits with it open).
  explicit Reporter(int fd) : fd_(fd) {}

  // `faults`: the fault-file kinds this job takes and acknowledges (the agent refuses to inject
  // any other kind into it).
  void started(int rank, std::int64_t step, std::string_view restored_from,
               std::string_view version, const std::vector<std::string>& faults = {});
  void step(int rank, std::int64_t step, double loss, double grad_norm, double step_time_s,
            std::int64_t checkpoint_step);
  void checkpoint(int rank, std::int64_t step);
  void fatal(int rank, std::string_view signature);
  // The acknowledgement of a fault-file directive this process took, written before the fault
  // acts: the agent confirms the injection to the controller only on it.
  void fault(int rank, std::string_view id, std::string_view kind);

  // The line that would be written for `j` (exposed for tests).
  static std::string line(const nlohmann::json& j) { return j.dump() + "\n"; }

 private:
  void write_json(const nlohmann::json& j);
  int fd_;
};

// Sets j[name] to x, or to null plus j[name + "_nan"] = true when x is not finite.
void put_number(nlohmann::json& j, const std::string& name, double x);

}  // namespace faultline::live::trainjob
