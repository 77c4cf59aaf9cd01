/// \file safetensors.hpp
/// \brief safetensors read and write (VECTORS.md): bounds-checked, nothing read from a file is trusted.
///
/// A file is an 8-byte little-endian header length N, N bytes of JSON, then the data area. The JSON maps
/// each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data
/// area) and may hold "__metadata__", a map of strings to strings.
///
/// What the reader accepts (anything else is a qtc::Error whose message names the file and the problem):
///  * N >= 2, N <= kMaxHeaderBytes (100 MiB, as the safetensors library), 8 + N <= file size;
///  * the header is valid UTF-8 JSON, an object, nested at most kMaxJsonDepth deep, without a duplicate
///    key in any object;
///  * "__metadata__", when present, is an object whose values are all strings;
///  * each tensor entry is an object with exactly the keys dtype (a known dtype name), shape (an array of
///    non-negative integers whose product, and the product times the element size, fit in int64) and
///    data_offsets (two non-negative integers, begin <= end);
///  * end - begin equals the element count times the dtype's element size;
///  * the tensors tile the data area exactly: sorted by begin, the first starts at 0, each starts where
///    the previous one ends (so no overlap and no gap), and the last ends at the end of the file. Zero-size
///    tensors take an empty range at their position.
///  * tensor names are non-empty.
/// Dtypes: BOOL U8 I8 U16 I16 F16 BF16 U32 I32 F32 U64 I64 F64 F8_E4M3 F8_E5M2 F8_E8M0 are read as raw
/// little-endian bytes; the sub-byte dtypes (F4, F6_E2M3, F6_E3M2) are refused as unsupported.
///
/// The writer is deterministic: tensors sorted by name, data laid out in that order, the JSON header
/// (keys sorted) padded with spaces so that the data area starts at a multiple of 8 bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qtc/tensor.hpp"

namespace qtc::io {

inline constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
inline constexpr int kMaxJsonDepth = 16;

/// One tensor: raw little-endian, C-contiguous bytes.
struct Tensor {
  std::string name;
  std::string dtype;           ///< safetensors dtype name, e.g. "F32", "U8", "F8_E4M3"
  std::vector<int64_t> shape;  ///< empty for a scalar
  std::vector<uint8_t> bytes;

  /// Product of the shape (1 for a scalar).
  int64_t numel() const;
  /// True for the one-byte dtypes a byte tensor of VECTORS.md may arrive as (U8, F8_E4M3, F8_E5M2, F8_E8M0).
  bool is_byte_tensor() const;
  /// Element i of an F32 tensor (checked: dtype F32 and i in range).
  float f32(int64_t i) const;
  bool operator==(const Tensor&) const = default;
};

/// True for the one-byte dtypes a byte tensor of VECTORS.md may arrive as (U8, F8_E4M3, F8_E5M2, F8_E8M0).
bool is_byte_dtype(std::string_view dtype);

/// A whole file: metadata and tensors (the reader returns them sorted by name).
struct File {
  std::map<std::string, std::string> metadata;
  std::vector<Tensor> tensors;

  /// The tensor of that name, or nullptr.
  const Tensor* find(std::string_view name) const;
  /// The tensor of that name; throws qtc::Error when there is none.
  const Tensor& at(std::string_view name) const;
  /// Adds a tensor (replacing one of the same name).
  void put(Tensor t);
  bool operator==(const File&) const = default;
};

/// Element size in bytes of a safetensors dtype name; nullopt for unknown or unsupported names.
std::optional<size_t> dtype_size(std::string_view dtype);

/// Parses a whole file held in memory. `source` names the file in error messages.
File parse(std::span<const uint8_t> bytes, const std::string& source);
/// Reads and parses a file.
File read_file(const std::filesystem::path& path);

/// Serializes deterministically (see above). Throws qtc::Error for an invalid file (duplicate or empty
/// name, the name "__metadata__", unknown dtype, byte count not matching the shape).
std::vector<uint8_t> serialize(const File& file);
/// Serializes and writes a file (through a temporary file renamed into place).
void write_file(const std::filesystem::path& path, const File& file);

/// A tensor of the qtc::DType's safetensors name ("F32", "BF16", "F16", "U8") holding a 2-D matrix.
Tensor from_matrix(std::string name, const HostMatrix& m);
/// A 2-D F32/BF16/F16/U8 tensor (any one-byte dtype reads as U8) as a HostMatrix; throws otherwise.
HostMatrix to_matrix(const Tensor& t);
/// A 1-D F32 tensor.
Tensor from_f32(std::string name, std::span<const float> values, std::vector<int64_t> shape = {});

}  // namespace qtc::io
