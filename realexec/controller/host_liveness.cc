#include "realexec/controller/host_liveness.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>

namespace faultline::live {

void enable_keepalive(int fd, int idle_s, int interval_s, int count) {
  const int on = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) != 0) return;
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

std::optional<double> since_last_ack_s(int fd) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return std::nullopt;
  return info.tcpi_last_ack_recv / 1000.0;
}

bool host_answers(int fd, double silence_s, double fresh_s) {
  const std::optional<double> ack = since_last_ack_s(fd);
  // The agent's own last message was acknowledged-with-data at the start of the silence: an
  // acknowledgement as old as the silence is that one, not the host answering since. A
  // quarter second tells them apart (a keepalive answer comes a second into the silence).
  return ack && *ack + 0.25 < silence_s && *ack < fresh_s;
}

}  // namespace faultline::live
