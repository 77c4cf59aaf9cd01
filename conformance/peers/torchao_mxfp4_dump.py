#!/usr/bin/env python3
"""Dump MXFP4 conformance vectors (VECTORS.md, schema 1, recipe `mxfp4`) from torchao's own quantizer, and a
few `ocp`-profile vectors from an independent NumPy computation of the OCP MX v1.0 rule.

torchao: `to_mx(x, elem_dtype=torch.float4_e2m1fn_x2, block_size=32, scaling_mode=MODE)` for every
ScaleCalculationMode (FLOOR -> scale_rule ocp_floor, RCEIL -> rceil, CEIL -> ceil, EVEN -> even), profile
`torchao`, `source` naming the torchao and torch versions. The rowwise plane is torchao's output on x; the
columnwise plane is its output on x.t().contiguous() (blocks of 32 along M), which is VECTORS.md's orientation
for mxfp4 already (data [K, M/2], scales [K, M/32]). The dequantized planes are torchao's `to_dtype(...,
torch.float32)` of those outputs (the columnwise one transposed back to [M, K]).

    python3 conformance/peers/torchao_mxfp4_dump.py OUT_DIR [--sample SAMPLE_DIR] [--stress N]
    build/conformance/qtc verify OUT_DIR

What torchao cannot quantize is left out, not emulated: K % 32 != 0 (to_mx asserts the last dimension is a
multiple of the block size), the columnwise plane when M % 32 != 0 (dumped rowwise only), and F16 input (to_mx
asserts bfloat16 or float32): F16 inputs are upcast to float32 first (exact) and the file keeps the F16 input,
as torchao_dump.py does; to_mx converts to float32 before any arithmetic, so this is what it computes.

OCP (--ocp DIR): NumPy float64 arithmetic, no torch: per block of 32, amax over the block (NaN propagates);
a NaN or Inf amax -> scale 0xFF (NaN) and codes 0x7 (qtc's profile `ocp` rule for E2M1, which has no NaN);
amax 0 -> 0x00; else e = floor(log2 amax) - 2 clamped to >= -127; the elements x / 2^e rounded to the E2M1
grid with ties to even (ties at 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5), saturated at 6, sign kept (-0 -> 0x8).

Needs: torch, torchao (0.18.0), safetensors, numpy. Deterministic (fixed seeds, one CPU thread).
"""
import argparse
import os
import shutil
import sys

import numpy as np
import torch
import torchao
from safetensors.torch import save_file
from torchao.prototype.mx_formats.config import ScaleCalculationMode
from torchao.prototype.mx_formats.mx_tensor import to_dtype, to_mx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchao_dump import family as base_family  # noqa: E402  (the MXFP8/NVFP4 dump's input families)

torch.set_num_threads(1)

SOURCE = f"torchao {torchao.__version__} (torch {torch.__version__.split('+')[0]}, CPU)"
MODES = {"ocp_floor": ScaleCalculationMode.FLOOR, "rceil": ScaleCalculationMode.RCEIL,
         "ceil": ScaleCalculationMode.CEIL, "even": ScaleCalculationMode.EVEN}
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
FP4 = torch.float4_e2m1fn_x2


