#!/usr/bin/env python3
"""Dump conformance vectors (VECTORS.md, schema 1) from torchao's own quantizers.

Runs torchao's `to_mx` (MXFP8, every ScaleCalculationMode: FLOOR, RCEIL, CEIL, EVEN; E4M3 and E5M2) and
`nvfp4_quantize` (with and without a per-tensor scale) on many inputs and writes one .safetensors file per
case with metadata profile=torchao and `source` naming the torchao and torch versions. qtc's reference must
reproduce every file bit for bit:

    python3 conformance/peers/torchao_dump.py OUT_DIR [--sample SAMPLE_DIR]
    build/conformance/qtc verify OUT_DIR

Input dtypes: F32 and BF16 go to torchao as they are. torchao's quantizers reject F16 (both assert
bfloat16 or float32); F16 inputs are upcast to float32 first (exact) and the file keeps the F16 input:
both quantizers convert to float32 before any arithmetic, so this is what they compute for those values.

Layout: rowwise planes are torchao's outputs on x; the columnwise planes are torchao's outputs on
x.t().contiguous() (what torchao's training path quantizes for the transposed operand), stored in
VECTORS.md's orientation (MXFP8: transposed back to [M, K] and scales [M/32, K]; NVFP4: [K, M/2]).
Shapes torchao cannot quantize (MXFP8 columnwise with M % 32 != 0) are dumped rowwise only.

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
from torchao.prototype.mx_formats.mx_tensor import to_mx
from torchao.prototype.mx_formats.nvfp4_tensor import nvfp4_quantize, per_tensor_amax_to_scale

# One thread: torch.max over more than 32768 float32 values combines per-thread partial maxima, and which NaN
# payload comes out of a tensor holding a NaN then depends on the thread count (0x7FC00000 or 0xFFFFFFFF);
# NVFP4's E2M1 cast turns that payload into codes. On one thread it is always 0xFFFFFFFF (qtc's model).
torch.set_num_threads(1)

SOURCE = f"torchao {torchao.__version__} (torch {torch.__version__.split('+')[0]}, CPU)"
MODES = {"ocp_floor": ScaleCalculationMode.FLOOR, "rceil": ScaleCalculationMode.RCEIL,
         "ceil": ScaleCalculationMode.CEIL, "even": ScaleCalculationMode.EVEN}
FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def family(name, m, k, seed, elem_max):
    """An [m, k] float64 numpy array of the named input family."""
    g = np.random.default_rng(seed)
    if name == "normal":
        return g.standard_normal((m, k))
    if name == "heavy":
        return g.standard_t(2, (m, k)) * np.exp(g.uniform(-6, 6, (m, 1)))
    if name == "wide":  # blocks at very different magnitudes, including far below the tensor amax
        return g.standard_normal((m, k)) * np.exp2(g.integers(-40, 20, (m, k // 16)).repeat(16, axis=1))
    if name == "tiny":  # values down to float32 subnormals
        return g.standard_normal((m, k)) * np.exp2(g.integers(-140, -100, (m, 1)))
    if name == "zero_blocks":
        x = g.standard_normal((m, k))
        x[::3, :] = 0.0
        x[:, :32] = 0.0
        x[1::4, 16:48] = -0.0
        return x
    if name == "ties":  # block maxima at, just below and just above elem_max * 2^e, and element tie points
        x = g.standard_normal((m, k))
        for i in range(m):
            e = int(g.integers(-20, 20))
            base = elem_max * 2.0 ** e
            x[i, 0] = [base, np.nextafter(np.float32(base), np.float32(np.inf)), np.nextafter(np.float32(base), 0),
                       base * 1.5, base * 0.75, 6.0 * 2.0 ** e][i % 6]
            mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 1.0 + 1 / 16, 1.0 + 3 / 16, 448 + 16]) * 2.0 ** e
            x[i, 1:11] = mids * np.sign(g.standard_normal(10))
        return x
    if name == "pow2":  # exact powers of two and their neighbours (scale-rule boundaries)
        e = g.integers(-30, 30, (m, k))
        return np.exp2(e) * g.choice([1.0, -1.0, 1.5, 1.75, 1.875, 1.9375, 0.9999999], (m, k))
    if name == "ulps":  # block maxima within a few float32 ulps of elem_max * 2^e (rceil's log2 rounding)
        x = g.standard_normal((m, k)) * 0.01
        for i in range(m):
            for c in range(0, k, 16):
                e = int(g.integers(-60, 60))
                base = np.float32(elem_max * 2.0 ** e)
                v = base
                for _ in range(abs(int(g.integers(-3, 4)))):
                    v = np.nextafter(v, np.float32(np.inf) if (i + c) % 2 else np.float32(0))
                x[i, c:c + 16] *= float(base) * 10
                x[i, c + int(g.integers(0, 16))] = float(v) * (1 if g.integers(0, 2) else -1)
        return x
    if name == "nan":
        x = g.standard_normal((m, k))
        x[0, 3] = np.nan
        x[m // 2, k - 1] = np.nan
        return x
    if name == "inf":
        x = g.standard_normal((m, k))
        x[0, 5] = np.inf
        x[m - 1, 0] = -np.inf
        return x
    if name == "big":
        return g.standard_normal((m, k)) * 1e4
    raise ValueError(name)


def to_input(a, dtype):
    t = torch.from_numpy(a.astype(np.float32))
    return t.to(DTYPES[dtype]).contiguous()


def torchao_input(x):
    # torchao asserts bfloat16 or float32; F16 is upcast (exact), see the module docstring.
    return x.float() if x.dtype == torch.float16 else x


def u8(t):
    return t.contiguous().view(torch.uint8).clone()


def dump_mxfp8(x, fp8, rule):
    m, k = x.shape
    xa = torchao_input(x)
    out = {"x": x.contiguous()}
    sc, data = to_mx(xa, FP8[fp8], 32, scaling_mode=MODES[rule])
    out["rowwise_data"] = u8(data)
    out["rowwise_scale_inv"] = u8(sc).reshape(m, k // 32)
    colwise = m % 32 == 0
    if colwise:
        sct, datat = to_mx(xa.t().contiguous(), FP8[fp8], 32, scaling_mode=MODES[rule])
        out["columnwise_data"] = u8(datat).t().contiguous()
        out["columnwise_scale_inv"] = u8(sct).reshape(k, m // 32).t().contiguous()
    md = {"qtc.schema": "1", "recipe": "mxfp8", "profile": "torchao", "fp8_dtype": fp8, "scale_rule": rule,
          "source": f"{SOURCE}: to_mx(elem_dtype=float8_{fp8}, block_size=32, scaling_mode={MODES[rule].name})"}
    if not colwise:
        md["columnwise"] = "0"
    return out, md


def dump_nvfp4(x, two_level):
    xa = torchao_input(x)
    out = {"x": x.contiguous()}
    md = {"qtc.schema": "1", "recipe": "nvfp4", "profile": "torchao"}
    colwise = x.shape[0] % 16 == 0
    if not colwise:
        md["columnwise"] = "0"
    if two_level:
        amax = torch.max(torch.abs(xa)).to(torch.float32)
        pts = per_tensor_amax_to_scale(amax)
        sc, data = nvfp4_quantize(xa, 16, pts)
        sct, datat = nvfp4_quantize(xa.t().contiguous(), 16, pts) if colwise else (None, None)
        out["amax_rowwise"] = amax.reshape(1).clone()
        if colwise:
            out["amax_columnwise"] = amax.reshape(1).clone()
        md["source"] = f"{SOURCE}: nvfp4_quantize(block_size=16, per_tensor_scale=per_tensor_amax_to_scale(amax))"
    else:
        sc, data = nvfp4_quantize(xa, 16, None)
        sct, datat = nvfp4_quantize(xa.t().contiguous(), 16, None) if colwise else (None, None)
        md["per_tensor_scale"] = "0"
        md["source"] = f"{SOURCE}: nvfp4_quantize(block_size=16, per_tensor_scale=None)"
    out["rowwise_data"] = u8(data)
    out["rowwise_scale_inv"] = u8(sc)
    if colwise:
        out["columnwise_data"] = u8(datat)
        out["columnwise_scale_inv"] = u8(sct)
    return out, md


MX_FAMILIES = ["normal", "heavy", "wide", "tiny", "zero_blocks", "ties", "pow2", "ulps", "nan", "inf", "big"]
NV_FAMILIES = MX_FAMILIES
MX_SHAPES = [(64, 96), (33, 64), (32, 32)]
NV_SHAPES = [(32, 64), (48, 32), (16, 16), (33, 48)]  # 33 x 48: rowwise only (torchao blocks along K only)


def cases(stress=0):
    seed = 1
    if stress:  # larger random tensors, every rule and dtype, for a bit-exactness sweep (not committed)
        for i in range(stress):
            for rule in MODES:
                for fp8 in FP8:
                    for dt in DTYPES:
                        seed += 1
                        fam = MX_FAMILIES[i % len(MX_FAMILIES)]
                        yield f"stress{i}_mxfp8_{fp8}_{rule}_{dt}_{fam}_256x512", "mx", (fp8, rule), dt, fam, (256, 512), seed
            for two in (True, False):
                for dt in DTYPES:
                    seed += 1
                    fam = NV_FAMILIES[i % len(NV_FAMILIES)]
                    tag = "pts" if two else "blockonly"
                    yield f"stress{i}_nvfp4_{tag}_{dt}_{fam}_256x512", "nv", two, dt, fam, (256, 512), seed
        return
    for rule in MODES:
        for fp8 in FP8:
            for dt in DTYPES:
                for fam in MX_FAMILIES:
                    for shape in MX_SHAPES:
                        seed += 1
                        yield f"mxfp8_{fp8}_{rule}_{dt}_{fam}_{shape[0]}x{shape[1]}", "mx", (fp8, rule), dt, fam, shape, seed
    for two in (True, False):
        for dt in DTYPES:
            for fam in NV_FAMILIES:
                for shape in NV_SHAPES:
                    seed += 1
                    tag = "pts" if two else "blockonly"
                    yield f"nvfp4_{tag}_{dt}_{fam}_{shape[0]}x{shape[1]}", "nv", two, dt, fam, shape, seed


def in_sample(kind, param, dt, fam, shape):
    """The committed sample: every rule x element type x input dtype, two families each, small shapes."""
    if kind == "mx":
        fp8, rule = param
        if shape == (33, 64):
            return fam == "normal" and fp8 == "e4m3" and dt == "f32"
        i = list(MODES).index(rule) * 6 + list(FP8).index(fp8) * 3 + list(DTYPES).index(dt)
        return shape == (32, 32) and fam in (["ties", "ulps", "pow2"][i % 3], ["nan", "inf", "zero_blocks", "normal"][i % 4])
    if shape == (33, 48):
        return fam == "normal" and dt == "bf16"
    return shape == (16, 16) and fam in ("normal", "zero_blocks", "nan", "ties")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--sample", help="also copy a small sample (small shapes, every rule/dtype) here")
    ap.add_argument("--stress", type=int, default=0, help="instead: N rounds of 256x512 tensors per rule/dtype")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.sample:
        os.makedirs(args.sample, exist_ok=True)
    n = 0
    sampled = 0
    for name, kind, param, dt, fam, shape, seed in cases(args.stress):
        if kind == "mx":
            fp8, rule = param
            x = to_input(family(fam, shape[0], shape[1], seed, 448.0 if fp8 == "e4m3" else 57344.0), dt)
            tensors, md = dump_mxfp8(x, fp8, rule)
        else:
            x = to_input(family(fam, shape[0], shape[1], seed, 6.0), dt)
            tensors, md = dump_nvfp4(x, param)
        md["case.family"] = fam
        if dt == "f16":
            md["comment"] = "F16 input upcast to float32 before torchao (torchao asserts bfloat16/float32)"
        path = os.path.join(args.out, name + ".safetensors")
        save_file(tensors, path, metadata=md)
        n += 1
        if args.sample and in_sample(kind, param, dt, fam, shape):
            shutil.copy(path, os.path.join(args.sample, name + ".safetensors"))
            sampled += 1
    print(f"{n} vectors written to {args.out}" + (f", {sampled} copied to {args.sample}" if args.sample else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
