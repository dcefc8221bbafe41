#include "realexec/trainjob/collective.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

namespace faultline::live::trainjob {
namespace {

constexpr std::uint32_t kFrameMagic = 0x4A544C46;  // "FLTJ"
constexpr std::uint64_t kMaxFrameBytes = std::uint64_t{1} << 32;
constexpr auto kHelloWait = std::chrono::seconds(5);

int ms_left(Deadline d) {
  if (!d) return -1;
  const double left = std::chrono::duration<double, std::milli>(*d - Clock::now()).count();
  if (left <= 0) return 0;
  return static_cast<int>(std::min(std::ceil(left), 1e9));
}

CommStatus fail(std::string error, bool timed_out = false) {
  CommStatus s;
  s.ok = false;
  s.timed_out = timed_out;
  s.error = std::move(error);
  return s;
}

void set_socket_options(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

std::string errno_text() { return std::strerror(errno); }

bool resolve(const std::string& host, in_addr* out, std::string* error) {
  if (::inet_pton(AF_INET, host.c_str(), out) == 1) return true;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) {
    *error = "cannot resolve " + host + ": " + ::gai_strerror(rc);
    return false;
  }
  *out = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  ::freeaddrinfo(res);
  return true;
}

std::string addr_text(in_addr a) {
  char buf[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

// A listening socket on addr:port (port 0: ephemeral). EADDRINUSE is retried until
// `retry_until` (a previous incarnation may just have died and left the port to the kernel).
int listen_on(in_addr addr, int port, Clock::time_point retry_until, std::string* error) {
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      *error = "socket: " + errno_text();
      return -1;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr = addr;
    sa.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 && ::listen(fd, 128) == 0) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
      return fd;
    }
    const int err = errno;
    ::close(fd);
    if (err != EADDRINUSE || Clock::now() >= retry_until) {
      *error = "cannot listen on " + addr_text(addr) + ":" + std::to_string(port) + ": " +
               std::strerror(err);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

int local_port(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  return ntohs(sa.sin_port);
}

// Connects to addr:port, retrying refused connections until `deadline`; -1 on timeout.
int connect_retry(in_addr addr, int port, Clock::time_point deadline, std::string* error) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr = addr;
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  std::string last = "no attempt";
  while (Clock::now() < deadline) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      *error = "socket: " + errno_text();
      return -1;
    }
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, std::min(ms_left(deadline), 1000));
      int soerr = rc > 0 ? 0 : ETIMEDOUT;
      socklen_t len = sizeof soerr;
      if (rc > 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
      errno = soerr;
      rc = soerr == 0 ? 0 : -1;
    }
    if (rc == 0) {
      set_socket_options(fd);
      return fd;
    }
    last = errno_text();
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  *error = "cannot connect to " + addr_text(addr) + ":" + std::to_string(port) + " (" + last + ")";
  return -1;
}

// Accepts one connection on a non-blocking listener before `deadline`; -1 on timeout.
int accept_before(int listener, Clock::time_point deadline) {
  for (;;) {
    pollfd p{listener, POLLIN, 0};
    const int left = ms_left(deadline);
    if (left == 0) return -1;
    const int rc = ::poll(&p, 1, left);
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return -1;
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      set_socket_options(fd);
      return fd;
    }
  }
}

