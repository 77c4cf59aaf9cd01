#!/usr/bin/env python3
"""Dump MXFP4 vectors (VECTORS.md, schema 1, recipe `mxfp4`) of two inference-engine quantizers that run only on a
GPU, from faithful NumPy readings of their code: profile `triton_kernels` (OUT/triton_kernels) and profile
`vllm_cutlass` (OUT/vllm_cutlass, below); and FBGEMM's MX4 reference (profile `fbgemm`, OUT/fbgemm, below), which
needs fbgemm_gpu and torch: re-stated in NumPy as well.

triton_kernels: a faithful NumPy reading of triton_kernels' `_downcast_to_mxfp` Triton kernel (triton-lang/triton,
python/triton_kernels/triton_kernels/numerics_details/mxfp_details/_downcast_to_mxfp.py, `_compute_quant_and_scale`),
the quantizer behind `downcast_to_mxfp(x, torch.uint8, axis)` that vLLM's gpt-oss MoE path calls.

The kernel runs only under Triton on a GPU, so this script is NOT the implementation: it re-states the kernel's
arithmetic step by step in NumPy, on the bits, independently of qtc's C++ (which is written from the same reading,
reference/include/qtc/mxfp4_codec.hpp). Each vector's `source` says so. What it re-states (sm_90 path, the path
below sm_100; sm_100 converts with cvt.rn.satfinite.e2m1x2.f32 instead, the same codes but for a NaN's sign):

* per block of 32 along the quantization axis: amax = tl.max(|x|) in float32. tl.max lowers to max.f32, which
  drops a NaN operand: a NaN is ignored unless every element of the block is NaN (np.fmax.reduce).
* DEQUANT_SCALE_ROUNDING_MODE ROUND_UP (qtc scale_rule `rceil`): ds = amax / 6; bits = (bits(ds) + 0x7FFFFF) &
  0x7F800000. ROUND_DOWN (`ocp_floor`): ds = amax / 4 (`_get_max_power_of_2_quant_val`); bits = bits(ds) &
  0x7F800000. Scale byte = bits >> 23. Triton's fp32 `/` is PTX div.full.f32 = a * rcp.approx(b); the division by 6 is
  amax * RN(1/6) (sm_90's measured rcp.approx(6) is RN(1/6): qtc/rcp_approx.hpp), the one by 4 is exact.
* quant_scale = 0 where the rounded scale reads as 0.0 (byte 0x00), else 1 / scale (0 for byte 0xFF: 1 / Inf).
  q = x * quant_scale in float32 (a NaN result is the GPU's canonical NaN 0x7FFFFFFF).
* E2M1 by the kernel's bit arithmetic: sign, exponent, mantissa of q; below 1.0 the implicit bit is shifted in;
  RN-even from the guard bit, the sticky bits (with the FP32-source sticky of the dropped bits) and the kept LSB;
  min(.., 7); sign in bit 3.

What the kernel cannot quantize is not dumped: the quantization axis must be a multiple of 32 (downcast_to_mxfp
asserts it), so M and K are multiples of 32 here (the columnwise plane is the kernel run with axis = 0).
The dequantized planes are VECTORS.md's decode of the format, 2^(e-127) * E2M1 (0xFF -> NaN), float32; triton's
own `upcast_from_mxfp` reads byte 0x00 as scale 0 and 0xFF as Inf, which is not what these tensors hold.

vllm_cutlass: vLLM's CUDA FP4 quantizer with UE8M0 scales, csrc/.../quantization/fp4/nvfp4_utils.cuh
`cvt_warp_fp16_to_fp4<Type, N, UE8M0_SF = true>` as fixed by vLLM PR 43557 (the MXFP4 W4A4 MoE CUTLASS path; sm_100,
BF16 / F16 input only, so only those are dumped): amax = __hmax2 of |x| (NaN dropped unless the block is all NaN,
then the canonical NaN); the "threshold" rule (qtc scale_rule `even`): rounded = (bits(amax) + 2^21) & 0xFF800000,
byte = clamp(exponent(rounded) - 2, 0, 254) (the canonical NaN carries into bit 31: byte 0); data x * (1 / 2^(byte -
127)), 0 for byte 0; cvt.rn.satfinite.e2m1x2.f32: the nearest E2M1 value, ties to even, saturating at 6, sign kept,
NaN -> 0x7 (re-stated here by value, not by bits).

fbgemm: `py_quantize_mx4(a, 32)` step by step (plane_fbgemm below), float32 input only, no NaN blocks; the
scales and codes are written in qtc's planes (FBGEMM's packed rows put each group's exponent after its 16 bytes).

    python3 conformance/peers/engines_mxfp4_dump.py OUT_DIR   (writes OUT_DIR/{triton_kernels,vllm_cutlass,fbgemm})
    build/conformance/qtc verify OUT_DIR/triton_kernels OUT_DIR/vllm_cutlass

Needs: numpy. Deterministic (fixed seeds).
"""
import json
import os
import struct
import sys

