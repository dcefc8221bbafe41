// Whether a silent agent's host still answers: the kernel's TCP acknowledgements on the
// agent's connection, which keep coming while the agent's process is stopped or starved
// (a checkpoint save freezing the host, swap, a debugger) and stop when the host is down or
// cut off. The controller asks for TCP keepalive probes on every connection it accepts, so
// an idle connection to a live host is acknowledged about once a second even when the agent
// sends nothing (docs/running-live.md, "Heartbeats and timeouts").
#pragma once

#include <optional>

namespace faultline::live {

// Keepalive on `fd`: the first probe after `idle_s` of silence, then one every
// `interval_s`; the kernel drops the connection after `count` unanswered probes. Best
// effort: a socket that refuses (not TCP) is left as it is.
void enable_keepalive(int fd, int idle_s, int interval_s, int count);

// Seconds since the peer's kernel last acknowledged anything on `fd` (data, or a keepalive
// probe); nullopt when the kernel does not say (not a TCP socket).
std::optional<double> since_last_ack_s(int fd);

// Whether the host of a connection silent for `silence_s` answers: it acknowledged
// something after the silence began (a keepalive probe), and within `fresh_s`.
bool host_answers(int fd, double silence_s, double fresh_s);

}  // namespace faultline::live
