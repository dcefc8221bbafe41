#include "traces/category_map.h"

#include <map>
#include <set>
#include <tuple>

#include "traces/config.h"

namespace faultline::traces {

using nlohmann::json;

bool glob_match(std::string_view p, std::string_view t) {
  // Iterative matcher with single-star backtracking: linear in practice, no recursion.
  std::size_t pi = 0, ti = 0, star = std::string_view::npos, mark = 0;
  while (ti < t.size()) {
    if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = ti;
    } else if (pi < p.size() && p[pi] == t[ti]) {
      ++pi;
      ++ti;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      ti = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

std::string slug(std::string_view s) {
  std::string out;
  bool sep = false;
  for (char c : s) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (alnum) {
      if (sep && !out.empty()) out += '_';
      out += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      sep = false;
    } else {
      sep = true;
    }
  }
  return out.empty() ? "unnamed" : out;
}

int CategoryMap::find(const std::string& name) const {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<int>(i);
  return -1;
}

int CategoryMap::match(const Category& c, Scope event_scope) const {
  const char* sc = scope_name(event_scope);
  for (const MatchRule& r : rules) {
    if (!r.level.empty() && !glob_match(r.level, c.level)) continue;
    if (!r.cls.empty() && !glob_match(r.cls, c.cls)) continue;
    if (!r.desc.empty() && !glob_match(r.desc, c.desc)) continue;
    if (!r.scope.empty() && !glob_match(r.scope, sc)) continue;
    return r.category;
  }
  return default_category;
}

CategoryMap parse_category_map(const std::string& text, const std::string& file) {
  json doc = parse_config_json(text, file);
  ConfigObj o(doc, "$", file);
  CategoryMap m;
  m.file = file;
  o.string("description", "");
  const json* cats = o.get("categories");
  if (!cats || !cats->is_array() || cats->empty())
    o.fail("$.categories", "expected a non-empty array of fault categories");
  for (std::size_t i = 0; i < cats->size(); ++i) {
    const std::string p = "$.categories[" + std::to_string(i) + "]";
    const json& c = (*cats)[i];
    if (!c.is_object()) o.fail(p, "expected an object, got " + json_type_of(c));
    // The full check is the scenario loader's; here what the mapping itself relies on.
    if (!c.contains("name") || !c["name"].is_string() || c["name"].get<std::string>().empty())
      o.fail(p + ".name", "expected a non-empty string");
    const std::string name = c["name"].get<std::string>();
    if (m.find(name) >= 0) o.fail(p + ".name", "duplicate category name \"" + name + "\"");
    for (const char* k : {"rate_per_machine_day", "rate_per_job_day"})
      if (c.contains(k))
        o.fail(p + "." + k, "not in a mapping table: the trace supplies the rates");
    Scope s = Scope::kNode;
    if (c.contains("scope")) {
      const json& sj = c["scope"];
      const std::string v = sj.is_string() ? sj.get<std::string>() : "";
      if (v == "machine")
        s = Scope::kNode;
      else if (v == "rack")
        s = Scope::kRack;
      else if (v == "job")
        s = Scope::kJob;
      else
        o.fail(p + ".scope", "expected one of machine|rack|job, got " + json_brief(sj));
    }
    m.categories.push_back(c);
    m.names.push_back(name);
    m.scopes.push_back(s);
  }
  if (const json* rules = o.get("rules")) {
    if (!rules->is_array()) o.fail("$.rules", "expected an array of rules");
    for (std::size_t i = 0; i < rules->size(); ++i) {
      ConfigObj r((*rules)[i], "$.rules[" + std::to_string(i) + "]", file);
      MatchRule rule;
      rule.level = r.string("level", "");
      rule.cls = r.string("class", "");
      rule.desc = r.string("desc", "");
      rule.scope = r.string("scope", "");
      if (!rule.scope.empty()) {
        Scope s;
        if (rule.scope.find('*') == std::string::npos && !parse_scope(rule.scope, &s))
          r.fail(r.at("scope"),
                 "expected node|rack|switch|job (or a glob), got \"" + rule.scope + "\"");
        if (rule.scope == "machine") rule.scope = "node";
      }
      const std::string cat = r.string("category", "", true);
      rule.category = m.find(cat);
      if (rule.category < 0)
        r.fail(r.at("category"), "no category named \"" + cat + "\" in $.categories");
      r.finish();
      m.rules.push_back(rule);
    }
  }
  const std::string def = o.string("default", "");
  if (!def.empty()) {
    m.default_category = m.find(def);
    if (m.default_category < 0)
      o.fail("$.default", "no category named \"" + def + "\" in $.categories");
  }
  if (m.rules.empty() && m.default_category < 0)
    o.fail("$", "expected \"rules\" or a \"default\" category");
  o.finish();
  return m;
}

MappedFaults map_faults(const Trace& t, const std::vector<FaultSpan>& faults,
                        const CategoryMap& map, double merge_window_s) {
  MappedFaults r;
  r.category.assign(faults.size(), -1);
  // Match once per (trace category, event scope).
  std::vector<int> memo(t.categories.size() * 4, -2);
  // Start of the current incident per (category, scope kind, scope id).
  std::map<std::tuple<int, int, std::int32_t>, double> leader;
  for (std::size_t i = 0; i < faults.size(); ++i) {
    const FaultSpan& f = faults[i];
    int& m = memo[static_cast<std::size_t>(f.category) * 4 + static_cast<std::size_t>(f.scope)];
    if (m == -2) m = map.match(t.categories[static_cast<std::size_t>(f.category)], f.scope);
    if (m < 0) {
      ++r.unmapped;
      if (r.unmapped_lines.size() < 10) r.unmapped_lines.push_back(f.line);
      continue;
    }
    const Scope cs = map.scopes[static_cast<std::size_t>(m)];
    const bool wide = f.scope != Scope::kNode;
    if ((f.scope == Scope::kRack || f.scope == Scope::kSwitch) && cs != Scope::kRack) {
      ++r.scope_mismatch;
      if (r.mismatch_lines.size() < 10) r.mismatch_lines.push_back(f.line);
      continue;
    }
    if (f.scope == Scope::kJob && cs != Scope::kJob) {
      ++r.scope_mismatch;
      if (r.mismatch_lines.size() < 10) r.mismatch_lines.push_back(f.line);
      continue;
    }
    if (wide && (f.scope == Scope::kJob || f.group >= 0)) {
      const std::int32_t id = f.scope == Scope::kJob ? -1 : f.group;
      auto key = std::make_tuple(m, f.scope == Scope::kJob ? 1 : 0, id);
      auto it = leader.find(key);
      if (it != leader.end() && f.start_s - it->second <= merge_window_s) {
        ++r.merged;
        continue;
      }
      leader[key] = f.start_s;
    }
    r.category[i] = m;
    ++r.mapped;
  }
  return r;
}

CategoryMap load_category_map(const std::string& path) {
  return parse_category_map(read_text_file(path), path);
}

CategoryMap identity_category_map(const Trace& t) {
  CategoryMap m;
  m.file = "(one category per trace class)";
  std::set<std::string> seen;
  auto add = [&](const std::string& name, const std::string& scope, const std::string& signature) {
    if (m.find(name) >= 0) return;
    json c = {{"name", name},       {"class", "explicit"},          {"scope", scope},
              {"symptom", "crash"}, {"persistent", scope != "job"}, {"signature", signature}};
    m.categories.push_back(c);
    m.names.push_back(name);
    m.scopes.push_back(scope == "rack"  ? Scope::kRack
                       : scope == "job" ? Scope::kJob
                                        : Scope::kNode);
  };
  // Wider scopes first so their rules match before the per-class ones.
  bool rack = false, job = false;
  for (const Event& e : t.events) {
    rack |= e.scope == Scope::kRack || e.scope == Scope::kSwitch;
    job |= e.scope == Scope::kJob;
  }
  if (rack) {
    add("rack_outage", "rack", "rack or switch outage");
    for (const char* s : {"rack", "switch"})
      m.rules.push_back({"", "", "", s, m.find("rack_outage")});
  }
  if (job) {
    add("job_outage", "job", "job-wide outage");
    m.rules.push_back({"", "", "", "job", m.find("job_outage")});
  }
  for (const Category& c : t.categories) {
    if (!seen.insert(c.cls).second) continue;
    if (c.cls.empty()) {
      // An empty pattern would match every class: the unclassified faults are the default.
      add("unclassified", "machine", "fault");
      m.default_category = m.find("unclassified");
      continue;
    }
    std::string name = slug(c.cls);
    if (name == "rack_outage" || name == "job_outage" || name == "unclassified") name += "_class";
    add(name, "machine", c.cls);
    m.rules.push_back({"", c.cls, "", "", m.find(name)});
  }
  if (m.names.empty()) {
    add("fault", "machine", "fault");
    m.default_category = 0;
  }
  return m;
}

}  // namespace faultline::traces
