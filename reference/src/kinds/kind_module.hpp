/// \file kind_module.hpp
/// \brief Internal: a recipe kind's module at the reference layer (its KindInfo of qtc/kind.hpp plus its scalar and
///        vectorized quantizers), the metadata reader the modules parse their options with, and the lookup.
///        One module per kind (kinds/<kind>_kind.cpp), registered in kinds/kind_table.cpp.
#pragma once
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <utility>

#include "qtc/codec.hpp"
#include "qtc/error.hpp"
#include "qtc/kind.hpp"
#include "qtc/path_rules.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantized.hpp"
#include "qtc/recipe_policy.hpp"
#include "qtc/tensor.hpp"

namespace qtc {

/// Typed access to VECTORS.md metadata: every accessor throws qtc::Error naming the key and the values it accepts.
struct MetadataReader {
  const std::map<std::string, std::string>& md;
  std::string get(const std::string& key, const std::string& dflt) const {
    auto it = md.find(key);
    return it == md.end() ? dflt : it->second;
  }
  bool has(const std::string& key) const { return md.count(key) != 0; }
  bool flag(const std::string& key, bool dflt) const;
  template <typename T>
  T choice(const std::string& key, const std::string& dflt, std::initializer_list<std::pair<const char*, T>> options) const {
    const std::string v = get(key, dflt);
    std::string allowed;
    for (const auto& [name, val] : options) {
      if (v == name) return val;
      allowed += allowed.empty() ? "" : ", ";
      allowed += name;
    }
    QTC_FAIL("metadata key '", key, "': unknown value '", v, "' (expected one of: ", allowed, ")");
  }
  float number(const std::string& key, float dflt) const;
  uint64_t integer(const std::string& key, uint64_t dflt) const;
  /// fp8_dtype: e4m3 (the default) or e5m2.
  Fp8Type fp8_type() const { return choice<Fp8Type>("fp8_dtype", "e4m3", {{"e4m3", Fp8Type::kE4M3}, {"e5m2", Fp8Type::kE5M2}}); }
};

}  // namespace qtc

