// Internals shared by the live controller's source files (live_controller.cc: set-up, the
// run, storage, heartbeats, agents' messages; controller_admission.cc: accepting connections,
// room for handshakes, refusals and the notes about them; controller_clients.cc: operator
// clients, their requests and replies). Not part of the Controller's interface.
#pragma once

#include <sys/resource.h>

#include <cstddef>
#include <cstdint>

namespace faultline::live::controller_detail {

inline constexpr double kHelloTimeoutS = 5;
// Limits for what anyone who can reach the port may hold (docs/operator-guide.md, "Limits"):
// unauthenticated connections, and the frame size before authentication (a hello and an
// answer to the challenge are well under 4 KiB).
inline constexpr int kMaxUnauthenticated = 64;
inline constexpr std::size_t kMaxFrameBeforeAuth = 4096;
// Client sessions (live status, inject, ...) per access (admin, read-only), and how long one
// may sit idle: enough of them must not lock an operator out.
inline constexpr int kMaxClientsPerAccess = 16;
inline constexpr double kClientIdleS = 60;
// Bad proofs said one by one per minute before the rest are summed up.
inline constexpr std::uint64_t kBadCredentialLinesPerMinute = 10;
// Notes about the sessions of one access (read-only, admin) said one by one in a minute; the
// rest are summed up in one line at the minute's end. The session limit resets nothing: a
// token holder churning sessions writes no more than that.
inline constexpr std::uint64_t kSessionLinesPerMinute = 10;
inline constexpr double kAcceptPauseS = 0.25;  // after accept fails for want of fds
// An unauthenticated connection younger than this is never pushed out to make room: a
// legitimate handshake takes one round trip.
inline constexpr double kHandshakeGraceS = 1;
// How long accepts wait when every unauthenticated connection is under way (a herd of agents
// redialling at once): one round trip of a handshake.
inline constexpr double kHandshakePauseS = 0.01;
inline constexpr int kAcceptsPerWake = 64;
inline constexpr double kStartupWaitS = 30;
// fds the controller holds besides its connections: epoll, timerfd, signalfd, the listeners,
// the event log, journal and lock files, pidfds of its helpers.
inline constexpr rlim_t kReservedFds = 64;
inline constexpr std::uint64_t kOwnReqBase = 1ull << 40;  // controller-originated requests
// `inject --fault warn` without a detail: TrainMover's predictors warn minutes ahead.
inline constexpr double kDefaultWarnLeadS = 600;

}  // namespace faultline::live::controller_detail
