/// \file fp8.cpp
/// \brief FP8 block scaling (1x128, 128x128; TE_FORMATS.md §3) and per-tensor current scaling (§4).
#include <cmath>

#include "internal.hpp"
#include "kind_module.hpp"
#include "qtc/kind.hpp"
#include "qtc/profile.hpp"

namespace qtc::ref::detail {

QuantizedTensor quantize_fp8_block(const MatrixView& x, const Recipe& r) {
  if (fp8_peer_form(r)) return quantize_fp8_block_peer(x, r);
  const int64_t M = x.rows, K = x.cols;
  const int64_t kbs = ceil_div(K, 128);
  QuantizedTensor q;
  start_output(q, r, x.dtype, M, K);  // planes as describe_plane says
  const Fp8BlockOptions& o = r.fp8_block();
  const float max_fp8 = fp8_max(o.fp8);
  const float vinf = dtype_max(x.dtype);
  const bool prop = profile_rules(r.profile).nan_amax;
  const Overflow ov = profile_rules(r.profile).fp8_satfinite ? Overflow::kSatFinite : Overflow::kNaN;
  auto scale_of = [&](float a) { return fp8_scale_from_amax(a, max_fp8, o.pow2_scales, o.eps, vinf, r.profile); };
  for_each_row_strip(x, 128, [&](int64_t g, int64_t i0, int64_t n, const float* s) {
    std::vector<float> tile_scale(static_cast<size_t>(kbs));
    std::vector<float> col_amax(static_cast<size_t>(K));
    if (o.tile_2d) {
      for (int64_t c = 0; c < kbs; ++c) {
        float a = 0.0f;
        const int64_t j1 = std::min(K, c * 128 + 128);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = c * 128; j < j1; ++j) a = amax_step(a, s[i * K + j], prop);
        const float sc = scale_of(a);
        tile_scale[static_cast<size_t>(c)] = sc;
        if (r.rowwise) q.rowwise->scale.set_f32(g, c, 1.0f / sc);
        if (r.columnwise) q.columnwise->scale.set_f32(c, g, 1.0f / sc);
      }
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < K; ++j) {
          const uint8_t code = encode_fp8(s[i * K + j] * tile_scale[static_cast<size_t>(j / 128)], o.fp8, ov);
          if (r.rowwise) q.rowwise->data[static_cast<size_t>((i0 + i) * K + j)] = code;
          if (r.columnwise) q.columnwise->data[static_cast<size_t>(j * M + i0 + i)] = code;
        }
      return;
    }
    if (r.rowwise) {
      Plane& p = *q.rowwise;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < kbs; ++c) {
          const int64_t j0 = c * 128, j1 = std::min(K, j0 + 128);
          float a = 0.0f;
          for (int64_t j = j0; j < j1; ++j) a = amax_step(a, s[i * K + j], prop);
          const float sc = scale_of(a);
          p.scale.set_f32(i0 + i, c, 1.0f / sc);
          for (int64_t j = j0; j < j1; ++j) p.data[static_cast<size_t>((i0 + i) * K + j)] = encode_fp8(s[i * K + j] * sc, o.fp8, ov);
        }
    }
    if (r.columnwise) {
      Plane& p = *q.columnwise;
      std::fill(col_amax.begin(), col_amax.end(), 0.0f);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < K; ++j) col_amax[static_cast<size_t>(j)] = amax_step(col_amax[static_cast<size_t>(j)], s[i * K + j], prop);
      for (int64_t j = 0; j < K; ++j) {
        const float sc = scale_of(col_amax[static_cast<size_t>(j)]);
        p.scale.set_f32(j, g, 1.0f / sc);
        for (int64_t i = 0; i < n; ++i) p.data[static_cast<size_t>(j * M + i0 + i)] = encode_fp8(s[i * K + j] * sc, o.fp8, ov);
      }
    }
  });
  return q;
}

QuantizedTensor quantize_fp8_tensor(const MatrixView& x, const Recipe& r, const float* amax_override) {
  if (fp8_peer_form(r)) return quantize_fp8_tensor_peer(x, r, amax_override);
  const int64_t M = x.rows, K = x.cols;
  QuantizedTensor q;
  start_output(q, r, x.dtype, M, K);  // planes as describe_plane says: a 1x1 scale_inv and one amax
  const Fp8TensorOptions& o = r.fp8_tensor();
  const bool prop = profile_rules(r.profile).nan_amax;
  const Overflow ov = profile_rules(r.profile).fp8_satfinite ? Overflow::kSatFinite : Overflow::kNaN;
  const float a = amax_override != nullptr ? amax_override[0] : amax(x, prop);
  const float scale = fp8_scale_from_amax(a, fp8_max(o.fp8), o.pow2_scales, o.eps, FLT_MAX, r.profile);
  q.scale_inv = 1.0f / scale;
  for (auto* p : {&q.rowwise, &q.columnwise})
    if (*p) {
      (*p)->scale.set_f32(0, 0, q.scale_inv);
      (*p)->amax.at(0) = a;
    }
  for_each_row_strip(x, 64, [&](int64_t, int64_t i0, int64_t n, const float* s) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < K; ++j) {
        const uint8_t code = encode_fp8(s[i * K + j] * scale, o.fp8, ov);
        if (r.rowwise) q.rowwise->data[static_cast<size_t>((i0 + i) * K + j)] = code;
        if (r.columnwise) q.columnwise->data[static_cast<size_t>(j * M + i0 + i)] = code;
      }
  });
  return q;
}


// The recipe rules FP8 block and FP8 tensor share (their modules list them after their own).
const RuleCheck kFp8ProfilePow2Rule = {{"fp8-profile-pow2", "pow2_scales=1 needs a profile that defines power-of-two FP8 scales (profile rule fp8.pow2)"},
     [](const Recipe& r, const ProfileRules& pr) {
       const bool fp8 = kind_info(r).fp8_scaling_options;
       const Fp8Form f = r.fp8_tensor_or_null() != nullptr ? pr.fp8_tensor_form : pr.fp8_form;
       return fp8 && r.pow2_scales() && f != Fp8Form::kTE && pr.fp8_pow2 == Fp8Pow2::kNone;
     },
     [](const Recipe&, const ProfileRules& pr) { return "profile '" + pr.name + "' does not"; }};
const RuleCheck kFp8EpsRule = {{"fp8-eps", "FP8 block/tensor eps must be a finite value >= 0"},
     [](const Recipe& r, const ProfileRules&) {
       const bool has_eps = kind_info(r).fp8_scaling_options;
       return has_eps && !(std::isfinite(r.eps()) && r.eps() >= 0.0f);
     }};

}  // namespace qtc::ref::detail