// Moves `slen` bytes out on `send_fd` and `rlen` bytes in on `recv_fd` at the same time.
CommStatus transfer(int send_fd, const std::byte* sdata, std::size_t slen, int recv_fd,
                    std::byte* rdata, std::size_t rlen, Deadline deadline,
                    const std::string& send_peer, const std::string& recv_peer) {
  std::size_t sent = 0, got = 0;
  while (sent < slen || got < rlen) {
    pollfd fds[2];
    int n = 0, si = -1, ri = -1;
    if (sent < slen) {
      fds[n] = pollfd{send_fd, POLLOUT, 0};
      si = n++;
    }
    if (got < rlen) {
      fds[n] = pollfd{recv_fd, POLLIN, 0};
      ri = n++;
    }
    const int left = ms_left(deadline);
    if (left == 0) {
      return fail("timed out " + std::string(sent < slen ? "sending to " + send_peer
                                                         : "receiving from " + recv_peer),
                  true);
    }
    const int rc = ::poll(fds, static_cast<nfds_t>(n), left);
    if (rc < 0) {
      if (errno == EINTR) continue;
      return fail("poll: " + errno_text());
    }
    if (rc == 0) continue;  // the deadline check above reports it
    if (si >= 0 && fds[si].revents != 0) {
      const ssize_t k = ::send(send_fd, sdata + sent, slen - sent, MSG_NOSIGNAL);
      if (k > 0) {
        sent += static_cast<std::size_t>(k);
      } else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return fail("connection to " + send_peer + " lost (send: " + errno_text() + ")");
      }
    }
    if (ri >= 0 && fds[ri].revents != 0) {
      const ssize_t k = ::recv(recv_fd, rdata + got, rlen - got, 0);
      if (k > 0) {
        got += static_cast<std::size_t>(k);
      } else if (k == 0) {
        return fail("connection to " + recv_peer + " lost (closed by peer)");
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return fail("connection to " + recv_peer + " lost (recv: " + errno_text() + ")");
      }
    }
  }
  return CommStatus{};
}

struct FrameHeader {
  std::uint32_t magic;
  std::uint32_t reserved;
  std::uint64_t length;
};

FrameHeader header_for(std::size_t n) { return FrameHeader{kFrameMagic, 0, n}; }

CommStatus check_header(const FrameHeader& h, const std::string& peer) {
  if (h.magic != kFrameMagic || h.length > kMaxFrameBytes) {
    return fail("protocol error: bad frame from " + peer);
  }
  return CommStatus{};
}

CommStatus send_frame(int fd, std::string_view msg, Deadline d, const std::string& peer) {
  const FrameHeader h = header_for(msg.size());
  auto st =
      transfer(fd, reinterpret_cast<const std::byte*>(&h), sizeof h, fd, nullptr, 0, d, peer, peer);
  if (!st.ok) return st;
  return transfer(fd, reinterpret_cast<const std::byte*>(msg.data()), msg.size(), fd, nullptr, 0, d,
                  peer, peer);
}

CommStatus recv_frame(int fd, std::string* msg, Deadline d, const std::string& peer) {
  FrameHeader h{};
  auto st = transfer(fd, nullptr, 0, fd, reinterpret_cast<std::byte*>(&h), sizeof h, d, peer, peer);
  if (!st.ok) return st;
  if (st = check_header(h, peer); !st.ok) return st;
  msg->assign(h.length, '\0');
  return transfer(fd, nullptr, 0, fd, reinterpret_cast<std::byte*>(msg->data()), msg->size(), d,
                  peer, peer);
}

std::string rank_name(int r) { return "rank " + std::to_string(r); }

// A rank's registration with rank 0. Anyone can connect to the rendezvous port: what
// arrives is read as a stranger's until every field has the type and range of a rank's
// registration (nothing in it can throw); nullopt otherwise.
struct Hello {
  int rank = 0, world_size = 0, port = 0;
  std::string addr;
  std::optional<std::string> key;   // the launch's rendezvous key, when the rank has one
  std::optional<std::int64_t> gen;  // the rank's generation (FAULTLINE_GEN), when it has one
};
std::optional<Hello> parse_hello(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  const auto integer = [&j](const char* k, long long lo, long long hi) -> std::optional<int> {
    if (!j.is_object() || !j.contains(k) || !j[k].is_number_integer()) return std::nullopt;
    const long long v = j[k].get<long long>();
    if (v < lo || v > hi) return std::nullopt;
    return static_cast<int>(v);
  };
  const auto r = integer("rank", 1, std::numeric_limits<int>::max());
  const auto ws = integer("world_size", 1, std::numeric_limits<int>::max());
  const auto port = integer("port", 1, 65535);
  in_addr parsed{};
  if (!r || !ws || !port || !j["addr"].is_string() ||
      j["addr"].get_ref<const std::string&>().size() > 255 ||
      ::inet_pton(AF_INET, j["addr"].get_ref<const std::string&>().c_str(), &parsed) != 1)
    return std::nullopt;
  Hello h{*r, *ws, *port, j["addr"].get<std::string>(), std::nullopt, std::nullopt};
  if (j.contains("key")) {
    if (!j["key"].is_string() || j["key"].get_ref<const std::string&>().size() > 256)
      return std::nullopt;
    h.key = j["key"].get<std::string>();
  }
  if (j.contains("gen")) {
    if (!j["gen"].is_number_integer() || j["gen"].get<long long>() < 0) return std::nullopt;
    h.gen = j["gen"].get<long long>();
  }
  return h;
}

