/// \file mxfp8.cpp
/// \brief MXFP8 reference quantizer (TE_FORMATS.md §2): E4M3/E5M2 data, one E8M0 scale per 32 elements,
///        rowwise (1x32), columnwise (32x1) and 2D (32x32) blocks, scale rules rceil (TE/cuBLAS),
///        ocp_floor (OCP MX v1.0), and torchao's to_mx (rceil, floor, ceil, even) under profile torchao. Partial blocks reduce over their valid elements only.
#include "internal.hpp"
#include "qtc/profile.hpp"
#include "qtc/peer_codec.hpp"
#include "qtc/torchao_codec.hpp"

namespace qtc::ref::detail {

namespace {

struct MxRule {
  const Recipe& r;
  DType input = DType::kF32;  ///< jax: the dtype its scale and data scaling are computed in
  const ProfileRules& pr = profile_rules(r.profile);
  const Mxfp8Options& o = r.mxfp8();
  /// NaN propagates into the block amax where a NaN block gets a NaN scale (OCP, torchao); TE ignores it.
  bool propagate() const { return pr.mx_nonfinite == MxNonFinite::kNaN; }

  /// The E8M0 scale byte of a block with absolute maximum `bamax`.
  uint8_t scale(float bamax) const {
    if (pr.mx_order == MxOrder::kTorchAO) return torchao::mx_scale(bamax, o.scale_rule, o.fp8);
    if (pr.mx_order == MxOrder::kModelOpt) return peer::modelopt::mx_scale(bamax);
    if (pr.mx_order == MxOrder::kJax) return peer::jax::mx_scale(bamax, input, o.fp8);
    if (pr.mx_order == MxOrder::kTorchCast || pr.mx_order == MxOrder::kMlDtypesCast)
      return peer::cast::mx_scale(bamax, o.fp8, pr.mx_order == MxOrder::kTorchCast);
    QTC_CHECK(o.scale_rule == MxScaleRule::kRceil || o.scale_rule == MxScaleRule::kOcpFloor, "MXFP8 scale_rule ",
              mx_scale_rule_name(o.scale_rule), " is defined by torchao's to_mx only (profile torchao)");
    // TE rceil: float_to_e8m0(bamax * RN(1/max)); OCP floor: 2^(floor(log2(amax)) - emax_elem), exact from the
    // bits (te with the floor rule saturates Inf to 0xFE as TE's E8M0 conversion does); OCP: NaN scale for a
    // non-finite block.
    return mx_block_scale(bamax, o.fp8 == Fp8Type::kE5M2, o.scale_rule == MxScaleRule::kOcpFloor,
                          pr.mx_nonfinite == MxNonFinite::kNaN);
  }
  uint8_t code(float x, uint8_t e) const {
    if (pr.mx_order == MxOrder::kTorchAO) return torchao::mx_code(x, e, o.scale_rule, o.fp8);
    if (pr.mx_order == MxOrder::kModelOpt) return peer::modelopt::mx_code(x, e);
    if (pr.mx_order == MxOrder::kJax) return peer::jax::mx_code(x, e, input, o.fp8);
    if (pr.mx_order == MxOrder::kTorchCast || pr.mx_order == MxOrder::kMlDtypesCast)
      return peer::cast::mx_code(x, e, o.fp8, pr.mx_order == MxOrder::kTorchCast);
    return encode_fp8(x * e8m0_reciprocal(e), o.fp8);
  }
};

}  // namespace

QuantizedTensor quantize_mxfp8(const MatrixView& x, const Recipe& r) {
  const MxOrder order = profile_rules(r.profile).mx_order;
  if (order == MxOrder::kCompressedTensors || order == MxOrder::kCompressedTensorsTriton) return quantize_mx_ct(x, r);
  const int64_t M = x.rows, K = x.cols;
  const int64_t kbs = ceil_div(K, 32);
  QuantizedTensor q;
  start_output(q, r, x.dtype, M, K);  // planes as describe_plane says
  const MxRule rule{r, x.dtype};
  const bool tile_2d = rule.o.tile_2d;
  const bool prop = rule.propagate();
  // jax (XLA CPU): a float32 tensor of >= 4096 elements has its block maxima reduced in vector lanes (NaN rule of
  // peer::jax::lane_block_amax); quantize(x.T) for the columnwise plane has as many elements.
  const bool lanes = rule.pr.mx_order == MxOrder::kJax && x.dtype == DType::kF32 && !tile_2d &&
                     M * K >= peer::jax::kJaxLaneReduceMinElements;
  for_each_row_strip(x, 32, [&](int64_t g, int64_t i0, int64_t n, const float* s) {
    std::vector<float> col_amax(static_cast<size_t>(K));
    std::vector<uint8_t> tile_scale(static_cast<size_t>(kbs));
    if (tile_2d) {
      for (int64_t c = 0; c < kbs; ++c) {
        float a = 0.0f;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = c * 32; j < std::min(K, c * 32 + 32); ++j) a = amax_step(a, s[i * K + j], prop);
        tile_scale[static_cast<size_t>(c)] = rule.scale(a);
      }
    }
    if (r.rowwise) {
      Plane& p = *q.rowwise;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < kbs; ++c) {
          const int64_t j0 = c * 32, j1 = std::min(K, j0 + 32);
          uint8_t sc;
          if (tile_2d) {
            sc = tile_scale[static_cast<size_t>(c)];
          } else {
            float a = 0.0f;
            if (lanes && j1 - j0 == 32) {
              float v[32];
              for (int64_t j = j0; j < j1; ++j) v[j - j0] = std::fabs(s[i * K + j]);
              a = peer::jax::lane_block_amax(v, 32);
            } else {
              for (int64_t j = j0; j < j1; ++j) a = amax_step(a, s[i * K + j], prop);
            }
            sc = rule.scale(a);
          }
          p.scale.bytes[static_cast<size_t>((i0 + i) * kbs + c)] = sc;
          for (int64_t j = j0; j < j1; ++j) p.data[static_cast<size_t>((i0 + i) * K + j)] = rule.code(s[i * K + j], sc);
        }
    }
    if (r.columnwise) {
      Plane& p = *q.columnwise;
      if (!tile_2d) {
        std::fill(col_amax.begin(), col_amax.end(), 0.0f);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < K; ++j) col_amax[static_cast<size_t>(j)] = amax_step(col_amax[static_cast<size_t>(j)], s[i * K + j], prop);
        if (lanes && n == 32)
          for (int64_t j = 0; j < K; ++j) {
            float v[32];
            for (int64_t i = 0; i < 32; ++i) v[i] = std::fabs(s[i * K + j]);
            col_amax[static_cast<size_t>(j)] = peer::jax::lane_block_amax(v, 32);
          }
      }
      for (int64_t j = 0; j < K; ++j) {
        const uint8_t sc = tile_2d ? tile_scale[static_cast<size_t>(j / 32)] : rule.scale(col_amax[static_cast<size_t>(j)]);
        p.scale.bytes[static_cast<size_t>(g * K + j)] = sc;
      }
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < K; ++j)
          p.data[static_cast<size_t>((i0 + i) * K + j)] = rule.code(s[i * K + j], p.scale.bytes[static_cast<size_t>(g * K + j)]);
    }
  });
  return q;
}

}  // namespace qtc::ref::detail
