#include "realexec/controller/metrics_http.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <vector>

#include "realexec/controller/metrics.h"
#include "realexec/net/wire.h"

namespace faultline::live {
namespace {

const char* reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Error";
  }
}

// Lines of a request head without their line ends ("\r\n", or a bare "\n" as lenient
// clients send); the blank line that ends the head is not included.
std::vector<std::string_view> head_lines(std::string_view head) {
  std::vector<std::string_view> lines;
  while (!head.empty()) {
    const std::size_t nl = head.find('\n');
    std::string_view l = head.substr(0, nl);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (l.empty()) break;
    lines.push_back(l);
    if (nl == std::string_view::npos) break;
    head.remove_prefix(nl + 1);
  }
  return lines;
}

bool is_token_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

struct RequestLine {
  std::string_view method, target, version;
};

// "METHOD SP TARGET SP HTTP/1.x"; false when malformed.
bool parse_request_line(std::string_view l, RequestLine* r) {
  const std::size_t a = l.find(' ');
  const std::size_t b = a == std::string_view::npos ? a : l.find(' ', a + 1);
  if (b == std::string_view::npos || l.find(' ', b + 1) != std::string_view::npos) return false;
  r->method = l.substr(0, a);
  r->target = l.substr(a + 1, b - a - 1);
  r->version = l.substr(b + 1);
  if (r->method.empty() || r->target.empty() || r->target.front() != '/') return false;
  for (char c : r->method)
    if (!(c >= 'A' && c <= 'Z')) return false;
  return r->version == "HTTP/1.1" || r->version == "HTTP/1.0";
}

}  // namespace

HttpAnswer answer_request(std::string_view head, const std::string& token,
                          const std::function<std::string()>& metrics) {
  const std::vector<std::string_view> lines = head_lines(head);
  RequestLine rl;
  if (lines.empty() || !parse_request_line(lines[0], &rl)) return {400, "malformed request line\n"};
  std::string_view authorization;
  bool has_authorization = false;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::size_t colon = lines[i].find(':');
    if (colon == 0 || colon == std::string_view::npos) return {400, "malformed header\n"};
    const std::string_view name = lines[i].substr(0, colon);
    for (char c : name)
      if (!is_token_char(c)) return {400, "malformed header\n"};
    if (iequals(name, "authorization")) {
      if (has_authorization) return {400, "more than one Authorization header\n"};
      has_authorization = true;
      authorization = trim(lines[i].substr(colon + 1));
    }
  }
  if (rl.method != "GET") return {405, "only GET\n"};
  const std::string_view path = rl.target.substr(0, rl.target.find('?'));
  if (path != "/metrics") return {404, "only /metrics\n"};
  if (!token.empty()) {
    constexpr std::string_view kBearer = "Bearer ";
    const bool bearer =
        authorization.size() > kBearer.size() && iequals(authorization.substr(0, 7), kBearer);
    // Constant time in the token's contents: a timing probe learns nothing but its length.
    if (!bearer || !tokens_equal(trim(authorization.substr(kBearer.size())), token))
      return {401, "expected Authorization: Bearer <metrics token>\n"};
  }
  return {200, metrics()};
}

MetricsServer::MetricsServer(Reactor& reactor, int listen_fd, std::string token,
                             std::function<std::string()> metrics, Duration deadline)
    : reactor_(reactor),
      listen_fd_(listen_fd),
      token_(std::move(token)),
      metrics_(std::move(metrics)),
      deadline_(deadline) {
  reactor_.add_fd(listen_fd_, EPOLLIN, [this](std::uint32_t) { on_accept(); });
}

MetricsServer::~MetricsServer() {
  if (pause_timer_) reactor_.cancel_timer(pause_timer_);
  while (!conns_.empty()) close_conn(conns_.begin()->first);
  reactor_.remove_fd(listen_fd_);
  ::close(listen_fd_);
}

void MetricsServer::on_accept() {
  // A few at a time, then back to the loop (the listener is level-triggered): a flood dialled
  // again as fast as it is pushed out must not keep the reactor here.
  for (int i = 0; i < kMaxConnections; ++i) {
    if (!room_for_one()) return;
    std::string peer;
    const int fd = accept_tcp(listen_fd_, &peer);
    if (fd < 0) {
      if (accept_starved(errno)) pause_accepts(kAcceptPause);
      return;
    }
    Connection& c = conns_[fd];
    c.seq = next_seq_++;
    c.accepted = reactor_.now();
    c.timer = reactor_.add_timer(deadline_, [this, fd] {
      if (auto it = conns_.find(fd); it != conns_.end()) {
        it->second.timer = 0;
        close_conn(fd);
      }
    });
    reactor_.add_fd(fd, EPOLLIN | EPOLLRDHUP, [this, fd](std::uint32_t ev) { on_io(fd, ev); });
    // A scraper that waited in the backlog sent its request long ago: answer it now, before
    // the accepts behind it could push it out unread (a flood of 2,000 idle connections
    // dialled again as each was closed failed 2 to 7 scrapes of 30).
    if (bytes_waiting(fd) > 0) read_request(fd, c);
  }
}

