// The live-mode protocol fuzzer's in-process targets: the config loader, the journal reader and
// the rank-report parser (live_fuzz.cc says what they must do).
#include "tests/realexec/live/live_fuzz.h"

namespace faultline::live_fuzz {

// --- targets in process: the config loader, the journal reader, the rank-report parser ----

namespace {

// One input derived from `seed`: byte-level damage (flips, cuts, repeats, inserts of the
// tokens that broke readers before: 1e999, repeated keys, deep nesting, bad UTF-8), or the
// JSON value retyped field by field (live_support.h's mutated()).
std::string mutate_text(const std::string& seed, std::mt19937_64& rng) {
  static const char* tokens[] = {"1e999",
                                 "-1e999",
                                 "1e-400",
                                 "-0",
                                 "NaN",
                                 "Infinity",
                                 "null",
                                 "true",
                                 "\"\"",
                                 "18446744073709551616",
                                 "-9223372036854775809",
                                 "[[[[[[[[[[[[[[[[",
                                 "}}}}",
                                 "\"heartbeat_s\": 1, \"heartbeat_s\": 2, ",
                                 "\"\\ud800\"",
                                 "\xff\xfe",
                                 "\"\\u0000\"",
                                 ",",
                                 ":",
                                 "{}",
                                 "[]",
                                 "\"machines\": [], "};
  std::string t = seed;
  if (rng() % 4 == 0) {
    const json j = json::parse(seed, nullptr, false);
    if (!j.is_discarded()) {
      json m = mutated(j, rng);
      // Down one level too: the config's job and machines, the journal's arrays.
      for (auto& [k, v] : m.items())
        if ((v.is_object() || v.is_array()) && rng() % 3 == 0 && !v.empty()) {
          if (v.is_object())
            v = mutated(v, rng);
          else
            v[rng() % v.size()] = mutated(json{{"x", v[0]}}, rng)["x"];
        }
      return m.dump(-1, ' ', false, json::error_handler_t::replace);
    }
  }
  for (int e = 1 + static_cast<int>(rng() % 4); e > 0 && !t.empty(); --e) {
    const std::size_t at = rng() % (t.size() + 1);
    switch (rng() % 6) {
      case 0:
        t[std::min(at, t.size() - 1)] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:
        t.erase(at, 1 + rng() % 16);
        break;
      case 2:
        t.insert(at, tokens[rng() % (sizeof tokens / sizeof *tokens)]);
        break;
      case 3:
        t.insert(at, t.substr(at, rng() % 64));
        break;
      case 4:
        t.resize(at);
        break;
      default:
        t.insert(at, 1, static_cast<char>(rng() % 256));
        break;
    }
  }
  return t;
}

// Feeds `frames` inputs to `read`, which returns true when the input was taken and false when
// it was refused in the documented way; anything else (another exception, a crash) fails.
int fuzz_in_process(const std::string& target, const std::vector<std::string>& seeds,
                    const Options& o, const std::function<bool(const std::string&)>& read) {
  std::mt19937_64 rng(o.seed * 0x9e3779b97f4a7c15ull + std::hash<std::string>{}(target));
  const auto t0 = Clock::now();
  long taken = 0;
  for (const auto& s : seeds)
    if (!read(s)) fail(target + " target: a valid seed was refused: " + s.substr(0, 200));
  for (long i = 0; i < o.frames; ++i) {
    const std::string in = mutate_text(seeds[rng() % seeds.size()], rng);
    try {
      taken += read(in);
    } catch (const std::exception& e) {
      fail(target + " target: input " + std::to_string(i) + " threw " + e.what() +
           " instead of a one-line refusal: " + in.substr(0, 300));
    }
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("%s: %ld inputs in %.1f s (%.0f/s): %ld taken, %ld refused in one line\n",
              target.c_str(), o.frames, secs, o.frames / secs, taken, o.frames - taken);
  return 0;
}

}  // namespace

int fuzz_config(const Options& o) {
  const auto registry = faultline::policies::builtin_registry();
  json machines =
      json::array({{{"name", "m0"}, {"addr", "127.0.0.1"}, {"workdir", "w/m0"}, {"nic", "eth0"}},
                   {{"name", "m1"}, {"gpu_pci", {"0000:17:00.0"}}}});
  const json full{
      {"description", "fuzz"},
      {"controller", "127.0.0.1:7700"},
      {"token_file", "token"},
      {"status_token_file", "status-token"},
      {"metrics_listen", "127.0.0.1:9464"},
      {"machines", machines},
      {"standby", json::array({{{"name", "s0"}, {"ssh", "ops@host"}}})},
      {"job",
       {{"versions", {{"v1", {"/bin/true", "--x"}}, {"v2", {"/bin/true"}}}},
        {"version", "v1"},
        {"gpus_per_machine", 1},
        {"nominal_step_time_s", 0.1},
        {"env", {{"A", "b"}}}}},
      {"policy",
       {{"stack", "byterobust"}, {"params", {{"standby_pool", 1}, {"localization", "bisection"}}}}},
      {"seed", 7},
      {"trainjob_bin", "/bin/true"},
      {"heartbeat_s", 0.5},
      {"heartbeat_timeout_s", 3},
      {"repair", {{"check_after_s", 1}, {"max_checks", 3}}},
      {"slurm_standby", {{"workdir", "/w/{node}"}}}};
  const json small{{"token_file", "t"},
                   {"machines", {{{"name", "a"}}}},
                   {"job", {{"versions", {{"v", {"x"}}}}}},
                   {"trainjob_bin", "t"}};
  return fuzz_in_process(
      "config", {full.dump(), full.dump(2), small.dump()}, o, [&](const std::string& text) {
        try {
          live::parse_live_config(text, "/fuzz/live.json", registry);
          return true;
        } catch (const live::LiveConfigError& e) {
          const std::string w = e.what();
          if (w.rfind("/fuzz/live.json: ", 0) != 0 || w.find('\n') != std::string::npos)
            fail("config target: an error that is not one line naming the file: " +
                 w.substr(0, 300));
          return false;
        }
      });
}

int fuzz_journal(const Options& o) {
  live::Journal writer(o.dir + "/fuzz-journal.json");
  auto& st = writer.state();
  st.origin_unix_ns = 1700000000000000000;
  st.gen = 3;
  st.version = "v1";
  st.good_version = "v1";
  st.running = true;
  st.slots = {0, 1, 2};
  st.standby = {3};
  st.evicted = {4};
  st.step_times = {0.1, 0.11};
  st.strikes = {{4, 2}};
  st.retired = {5};
  std::string err;
  if (!writer.save(&err)) fail("journal target: " + err);
  const std::string seed = slurp(o.dir + "/fuzz-journal.json");
  return fuzz_in_process("journal", {seed}, o, [](const std::string& text) {
    live::Journal j("/fuzz/journal.json");
    std::string why;
    const bool ok = j.parse(text, &why);
    if (!ok && (why.rfind("/fuzz/journal.json: ", 0) != 0 || why.find('\n') != std::string::npos))
      fail("journal target: an error that is not one line naming the file: " + why.substr(0, 300));
    return ok;
  });
}

int fuzz_rank_lines(const Options& o) {
  const std::vector<std::string> seeds = {
      R"({"type":"step","rank":0,"step":12,"loss":2.5,"grad_norm":1.0,"step_time_s":0.1})",
      R"({"type":"started","rank":1,"step":0})",
      R"({"type":"fatal","rank":0,"signature":"CUDA error: an illegal memory access was encountered"})",
      R"({"type":"checkpoint","rank":0,"step":20})", R"({"type": "step", "step": 2, "loss": NaN})"};
  return fuzz_in_process("rank-pipe", seeds, o, [](const std::string& line) {
    try {
      json parsed;
      live::parse_rank_report_line(line, &parsed);
      return true;
    } catch (const live::BadMessage&) {
      return false;
    }
  });
}

}  // namespace faultline::live_fuzz
