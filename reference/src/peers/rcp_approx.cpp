/// \file rcp_approx.cpp
/// \brief sm_90's rcp.approx.f32 from its measured exception table (qtc/rcp_approx.hpp): a small DEFLATE
///        (RFC 1951) decoder for the embedded table, which CMake turns into the byte array qtc_rcp_table
///        (reference/CMakeLists.txt), and the lookup.
#include "qtc/rcp_approx.hpp"

#include <array>
#include <bit>
#include <cstring>
#include <vector>

#include "qtc/error.hpp"

extern "C" const unsigned char qtc_rcp_table[];
extern "C" const unsigned long qtc_rcp_table_size;

namespace qtc {

namespace {

constexpr size_t kTableBytes = (size_t{1} << 23) / 4;  // 2 bits per mantissa

/// Bits of a raw DEFLATE stream, least significant first (RFC 1951 §3.1.1).
class BitReader {
 public:
  BitReader(const unsigned char* p, size_t n) : p_(p), n_(n) {}
  uint32_t bits(int need) {
    uint64_t v = buf_;
    while (cnt_ < need) {
      QTC_CHECK(pos_ < n_, "rcp_approx_sm90 table: the DEFLATE stream ends early (", n_, " bytes)");
      v |= static_cast<uint64_t>(p_[pos_++]) << cnt_;
      cnt_ += 8;
    }
    buf_ = v >> need;
    cnt_ -= need;
    return static_cast<uint32_t>(v & ((uint64_t{1} << need) - 1));
  }
  void align() { buf_ = 0, cnt_ = 0; }  // a stored block starts at a byte boundary

