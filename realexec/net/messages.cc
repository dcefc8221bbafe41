#include "realexec/net/messages.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace faultline::live {

using nlohmann::json;

namespace {

std::string range_text(std::int64_t lo, std::int64_t hi) {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

// "a string", "an integer", ...: what the value was, for the refusal.
std::string kind_of(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::number_float:
      return "a number";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    default:
      return "something else";
  }
}

const json& need(const json& m, const char* key, const char* what) {
  auto it = m.find(key);
  if (it == m.end()) bad(std::string(key) + ": missing (expected " + what + ")");
  return *it;
}

std::string need_type(const json& j) {
  if (!j.is_object()) bad("expected a JSON object, got " + kind_of(j));
  auto t = j.find("type");
  if (t == j.end()) bad("type: missing (expected a string)");
  if (!t->is_string()) bad("type: expected a string, got " + kind_of(*t));
  const std::string& s = t->get_ref<const std::string&>();
  if (s.size() > 64 || !printable(s)) bad("type: expected a short printable name");
  return s;
}

// Prefixes the reason of a BadMessage thrown by `f` with the message type.
template <class F>
auto within(const std::string& type, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (BadMessage& e) {
    e.reason = type + ": " + e.reason;
    throw;
  }
}

}  // namespace

void bad(const std::string& reason) { throw BadMessage{reason}; }

std::optional<std::int64_t> opt_int(const json& m, const char* key, std::int64_t lo,
                                    std::int64_t hi) {
  auto it = m.find(key);
  if (it == m.end()) return std::nullopt;
  if (!it->is_number_integer())
    bad(std::string(key) + ": expected an integer in " + range_text(lo, hi));
  std::int64_t v;
  if (it->is_number_unsigned()) {
    const auto u = it->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi))
      bad(std::string(key) + ": expected an integer in " + range_text(lo, hi) + ", got " +
          std::to_string(u));
    v = static_cast<std::int64_t>(u);
  } else {
    v = it->get<std::int64_t>();
  }
  if (v < lo || v > hi)
    bad(std::string(key) + ": expected an integer in " + range_text(lo, hi) + ", got " +
        std::to_string(v));
  return v;
}

std::int64_t need_int(const json& m, const char* key, std::int64_t lo, std::int64_t hi) {
  auto v = opt_int(m, key, lo, hi);
  if (!v) bad(std::string(key) + ": missing (expected an integer)");
  return *v;
}

bool is_hex256(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

bool printable(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f;
  });
}

std::optional<std::string> opt_string(const json& m, const char* key, std::size_t max_len) {
  auto it = m.find(key);
  if (it == m.end()) return std::nullopt;
  if (!it->is_string()) bad(std::string(key) + ": expected a string");
  const std::string& s = it->get_ref<const std::string&>();
  if (s.size() > max_len)
    bad(std::string(key) + ": expected at most " + std::to_string(max_len) + " characters");
  if (!printable(s)) bad(std::string(key) + ": expected a single line of printable characters");
  return s;
}

std::string need_string(const json& m, const char* key, std::size_t max_len) {
  auto v = opt_string(m, key, max_len);
  if (!v) bad(std::string(key) + ": missing (expected a string)");
  return *v;
}

std::optional<std::string> opt_text(const json& m, const char* key, std::size_t max_len) {
  auto it = m.find(key);
  if (it == m.end()) return std::nullopt;
  if (!it->is_string()) bad(std::string(key) + ": expected a string, got " + kind_of(*it));
  const std::string& s = it->get_ref<const std::string&>();
  if (s.size() > max_len)
    bad(std::string(key) + ": expected at most " + std::to_string(max_len) + " bytes");
  return s;
}

std::string need_host(const json& m, const char* key) {
  std::string s = need_string(m, key, 253);
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ||
               c == ':';
      }))
    bad(std::string(key) + ": expected a host name or IP address");
  return s;
}

