/// \file safetensors.cpp
/// \brief safetensors reader and writer: every field of the header is checked before any byte is used.
#include "qtc/safetensors.hpp"

#include <algorithm>
#include <cerrno>
#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <unordered_set>
#include <sstream>

#include "qtc/error.hpp"
#include "qtc/output_file.hpp"
#include "qtc/untrusted.hpp"

namespace qtc::io {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian; big-endian hosts are not supported");

namespace {

using json = nlohmann::json;

struct DtypeInfo {
  std::string_view name;
  size_t size;
};
// NOTES: the dtype names of the safetensors library (Rust `Dtype`), plus F8_E8M0 that TE and torch write.
constexpr DtypeInfo kDtypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E8M0", 1},
    {"U16", 2},  {"I16", 2}, {"F16", 2}, {"BF16", 2},    {"U32", 4},     {"I32", 4},
    {"F32", 4},  {"U64", 8}, {"I64", 8}, {"F64", 8},
};
constexpr std::string_view kSubByteDtypes[] = {"F4", "F6_E2M3", "F6_E3M2"};

std::string quote_name(std::string_view s) { return printable_name(s); }

[[noreturn]] void fail(const std::string& source, const std::string& problem) {
  throw Error(source + ": invalid safetensors file: " + problem);
}

/// Reads a JSON value that must be a non-negative integer fitting in int64.
int64_t as_index(const json& v, const std::string& source, const std::string& what) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(source, what + " " + std::to_string(u) + " does not fit in int64");
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) fail(source, what + " is negative (" + std::to_string(v.get<int64_t>()) + ")");
  if (v.is_number_float()) fail(source, what + " is not an integer (" + v.dump() + ")");
  fail(source, what + " is not a number (" + std::string(v.type_name()) + ")");
}

/// Duplicate-key and depth checks, in one pass over the header text before it is parsed into a json value
/// (nlohmann keeps the last of duplicate keys silently). A SAX handler that builds nothing: linear in the
/// header's size. (The parser callback used before made nlohmann search the parent object for a discarded
/// value at the end of every child object: quadratic in the number of tensors.)
struct HeaderChecker : nlohmann::json_sax<json> {
  const std::string& source;
  std::vector<std::unordered_set<std::string>> keys;  // one set per open object
  std::vector<bool> is_object;                        // per open container
  std::string error;                                  // the JSON parser's message on a syntax error

