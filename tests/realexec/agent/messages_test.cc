// Live mode's message codec (realexec/net/messages.h): every message that crashed a process in
// the operator's review is refused with a reason naming the field, NaN is read the way jobs
// write it, a million generated and mutated frames raise nothing but a refusal, and the
// handshake (auth.h) proves the token both ways without replay, reflection or a token sent.
#include "realexec/net/messages.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "realexec/net/auth.h"

namespace faultline::live {
namespace {

using nlohmann::json;

template <class F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const BadMessage& e) {
    return e.reason;
  }
  return "(accepted)";
}

const std::string kNonce(64, 'a');

json good_hello() {
  return {{"type", "hello"}, {"role", "agent"}, {"name", "m0"}, {"proto", 2}, {"nonce", kNonce}};
}

json good_auth() {
  return {{"type", "auth"},
          {"proof", std::string(64, 'b')},
          {"pid", 42},
          {"gen", 3},
          {"ranks", {{{"rank", 0}, {"local_rank", 0}, {"pid", 7}}}}};
}

json good_step_report() {
  return {{"type", "report"},
          {"gen", 3},
          {"rank", 0},
          {"report",
           {{"type", "step"},
            {"rank", 0},
            {"step", 12},
            {"loss", 2.5},
            {"grad_norm", 0.7},
            {"step_time_s", 0.1}}}};
}

// --- the messages of the review, each a regression test -------------------------------------

TEST(Messages, TypeOfTheWrongKindIsRefusedOnEveryChannel) {
  for (const json& type : {json(nullptr), json(5), json{{"a", 1}}, json::array(), json(true)}) {
    const json m{{"type", type}};
    SCOPED_TRACE(m.dump());
    EXPECT_EQ(refusal([&] { decode_hello(m, 2); }).rfind("type: expected a string, got ", 0), 0u);
    EXPECT_EQ(refusal([&] { decode_agent_message(m); }).rfind("type: expected a string, got ", 0),
              0u);
    EXPECT_EQ(refusal([&] { decode_client_request(m); }).rfind("type: expected a string, got ", 0),
              0u);
    EXPECT_EQ(
        refusal([&] { decode_rank_report(m); }).rfind("report: type: expected a string, got ", 0),
        0u);
  }
  EXPECT_EQ(refusal([] {
              decode_hello(json{{"type", nullptr}}, 2);
            }),
            "type: expected a string, got null");
  EXPECT_EQ(refusal([] { decode_hello(json::array(), 2); }),
            "expected a JSON object, got an array");
  EXPECT_EQ(refusal([] { decode_agent_message(json::object()); }),
            "type: missing (expected a string)");
}

TEST(Messages, HelloFieldsOfTheWrongTypeAreRefused) {
  json h = good_hello();
  h["proto"] = "1";
  EXPECT_EQ(refusal([&] { decode_hello(h, 2); }),
            "hello: proto: expected an integer in [0, 1048576]");
  h["proto"] = 1;
  EXPECT_EQ(refusal([&] { decode_hello(h, 2); }),
            "hello: proto: protocol version mismatch: expected 2, got 1");
  h = good_hello();
  h["role"] = 7;
  EXPECT_EQ(refusal([&] { decode_hello(h, 2); }), "hello: role: expected a string");
  h["role"] = "root";
  EXPECT_EQ(refusal([&] { decode_hello(h, 2); }),
            "hello: role: expected \"agent\" or \"client\", got \"root\"");
  h = good_hello();
  h["token"] = "t0123456789abcdef";
  EXPECT_EQ(
      refusal([&] { decode_hello(h, 2); }),
      "hello: token: the token never goes on the wire; expected protocol 2 (challenge and proof)");
  h = good_hello();
  h["nonce"] = "abc";
  EXPECT_EQ(refusal([&] { decode_hello(h, 2); }), "hello: nonce: expected 64 lowercase hex digits");
  json a = good_auth();
  a["ranks"] = {{{"rank", "0"}}};
  EXPECT_EQ(refusal([&] { decode_auth(a); }),
            "auth: ranks: rank: expected an integer in [0, 2147483647]");
  a = good_auth();
  a["proof"] = 5;
  EXPECT_EQ(refusal([&] { decode_auth(a); }), "auth: proof: expected a string");
  h = good_hello();
  h["name"] = "m0\n";
  EXPECT_EQ(refusal([&] { decode_hello(h, 2); }),
            "hello: name: expected a single line of printable characters");
  EXPECT_EQ(refusal([] {
              decode_hello(json{{"type", "status"}}, 2);
            }),
            "the first message must be a hello, got \"status\"");
  const Hello ok = decode_hello(good_hello(), 2);
  EXPECT_EQ(ok.name, "m0");
  EXPECT_EQ(ok.proof_role(), "agent");
  const Auth au = decode_auth(good_auth());
  EXPECT_EQ(au.gen, 3);
  EXPECT_EQ(au.alive_ranks, std::vector<std::int64_t>{0});
}

