// The simulator's one fork pool: work items run in forked child processes, at most
// `jobs` at a time, each sending back one byte string.
//
// Processes, not threads: SimGrid allows one engine per process, so every replica after
// the first runs in a fork of the state the first left behind (platform built, routes
// cached), and the parent only collects. Replica runs, paired comparisons and sweep
// chunks all go through here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace faultline::sim {

struct ForkPoolOptions {
  int jobs = 1;  // children at once (at least 1)
  // Called in the parent with the number of ticks the children sent so far (a child
  // ticks with the function it is given); nullptr: no ticks.
  std::function<void(long long)> on_tick;
  // Set: a child takes further items (the next unclaimed index, whichever child is
  // free first) for as long as this, called in the child after each item, says its
  // state is still the one it was forked with as far as the items can tell; when it
  // says no, the child ends and a fresh fork takes over. Unset: one item per child.
  std::function<bool()> child_reusable;
};

// Runs `child(i, tick)` for i in [0, n) in forked processes, at most `jobs` at a time, and
// calls `on_result(i, bytes)` in the parent, in completion order, with what the child returned.
// A child that throws, exits non-zero or dies ends the pool: the others are killed and
// std::runtime_error names the item ("<what(i)>: process failed (status N)", or the
// child's own message on its stderr before); a child's policies::ModuleError (a module of
// the user's failed) is rethrown as one, with its message. Stdout and stderr are flushed
// before each fork.
void fork_pool(
    std::size_t n, const ForkPoolOptions& opt,
    const std::function<std::vector<std::uint8_t>(std::size_t, const std::function<void()>& tick)>&
        child,
    const std::function<void(std::size_t, std::vector<std::uint8_t>)>& on_result,
    const std::function<std::string(std::size_t)>& what);

}  // namespace faultline::sim