 private:
  const unsigned char* p_;
  size_t n_, pos_ = 0;
  uint64_t buf_ = 0;
  int cnt_ = 0;
};

/// A canonical Huffman code: how many codes of each length, and the symbols in code order.
struct Huffman {
  std::array<int, 16> count{};
  std::vector<int> symbol;
  Huffman(const int* lengths, int n) : symbol(static_cast<size_t>(n)) {
    for (int i = 0; i < n; ++i) ++count[static_cast<size_t>(lengths[i])];
    int placed = 0;
    for (int len = 1; len < 16; ++len)
      for (int i = 0; i < n; ++i)
        if (lengths[i] == len) symbol[static_cast<size_t>(placed++)] = i;
  }
  /// Reads one symbol: the codes of each length are consecutive integers, read most significant bit first.
  int decode(BitReader& br) const {
    int code = 0, first = 0, index = 0;
    for (int len = 1; len < 16; ++len) {
      code |= static_cast<int>(br.bits(1));
      const int c = count[static_cast<size_t>(len)];
      if (code - first < c) return symbol[static_cast<size_t>(index + code - first)];
      index += c;
      first = (first + c) << 1;
      code <<= 1;
    }
    QTC_CHECK(false, "rcp_approx_sm90 table: a DEFLATE code longer than 15 bits");
    return -1;
  }
};

constexpr std::array<int, 29> kLenBase = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                          31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr std::array<int, 29> kLenExtra = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
constexpr std::array<int, 30> kDistBase = {1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
                                           193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
constexpr std::array<int, 30> kDistExtra = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

/// Literals and matches of one compressed block, appended to `out`.
void inflate_block(BitReader& br, const Huffman& lit, const Huffman& dist, std::vector<uint8_t>& out) {
  for (;;) {
    const int s = lit.decode(br);
    if (s < 256) {
      out.push_back(static_cast<uint8_t>(s));
      continue;
    }
    if (s == 256) return;
    QTC_CHECK(s <= 285, "rcp_approx_sm90 table: DEFLATE length symbol ", s, " out of range");
    const auto li = static_cast<size_t>(s - 257);
    const int len = kLenBase[li] + static_cast<int>(br.bits(kLenExtra[li]));
    const int d = dist.decode(br);
    QTC_CHECK(d >= 0 && d < 30, "rcp_approx_sm90 table: DEFLATE distance symbol ", d, " out of range");
    const size_t back = static_cast<size_t>(kDistBase[static_cast<size_t>(d)]) + br.bits(kDistExtra[static_cast<size_t>(d)]);
    QTC_CHECK(back <= out.size(), "rcp_approx_sm90 table: a DEFLATE match reaches before the start");
    for (int i = 0; i < len; ++i) out.push_back(out[out.size() - back]);
  }
}

std::vector<uint8_t> inflate(const unsigned char* p, size_t n) {
  BitReader br(p, n);
  std::vector<uint8_t> out;
  out.reserve(kTableBytes);
  for (bool last = false; !last;) {
    last = br.bits(1) != 0;
    const uint32_t type = br.bits(2);
    if (type == 0) {  // stored
      br.align();
      const uint32_t len = br.bits(16), nlen = br.bits(16);
      QTC_CHECK((len ^ 0xFFFFu) == nlen, "rcp_approx_sm90 table: a stored DEFLATE block's length check fails");
      for (uint32_t i = 0; i < len; ++i) out.push_back(static_cast<uint8_t>(br.bits(8)));
    } else if (type == 1) {  // fixed codes (RFC 1951 §3.2.6)
      std::array<int, 288> l{};
      for (size_t i = 0; i < 288; ++i) l[i] = i < 144 ? 8 : i < 256 ? 9 : i < 280 ? 7 : 8;
      std::array<int, 30> dl{};
      dl.fill(5);
      inflate_block(br, Huffman(l.data(), 288), Huffman(dl.data(), 30), out);
    } else {  // dynamic codes (§3.2.7)
      QTC_CHECK(type == 2, "rcp_approx_sm90 table: DEFLATE block type 3");
      const int hlit = static_cast<int>(br.bits(5)) + 257, hdist = static_cast<int>(br.bits(5)) + 1, hclen = static_cast<int>(br.bits(4)) + 4;
      constexpr std::array<int, 19> order = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
      std::array<int, 19> cl{};
      for (int i = 0; i < hclen; ++i) cl[static_cast<size_t>(order[static_cast<size_t>(i)])] = static_cast<int>(br.bits(3));
      const Huffman clh(cl.data(), 19);
      std::vector<int> lengths;
      while (static_cast<int>(lengths.size()) < hlit + hdist) {
        const int s = clh.decode(br);
        int rep = 0, val = 0;
        if (s < 16) {
          lengths.push_back(s);
          continue;
        }
        if (s == 16) {
          QTC_CHECK(!lengths.empty(), "rcp_approx_sm90 table: DEFLATE repeats a code length before the first");
          val = lengths.back(), rep = 3 + static_cast<int>(br.bits(2));
        } else {
          rep = s == 17 ? 3 + static_cast<int>(br.bits(3)) : 11 + static_cast<int>(br.bits(7));
        }
        lengths.insert(lengths.end(), static_cast<size_t>(rep), val);
      }
      QTC_CHECK(static_cast<int>(lengths.size()) == hlit + hdist, "rcp_approx_sm90 table: DEFLATE code lengths overrun");
      inflate_block(br, Huffman(lengths.data(), hlit), Huffman(lengths.data() + hlit, hdist), out);
    }
  }
  return out;
}

const std::vector<uint8_t>& table() {
  static const std::vector<uint8_t> t = [] {
    std::vector<uint8_t> v = inflate(qtc_rcp_table, static_cast<size_t>(qtc_rcp_table_size));
    QTC_CHECK(v.size() == kTableBytes, "rcp_approx_sm90 table: inflated to ", v.size(), " bytes, not ", kTableBytes);
    return v;
  }();
  return t;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace

int rcp_approx_sm90_ulp(uint32_t mantissa) {
  mantissa &= 0x7FFFFFu;
  const int e = (table()[mantissa >> 2] >> (2 * (mantissa & 3u))) & 3;
  QTC_CHECK(e != 3, "rcp_approx_sm90 table: entry 3 at mantissa ", mantissa);
  return e == 2 ? -1 : e;
}

float rcp_approx_sm90(float b) {
  if (b != b) return std::bit_cast<float>(0x7FFFFFFFu);  // the GPU's canonical NaN (seen on the H100)
  const float rn = 1.0f / b;  // IEEE division: RN(1 / b); +-0 -> +-Inf, +-Inf -> +-0
  const uint32_t e = (bits_of(b) >> 23) & 0xFFu;
  if (e == 0 || e >= 127 + 126) return rn;  // b subnormal or |b| >= 2^126 (not tabled: RN), +-Inf -> +-0
  const uint32_t r = bits_of(rn) + static_cast<uint32_t>(rcp_approx_sm90_ulp(bits_of(b)));  // +-1 on the magnitude bits
  float out;
  std::memcpy(&out, &r, 4);
  return out;
}

}  // namespace qtc