// Constant-time equality of two keys (the time taken says nothing of where they differ).
bool keys_equal(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

// Whether rank 0 takes registration `h` (nullopt), or why not. *fatal: it carries rank 0's key
// and still does not fit the group (one of its own ranks, misconfigured: fail at once).
std::optional<std::string> judge(const GroupConfig& config, const Hello& h,
                                 const std::vector<int>& control_fds, bool* fatal) {
  const int w = config.world_size;
  const bool ours = !config.key.empty() && h.key && keys_equal(*h.key, config.key);
  *fatal = false;
  if (!config.key.empty() && !ours) return std::string(h.key ? "a wrong key" : "no key");
  if (config.gen >= 0 && h.gen && *h.gen != config.gen)
    return "generation " + std::to_string(*h.gen) + ", rank 0 runs generation " +
           std::to_string(config.gen);
  std::optional<std::string> why;
  if (h.world_size != w)
    why = "rank " + std::to_string(h.rank) + " has WORLD_SIZE " + std::to_string(h.world_size) +
          ", rank 0 has " + std::to_string(w);
  else if (h.rank >= w || control_fds[h.rank] >= 0)
    why = "rank " + std::to_string(h.rank) + " registered twice or is out of range";
  *fatal = why.has_value() && ours;
  return why;
}

std::string peer_text(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return "?";
  return addr_text(sa.sin_addr) + ":" + std::to_string(ntohs(sa.sin_port));
}

// Rank 0's table of every rank's data address and port, as a rank reads it: false unless
// it has exactly `w` of each, with ports in range.
bool parse_rank_table(const std::string& table, int w, std::vector<std::string>& addrs,
                      std::vector<int>& ports) {
  const auto j = nlohmann::json::parse(table, nullptr, false);
  bool table_ok = j.is_object() && j.contains("addrs") && j.contains("ports") &&
                  j["addrs"].is_array() && j["ports"].is_array() &&
                  j["addrs"].size() == static_cast<std::size_t>(w) &&
                  j["ports"].size() == static_cast<std::size_t>(w);
  for (int r = 0; table_ok && r < w; ++r) {
    const auto& a = j["addrs"][r];
    const auto& p = j["ports"][r];
    table_ok = a.is_string() && p.is_number_integer() && p.get<long long>() >= 1 &&
               p.get<long long>() <= 65535;
    if (table_ok) {
      addrs[r] = a.get<std::string>();
      ports[r] = static_cast<int>(p.get<long long>());
    }
  }
  return table_ok;
}

// A rendezvous that failed: why, and whether it ran out of time.
struct RendezvousError {
  std::string why;
  bool timed_out = false;
};
using MaybeError = std::optional<RendezvousError>;

struct ListenerGuard {
  int& fd;
  ~ListenerGuard() { close_fd(fd); }
};

// Rank 0: takes every other rank's registration on the master port (its control connection,
// into control_fds, and its data address and port) and sends them all the rank table.
MaybeError lead_registration(const GroupConfig& config, const in_addr& master,
                             const in_addr& bind_addr, int data_listener,
                             Clock::time_point deadline, std::vector<int>& control_fds,
                             std::vector<std::string>& addrs, std::vector<int>& ports) {
  const int w = config.world_size;
  std::string error;
  in_addr any{};
  any.s_addr = htonl(INADDR_ANY);
  int master_listener = listen_on(any, config.master_port, deadline, &error);
  if (master_listener < 0) return RendezvousError{error, Clock::now() >= deadline};
  ListenerGuard master_guard{master_listener};
  addrs[0] = config.host_addr.empty() ? addr_text(master) : addr_text(bind_addr);
  ports[0] = local_port(data_listener);
  control_fds.assign(w, -1);
  int registered = 1;
  // A registration is believed only once it proves to be one of ours: with a key (the
  // agent's launches), one without it, or of another generation, is a stranger's, closed
  // while rank 0 keeps waiting; without a key, one that does not fit this group is too. A
  // registration that carries the key and still does not fit fails the rendezvous at once.
  int refused = 0;
  std::string last_refusal;
  auto refuse = [&](int fd, const std::string& why) {
    last_refusal = "from " + peer_text(fd) + ": " + why;
    ::close(fd);
    if (++refused <= 5)
      std::fprintf(stderr, "rendezvous: rank 0 refused a registration %s\n", last_refusal.c_str());
  };
  while (registered < w) {
    const int fd = accept_before(master_listener, deadline);
    if (fd < 0) {
      std::string missing;
      for (int r = 1; r < w; ++r) {
        if (control_fds[r] < 0) missing += (missing.empty() ? "" : ",") + std::to_string(r);
      }
      return RendezvousError{"rank 0 waited for ranks [" + missing + "]" +
                                 (refused ? " (refused " + std::to_string(refused) +
                                                " registrations; the last " + last_refusal + ")"
                                          : ""),
                             true};
    }
    std::string hello;
    const auto st =
        recv_frame(fd, &hello, std::min(deadline, Clock::now() + kHelloWait), "a registering rank");
    const std::optional<Hello> h = st.ok ? parse_hello(hello) : std::nullopt;
    if (!h) {
      ::close(fd);  // not one of ours (or it died while registering): keep waiting
      continue;
    }
    bool fatal = false;
    if (const auto why = judge(config, *h, control_fds, &fatal)) {
      if (!fatal) {
        refuse(fd, *why);
        continue;
      }
      ::close(fd);
      return RendezvousError{*why};
    }
    control_fds[h->rank] = fd;
    addrs[h->rank] = h->addr;
    ports[h->rank] = h->port;
    ++registered;
  }
  const std::string table = nlohmann::json{{"addrs", addrs}, {"ports", ports}}.dump();
  for (int r = 1; r < w; ++r) {
    const auto st = send_frame(control_fds[r], table, deadline, rank_name(r));
    if (!st.ok) return RendezvousError{st.error, st.timed_out};
  }
  return std::nullopt;
}

// Any other rank: registers with rank 0 (its control connection, into control_fds) and
// receives the rank table.
MaybeError follow_registration(const GroupConfig& config, const in_addr& master,
                               const in_addr& bind_addr, int data_listener,
                               Clock::time_point deadline, std::vector<int>& control_fds,
                               std::vector<std::string>& addrs, std::vector<int>& ports) {
  const int w = config.world_size;
  const int rank = config.rank;
  std::string error;
  const int fd = connect_retry(master, config.master_port, deadline, &error);
  if (fd < 0) return RendezvousError{"rank " + std::to_string(rank) + ": " + error, true};
  control_fds = {fd};
  std::string my_addr;
  if (config.host_addr.empty()) {
    sockaddr_in sa{};
    socklen_t len = sizeof sa;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    my_addr = addr_text(sa.sin_addr);  // the address rank 0 sees us from
  } else {
    my_addr = addr_text(bind_addr);
  }
  nlohmann::json reg{
      {"rank", rank}, {"world_size", w}, {"addr", my_addr}, {"port", local_port(data_listener)}};
  if (!config.key.empty()) reg["key"] = config.key;
  if (config.gen >= 0) reg["gen"] = config.gen;
  const std::string hello = reg.dump();
  auto st = send_frame(fd, hello, deadline, rank_name(0));
  std::string table;
  if (st.ok) st = recv_frame(fd, &table, deadline, rank_name(0));
  if (!st.ok) {
    return RendezvousError{
        "rank " + std::to_string(rank) + " waiting for the rank table: " + st.error, st.timed_out};
  }
  if (!parse_rank_table(table, w, addrs, ports))
    return RendezvousError{"malformed rank table from rank 0"};
  return std::nullopt;
}

// The ring: connect to the successor, then accept the predecessor (connect completes against
// the listen backlog, so the order cannot deadlock).
MaybeError join_ring(int rank, int w, const std::vector<std::string>& addrs,
                     const std::vector<int>& ports, int data_listener, Clock::time_point deadline,
                     int* next_fd, int* prev_fd) {
  std::string error;
  const int next = (rank + 1) % w;
  const int prev = (rank + w - 1) % w;
  in_addr next_addr{};
  if (!resolve(addrs[next], &next_addr, &error)) return RendezvousError{error};
  *next_fd = connect_retry(next_addr, ports[next], deadline, &error);
  if (*next_fd < 0)
    return RendezvousError{"ring: rank " + std::to_string(next) + ": " + error, true};
  const std::int32_t me = rank;
  auto st = transfer(*next_fd, reinterpret_cast<const std::byte*>(&me), sizeof me, -1, nullptr, 0,
                     deadline, rank_name(next), rank_name(next));
  if (!st.ok) return RendezvousError{"ring: " + st.error, st.timed_out};
  while (*prev_fd < 0) {
    const int fd = accept_before(data_listener, deadline);
    if (fd < 0)
      return RendezvousError{"ring: rank " + std::to_string(prev) + " did not connect", true};
    std::int32_t who = -1;
    st = transfer(-1, nullptr, 0, fd, reinterpret_cast<std::byte*>(&who), sizeof who,
                  std::min(deadline, Clock::now() + kHelloWait), "?", "a connecting rank");
    if (st.ok && who == prev) {
      *prev_fd = fd;
    } else {
      ::close(fd);
    }
  }
  return std::nullopt;
}

}  // namespace

