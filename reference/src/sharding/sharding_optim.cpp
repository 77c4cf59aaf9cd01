/// \file sharding_optim.cpp
/// \brief Per-tensor amax reduction across shards, re-quantization in place, and Adam on shards.
#include "qtc/sharding.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>

#include "qtc/error.hpp"
#include "qtc/layouts.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"
#include "qtc/kind.hpp"
#include "sharding_internal.hpp"

namespace qtc::ref {

using namespace shard_detail;

std::pair<float, float> local_amaxes(const MatrixView& x, const Recipe& r) {
  const bool prop = profile_rules(r.profile).nan_amax;
  const float a = amax(x, prop);
  if (r.nvfp4_rht() && r.columnwise) {
    const HostMatrix t = rht_transform(x, r.nvfp4().rht_sign_mask);
    return {a, amax(t.view(), prop)};
  }
  return {a, a};
}

QuantizedTensor quantize_shard(const MatrixView& x, const Recipe& r, const AmaxAllReduce& reduce) {
  if (!one_amax_per_tensor(r)) return quantize(x, r);
  if (!reduce) return quantize(x, r);  // no reduction: each shard uses its own amax (the FSDP2 bug)
  auto [ar, ac] = local_amaxes(x, r);
  float v[2] = {ar, ac};
  reduce(std::span<float>(v, 2));
  return quantize_with_amax(x, r, v[0], v[1]);
}

void requantize_shard_into(QuantizedTensor& dst, const MatrixView& x, const AmaxAllReduce& reduce) {
  QTC_CHECK(x.rows == dst.rows && x.cols == dst.cols, "requantize_shard_into: input is [", x.rows, ", ", x.cols,
            "], the quantized shard is [", dst.rows, ", ", dst.cols, "]");
  Recipe r = dst.recipe;
  r.rowwise = dst.rowwise.has_value();
  r.columnwise = dst.columnwise.has_value();
  QuantizedTensor fresh = quantize_shard(x, r, reduce);
  fresh.recipe = dst.recipe;
  for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
    auto& d = pk == PlaneKind::kRowwise ? dst.rowwise : dst.columnwise;
    auto& s = pk == PlaneKind::kRowwise ? fresh.rowwise : fresh.columnwise;
    if (!d) continue;
    const ScaleLayout lay = d->scale.layout;
    if (!kind_info(dst.recipe).per_tensor_scale && lay != ScaleLayout::kCompact)
      s->scale = convert_layout(s->scale, lay, dst.recipe, pk, dst.rows, dst.cols);
    QTC_CHECK(d->data.size() == s->data.size() && d->scale.bytes.size() == s->scale.bytes.size(),
              "requantize_shard_into: buffer sizes changed");
    std::copy(s->data.begin(), s->data.end(), d->data.begin());
    std::copy(s->scale.bytes.begin(), s->scale.bytes.end(), d->scale.bytes.begin());
    d->amax = s->amax;
  }
  dst.scale_inv = fresh.scale_inv;
}

// ---------------------------------------------------------------------------------------------------

void adam_step(std::span<float> param, std::span<const float> grad, std::span<float> m, std::span<float> v,
               const AdamConfig& c, int step) {
  QTC_CHECK(param.size() == grad.size() && param.size() == m.size() && param.size() == v.size(),
            "adam_step: param, grad, m and v must have the same size");
  QTC_CHECK(step >= 1, "adam_step: step counts from 1");
  const float bc1 = 1.0f - std::pow(c.beta1, static_cast<float>(step));
  const float bc2 = 1.0f - std::pow(c.beta2, static_cast<float>(step));
  for (size_t i = 0; i < param.size(); ++i) {
    const float g = grad[i];
    m[i] = c.beta1 * m[i] + (1.0f - c.beta1) * g;
    v[i] = c.beta2 * v[i] + (1.0f - c.beta2) * (g * g);
    const float mh = m[i] / bc1;
    const float vh = v[i] / bc2;
    float p = param[i];
    if (c.weight_decay != 0.0f) p = p - c.lr * c.weight_decay * p;
    param[i] = p - c.lr * mh / (std::sqrt(vh) + c.eps);
  }
}

}  // namespace qtc::ref
