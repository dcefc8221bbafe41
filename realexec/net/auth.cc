#include "realexec/net/auth.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace faultline::live {

namespace {

std::string hex(const unsigned char* p, std::size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (std::size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  return out;
}

}  // namespace

std::string quorum_mac(std::string_view key, const Quorum& q) {
  auto ids = [](std::vector<std::int64_t> v) {
    std::sort(v.begin(), v.end());
    std::string out;
    for (std::int64_t id : v) out += (out.empty() ? "" : ",") + std::to_string(id);
    return out;
  };
  return hmac_sha256_hex(key, "faultline-quorum/1\n" + std::to_string(q.number) + "\n" +
                                  ids(q.members) + "\n" + q.store + "\n" + ids(q.join));
}

std::string random_nonce() {
  unsigned char buf[32];
  std::size_t got = 0;
  while (got < sizeof buf) {
    const ssize_t n = ::getrandom(buf + got, sizeof buf - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw std::runtime_error("getrandom failed: no randomness for an authentication nonce");
    got += static_cast<std::size_t>(n);
  }
  return hex(buf, sizeof buf);
}

std::string auth_proof(std::string_view key, Prover who, std::string_view peer_nonce,
                       std::string_view controller_nonce, std::string_view role,
                       std::string_view name) {
  std::string msg = "faultline-live/2\n";
  msg += who == Prover::kController ? "controller" : "peer";
  msg += '\n';
  msg += peer_nonce;
  msg += '\n';
  msg += controller_nonce;
  msg += '\n';
  msg += role;
  msg += '\n';
  msg += name;
  return hmac_sha256_hex(key, msg);
}

std::string hmac_sha256_hex(std::string_view key, std::string_view msg) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
            reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), mac, &len))
    throw std::runtime_error("HMAC-SHA256 failed");
  return hex(mac, len);
}

bool proofs_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

PeerHandshake::PeerHandshake(std::string role, std::string name)
    : role_(std::move(role)), name_(std::move(name)), nonce_(random_nonce()) {}

nlohmann::json PeerHandshake::hello(int protocol_version) const {
  nlohmann::json h{{"type", "hello"}, {"proto", protocol_version}, {"nonce", nonce_}};
  if (role_ == "agent") {
    h["role"] = "agent";
    h["name"] = name_;
  } else {
    h["role"] = "client";
    h["access"] = role_ == "client-read" ? "read" : "admin";
  }
  return h;
}

std::optional<nlohmann::json> PeerHandshake::answer(std::string_view key, const Challenge& c) {
  if (verified_) return std::nullopt;  // one challenge per connection
  if (!proofs_equal(c.proof, auth_proof(key, Prover::kController, nonce_, c.nonce, role_, name_)))
    return std::nullopt;
  verified_ = true;
  return nlohmann::json{{"type", "auth"},
                        {"proof", auth_proof(key, Prover::kPeer, nonce_, c.nonce, role_, name_)}};
}

nlohmann::json ControllerHandshake::challenge(std::string_view key, const Hello& h) {
  hello_ = h;
  nonce_ = random_nonce();
  return nlohmann::json{
      {"type", "challenge"},
      {"nonce", nonce_},
      {"proof", auth_proof(key, Prover::kController, h.nonce, nonce_, h.proof_role(), h.name)}};
}

bool ControllerHandshake::verify(std::string_view key, const Auth& a) const {
  return !nonce_.empty() &&
         proofs_equal(a.proof, auth_proof(key, Prover::kPeer, hello_.nonce, nonce_,
                                          hello_.proof_role(), hello_.name));
}

}  // namespace faultline::live