__attribute__((noinline)) void hang_in_collective() {
  for (;;) ::pause();
}

Group::~Group() {
  close_fd(next_fd_);
  close_fd(prev_fd_);
  for (int& fd : control_fds_) close_fd(fd);
}

std::unique_ptr<Group> Group::rendezvous(const GroupConfig& config, Clock::time_point deadline,
                                         CommStatus* status) {
  std::unique_ptr<Group> g(new Group(config.rank, config.world_size));
  *status = CommStatus{};
  const int w = config.world_size;
  if (w == 1) return g;
  const int rank = config.rank;
  std::string error;
  auto failed = [&](std::string why, bool timed_out = false) {
    *status = fail(timed_out ? "rendezvous timeout: " + why : "rendezvous: " + why, timed_out);
    return nullptr;
  };

  in_addr master{}, bind_addr{};
  bind_addr.s_addr = htonl(INADDR_ANY);
  if (!resolve(config.master_addr, &master, &error)) return failed("MASTER_ADDR: " + error);
  if (!config.host_addr.empty() && !resolve(config.host_addr, &bind_addr, &error)) {
    return failed("FAULTLINE_HOST_ADDR: " + error);
  }
  int data_listener = listen_on(bind_addr, 0, Clock::now(), &error);
  if (data_listener < 0) return failed(error);
  ListenerGuard data_guard{data_listener};

  std::vector<std::string> addrs(w);
  std::vector<int> ports(w, 0);
  MaybeError e = rank == 0 ? lead_registration(config, master, bind_addr, data_listener, deadline,
                                               g->control_fds_, addrs, ports)
                           : follow_registration(config, master, bind_addr, data_listener, deadline,
                                                 g->control_fds_, addrs, ports);
  if (!e) e = join_ring(rank, w, addrs, ports, data_listener, deadline, &g->next_fd_, &g->prev_fd_);
  if (e) return failed(e->why, e->timed_out);
  return g;
}

