#include "sim/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "policies/api/rng.h"
#include "traces/stats.h"

namespace faultline::sim {

void CategoryTotals::add(const ReplicaResult& r) {
  if (categories.size() < r.categories.size()) categories.resize(r.categories.size());
  for (std::size_t c = 0; c < r.categories.size(); ++c) {
    const CategoryStats& k = r.categories[c];
    Sums& s = categories[c];
    s.recurred += k.recurred;
    for (int o = 0; o < kOutcomes; ++o) s.outcomes[o] += k.outcomes[o];
    s.incidents += k.incidents;
    s.injected += k.injected;
    s.resolution_sum_s += k.resolution_sum_s;
    s.resolution_max_s = std::max(s.resolution_max_s, k.resolution_max_s);
    s.detection_sum_s += k.detection_sum_s;
    s.detected += k.detected;
  }
  for (const auto& [name, n] : r.resolved_by) resolved_by[name] += n;
}

void release_categories(ReplicaResult& r) {
  std::vector<CategoryStats>().swap(r.categories);
  ResolvedBy().swap(r.resolved_by);
}

namespace {

// The result's scalar fields, in the order encode writes them and decode reads them.
constexpr std::int64_t ReplicaResult::*kCounts[] = {
    &ReplicaResult::evictions_true,
    &ReplicaResult::evictions_false,
    &ReplicaResult::evictions_false_positive,
    &ReplicaResult::false_failures,
    &ReplicaResult::health_check_drains,
    &ReplicaResult::repairs,
    &ReplicaResult::retired,
    &ReplicaResult::runs_ended,
    &ReplicaResult::incident_count,
    &ReplicaResult::faults_injected,
    &ReplicaResult::checkpoints,
    &ReplicaResult::events,
    &ReplicaResult::flow_batches_real,
    &ReplicaResult::flow_batches_cached,
    &ReplicaResult::steps,
    &ReplicaResult::standby_exhaustions,
    &ReplicaResult::remote_fallbacks,
    &ReplicaResult::warnings,
    &ReplicaResult::warnings_false,
    &ReplicaResult::migrations,
    &ReplicaResult::migrations_needless,
    &ReplicaResult::machines_beyond_fleet,
    &ReplicaResult::machines_used,
    &ReplicaResult::preemptions,
};
constexpr double ReplicaResult::*kReals[] = {
    &ReplicaResult::ettr,
    &ReplicaResult::elapsed_s,
    &ReplicaResult::exposure_s,
    &ReplicaResult::cpu_s,
    &ReplicaResult::standby_machine_s,  // the standby pool's machine-time (sim/costs.h)
};
constexpr bool ReplicaResult::*kFlags[] = {
    &ReplicaResult::finished,
    &ReplicaResult::depleted,
};

// The wire of encode/decode: each value's bytes as the machine holds them (both ends are
// one build on one machine, or a sweep store that build wrote), a vector or a string
// behind its length. Reading checks every length against what is left: a truncated or
// foreign message is an error, never a read past its end.
class Out {
 public:
  template <class T>
  void put(const T& x) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const std::uint8_t*>(&x);
    bytes_.insert(bytes_.end(), p, p + sizeof x);
  }
  template <class T>
  void put_all(const std::vector<T>& xs) {
    put<std::uint64_t>(xs.size());
    if constexpr (std::is_same_v<T, std::string>) {
      for (const std::string& x : xs) {
        put<std::uint64_t>(x.size());
        bytes_.insert(bytes_.end(), x.begin(), x.end());
      }
    } else {
      const auto* p = reinterpret_cast<const std::uint8_t*>(xs.data());
      bytes_.insert(bytes_.end(), p, p + xs.size() * sizeof(T));
    }
  }
  std::vector<std::uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<std::uint8_t> bytes_;
};

class In {
 public:
  explicit In(const std::vector<std::uint8_t>& bytes)
      : at_(bytes.data()), end_(bytes.data() + bytes.size()) {}
  template <class T>
  void get(T& x) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::memcpy(&x, take(sizeof x), sizeof x);
  }
  template <class T>
  void get_all(std::vector<T>& xs) {
    std::uint64_t n = 0;
    get(n);
    if constexpr (std::is_same_v<T, std::string>) {
      check(n, sizeof(std::uint64_t));
      xs.resize(n);
      for (std::string& x : xs) {
        std::uint64_t len = 0;
        get(len);
        const std::uint8_t* p = take(len);
        x.assign(reinterpret_cast<const char*>(p), len);
      }
    } else {
      check(n, sizeof(T));
      xs.resize(n);
      std::memcpy(xs.data(), take(n * sizeof(T)), n * sizeof(T));
    }
  }
  // `n` records of at least `least` bytes each can follow.
  void check(std::uint64_t n, std::size_t least) const {
    if (n > left() / least) fail();
  }
  void finish() const {
    if (at_ != end_) fail();
  }
  [[noreturn]] static void fail() {
    throw std::runtime_error("replica result: truncated or not written by this build");
  }

