/// \file nvfp4_tile_order.cuh
/// \brief The tile order of the fast NVFP4 kernel (nvfp4_fast.cu): which tile a persistent CTA takes next.
#pragma once
#include <cstdint>

namespace qtc::cuda::nvfp4 {

/// The order in which the persistent CTAs take the tiles: linear index L (CTA b takes b, b + G, b + 2G, ...) ->
/// tile (ty, tx), in vertical strips of h tiles: the tiles of rows [h s, h s + h) are numbered column by column
/// (tx = 0: rows h s .. h s + h - 1, then tx = 1, ...), the last, shorter strip likewise; h = 1 is row-major.
/// With h = 8 (kDefaultStrip) or 16, the tiles whose outputs share a 64-byte DRAM word run at about the same time,
/// on nearby CTAs: a column's codes of two vertically adjacent tiles (32 bytes each), a column's scale bytes of 16
/// tiles (4 bytes each; one or two strips) and a row's scale bytes of 8 tiles side by side (8 bytes each, on CTAs
/// h apart). In
/// row-major order the halves of those words were written microseconds apart by CTAs tiles_x apart, and the L2
/// often wrote a half back first: a read-modify-write of the DRAM word, and the other half again later.
/// Tiles are visited through a cursor (L, st, r) with L = st * band + r, advanced by the grid size without a
/// division: full strips need only a shift and a mask (h a power of two) or one division by h; the last, shorter
/// strip one division by its height.
struct TileOrder {
  struct Cursor {
    uint32_t L, st, r;
  };
  uint32_t tiles_y, h, hshift, full_rows, full_end, band, step, step_q, step_r;
  bool pow2;
  __device__ TileOrder(uint32_t tx_n, uint32_t ty_n, uint32_t strip, uint32_t grid)
      : tiles_y(ty_n), h(strip), hshift(0), full_rows(ty_n / strip * strip), full_end(full_rows * tx_n),
        band(strip * tx_n), step(grid), step_q(grid / band), step_r(grid - grid / band * band),
        pow2((strip & (strip - 1)) == 0) {
    while ((1u << hshift) < strip) ++hshift;  // log2(h) when pow2 (h <= 64)
  }
  __device__ __forceinline__ Cursor start(uint32_t L) const { return Cursor{.L = L, .st = L / band, .r = L - L / band * band}; }
  // L += step. Tiles < 2^30 (fast_eligible) and step <= tiles: a cursor at most 3 steps past the last tile stays
  // below 2^32.
  __device__ __forceinline__ void advance(Cursor& c) const {
    c.L += step;
    c.st += step_q;
    c.r += step_r;
    if (c.r >= band) {
      c.r -= band;
      ++c.st;
    }
  }
  __device__ __forceinline__ void at(const Cursor& c, uint32_t& ty, uint32_t& tx) const {
    if (c.L < full_end) {
      if (pow2) {
        ty = (c.st << hshift) + (c.r & (h - 1));
        tx = c.r >> hshift;
      } else {
        const uint32_t q = c.r / h;
        ty = c.st * h + (c.r - q * h);
        tx = q;
      }
    } else {
      const uint32_t hl = tiles_y - full_rows, r = c.L - full_end, q = r / hl;
      ty = full_rows + (r - q * hl);
      tx = q;
    }
  }
};

}  // namespace qtc::cuda::nvfp4
