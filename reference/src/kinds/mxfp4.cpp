/// \file mxfp4.cpp
/// \brief MXFP4 reference quantizer (OCP MX v1.0 FP4; VECTORS.md `mxfp4`): E2M1 data two per byte (element 2j in
///        the low nibble of byte j), one E8M0 scale per 32 elements. Rowwise: blocks of 32 along K, data [M,
///        ceil(K/2)]; columnwise: the quantization of x^T, blocks of 32 along M, data [K, ceil(M/2)]. Partial blocks
///        reduce over their valid elements only; an odd row length leaves the last high nibble 0. The scalar
///        steps are mxfp4_codec.hpp's (te / ocp / torchao / triton_kernels / vllm_cutlass / fbgemm / quark orders).
#include "internal.hpp"
#include "qtc/mxfp4_codec.hpp"
#include "qtc/profile.hpp"

namespace qtc::ref::detail {

namespace {

struct Mx4Rule {
  const Recipe& r;
  const DType input;  ///< quark computes in the input's type (its F16 scales of bytes 0x00 and 254 are 0 and Inf)
  const ProfileRules& pr = profile_rules(r.profile);
  const MxScaleRule rule = r.mxfp4().scale_rule;
  const bool torchao = pr.mx_order == MxOrder::kTorchAO;
  const bool vllm = pr.mx_order == MxOrder::kVllmCutlass;
  const bool fbgemm = pr.mx_order == MxOrder::kFbgemm;
  const bool quark = pr.mx_order == MxOrder::kQuark;
  const bool te_ref = pr.mxfp4_te_reference;  ///< TE's PyTorch reference (te_pyref): torchao's rceil byte, value buckets
  /// triton_kernels and vllm_cutlass share the amax (NaN-ignoring max from NaN) and the data step (x * 1/scale).
  const bool triton = pr.mx_order == MxOrder::kTritonKernels || vllm;
  /// The NaN-ignoring amax that keeps a NaN for an all-NaN block (max.f32, __hmax2, __hmax).
  const bool from_nan = triton || quark;
  /// NaN propagates into the block amax where a NaN block gets a NaN scale (OCP, torchao); TE ignores it.
  bool propagate() const { return te_ref || pr.mx_nonfinite == MxNonFinite::kNaN; }
  /// The amax fold's start and step: triton_kernels' max.f32 (from NaN: an all-NaN block keeps it), else amax_step.
  float amax_start() const { return from_nan ? bits_f32(mxfp4::kTritonAmaxStart) : 0.0f; }
  float amax(float a, float v, bool prop) const { return from_nan ? mxfp4::amax_step_triton(a, v) : amax_step(a, v, prop); }
  uint8_t scale(float bamax) const {
    if (te_ref) return mxfp4::scale_torchao(bamax, MxScaleRule::kRceil);  // the profile defines rceil only
    if (torchao) return mxfp4::scale_torchao(bamax, rule);
    if (vllm) return mxfp4::scale_vllm_cutlass(bamax);
    if (fbgemm) return mxfp4::scale_fbgemm(bamax);
    if (quark) return mxfp4::scale_quark(bamax, input == DType::kF16);
    if (triton) return mxfp4::scale_triton(bamax, rule);
    QTC_CHECK(rule == MxScaleRule::kRceil || rule == MxScaleRule::kOcpFloor, "MXFP4 scale_rule ", mx_scale_rule_name(rule),
              " is not defined under mxfp4.order te (profiles torchao and vllm_cutlass define more)");
    return mxfp4::scale_te(bamax, rule, pr.mx_nonfinite == MxNonFinite::kNaN);
  }
  uint8_t code(float x, uint8_t e) const {
    if (te_ref) return mxfp4::code_te_reference(x, e);
    if (fbgemm) return mxfp4::code_fbgemm(x, e);
    if (quark) return mxfp4::code_quark(x, e, input == DType::kF16);
    return torchao ? mxfp4::code_torchao(x, e, rule) : (triton ? mxfp4::code_triton(x, e) : mxfp4::code_te(x, e));
  }
};

/// Stores a 4-bit code at element `idx` of a packed row starting at `row`.
inline void put_nibble(uint8_t* row, int64_t idx, uint8_t code) {
  uint8_t& b = row[idx >> 1];
  b = (idx & 1) ? static_cast<uint8_t>((b & 0x0F) | (code << 4)) : static_cast<uint8_t>((b & 0xF0) | (code & 0x0F));
}

}  // namespace

QuantizedTensor quantize_mxfp4(const MatrixView& x, const Recipe& r) {
  const MxOrder order = profile_rules(r.profile).mx_order;
  if (order == MxOrder::kCompressedTensors || order == MxOrder::kCompressedTensorsTriton) return quantize_mx_ct(x, r);
  const int64_t M = x.rows, K = x.cols;
  QuantizedTensor q;
  start_output(q, r, x.dtype, M, K);  // planes as describe_plane says
  const Mx4Rule rule{r, x.dtype};
  const bool prop = rule.propagate();
  for_each_row_strip(x, 32, [&](int64_t g, int64_t i0, int64_t n, const float* s) {
    if (r.rowwise) {
      Plane& p = *q.rowwise;
      const int64_t kbs = p.scale.cols;
      for (int64_t i = 0; i < n; ++i) {
        uint8_t* drow = p.data.data() + (i0 + i) * p.data_cols;
        for (int64_t c = 0; c < kbs; ++c) {
          const int64_t j0 = c * 32, j1 = std::min(K, j0 + 32);
          float a = rule.amax_start();
          for (int64_t j = j0; j < j1; ++j) a = rule.amax(a, s[i * K + j], prop);
          const uint8_t sc = rule.scale(a);
          p.scale.bytes[static_cast<size_t>((i0 + i) * kbs + c)] = sc;
          for (int64_t j = j0; j < j1; ++j) put_nibble(drow, j, rule.code(s[i * K + j], sc));
        }
      }
    }
    if (r.columnwise) {
      Plane& p = *q.columnwise;  // row j holds column j of x; strip g is scale column g
      const int64_t mbs = p.scale.cols;
      for (int64_t j = 0; j < K; ++j) {
        float a = rule.amax_start();
        for (int64_t i = 0; i < n; ++i) a = rule.amax(a, s[i * K + j], prop);
        const uint8_t sc = rule.scale(a);
        p.scale.bytes[static_cast<size_t>(j * mbs + g)] = sc;
        uint8_t* drow = p.data.data() + j * p.data_cols;
        for (int64_t i = 0; i < n; ++i) put_nibble(drow, i0 + i, rule.code(s[i * K + j], sc));
      }
    }
  });
  return q;
}

}  // namespace qtc::ref::detail
