// Policy modules: the inside contract of policies/ (../shared/design/MODULES.md).
//
// A stack (a Policy, such as byterobust) composes modules, one per concern, chosen by
// name through its choice parameters; a module is one algorithm with a versioned
// identity, in the spirit of leveldb's FilterPolicy. Modules never see a World: they get
// what they need as arguments and answer with values, so they are tested with synthetic
// inputs, without a clock, and run unchanged under every backend.
//
// This first cut covers localization: a Localizer is a search for culprits run as a
// conversation of tests (begin, then answer after each outcome), pure in the torchft
// sense: no World, no clock, no randomness. Detection, recovery and checkpoint modules
// follow the same shape (MODULES.md) and land in the same registry.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "policies/api/action.h"
#include "policies/api/cluster_view.h"
#include "policies/api/event.h"
#include "policies/api/policy.h"

namespace faultline::policies {

enum class ModuleKind : std::uint8_t { kDetection, kLocalization, kRecovery, kCheckpoint };
const char* module_kind_name(ModuleKind k);

// Identity of one algorithm. As with a leveldb FilterPolicy name, `version` changes
// whenever the same inputs can yield different decisions.
struct ModuleInfo {
  ModuleKind kind = ModuleKind::kLocalization;
  std::string name;     // its choice name in a stack's parameters ("replay")
  std::string version;
  std::string summary;  // one line, for `faultline policies`
};

// A test a localizer asks the stack to run: a probe on machines, or a replay on groups.
using LocalizationTest = std::variant<RunProbe, RunReplay>;
// What a localizer concluded.
struct Located {
  std::vector<SlotId> evict;  // slots to evict; empty: nothing found (the stack reattempts)
  bool code_at_fault = false;  // e.g. every replay group failed: the stack rolls the code back
  Mechanism credit = Mechanism::kReplay;  // the resolution mechanism an eviction counts as
  std::string reason;         // the eviction's, rollback's or reattempt's reason
};
using LocalizationStep = std::variant<LocalizationTest, Located>;

class Localizer {
 public:
  virtual ~Localizer() = default;
  virtual const ModuleInfo& info() const = 0;
  // Starts a search for the machine(s) behind a failure that no stop-time test placed;
  // `why` is the stack's reason, carried into the first test. Returns the first test to
  // run, or at once a verdict. `view` is valid during the call only.
  virtual LocalizationStep begin(const std::string& why, const ClusterView& view) = 0;
  // REQUIRES: the last step was a test and `outcome` is its ProbeResult or ReplayResult.
  // Returns the next test or the verdict.
  virtual LocalizationStep answer(const Event& outcome, const ClusterView& view) = 0;
};

// Modules by kind and name. Explicit, like Registry: builtin.cc adds one line per module;
// there are no static constructors. Insertion order is kept: a stack's choice list (and
// so its default, the first) follows it.
class ModuleRegistry {
 public:
  // Builds a localizer from the stack's resolved parameters.
  using LocalizerFactory = std::function<std::unique_ptr<Localizer>(const Params&)>;

  // Throws std::invalid_argument when (kind, name) is already registered.
  void add(ModuleInfo info, LocalizerFactory make);
  // The modules of one kind, in registration order.
  std::vector<const ModuleInfo*> of(ModuleKind kind) const;
  std::vector<std::string> names(ModuleKind kind) const;
  const ModuleInfo* find(ModuleKind kind, std::string_view name) const;
  // Requires a registered localizer `name`; throws std::invalid_argument otherwise.
  std::unique_ptr<Localizer> make_localizer(std::string_view name, const Params& params) const;

 private:
  struct Entry {
    ModuleInfo info;
    LocalizerFactory make;
  };
  std::vector<Entry> entries_;
};

}  // namespace faultline::policies
