/// \file group.cpp
/// \brief Mixed quantizer groups (group.hpp): amaxes of all members first, then each member on its own.
#include "qtc/group.hpp"

#include <algorithm>
#include <string>

#include "qtc/error.hpp"
#include "qtc/layouts.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"
#include "qtc/recipe_policy.hpp"

namespace qtc::ref {

namespace {

struct MemberAmax {
  float rowwise = 0.0f;
  float columnwise = 0.0f;
};

/// The member's own {rowwise, columnwise} amax (columnwise of RHT(x^T) when the recipe has RHT).
MemberAmax member_amax(const MatrixView& x, const Recipe& r) {
  const bool prop = profile_rules(r.profile).nan_amax;
  MemberAmax a;
  a.rowwise = amax(x, prop);
  a.columnwise = a.rowwise;
  if (r.nvfp4_rht() && r.columnwise && x.rows > 0 && x.cols > 0)
    a.columnwise = amax(rht_transform(x, r.nvfp4().rht_sign_mask).view(), prop);
  return a;
}

void validate_member(const MatrixView& x, const Recipe& r, size_t i) {
  try {
    r.validate_input(x.dtype, x.rows, x.cols);
    QTC_CHECK(x.data != nullptr || x.rows * x.cols == 0, "the input has no data");
  } catch (const Error& e) {
    QTC_FAIL("quantize_group: member ", i, " (", r.name(), ", [", x.rows, ", ", x.cols, "]): ", e.what());
  }
}

std::vector<QuantizedTensor> quantize_members(std::span<const MatrixView> members, std::span<const Recipe> recipes) {
  // Pass 1: every member's own amax (per-tensor recipes only; the others reduce per block or per row).
  std::vector<MemberAmax> amaxes(members.size());
  for (size_t i = 0; i < members.size(); ++i)
    if (one_amax_per_tensor(recipes[i])) amaxes[i] = member_amax(members[i], recipes[i]);
  // Pass 2: each member with its own amax.
  std::vector<QuantizedTensor> out;
  out.reserve(members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    if (one_amax_per_tensor(recipes[i]))
      out.push_back(quantize_with_amax(members[i], recipes[i], amaxes[i].rowwise, amaxes[i].columnwise));
    else
      out.push_back(quantize(members[i], recipes[i]));
  }
  return out;
}

/// Overwrites dst's buffers with src's (same sizes), keeping dst's storage.
void overwrite_plane(Plane& dst, const Plane& src, size_t member, const char* which) {
  QTC_CHECK(dst.data.size() == src.data.size() && dst.scale.bytes.size() == src.scale.bytes.size() &&
                dst.amax.size() == src.amax.size(),
            "quantize_group_into: member ", member, " ", which, " buffers have other sizes than the member's quantization");
  std::copy(src.data.begin(), src.data.end(), dst.data.begin());
  std::copy(src.scale.bytes.begin(), src.scale.bytes.end(), dst.scale.bytes.begin());
  std::copy(src.amax.begin(), src.amax.end(), dst.amax.begin());
}

}  // namespace

std::vector<QuantizedTensor> quantize_group(std::span<const MatrixView> members, std::span<const Recipe> recipes) {
  QTC_CHECK(members.size() == recipes.size(), "quantize_group: ", members.size(), " members but ", recipes.size(), " recipes");
  for (size_t i = 0; i < members.size(); ++i) validate_member(members[i], recipes[i], i);
  return quantize_members(members, recipes);
}

void quantize_group_into(std::span<const MatrixView> members, std::span<QuantizedTensor> outs) {
  QTC_CHECK(members.size() == outs.size(), "quantize_group_into: ", members.size(), " members but ", outs.size(), " outputs");
  std::vector<Recipe> recipes;
  recipes.reserve(outs.size());
  for (size_t i = 0; i < members.size(); ++i) {
    Recipe r = outs[i].recipe;
    r.rowwise = outs[i].rowwise.has_value();
    r.columnwise = outs[i].columnwise.has_value();
    QTC_CHECK(outs[i].rows == members[i].rows && outs[i].cols == members[i].cols, "quantize_group_into: member ", i, " is [",
              members[i].rows, ", ", members[i].cols, "], its output [", outs[i].rows, ", ", outs[i].cols, "]");
    validate_member(members[i], r, i);
    recipes.push_back(r);
  }
  std::vector<QuantizedTensor> fresh = quantize_members(members, recipes);
  // Check every member's buffer sizes before writing any, so a mismatch leaves every output untouched.
  for (size_t i = 0; i < outs.size(); ++i) {
    QuantizedTensor& f = fresh[i];
    for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
      auto& d = pk == PlaneKind::kRowwise ? outs[i].rowwise : outs[i].columnwise;
      auto& s = pk == PlaneKind::kRowwise ? f.rowwise : f.columnwise;
      if (!d) continue;
      if (d->scale.layout != ScaleLayout::kCompact && !describe_plane(f.recipe, pk, f.rows, f.cols).per_tensor)
        s->scale = convert_layout(s->scale, d->scale.layout, f.recipe, pk, f.rows, f.cols);
      QTC_CHECK(d->data.size() == s->data.size() && d->scale.bytes.size() == s->scale.bytes.size() && d->amax.size() == s->amax.size(),
                "quantize_group_into: member ", i, " ", pk == PlaneKind::kRowwise ? "rowwise" : "columnwise",
                " buffers have other sizes than the member's quantization");
    }
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].rowwise) overwrite_plane(*outs[i].rowwise, *fresh[i].rowwise, i, "rowwise");
    if (outs[i].columnwise) overwrite_plane(*outs[i].columnwise, *fresh[i].columnwise, i, "columnwise");
    outs[i].scale_inv = fresh[i].scale_inv;
    outs[i].input_dtype = fresh[i].input_dtype;
  }
}

}  // namespace qtc::ref
