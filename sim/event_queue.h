// EventQueue: a replica's (time, sequence) event queue, and Timers: the ids a World hands
// out for set_timer and which of them were cancelled.
//
// The queue orders small keys; payloads stay put in a slab (reused slots), so a heap sift
// moves 24 bytes instead of a payload. (at, seq) is a total order: items pushed for the
// same instant come out in the order they were pushed, and the pop order does not depend
// on the heap's layout. Header-only: SimWorld's event loop inlines it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "policies/api/ids.h"

namespace faultline::sim {

template <class Payload>
class EventQueue {
 public:
  struct Item {
    std::int64_t at;
    std::uint64_t seq;
    Payload payload;
  };

  // Takes `p` by rvalue: the caller's payload moves once, into its slot.
  void push(std::int64_t at, Payload&& p) {
    std::uint32_t slot;
    if (free_.empty()) {
      slot = static_cast<std::uint32_t>(payloads_.size());
      payloads_.push_back(std::move(p));
    } else {
      slot = free_.back();
      free_.pop_back();
      payloads_[slot] = std::move(p);
    }
    heap_.push_back(Key{at, seq_++, slot});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  // The earliest item's time; requires !empty().
  std::int64_t next_at() const { return heap_.front().at; }
  // Takes the earliest item out (its slot is reused); requires !empty().
  Item pop() {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    const Key key = heap_.back();
    heap_.pop_back();
    Item item{key.at, key.seq, std::move(payloads_[key.slot])};
    free_.push_back(key.slot);
    return item;
  }
  // Payload slots allocated so far (reused ones counted once).
  std::size_t slots() const { return payloads_.size(); }

 private:
  struct Key {
    std::int64_t at;
    std::uint64_t seq;
    std::uint32_t slot;
  };
  struct Later {
    bool operator()(const Key& a, const Key& b) const {
      return a.at != b.at ? a.at > b.at : a.seq > b.seq;
    }
  };
  std::vector<Key> heap_;            // std::push_heap / pop_heap with Later
  std::vector<Payload> payloads_;    // by Key::slot
  std::vector<std::uint32_t> free_;  // payload slots to reuse
  std::uint64_t seq_ = 0;
};

// Timer ids count up from 1; a cancelled id stays cancelled (its item is dropped when it
// comes out of the queue).
class Timers {
 public:
  TimerId add() {
    const TimerId id = next_++;
    cancelled_.resize(next_, false);
    return id;
  }
  void cancel(TimerId id) {
    if (id < cancelled_.size()) cancelled_[id] = true;
  }
  // Every id handed out so far (a stack made afresh never sees its predecessor's timers).
  void cancel_all() { cancelled_.assign(next_, true); }
  bool cancelled(TimerId id) const { return cancelled_[id]; }

 private:
  std::vector<bool> cancelled_;  // by TimerId
  TimerId next_ = 1;
};

}  // namespace faultline::sim