TEST(Messages, RankReportWithAFlagOfTheWrongTypeIsRefused) {
  json m = good_step_report();
  m["report"]["loss_nan"] = "no";
  EXPECT_EQ(refusal([&] { decode_agent_message(m); }),
            "report: report.loss_nan: expected true or false, got a string");
  m = good_step_report();
  m["report"]["step"] = -1;
  EXPECT_EQ(refusal([&] { decode_agent_message(m); }),
            "report: report.step: expected an integer in [0, 9223372036854775807], got -1");
  m = good_step_report();
  m["report"].erase("step");
  EXPECT_EQ(refusal([&] { decode_agent_message(m); }),
            "report: report.step: missing (expected the step completed)");
  m = good_step_report();
  m["report"] = "x";
  EXPECT_EQ(refusal([&] { decode_agent_message(m); }),
            "report: report: expected an object, got a string");
  m = good_step_report();
  m["gen"] = 1.5;
  EXPECT_EQ(refusal([&] { decode_agent_message(m); }),
            "report: gen: expected an integer in [0, 9223372036854775807]");
}

TEST(Messages, RankPipeLineWithANumericTypeIsRefused) {
  EXPECT_EQ(refusal([] { parse_rank_report_line(R"({"type": 5})"); }),
            "report: type: expected a string, got an integer");
  EXPECT_EQ(refusal([] { parse_rank_report_line("not json"); }), "not JSON");
  EXPECT_EQ(refusal([] { parse_rank_report_line("[1,2]"); }), "not a JSON object");
  EXPECT_EQ(refusal([] { parse_rank_report_line(std::string(5000, ' ')); }), "longer than 4 KiB");
}

// A job's acknowledgement of an injected fault, and the kinds it says it takes: hostile input,
// bounded and checked before the agent believes it (issue 52).
TEST(Messages, FaultAcknowledgementsAndTheKindsAJobTakesAreChecked) {
  const RankReport ack =
      parse_rank_report_line(R"({"type":"fault","rank":2,"id":"9f3a.b_c-01","fault":"nan"})");
  EXPECT_EQ(ack.fault_id, "9f3a.b_c-01");
  EXPECT_EQ(ack.fault, "nan");
  EXPECT_EQ(encode(ack)["id"], "9f3a.b_c-01");
  EXPECT_EQ(refusal([] { parse_rank_report_line(R"({"type":"fault","fault":"nan"})"); }),
            "report: id: missing (expected a string)");
  EXPECT_EQ(refusal([] { parse_rank_report_line(R"({"type":"fault","id":"a/b","fault":"nan"})"); }),
            "report: id: expected 1 to 64 letters, digits, '.', '_' or '-'");
  EXPECT_EQ(refusal([] {
              parse_rank_report_line(R"({"type":"fault","id":")" + std::string(65, 'a') +
                                     R"(","fault":"nan"})");
            }),
            "report: id: expected at most 64 characters");
  EXPECT_EQ(refusal([] { parse_rank_report_line(R"({"type":"fault","id":"a","fault":"kill"})"); }),
            "report: fault: expected crash, hang, nan, slow or sdc, got \"kill\"");
  const RankReport started =
      parse_rank_report_line(R"({"type":"started","step":0,"faults":["crash","nan"]})");
  ASSERT_TRUE(started.faults);
  EXPECT_EQ(*started.faults, (std::vector<std::string>{"crash", "nan"}));
  EXPECT_EQ(encode(started)["faults"], json::array({"crash", "nan"}));
  EXPECT_FALSE(parse_rank_report_line(R"({"type":"started","step":0})").faults);
  json many = json::array();
  for (int i = 0; i < 17; ++i) many.push_back("nan");
  EXPECT_EQ(refusal([&] {
              parse_rank_report_line(json{{"type", "started"}, {"faults", many}}.dump());
            }),
            "report: faults: expected an array of at most 16 fault kinds");
  EXPECT_EQ(refusal([] { parse_rank_report_line(R"({"type":"started","faults":[3]})"); }),
            "report: faults: expected fault kinds (printable strings of 1 to 16 characters)");
}

