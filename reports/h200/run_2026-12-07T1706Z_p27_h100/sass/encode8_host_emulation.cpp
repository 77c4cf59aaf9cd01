// Host emulation of nvfp4_fast.cuh's encode8 (new version) vs encode_e2m1_rn over every float in each slot.
#include <cstdint>
#include <cstring>
#include <cmath>
#include <cstdio>
#include "qtc/numeric.hpp"
using u32 = uint32_t;
static inline float bf(u32 h) { u32 b = h << 16; float f; memcpy(&f, &b, 4); return f; }
static inline u32 fbits(float f) { u32 b; memcpy(&b, &f, 4); return b; }
static inline u32 to_bf_rn(float f) {  // non-NaN
  u32 u = fbits(f); u += 0x7FFFu + ((u >> 16) & 1u); return u >> 16;
}
static inline bool isnan_bf(u32 h) { return (h & 0x7FFF) > 0x7F80; }
static inline u32 hmin(u32 a, u32 b) {  // bf16 min, NaN-ignoring
  if (isnan_bf(a) && isnan_bf(b)) return 0x7FFF;
  if (isnan_bf(a)) return b; if (isnan_bf(b)) return a;
  return bf(a) <= bf(b) ? a : b;
}
static inline u32 hfma(u32 a, float s, float o) {
  if (isnan_bf(a)) return 0x7FFF;
  double v = (double)bf(a) * s + o; return to_bf_rn((float)v);
}
static inline u32 lanes(u32 lo, u32 hi) { return (lo & 0xFFFF) | (hi << 16); }
static inline u32 prmt(u32 a, u32 b, u32 sel) {
  uint8_t by[8]; for (int i = 0; i < 4; ++i) { by[i] = a >> (8*i); by[4+i] = b >> (8*i); }
  u32 d = 0;
  for (int i = 0; i < 4; ++i) { u32 n = (sel >> (4*i)) & 15; uint8_t v = by[n & 7]; if (n & 8) v = (v & 0x80) ? 0xFF : 0; d |= (u32)v << (8*i); }
  return d;
}
static inline u32 minu16x2(u32 a, u32 b) { u32 l = std::min(a & 0xFFFF, b & 0xFFFF), h = std::min(a >> 16, b >> 16); return l | (h << 16); }
static inline u32 mag2(u32 ra) {
  u32 r[2] = {ra & 0xFFFF, ra >> 16}, out[2];
  for (int k = 0; k < 2; ++k) {
    u32 a = hmin(r[k], 0x40C0);
    u32 c0 = hfma(a, 2.0f, 128.0f), c1 = hfma(a, 1.0f, 130.0f), c2 = hfma(a, 0.5f, 132.0f);
    out[k] = hmin(hmin(c0, c1), c2);
  }
  return lanes(out[0], out[1]);
}
static u32 encode8(const float y[8]) {
  u32 z[4], m[4];
  for (int j = 0; j < 4; ++j) {
    u32 u0 = fbits(y[j]), u1 = fbits(y[j+4]);
    z[j] = prmt(u0, u1, 0x7632);
    u32 low = prmt(u0, u1, 0x5410);
    u32 ra = (z[j] | minu16x2(low, 0x00010001u)) & 0x7FFF7FFFu;
    m[j] = mag2(ra);
  }
  const u32 kMagBias = 0x43004300u * 0x1111u;
  u32 mag = m[0] + m[1] * 16u + m[2] * 256u + m[3] * 4096u - kMagBias;
  u32 se = prmt(z[0], z[2], 0xFBD9u), so = prmt(z[1], z[3], 0xFBD9u);
  return mag | (se & 0x08080808u) | (so & 0x80808080u);
}
int main(int argc, char** argv) {
  const u32 kMul[8] = {1u, 2654435761u, 2246822519u, 3266489917u, 668265263u, 374761393u, 3432918353u, 461845907u};
  uint64_t n = argc > 1 ? strtoull(argv[1], 0, 0) : (1ull << 32), bad = 0;
  for (uint64_t i = 0; i < n; ++i) {
    float y[8]; u32 want = 0;
    for (int k = 0; k < 8; ++k) { u32 b = (u32)i * kMul[k]; memcpy(&y[k], &b, 4); want |= qtc::encode_e2m1_rn(y[k]) << (4*k); }
    u32 got = encode8(y);
    if (got != want) { if (bad < 10) printf("i=%llu got %08x want %08x\n", (unsigned long long)i, got, want); ++bad; }
  }
  printf("checked %llu, mismatches %llu\n", (unsigned long long)n, (unsigned long long)bad);
  return bad != 0;
}