import numpy as np

RCP6 = np.float32(1.0) / np.float32(6.0)  # RN(1/6) = 0x3E2AAAAB
RULES = ("rceil", "ocp_floor")  # ROUND_UP, ROUND_DOWN
DTYPES = ("f32", "bf16", "f16")
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def f32(bits):
    return np.asarray(bits, np.uint32).view(np.float32)


def bits(v):
    return np.asarray(v, np.float32).view(np.uint32)


def scale_bytes(amax, rule):
    with np.errstate(invalid="ignore", over="ignore"):
        if rule == "rceil":
            ds = amax.astype(np.float32) * RCP6
            b = (bits(ds).astype(np.uint64) + 0x007FFFFF) & 0x7F800000
        else:
            ds = amax.astype(np.float32) * np.float32(0.25)
            b = bits(ds).astype(np.uint64) & 0x7F800000
    return (b >> 23).astype(np.uint8)


def e2m1_bits(q):
    """The kernel's E2M1 bit arithmetic on float32 q (NaN canonicalized as the GPU produces it)."""
    u = bits(q).astype(np.int64)
    u = np.where(np.isnan(q), 0x7FFFFFFF, u)
    sign = (u >> 31) & 1
    exp = (u >> 23) & 0xFF
    mant_orig = u & 0x7FFFFF
    sub = exp < 127
    shift = np.clip(126 - exp, 0, 63)
    pre = 0x400000 | (mant_orig >> 1)
    mant = np.where(sub, pre >> shift, mant_orig)
    dropped = ((mant_orig & 1) != 0) | ((pre & ((1 << np.minimum(shift, 31)) - 1)) != 0)
    e = np.maximum(exp, 126) - 126
    m2 = (mant >> 21) & 3
    lsb = (m2 >> 1) & 1
    guard = m2 & 1
    sticky = (sub & dropped) | ((mant & 0x1FFFFF) != 0)
    inc = guard & (sticky.astype(np.int64) | lsb)
    code = np.minimum((((e << 2) | m2) + inc) >> 1, 7)
    return ((sign << 3) | code).astype(np.uint8)