// The signal on which a Python rank dumps its stacks (issue 52): the agent sends it when it
// captures, so only the user signals pass; anything else drops the line, in one line.
TEST(Messages, TheStackSignalOfAStartedReportIsAUserSignal) {
  const RankReport started =
      parse_rank_report_line(R"({"type":"started","step":0,"stack_signal":"SIGUSR2"})");
  EXPECT_EQ(started.stack_signal, "SIGUSR2");
  EXPECT_EQ(encode(started)["stack_signal"], "SIGUSR2");
  EXPECT_EQ(parse_rank_report_line(R"({"type":"started","step":0})").stack_signal, "");
  EXPECT_FALSE(encode(parse_rank_report_line(R"({"type":"started"})")).contains("stack_signal"));
  for (const char* bad : {"SIGKILL", "SIGSTOP", "SIGTERM", "sigusr1", "10", ""}) {
    EXPECT_EQ(refusal([&] {
                parse_rank_report_line(json{{"type", "started"}, {"stack_signal", bad}}.dump());
              }),
              std::string("report: stack_signal: expected \"SIGUSR1\" or \"SIGUSR2\" (the "
                          "signal on which the rank dumps its Python stacks), got \"") +
                  bad + "\"");
  }
  EXPECT_EQ(refusal([] { parse_rank_report_line(R"({"type":"started","stack_signal":12})"); }),
            "report: stack_signal: expected a string");
  EXPECT_EQ(refusal([] {
              parse_rank_report_line(R"({"type":"started","stack_signal":")" +
                                     std::string(100, 'S') + R"("})");
            }),
            "report: stack_signal: expected at most 16 characters");
}

// In place (PROTOCOL.md, "In-place restarts"): a holding report names the step it holds; the
// replies of a sparing kill and of an in-place launch name ranks.
TEST(Messages, InPlaceReportsAndRepliesAreChecked) {
  EXPECT_EQ(parse_rank_report_line(R"({"type":"holding","rank":2,"step":44})").step, 44);
  EXPECT_EQ(refusal([] { parse_rank_report_line(R"({"type":"holding","rank":2})"); }),
            "report: step: missing (expected the step the rank holds)");
  const auto reply = std::get<AgentReply>(
      decode_agent_message(json{{"type", "done"}, {"req", 4}, {"spared", {0, 3}}}));
  ASSERT_TRUE(reply.spared);
  EXPECT_EQ(*reply.spared, (std::vector<std::int64_t>{0, 3}));
  EXPECT_FALSE(reply.kept);
  EXPECT_EQ(refusal([] {
              decode_agent_message(json{{"type", "done"}, {"req", 4}, {"kept", {-1}}});
            }),
            "done: kept: expected an array of ranks (integers 0..2^20-1)");
  EXPECT_EQ(refusal([] {
              decode_agent_message(json{{"type", "done"}, {"req", 4}, {"spared", "0"}});
            }),
            "done: spared: expected an array of ranks");
}

TEST(Messages, AgentRepliesAlertsAndExitsAreChecked) {
  EXPECT_EQ(refusal([] {
              decode_agent_message(json{{"type", "done"}, {"req", 1}, {"ok", "yes"}});
            }),
            "done: ok: expected true or false, got a string");
  EXPECT_EQ(refusal([] {
              decode_agent_message(json{{"type", "done"}, {"req", 1}, {"timed_out", 1}});
            }),
            "done: timed_out: expected true or false, got an integer");
  EXPECT_EQ(refusal([] {
              decode_agent_message(json{{"type", "done"}, {"req", 1}, {"by_rank", {{"x", "s"}}}});
            }),
            "done: by_rank: expected rank numbers as keys");
  EXPECT_EQ(refusal([] {
              decode_agent_message(json{{"type", "alert"}, {"kind", "fire"}});
            }),
            "alert: kind: expected \"nic\", \"gpu\" or \"host\", got \"fire\"");
  EXPECT_EQ(refusal([] {
              decode_agent_message(json{{"type", "exit"}, {"gen", 1}, {"rank", 0}, {"code", 300}});
            }),
            "exit: code: expected an integer in [-1, 255], got 300");
  EXPECT_EQ(refusal([] {
              decode_agent_message(json{{"type", "welcome"}});
            }),
            "welcome: type: unknown message type \"welcome\"");
  const auto reply = std::get<AgentReply>(decode_agent_message(
      json{{"type", "done"}, {"req", 9}, {"by_rank", {{"10", "b"}, {"2", "a"}}}, {"hash", "h1"}}));
  EXPECT_TRUE(reply.ok) << "a done without ok succeeded";
  EXPECT_EQ(reply.hash, "h1");
  ASSERT_EQ(reply.by_rank.size(), 2u);
  EXPECT_EQ(reply.by_rank.begin()->second, "a") << "ordered by rank number, not by key text";
  const auto err = std::get<AgentReply>(
      decode_agent_message(json{{"type", "error"}, {"req", 9}, {"reason", "r"}}));
  EXPECT_FALSE(err.ok);
  EXPECT_EQ(err.detail, "r");
}

