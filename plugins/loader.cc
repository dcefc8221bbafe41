#include "plugins/loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "cli/flag_table.h"
#include "plugins/python_modules.h"
#include "policies/builtin.h"
#include "policies/plugin.h"

namespace faultline::plugins {

namespace {

std::vector<Loaded>& registry_of_loaded() {
  static std::vector<Loaded> v;
  return v;
}

std::string canonical_or_same(const std::string& path) {
  std::error_code ec;
  auto c = std::filesystem::canonical(path, ec);
  return ec ? path : c.string();
}

}  // namespace

const std::vector<Loaded>& loaded() { return registry_of_loaded(); }

std::optional<std::string> load_plugin(const std::string& path) {
  const std::string key = canonical_or_same(path);
  for (const auto& l : loaded())
    if (l.path == key) return std::nullopt;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return path + ": no such plugin file";
  if (std::filesystem::path(path).extension() == ".py") {
    Loaded l{key, {}};
    if (auto err = python::load_file(path, &l.modules)) return err;
    registry_of_loaded().push_back(std::move(l));
    return std::nullopt;
  }
  // RTLD_NOW: a plugin that needs a symbol this program lacks is refused here, not
  // when its module first runs.
  void* h = dlopen(path.find('/') == std::string::npos ? ("./" + path).c_str() : path.c_str(),
                   RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    return path + ": cannot load: " + (e ? e : "unknown error");
  }
  using AbiFn = int (*)();
  using RegisterFn = void (*)(void*);
  auto abi = reinterpret_cast<AbiFn>(dlsym(h, "faultline_plugin_abi"));
  auto reg = reinterpret_cast<RegisterFn>(dlsym(h, "faultline_plugin_register"));
  if (!abi || !reg) {
    dlclose(h);
    return path +
           ": not a faultline plugin (no faultline_plugin_abi/faultline_plugin_register; define "
           "them with "
           "FAULTLINE_PLUGIN from policies/plugin.h)";
  }
  if (const int got = abi(); got != FAULTLINE_PLUGIN_ABI) {
    dlclose(h);
    return path + ": built for plugin ABI " + std::to_string(got) + ", this faultline has ABI " +
           std::to_string(FAULTLINE_PLUGIN_ABI) + ": rebuild it against this installation";
  }
  // Register into a scratch registry first, so a refused plugin adds nothing. Its code
  // stays mapped even when refused: a factory may already have been copied.
  policies::ModuleRegistry scratch;
  try {
    reg(&scratch);
  } catch (const std::exception& e) {
    return path + ": registration failed: " + e.what();
  }
  if (scratch.all().empty()) return path + ": registers no module";
  try {
    policies::modules_for_registration().merge(scratch);
  } catch (const std::invalid_argument& e) {
    return path + ": " + e.what() + " (a built-in module or an earlier plugin has that name)";
  } catch (const std::logic_error& e) {
    return path + ": " + e.what();
  }
  Loaded l{key, {}};
  for (const auto* m : scratch.all())
    l.modules.push_back(std::string(policies::module_kind_name(m->kind)) + "/" + m->name);
  registry_of_loaded().push_back(std::move(l));
  return std::nullopt;
}

std::optional<std::string> load_plugins(std::vector<std::string>& args) {
  std::vector<std::string> files;
  cli::FlagTable plugin_flag("faultline", "faultline ... --plugin FILE ...");
  plugin_flag.inline_values().add({"--plugin", "FILE", "a plugin file after it", "a plugin to load",
                                   [&files](const std::string& f) {
                                     files.push_back(f);
                                     return std::string();
                                   }});
  if (std::string err = plugin_flag.extract(&args); !err.empty()) return err;
  if (const char* env = std::getenv("FAULTLINE_PLUGINS")) {
    std::string list = env;
    std::size_t start = 0;
    while (start <= list.size()) {
      const std::size_t end = list.find(':', start);
      const std::string f =
          list.substr(start, end == std::string::npos ? std::string::npos : end - start);
      if (!f.empty()) files.push_back(f);
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  for (const auto& f : files)
    if (auto err = load_plugin(f)) return err;
  // Programs this one starts (faultline-live, sweep workers under faultline-mpi, forked
  // replicas re-executing) load the same plugins.
  std::string all;
  for (const auto& l : loaded()) all += (all.empty() ? "" : ":") + l.path;
  if (!all.empty()) ::setenv("FAULTLINE_PLUGINS", all.c_str(), 1);
  return std::nullopt;
}

}  // namespace faultline::plugins
