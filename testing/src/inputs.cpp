/// \file inputs.cpp
/// \brief The input families and the seeded generator of test_support.hpp (moved from the GPU quantize suite
///        unchanged, so the values each (family, dtype, shape, seed) yields are what they were).
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>

#include "qtc/error.hpp"
#include "qtc/test_support.hpp"

namespace qtc::testing {

namespace {

/// Runs fn(begin, end) over [0, n) on all cores.
void parallel_chunks(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t t = std::min<int64_t>(hw, std::max<int64_t>(1, n / 65536));
  if (t <= 1) {
    fn(0, n);
    return;
  }
  std::vector<std::thread> pool;
  const int64_t chunk = (n + t - 1) / t;
  for (int64_t k = 0; k < t; ++k) {
    const int64_t b = k * chunk, e = std::min(n, b + chunk);
    if (b < e) pool.emplace_back(fn, b, e);
  }
  for (auto& th : pool) th.join();
}

/// Smallest positive normal and largest finite value of an input type.
double type_tiny(DType t) { return t == DType::kF16 ? 0x1p-14 : 0x1p-126; }
double type_max(DType t) { return t == DType::kF16 ? 65504.0 : (t == DType::kBF16 ? 0x1.FEp127 : 0x1.FFFFFEp127); }

/// Writes value v (rounded RN-even) at flat index i of a matrix of type t; `ulp` adds that many units in
/// the last place of the stored magnitude (ties and their neighbours).
void put(HostMatrix& m, int64_t i, double v, int ulp = 0) {
  uint32_t bits = float_to_dtype_bits(static_cast<float>(v), m.dtype);
  if (ulp != 0 && v != 0.0) bits = static_cast<uint32_t>(static_cast<int64_t>(bits) + ulp);
  if (m.dtype == DType::kF32)
    std::memcpy(m.bytes.data() + 4 * i, &bits, 4);
  else {
    const uint16_t b = static_cast<uint16_t>(bits);
    std::memcpy(m.bytes.data() + 2 * i, &b, 2);
  }
}

}  // namespace

HostMatrix make_input(Family kind, DType t, int64_t M, int64_t K, uint64_t seed) { return make_rows(kind, t, 0, M, K, seed, M); }

HostMatrix make_rows(Family kind, DType t, int64_t r0, int64_t r1, int64_t K, uint64_t seed, int64_t rows_total) {
  const int64_t M = rows_total < 0 ? r1 : rows_total;
  QTC_CHECK(0 <= r0 && r0 <= r1 && r1 <= M && K >= 0, "make_rows: rows [", r0, ", ", r1, ") of a [", M, ", ", K, "] matrix");
  QTC_CHECK(t == DType::kF32 || t == DType::kBF16 || t == DType::kF16, "make_rows: inputs are F32, BF16 or F16");
  HostMatrix x(t, r1 - r0, K);
  const double tiny = type_tiny(t), big = type_max(t);
  parallel_chunks((r1 - r0) * K, [&](int64_t b, int64_t e) {
    for (int64_t li = b; li < e; ++li) {
      const int64_t i = r0 * K + li;  // the element's index in the whole matrix: its values do not depend on r0
      const int64_t r = i / K, c = i % K;
      const double n = normal(seed, static_cast<uint64_t>(i));
      const double u = uniform01(seed ^ 0xA5A5ull, static_cast<uint64_t>(i));
      switch (kind) {
        case Family::kNormal: put(x, li, n * 3.0); break;
        case Family::kHeavy: put(x, li, n * std::exp(4.0 * normal(seed ^ 0x77ull, static_cast<uint64_t>(i)))); break;
        case Family::kZeros: {
          // zero rows, zero columns and zero 16x16 / 32x32 / 128x128 regions; the rest normal
          const bool zero = (r % 7 == 3) || (c % 11 == 5) || ((r / 16 + c / 16) % 5 == 0) || ((r / 32) % 3 == 1 && (c / 32) % 2 == 0) ||
                            ((r / 128 + c / 128) % 3 == 2 && M > 128 && K > 128);
          put(x, li, zero ? 0.0 : n);
          break;
        }
        case Family::kTiny: {
          // subnormals of the input type and the smallest normals; a few rows of ordinary scale
          const double v = (u < 0.5 ? tiny * u * 2.0 : tiny * (1.0 + 8.0 * u)) * (n < 0 ? -1.0 : 1.0);
          put(x, li, (r % 13 == 12) ? n * 1e-3 : v);
          break;
        }
        case Family::kHuge: put(x, li, (u < 0.3 ? big : big * (0.25 + 0.5 * u)) * (n < 0 ? -1.0 : 1.0)); break;
        case Family::kTies: {
          // Rows of even index: blocks of 16 whose max is 6 * 2^b and whose other elements are the E2M1 tie
          // points t * 2^b (exact after multiplying by a power-of-two enc), +-1 ulp. One element holds the global
          // amax 2688 (S_enc = 1). Rows of odd index: E4M3 midpoints (1 + (2m+1)/16) * 2^e for power-of-two scales.
          static constexpr double kTie[] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
          const uint64_t h = mix(seed, static_cast<uint64_t>(i));
          const int b = static_cast<int>((mix(seed, static_cast<uint64_t>(r * 1000003 + c / 16)) % 9)) - 4;
          const double sgn = (h & 1) ? -1.0 : 1.0;
          if (r == 0 && c == 0) {
            put(x, li, 2688.0);
          } else if (r % 2 == 0) {
            if (c % 16 == static_cast<int64_t>(mix(seed, static_cast<uint64_t>(r * 7919 + c / 16)) % 16))
              put(x, li, sgn * 6.0 * std::ldexp(1.0, b));
            else
              put(x, li, sgn * kTie[(h >> 1) % 7] * std::ldexp(1.0, b), static_cast<int>((h >> 8) % 3) - 1);
          } else {
            const int m = static_cast<int>((h >> 1) % 8), ex = static_cast<int>((h >> 4) % 12) - 6;
            put(x, li, sgn * (1.0 + (2.0 * m + 1.0) / 16.0) * std::ldexp(1.0, ex));
          }
          break;
        }
        case Family::kBanded: {
          // uniform in [-1, 1) times 2^((r / 16) % 7 - 3): row bands of 16 with different amaxes (shards of rows differ,
          // which the amax-reduction bug needs), and 1 in 4096 elements an outlier (x37).
          auto mix64 = [](uint64_t z) {
            z += 0x9E3779B97F4A7C15ull;
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            return z ^ (z >> 31);
          };
          const uint64_t h = mix64(seed ^ mix64(static_cast<uint64_t>(i)));
          const float w = static_cast<float>(h >> 40) * 0x1p-24f * 2.0f - 1.0f;
          const float band = std::ldexp(1.0f, static_cast<int>((r / 16) % 7) - 3);
          put(x, li, w * band * ((h & 0xFFF) == 7 ? 37.0f : 1.0f));
          break;
        }
        case Family::kSpecial: {
          const uint64_t h = mix(seed ^ 0x5Bull, static_cast<uint64_t>(i)) % 64;
          double v = n;
          if (h == 0) v = std::nan("");
          else if (h == 1) v = INFINITY;
          else if (h == 2) v = -INFINITY;
          else if (h < 8) v = -0.0;
          else if (h < 10) v = 0.0;
          put(x, li, v);
          break;
        }
      }
    }
  });
  return x;
}

double uniform01(uint64_t seed, uint64_t i) { return (static_cast<double>(mix(seed, i) >> 11) + 0.5) * 0x1p-53; }
double normal(uint64_t seed, uint64_t i) {
  const double u1 = uniform01(seed, 2 * i), u2 = uniform01(seed, 2 * i + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

const char* family_name(Family k) {
  switch (k) {
    case Family::kNormal: return "Normal";
    case Family::kHeavy: return "Heavy";
    case Family::kZeros: return "ZeroBlocks";
    case Family::kTiny: return "Tiny";
    case Family::kHuge: return "Huge";
    case Family::kTies: return "Ties";
    case Family::kSpecial: return "NanInfNegZero";
    case Family::kBanded: return "Banded";
  }
  return "?";
}

uint64_t test_seed(uint64_t dflt) {
  const char* v = std::getenv("QTC_SEED");
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 0) : dflt;
}

std::string seed_note(uint64_t seed) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "seed 0x%016llx (QTC_SEED=0x%llx reproduces this run)", static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(seed));
  return buf;
}

}  // namespace qtc::testing
