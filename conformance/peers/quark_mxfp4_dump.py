#!/usr/bin/env python3
"""Dump MXFP4 vectors (VECTORS.md, schema 1, recipe `mxfp4`, profile `quark`, scale_rule `even`) of amd-quark's
`qdq_mxfp4`, from a NumPy reading of its kernel.

What vLLM's Quark OCP MX scheme runs for MXFP4 activations is `quark.torch.kernel.mx.qdq_mxfp4(x, "even")`, which
(QUARK_MXFP4_IMPL "hip", the default) is `kernel_ext.qdq_mxfp4(x, 32)`: the `qdq_mxfp4_kernel` template of
quark/torch/kernel/hw_emulation/csrc/mxfp4/fake_kernels.cuh (amd-quark 0.13 on PyPI; the same kernel at amd/Quark
1d27b558). It takes BF16 / F16 only and has no CPU implementation (python_function_export.cpp: "qdq_mxfp4 is only
implemented in CUDA devices!"), so it cannot run here: this script re-states the kernel step by step in NumPy on the
16-bit patterns, independently of qtc's C++ (reference/include/qtc/mxfp4_codec.hpp, written from the same reading).
Each vector's `source` says so. The CUDA build's intrinsics are read from CUDA 13.0's cuda_fp16.hpp / cuda_bf16.hpp.

The kernel (one thread per element, a warp per block of 32 consecutive elements; T = BF16 or F16, mbits 7 / 10):

* block_max = habs(x), then five butterfly rounds hmax(block_max, habs(shfl_xor(block_max, i))): __hmax returns the
  other operand for a NaN and T's canonical NaN 0x7FFF when both are NaN, so a NaN is ignored unless the whole block
  is NaN.
* block_max = (bits + (1 << (mbits - 2))) & sign_exponent_mask on T's 16 bits: a mantissa of 0.75 or more rounds up
  (torchao's EVEN); T's largest binade can round to Inf; 0x7FFF carries into the sign bit (-0).
* scale_exp = max(0, 127 + min(int_rn(hfloor(hlog2(block_max))) - 2, 127)) as uint8. block_max is 0, a power of two
  or Inf, so hlog2 is exact (lg2.approx of a power of two, rounded to T), -Inf or Inf; __float2int_rn saturates
  -Inf to INT_MIN and Inf to INT_MAX. INT_MIN - 2 overflows int in the C++ expression (undefined); nvcc 13.0 -O3
  compiles it for sm_90 to add.s32 -2, min.s32 127, add.s32 127, max.s32 0 (its PTX, read on this machine), which
  wraps: INT_MAX - 1, so zero blocks, all-NaN blocks and blocks whose max rounds to 0 get scale_exp 254 (int32
  arithmetic below).
* scale = T(powf(2, scale_exp - 127)) (F16: Inf for 254, 0 below 2^-25; BF16: exact for every byte).
* elem = __hdiv(x, scale) in T: the exact quotient rounded to T for a power-of-two scale (BF16: div.approx.f32 with
  its |b| >= 2^126 pre-scale; F16: rcp.approx.ftz * x); x / 0 = +-Inf, 0 / 0 and Inf / Inf = the GPU's NaN (positive,
  0x7FFF in T), x / Inf = +-0.
* elem_fp4 = fp16_to_fp4_simulate(elem): the kernel's bit arithmetic (round close / away / tie on the tail below the
  one kept mantissa bit, the lowest exponent bit standing in for the implicit one; exponent clamped to E2M1's range,
  the mantissa forced to 1 past it), re-stated below.
* out = __hmul(elem_fp4, scale) in T: the kernel's only output.

The vector holds what the kernel computes inside: the scale byte scale_exp and the E2M1 code of elem_fp4 (every
elem_fp4 is asserted to lie on the E2M1 grid), packed as VECTORS.md says, and the dequantized planes as VECTORS.md
defines them, 2^(e-127) * E2M1 in float32. For BF16 input that is the kernel's output bit for bit (asserted here);
for F16 input it is where T(2^(e-127)) is exact, and the script counts the elements of the blocks with byte 254 (F16
input reaches 111..140 and 254 only), where the kernel outputs 0 * Inf = NaN and 6 * Inf = Inf instead (printed, not
written): qdq_mxfp4 turns an F16 block of zeros into NaN.

Shapes have M and K multiples of 32, so the kernel's blocks of 32 consecutive elements are qtc's blocks of both
planes (the columnwise plane is the kernel run on x.T.contiguous()), and numel is a multiple of 64 as it requires.

    python3 conformance/peers/quark_mxfp4_dump.py OUT_DIR      (writes OUT_DIR/*.safetensors)
    build/conformance/qtc verify OUT_DIR

Needs: numpy. Deterministic (fixed seeds).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engines_mxfp4_dump import CASES, decode, family, pack, save, to_input  # noqa: E402

INT_MIN, INT_MAX = -(2 ** 31), 2 ** 31 - 1
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


class T16:
    """A 16-bit float type of the kernel: its bit fields and conversions from float32 (RN-even)."""

    def __init__(self, name):
        self.name = name
        self.mbits, self.ebits, self.bias = (7, 8, 127) if name == "bf16" else (10, 5, 15)
        self.val_to_add = 1 << (self.mbits - 1 - 1)
        self.sign_exp_mask = ((1 << (self.ebits + 1)) - 1) << self.mbits

    def to_f32(self, h):
        h = np.asarray(h, np.uint16)
        if self.name == "bf16":
            return (h.astype(np.uint32) << 16).view(np.float32)
        return h.view(np.float16).astype(np.float32)

    def from_f32(self, f):
        """float32 -> T bits, RN-even; any NaN -> T's canonical NaN 0x7FFF (what the GPU's arithmetic yields)."""
        f = np.asarray(f, np.float32)
        if self.name == "bf16":
            u = f.view(np.uint32).astype(np.uint64)
            r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        else:
            with np.errstate(over="ignore"):
                r = f.astype(np.float16).view(np.uint16)
        return np.where(np.isnan(f), np.uint16(0x7FFF), r).astype(np.uint16)


def hmax(t, a, b):
    """__hmax on T bits: NaN operands are dropped; two NaNs give the canonical NaN."""
    fa, fb = t.to_f32(a), t.to_f32(b)
    na, nb = np.isnan(fa), np.isnan(fb)
    pick_a = (fa >= fb) | nb
    r = np.where(pick_a, a, b)
    return np.where(na & nb, np.uint16(0x7FFF), np.where(na, b, r)).astype(np.uint16)


def fp4_simulate(t, v):
    """fp16_to_fp4_simulate on T bits `v` (int64 arithmetic; the kernel's int16 / uint16 values stay in range)."""
    v = v.astype(np.int64)
    m = t.mbits
    exp = (v >> m) & ((1 << t.ebits) - 1)
    sign = (v >> 15) & 1
    mant_last = (v >> (m - 1)) & 1
    new_exp = exp - t.bias + 1  # E2M1's bias is 1
    exp_shift = np.where(new_exp <= 0, 1 - new_exp, 0)
    tail_bits = np.minimum(16, m - 1 + exp_shift)
    mant_plus_one = v & ((1 << (m + 1)) - 1)
    half = np.int64(1) << (tail_bits - 1)
    tail = mant_plus_one & ((np.int64(1) << tail_bits) - 1)
    close, away, tie = tail < half, tail > half, tail == half
    mant_close = np.where(new_exp > 0, mant_last, 0)
    exp_close = exp
    mant_away = ((new_exp > 0) & (mant_last == 0)).astype(np.int64)
    exp_away = exp + ((new_exp <= 0) | (mant_last == 1)).astype(np.int64)
    tie_to_zero_exp = t.bias - 1 - 1  # T's biased exponent of 0.25, the midpoint below E2M1's 0.5
    max_exp = t.bias + 2              # T's biased exponent of E2M1's top binade [4, 6]
    exp_tie = np.where(exp > tie_to_zero_exp, exp + (mant_last == 1), 0)
    out_exp = away * exp_away + close * exp_close + tie * exp_tie
    out_mant = away * mant_away + close * mant_close
    out_mant = out_mant + ((out_exp > max_exp) & (out_mant == 0))
    out_exp = np.where(out_exp >= tie_to_zero_exp, np.clip(out_exp, tie_to_zero_exp, max_exp), 0)
    return ((sign << 15) + (out_exp << m) + (out_mant << (m - 1))).astype(np.uint16)


def qdq(t, h):
    """The kernel on [rows, len] T bits (len % 32 == 0): (out bits, scale bytes [rows, len / 32], elem_fp4 bits)."""
    r, n = h.shape
    blk = h.reshape(r, n // 32, 32)
    lane = np.arange(32)
    bm = blk & 0x7FFF
    for i in (1, 2, 4, 8, 16):
        bm = hmax(t, bm, bm[..., lane ^ i] & 0x7FFF)
    assert (bm == bm[..., :1]).all()  # every lane holds the block's max
    bm = bm[..., 0].astype(np.uint32)
    rounded = ((bm + t.val_to_add) & t.sign_exp_mask & 0xFFFF).astype(np.uint16)
    with np.errstate(divide="ignore"):
        lg = np.log2(np.abs(t.to_f32(rounded).astype(np.float64)))  # 0 -> -Inf; powers of two exact
    lg = t.to_f32(t.from_f32(np.floor(lg).astype(np.float32)))  # hfloor(hlog2(.)) in T
    as_int = np.where(np.isneginf(lg), INT_MIN, np.where(np.isposinf(lg), INT_MAX, np.nan_to_num(lg))).astype(np.int64)
    wrapped = ((as_int - 2 - INT_MIN) % 2 ** 32) + INT_MIN  # add.s32: INT_MIN - 2 wraps to INT_MAX - 1
    scale_exp = np.maximum(0, 127 + np.minimum(wrapped, 127)).astype(np.uint8)
    scale_f32 = np.ldexp(np.float32(1.0), scale_exp.astype(np.int32) - 127).astype(np.float32)
    scale = t.from_f32(scale_f32)
    s = t.to_f32(scale)[..., None]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        elem = t.from_f32(t.to_f32(blk) / s)
        e4 = fp4_simulate(t, elem)
        out = t.from_f32(t.to_f32(e4) * s)
    return out.reshape(r, n), scale_exp, e4.reshape(r, n), (scale_f32 != t.to_f32(scale))


def codes_of(t, e4):
    """E2M1 codes of elem_fp4 values (asserted on the grid)."""
    f = t.to_f32(e4)
    mag = np.abs(f.astype(np.float64))
    idx = np.searchsorted(E2M1, mag)
    assert (idx < 8).all() and (E2M1[np.minimum(idx, 7)] == mag).all(), "elem_fp4 off the E2M1 grid"
    return (idx | (np.signbit(f).astype(np.int64) << 3)).astype(np.uint8)


def plane(t, h):
    """-> codes, bytes, and (kernel output == decode where T's scale is exact; the count of other elements)."""
    out, sb, e4, inexact = qdq(t, h)
    c = codes_of(t, e4)
    dec = decode(c, sb)
    exact = ~np.repeat(inexact, 32, axis=1)
    got = t.to_f32(out)
    same = (got.view(np.uint32) == dec.view(np.uint32)) | (np.isnan(got) & np.isnan(dec))
    assert same[exact].all(), f"kernel output differs from the decode where T's scale is exact ({t.name})"
    return c, sb, int((~exact).sum())


# The F16-specific blocks (BF16 too): subnormal maxima around 0.75 * 2^-14, maxima in F16's top binade, tiny values.
def f16_range(m, k, seed):
    g = np.random.default_rng(seed)
    x = g.standard_normal((m, k)).astype(np.float32)
    for i in range(m):
        for b in range(k // 32):
            kind = int(g.integers(0, 4))
            blk = x[i, 32 * b:32 * b + 32]
            if kind == 0:  # F16 subnormals: block max mantissa just below, at or above 0x300
                mx = float(int(g.choice([0x2FF, 0x300, 0x301, 0x3FF, 0x100]))) * 2.0 ** -24
                blk[:] = np.clip(blk, -1, 1) * mx
                blk[int(g.integers(0, 32))] = mx
            elif kind == 1:  # the top binade: max at / above 1.75 * 2^15 rounds to Inf in F16
                mx = float(g.choice([57312.0, 57344.0, 65504.0, 49152.0]))
                blk[:] = np.clip(blk, -1, 1) * mx
                blk[int(g.integers(0, 32))] = -mx
            elif kind == 2:  # ordinary scale, some elements far below it
                blk[::3] *= np.float32(2.0 ** -20)
    return x


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    cases = list(CASES) + [("f16_range", (32, 64))]
    n = left = 0
    for ci, (fam, (m, k)) in enumerate(cases):
        for di, dt in enumerate(("bf16", "f16")):
            seed = 26000 + 10 * ci + di
            x = f16_range(m, k, seed) if fam == "f16_range" else family(fam, m, k, seed)
            raw, _, st = to_input(x, dt)
            t = T16(dt)
            bits = np.ascontiguousarray(raw).view(np.uint16)  # F16 arrives as float16, BF16 as its bits
            c, s, nr = plane(t, bits)
            ct, stt, nc = plane(t, np.ascontiguousarray(bits.T))
            left += nr + nc
            tensors = {"x": (raw, st), "rowwise_data": (pack(c), "U8"), "rowwise_scale_inv": (s, "U8"),
                       "dequantized_rowwise": (decode(c, s), "F32"), "columnwise_data": (pack(ct), "U8"),
                       "columnwise_scale_inv": (stt, "U8"),
                       "dequantized_columnwise": (np.ascontiguousarray(decode(ct, stt).T), "F32")}
            md = {"qtc.schema": "1", "recipe": "mxfp4", "profile": "quark", "scale_rule": "even", "case.family": fam,
                  "source": "amd-quark 0.13 qdq_mxfp4 (hw_emulation/csrc/mxfp4/fake_kernels.cuh qdq_mxfp4_kernel, "
                            "scale_calculation_mode even, CUDA build), not run (GPU only): a NumPy "
                            f"{np.__version__} reading of the kernel on the 16-bit patterns "
                            "(conformance/peers/quark_mxfp4_dump.py), written independently of qtc; codes and bytes "
                            "are its elem_fp4 and scale_exp, zero and all-NaN blocks scale_exp 254 (its INT_MIN - 2 "
                            "wraps as nvcc 13.0 compiles it)"}
            save(os.path.join(out, f"mxfp4_quark_even_{dt}_{fam}_{m}x{k}.safetensors"), tensors, md)
            n += 1
    print(f"{n} vectors written to {out}; {left} F16 elements in blocks of byte 254, where the kernel's own output "
          "(0 * Inf, 6 * Inf) is not the decode")
    return 0


if __name__ == "__main__":
    sys.exit(main())