std::string need_hex_blob(const json& m, const char* key) {
  const std::string hex = need_string(m, key, 2 * kMaxRendezvousBlob);
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (hex.empty() || hex.size() % 2 != 0 ||
      !std::all_of(hex.begin(), hex.end(), [&](char c) { return digit(c) >= 0; }))
    bad(std::string(key) + ": expected an even number (2 to " +
        std::to_string(2 * kMaxRendezvousBlob) + ") of lowercase hex digits");
  std::string bytes(hex.size() / 2, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<char>(digit(hex[2 * i]) * 16 + digit(hex[2 * i + 1]));
  return bytes;
}

std::string to_hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    hex += kDigits[b >> 4];
    hex += kDigits[b & 15];
  }
  return hex;
}

bool opt_bool(const json& m, const char* key, bool def) {
  auto it = m.find(key);
  if (it == m.end()) return def;
  if (!it->is_boolean()) bad(std::string(key) + ": expected true or false, got " + kind_of(*it));
  return it->get<bool>();
}

std::optional<double> opt_number(const json& m, const char* key, double lo, double hi) {
  auto it = m.find(key);
  if (it == m.end()) return std::nullopt;
  if (!it->is_number()) bad(std::string(key) + ": expected a number, got " + kind_of(*it));
  const double x = it->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    char buf[96];
    std::snprintf(buf, sizeof buf, ": expected a number in [%g, %g]", lo, hi);
    bad(std::string(key) + buf);
  }
  return x;
}

std::optional<double> opt_metric(const json& m, const char* key) {
  auto it = m.find(key);
  if (it == m.end()) return std::nullopt;
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  if (it->is_null()) return kNaN;
  if (it->is_number()) {
    const double x = it->get<double>();
    return std::isfinite(x) ? x : kNaN;
  }
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    for (const char* w : {"NaN", "nan", "Infinity", "-Infinity", "inf", "-inf"})
      if (s == w) return kNaN;
  }
  bad(std::string(key) +
      ": expected a number (or null, \"NaN\", \"Infinity\", \"-Infinity\"), got " + kind_of(*it));
}

// --- replica groups ----------------------------------------------------------------------------

namespace {
std::vector<std::int64_t> replica_ids(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_array() || it->size() > 100000)
    bad(std::string(key) + ": expected an array of replica ids");
  std::vector<std::int64_t> out;
  for (const auto& v : *it) {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > kMaxRank)
      bad(std::string(key) + ": expected replica ids (integers >= 0)");
    if (!out.empty() && v.get<std::int64_t>() <= out.back())
      bad(std::string(key) + ": expected distinct ids in ascending order");
    out.push_back(v.get<std::int64_t>());
  }
  return out;
}
}  // namespace

Quorum decode_quorum(const json& j) {
  return within("quorum", [&] {
    if (!j.is_object()) bad("expected an object");
    Quorum q;
    q.number = need_int(j, "quorum", 0, kMaxReq);
    q.members = replica_ids(j, "members");
    if (q.members.empty()) bad("members: expected at least one replica");
    q.store = need_host(j, "store");
    const auto colon = q.store.rfind(':');
    const std::string port = colon == std::string::npos ? "" : q.store.substr(colon + 1);
    if (colon == 0 || port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoi(port) < 1 || std::stoi(port) > 65535)
      bad("store: expected host:port");
    if (j.contains("join")) q.join = replica_ids(j, "join");
    for (std::int64_t id : q.join)
      if (!std::binary_search(q.members.begin(), q.members.end(), id))
        bad("join: replica " + std::to_string(id) + " is not a member");
    if (q.join.size() >= q.members.size())
      bad("join: expected fewer joiners than members (a live peer holds the state)");
    return q;
  });
}

json encode(const Quorum& q) {
  return json{{"quorum", q.number}, {"members", q.members}, {"store", q.store}, {"join", q.join}};
}

// --- rank reports ------------------------------------------------------------------------------

bool RankReport::loss_nan() const { return loss && !std::isfinite(*loss); }
bool RankReport::grad_norm_nan() const { return grad_norm && !std::isfinite(*grad_norm); }