def family(name, m, k, seed):
    """An [m, k] float64 array: the shared families with E2M1's elem_max 6, and MXFP4's own corners."""
    g = np.random.default_rng(seed)
    if name == "neg_zero":  # -0.0 everywhere in some blocks, and -0 among values
        x = g.standard_normal((m, k))
        x[:, :32] = -0.0
        x[::2, 32:] *= np.where(g.random((m - m // 2 if m > 1 else 1, k - 32)) < 0.2, -0.0, 1.0)[: len(x[::2]), :]
        return x
    if name == "denormal":  # whole blocks of float32 subnormals and blocks straddling the normal boundary
        x = g.standard_normal((m, k)) * 2.0 ** -130
        x[:, 32:64] = g.standard_normal((m, 32)) * 2.0 ** -126 if k >= 64 else x[:, 32:64]
        x[0, 0] = 2.0 ** -149
        return x
    if name == "saturate":  # elements above 6 * scale under FLOOR (amax in [6, 8) * 2^e), and huge values
        x = g.uniform(-1, 1, (m, k)) * 7.9 * np.exp2(g.integers(-10, 10, (m, 1)))
        x[:, 1] = 3.4e38
        return x
    if name == "nan_inf":  # NaN and Inf in the same block, and blocks with only Inf
        x = g.standard_normal((m, k))
        x[0, 0] = np.nan
        x[0, 1] = np.inf
        x[m - 1, :32] = -np.inf
        x[m // 2, 7] = np.nan
        return x
    return base_family(name, m, k, seed, 6.0)


def to_input(a, dtype):
    return torch.from_numpy(a.astype(np.float32)).to(DTYPES[dtype]).contiguous()


def u8(t):
    return t.contiguous().view(torch.uint8).clone()


def dump_torchao(x, rule):
    m, k = x.shape
    xa = x.float() if x.dtype == torch.float16 else x
    out = {"x": x.contiguous()}
    sc, data = to_mx(xa, FP4, 32, scaling_mode=MODES[rule])
    out["rowwise_data"] = u8(data).reshape(m, k // 2)
    out["rowwise_scale_inv"] = u8(sc).reshape(m, k // 32)
    out["dequantized_rowwise"] = to_dtype(data, sc, FP4, 32, torch.float32).reshape(m, k).contiguous()
    colwise = m % 32 == 0
    if colwise:
        sct, datat = to_mx(xa.t().contiguous(), FP4, 32, scaling_mode=MODES[rule])
        out["columnwise_data"] = u8(datat).reshape(k, m // 2)
        out["columnwise_scale_inv"] = u8(sct).reshape(k, m // 32)
        out["dequantized_columnwise"] = to_dtype(datat, sct, FP4, 32, torch.float32).reshape(k, m).t().contiguous()
    md = {"qtc.schema": "1", "recipe": "mxfp4", "profile": "torchao", "scale_rule": rule,
          "source": f"{SOURCE}: to_mx(elem_dtype=float4_e2m1fn_x2, block_size=32, scaling_mode={MODES[rule].name})"}
    if not colwise:
        md["columnwise"] = "0"
    return out, md


# ---- OCP MX v1.0, independently in NumPy -----------------------------------------------------------------
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def e2m1_rne(v):
    """E2M1 code of float64 v (finite), RN-even on the grid, saturating, sign kept."""
    a = abs(v)
    if a >= 6.0:
        c = 7
    else:
        i = int(np.searchsorted(E2M1, a))  # E2M1[i-1] < a <= E2M1[i]
        if i < 8 and E2M1[i] == a:
            c = i
        else:
            lo, hi = i - 1, i
            mid = (E2M1[lo] + E2M1[hi]) / 2
            c = lo if a < mid else hi if a > mid else (lo if lo % 2 == 0 else hi)
    return c | (8 if np.signbit(v) else 0)


def ocp_plane(rows):
    """rows: [R, L] float32 values along the block axis -> (codes [R, L], scales [R, ceil(L/32)])."""
    r, length = rows.shape
    nb = -(-length // 32)
    codes = np.zeros((r, length), np.uint8)
    scales = np.zeros((r, nb), np.uint8)
    for i in range(r):
        for b in range(nb):
            blk = rows[i, 32 * b:32 * b + 32].astype(np.float64)
            amax = np.nan if np.isnan(blk).any() else np.max(np.abs(blk))
            if not np.isfinite(amax):
                scales[i, b] = 0xFF
                codes[i, 32 * b:32 * b + len(blk)] = 0x7
                continue
            if amax == 0:
                e = -127
            else:
                e = max(int(np.floor(np.log2(amax))) - 2, -127)
                # np.log2 may round across an integer just below a power of two: fix from the exact value
                while 2.0 ** (e + 2) > amax:
                    e -= 1
                while 2.0 ** (e + 3) <= amax:
                    e += 1
                e = max(e, -127)
            scales[i, b] = e + 127
            for t, v in enumerate(blk):
                codes[i, 32 * b + t] = e2m1_rne(v / 2.0 ** e)
    return codes, scales


def pack(codes):
    r, length = codes.shape
    out = np.zeros((r, -(-length // 2)), np.uint8)
    out[:, :] = codes[:, 0::2]
    out[:, : length // 2] |= codes[:, 1::2] << 4
    return out


def decode(codes, scales):
    v = E2M1[codes & 7] * np.where(codes & 8, -1.0, 1.0)
    s = np.where(scales == 0xFF, np.nan, np.exp2(scales.astype(np.float64) - 127))
    return (v * np.repeat(s, 32, axis=1)[:, : codes.shape[1]]).astype(np.float32)


def dump_ocp(x):
    xf = x.float().numpy()
    out = {"x": x.contiguous()}
    c, s = ocp_plane(xf)
    out["rowwise_data"] = torch.from_numpy(pack(c))
    out["rowwise_scale_inv"] = torch.from_numpy(s)
    out["dequantized_rowwise"] = torch.from_numpy(decode(c, s))
    ct, st = ocp_plane(np.ascontiguousarray(xf.T))
    out["columnwise_data"] = torch.from_numpy(pack(ct))
    out["columnwise_scale_inv"] = torch.from_numpy(st)
    out["dequantized_columnwise"] = torch.from_numpy(np.ascontiguousarray(decode(ct, st).T))
    md = {"qtc.schema": "1", "recipe": "mxfp4", "profile": "ocp", "scale_rule": "ocp_floor",
          "source": f"conformance/peers/torchao_mxfp4_dump.py --ocp: NumPy {np.__version__} float64, OCP MX v1.0 "
                    "(floor(log2 amax) - 2, E2M1 RN-even saturating), independent of qtc and torchao"}
    return out, md


FAMILIES = ["normal", "heavy", "wide", "tiny", "zero_blocks", "ties", "pow2", "ulps", "nan", "inf", "big",
            "neg_zero", "denormal", "saturate", "nan_inf"]
SHAPES = [(64, 96), (33, 64), (32, 32)]


def cases(stress=0):
    seed = 7000
    if stress:
        for i in range(stress):
            for rule in MODES:
                for dt in DTYPES:
                    seed += 1
                    fam = FAMILIES[(i + seed) % len(FAMILIES)]
                    yield f"stress{i}_mxfp4_{rule}_{dt}_{fam}_256x512", rule, dt, fam, (256, 512), seed
        return
    for rule in MODES:
        for dt in DTYPES:
            for fam in FAMILIES:
                for shape in SHAPES:
                    seed += 1
                    yield f"mxfp4_{rule}_{dt}_{fam}_{shape[0]}x{shape[1]}", rule, dt, fam, shape, seed


def in_sample(rule, dt, fam, shape):
    """The committed sample: every rule x input dtype, the corner families, small shapes."""
    if shape == (33, 64):
        return fam in ("normal", "nan_inf") and dt == "bf16"
    if shape != (32, 32):
        return False
    i = list(MODES).index(rule) * 3 + list(DTYPES).index(dt)
    corner = ["ties", "saturate", "nan_inf", "denormal", "zero_blocks", "pow2"]
    return fam in (corner[i % 6], corner[(i + 3) % 6], ["neg_zero", "ulps", "tiny", "inf", "nan", "heavy"][i % 6])


OCP_CASES = [("normal", "f32", (64, 64)), ("ties", "f32", (32, 64)), ("zero_blocks", "bf16", (64, 64)),
             ("nan_inf", "f32", (32, 32)), ("denormal", "f32", (32, 64)), ("saturate", "bf16", (32, 32)),
             ("normal", "f32", (37, 45)), ("neg_zero", "f16", (40, 70))]  # the last two: M, K not multiples of 32


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--sample", help="also copy a small sample (small shapes, every rule/dtype) here")
    ap.add_argument("--stress", type=int, default=0, help="instead: N rounds of 256x512 tensors per rule/dtype")
    ap.add_argument("--ocp", help="also write the OCP-rule vectors (NumPy) here")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.sample:
        os.makedirs(args.sample, exist_ok=True)
    n = sampled = 0
    for name, rule, dt, fam, shape, seed in cases(args.stress):
        x = to_input(family(fam, shape[0], shape[1], seed), dt)
        tensors, md = dump_torchao(x, rule)
        md["case.family"] = fam
        if dt == "f16":
            md["comment"] = "F16 input upcast to float32 before torchao (torchao asserts bfloat16/float32)"
        path = os.path.join(args.out, name + ".safetensors")
        save_file(tensors, path, metadata=md)
        n += 1
        if args.sample and in_sample(rule, dt, fam, shape):
            shutil.copy(path, os.path.join(args.sample, name + ".safetensors"))
            sampled += 1
    msg = f"{n} vectors written to {args.out}" + (f", {sampled} copied to {args.sample}" if args.sample else "")
    if args.ocp:
        os.makedirs(args.ocp, exist_ok=True)
        for i, (fam, dt, shape) in enumerate(OCP_CASES):
            x = to_input(family(fam, shape[0], shape[1], 9000 + i), dt)
            tensors, md = dump_ocp(x)
            md["case.family"] = fam
            save_file(tensors, os.path.join(args.ocp, f"mxfp4_ocp_{dt}_{fam}_{shape[0]}x{shape[1]}.safetensors"), metadata=md)
        msg += f"; {len(OCP_CASES)} OCP vectors written to {args.ocp}"
    print(msg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
