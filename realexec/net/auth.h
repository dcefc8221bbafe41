// Mutual challenge-response authentication for live mode's connections (PROTOCOL.md,
// "Authentication"): each side proves it holds the shared token by an HMAC-SHA256 over both
// sides' fresh nonces, the direction and the identity claimed. The token never crosses the
// wire, a proof is good for one connection only, and a proof of one direction or identity is
// no proof of another.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "realexec/net/messages.h"

namespace faultline::live {

// 32 bytes from the kernel's CSPRNG (getrandom), as 64 lowercase hex digits.
std::string random_nonce();

// HMAC-SHA256(key, msg) as 64 hex digits.
std::string hmac_sha256_hex(std::string_view key, std::string_view msg);

enum class Prover { kController, kPeer };
// HMAC-SHA256(key, "faultline-live/2" | prover | peer_nonce | controller_nonce | role | name),
// fields separated by newlines, as 64 hex digits. `role` is "agent", "client" or
// "client-read"; `name` is the machine name (empty for clients).
std::string auth_proof(std::string_view key, Prover who, std::string_view peer_nonce,
                       std::string_view controller_nonce, std::string_view role,
                       std::string_view name);
// The signature of a replica group's quorum file, which python/faultline/replicas.py checks
// before it believes the file: HMAC-SHA256(key, "faultline-quorum/1\n" number "\n" members
// "\n" store "\n" join), the ids in ascending order joined by commas, as 64 hex digits.
std::string quorum_mac(std::string_view key, const Quorum& q);

// Constant-time comparison of two proofs.
bool proofs_equal(std::string_view a, std::string_view b);

// The peer's side of one handshake (an agent, or an operator client): hello, then the
// answer to the controller's challenge once its proof checked out.
class PeerHandshake {
 public:
  // `role`: "agent", "client" or "client-read"; `name`: the machine name of an agent.
  PeerHandshake(std::string role, std::string name);
  // The first message: role, name, a fresh nonce, no secret.
  nlohmann::json hello(int protocol_version) const;
  // Checks the controller's proof; returns the `auth` message to send (add fields to it
  // freely), or nullopt when the controller does not hold `key`.
  std::optional<nlohmann::json> answer(std::string_view key, const Challenge& c);
  // A challenge has been answered on this connection: a welcome may be believed.
  bool verified() const { return verified_; }

 private:
  std::string role_, name_, nonce_;
  bool verified_ = false;
};

// The controller's side: the challenge to a decoded hello, then the check of the answer.
class ControllerHandshake {
 public:
  nlohmann::json challenge(std::string_view key, const Hello& h);
  bool verify(std::string_view key, const Auth& a) const;
  const Hello& hello() const { return hello_; }

 private:
  Hello hello_;
  std::string nonce_;
};

}  // namespace faultline::live
