/// \file device_compare_test.cpp
/// \brief compare_on_device and nonzero_padding_on_device (qtc/cuda/compare.hpp) against the host's rules: the
///        count and first index of conformance's find_mismatch (E2M1 nibbles, bytes, F32 / BF16 / F16 with any NaN
///        equal to any NaN, and bit-exact without nan_equal), scale buffers read through every layout's geometry
///        (ragged shapes: padding and tiles), and the padding count of OutputLayout::nonzero_padding. Part of
///        test_quantize_cuda (label gpu): skips without a device, fails under QTC_REQUIRE_GPU=1.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "gpu_test_util.hpp"
#include "qtc/cuda/check.hpp"
#include "qtc/cuda/compare.hpp"
#include "qtc/native_layout.hpp"
#include "qtc/recipe_policy.hpp"
#include "qtc/verify.hpp"

namespace qtc::test {
namespace {

using conformance::ElementCode;

cuda::DeviceBuffer upload(const std::vector<uint8_t>& h) {
  cuda::DeviceBuffer d(h.size(), nullptr);
  if (!h.empty()) QTC_CUDA_CHECK(cudaMemcpy(d.data(), h.data(), h.size(), cudaMemcpyHostToDevice));
  return d;
}

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(mix(seed, i) >> 11);
  return v;
}

/// Changes a few elements (and, for float codes, writes two different NaNs at one place).
std::vector<uint8_t> perturb(std::vector<uint8_t> v, int elem_bytes, uint64_t seed) {
  const size_t n = v.size() / static_cast<size_t>(elem_bytes);
  for (int k = 0; k < 5 && n > 0; ++k) v[(mix(seed, 1000 + k) % n) * static_cast<size_t>(elem_bytes)] ^= 0x21;
  return v;
}

struct ElemCase {
  ElementCode host;
  cuda::DeviceElem dev;
  int bytes;
};

TEST(DeviceCompare, CountsAndFirstIndexAsTheHostForEveryElementCode) {
  QTC_GPU_GATE(gpu_unavailable_reason());
  const ElemCase cases[] = {{ElementCode::kE2M1, cuda::DeviceElem::kE2M1, 1}, {ElementCode::kE4M3, cuda::DeviceElem::kByte, 1},
                            {ElementCode::kF32, cuda::DeviceElem::kF32, 4}, {ElementCode::kBF16, cuda::DeviceElem::kBF16, 2},
                            {ElementCode::kF16, cuda::DeviceElem::kF16, 2}};
  for (const ElemCase& c : cases)
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {3, 37}, {130, 66}, {1024, 1030}})
      for (bool nan_equal : {true, false}) {
        SCOPED_TRACE(::testing::Message() << "elem " << static_cast<int>(c.host) << " [" << rows << ", " << cols << "] nan_equal "
                                          << nan_equal);
        const int64_t n = rows * cols;  // elements (E2M1: nibbles)
        const size_t bytes = static_cast<size_t>(c.host == ElementCode::kE2M1 ? (n + 1) / 2 : n * c.bytes);
        std::vector<uint8_t> want = random_bytes(bytes, static_cast<uint64_t>(n) * 7 + c.bytes);
        std::vector<uint8_t> got = perturb(want, c.host == ElementCode::kE2M1 ? 1 : c.bytes, static_cast<uint64_t>(n));
        if (c.bytes > 1 && n > 2) {  // two different NaN encodings at element 1 (equal under nan_equal only)
          const uint32_t a = c.bytes == 4 ? 0x7FC00001u : c.host == ElementCode::kBF16 ? 0x7FC1u : 0x7E01u;
          const uint32_t b = c.bytes == 4 ? 0xFFC00002u : c.host == ElementCode::kBF16 ? 0xFFC2u : 0xFE02u;
          std::memcpy(want.data() + c.bytes, &a, static_cast<size_t>(c.bytes));
          std::memcpy(got.data() + c.bytes, &b, static_cast<size_t>(c.bytes));
        }
        const conformance::Mismatch h = conformance::find_mismatch(c.host, want.data(), got.data(), n, nan_equal);
        const cuda::DeviceBuffer dw = upload(want), dg = upload(got);
        const int64_t dev_cols = cols;
        const cuda::DeviceMismatch d = cuda::compare_on_device(c.dev, dw.data(), dg.data(), rows, dev_cols, nullptr, nan_equal, nullptr);
        EXPECT_EQ(d.count, h.count);
        EXPECT_EQ(d.first, h.count == 0 ? -1 : h.first);
      }
}

TEST(DeviceCompare, F32ValuesCompareAsValueEquivalenceDoes) {
  QTC_GPU_GATE(gpu_unavailable_reason());
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {7, 33}, {515, 1030}}) {
    const int64_t n = rows * cols;
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    int64_t count = 0, first = -1;
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t h = mix(static_cast<uint64_t>(n), static_cast<uint64_t>(i));
      float x = static_cast<float>(normal(h, 1));
      float y = x;
      switch (h % 7) {
        case 0: x = 0.0f, y = -0.0f; break;                                               // equal values, other bits
        case 1: x = std::nanf("1"), y = -std::nanf("2"); break;                          // any NaN equals any NaN
        case 2: y = std::nextafter(x, 1e30f); break;                                      // one ulp: differs
        case 3: x = std::nanf(""), y = 0.0f; break;                                      // NaN and a number: differ
        default: break;
      }
      a[static_cast<size_t>(i)] = x;
      b[static_cast<size_t>(i)] = y;
      if (!(x == y || (std::isnan(x) && std::isnan(y))) && count++ == 0) first = i;
    }
    std::vector<uint8_t> ha(a.size() * 4), hb(b.size() * 4);
    std::memcpy(ha.data(), a.data(), ha.size());
    std::memcpy(hb.data(), b.data(), hb.size());
    const cuda::DeviceBuffer da = upload(ha), db = upload(hb);
    const cuda::DeviceMismatch m = cuda::compare_on_device(cuda::DeviceElem::kF32Value, da.data(), db.data(), rows, cols, nullptr, false, nullptr);
    EXPECT_EQ(m.count, count) << rows << " x " << cols;
    EXPECT_EQ(m.first, first) << rows << " x " << cols;
  }
}

