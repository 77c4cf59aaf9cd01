/// \file test_safetensors.cpp
/// \brief safetensors reader and writer: round trips, determinism, and a table of malformed files.
///
/// Covers:
///   | area        | cases                                                                          |
///   |-------------|--------------------------------------------------------------------------------|
///   | round trip  | every dtype, scalars, zero-size tensors, metadata, unicode names, on disk       |
///   | writer      | sorted names, 8-byte alignment with space padding, byte-identical re-serialize  |
///   | foreign     | a header written by hand in safetensors.torch's layout (unsorted, no padding)   |
///   | malformed   | 30+ files built from bytes, each rejected with the expected message substring   |
///   | fuzz        | every truncation and every single-byte corruption of a small file: no crash     |
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "qtc/error.hpp"
#include "qtc/safetensors.hpp"

namespace {

using qtc::io::File;
using qtc::io::Tensor;


/// A file from a header text and a data area: the 8-byte length prefix is the header's length.
std::vector<uint8_t> make_file(const std::string& header, const std::vector<uint8_t>& data = {}) {
  std::string s(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
  s += header;
  s.append(data.begin(), data.end());
  return {s.begin(), s.end()};
}

/// A file with an explicit (possibly lying) header length.
std::vector<uint8_t> make_raw(uint64_t n, const std::string& rest) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
  s += rest;
  return {s.begin(), s.end()};
}

Tensor tensor(std::string name, std::string dtype, std::vector<int64_t> shape, size_t esize, uint8_t seed = 1) {
  Tensor t{std::move(name), std::move(dtype), std::move(shape), {}};
  t.bytes.resize(static_cast<size_t>(t.numel()) * esize);
  for (size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = static_cast<uint8_t>(seed * 31 + i * 7);
  return t;
}

File sample_file() {
  File f;
  f.metadata = {{"qtc.schema", "1"}, {"recipe", "nvfp4"}, {"source", "test \"quoted\" \xC3\xA9"}};
  f.tensors.push_back(tensor("x", "F32", {4, 16}, 4));
  f.tensors.push_back(tensor("rowwise_data", "U8", {4, 8}, 1, 2));
  f.tensors.push_back(tensor("amax_rowwise", "F32", {1}, 4, 3));
  f.tensors.push_back(tensor("b16", "BF16", {3, 5}, 2, 4));
  return f;
}

File sorted(File f) {
  std::sort(f.tensors.begin(), f.tensors.end(), [](const Tensor& a, const Tensor& b) { return a.name < b.name; });
  return f;
}

// ---------------------------------------------------------------------------------------------------
// Round trips and the writer

TEST(SafetensorsRoundTrip, SampleFile) {
  const File f = sample_file();
  const auto bytes = qtc::io::serialize(f);
  const File g = qtc::io::parse(bytes, "sample");
  EXPECT_EQ(g, sorted(f));
  EXPECT_EQ(qtc::io::serialize(g), bytes);  // deterministic, independent of insertion order
}

TEST(SafetensorsRoundTrip, EveryDtype) {
  File f;
  const std::vector<std::pair<std::string, size_t>> dtypes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E8M0", 1}, {"U16", 2}, {"I16", 2},
      {"F16", 2},  {"BF16", 2}, {"U32", 4}, {"I32", 4},    {"F32", 4},     {"U64", 8},     {"I64", 8}, {"F64", 8}};
  uint8_t seed = 0;
  for (const auto& [d, s] : dtypes) {
    EXPECT_EQ(qtc::io::dtype_size(d), s) << d;
    f.tensors.push_back(tensor("t_" + d, d, {2, 3}, s, ++seed));
  }
  const File g = qtc::io::parse(qtc::io::serialize(f), "dtypes");
  EXPECT_EQ(g, sorted(f));
}

TEST(SafetensorsRoundTrip, ScalarsEmptyTensorsAndNoMetadata) {
  File f;
  f.tensors.push_back(tensor("scalar", "F32", {}, 4));
  f.tensors.push_back(tensor("empty", "F32", {0, 7}, 4));
  f.tensors.push_back(tensor("empty2", "U8", {3, 0}, 1));
  f.tensors.push_back(tensor("z", "U8", {5}, 1));
  const File g = qtc::io::parse(qtc::io::serialize(f), "scalars");
  EXPECT_EQ(g, sorted(f));
  EXPECT_EQ(g.at("scalar").numel(), 1);
  EXPECT_EQ(g.at("empty").numel(), 0);
}

TEST(SafetensorsRoundTrip, EmptyFile) {
  const File g = qtc::io::parse(qtc::io::serialize(File{}), "empty");
  EXPECT_TRUE(g.tensors.empty());
  EXPECT_TRUE(g.metadata.empty());
}

TEST(SafetensorsRoundTrip, OnDisk) {
  const auto dir = std::filesystem::temp_directory_path() / ("qtc_st_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / "sample.safetensors";
  qtc::io::write_file(path, sample_file());
  EXPECT_EQ(qtc::io::read_file(path), sorted(sample_file()));
  EXPECT_FALSE(std::filesystem::exists(dir / "sample.safetensors.tmp"));
  std::filesystem::remove_all(dir);
}

TEST(SafetensorsWriter, AlignedSpacePaddedSortedHeader) {
  const auto bytes = qtc::io::serialize(sample_file());
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  EXPECT_EQ((8 + n) % 8, 0u);
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n));
  EXPECT_EQ(header.front(), '{');
  const auto last = header.find_last_not_of(' ');
  EXPECT_EQ(header[last], '}');
  EXPECT_LT(header.size() - last - 1, 8u);
  // Data laid out in name order: amax_rowwise, b16, rowwise_data, x.
  EXPECT_LT(header.find("\"amax_rowwise\""), header.find("\"b16\""));
  EXPECT_NE(header.find("\"data_offsets\":[0,4]"), std::string::npos);
}