// The relayed rendezvous of a probe across machines (PROTOCOL.md, "Probes across machines"):
// rank 0's agent sends its probe's blob; only the hex of at most 1 KiB gets through.
TEST(Messages, RendezvousBlobsAreCheckedHexOfBoundedSize) {
  const auto r = std::get<AgentRendezvous>(
      decode_agent_message(json{{"type", "rendezvous"}, {"probe_req", 7}, {"blob", "00ff10ab"}}));
  EXPECT_EQ(r.probe_req, 7u);
  EXPECT_EQ(r.blob, std::string("\x00\xff\x10\xab", 4));
  EXPECT_EQ(to_hex(r.blob), "00ff10ab");
  const std::string what =
      "rendezvous: blob: expected an even number (2 to 2048) of lowercase hex digits";
  for (const json& blob : {json("abc"), json("ABCD"), json("zz"), json(""), json("0g")})
    EXPECT_EQ(
        refusal([&] {
          decode_agent_message(json{{"type", "rendezvous"}, {"probe_req", 1}, {"blob", blob}});
        }),
        what)
        << blob;
  EXPECT_EQ(refusal([] {
              decode_agent_message(
                  json{{"type", "rendezvous"}, {"probe_req", 1}, {"blob", std::string(2050, 'a')}});
            }),
            "rendezvous: blob: expected at most 2048 characters");
  EXPECT_EQ(refusal([] {
              decode_agent_message(json{{"type", "rendezvous"}, {"probe_req", 1}, {"blob", 5}});
            }),
            "rendezvous: blob: expected a string");
  EXPECT_EQ(refusal([] {
              decode_agent_message(json{{"type", "rendezvous"}, {"blob", "00"}});
            }),
            "rendezvous: probe_req: missing (expected an integer)");
  EXPECT_EQ(refusal([] {
              decode_agent_message(json{{"type", "rendezvous"}, {"probe_req", -1}, {"blob", "00"}});
            }),
            "rendezvous: probe_req: expected an integer in [0, 9007199254740992], got -1");
  // The agent's reply says how far its probe got in the rendezvous, one of four words.
  const auto done = std::get<AgentReply>(decode_agent_message(
      json{{"type", "done"}, {"req", 3}, {"ok", false}, {"rendezvous", "timed_out"}}));
  EXPECT_EQ(done.rendezvous, "timed_out");
  EXPECT_EQ(refusal([] {
              decode_agent_message(json{{"type", "done"}, {"req", 3}, {"rendezvous", "maybe"}});
            }),
            "done: rendezvous: expected \"ok\", \"timed_out\", \"failed\" or \"not_reached\"");
  // The controller's relay is read by the agent with the same reader.
  EXPECT_EQ(need_hex_blob(json{{"blob", "0a0b"}}, "blob"), std::string("\x0a\x0b", 2));
  EXPECT_EQ(refusal([] {
              need_hex_blob(json{{"blob", "0a0"}}, "blob");
            }),
            "blob: expected an even number (2 to 2048) of lowercase hex digits");
}

