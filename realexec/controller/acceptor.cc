#include "realexec/controller/acceptor.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <utility>

#include "realexec/net/wire.h"

namespace faultline::live {

bool Acceptor::listen(const std::string& host, int port, std::string* err) {
  fd_ = listen_tcp(host, port, err);
  return fd_ >= 0;
}

void Acceptor::start(std::function<void()> ready) {
  reactor_.add_fd(fd_, EPOLLIN, [ready = std::move(ready)](std::uint32_t) { ready(); });
}

void Acceptor::close() {
  if (fd_ < 0) return;
  reactor_.remove_fd(fd_);
  ::close(fd_);
  fd_ = -1;
}

int Acceptor::accept(std::string* peer) { return accept_tcp(fd_, peer); }

bool Acceptor::starved(Duration pause) {
  const bool first = failures_++ == 0;
  starved_ = true;
  reactor_.modify_fd(fd_, 0);
  reactor_.add_timer(pause, [this] {
    starved_ = false;
    if (!handshakes_full_) watch_if_open();
  });
  return first;
}

std::uint64_t Acceptor::recovered() { return std::exchange(failures_, 0); }

void Acceptor::pause_handshakes(Duration pause) {
  handshakes_full_ = true;
  reactor_.modify_fd(fd_, 0);
  reactor_.add_timer(pause, [this] { resume_handshakes(); });
}

void Acceptor::resume_handshakes() {
  if (!handshakes_full_) return;
  handshakes_full_ = false;
  if (!starved_) watch_if_open();
}

void Acceptor::watch_if_open() {
  if (fd_ >= 0) reactor_.modify_fd(fd_, EPOLLIN);
}

}  // namespace faultline::live
