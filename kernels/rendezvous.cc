#include "kernels/rendezvous.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "kernels/watchdog.h"

namespace faultline::kernels {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kFileMagic[8] = {'F', 'L', 'R', 'V', '0', '0', '0', '1'};
constexpr char kHelloMagic[4] = {'F', 'L', 'R', 'Q'};
constexpr char kReplyMagic[4] = {'F', 'L', 'R', 'V'};

int ms_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration<double, std::milli>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return static_cast<int>(std::min(std::ceil(left), 1e9));
}

void put_u32(std::string& s, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

std::uint32_t get_u32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<std::uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

RendezvousOutcome failure(std::string error, bool timed_out = false) {
  RendezvousOutcome o;
  o.ok = false;
  o.timed_out = timed_out;
  o.error = std::move(error);
  return o;
}

RendezvousOutcome success() {
  RendezvousOutcome o;
  o.ok = true;
  return o;
}

// ---- file ----

RendezvousOutcome file_publish(const std::string& path, int nranks, std::span<std::byte> blob) {
  std::string content(kFileMagic, sizeof kFileMagic);
  put_u32(content, static_cast<std::uint32_t>(nranks));
  put_u32(content, static_cast<std::uint32_t>(blob.size()));
  content.append(reinterpret_cast<const char*>(blob.data()), blob.size());
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return failure("rendezvous file:" + path + ": cannot create " + tmp + ": " +
                   std::strerror(errno));
  }
  const bool written = write_all(fd, content) && ::fsync(fd) == 0;
  ::close(fd);
  if (!written || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return failure("rendezvous file:" + path + ": cannot publish the unique id: " + why);
  }
  return success();
}