bool is_fault_id(std::string_view s) {
  return !s.empty() && s.size() <= kMaxFaultId && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

bool is_file_fault(std::string_view kind) {
  return kind == "crash" || kind == "hang" || kind == "nan" || kind == "slow" || kind == "sdc";
}

RankReport decode_rank_report(const json& j) {
  RankReport r;
  return within("report", [&] {
    r.type = need_type(j);
    r.rank = opt_int(j, "rank", 0, kMaxRank);
    r.step = opt_int(j, "step", 0, std::numeric_limits<std::int64_t>::max());
    r.step_time_s = opt_number(j, "step_time_s", 0, 1e9);
    r.loss = opt_metric(j, "loss");
    r.grad_norm = opt_metric(j, "grad_norm");
    // The trainjob's way: the value as null plus a flag; the flag alone counts too.
    if (opt_bool(j, "loss_nan", false)) r.loss = std::numeric_limits<double>::quiet_NaN();
    if (opt_bool(j, "grad_norm_nan", false)) r.grad_norm = std::numeric_limits<double>::quiet_NaN();
    r.checkpoint_step = opt_int(j, "checkpoint_step", -1, std::numeric_limits<std::int64_t>::max());
    r.restored_from = opt_text(j, "restored_from", 1024).value_or("");
    r.version = opt_text(j, "version", 256).value_or("");
    r.pid = opt_int(j, "pid", 0, std::numeric_limits<std::int32_t>::max());
    r.quorum = opt_int(j, "quorum", 0, kMaxReq);
    if (r.type == "fatal") {
      // The job's own account of why it dies: the first non-empty of these.
      for (const char* key : {"signature", "message", "detail"}) {
        std::string s = opt_text(j, key, kMaxText).value_or("");
        if (!s.empty()) {
          if (s.size() > kMaxSignature) s.resize(kMaxSignature);
          r.signature = s;
          break;
        }
      }
    }
    if (auto it = j.find("faults"); it != j.end()) {
      if (!it->is_array() || it->size() > kMaxFaultKinds)
        bad("faults: expected an array of at most " + std::to_string(kMaxFaultKinds) +
            " fault kinds");
      std::vector<std::string> kinds;
      for (const json& k : *it) {
        if (!k.is_string() || k.get_ref<const std::string&>().empty() ||
            k.get_ref<const std::string&>().size() > 16 || !printable(k.get<std::string>()))
          bad("faults: expected fault kinds (printable strings of 1 to 16 characters)");
        kinds.push_back(k.get<std::string>());
      }
      r.faults = std::move(kinds);
    }
    if (r.type == "fault") {
      r.fault_id = need_string(j, "id", kMaxFaultId);
      if (!is_fault_id(r.fault_id))
        bad("id: expected 1 to " + std::to_string(kMaxFaultId) +
            " letters, digits, '.', '_' or '-'");
      r.fault = need_string(j, "fault", 16);
      if (!is_file_fault(r.fault))
        bad("fault: expected crash, hang, nan, slow or sdc, got \"" + r.fault + "\"");
    }
    if (auto sig = opt_string(j, "stack_signal", 16)) {
      if (*sig != "SIGUSR1" && *sig != "SIGUSR2")
        bad("stack_signal: expected \"SIGUSR1\" or \"SIGUSR2\" (the signal on which the rank "
            "dumps its Python stacks), got \"" +
            *sig + "\"");
      r.stack_signal = *sig;
    }
    if (r.type == "step" && !r.step) bad("step: missing (expected the step completed)");
    if (r.type == "holding" && !r.step) bad("step: missing (expected the step the rank holds)");
    return r;
  });
}

RankReport parse_rank_report_line(std::string_view line, json* parsed) {
  if (line.size() > kMaxReportLine)
    bad("longer than " + std::to_string(kMaxReportLine / 1024) + " KiB");
  // Bare NaN, Infinity and -Infinity outside strings become strings that opt_metric reads.
  std::string text;
  text.reserve(line.size() + 16);
  bool in_string = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      text += c;
      if (c == '\\' && i + 1 < line.size())
        text += line[++i];
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    bool replaced = false;
    for (std::string_view w :
         {std::string_view("NaN"), std::string_view("Infinity"), std::string_view("-Infinity")}) {
      if (line.substr(i, w.size()) == w) {
        text += '"';
        text += w;
        text += '"';
        i += w.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) text += c;
  }
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) bad("not JSON");
  if (!j.is_object()) bad("not a JSON object");
  RankReport r = decode_rank_report(j);
  if (parsed) *parsed = std::move(j);
  return r;
}