  explicit HeaderChecker(const std::string& s) : source(s) {}
  bool open(bool object) {
    if (is_object.size() >= static_cast<size_t>(kMaxJsonDepth))
      fail(source, "header JSON is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    is_object.push_back(object);
    if (object) keys.emplace_back();
    return true;
  }
  bool close() {
    if (!is_object.empty()) {
      if (is_object.back()) keys.pop_back();
      is_object.pop_back();
    }
    return true;
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    if (!keys.empty() && !keys.back().insert(k).second)
      fail(source, "duplicate key " + quote_name(k) + (keys.size() == 1 ? " (tensor names must be unique)" : ""));
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error = e.what();
    return false;
  }
};

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

struct Entry {
  Tensor tensor;
  int64_t begin = 0;
  int64_t end = 0;
};

Entry parse_entry(const std::string& name, const json& v, const std::string& source) {
  const std::string where = "tensor " + quote_name(name);
  if (name.empty()) fail(source, "a tensor has an empty name");
  if (!v.is_object()) fail(source, where + ": entry is a JSON " + std::string(v.type_name()) + ", not an object");
  for (const auto& [k, _] : v.items())
    if (k != "dtype" && k != "shape" && k != "data_offsets") fail(source, where + ": unknown field " + quote_name(k));
  for (const char* k : {"dtype", "shape", "data_offsets"})
    if (!v.contains(k)) fail(source, where + ": missing field '" + k + "'");

  Entry e;
  e.tensor.name = name;
  const json& dt = v["dtype"];
  if (!dt.is_string()) fail(source, where + ": 'dtype' is not a string");
  e.tensor.dtype = dt.get<std::string>();
  if (std::find(std::begin(kSubByteDtypes), std::end(kSubByteDtypes), e.tensor.dtype) != std::end(kSubByteDtypes))
    fail(source, where + ": sub-byte dtype " + quote_name(e.tensor.dtype) + " is not supported");
  const auto esize = dtype_size(e.tensor.dtype);
  if (!esize) fail(source, where + ": unknown dtype " + quote_name(e.tensor.dtype));

  const json& sh = v["shape"];
  if (!sh.is_array()) fail(source, where + ": 'shape' is not an array");
  int64_t numel = 1;
  for (size_t i = 0; i < sh.size(); ++i) {
    const json& d = sh[i];
    if (d.is_number_integer() && !d.is_number_unsigned())
      fail(source, where + ": negative dimension " + std::to_string(d.get<int64_t>()) + " in shape");
    const int64_t n = as_index(d, source, where + ": shape[" + std::to_string(i) + "]");
    e.tensor.shape.push_back(n);
  }
  bool zero = false;
  for (int64_t n : e.tensor.shape) zero = zero || n == 0;
  if (!zero) {
    for (int64_t n : e.tensor.shape) {
      const auto p = mul_nonneg(numel, n);
      if (!p) fail(source, where + ": the element count of shape " + sh.dump() + " overflows int64");
      numel = *p;
    }
  } else {
    numel = 0;
  }
  const auto nb = mul_nonneg(numel, static_cast<int64_t>(*esize));
  if (!nb) fail(source, where + ": the byte count of shape " + sh.dump() + " overflows int64");
  const int64_t nbytes = *nb;

  const json& off = v["data_offsets"];
  if (!off.is_array() || off.size() != 2) fail(source, where + ": 'data_offsets' is not an array of two integers");
  e.begin = as_index(off[0], source, where + ": data_offsets[0]");
  e.end = as_index(off[1], source, where + ": data_offsets[1]");
  if (e.begin > e.end)
    fail(source, where + ": data_offsets begin " + std::to_string(e.begin) + " > end " + std::to_string(e.end));
  if (e.end - e.begin != nbytes)
    fail(source, where + ": dtype " + e.tensor.dtype + " and shape " + sh.dump() + " need " + std::to_string(nbytes) +
                     " bytes, data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] hold " +
                     std::to_string(e.end - e.begin));
  return e;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Tensor and File

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool is_byte_dtype(std::string_view d) { return d == "U8" || d == "F8_E4M3" || d == "F8_E5M2" || d == "F8_E8M0"; }

bool Tensor::is_byte_tensor() const { return is_byte_dtype(dtype); }

float Tensor::f32(int64_t i) const {
  QTC_CHECK(dtype == "F32", "tensor '", name, "' is ", dtype, ", not F32");
  QTC_CHECK(i >= 0 && static_cast<size_t>(i) * 4 + 4 <= bytes.size(), "tensor '", name, "': index ", i, " out of range");
  float v;
  std::memcpy(&v, bytes.data() + static_cast<size_t>(i) * 4, 4);
  return v;
}

const Tensor* File::find(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const Tensor& File::at(std::string_view name) const {
  const Tensor* t = find(name);
  QTC_CHECK(t != nullptr, "no tensor named '", name, "'");
  return *t;
}

void File::put(Tensor t) {
  for (auto& u : tensors)
    if (u.name == t.name) {
      u = std::move(t);
      return;
    }
  tensors.push_back(std::move(t));
}

std::optional<size_t> dtype_size(std::string_view dtype) {
  for (const auto& d : kDtypes)
    if (d.name == dtype) return d.size;
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------------
// Reader

namespace {

/// Checks the 8-byte header length `n` against the file's size.
void check_header_length(uint64_t n, uint64_t file_size, const std::string& source) {
  const uint64_t avail = file_size - 8;
  if (n > kMaxHeaderBytes)
    fail(source, "header length " + std::to_string(n) + " is absurd (limit " + std::to_string(kMaxHeaderBytes) + " bytes)");
  if (n > avail)
    fail(source, "header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(avail) +
                     " bytes follow the length; truncated?)");
  if (n < 2) fail(source, "header length " + std::to_string(n) + " is too short for a JSON object");
}

/// The parsed header: metadata, and the entries checked to tile a data area of `data_size` bytes exactly.
struct Header {
  std::map<std::string, std::string> metadata;
  std::vector<Entry> entries;
};

Header parse_header(std::span<const uint8_t> text, uint64_t data_size_u, const std::string& source) {
  const char* hb = reinterpret_cast<const char*>(text.data());
  const size_t n = text.size();
  // The JSON parser stops at a NUL byte as if the text ended there: refuse NULs, and any padding but spaces.
  if (const void* z = std::memchr(hb, 0, n); z != nullptr)
    fail(source, "header holds a NUL byte at offset " + std::to_string(static_cast<const char*>(z) - hb) +
                     " (only spaces may pad the header)");
  size_t end = n;
  while (end > 0 && hb[end - 1] == ' ') --end;
  if (end > 0 && (hb[end - 1] == '\t' || hb[end - 1] == '\n' || hb[end - 1] == '\r')) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned>(static_cast<unsigned char>(hb[end - 1])));
    fail(source, std::string("header is padded with byte ") + buf + " at offset " + std::to_string(end - 1) +
                     " (only spaces may pad the header)");
  }
  json header;
  {
    HeaderChecker check(source);
    if (!json::sax_parse(hb, hb + end, &check, nlohmann::detail::input_format_t::json, /*strict=*/true, /*ignore_comments=*/false))
      fail(source, "header is not valid JSON: " + check.error);
  }
  try {
    header = json::parse(hb, hb + end, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    fail(source, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail(source, "header is a JSON " + std::string(header.type_name()) + ", not an object");

  Header h;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) fail(source, "'__metadata__' is a JSON " + std::string(value.type_name()) + ", not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string())
          fail(source, "metadata value of " + quote_name(mk) + " is a JSON " + std::string(mv.type_name()) + ", not a string");
        h.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    h.entries.push_back(parse_entry(key, value, source));
  }

  // The tensors must tile the data area exactly: no overlap, no gap, nothing after the last one.
  const int64_t data_size = static_cast<int64_t>(data_size_u);
  std::vector<size_t> order(h.entries.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::pair(h.entries[a].begin, h.entries[a].end) < std::pair(h.entries[b].begin, h.entries[b].end);
  });
  int64_t pos = 0;
  const Entry* prev = nullptr;
  for (size_t i : order) {
    const Entry& e = h.entries[i];
    const std::string where = "tensor " + quote_name(e.tensor.name) + " data_offsets [" + std::to_string(e.begin) + ", " +
                              std::to_string(e.end) + "]";
    if (e.end > data_size)
      fail(source, where + " run past the end of the data area (" + std::to_string(data_size) + " bytes; truncated?)");
    if (e.begin < pos)
      fail(source, where + " overlap tensor " + quote_name(prev->tensor.name) + " (ends at " + std::to_string(pos) + ")");
    if (e.begin > pos)
      fail(source, where + " leave a gap of " + std::to_string(e.begin - pos) + " bytes before them (at " +
                       std::to_string(pos) + ")");
    pos = e.end;
    prev = &e;
  }
  if (pos != data_size)
    fail(source, "the tensors cover " + std::to_string(pos) + " bytes of the data area but it holds " +
                     std::to_string(data_size) + " (trailing bytes)");
  return h;
}

/// Moves the entries' tensors, with their bytes from `data`, into a File sorted by name.
File assemble(Header&& h, const uint8_t* data) {
  File f;
  f.metadata = std::move(h.metadata);
  for (auto& e : h.entries) {
    if (e.end > e.begin) e.tensor.bytes.assign(data + e.begin, data + e.end);
    f.tensors.push_back(std::move(e.tensor));
  }
  std::sort(f.tensors.begin(), f.tensors.end(), [](const Tensor& a, const Tensor& b) { return a.name < b.name; });
  return f;
}

}  // namespace

File parse(std::span<const uint8_t> bytes, const std::string& source) {
  if (bytes.size() < 8)
    fail(source, "file is " + std::to_string(bytes.size()) + " bytes, shorter than the 8-byte header length");
  const uint64_t n = read_le64(bytes.data());
  check_header_length(n, bytes.size(), source);
  Header h = parse_header(bytes.subspan(8, static_cast<size_t>(n)), bytes.size() - 8 - n, source);
  return assemble(std::move(h), bytes.data() + 8 + n);
}

File read_file(const std::filesystem::path& path) {
  const std::string source = path.string();
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec && ec.value() == ELOOP) throw Error(source + ": cannot read: symlink loop (" + ec.message() + ")");
  if (ec || !std::filesystem::exists(st)) throw Error(source + ": cannot read: no such file");
  if (std::filesystem::is_directory(st)) throw Error(source + ": cannot read: is a directory");
  if (!std::filesystem::is_regular_file(st)) throw Error(source + ": cannot read: not a regular file");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw Error(source + ": cannot read: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(source + ": cannot open for reading");
  // Sizes first: the header length against the file size, then the header against the data area, and only
  // then the data the header declares (a huge or sparse file is refused before anything big is read).
  uint8_t len[8] = {};
  in.read(reinterpret_cast<char*>(len), 8);
  if (static_cast<size_t>(in.gcount()) < 8 || size < 8)
    fail(source, "file is " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  const uint64_t n = read_le64(len);
  check_header_length(n, size, source);
  std::vector<uint8_t> text(static_cast<size_t>(n));
  in.read(reinterpret_cast<char*>(text.data()), static_cast<std::streamsize>(n));
  if (static_cast<uint64_t>(in.gcount()) != n) throw Error(source + ": read error (file changed while reading?)");
  const uint64_t data_size = size - 8 - n;
  Header h = parse_header(text, data_size, source);
  check_fits_in_memory(data_size, source + ": the data area of the file");
  // The entries tile the data area: read each tensor's bytes straight into it, in file order.
  std::vector<Entry*> order;
  for (Entry& e : h.entries) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  for (Entry* e : order) {
    const uint64_t nb = static_cast<uint64_t>(e->end - e->begin);
    try {
      e->tensor.bytes.resize(static_cast<size_t>(nb));
    } catch (const std::bad_alloc&) {
      throw Error(source + ": cannot allocate " + bytes_text(nb) + " for tensor " + quote_name(e->tensor.name) + " (resource limit)");
    }
    in.read(reinterpret_cast<char*>(e->tensor.bytes.data()), static_cast<std::streamsize>(nb));
    if (static_cast<uint64_t>(in.gcount()) != nb) throw Error(source + ": read error (file changed while reading?)");
  }
  File f;
  f.metadata = std::move(h.metadata);
  for (auto& e : h.entries) f.tensors.push_back(std::move(e.tensor));
  std::sort(f.tensors.begin(), f.tensors.end(), [](const Tensor& a, const Tensor& b) { return a.name < b.name; });
  return f;
}

// ---------------------------------------------------------------------------------------------------
// Writer

std::vector<uint8_t> serialize(const File& file) {
  std::vector<const Tensor*> sorted;
  for (const auto& t : file.tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](const Tensor* a, const Tensor* b) { return a->name < b->name; });
  for (size_t i = 0; i < sorted.size(); ++i) {
    const Tensor& t = *sorted[i];
    QTC_CHECK(!t.name.empty(), "safetensors write: a tensor has an empty name");
    QTC_CHECK(t.name != "__metadata__", "safetensors write: '__metadata__' is not a tensor name");
    QTC_CHECK(i == 0 || sorted[i - 1]->name != t.name, "safetensors write: duplicate tensor name '", t.name, "'");
    const auto es = dtype_size(t.dtype);
    QTC_CHECK(es.has_value(), "safetensors write: tensor '", t.name, "': unknown dtype '", t.dtype, "'");
    for (int64_t d : t.shape) QTC_CHECK(d >= 0, "safetensors write: tensor '", t.name, "': negative dimension");
    QTC_CHECK(static_cast<size_t>(t.numel()) * *es == t.bytes.size(), "safetensors write: tensor '", t.name, "': ",
              t.bytes.size(), " bytes do not match dtype ", t.dtype, " and its shape");
  }

  json header = json::object();
  if (!file.metadata.empty()) {
    json md = json::object();
    for (const auto& [k, v] : file.metadata) md[k] = v;
    header["__metadata__"] = md;
  }
  uint64_t offset = 0;
  for (const Tensor* t : sorted) {
    json shape = json::array();
    for (int64_t d : t->shape) shape.push_back(d);
    const uint64_t end = offset + t->bytes.size();
    header[t->name] = {{"dtype", t->dtype}, {"shape", shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();  // keys sorted (std::map): deterministic
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');

  std::vector<uint8_t> out;
  out.reserve(8 + text.size() + offset);
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), text.begin(), text.end());
  for (const Tensor* t : sorted) out.insert(out.end(), t->bytes.begin(), t->bytes.end());
  return out;
}

void write_file(const std::filesystem::path& path, const File& file) {
  // Refuses a path that is not absent or a regular file, writes through a temporary in the same directory that
  // is removed when the write fails (output_file.hpp).
  write_output_file(path, serialize(file));
}

// ---------------------------------------------------------------------------------------------------
// Matrices

Tensor from_matrix(std::string name, const HostMatrix& m) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = std::string(dtype_name(m.dtype));
  t.shape = {m.rows, m.cols};
  t.bytes = m.bytes;
  return t;
}

HostMatrix to_matrix(const Tensor& t) {
  QTC_CHECK(t.shape.size() == 2, "tensor '", t.name, "' has ", t.shape.size(), " dimensions, not 2");
  DType d;
  if (t.dtype == "F32")
    d = DType::kF32;
  else if (t.dtype == "BF16")
    d = DType::kBF16;
  else if (t.dtype == "F16")
    d = DType::kF16;
  else if (t.is_byte_tensor())
    d = DType::kU8;
  else
    QTC_FAIL("tensor '", t.name, "' has dtype ", t.dtype, "; expected F32, BF16, F16 or a byte type");
  QTC_CHECK(t.shape[0] >= 0 && t.shape[1] >= 0 && static_cast<size_t>(t.numel()) * qtc::dtype_size(d) == t.bytes.size(),
            "tensor '", t.name, "': byte count does not match its shape");
  HostMatrix m;
  m.dtype = d;
  m.rows = t.shape[0];
  m.cols = t.shape[1];
  m.bytes = t.bytes;
  return m;
}

Tensor from_f32(std::string name, std::span<const float> values, std::vector<int64_t> shape) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = "F32";
  t.shape = shape.empty() ? std::vector<int64_t>{static_cast<int64_t>(values.size())} : std::move(shape);
  QTC_CHECK(t.numel() == static_cast<int64_t>(values.size()), "tensor '", t.name, "': shape does not match ",
            values.size(), " values");
  t.bytes.resize(values.size() * 4);
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

}  // namespace qtc::io
