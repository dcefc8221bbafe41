// Loading policy-module plugins (policies/plugin.h) into this process.
//
// `faultline` and `faultline-live` call load_plugins() first thing, before any scenario
// or config is read (their parameters are validated against the modules plugins add).
// Plugins come from --plugin FILE (repeatable, anywhere on the command line; removed
// from the arguments) and from FAULTLINE_PLUGINS (FILEs separated by ':'), flags first.
// The same file named twice loads once. A plugin stays loaded for the life of the process.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace faultline::plugins {

struct Loaded {
  std::string path;
  std::vector<std::string> modules;  // "localization/my-bisection", in registration order
};

// Loads one plugin: a shared object, or a Python file (FILE.py, python_modules.h). Returns nullopt,
// or the reason it was refused as one line naming the file: it does not load, is not a faultline
// plugin, was built for another plugin ABI, registers a module whose name is taken, or registers
// none. A refused plugin adds nothing.
std::optional<std::string> load_plugin(const std::string& path);

// Takes the --plugin arguments out of `args` and loads them, then FAULTLINE_PLUGINS.
// Returns the first refusal (nothing after it is loaded), or nullopt. On success
// FAULTLINE_PLUGINS is set to every loaded plugin's absolute path, so the programs this
// one starts (faultline-live, sweep workers under MPI) load the same ones.
std::optional<std::string> load_plugins(std::vector<std::string>& args);

// What has been loaded so far, in order.
const std::vector<Loaded>& loaded();

}  // namespace faultline::plugins