RendezvousOutcome file_fetch(const std::string& path, int nranks, std::span<std::byte> blob,
                             Clock::time_point deadline) {
  const std::size_t expected_size = sizeof kFileMagic + 8 + blob.size();
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (content.size() != expected_size ||
          std::memcmp(content.data(), kFileMagic, sizeof kFileMagic) != 0) {
        return failure("rendezvous file:" + path + ": not a faultline rendezvous file of " +
                       std::to_string(expected_size) + " bytes");
      }
      const std::uint32_t file_nranks = get_u32(content.data() + 8);
      const std::uint32_t file_size = get_u32(content.data() + 12);
      if (file_nranks != static_cast<std::uint32_t>(nranks) || file_size != blob.size()) {
        return failure("rendezvous file:" + path + ": written for " + std::to_string(file_nranks) +
                       " ranks, this rank expects " + std::to_string(nranks) +
                       " (a stale file from another run?)");
      }
      std::memcpy(blob.data(), content.data() + 16, blob.size());
      return success();
    }
    if (Clock::now() >= deadline) {
      return failure("rendezvous file:" + path +
                         ": timed out waiting for rank 0 to write the "
                         "unique id",
                     true);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// ---- tcp ----

struct FdCloser {
  int fd = -1;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { ::freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

AddrInfoPtr resolve(const char* host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* out = nullptr;
  const std::string service = std::to_string(port);
  if (::getaddrinfo(host, service.c_str(), &hints, &out) != 0) return AddrInfoPtr(nullptr);
  return AddrInfoPtr(out);
}

// Reads or writes exactly `size` bytes before the deadline. Returns false on EOF, error, timeout.
bool io_full(int fd, char* data, std::size_t size, bool reading, Clock::time_point deadline) {
  std::size_t done = 0;
  while (done < size) {
    pollfd p{fd, static_cast<short>(reading ? POLLIN : POLLOUT), 0};
    const int wait = ms_until(deadline);
    if (wait == 0) return false;
    const int r = ::poll(&p, 1, wait);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    const ssize_t n = reading ? ::recv(fd, data + done, size - done, 0)
                              : ::send(fd, data + done, size - done, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

int listen_on(const std::string& host, int port) {
  for (const char* h : {host.c_str(), static_cast<const char*>(nullptr)}) {
    AddrInfoPtr ai = resolve(h, port, true);
    for (addrinfo* a = ai.get(); a != nullptr; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      const int one = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) return fd;
      ::close(fd);
    }
  }
  return -1;
}

RendezvousOutcome tcp_serve(const RendezvousSpec& spec, int nranks, std::span<std::byte> blob,
                            Clock::time_point deadline) {
  const std::string where = "rendezvous tcp:" + spec.host + ":" + std::to_string(spec.port) + ": ";
  if (nranks <= 1) return success();
  FdCloser listener{listen_on(spec.host, spec.port)};
  if (listener.fd < 0) {
    return failure(where + "rank 0 cannot listen: " + std::strerror(errno));
  }
  std::string reply(kReplyMagic, sizeof kReplyMagic);
  put_u32(reply, static_cast<std::uint32_t>(nranks));
  put_u32(reply, static_cast<std::uint32_t>(blob.size()));
  reply.append(reinterpret_cast<const char*>(blob.data()), blob.size());
  std::set<std::uint32_t> served;
  while (served.size() < static_cast<std::size_t>(nranks - 1)) {
    pollfd p{listener.fd, POLLIN, 0};
    const int wait = ms_until(deadline);
    const int r = wait == 0 ? 0 : ::poll(&p, 1, wait);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      return failure(where + "timed out with " + std::to_string(served.size()) + " of " +
                         std::to_string(nranks - 1) + " ranks served",
                     true);
    }
    FdCloser client{::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC)};
    if (client.fd < 0) continue;
    const auto client_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(5));
    char hello[8];
    if (!io_full(client.fd, hello, sizeof hello, true, client_deadline) ||
        std::memcmp(hello, kHelloMagic, sizeof kHelloMagic) != 0) {
      continue;  // not one of ours, or gone: keep serving the others
    }
    const std::uint32_t rank = get_u32(hello + 4);
    if (rank == 0 || rank >= static_cast<std::uint32_t>(nranks)) continue;
    if (io_full(client.fd, reply.data(), reply.size(), false, client_deadline)) {
      served.insert(rank);
    }
  }
  return success();
}

int connect_before(const addrinfo* a, Clock::time_point deadline) {
  const int fd =
      ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
  if (fd < 0) return -1;
  if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) return fd;
  if (errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  pollfd p{fd, POLLOUT, 0};
  const int wait = std::min(ms_until(deadline), 1000);
  int error = 0;
  socklen_t len = sizeof error;
  if (wait > 0 && ::poll(&p, 1, wait) == 1 &&
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0) {
    return fd;
  }
  ::close(fd);
  return -1;
}

RendezvousOutcome tcp_fetch(const RendezvousSpec& spec, int rank, int nranks,
                            std::span<std::byte> blob, Clock::time_point deadline) {
  const std::string where = "rendezvous tcp:" + spec.host + ":" + std::to_string(spec.port) + ": ";
  std::string last_problem = "rank 0 not reachable";
  for (;;) {
    if (Clock::now() >= deadline) {
      return failure(where + "timed out (" + last_problem + ")", true);
    }
    AddrInfoPtr ai = resolve(spec.host.c_str(), spec.port, false);
    if (!ai) last_problem = "cannot resolve host";
    for (addrinfo* a = ai.get(); a != nullptr; a = a->ai_next) {
      FdCloser conn{connect_before(a, deadline)};
      if (conn.fd < 0) continue;
      std::string hello(kHelloMagic, sizeof kHelloMagic);
      put_u32(hello, static_cast<std::uint32_t>(rank));
      char header[12];
      if (!io_full(conn.fd, hello.data(), hello.size(), false, deadline) ||
          !io_full(conn.fd, header, sizeof header, true, deadline)) {
        last_problem = "connection to rank 0 dropped";
        continue;
      }
      if (std::memcmp(header, kReplyMagic, sizeof kReplyMagic) != 0) {
        return failure(where + "the peer is not a faultline rendezvous");
      }
      const std::uint32_t peer_nranks = get_u32(header + 4);
      const std::uint32_t size = get_u32(header + 8);
      if (peer_nranks != static_cast<std::uint32_t>(nranks) || size != blob.size()) {
        return failure(where + "rank 0 runs " + std::to_string(peer_nranks) +
                       " ranks, this rank expects " + std::to_string(nranks));
      }
      if (!io_full(conn.fd, reinterpret_cast<char*>(blob.data()), blob.size(), true, deadline)) {
        last_problem = "connection to rank 0 dropped";
        continue;
      }
      return success();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

RendezvousOutcome exchange_blob(const RendezvousSpec& spec, int rank, int nranks,
                                std::span<std::byte> blob, Clock::time_point deadline) {
  if (rank < 0 || rank >= nranks) return failure("rendezvous: rank out of range");
  if (spec.kind == RendezvousSpec::Kind::kFile) {
    return rank == 0 ? file_publish(spec.path, nranks, blob)
                     : file_fetch(spec.path, nranks, blob, deadline);
  }
  return rank == 0 ? tcp_serve(spec, nranks, blob, deadline)
                   : tcp_fetch(spec, rank, nranks, blob, deadline);
}

}  // namespace faultline::kernels