TEST(DeviceCompare, ScaleBuffersThroughEveryLayoutAndTheirPadding) {
  QTC_GPU_GATE(gpu_unavailable_reason());
  struct ScaleCase {
    Recipe r;
    const char* tensor;
  };
  const Recipe nv = Recipe::of(Nvfp4Options{}), mx = Recipe::of(Mxfp8Options{}), fb = Recipe::of(Fp8BlockOptions{});
  const Recipe fb2 = Recipe::of(Fp8BlockOptions{.tile_2d = true});
  const Recipe ue = Recipe::of(Fp8BlockOptions{.pow2_scales = true, .ue8m0_scales = true});  // DeepGEMM's packing
  const ScaleCase cases[] = {{nv, "rowwise_scale_inv"}, {nv, "columnwise_scale_inv"}, {mx, "rowwise_scale_inv"},
                             {mx, "columnwise_scale_inv"}, {fb, "rowwise_scale_inv"}, {fb, "columnwise_scale_inv"},
                             {fb2, "rowwise_scale_inv"}, {ue, "rowwise_scale_inv"}, {ue, "columnwise_scale_inv"}};
  for (const ScaleCase& c : cases)
    for (const LayoutName& ln : kLayoutNames)
      for (const auto& [M, K] : {std::pair<int64_t, int64_t>{160, 96}, {48, 544}, {272, 1056}}) {
        const Layout lo = ln.layout;
        std::optional<ref::OutputLayout> ol;
        try {
          ref::check_layout_applies(lo, c.r);
          ol = ref::OutputLayout::find(c.tensor, c.r, M, K, lo);
        } catch (const Error&) {
          continue;  // a layout this recipe's scales do not have
        }
        ASSERT_TRUE(ol.has_value());
        SCOPED_TRACE(::testing::Message() << c.r.name() << " " << c.tensor << " " << ln.name << " [" << M << ", " << K << "]");
        const auto spec = describe_tensor(c.r, c.tensor, M, K);
        ASSERT_TRUE(spec.has_value());
        const ScaleGeometry g = spec->plane.geometry(lo);
        const int eb = ol->elem_bytes();
        const std::vector<uint8_t> compact = random_bytes(static_cast<size_t>(ol->compact_elements() * eb), static_cast<uint64_t>(M * K));
        std::vector<uint8_t> buf = ol->from_compact(compact);
        // Values: one element changed at a known compact place; padding: a byte of the last padding element.
        const int64_t at = ol->compact_elements() / 3;
        buf[static_cast<size_t>(ol->layout_index(at) * eb)] ^= 0x40;
        const std::vector<bool> pad = ol->padding_mask();
        int64_t last_pad = -1;
        for (int64_t i = 0; i < static_cast<int64_t>(pad.size()); ++i)
          if (pad[static_cast<size_t>(i)]) last_pad = i;
        if (last_pad >= 0) buf[static_cast<size_t>(last_pad * eb)] = 0x5A;
        const cuda::DeviceBuffer dc = upload(compact), db = upload(buf);
        const cuda::DeviceElem de = eb == 4 ? cuda::DeviceElem::kF32 : cuda::DeviceElem::kByte;
        const cuda::DeviceMismatch m = cuda::compare_on_device(de, dc.data(), db.data(), g.rows, g.cols, &g, false, nullptr);
        EXPECT_EQ(m.count, 1);
        EXPECT_EQ(m.first, at);
        // The gather of the layout buffer's compact matrix (the value-equivalence tier's copy of a caller's scales).
        const cuda::DeviceBuffer back(compact.size(), nullptr);
        cuda::to_compact_on_device(db.data(), eb, g, back.data(), nullptr);
        std::vector<uint8_t> got(compact.size());
        QTC_CUDA_CHECK(cudaMemcpy(got.data(), back.data(), got.size(), cudaMemcpyDeviceToHost));
        EXPECT_EQ(got, ol->to_compact(buf));
        const auto host_pad = ol->nonzero_padding(buf);
        const cuda::DevicePadding dp = cuda::nonzero_padding_on_device(db.data(), eb, g, nullptr);
        EXPECT_EQ(dp.total, static_cast<int64_t>(g.size() - g.rows * g.cols));
        if (host_pad) {
          EXPECT_EQ(dp.nonzero, host_pad->nonzero);
          EXPECT_EQ(dp.total, host_pad->total);
          EXPECT_EQ(ref::OutputLayout::coords(dp.first, ol->shape()), host_pad->first);
        } else {
          EXPECT_EQ(dp.nonzero, 0);
        }
      }
}

}  // namespace
}  // namespace qtc::test
