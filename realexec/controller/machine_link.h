// MachineLink: how the live backend's World reaches agents (implemented by the Controller's
// connections; faked in unit tests).
#pragma once

#include <nlohmann/json.hpp>

#include "policies/api/ids.h"

namespace faultline::live {

class MachineLink {
 public:
  virtual ~MachineLink() = default;
  // Sends a request; false when the machine's agent is not connected.
  virtual bool send(MachineId m, const nlohmann::json& msg) = 0;
  virtual bool connected(MachineId m) const = 0;
  // Seconds since machine m's agent was last heard (0 when not known): a heartbeat late.
  virtual double silent_s(MachineId) const { return 0; }
};

}  // namespace faultline::live
