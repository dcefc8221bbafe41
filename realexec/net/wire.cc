// Framing, the non-blocking connection, TCP helpers and the shared token.
//
// Frames are parsed in place from the input buffer (one erase per read, not per frame)
// so a burst of thousands of small messages costs linear time.
#include "realexec/net/wire.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

namespace faultline::live {
namespace {

constexpr std::size_t kReadChunk = 64 * 1024;
constexpr int kMaxReadsPerEvent = 16;  // then let other fds run; epoll is level-triggered

std::string errno_text() { return std::strerror(errno); }

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

std::string format_peer(const sockaddr* sa, socklen_t len) {
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (::getnameinfo(sa, len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "?";
  }
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";
  return h + ":" + serv;
}

struct AddrInfoDeleter {
  void operator()(addrinfo* a) const { ::freeaddrinfo(a); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

AddrInfoPtr resolve(const std::string& host, int port, bool passive, std::string* err) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) {
    if (err) *err = "cannot resolve '" + host + "': " + ::gai_strerror(rc);
    return nullptr;
  }
  return AddrInfoPtr(res);
}

}  // namespace

Conn::Conn(Reactor& r, int fd, std::string peer, Handlers h, bool connecting)
    : r_(r),
      fd_(fd),
      peer_(std::move(peer)),
      h_(std::move(h)),
      connecting_(connecting),
      alive_(std::make_shared<bool>(true)) {
  int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0 && (flags & O_NONBLOCK) == 0) ::fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
  interest_ = EPOLLIN | (connecting_ ? static_cast<std::uint32_t>(EPOLLOUT) : 0u);
  r_.add_fd(fd_, interest_, [this](std::uint32_t ev) { on_io(ev); });
}

Conn::~Conn() {
  *alive_ = false;
  if (fd_ >= 0) {
    r_.remove_fd(fd_);
    ::close(fd_);
    fd_ = -1;
  }
}

bool Conn::send(const nlohmann::json& msg) {
  if (fd_ < 0 || closing_) return false;
  std::string body = msg.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (body.empty() || body.size() > kMaxFrameBytes) return false;
  if (out_.size() - out_off_ + 4 + body.size() > kMaxQueuedBytes) {
    close("peer too slow: more than " + std::to_string(kMaxQueuedBytes >> 20) +
          " MiB of output queued");
    return false;
  }
  auto n = static_cast<std::uint32_t>(body.size());
  char prefix[4] = {static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                    static_cast<char>(n >> 8), static_cast<char>(n)};
  out_.append(prefix, 4);
  out_.append(body);
  if (!connecting_) write_some();
  if (fd_ >= 0) update_interest();
  return fd_ >= 0;
}

void Conn::close_after_flush(const std::string& why) {
  if (fd_ < 0 || closing_) return;
  if (connecting_ || out_off_ >= out_.size()) {
    close(why);
    return;
  }
  closing_ = true;
  closing_why_ = why;
  update_interest();
}

void Conn::close(const std::string& why) {
  if (fd_ < 0) return;
  // Best effort: what is already queued (e.g. a refusal) may still fit in the socket.
  if (!connecting_ && out_off_ < out_.size()) {
    ::send(fd_, out_.data() + out_off_, out_.size() - out_off_, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  r_.remove_fd(fd_);
  ::close(fd_);
  fd_ = -1;
  closing_ = true;
  out_.clear();
  out_off_ = 0;
  in_.clear();
  std::weak_ptr<bool> alive = alive_;
  r_.defer([this, alive, why] {
    auto a = alive.lock();
    if (!a || !*a || close_reported_) return;
    close_reported_ = true;
    if (h_.on_close) {
      auto cb = h_.on_close;  // may destroy *this
      cb(why);
    }
  });
}

void Conn::update_interest() {
  if (fd_ < 0) return;
  std::uint32_t want = (closing_ ? 0u : static_cast<std::uint32_t>(EPOLLIN));
  if (connecting_ || out_off_ < out_.size()) want |= EPOLLOUT;
  if (want == interest_) return;
  interest_ = want;
  r_.modify_fd(fd_, want);
}

void Conn::on_io(std::uint32_t ev) {
  std::weak_ptr<bool> alive = alive_;
  if (connecting_) {
    if ((ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)) == 0) return;
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) {
      close("cannot connect to " + peer_ + ": " + std::strerror(err));
      return;
    }
    connecting_ = false;
    set_nodelay(fd_);
    write_some();
    update_interest();
    return;
  }
  if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
    if (closing_ && (ev & EPOLLIN) == 0) {
      close(closing_why_);
      return;
    }
    if (!closing_) read_some();
  }
  auto a = alive.lock();
  if (!a || !*a || fd_ < 0) return;
  if (ev & EPOLLOUT) write_some();
}