int Group::control_fd(int peer) const {
  if (rank_ == 0) {
    return peer > 0 && peer < static_cast<int>(control_fds_.size()) ? control_fds_[peer] : -1;
  }
  return peer == 0 && !control_fds_.empty() ? control_fds_[0] : -1;
}

CommStatus Group::all_gather(std::span<std::byte> all, std::size_t block_bytes, Deadline deadline,
                             std::string_view shift_out, std::string* shift_in) {
  if (hang_armed_) hang_in_collective();
  const int w = world_size_;
  if (all.size() != block_bytes * static_cast<std::size_t>(w)) {
    return fail("all_gather: buffer size mismatch");
  }
  const int next = (rank_ + 1) % w;
  const int prev = (rank_ + w - 1) % w;
  // Step k forwards block (rank - k) to the successor and receives block (rank - k - 1).
  for (int k = 0; k + 1 < w; ++k) {
    const int send_block = (rank_ - k + 2 * w) % w;
    const int recv_block = (rank_ - k - 1 + 2 * w) % w;
    const auto st = transfer(next_fd_, all.data() + send_block * block_bytes, block_bytes, prev_fd_,
                             all.data() + recv_block * block_bytes, block_bytes, deadline,
                             rank_name(next), rank_name(prev));
    if (!st.ok) return fail("all_gather: " + st.error, st.timed_out);
  }
  if (shift_in != nullptr) {
    if (w == 1) {
      shift_in->assign(shift_out);
      return CommStatus{};
    }
    // The shift, written out here rather than calling shift(), keeps the same frames.
    const FrameHeader out = header_for(shift_out.size());
    FrameHeader in{};
    auto st = transfer(next_fd_, reinterpret_cast<const std::byte*>(&out), sizeof out, prev_fd_,
                       reinterpret_cast<std::byte*>(&in), sizeof in, deadline, rank_name(next),
                       rank_name(prev));
    if (st.ok) st = check_header(in, rank_name(prev));
    if (!st.ok) return fail("all_gather: shift: " + st.error, st.timed_out);
    shift_in->assign(in.length, '\0');
    st = transfer(next_fd_, reinterpret_cast<const std::byte*>(shift_out.data()), shift_out.size(),
                  prev_fd_, reinterpret_cast<std::byte*>(shift_in->data()), shift_in->size(),
                  deadline, rank_name(next), rank_name(prev));
    if (!st.ok) return fail("all_gather: shift: " + st.error, st.timed_out);
  }
  return CommStatus{};
}

