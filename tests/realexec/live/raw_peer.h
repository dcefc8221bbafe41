// A peer that speaks the live protocol's frames raw (tests/realexec/live/): shared by the end
// to end tests of hostile frames, of strangers on the control port, of authentication and of
// the fault drill.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "tests/realexec/live/live_cluster.h"

namespace faultline::live_e2e {

// A peer that speaks the framed protocol raw, blocking, with a receive timeout: what an
// attacker on the network, a buggy client or a confused agent would send.
class RawPeer {
 public:
  RawPeer(const std::string& host, int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    timeval tv{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  // An accepted connection (the rogue controller's side).
  explicit RawPeer(int fd) : fd_(fd) {
    timeval tv{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawPeer() {
    if (fd_ >= 0) close(fd_);
  }
  // The peer's side of the handshake with `key`; returns the welcome (null when refused).
  json authenticate(const std::string& key, const std::string& role = "client",
                    const std::string& name = "") {
    faultline::live::PeerHandshake h(role, name);
    send(h.hello(2));
    const json ch = receive_type("challenge");
    if (ch.is_null()) return json();
    auto answer = h.answer(key, faultline::live::decode_challenge(ch));
    if (!answer) return json();
    send(*answer);
    return receive_type("welcome");
  }
  bool ok() const { return fd_ >= 0; }
  // Bytes as they are, no framing (a partial frame, a bad length).
  bool send_raw(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  bool send_text(const std::string& body) {
    const std::string f = frame(body);
    return ::send(fd_, f.data(), f.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(f.size());
  }
  // Invalid UTF-8 in a mutated string goes out as U+FFFD (raw bytes are the fuzz's).
  bool send(const json& m) {
    return send_text(m.dump(-1, ' ', false, json::error_handler_t::replace));
  }
  // The next message, or null when the peer closed or said nothing within a second.
  json receive() {
    std::string len(4, '\0');
    if (!read_exact(len.data(), 4)) return json();
    const std::uint32_t n =
        (std::uint32_t(std::uint8_t(len[0])) << 24) | (std::uint32_t(std::uint8_t(len[1])) << 16) |
        (std::uint32_t(std::uint8_t(len[2])) << 8) | std::uint32_t(std::uint8_t(len[3]));
    if (n > (1u << 20)) return json();
    std::string body(n, '\0');
    if (!read_exact(body.data(), n)) return json();
    return json::parse(body, nullptr, false);
  }
  // Skips other messages (e.g. an inspect request to an agent) until `type`; null when the
  // connection closes or goes quiet first. A refusal ends the wait too, kept in refusal().
  json receive_type(const std::string& type) {
    for (int i = 0; i < 20; ++i) {
      json m = receive();
      if (m.is_null() || m.is_discarded()) return json();
      if (m.value("type", "") == type) return m;
      if (m.value("type", "") == "refused") {
        refusal_ = m.value("reason", "");
        return json();
      }
    }
    return json();
  }
  const std::string& refusal() const { return refusal_; }

 private:
  bool read_exact(char* p, std::size_t n) {
    while (n > 0) {
      const ssize_t r = ::recv(fd_, p, n, 0);
      if (r <= 0) return false;
      p += r;
      n -= static_cast<std::size_t>(r);
    }
    return true;
  }
  int fd_ = -1;
  std::string refusal_;
};

}  // namespace faultline::live_e2e
