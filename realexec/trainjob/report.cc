#include "realexec/trainjob/report.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>

namespace faultline::live::trainjob {

void put_number(nlohmann::json& j, const std::string& name, double x) {
  if (std::isfinite(x)) {
    j[name] = x;
  } else {
    j[name] = nullptr;
    j[name + "_nan"] = true;
  }
}

void Reporter::write_json(const nlohmann::json& j) {
  if (fd_ < 0) return;
  const std::string s = line(j);
  std::size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd_, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      fd_ = -1;  // the agent is gone: keep training, stop reporting
      return;
    }
    done += static_cast<std::size_t>(n);
  }
}

void Reporter::started(int rank, std::int64_t step, std::string_view restored_from,
                       std::string_view version, const std::vector<std::string>& faults) {
  nlohmann::json j{{"type", "started"},  {"rank", rank},
                   {"step", step},       {"restored_from", restored_from},
                   {"version", version}, {"pid", static_cast<long>(::getpid())}};
  if (!faults.empty()) j["faults"] = faults;
  write_json(j);
}

void Reporter::fault(int rank, std::string_view id, std::string_view kind) {
  write_json({{"type", "fault"}, {"rank", rank}, {"id", id}, {"fault", kind}});
}

void Reporter::step(int rank, std::int64_t step, double loss, double grad_norm, double step_time_s,
                    std::int64_t checkpoint_step) {
  nlohmann::json j{{"type", "step"}, {"rank", rank}, {"step", step}};
  put_number(j, "loss", loss);
  put_number(j, "grad_norm", grad_norm);
  j["step_time_s"] = step_time_s;
  j["checkpoint_step"] = checkpoint_step;
  write_json(j);
}

void Reporter::checkpoint(int rank, std::int64_t step) {
  write_json({{"type", "checkpoint"}, {"rank", rank}, {"step", step}});
}

void Reporter::fatal(int rank, std::string_view signature) {
  write_json({{"type", "fatal"}, {"rank", rank}, {"signature", signature}});
}

}  // namespace faultline::live::trainjob