json encode(const RankReport& r) {
  json j{{"type", r.type}};
  if (r.rank) j["rank"] = *r.rank;
  if (r.step) j["step"] = *r.step;
  if (r.step_time_s) j["step_time_s"] = *r.step_time_s;
  auto metric = [&](const char* key, const std::optional<double>& v) {
    if (!v) return;
    if (std::isfinite(*v)) {
      j[key] = *v;
    } else {
      j[key] = nullptr;
      j[std::string(key) + "_nan"] = true;
    }
  };
  metric("loss", r.loss);
  metric("grad_norm", r.grad_norm);
  if (r.checkpoint_step) j["checkpoint_step"] = *r.checkpoint_step;
  if (!r.restored_from.empty()) j["restored_from"] = r.restored_from;
  if (!r.version.empty()) j["version"] = r.version;
  if (r.pid) j["pid"] = *r.pid;
  if (r.quorum) j["quorum"] = *r.quorum;
  if (!r.signature.empty()) j["signature"] = r.signature;
  if (r.faults) j["faults"] = *r.faults;
  if (!r.fault_id.empty()) j["id"] = r.fault_id;
  if (!r.fault.empty()) j["fault"] = r.fault;
  if (!r.stack_signal.empty()) j["stack_signal"] = r.stack_signal;
  return j;
}

// --- the handshake -----------------------------------------------------------------------------

namespace {

std::string need_hex256(const json& j, const char* key) {
  const std::string v = need_string(j, key, 64);
  if (!is_hex256(v)) bad(std::string(key) + ": expected 64 lowercase hex digits");
  return v;
}

}  // namespace

std::string Hello::proof_role() const {
  if (role == Role::kAgent) return "agent";
  return read_only ? "client-read" : "client";
}

Hello decode_hello(const json& j, int protocol_version) {
  const std::string type = need_type(j);
  if (type != "hello") bad("the first message must be a hello, got \"" + type + "\"");
  return within("hello", [&] {
    Hello h;
    if (j.contains("token"))
      bad("token: the token never goes on the wire; expected protocol " +
          std::to_string(protocol_version) + " (challenge and proof)");
    const auto proto = opt_int(j, "proto", 0, 1 << 20);
    if (!proto) bad("proto: missing (expected " + std::to_string(protocol_version) + ")");
    if (*proto != protocol_version)
      bad("proto: protocol version mismatch: expected " + std::to_string(protocol_version) +
          ", got " + std::to_string(*proto));
    const std::string role = need_string(j, "role", 16);
    h.nonce = need_hex256(j, "nonce");
    if (role == "client") {
      h.role = Hello::Role::kClient;
      const std::string access = opt_string(j, "access", 16).value_or("admin");
      if (access != "admin" && access != "read")
        bad("access: expected \"admin\" or \"read\", got \"" + access + "\"");
      h.read_only = access == "read";
      return h;
    }
    if (role != "agent") bad("role: expected \"agent\" or \"client\", got \"" + role + "\"");
    h.role = Hello::Role::kAgent;
    h.name = need_string(j, "name", 256);
    return h;
  });
}

Challenge decode_challenge(const json& j) {
  const std::string type = need_type(j);
  if (type != "challenge") bad("expected a challenge, got \"" + type + "\"");
  return within("challenge", [&] {
    Challenge c;
    c.nonce = need_hex256(j, "nonce");
    c.proof = need_hex256(j, "proof");
    return c;
  });
}

