/// \file sharding_internal.hpp
/// \brief Helpers shared by the sharding sources: which axis of a plane's data and scale matrices the
///        tensor's rows run along, matrix slicing and concatenation, layout round trips, recipe comparison.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "qtc/quantized.hpp"
#include "qtc/sharding.hpp"

namespace qtc::ref::shard_detail {

int64_t cdiv(int64_t a, int64_t b);


/// Along which axis of a plane's (compact) scale matrix, and of its data matrix, the tensor's M index runs.
enum class Axis { kRows, kCols, kNone };

Axis scale_m_axis(const Recipe& r, PlaneKind p);
Axis data_m_axis(const Recipe& r, PlaneKind p);

/// Extent along the M axis of a plane's compact scale matrix for a tensor of M rows.
int64_t scale_extent(const Recipe& r, PlaneKind p, int64_t M, int64_t K);

/// Extent along the M axis of a plane's data matrix (bytes for the columns axis).
int64_t data_extent(const Recipe& r, PlaneKind p, int64_t M);

/// Copies elements [b0, b1) along `axis` of a row-major matrix of rows x cols elements of `elem` bytes.
std::vector<uint8_t> slice_matrix(const std::vector<uint8_t>& src, int64_t rows, int64_t cols, size_t elem, Axis axis,
                                  int64_t b0, int64_t b1);

/// Concatenates row-major matrices (rows_i x cols_i elements) along `axis`.
std::vector<uint8_t> concat_matrices(const std::vector<const std::vector<uint8_t>*>& parts,
                                     const std::vector<std::pair<int64_t, int64_t>>& shapes, size_t elem, Axis axis);

bool same_recipe(const Recipe& a, const Recipe& b);
bool same_bits(const std::vector<float>& a, const std::vector<float>& b);

/// Scales of a plane in the compact layout (FP8 tensor: its 1x1 matrix as is).
ScaleMatrix compact_of(const ScaleMatrix& s, const Recipe& r, PlaneKind p, int64_t M, int64_t K);
ScaleMatrix to_layout(const ScaleMatrix& compact, ScaleLayout to, const Recipe& r, PlaneKind p, int64_t M, int64_t K);

/// Checks that every plane's data size agrees with its shape.
void check_shape_consistency(const QuantizedTensor& q);

}  // namespace qtc::ref::shard_detail