CommStatus Group::shift(std::string_view to_next, std::string* from_prev, Deadline deadline) {
  const int w = world_size_;
  if (w == 1) {
    from_prev->assign(to_next);
    return CommStatus{};
  }
  const int next = (rank_ + 1) % w;
  const int prev = (rank_ + w - 1) % w;
  const FrameHeader out = header_for(to_next.size());
  FrameHeader in{};
  auto st = transfer(next_fd_, reinterpret_cast<const std::byte*>(&out), sizeof out, prev_fd_,
                     reinterpret_cast<std::byte*>(&in), sizeof in, deadline, rank_name(next),
                     rank_name(prev));
  if (st.ok) st = check_header(in, rank_name(prev));
  if (!st.ok) return fail("shift: " + st.error, st.timed_out);
  from_prev->assign(in.length, '\0');
  st = transfer(next_fd_, reinterpret_cast<const std::byte*>(to_next.data()), to_next.size(),
                prev_fd_, reinterpret_cast<std::byte*>(from_prev->data()), from_prev->size(),
                deadline, rank_name(next), rank_name(prev));
  if (!st.ok) return fail("shift: " + st.error, st.timed_out);
  return CommStatus{};
}

CommStatus Group::send_to(int peer, std::string_view message, Deadline deadline) {
  const int fd = control_fd(peer);
  if (fd < 0)
    return fail("no control connection from rank " + std::to_string(rank_) + " to " +
                rank_name(peer));
  return send_frame(fd, message, deadline, rank_name(peer));
}

CommStatus Group::recv_from(int peer, std::string* message, Deadline deadline) {
  const int fd = control_fd(peer);
  if (fd < 0)
    return fail("no control connection from rank " + std::to_string(rank_) + " to " +
                rank_name(peer));
  return recv_frame(fd, message, deadline, rank_name(peer));
}

}  // namespace faultline::live::trainjob