Auth decode_auth(const json& j) {
  const std::string type = need_type(j);
  if (type != "auth") bad("expected auth, got \"" + type + "\"");
  return within("auth", [&] {
    Auth a;
    a.proof = need_hex256(j, "proof");
    a.gen = opt_int(j, "gen", 0, std::numeric_limits<std::int64_t>::max());
    a.pid = opt_int(j, "pid", 0, std::numeric_limits<std::int32_t>::max());
    if (auto it = j.find("ranks"); it != j.end()) {
      if (!it->is_array()) bad("ranks: expected an array of {rank, local_rank, pid}");
      if (it->size() > 4096) bad("ranks: expected at most 4096 ranks");
      for (const json& r : *it) {
        if (!r.is_object()) bad("ranks: expected an array of {rank, local_rank, pid}");
        a.alive_ranks.push_back(within("ranks", [&] { return need_int(r, "rank", 0, kMaxRank); }));
      }
    }
    return a;
  });
}

// --- agent -> controller ----------------------------------------------------------------------

AgentMessage decode_agent_message(const json& j) {
  const std::string type = need_type(j);
  return within(type, [&]() -> AgentMessage {
    if (type == "heartbeat") return AgentHeartbeat{};
    if (type == "report") {
      AgentReport a;
      a.gen = need_int(j, "gen", 0, std::numeric_limits<std::int64_t>::max());
      a.rank = opt_int(j, "rank", 0, kMaxRank).value_or(-1);
      const json& body = need(j, "report", "an object");
      if (!body.is_object()) bad("report: expected an object, got " + kind_of(body));
      try {
        a.report = decode_rank_report(body);
      } catch (BadMessage& e) {
        // "report: loss_nan: ..." -> "report.loss_nan: ..."
        if (e.reason.rfind("report: ", 0) == 0)
          e.reason = "report." + e.reason.substr(8);
        else
          e.reason = "report: " + e.reason;
        throw;
      }
      return a;
    }
    if (type == "exit") {
      AgentExit e;
      e.gen = need_int(j, "gen", 0, std::numeric_limits<std::int64_t>::max());
      e.rank = need_int(j, "rank", 0, kMaxRank);
      e.pid = opt_int(j, "pid", 0, std::numeric_limits<std::int32_t>::max()).value_or(0);
      e.code = static_cast<int>(opt_int(j, "code", -1, 255).value_or(-1));
      e.signal = static_cast<int>(opt_int(j, "signal", 0, 128).value_or(0));
      e.signature = opt_text(j, "signature", kMaxText).value_or("");
      return e;
    }
    if (type == "alert") {
      AgentAlert a;
      a.kind = need_string(j, "kind", 16);
      if (a.kind != "nic" && a.kind != "gpu" && a.kind != "host")
        bad("kind: expected \"nic\", \"gpu\" or \"host\", got \"" + a.kind + "\"");
      a.detail = opt_text(j, "detail", kMaxText).value_or("");
      return a;
    }
    if (type == "done" || type == "error") {
      AgentReply r;
      r.req = static_cast<std::uint64_t>(need_int(j, "req", 0, kMaxReq));
      r.ok = type == "done" && opt_bool(j, "ok", true);
      r.detail = opt_text(j, "detail", kMaxText).value_or("");
      if (r.detail.empty())
        r.detail = opt_text(j, "reason", kMaxText).value_or(type == "error" ? "error" : "");
      r.timed_out = opt_bool(j, "timed_out", false);
      r.hash = opt_string(j, "hash", 256);
      r.rendezvous = opt_string(j, "rendezvous", 16);
      r.collective_s = opt_number(j, "collective_s", 0, 1e6);
      for (const char* key : {"spared", "kept"}) {
        const auto it = j.find(key);
        if (it == j.end()) continue;
        if (!it->is_array() || it->size() > (1u << 20))
          bad(std::string(key) + ": expected an array of ranks");
        std::vector<std::int64_t> ranks;
        for (const json& x : *it) {
          if (!x.is_number_integer() || x.get<std::int64_t>() < 0 ||
              x.get<std::int64_t>() >= (1 << 20))
            bad(std::string(key) + ": expected an array of ranks (integers 0..2^20-1)");
          ranks.push_back(x.get<std::int64_t>());
        }
        (std::string(key) == "spared" ? r.spared : r.kept) = std::move(ranks);
      }
      if (r.rendezvous && *r.rendezvous != "ok" && *r.rendezvous != "timed_out" &&
          *r.rendezvous != "failed" && *r.rendezvous != "not_reached")
        bad("rendezvous: expected \"ok\", \"timed_out\", \"failed\" or \"not_reached\"");
      if (auto it = j.find("by_rank"); it != j.end()) {
        if (!it->is_object()) bad("by_rank: expected an object {rank: signature}");
        for (auto kv = it->begin(); kv != it->end(); ++kv) {
          const std::string& k = kv.key();
          if (k.empty() || k.size() > 10 ||
              !std::all_of(k.begin(), k.end(), [](char c) { return c >= '0' && c <= '9'; }))
            bad("by_rank: expected rank numbers as keys");
          if (!kv->is_string() || kv->get_ref<const std::string&>().size() > (1u << 16))
            bad("by_rank." + k + ": expected a stack signature (a string of at most 64 KiB)");
          r.by_rank[std::stoll(k)] = kv->get<std::string>();
        }
      }
      return r;
    }
    if (type == "rendezvous") {
      AgentRendezvous r;
      r.probe_req = static_cast<std::uint64_t>(need_int(j, "probe_req", 0, kMaxReq));
      r.blob = need_hex_blob(j, "blob");
      return r;
    }
    bad("type: unknown message type \"" + type + "\"");
  });
}

