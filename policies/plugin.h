// Writing a plugin: policy modules built outside this tree, loaded by `faultline` and
// `faultline-live` at start (--plugin FILE, or FAULTLINE_PLUGINS=FILE:FILE).
//
// A plugin is a shared object with one registration function:
//
//   #include "policies/plugin.h"
//   class MyLocalizer final : public faultline::policies::Localizer { ... };
//   FAULTLINE_PLUGIN(registry) {
//     registry.add(my_localizer_info(), [](const faultline::Params& p) { return
//     std::make_unique<MyLocalizer>(p); });
//   }
//
// built with find_package(faultline) and faultline_add_plugin(NAME source.cc) against an
// installed faultline (docs/writing-a-policy-module.md walks through it). The plugin calls
// into the program that loads it (ModuleRegistry::add, describe, ClusterView, ...); it
// links no faultline library of its own.
//
// The ABI is the layout of policies/module.h and policies/api/*.h. Its number changes
// whenever one of them changes incompatibly; the loader refuses a plugin built for
// another number (exit 2, naming the file and both numbers), so a stale plugin never
// runs against the wrong layout.
#pragma once

#include "policies/module.h"

// 2: the EndRun action and MetricAnomaly::step. 3: ProcessExit::step, StartFailed::step.
// 4: StackSignatures stored sparsely (fill_id, others).
// 5: World::keeps_notes; ClusterView shares its topology between copies.
// 6: Rng seeds its four state words apart (a plugin's header-only streams would differ).
// 7: the MitigateSlowdown action; the failslow module kind; ClusterSpec's micro_batches
//    and layers_per_stage.
// 8: EvictMachines::retire; Recovery::retire.
// 9: the verdict module kind (StopVerdict); the AvoidMachines action; Recovery::avoids.
// 10: grouped probes (RunProbe::groups, ProbeResult::group_failed and group_seconds);
//     Localizer::places_slowdowns.
// 11: the MigrateMachines action, the FailureWarning event, Recovery::migrate; replica groups
//     (EnableReplicaGroups, RejoinReplica, ReplicaDropped, ReplicaRejoined,
//     Recovery::replica_groups, Mechanism::kReplicaDrop); StartJob::in_place,
//     Recovery::restarts_in_place.
// 12: Mechanism is a name (a pointer to it), no longer a one-byte enum: a module credits its
//     own name (Located::credit, Recovery::replace, the actions' `mechanism`).
//     And choices by name: Params holds a choice parameter's module name (Params::choice),
//     Params::resolve takes ParamValues.
// 13: Mechanism carries its name's hash beside the pointer (compared before the text);
//     ParamSpec::choice_versions and Params::version (the chosen modules' versions).
// (CMakeLists.txt reads the number below.)
#define FAULTLINE_PLUGIN_ABI 13

// Defines the plugin's entry points and opens the body of its registration function,
// whose ModuleRegistry& parameter is named `registry_param`.
#define FAULTLINE_PLUGIN(registry_param)                                            \
  static void faultline_plugin_register_modules(                                    \
      ::faultline::policies::ModuleRegistry& registry_param);                       \
  extern "C" __attribute__((visibility("default"))) int faultline_plugin_abi() {    \
    return FAULTLINE_PLUGIN_ABI;                                                    \
  }                                                                                 \
  extern "C" __attribute__((visibility("default"))) void faultline_plugin_register( \
      void* registry) {                                                             \
    faultline_plugin_register_modules(                                              \
        *static_cast<::faultline::policies::ModuleRegistry*>(registry));            \
  }                                                                                 \
  static void faultline_plugin_register_modules(                                    \
      ::faultline::policies::ModuleRegistry& registry_param)