void Conn::read_some() {
  std::weak_ptr<bool> alive = alive_;
  for (int i = 0; i < kMaxReadsPerEvent && fd_ >= 0; ++i) {
    std::size_t old = in_.size();
    in_.resize(old + kReadChunk);
    ssize_t n = ::recv(fd_, in_.data() + old, kReadChunk, 0);
    if (n < 0) {
      in_.resize(old);
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      close("read from " + peer_ + ": " + errno_text());
      return;
    }
    in_.resize(old + static_cast<std::size_t>(n));
    if (n == 0) {
      close("peer closed the connection");
      return;
    }
    // Parse every complete frame.
    std::size_t off = 0;
    while (fd_ >= 0 && in_.size() - off >= 4) {
      const auto* p = reinterpret_cast<const unsigned char*>(in_.data() + off);
      std::size_t len = (std::size_t{p[0]} << 24) | (std::size_t{p[1]} << 16) |
                        (std::size_t{p[2]} << 8) | std::size_t{p[3]};
      if (len == 0 || len > max_frame_) {
        close("frame length " + std::to_string(len) + " outside 1.." + std::to_string(max_frame_) +
              " bytes");
        return;
      }
      if (in_.size() - off - 4 < len) break;
      nlohmann::json msg = nlohmann::json::parse(
          in_.begin() + static_cast<std::ptrdiff_t>(off + 4),
          in_.begin() + static_cast<std::ptrdiff_t>(off + 4 + len), nullptr, false);
      off += 4 + len;
      if (msg.is_discarded()) {
        close("frame is not valid JSON");
        return;
      }
      if (!msg.is_object()) {
        close("frame is not a JSON object");
        return;
      }
      if (h_.on_message) {
        auto cb = h_.on_message;  // the handler may replace the handlers
        cb(msg);
        auto a = alive.lock();
        if (!a || !*a) return;  // destroyed by the handler
      }
    }
    if (fd_ < 0) return;
    in_.erase(0, off);
  }
}

void Conn::write_some() {
  while (fd_ >= 0 && out_off_ < out_.size()) {
    ssize_t n = ::send(fd_, out_.data() + out_off_, out_.size() - out_off_, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      close("write to " + peer_ + ": " + errno_text());
      return;
    }
    out_off_ += static_cast<std::size_t>(n);
  }
  if (out_off_ >= out_.size()) {
    out_.clear();
    out_off_ = 0;
    if (closing_) {
      close(closing_why_);
      return;
    }
  } else if (out_off_ > (1u << 20) && out_off_ > out_.size() / 2) {
    out_.erase(0, out_off_);
    out_off_ = 0;
  }
  update_interest();
}

bool split_host_port(const std::string& s, std::string* host, int* port) {
  std::string h;
  std::string p;
  if (!s.empty() && s[0] == '[') {
    auto close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':') return false;
    h = s.substr(1, close - 1);
    p = s.substr(close + 2);
  } else {
    auto colon = s.rfind(':');
    if (colon == std::string::npos) return false;
    h = s.substr(0, colon);
    p = s.substr(colon + 1);
    if (h.find(':') != std::string::npos) return false;  // bare IPv6 needs brackets
  }
  if (h.empty() || p.empty() || p.size() > 5) return false;
  int v = 0;
  for (char c : p) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v > 65535) return false;
  *host = h;
  *port = v;
  return true;
}