TEST(Messages, AQuorumForTheReplicasIsCheckedFieldByField) {
  // What the controller sends and the agent writes to the replicas' quorum file
  // (python/faultline/replicas.py parses the same form).
  const json good{
      {"quorum", 7}, {"members", {0, 2, 3}}, {"store", "10.0.0.5:29501"}, {"join", {3}}};
  const Quorum q = decode_quorum(good);
  EXPECT_EQ(q.number, 7);
  EXPECT_EQ(q.members, (std::vector<std::int64_t>{0, 2, 3}));
  EXPECT_EQ(q.store, "10.0.0.5:29501");
  EXPECT_EQ(q.join, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(encode(q), good);
  const auto with = [&](const char* key, json v) {
    json j = good;
    if (v.is_null())
      j.erase(key);
    else
      j[key] = v;
    return refusal([&] { decode_quorum(j); });
  };
  EXPECT_EQ(with("join", nullptr), "(accepted)") << "join is optional";
  EXPECT_EQ(with("quorum", -1),
            "quorum: quorum: expected an integer in [0, 9007199254740992], got -1");
  EXPECT_EQ(with("members", json::array()), "quorum: members: expected at least one replica");
  EXPECT_EQ(with("members", {2, 0}), "quorum: members: expected distinct ids in ascending order");
  EXPECT_EQ(with("members", {0, 0}), "quorum: members: expected distinct ids in ascending order");
  EXPECT_EQ(with("members", {0, -1}), "quorum: members: expected replica ids (integers >= 0)");
  EXPECT_EQ(with("members", "0,1"), "quorum: members: expected an array of replica ids");
  EXPECT_EQ(with("store", "10.0.0.5"), "quorum: store: expected host:port");
  EXPECT_EQ(with("store", "10.0.0.5:70000"), "quorum: store: expected host:port");
  EXPECT_EQ(with("store", ":29501"), "quorum: store: expected host:port");
  EXPECT_EQ(with("store", "a b:1"), "quorum: store: expected a host name or IP address");
  EXPECT_EQ(with("join", {1}), "quorum: join: replica 1 is not a member");
  EXPECT_EQ(with("join", {0, 2, 3}),
            "quorum: join: expected fewer joiners than members (a live peer holds the state)");
  EXPECT_EQ(refusal([] { decode_quorum(json::array()); }), "quorum: expected an object");
}

TEST(Messages, ClientRequestsAreChecked) {
  EXPECT_EQ(refusal([] {
              decode_client_request(json{{"type", "inject"}, {"machine", 3}});
            }),
            "inject: machine: expected a string");
  EXPECT_EQ(refusal([] {
              decode_client_request(json{{"type", "update"}, {"version", "v2"}, {"urgent", "no"}});
            }),
            "update: urgent: expected true or false, got a string");
  EXPECT_EQ(refusal([] {
              decode_client_request(json{{"type", "reboot"}});
            }),
            "reboot: type: unknown request type \"reboot\"");
  json req;
  EXPECT_EQ(refusal([&] {
              decode_client_request(json{{"type", "frob"}, {"req", 7}}, &req);
            }),
            "frob: type: unknown request type \"frob\"");
  EXPECT_EQ(req, 7) << "a refusal echoes the request's req";
  EXPECT_EQ(refusal([] {
              decode_client_request(json{{"type", "stop"}, {"req", {{"a", 1}}}});
            }),
            "stop: req: expected an integer in [0, 9007199254740992]");
  const auto in =
      decode_client_request(json{{"type", "inject"}, {"machine", "m1"}, {"fault", "kill"}});
  EXPECT_EQ(std::get<InjectRequest>(in.body).machine, "m1");
}

// --- the handshake (auth.h) ----------------------------------------------------------------

TEST(Auth, HmacMatchesRfc4231) {
  // RFC 4231, test case 2.
  EXPECT_EQ(hmac_sha256_hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

// Issue 52, broken item 1: the agent signs each quorum file it writes, and a replica believes
// only a quorum signed with its launch's FAULTLINE_QUORUM_KEY. The same vector as
// tests/python/test_replicas.py (SignedQuorumTest): both sides sign the same text.
TEST(Auth, QuorumSignatureMatchesTheJobLibrarys) {
  Quorum q;
  q.number = 12;
  q.members = {0, 2, 5};
  q.store = "10.0.0.1:29401";
  q.join = {5};
  EXPECT_EQ(quorum_mac("k-of-generation-7", q),
            "2be4311009aead4281e0b27568bd71d81ff399b7e83d613480dd1d957324ad31");
  q.number = 1000;
  EXPECT_NE(quorum_mac("k-of-generation-7", q),
            "2be4311009aead4281e0b27568bd71d81ff399b7e83d613480dd1d957324ad31");
}

TEST(Auth, BothSidesProveTheTokenAndNothingReplaysOrReflects) {
  const std::string key = "the-shared-token-0123456789";
  // A full exchange.
  PeerHandshake peer("agent", "m0");
  ControllerHandshake ctl;
  const json hello = peer.hello(2);
  EXPECT_EQ(hello.dump().find(key), std::string::npos);
  const json challenge = ctl.challenge(key, decode_hello(hello, 2));
  auto answer = peer.answer(key, decode_challenge(challenge));
  ASSERT_TRUE(answer.has_value());
  EXPECT_TRUE(peer.verified());
  EXPECT_TRUE(ctl.verify(key, decode_auth(*answer)));
  // A controller without the key: the peer does not answer.
  PeerHandshake peer2("agent", "m0");
  ControllerHandshake rogue;
  EXPECT_FALSE(peer2.answer(key, decode_challenge(rogue.challenge(
                                     "not-the-key-0123456789", decode_hello(peer2.hello(2), 2)))));
  EXPECT_FALSE(peer2.verified());
  // A peer without the key: its proof fails.
  PeerHandshake liar("agent", "m0");
  ControllerHandshake ctl2;
  const json c2 = ctl2.challenge(key, decode_hello(liar.hello(2), 2));
  json forged{{"type", "auth"},
              {"proof", auth_proof("wrong-key-0123456789", Prover::kPeer,
                                   decode_hello(liar.hello(2), 2).nonce, decode_challenge(c2).nonce,
                                   "agent", "m0")}};
  EXPECT_FALSE(ctl2.verify(key, decode_auth(forged)));
  // Replay: the first exchange's answer, to a new challenge for the same hello.
  ControllerHandshake ctl3;
  ctl3.challenge(key, decode_hello(hello, 2));
  EXPECT_FALSE(ctl3.verify(key, decode_auth(*answer))) << "a recorded answer was accepted again";
  // Reflection: the controller's own proof handed back as a peer's.
  json reflected{{"type", "auth"}, {"proof", decode_challenge(challenge).proof}};
  EXPECT_FALSE(ctl.verify(key, decode_auth(reflected)));
  // Identity: an answer proving "agent m0" is no proof of "agent m1" or of a client.
  for (const auto& [role, name] :
       std::vector<std::pair<std::string, std::string>>{{"agent", "m1"}, {"client", ""}}) {
    PeerHandshake other(role, name);
    json h = other.hello(2);
    h["nonce"] = hello["nonce"];  // even with the nonce of the first exchange
    ControllerHandshake c;
    const json ch = c.challenge(key, decode_hello(h, 2));
    const std::string p0 = auth_proof(key, Prover::kPeer, hello["nonce"].get<std::string>(),
                                      decode_challenge(ch).nonce, "agent", "m0");
    EXPECT_FALSE(c.verify(key, decode_auth(json{{"type", "auth"}, {"proof", p0}})))
        << role << " " << name;
  }
  // A read-only client proves the status credential, not the main token.
  PeerHandshake reader("client-read", "");
  ControllerHandshake ctl4;
  const json hr = reader.hello(2);
  EXPECT_EQ(hr["access"], "read");
  const json ch4 = ctl4.challenge("status-credential-0123", decode_hello(hr, 2));
  EXPECT_FALSE(reader.answer(key, decode_challenge(ch4)))
      << "the status credential is not the main token";
  // Nonces are fresh.
  EXPECT_NE(random_nonce(), random_nonce());
}

// --- NaN the way jobs write it ----------------------------------------------------------------

TEST(Messages, NanAndInfinityAreReadAsJobsWriteThem) {
  // Python: json.dumps({"loss": float("nan")}) writes a bare NaN, which is not JSON.
  const RankReport py = parse_rank_report_line(
      R"({"type": "step", "rank": 0, "step": 4, "loss": NaN, "grad_norm": Infinity, "step_time_s": 0.5})");
  EXPECT_TRUE(py.loss_nan());
  EXPECT_TRUE(py.grad_norm_nan());
  EXPECT_TRUE(parse_rank_report_line(R"({"type":"step","step":4,"loss":-Infinity})").loss_nan());
  // The trainjob's way: null plus a flag; strings as well.
  EXPECT_TRUE(
      parse_rank_report_line(R"({"type":"step","step":4,"loss":null,"loss_nan":true})").loss_nan());
  EXPECT_TRUE(parse_rank_report_line(R"({"type":"step","step":4,"loss":"nan"})").loss_nan());
  // Words inside strings are left alone.
  const RankReport f =
      parse_rank_report_line(R"({"type":"fatal","signature":"loss is NaN at \"Infinity\""})");
  EXPECT_EQ(f.signature, "loss is NaN at \"Infinity\"");
  // A finite loss, and no loss at all, are not NaN.
  const RankReport fin = parse_rank_report_line(R"({"type":"step","step":4,"loss":1e-3})");
  EXPECT_FALSE(fin.loss_nan());
  EXPECT_DOUBLE_EQ(*fin.loss, 1e-3);
  EXPECT_FALSE(parse_rank_report_line(R"({"type":"step","step":4})").loss_nan());
  // Re-encoded for the controller as null plus the flag, and decoded back the same.
  const json wire = encode(py);
  EXPECT_TRUE(wire["loss"].is_null());
  EXPECT_EQ(wire["loss_nan"], true);
  const RankReport back = decode_rank_report(wire);
  EXPECT_TRUE(back.loss_nan());
  EXPECT_EQ(back.step, 4);
  EXPECT_DOUBLE_EQ(*back.step_time_s, 0.5);
}

// --- a million frames -------------------------------------------------------------------------

// Valid messages of every channel, to mutate.
std::vector<json> seeds() {
  return {
      good_hello(),
      json{{"type", "hello"},
           {"nonce", kNonce},
           {"role", "client"},
           {"access", "read"},
           {"proto", 2}},
      good_auth(),
      json{{"type", "challenge"}, {"nonce", kNonce}, {"proof", std::string(64, '0')}},
      json{{"type", "heartbeat"}},
      good_step_report(),
      json{{"type", "report"},
           {"gen", 1},
           {"rank", 0},
           {"report",
            {{"type", "started"},
             {"rank", 0},
             {"step", 0},
             {"restored_from", "memory"},
             {"pid", 5}}}},
      json{{"type", "report"},
           {"gen", 1},
           {"rank", 0},
           {"report", {{"type", "fatal"}, {"signature", "CUDA error"}}}},
      json{{"type", "exit"},
           {"gen", 1},
           {"rank", 0},
           {"pid", 9},
           {"code", -1},
           {"signal", 9},
           {"signature", "x"}},
      json{{"type", "alert"}, {"kind", "nic"}, {"detail", "data0 down"}},
      json{{"type", "done"},
           {"req", 4},
           {"ok", true},
           {"detail", ""},
           {"hash", "abc"},
           {"timed_out", false}},
      json{{"type", "done"}, {"req", 5}, {"ok", true}, {"by_rank", {{"0", "a"}, {"1", "b"}}}},
      json{{"type", "error"}, {"req", nullptr}, {"reason", "kill: req: missing"}},
      json{{"type", "rendezvous"}, {"probe_req", 6}, {"blob", "464c5256303030310200000080000000"}},
      json{{"type", "done"}, {"req", 6}, {"ok", true}, {"rendezvous", "ok"}},
      json{{"type", "status"}, {"req", 1}},
      json{{"type", "stop"}},
      json{{"type", "update"}, {"version", "v2"}, {"urgent", false}},
      json{{"type", "inject"}, {"machine", "m1"}, {"fault", "hang"}, {"detail", "d"}}};
}

json random_value(std::mt19937_64& rng, int depth) {
  switch (rng() % (depth > 2 ? 9 : 11)) {
    case 0:
      return nullptr;
    case 1:
      return (rng() & 1) != 0;
    case 2:
      return static_cast<std::int64_t>(rng());
    case 3:
      return static_cast<std::uint64_t>(rng());
    case 4:
      return static_cast<std::int64_t>(rng() % 7) - 2;
    case 5:
      return std::ldexp(static_cast<double>(rng() % 1000) - 500, static_cast<int>(rng() % 80) - 40);
    case 6: {
      static const char* words[] = {
          "hello",     "agent",  "client", "step",   "started",  "fatal", "done", "error", "report",
          "exit",      "alert",  "nic",    "NaN",    "Infinity", "",      "m0",   "\n",    "\x01",
          "heartbeat", "status", "stop",   "inject", "update",   "kill",  "v2"};
      return words[rng() % (sizeof words / sizeof *words)];
    }
    case 7:
      return std::string(rng() % 16 == 0 ? 5000 : rng() % 64, static_cast<char>('a' + rng() % 26));
    case 8:
      return static_cast<double>(rng() % 100) / 7.0;
    case 9: {
      json a = json::array();
      for (int i = static_cast<int>(rng() % 4); i > 0; --i)
        a.push_back(random_value(rng, depth + 1));
      return a;
    }
    default: {
      json o = json::object();
      for (int i = static_cast<int>(rng() % 4); i > 0; --i)
        o[std::to_string(rng() % 12)] = random_value(rng, depth + 1);
      return o;
    }
  }
}

// One frame: a seed with fields changed, dropped, added or retyped, or its text damaged.
std::string mutate(const std::vector<json>& base, std::mt19937_64& rng) {
  static const char* keys[] = {
      "type",        "token",  "role", "name",         "proto",     "gen",       "ranks",
      "rank",        "report", "step", "loss",         "loss_nan",  "grad_norm", "grad_norm_nan",
      "step_time_s", "req",    "ok",   "detail",       "reason",    "hash",      "by_rank",
      "timed_out",   "kind",   "code", "signal",       "signature", "version",   "urgent",
      "machine",     "fault",  "pid",  "restored_from"};
  json m = base[rng() % base.size()];
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits; ++e) {
    json& target =
        (m.contains("report") && m["report"].is_object() && (rng() & 1)) ? m["report"] : m;
    const std::string key = keys[rng() % (sizeof keys / sizeof *keys)];
    switch (rng() % 4) {
      case 0:
        target.erase(key);
        break;
      default:
        target[key] = random_value(rng, 0);
        break;
    }
  }
  if (rng() % 4 == 0) m = random_value(rng, 0);
  std::string text = m.dump(-1, ' ', false, json::error_handler_t::replace);
  if (rng() % 3 == 0 && !text.empty()) {
    for (int i = static_cast<int>(rng() % 4); i >= 0; --i) {
      const std::size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0:
          text[at] = static_cast<char>(rng() % 256);
          break;
        case 1:
          text.erase(at, 1 + rng() % 8);
          break;
        default:
          text.insert(at, rng() % 2 ? "NaN" : "-Infinity");
          break;
      }
      if (text.empty()) break;
    }
  }
  return text;
}

