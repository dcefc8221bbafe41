#include "kernels/digest.h"

#include <bit>
#include <charconv>
#include <cstdio>

#include "kernels/patterns.h"

namespace faultline::kernels {

std::uint64_t fnv1a64(const void* data, std::size_t bytes, std::uint64_t state) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    state ^= p[i];
    state *= 0x100000001B3ull;
  }
  return state;
}

std::uint64_t digest_floats(std::span<const float> values) {
  std::uint64_t state = kFnvOffsetBasis;
  for (float v : values) {
    std::uint32_t bits = std::bit_cast<std::uint32_t>(v);
    if (bits == 0x80000000u) bits = 0;
    state = fnv1a64(&bits, sizeof bits, state);
  }
  return state;
}

std::vector<float> digest_input(std::uint64_t seed, int size, int which) {
  const std::uint64_t key = stream_key(seed, 0xD16E57000ull + static_cast<std::uint64_t>(which));
  const std::size_t count = static_cast<std::size_t>(size) * static_cast<std::size_t>(size);
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    out[i] = static_cast<float>(small_integer_value(key, i));
  }
  return out;
}

std::uint64_t reference_digest(std::uint64_t seed, int size) {
  const auto a_f = digest_input(seed, size, 1);
  const auto b_f = digest_input(seed, size, 2);
  const std::size_t n = static_cast<std::size_t>(size);
  std::vector<std::int32_t> a(a_f.begin(), a_f.end());
  std::vector<std::int32_t> c(n * n, 0);
  for (std::size_t j = 0; j < n; ++j) {
    std::int32_t* cj = c.data() + j * n;
    for (std::size_t l = 0; l < n; ++l) {
      const std::int32_t blj = static_cast<std::int32_t>(b_f[j * n + l]);
      if (blj == 0) continue;
      const std::int32_t* al = a.data() + l * n;
      for (std::size_t i = 0; i < n; ++i) cj[i] += al[i] * blj;
    }
  }
  std::vector<float> cf(c.begin(), c.end());
  return digest_floats(cf);
}

std::string digest_hex(std::uint64_t digest) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(digest));
  return buf;
}

std::optional<std::uint64_t> parse_digest_hex(std::string_view text) {
  if (text.starts_with("0x") || text.starts_with("0X")) text.remove_prefix(2);
  if (text.empty() || text.size() > 16) return std::nullopt;
  std::uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace faultline::kernels