 private:
  std::size_t left() const { return static_cast<std::size_t>(end_ - at_); }
  const std::uint8_t* take(std::size_t n) {
    if (n > left()) fail();
    const std::uint8_t* p = at_;
    at_ += n;
    return p;
  }
  const std::uint8_t* at_;
  const std::uint8_t* end_;
};

// One field list for both directions: `io` is an Out (put) or an In (get), so the two
// cannot disagree on the order. Structs go field by field (no padding on the wire).
template <class Io, class R>
void fields(Io& io, R& r) {
  constexpr bool out = std::is_same_v<Io, Out>;
  auto one = [&](auto& x) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(x)>, bool>) {
      std::uint8_t b = x;
      if constexpr (out) {
        io.put(b);
      } else {
        io.get(b);
        x = b != 0;
      }
    } else if constexpr (out) {
      io.put(x);
    } else {
      io.get(x);
    }
  };
  auto all = [&](auto& xs) {
    if constexpr (out)
      io.put_all(xs);
    else
      io.get_all(xs);
  };
  // A mechanism's name (interned as it is read).
  auto name = [&](auto& m) {
    std::vector<std::string> s{std::string(m.name())};
    all(s);
    if constexpr (!out) {
      if (s.size() != 1) io.fail();
      m = Mechanism::named(s[0]);
    }
  };
  // A count of records that follow, each at least `least` bytes long.
  auto count = [&](auto& xs, std::size_t least) {
    std::uint64_t n = xs.size();
    one(n);
    if constexpr (!out) {
      io.check(n, least);
      xs.resize(n);
    }
  };
  one(r.replica);
  for (const auto f : kCounts) one(r.*f);
  for (const auto f : kReals) one(r.*f);
  for (const auto f : kFlags) one(r.*f);
  one(r.max_fruitless_rounds);
  for (const auto& k : kBuckets) one(r.breakdown.*k.field);
  auto& a = r.attributed;
  for (auto* x : {&a.init, &a.inplace_init, &a.requeue, &a.reschedule, &a.standby_wake, &a.on_call,
                  &a.replay, &a.mfu_checkpoint})
    one(*x);
  for (auto& x : a.probe) one(x);
  count(r.categories, 7 * 8);
  for (auto& c : r.categories) {
    one(c.incidents);
    one(c.injected);
    one(c.resolution_sum_s);
    one(c.resolution_max_s);
    one(c.detection_sum_s);
    one(c.detected);
    one(c.recurred);
    for (auto& o : c.outcomes) one(o);
  }
  one(r.dominant.category);
  one(r.dominant.at_s);
  one(r.dominant.resolution_s);
  count(r.timeline, 4 * 8);
  for (auto& p : r.timeline) {
    one(p.t_h);
    one(p.cumulative);
    one(p.window_1h);
    one(p.waiting_h);
  }
  count(r.incidents, 3 * 8 + 4 + 2 * 8 + 3 * 8);
  for (auto& i : r.incidents) {
    one(i.at_s);
    one(i.category);
    one(i.detected_s);
    one(i.resolved_s);
    name(i.resolution);
    all(i.slots);
    all(i.machines);
    all(i.evicted);
  }
  // resolved_by's names, then their counts.
  std::vector<std::string> names;
  std::vector<std::int64_t> counts;
  for (const auto& [k, n] : r.resolved_by) names.push_back(k), counts.push_back(n);
  all(names);
  all(counts);
  if constexpr (!out) {
    if (names.size() != counts.size()) io.fail();
    for (std::size_t k = 0; k < names.size(); ++k) r.resolved_by[names[k]] = counts[k];
  }
  all(r.decisions);
}

}  // namespace

std::vector<std::uint8_t> encode(const ReplicaResult& r) {
  Out out;
  fields(out, r);
  return out.take();
}

ReplicaResult decode(const std::vector<std::uint8_t>& bytes) {
  In in(bytes);
  ReplicaResult r;
  fields(in, r);
  in.finish();
  return r;
}