def plane(xf, rule):
    """[rows, len] float32 -> codes [rows, len], scales [rows, len / 32] (len % 32 == 0)."""
    r, n = xf.shape
    blk = xf.reshape(r, n // 32, 32)
    with np.errstate(invalid="ignore"):
        amax = np.fmax.reduce(np.abs(blk), axis=2)
    sb = scale_bytes(amax, rule)
    scale = f32(sb.astype(np.uint32) << 23)
    with np.errstate(divide="ignore"):
        qs = np.where(scale == 0, np.float32(0.0), np.float32(1.0) / scale).astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        q = (blk * qs[:, :, None]).astype(np.float32)
    return e2m1_bits(q).reshape(r, n), sb


def e2m1_by_value(q):
    """cvt.rn.satfinite.e2m1x2.f32 by value: nearest grid point, ties to the even code, saturating; NaN -> 0x7."""
    a = np.abs(q.astype(np.float64))
    d = np.abs(a[..., None] - E2M1)  # distance to each of the 8 magnitudes (codes 0..7)
    best = d.min(axis=-1, keepdims=True)
    cand = d == best  # one or two (a tie) nearest codes
    even = cand & (np.arange(8) % 2 == 0)
    code = np.where(even.any(axis=-1), even.argmax(axis=-1), cand.argmax(axis=-1))
    code = np.where(a >= 6.0, 7, code)
    sign = (bits(q) >> 31).astype(np.int64)
    out = (sign << 3) | code
    return np.where(np.isnan(q), 7, out).astype(np.uint8)


def plane_vllm(xf):
    """vllm_cutlass: [rows, len] float32 (values of BF16 / F16) -> codes, scales."""
    r, n = xf.shape
    blk = xf.reshape(r, n // 32, 32)
    with np.errstate(invalid="ignore"):
        amax = np.fmax.reduce(np.abs(blk), axis=2)
    amax = np.where(np.isnan(amax), f32(np.uint32(0x7FFFE000)), amax)  # the canonical NaN, as F32
    rb = (bits(amax).astype(np.uint64) + (1 << 21)) & 0xFF800000
    be = ((rb >> 23) & 0xFF).astype(np.int64)
    sb = np.clip(np.where(be > 2, be - 2, 0), 0, 254).astype(np.uint8)
    qs = np.where(sb == 0, np.float32(0.0), f32((254 - sb.astype(np.uint32)) << 23)).astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        q = (blk * qs[:, :, None]).astype(np.float32)
    return e2m1_by_value(q).reshape(r, n), sb


def plane_fbgemm(xf):
    """FBGEMM py_quantize_mx4 (fbgemm_gpu/triton/quantize_ref.py at 3cbb3e9b), step by step on [rows, len] float32,
    the torch int8 / int32 arithmetic re-stated with NumPy's (both wrap); torch.log2 (float32) as the correctly
    rounded log2 (float64 log2 rounded to float32). Returns codes [rows, len] and the exponent bytes e + 127."""
    r, n = xf.shape
    a = xf.reshape(r * n // 32, 32)
    with np.errstate(invalid="ignore", divide="ignore"):
        shared = np.max(np.abs(a), axis=1, keepdims=True)  # NaN propagates (no NaN blocks are dumped)
        shared = np.where(shared == 0, np.float32(2.0 ** -126), shared).astype(np.float32)
        shared = np.ceil(np.log2(shared.astype(np.float64)).astype(np.float32))
        shared = np.clip(shared - np.float32(2), -127, 125).astype(np.float32)
        scale = np.exp2(shared.astype(np.float64)).astype(np.float32)
        v = (a / scale).astype(np.float32).view(np.int32)
    sign = ((v >> 31).astype(np.int8) & 1).astype(np.int8)
    biased = ((v & 0x7F800000) >> 23).astype(np.int8)
    nbe = (biased - np.int8(127) + np.int8(1)).astype(np.int8)
    with np.errstate(over="ignore"):
        exp_diff = np.where(nbe <= 0, (np.int8(1) - nbe).astype(np.int8), np.int8(0)).astype(np.int8)
    exp_diff = np.minimum(exp_diff, np.int8(24))
    sub = biased == 0
    mant = np.where(sub, v & 0x7FFFFF, (v & 0x7FFFFF) + (1 << 23)).astype(np.int32)
    sig = np.where(sub, 23, 24).astype(np.int32)
    sh = sig + exp_diff.astype(np.int32) - 3
    sh = np.where((sh < 0) | (sh >= 31), 31, sh)  # torch: a negative or too large shift shifts by 31
    m = (mant >> sh).astype(np.int8)
    m = ((m + np.int8(1)).astype(np.int8) >> 1).astype(np.int8)
    over = m >= 4
    m = np.where(over & ~sub, m >> 1, m).astype(np.int8)
    nbe = np.where((nbe <= 0) & (m == 2), np.int8(1), nbe).astype(np.int8)
    m = (m & 1).astype(np.int8)
    nbe = np.where(over, (nbe + np.int8(1)).astype(np.int8), nbe).astype(np.int8)
    m = np.where(nbe >= 4, np.int8(1), m).astype(np.int8)
    nbe = np.clip(nbe, 0, 3).astype(np.int8)
    codes = ((sign.astype(np.uint8) << 3) | (nbe.astype(np.uint8) << 1) | m.astype(np.uint8)).astype(np.uint8)
    return codes.reshape(r, n), (shared + 127).astype(np.int64).astype(np.uint8).reshape(r, n // 32)


def pack(codes):
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def decode(codes, scales):
    v = E2M1[codes & 7] * np.where(codes & 8, -1.0, 1.0)
    s = np.where(scales == 0xFF, np.nan, np.exp2(scales.astype(np.float64) - 127))
    with np.errstate(over="ignore"):  # 6 * 2^126 overflows float32 to Inf, as qtc's float32 decode does
        return (v * np.repeat(s, 32, axis=1)).astype(np.float32)


# ---- inputs ---------------------------------------------------------------------------------------------------

def family(name, m, k, seed):
    g = np.random.default_rng(seed)
    x = (g.standard_normal((m, k)) * np.exp2(g.integers(-6, 7, (m, 1)))).astype(np.float32)
    if name == "ties":  # block amax 6 * 2^j (exact scales) and elements on E2M1 midpoints of that scale
        s = np.exp2(g.integers(-3, 4, (m, k // 32))).repeat(32, axis=1)
        mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.5, 3.0])
        x = (g.choice(mids, (m, k)) * g.choice([-1.0, 1.0], (m, k)) * s).astype(np.float32)
        x[:, ::32] = (6.0 * s[:, ::32]).astype(np.float32)
    elif name == "pow2":  # block amax just below, at and just above 4 * 2^j and 6 * 2^j (the two rules' boundaries)
        base = np.array([4.0, 6.0])
        for i in range(m):
            for b in range(k // 32):
                a = np.float32(g.choice(base) * 2.0 ** int(g.integers(-10, 10)))
                a = [np.nextafter(a, np.float32(0)), a, np.nextafter(a, np.float32(np.inf))][int(g.integers(0, 3))]
                x[i, 32 * b] = a * (1 if g.random() < 0.5 else -1)
                x[i, 32 * b + 1:32 * b + 32] = np.clip(x[i, 32 * b + 1:32 * b + 32], -a, a) * np.float32(0.999)
    elif name == "tiny":  # block amax from subnormal up to 2^-120: ds subnormal (ROUND_DOWN byte 0 zeroes the data)
        x = (x * np.exp2(g.integers(-150, -118, (m, k // 32))).repeat(32, axis=1)).astype(np.float32)
    elif name == "big":  # block amax near FLT_MAX
        x = (np.clip(x, -2.0, 2.0) * np.float32(1.7e38)).astype(np.float32)
    elif name == "nan_inf":  # NaN among finite values (ignored), all-NaN blocks, Inf blocks, -NaN
        x[g.random((m, k)) < 0.05] = np.nan
        x[g.random((m, k)) < 0.02] = -np.nan
        x[g.random((m, k)) < 0.02] = np.inf
        x[g.random((m, k)) < 0.02] = -np.inf
        x[0, 0:32] = np.nan
        if k >= 64:
            x[1, 32:64] = -np.nan
    elif name == "inf":  # Inf among finite values (block exponent 125, Inf elements -> +-0), no NaN
        x[g.random((m, k)) < 0.03] = np.inf
        x[g.random((m, k)) < 0.03] = -np.inf
    elif name == "near_pow2":  # block amax 2^k (1 + j 2^-23): where a float32 log2 rounds below k + 1
        for i in range(m):
            for b in range(k // 32):
                a = np.float32(2.0 ** int(g.integers(-20, 20)) * (1 + int(g.integers(0, 5)) * 2.0 ** -23))
                x[i, 32 * b:32 * b + 32] = np.clip(x[i, 32 * b:32 * b + 32], -a, a)
                x[i, 32 * b + int(g.integers(0, 32))] = a
    elif name == "zeros":  # zero blocks, -0 elements, blocks of one nonzero value
        x[:, :32] = 0.0
        x[1::2, :32] = -0.0
        x[g.random((m, k)) < 0.5] = -0.0
    return x


def to_input(x, dt):
    if dt == "f32":
        return x, x, "F32"
    if dt == "f16":
        with np.errstate(over="ignore"):
            h = x.astype(np.float16)  # past 65504 -> Inf, NaN stays NaN
        return h, h.astype(np.float32), "F16"
    u = bits(x)  # BF16: round to nearest even on the bits (NaN kept quiet)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    r = np.where(np.isnan(x), ((u >> 16) | 0x40).astype(np.uint16), r)
    return r, f32(r.astype(np.uint32) << 16), "BF16"


def save(path, tensors, md):
    header, blobs, off = {"__metadata__": md}, [], 0
    for name, (arr, dt) in tensors.items():
        b = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


CASES = [("normal", (64, 96)), ("ties", (32, 64)), ("pow2", (64, 64)), ("tiny", (32, 64)), ("big", (32, 32)),
         ("nan_inf", (32, 64)), ("zeros", (64, 32))]


# FBGEMM's reference takes float32 only; NaN blocks are left out (FBGEMM converts a NaN exponent to int8: undefined).
FBGEMM_CASES = [("normal", (64, 96)), ("ties", (32, 64)), ("pow2", (64, 64)), ("tiny", (32, 64)), ("big", (32, 32)),
                ("inf", (32, 64)), ("zeros", (64, 32)), ("near_pow2", (64, 64))]


def write(out, name, raw, st, xf, planefn, md):
    c, s = planefn(xf)
    ct, stt = planefn(np.ascontiguousarray(xf.T))
    tensors = {"x": (raw, st), "rowwise_data": (pack(c), "U8"), "rowwise_scale_inv": (s, "U8"),
               "dequantized_rowwise": (decode(c, s), "F32"), "columnwise_data": (pack(ct), "U8"),
               "columnwise_scale_inv": (stt, "U8"),
               "dequantized_columnwise": (np.ascontiguousarray(decode(ct, stt).T), "F32")}
    save(os.path.join(out, name + ".safetensors"), tensors, md)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    tk, vc = os.path.join(sys.argv[1], "triton_kernels"), os.path.join(sys.argv[1], "vllm_cutlass")
    os.makedirs(tk, exist_ok=True)
    os.makedirs(vc, exist_ok=True)
    n = nv = 0
    for ci, (fam, (m, k)) in enumerate(CASES):
        for di, dt in enumerate(DTYPES):
            raw, xf, st = to_input(family(fam, m, k, 24000 + 10 * ci + di), dt)
            for rule in RULES:
                md = {"qtc.schema": "1", "recipe": "mxfp4", "profile": "triton_kernels", "scale_rule": rule,
                      "case.family": fam,
                      "source": "triton_kernels _downcast_to_mxfp (DEQUANT_SCALE_ROUNDING_MODE "
                                f"{'ROUND_UP' if rule == 'rceil' else 'ROUND_DOWN'}), not run: a faithful NumPy "
                                f"{np.__version__} reading of the Triton kernel's sm_90 path "
                                "(conformance/peers/engines_mxfp4_dump.py), written independently of qtc"}
                write(tk, f"mxfp4_triton_{rule}_{dt}_{fam}_{m}x{k}", raw, st, xf, lambda a, r=rule: plane(a, r), md)
                n += 1
            if dt == "f32":
                continue  # the vLLM kernel takes BF16 / F16 only
            md = {"qtc.schema": "1", "recipe": "mxfp4", "profile": "vllm_cutlass", "scale_rule": "even",
                  "case.family": fam,
                  "source": "vllm_cutlass cvt_warp_fp16_to_fp4 with UE8M0_SF (vLLM PR 43557), not run: a faithful "
                            f"NumPy {np.__version__} reading of the CUDA code (conformance/peers/engines_mxfp4_dump.py), "
                            "written independently of qtc"}
            write(vc, f"mxfp4_vllm_cutlass_even_{dt}_{fam}_{m}x{k}", raw, st, xf, plane_vllm, md)
            nv += 1
    fb = os.path.join(sys.argv[1], "fbgemm")
    os.makedirs(fb, exist_ok=True)
    nf = 0
    for ci, (fam, (m, k)) in enumerate(FBGEMM_CASES):
        x = family(fam, m, k, 25000 + ci)
        md = {"qtc.schema": "1", "recipe": "mxfp4", "profile": "fbgemm", "scale_rule": "ceil", "case.family": fam,
              "source": "fbgemm py_quantize_mx4 (fbgemm_gpu/triton/quantize_ref.py at 3cbb3e9b), not run: a faithful "
                        f"NumPy {np.__version__} reading of it with torch's float32 log2 as the correctly rounded one "
                        "(conformance/peers/engines_mxfp4_dump.py), in qtc's planes (not FBGEMM's packed rows)"}
        write(fb, f"mxfp4_fbgemm_ceil_f32_{fam}_{m}x{k}", x, "F32", x, plane_fbgemm, md)
        nf += 1
    print(f"{n} vectors written to {tk}, {nv} to {vc}, {nf} to {fb}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
