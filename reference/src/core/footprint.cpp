/// \file footprint.cpp
/// \brief quantize_footprint(), memory_limit_bytes(), check_memory(): the sizes of a quantize from the plane
///        descriptions, with checked arithmetic (untrusted.hpp), against the memory this process may use.
#include "qtc/footprint.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "qtc/error.hpp"
#include "qtc/recipe_policy.hpp"
#include "qtc/untrusted.hpp"

namespace qtc {

namespace {

std::string shape_of(int64_t M, int64_t K) { return "[" + std::to_string(M) + ", " + std::to_string(K) + "]"; }

/// The product of sizes; 0 when any is 0 (an empty tensor holds no bytes whatever its other extents, as the
/// safetensors reader counts them), else checked.
int64_t product(std::initializer_list<int64_t> f, const std::string& what) {
  for (int64_t v : f)
    if (v == 0) return 0;
  int64_t r = 1;
  for (int64_t v : f) {
    const auto p = mul_nonneg(r, v);
    if (!p) {
      std::string s;
      for (int64_t g : f) s += (s.empty() ? "" : " x ") + std::to_string(g);
      throw Error(what + ": rule 'size-overflow': the size " + s + " does not fit a 64-bit count");
    }
    r = *p;
  }
  return r;
}

int64_t sum(int64_t a, int64_t b, const std::string& what) {
  const auto s = add_nonneg(a, b);
  if (!s) throw Error(what + ": rule 'size-overflow': the total " + std::to_string(a) + " + " + std::to_string(b) + " bytes does not fit a 64-bit count");
  return *s;
}

}  // namespace

int64_t Footprint::total() const {
  return sum(sum(input, outputs, "footprint"), dequantized, "footprint");
}

Footprint quantize_footprint(const Recipe& r, DType input, int64_t M, int64_t K, bool with_dequantized) {
  const std::string what = "recipe " + r.name() + " for x of shape " + shape_of(M, K);
  QTC_CHECK(M >= 0 && K >= 0, what, ": rule 'input-shape': negative shape");
  Footprint f;
  f.input = product({M, K, static_cast<int64_t>(dtype_size(input))}, what + ": x");
  for (std::string_view name : tensor_names()) {
    const auto t = describe_tensor(r, name, M, K);
    if (!t || !t->plane.requested) continue;
    const bool dequant = t->role == TensorRole::kDequant;
    if (dequant && !with_dequantized) continue;
    int64_t bytes = 0;
    if (std::find(t->shape.begin(), t->shape.end(), int64_t{0}) == t->shape.end()) {
      bytes = t->elem_bytes;
      for (int64_t d : t->shape) bytes = product({bytes, d}, what + ": " + std::string(name));
    }
    (dequant ? f.dequantized : f.outputs) = sum(dequant ? f.dequantized : f.outputs, bytes, what);
  }
  (void)f.total();  // the sum must fit as well
  return f;
}

uint64_t memory_limit_bytes() {
  uint64_t lim = physical_memory_bytes();
  // QTC_MEMORY_LIMIT_BYTES (decimal) lowers the bound: a shared machine, a container, the fuzz targets.
  if (const char* e = std::getenv("QTC_MEMORY_LIMIT_BYTES"); e != nullptr && *e != '\0') {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(e, &end, 10);
    if (end != nullptr && *end == '\0' && v > 0) lim = lim == 0 ? v : std::min<uint64_t>(lim, v);
  }
  for (int res : {RLIMIT_AS, RLIMIT_DATA}) {
    struct rlimit rl{};
    if (::getrlimit(res, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
      const uint64_t v = static_cast<uint64_t>(rl.rlim_cur);
      lim = lim == 0 ? v : std::min(lim, v);
    }
  }
  return lim;
}

void check_memory(int64_t bytes, int copies, const std::string& what) {
  QTC_CHECK(bytes >= 0 && copies >= 1, what, ": negative size");
  const uint64_t lim = memory_limit_bytes();
  const uint64_t b = static_cast<uint64_t>(bytes);
  const uint64_t n = static_cast<uint64_t>(copies);
  if (lim == 0) return;
  if (b > lim / n)
    throw Error(what + " needs " + bytes_text(b) + (n > 1 ? " (x" + std::to_string(n) + " while it is written)" : "") +
                " in memory, more than the " + bytes_text(lim) +
                " this process may use (rule 'memory': a resource limit, not a wrong answer)");
}

Footprint check_quantize_resources(const Recipe& r, DType input, int64_t M, int64_t K, bool with_dequantized, int copies) {
  const Footprint f = quantize_footprint(r, input, M, K, with_dequantized);
  check_memory(f.total(), copies, "recipe " + r.name() + " for x of shape " + shape_of(M, K) + ": the input and its outputs");
  return f;
}

}  // namespace qtc