TEST(Messages, AMillionMutatedFramesRaiseNothingButRefusals) {
  const std::vector<json> base = seeds();
  for (const json& s : base) {  // the seeds themselves decode on their channel
    SCOPED_TRACE(s.dump());
    const std::string t = s.value("type", "");
    if (t == "hello") {
      EXPECT_NO_THROW(decode_hello(s, 2));
    } else if (t == "auth") {
      EXPECT_NO_THROW(decode_auth(s));
    } else if (t == "challenge") {
      EXPECT_NO_THROW(decode_challenge(s));
    } else if (t == "status" || t == "stop" || t == "update" || t == "inject") {
      EXPECT_NO_THROW(decode_client_request(s));
    } else if (t != "error") {
      EXPECT_NO_THROW(decode_agent_message(s));
    }
  }
  std::mt19937_64 rng(20261125);
  constexpr int kFrames = 1'000'000;
  int accepted = 0, refused = 0, not_json = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kFrames; ++i) {
    const std::string frame = mutate(base, rng);
    // The rank pipe reads the text as a job wrote it.
    try {
      const RankReport r = parse_rank_report_line(frame);
      const json again = encode(r);  // what the agent forwards decodes on the controller
      decode_rank_report(again);
      ++accepted;
    } catch (const BadMessage&) {
      ++refused;
    }
    // The sockets: a frame that is not a JSON object closes the connection (wire.cc).
    const json m = json::parse(frame, nullptr, false);
    if (m.is_discarded() || !m.is_object()) {
      ++not_json;
      continue;
    }
    for (int channel = 0; channel < 5; ++channel) {
      try {
        if (channel == 0) {
          const Hello h = decode_hello(m, 2);
          ASSERT_TRUE(h.role == Hello::Role::kClient || printable(h.name));
        } else if (channel == 1) {
          const AgentMessage a = decode_agent_message(m);
          if (const auto* e = std::get_if<AgentExit>(&a)) {
            ASSERT_TRUE(e->code >= -1 && e->code <= 255);
          }
          if (const auto* p = std::get_if<AgentReport>(&a)) {
            ASSERT_GE(p->gen, 0);
          }
        } else if (channel == 2) {
          const ClientRequest c = decode_client_request(m);
          ASSERT_TRUE(c.req.is_number_integer());
        } else if (channel == 3) {
          ASSERT_TRUE(is_hex256(decode_auth(m).proof));
        } else {
          const Challenge ch = decode_challenge(m);
          ASSERT_TRUE(is_hex256(ch.nonce) && is_hex256(ch.proof));
        }
        ++accepted;
      } catch (const BadMessage& e) {
        ASSERT_FALSE(e.reason.empty());
        ASSERT_EQ(e.reason.find('\n'), std::string::npos) << "a refusal is one line";
        ++refused;
      }
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << kFrames << " frames in " << s << " s: " << accepted << " decoded, " << refused
            << " refused, " << not_json << " not JSON objects\n";
  // The mutations reach both sides of every decoder.
  EXPECT_GT(accepted, kFrames / 20);
  EXPECT_GT(refused, kFrames / 2);
  EXPECT_GT(not_json, kFrames / 20);
}

}  // namespace
}  // namespace faultline::live