TEST(SafetensorsWriter, RejectsInvalidTensors) {
  File f;
  f.tensors.push_back(tensor("a", "F32", {2}, 4));
  f.tensors.push_back(tensor("a", "F32", {2}, 4));
  EXPECT_THROW(qtc::io::serialize(f), qtc::Error);
  File g;
  g.tensors.push_back(tensor("a", "F32", {2}, 1));  // 2 bytes for 2 floats
  EXPECT_THROW(qtc::io::serialize(g), qtc::Error);
  File h;
  h.tensors.push_back(tensor("a", "F4", {2}, 1));
  EXPECT_THROW(qtc::io::serialize(h), qtc::Error);
  File m;
  m.tensors.push_back(tensor("__metadata__", "U8", {2}, 1));
  EXPECT_THROW(qtc::io::serialize(m), qtc::Error);
}

TEST(SafetensorsReader, ForeignLayout) {
  // As safetensors.torch writes: insertion order, no padding, metadata last.
  const std::string header =
      R"({"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
      R"("__metadata__":{"k":"v"}})";
  const File f = qtc::io::parse(make_file(header, {0, 0, 0x80, 0x3F, 9, 8}), "foreign");
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].name, "a");
  EXPECT_EQ(f.at("a").f32(0), 1.0f);
  EXPECT_EQ(f.at("b").bytes, (std::vector<uint8_t>{9, 8}));
  EXPECT_EQ(f.metadata.at("k"), "v");
}

TEST(SafetensorsReader, MatrixHelpers) {
  qtc::HostMatrix m(qtc::DType::kBF16, 2, 3);
  for (size_t i = 0; i < m.bytes.size(); ++i) m.bytes[i] = static_cast<uint8_t>(i);
  const Tensor t = qtc::io::from_matrix("x", m);
  EXPECT_EQ(t.dtype, "BF16");
  const qtc::HostMatrix back = qtc::io::to_matrix(t);
  EXPECT_EQ(back.bytes, m.bytes);
  EXPECT_EQ(back.rows, 2);
  EXPECT_THROW(qtc::io::to_matrix(tensor("v", "F32", {6}, 4)), qtc::Error);
  EXPECT_THROW(qtc::io::to_matrix(tensor("v", "I32", {2, 3}, 4)), qtc::Error);
}

