// Internals shared by the launcher's source files (launcher.cc: `faultline live launch` and
// its local, ssh and Slurm sessions; slurm.cc: reading a Slurm allocation and `faultline live
// slurm-config`). Not part of the launcher's interface.
#pragma once

#include <string>
#include <vector>

namespace faultline::live {

// Runs argv and waits; its stdout and stderr, trimmed, in *out (for `scontrol update`, the
// last line only: its reason). Returns its exit code, -1 when it could not be started.
int run_capture(const std::vector<std::string>& argv, std::string* out);

// The allocation's job id: *job as given, else $SLURM_JOB_ID. "" or a one-line error.
std::string resolve_slurm_job(std::string* job);

// The nodes of allocation `job`, in allocation order (squeue's %N through `scontrol show
// hostnames`). "" or a one-line error.
std::string read_allocation(const std::string& job, std::vector<std::string>* nodes);

}  // namespace faultline::live
