// Deterministic random streams (xoshiro256**), identical on every platform.
//
// The standard library's distributions are implementation-defined, so faultline draws
// its own variates: the same seed gives the same numbers with any compiler, which the
// byte-identical-results promise depends on. Streams are derived from (seed, keys...)
// with SplitMix64 so every replica and every policy gets an independent stream.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>

namespace faultline {

class Rng {
 public:
  // Seeds from a list of keys (e.g. scenario seed, replica index, stream id).
  explicit Rng(std::initializer_list<std::uint64_t> keys) : Rng(Prefix{}, keys) {}
  explicit Rng(std::uint64_t seed = 1) : Rng({seed}) {}

  // The keys absorbed so far: Rng(prefix({a, b}), {c}) is the stream of Rng({a, b, c}).
  // For draws in a loop whose leading keys stay the same (one stream per machine).
  struct Prefix {
    std::uint64_t h = 0x9E3779B97F4A7C15ull;
  };
  static Prefix prefix(std::initializer_list<std::uint64_t> keys) {
    Prefix p;
    for (std::uint64_t k : keys) p.h = absorb(p.h, k);
    return p;
  }
  Rng(Prefix p, std::initializer_list<std::uint64_t> keys) {
    for (std::uint64_t k : keys) p.h = absorb(p.h, k);
    // Each state word from the next SplitMix64 output (Vigna's seeding): words seeded
    // alike would make a stream's first two draws equal.
    for (auto& s : s_) s = splitmix(p.h += 0x9E3779B97F4A7C15ull);
  }

  std::uint64_t next_u64() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1), 53 bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  // Uniform in (0, 1], safe for logarithms.
  double uniform_pos() { return 1.0 - uniform(); }
  // Uniform integer in [0, n); requires n > 0. Lemire's method without bias.
  std::uint64_t below(std::uint64_t n) {
    __uint128_t m = static_cast<__uint128_t>(next_u64()) * n;
    auto low = static_cast<std::uint64_t>(m);
    if (low < n) {
      const std::uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<__uint128_t>(next_u64()) * n;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }
  // Exponential with the given mean.
  double exponential(double mean) { return -mean * std::log(uniform_pos()); }
  // Weibull with shape k and scale lambda.
  double weibull(double shape, double scale) {
    return scale * std::pow(-std::log(uniform_pos()), 1.0 / shape);
  }
  // Standard normal (Box-Muller, one variate per call for simplicity of state).
  double normal() {
    const double u1 = uniform_pos();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  double lognormal(double mu, double sigma) { return std::exp(mu + sigma * normal()); }
  bool bernoulli(double p) { return uniform() < p; }
  // Failures before the first success in Bernoulli(p) trials, p in (0, 1]: skipping this
  // many trials at a time gives the successes among n trials in O(successes) draws, with
  // the distribution of one bernoulli(p) per trial.
  std::uint64_t geometric(double p) {
    if (p >= 1) return 0;
    const double g = std::floor(std::log(uniform_pos()) / std::log1p(-p));
    return g >= 1.8e19 ? ~std::uint64_t{0} : static_cast<std::uint64_t>(g);
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static std::uint64_t absorb(std::uint64_t h, std::uint64_t k) {
    return splitmix(h ^ splitmix(k + 0x632BE59BD9B4E019ull));
  }
  static std::uint64_t splitmix(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }
  std::uint64_t s_[4];
};

}  // namespace faultline