Summary summarize(const std::vector<double>& xs) {
  Summary s;
  if (xs.empty()) return s;
  double sum = 0;
  for (double x : xs) sum += x;
  s.mean = sum / xs.size();
  double ss = 0;
  for (double x : xs) ss += (x - s.mean) * (x - s.mean);
  s.stddev = xs.size() > 1 ? std::sqrt(ss / (xs.size() - 1)) : 0;
  const double half =
      xs.size() > 1 ? traces::student_t95(xs.size() - 1) * s.stddev / std::sqrt(xs.size()) : 0;
  s.lo = s.mean - half;
  s.hi = s.mean + half;
  s.min = *std::min_element(xs.begin(), xs.end());
  s.max = *std::max_element(xs.begin(), xs.end());
  return s;
}

double quantile_type7(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return std::nan("");
  const double h = (static_cast<double>(sorted.size()) - 1) * q;
  const auto lo = static_cast<std::size_t>(h);
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  if (!std::isfinite(sorted[lo]) || !std::isfinite(sorted[hi]))
    return std::numeric_limits<double>::infinity();
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

namespace {

// The streams of the bootstrap: one per statistic, apart from every simulation stream.
constexpr std::uint64_t kBootstrapQuantiles = 0xB0075742A9ull;
constexpr std::uint64_t kBootstrapMean = 0xB0075742AAull;

// The 95% percentile interval of the statistics `stats` (sorted here).
Interval percentile_ci95(std::vector<double>& stats) {
  std::sort(stats.begin(), stats.end());
  return {quantile_type7(stats, 0.025), quantile_type7(stats, 0.975)};
}

}  // namespace

std::vector<Interval> bootstrap_quantile_ci95(const std::vector<double>& sorted,
                                              const std::vector<double>& qs, int resamples,
                                              std::uint64_t seed) {
  const std::size_t n = sorted.size();
  if (n == 0 || resamples <= 0)
    return std::vector<Interval>(qs.size(), Interval{std::nan(""), std::nan("")});
  // A resample is its counts per position of `sorted`: its k-th smallest value is the
  // first position whose running count exceeds k, so no resample is sorted.
  std::vector<std::pair<std::size_t, std::size_t>> ranks;  // (rank, index into want)
  std::vector<double> frac(qs.size());
  for (std::size_t j = 0; j < qs.size(); ++j) {
    const double h = (static_cast<double>(n) - 1) * qs[j];
    const auto lo = static_cast<std::size_t>(h);
    frac[j] = h - static_cast<double>(lo);
    ranks.emplace_back(lo, 2 * j);
    ranks.emplace_back(std::min(lo + 1, n - 1), 2 * j + 1);
  }
  std::sort(ranks.begin(), ranks.end());
  Rng rng({seed, kBootstrapQuantiles});
  std::vector<std::uint32_t> count(n);
  std::vector<double> at(2 * qs.size());
  std::vector<std::vector<double>> stats(qs.size());
  for (auto& v : stats) v.reserve(static_cast<std::size_t>(resamples));
  for (int b = 0; b < resamples; ++b) {
    std::fill(count.begin(), count.end(), 0);
    for (std::size_t i = 0; i < n; ++i) ++count[rng.below(n)];
    std::size_t pos = 0, seen = count[0];  // values of the resample up to position pos
    for (const auto& [rank, slot] : ranks) {
      while (seen <= rank) seen += count[++pos];
      at[slot] = sorted[pos];
    }
    for (std::size_t j = 0; j < qs.size(); ++j) {
      const double a = at[2 * j], c = at[2 * j + 1];
      stats[j].push_back(std::isfinite(a) && std::isfinite(c)
                             ? a + frac[j] * (c - a)
                             : std::numeric_limits<double>::infinity());
    }
  }
  std::vector<Interval> out;
  for (auto& v : stats) out.push_back(percentile_ci95(v));
  return out;
}

Interval bootstrap_mean_ci95(const std::vector<double>& xs, int resamples, std::uint64_t seed) {
  const std::size_t n = xs.size();
  if (n == 0 || resamples <= 0) return {std::nan(""), std::nan("")};
  Rng rng({seed, kBootstrapMean});
  std::vector<double> stats;
  stats.reserve(static_cast<std::size_t>(resamples));
  for (int b = 0; b < resamples; ++b) {
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += xs[rng.below(n)];
    stats.push_back(sum / static_cast<double>(n));
  }
  return percentile_ci95(stats);
}

}  // namespace faultline::sim