int listen_tcp(const std::string& host, int port, std::string* err) {
  if (port < 0 || port > 65535) {
    if (err) *err = "port " + std::to_string(port) + " outside 0..65535";
    return -1;
  }
  AddrInfoPtr res = resolve(host, port, true, err);
  if (!res) return -1;
  std::string last = "no address for '" + host + "'";
  for (addrinfo* a = res.get(); a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = "socket: " + errno_text();
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      last = "bind " + host + ":" + std::to_string(port) + ": " + errno_text();
      ::close(fd);
      continue;
    }
    // The kernel's largest backlog (net.core.somaxconn): thousands of agents redial at
    // once after a controller restart, and a SYN dropped for want of room waits a second
    // or more to be retried.
    if (::listen(fd, SOMAXCONN) != 0) {
      last = "listen: " + errno_text();
      ::close(fd);
      continue;
    }
    return fd;
  }
  if (err) *err = last;
  return -1;
}

int bound_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return -1;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return -1;
}

int connect_tcp(const std::string& host, int port, std::string* err) {
  if (port <= 0 || port > 65535) {
    if (err) *err = "port " + std::to_string(port) + " outside 1..65535";
    return -1;
  }
  AddrInfoPtr res = resolve(host, port, false, err);
  if (!res) return -1;
  std::string last = "no address for '" + host + "'";
  for (addrinfo* a = res.get(); a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = "socket: " + errno_text();
      continue;
    }
    int rc;
    do {
      rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    } while (rc != 0 && errno == EINTR);
    if (rc == 0 || errno == EINPROGRESS) return fd;
    last = "connect " + host + ":" + std::to_string(port) + ": " + errno_text();
    ::close(fd);
  }
  if (err) *err = last;
  return -1;
}

int accept_tcp(int listen_fd, std::string* peer) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  int fd;
  do {
    fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return -1;
  set_nodelay(fd);
  if (peer) *peer = format_peer(reinterpret_cast<sockaddr*>(&ss), len);
  return fd;
}

bool accept_starved(int err) {
  return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

std::size_t bytes_waiting(int fd) {
  int n = 0;
  return ::ioctl(fd, FIONREAD, &n) == 0 && n > 0 ? static_cast<std::size_t>(n) : 0;
}

std::string log_stamp() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return utc_stamp(std::int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000);
}

std::string utc_stamp(std::int64_t unix_ms) {
  const time_t secs = static_cast<time_t>(unix_ms / 1000);
  tm t{};
  ::gmtime_r(&secs, &t);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", t.tm_year + 1900,
                t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec,
                static_cast<int>(unix_ms % 1000));
  return buf;
}

bool load_token(const std::string& path, std::string* token, std::string* err) {
  auto fail = [&](const std::string& what) {
    if (err) *err = path + ": token: " + what;
    return false;
  };
  if (path.empty()) {
    if (err) *err = "token_file: expected the path of the shared token file, got nothing";
    return false;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return fail(std::string("cannot read: ") + errno_text());
  if (!S_ISREG(st.st_mode)) return fail("expected a regular file");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return fail(std::string("file is accessible by group or others (mode ") + mode +
                "); expected mode 0600 or 0400 (chmod 600 " + path + ")");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(std::string("cannot read: ") + errno_text());
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (text.size() > 4096) return fail("expected one line, file is over 4 KiB");
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (!text.empty() && text.back() == '\r') text.pop_back();
  for (char c : text) {
    if (c == '\n') return fail("expected one line, found several");
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      return fail("expected printable characters without spaces");
    }
  }
  if (text.size() < 16) {
    return fail("expected at least 16 characters, got " + std::to_string(text.size()));
  }
  *token = std::move(text);
  return true;
}

bool tokens_equal(std::string_view a, std::string_view b) {
  // Touch every byte of the longer string whatever the contents, so timing reveals
  // at most the lengths.
  std::size_t n = a.size() > b.size() ? a.size() : b.size();
  volatile unsigned char diff = static_cast<unsigned char>(a.size() != b.size());
  for (std::size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = diff | static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

}  // namespace faultline::live