TEST(SafetensorsReader, MissingFileAndDirectory) {
  try {
    qtc::io::read_file("/nonexistent/qtc/file.safetensors");
    FAIL() << "no throw";
  } catch (const qtc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/qtc/file.safetensors: cannot read: no such file"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(qtc::io::read_file(std::filesystem::temp_directory_path()), qtc::Error);
}

// ---------------------------------------------------------------------------------------------------
// Malformed files

struct Malformed {
  std::string name;  // alphanumeric test name
  std::vector<uint8_t> bytes;
  std::string expected;  // substring of the message
};

const std::string kOk = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
const std::vector<uint8_t> k8(8, 0);

std::vector<Malformed> malformed_files() {
  return {
      {"Empty", {}, "shorter than the 8-byte header length"},
      {"SevenBytes", std::vector<uint8_t>(7, 0), "shorter than the 8-byte header length"},
      {"HeaderPastEnd", make_raw(100, "{}"), "runs past the end of the file"},
      {"HeaderAbsurd", make_raw(~0ull, "{}"), "is absurd"},
      {"HeaderJustOverLimit", make_raw((100ull << 20) + 1, "{}"), "is absurd"},
      {"HeaderTooShort", make_raw(1, "{"), "too short for a JSON object"},
      {"HeaderZero", make_raw(0, ""), "too short"},
      {"InvalidJson", make_file("{\"t\":"), "not valid JSON"},
      {"TrailingGarbageInHeader", make_file("{} x"), "not valid JSON"},
      {"InvalidUtf8", make_file("{\"\xFF\":1}"), "not valid JSON"},
      {"HeaderIsArray", make_file("[1,2]"), "not an object"},
      {"HeaderIsString", make_file("\"abc\""), "not an object"},
      {"MetadataNotObject", make_file(R"({"__metadata__":["a"]})"), "'__metadata__' is a JSON array"},
      {"MetadataValueNumber", make_file(R"({"__metadata__":{"recipe":1}})"), "metadata value of 'recipe' is a JSON number"},
      {"MetadataValueNull", make_file(R"({"__metadata__":{"recipe":null}})"), "not a string"},
      {"DuplicateTensor", make_file("{" + kOk + "," + kOk + "}", k8), "duplicate key 't' (tensor names must be unique)"},
      {"DuplicateMetadataKey", make_file(R"({"__metadata__":{"a":"1","a":"2"}})"), "duplicate key 'a'"},
      {"EntryNotObject", make_file(R"({"t":[1,2]})"), "entry is a JSON array"},
      {"MissingDtype", make_file(R"({"t":{"shape":[2],"data_offsets":[0,8]}})", k8), "missing field 'dtype'"},
      {"MissingShape", make_file(R"({"t":{"dtype":"F32","data_offsets":[0,8]}})", k8), "missing field 'shape'"},
      {"MissingOffsets", make_file(R"({"t":{"dtype":"F32","shape":[2]}})", k8), "missing field 'data_offsets'"},
      {"UnknownField", make_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", k8), "unknown field 'x'"},
      {"DtypeNotString", make_file(R"({"t":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", k8), "'dtype' is not a string"},
      {"UnknownDtype", make_file(R"({"t":{"dtype":"F128","shape":[2],"data_offsets":[0,8]}})", k8), "unknown dtype 'F128'"},
      {"SubByteDtype", make_file(R"({"t":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})", {0}), "sub-byte dtype 'F4'"},
      {"ShapeNotArray", make_file(R"({"t":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", k8), "'shape' is not an array"},
      {"NegativeDim", make_file(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", k8), "negative dimension -2"},
      {"FloatDim", make_file(R"({"t":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", k8), "is not an integer"},
      {"StringDim", make_file(R"({"t":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", k8), "is not a number"},
      {"HugeDim", make_file(R"({"t":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,8]}})", k8),
       "does not fit in int64"},
      {"ElementCountOverflow",
       make_file(R"({"t":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", k8),
       "element count of shape [4294967296,4294967296] overflows int64"},
      {"ByteCountOverflow", make_file(R"({"t":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]}})", k8),
       "byte count of shape [4611686018427387904] overflows int64"},
      {"OffsetsNotPair", make_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", k8),
       "'data_offsets' is not an array of two integers"},
      {"NegativeOffset", make_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", k8), "is negative"},
      {"BeginAfterEnd", make_file(R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", k8), "begin 8 > end 0"},
      {"ByteCountMismatch", make_file(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", k8),
       "need 12 bytes, data_offsets [0, 8] hold 8"},
      {"DtypeMismatch", make_file(R"({"t":{"dtype":"F16","shape":[2],"data_offsets":[0,8]}})", k8), "need 4 bytes"},
      {"OffsetsPastEnd", make_file(R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", k8),
       "run past the end of the data area"},
      {"TruncatedData", make_file("{" + kOk + "}", std::vector<uint8_t>(5, 0)), "run past the end of the data area (5 bytes"},
      {"Overlap",
       make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", k8),
       "overlap tensor 'a'"},
      {"Gap",
       make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}})", k8),
       "leave a gap of 2 bytes"},
      {"NotStartingAtZero", make_file(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", k8), "leave a gap of 4 bytes"},
      {"TrailingBytes", make_file("{" + kOk + "}", std::vector<uint8_t>(12, 0)), "trailing bytes"},
      {"EmptyName", make_file(R"({"":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", k8), "empty name"},
      {"DeepNesting", make_file("{\"__metadata__\":" + std::string(40, '[') + std::string(40, ']') + "}"), "nested deeper"},
  };
}

class SafetensorsMalformed : public testing::TestWithParam<Malformed> {};

TEST_P(SafetensorsMalformed, Rejected) {
  const Malformed& m = GetParam();
  try {
    qtc::io::parse(m.bytes, "bad.safetensors");
    FAIL() << "accepted a malformed file";
  } catch (const qtc::Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("bad.safetensors: ", 0), 0u) << what;  // names the file first
    EXPECT_NE(what.find(m.expected), std::string::npos) << "message: " << what << "\nexpected to contain: " << m.expected;
    EXPECT_EQ(what.find('\n'), std::string::npos) << "one line: " << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Table, SafetensorsMalformed, testing::ValuesIn(malformed_files()),
                         [](const testing::TestParamInfo<Malformed>& i) { return i.param.name; });

TEST(SafetensorsMalformedTable, HasAtLeastTwentyCases) { EXPECT_GE(malformed_files().size(), 20u); }

// Every truncation and every single-byte corruption of a valid file either parses or throws qtc::Error
// (never anything else, never a crash; the sanitizer build catches out-of-bounds reads).
TEST(SafetensorsFuzz, TruncationsAndByteFlips) {
  const auto good = qtc::io::serialize(sample_file());
  for (size_t n = 0; n < good.size(); ++n) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<long>(n));
    EXPECT_THROW(qtc::io::parse(cut, "cut"), qtc::Error) << "length " << n;
  }
  std::mt19937 rng(12345);
  for (size_t i = 0; i < good.size(); ++i) {
    for (int k = 0; k < 4; ++k) {
      auto bad = good;
      bad[i] = static_cast<uint8_t>(rng());
      try {
        (void)qtc::io::parse(bad, "flip");
      } catch (const qtc::Error&) {
      }
    }
  }
}

}  // namespace