// --- operator client -> controller ------------------------------------------------------------

ClientRequest decode_client_request(const json& j, json* req_out) {
  ClientRequest c;
  const std::string type = need_type(j);
  return within(type, [&] {
    if (auto it = j.find("req"); it != j.end()) {
      c.req = need_int(j, "req", 0, kMaxReq);
      if (req_out) *req_out = c.req;
    }
    if (type == "status") {
      c.body = StatusRequest{opt_bool(j, "parts", false)};
    } else if (type == "stop") {
      c.body = StopRequest{};
    } else if (type == "update") {
      UpdateRequest u;
      u.version = need_string(j, "version", 256);
      u.urgent = opt_bool(j, "urgent", true);
      c.body = u;
    } else if (type == "inject") {
      InjectRequest i;
      i.machine = need_string(j, "machine", 256);
      i.fault = need_string(j, "fault", 32);
      i.detail = opt_string(j, "detail", 200).value_or("");
      c.body = i;
    } else {
      bad("type: unknown request type \"" + type + "\"");
    }
    return c;
  });
}

std::optional<std::string> inject_detail_error(const std::string& fault,
                                               const std::string& detail) {
  if (fault == "slow") {
    char* end = nullptr;
    const double f = std::strtod(detail.c_str(), &end);
    if (detail.empty() || end == detail.c_str() || *end != '\0' || !(f >= 1) || !(f <= 100))
      return "slow expects a slowdown factor in [1, 100], e.g. \"3\"";
  } else if (fault == "warn" && !detail.empty()) {
    char* end = nullptr;
    const double lead = std::strtod(detail.c_str(), &end);
    if (end == detail.c_str() || *end != '\0' || !(lead > 0) || !(lead <= 1e7))
      return "warn expects the lead time of the predicted failure in seconds, in (0, 1e7], "
             "e.g. \"600\"";
  } else if (fault == "sdc") {
    const std::string d = detail.empty() ? "after=0" : detail;
    if (d.rfind("after=", 0) != 0 || d.size() == 6 || d.size() > 24 ||
        !std::all_of(d.begin() + 6, d.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return "sdc expects \"after=N\" (N steps)";
  }
  return std::nullopt;
}

}  // namespace faultline::live