bool MetricsServer::room_for_one() {
  if (pause_timer_) return false;
  if (static_cast<int>(conns_.size()) < kMaxConnections) return true;
  if (const int victim = idle_victim(); victim >= 0) {
    ++turned_away_;
    close_conn(victim);
    return true;
  }
  // Every one is being answered or has bytes waiting: the rest wait in the backlog.
  pause_accepts(kFullPause);
  return false;
}

int MetricsServer::idle_victim() const {
  // No time grace: a scraper's request is on its way as it connects, and one accepted before
  // it arrived is the newest, pushed out only after kMaxConnections more accepts (its request
  // is waiting by then). A grace left the accept queue full of the flood's connections, and
  // the kernel dropped a scraper's SYN (retried after 1, 3, 7 s).
  int oldest = -1;
  std::uint64_t oldest_seq = 0;
  for (const auto& [fd, c] : conns_)
    if (c.out.empty() && (oldest < 0 || c.seq < oldest_seq) && bytes_waiting(fd) == 0) {
      oldest = fd;
      oldest_seq = c.seq;
    }
  return oldest;
}

void MetricsServer::pause_accepts(Duration d) {
  if (pause_timer_) return;
  reactor_.modify_fd(listen_fd_, 0);
  pause_timer_ = reactor_.add_timer(d, [this] {
    pause_timer_ = 0;
    reactor_.modify_fd(listen_fd_, EPOLLIN);
    on_accept();
  });
}

void MetricsServer::on_io(int fd, std::uint32_t events) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  Connection& c = it->second;
  if (!c.out.empty()) {
    if (events & (EPOLLERR | EPOLLHUP)) return close_conn(fd);
    return write_some(fd, c);
  }
  if (!read_request(fd, c)) return;
  if (events & (EPOLLERR | EPOLLHUP)) close_conn(fd);
}

bool MetricsServer::read_request(int fd, Connection& c) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) {  // the peer closed (or failed) before its request was complete
      close_conn(fd);
      return false;
    }
    c.in.append(buf, static_cast<std::size_t>(n));
    std::size_t end = c.in.find("\r\n\r\n");
    if (end == std::string::npos) end = c.in.find("\n\n");
    if (end != std::string::npos && end < kMaxRequestBytes) {
      respond(fd, c, answer_request(std::string_view(c.in).substr(0, end + 2), token_, metrics_));
      return conns_.count(fd) != 0;
    }
    if (c.in.size() >= kMaxRequestBytes) {
      respond(fd, c, {431, "request head over " + std::to_string(kMaxRequestBytes) + " bytes\n"});
      return conns_.count(fd) != 0;
    }
  }
}

void MetricsServer::respond(int fd, Connection& c, const HttpAnswer& a) {
  std::string head = "HTTP/1.1 " + std::to_string(a.status) + ' ' + reason(a.status) + "\r\n";
  head += std::string("Content-Type: ") +
          (a.status == 200 ? kExpositionContentType : "text/plain; charset=utf-8");
  head += "\r\nContent-Length: " + std::to_string(a.body.size()) + "\r\nConnection: close\r\n";
  if (a.status == 401) head += "WWW-Authenticate: Bearer\r\n";
  if (a.status == 405) head += "Allow: GET\r\n";
  c.out = head + "\r\n" + a.body;
  c.in.clear();
  c.in.shrink_to_fit();
  reactor_.modify_fd(fd, EPOLLOUT);
  write_some(fd, c);
}

void MetricsServer::write_some(int fd, Connection& c) {
  while (c.out_off < c.out.size()) {
    const ssize_t n = ::send(fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // EPOLLOUT brings us back
    if (n <= 0) return close_conn(fd);
    c.out_off += static_cast<std::size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  close_conn(fd);
}

void MetricsServer::close_conn(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  if (it->second.timer) reactor_.cancel_timer(it->second.timer);
  conns_.erase(it);
  reactor_.remove_fd(fd);
  ::close(fd);
}

}  // namespace faultline::live