namespace qtc::ref::detail {

/// What a kind's dequantizer reads: the tensor, the plane and its description.
struct DequantInput {
  const QuantizedTensor& q;
  const Plane& p;
  const PlaneSpec& spec;
  PlaneKind pk;
};
/// How ref::dequantize decodes a plane: `rows` plane rows, row a decoded by decode(a, v) into the floats of x's row a
/// (K of them; transposed == false) or of x's column a (M of them; transposed == true). The decoder may refer to the
/// DequantInput's objects, which outlive it.
struct PlaneRows {
  int64_t rows = 0;
  bool transposed = false;
  std::function<void(int64_t a, float* v)> decode;
};

/// How a kind names the profile rule a code path does not implement (rules/path_rules.cpp).
struct PathRefusal {
  const ProfileRules& pr;
  const PathRules& path;
  /// "rule RULE VALUE (profile 'P') is not implemented by PATH (IMPLEMENTED)".
  std::string operator()(std::string_view rule, std::string_view value, std::string_view implemented) const;
};
/// An order's name: the text before the ':' of nvfp4_order_text / mx_order_text.
std::string order_name(std::string_view text);

/// The rules the MX kinds read (MXFP8 and MXFP4 share mx_order; `rule` names the kind's): rules/path_rules.cpp.
std::string mx_unimplemented_rule(const char* rule, const PathRefusal& refuse, bool mxfp4);
/// The rules FP8 block (`tensor` false) and FP8 tensor read: rules/path_rules.cpp.
std::string fp8_unimplemented_rule(bool tensor, const PathRefusal& refuse);

/// A plane read as a GEMM operand: stored [R, C] (mx_col: MXFP8's columnwise plane, stored in x's orientation), its
/// scales in the compact layout.
struct OperandPlane {
  const Plane& p;
  int64_t R = 0, C = 0;
  bool mx_col = false;
  Fp8Type fp8 = Fp8Type::kE4M3;  ///< FP8 data's element type
  bool two_d = false;
  float scale_inv = 1.0f;  ///< the tensor's scale_inv (FP8 tensor)
};
/// Helpers of the operand readers.
namespace operand {
inline float f32_at(const ScaleMatrix& s, int64_t r, int64_t c) {
  float v;
  std::memcpy(&v, s.bytes.data() + static_cast<size_t>(r * s.cols + c) * 4, 4);
  return v;
}
inline double fp8_value(uint8_t code, Fp8Type t) {
  return t == Fp8Type::kE4M3 ? static_cast<double>(decode_e4m3(code)) : static_cast<double>(decode_e5m2(code));
}
/// Element (r, c) of a compact block-scale matrix for a plane stored [R, C], block (bh x bw); the compact
/// matrix may repeat a 2-D block's scale on every row (NVFP4 16x16, TE's 1-D storage) or hold one row per
/// block row (FP8 128x128).
inline int64_t scale_row(const ScaleMatrix& s, int64_t r, int64_t R, int bh) { return s.rows == R ? r : r / bh; }
/// E2M1 code (r, c) of a plane stored two per byte.
inline uint8_t e2m1_code(const Plane& p, int64_t r, int64_t c) {
  const uint8_t byte = p.data[static_cast<size_t>(r * p.data_cols + c / 2)];
  return (c & 1) ? (byte >> 4) : (byte & 0xF);
}
}  // namespace operand

/// One recipe rule (rules/recipe.cpp checks them in order): violated(r, pr) says whether r breaks it; detail
/// (optional) adds what exactly.
struct RuleCheck {
  RecipeRule rule;
  bool (*violated)(const Recipe& r, const ProfileRules& pr);
  std::string (*detail)(const Recipe& r, const ProfileRules& pr) = nullptr;
};
/// The rules FP8 block and FP8 tensor share (kinds/fp8.cpp): fp8-profile-pow2, fp8-eps.
extern const RuleCheck kFp8ProfilePow2Rule;
extern const RuleCheck kFp8EpsRule;

/// A kind's module: what the rest of the reference asks of a kind. The quantizers are the scalar oracle and the
/// vectorized copy (simd/; nullptr where the kind has none: the scalar one runs); the *_amax ones take the global
/// amaxes (rowwise, columnwise) from the caller and are nullptr for a kind without a global amax.
struct KindModule {
  KindInfo info;
  /// Whether profile `pr` defines the kind (rule profile-defines-kind), and the kind's own recipe rules, in the order
  /// Recipe::validate checks them after the rules every recipe keeps (rules/recipe.cpp).
  bool (*defined_by)(const ProfileRules& pr);
  std::span<const RuleCheck* const> rules;
  QuantizedTensor (*quantize)(const MatrixView& x, const Recipe& r);
  QuantizedTensor (*quantize_simd)(const MatrixView& x, const Recipe& r);
  QuantizedTensor (*quantize_amax)(const MatrixView& x, const Recipe& r, const float* amax);
  QuantizedTensor (*quantize_amax_simd)(const MatrixView& x, const Recipe& r, const float* amax);
  /// The scalar dequantizer's plane decoding, and the vectorized dequantizer (simd/dequant_simd.cpp; nullptr where the
  /// kind has none: the scalar one decodes every plane).
  PlaneRows (*plane_rows)(const DequantInput& in);
  HostMatrix (*dequantize_simd)(const QuantizedTensor& q, PlaneKind pk, DType out);
  /// The first option of `r` the vectorized quantizer and dequantizer do not implement (empty: none; the profile's
  /// rules are checked apart, by unimplemented_rule).
  std::string (*simd_refusal)(const Recipe& r);
  /// The kind's part of describe_plane (rules/recipe_policy.cpp): scale type, compact and padded scale shapes,
  /// blocks, scale steps, amaxes and the layouts the plane takes. The data geometry is filled in before.
  void (*plane_geometry)(const RecipeOptions& o, PlaneKind pk, int64_t M, int64_t K, PlaneSpec& s);
  /// The first profile rule that the kind reads and `refuse.path` does not implement, as refuse(...) words it;
  /// empty when the path implements them all (path_rules.hpp, rules/path_rules.cpp).
  std::string (*unimplemented_rule)(const Recipe& r, const PathRefusal& refuse);
  /// Shard constraints (sharding/): why the columnwise plane of `r` cannot be derived from the rowwise one as a
  /// transpose (empty: it can), and the FSDP2 all-gather's checks of a shard of shard_M rows (throw naming the rule).
  std::string (*columnwise_not_derivable)(const Recipe& r);
  void (*check_fsdp)(const Recipe& r, int64_t shard_M, bool columnwise_usage);
  /// GEMM operands (gemm/gemm_operand.cpp): the exact value of element (r, c) of a plane as stored, times its block
  /// scale (the per-tensor scale of NVFP4 is applied by the GEMM's alpha), and the kind's rules for an operand pair
  /// beyond the shared ones (throw naming what is refused; TE_FORMATS.md §7.1-§7.4).
  double (*operand_value)(const OperandPlane& op, int64_t r, int64_t c);
  void (*check_gemm_pair)(const Recipe& a, const Recipe& b, DType out);
};

/// Shape arithmetic of the plane geometries (untrusted shapes: nothing wraps).
namespace geom {
inline int64_t cdiv(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }  // a >= 0, b > 0; no overflow
/// a rounded up to a multiple of b; saturates at INT64_MAX where that multiple does not fit (the padded shape is
/// computed for every plane, and a size check downstream refuses it).
inline int64_t roundup(int64_t a, int64_t b) {
  const int64_t n = cdiv(a, b);
  return n > std::numeric_limits<int64_t>::max() / b ? std::numeric_limits<int64_t>::max() : n * b;
}
constexpr uint32_t bit(Layout l) { return 1u << static_cast<unsigned>(l); }
inline constexpr uint32_t kTeLayouts = bit(Layout::kCompact) | bit(Layout::kPadded);
inline constexpr uint32_t kTiledLayouts = kTeLayouts | bit(Layout::kSwizzled) | bit(Layout::kSwizzled8x4);
/// The combined layouts (layout.hpp layout_is_combined) of a plane whose data rows are groups of 32 E2M1 codes with
/// one E8M0 byte each (MXFP4): PlaneSpec::combined_layouts.
inline constexpr uint32_t kMx4RowLayouts = bit(Layout::kFbgemmMx4);
}  // namespace geom

/// The FP8 data decoding of FP8 block and FP8 tensor (fp8_block_kind.cpp): element times its block's (or the
/// tensor's) scale_inv.
PlaneRows fp8_plane_rows(const DequantInput& in);

/// The module of kind `k` (kinds/kind_table.cpp).
const KindModule& kind_module(RecipeKind k);

// The modules, one per kind file (kinds/<kind>_kind.cpp).
extern const KindModule kNvfp4Module;
extern const KindModule kMxfp8Module;
extern const KindModule kFp8BlockModule;
extern const KindModule kFp8TensorModule;
extern const KindModule kMxfp4Module;

}  // namespace qtc::ref::detail
