#!/usr/bin/env python3
"""Dump MXFP8 and NVFP4 conformance vectors (VECTORS.md, schema 1) written the way users write them with a library's
own casts, no quantization library (profiles torch_cast and ml_dtypes_cast):

    /work/venv-peers/bin/python conformance/peers/cast_mx_dump.py --impl torch OUT_DIR [--sample DIR] [--stress N]
    /work/venv-peers/bin/python conformance/peers/cast_mx_dump.py --impl ml_dtypes OUT_DIR [--sample DIR] [--stress N]

The idioms, in float32 (the input, F32 / BF16 / F16, is converted to float32 first: `x.float()`, `x.astype(float32)`):

  * MXFP8 (both libraries; E4M3 elem_max 448, E5M2 57344), blocks of 32 along K:
        amax  = |x|.reshape(M, K/32, 32).max(-1)                    (torch.amax / np.max: NaN propagates)
        scale = (amax / elem_max).to(float8_e8m0fnu)                 the library's E8M0 cast, stored as the scale byte
        data  = (x / scale.to(float32)).to(float8_e4m3fn / e5m2)     the library's FP8 cast (no clamp)
  * NVFP4 (ml_dtypes), blocks of 16 along K, the two-level scale of the NVFP4 recipe:
        S     = max|x| / (6 * 448)                                   float32 global decode scale (file: amax)
        sf    = ((bamax / 6) / S).astype(float8_e4m3fn)              the block scale
        data  = (x / (sf.astype(float32) * S)).astype(float4_e2m1fn)

Rowwise planes quantize x, columnwise planes quantize x.T (when M is a multiple of the block; else `columnwise=0`).
Inputs: the families of peer_common.py. Deterministic (fixed seeds).
"""
import argparse
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402

import ml_dtypes  # noqa: E402

ELEM_MAX = {"e4m3": 448.0, "e5m2": 57344.0}
NP_DT = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}


def version(impl):
    if impl == "torch":
        import torch
        return f"torch {torch.__version__.split('+')[0]}"
    return f"ml_dtypes {ml_dtypes.__version__}"


def mx_torch(xf, fp8):
    """xf: float32 numpy [R, K] -> (codes [R, K], scale bytes [R, K/32]) with PyTorch's casts."""
    import torch
    torch.set_num_threads(1)
    x = torch.from_numpy(np.ascontiguousarray(xf))
    r, k = x.shape
    b = x.reshape(r, k // 32, 32)
    amax = b.abs().amax(dim=-1, keepdim=True)
    scale = (amax / ELEM_MAX[fp8]).to(torch.float8_e8m0fnu)
    data = (b / scale.to(torch.float32)).to(torch.float8_e4m3fn if fp8 == "e4m3" else torch.float8_e5m2)
    return data.reshape(r, k).view(torch.uint8).numpy().copy(), scale.reshape(r, k // 32).view(torch.uint8).numpy().copy()


def mx_ml_dtypes(xf, fp8):
    r, k = xf.shape
    b = xf.reshape(r, k // 32, 32)
    amax = np.max(np.abs(b), axis=-1, keepdims=True)
    scale = (amax / np.float32(ELEM_MAX[fp8])).astype(ml_dtypes.float8_e8m0fnu)
    data = (b / scale.astype(np.float32)).astype(ml_dtypes.float8_e4m3fn if fp8 == "e4m3" else ml_dtypes.float8_e5m2)
    return data.reshape(r, k).view(np.uint8).copy(), scale.reshape(r, k // 32).view(np.uint8).copy()


def nv_ml_dtypes(xf, amax):
    r, k = xf.shape
    s = amax / np.float32(6 * 448)
    b = xf.reshape(r, k // 16, 16)
    bamax = np.max(np.abs(b), axis=-1, keepdims=True)
    sf = ((bamax / np.float32(6)) / s).astype(ml_dtypes.float8_e4m3fn)
    data = (b / (sf.astype(np.float32) * s)).astype(ml_dtypes.float4_e2m1fn)
    return data.reshape(r, k).view(np.uint8) & 0xF, sf.reshape(r, k // 16).view(np.uint8).copy()


def mx_case(impl, xf, fp8):
    fn = mx_torch if impl == "torch" else mx_ml_dtypes
    m, _ = xf.shape
    q, s = fn(xf, fp8)
    out = {"rowwise_data": (q, "U8"), "rowwise_scale_inv": (s, "U8")}
    md = {"recipe": "mxfp8", "fp8_dtype": fp8}
    if m % 32 == 0:
        qt, st = fn(np.ascontiguousarray(xf.T), fp8)
        out["columnwise_data"] = (np.ascontiguousarray(qt.T), "U8")
        out["columnwise_scale_inv"] = (np.ascontiguousarray(st.T), "U8")
    else:
        md["columnwise"] = "0"
    what = ("(amax / elem_max).to(torch.float8_e8m0fnu), (x / scale.float()).to(torch.float8_%s)" if impl == "torch" else
            "(amax / elem_max).astype(ml_dtypes.float8_e8m0fnu), (x / scale.astype(float32)).astype(ml_dtypes.float8_%s)")
    md["source"] = (f"{version(impl)}: MXFP8 by casts, float32, blocks of 32: amax = max|x| (NaN propagates), "
                    + what % ("e4m3fn" if fp8 == "e4m3" else "e5m2") + " (cast_mx_dump.py)")
    return out, md


def nv_case(xf):
    m, _ = xf.shape
    amax = np.max(np.abs(xf)).astype(np.float32)
    q, s = nv_ml_dtypes(xf, amax)
    a = np.asarray(amax, np.float32).reshape(1)
    out = {"rowwise_data": (pc.pack_fp4(q), "U8"), "rowwise_scale_inv": (s, "U8"), "amax_rowwise": (a, "F32")}
    md = {"recipe": "nvfp4"}
    if m % 16 == 0:
        qt, st = nv_ml_dtypes(np.ascontiguousarray(xf.T), amax)
        out["columnwise_data"] = (pc.pack_fp4(qt), "U8")
        out["columnwise_scale_inv"] = (st, "U8")
        out["amax_columnwise"] = (a, "F32")
    else:
        md["columnwise"] = "0"
    md["source"] = (f"{version('ml_dtypes')}: NVFP4 by casts, float32: S = max|x| / (6 * 448), sf = ((bamax / 6) / S)"
                    ".astype(ml_dtypes.float8_e4m3fn), (x / (sf.astype(float32) * S)).astype(ml_dtypes.float4_e2m1fn) "
                    "(cast_mx_dump.py)")
    return out, md


MX_SHAPES = [(64, 96), (32, 64), (40, 32)]
NV_SHAPES = [(32, 64), (16, 48), (33, 32)]


def cases(impl, stress):
    kinds = ("mxfp8_e4m3", "mxfp8_e5m2") + (("nvfp4",) if impl == "ml_dtypes" else ())
    seed = 5000 if impl == "torch" else 6000
    if stress:
        for i in range(stress):
            for dt in pc.DT_NAMES:
                for kind in kinds:
                    seed += 1
                    fam = pc.FAMILIES[(i + seed) % len(pc.FAMILIES)]
                    shape = (256, 512) if i % 2 == 0 else (96, 160)
                    yield f"stress{i}_{kind}_{dt}_{fam}_{shape[0]}x{shape[1]}", kind, dt, fam, shape, seed
        return
    for kind in kinds:
        for dt in pc.DT_NAMES:
            for fam in pc.FAMILIES:
                for shape in (NV_SHAPES if kind == "nvfp4" else MX_SHAPES):
                    seed += 1
                    yield f"{impl}_cast_{kind}_{dt}_{fam}_{shape[0]}x{shape[1]}", kind, dt, fam, shape, seed


def in_sample(kind, dt, fam, shape):
    """The committed sample: every edge family once per kind, spread over the dtypes, plus one ragged shape."""
    shapes = NV_SHAPES if kind == "nvfp4" else MX_SHAPES
    if shape == shapes[2]:
        return fam == "normal" and dt == "bf16"
    if shape != shapes[1]:
        return False
    pick = {"f32": ("allzero", "inf", "tinyblocks", "ties", "ulps"), "bf16": ("nan", "tiny", "negzero", "pow2"),
            "f16": ("f16edge", "zero_blocks", "big", "wide")}
    if kind == "mxfp8_e5m2":
        return fam in pick[dt][:2]
    return fam in pick[dt]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--impl", choices=("torch", "ml_dtypes"), required=True)
    ap.add_argument("out")
    ap.add_argument("--sample")
    ap.add_argument("--stress", type=int, default=0)
    args = ap.parse_args()
    profile = "torch_cast" if args.impl == "torch" else "ml_dtypes_cast"
    n = sampled = 0
    for name, kind, dt, fam, shape, seed in cases(args.impl, args.stress):
        emax = 6.0 if kind == "nvfp4" else ELEM_MAX[kind.split("_")[1]]
        x = pc.family(fam, shape[0], shape[1], seed, emax).astype(np.float32).astype(NP_DT[dt])
        xf = x.astype(np.float32)
        tensors, md = nv_case(xf) if kind == "nvfp4" else mx_case(args.impl, xf, kind.split("_")[1])
        tensors["x"] = pc.stored_input(x if dt == "f32" else x.view(np.uint16), dt)
        md.update({"qtc.schema": "1", "profile": profile, "case.family": fam})
        path = pc.out_path(args.out, name)
        pc.write_safetensors(path, tensors, md)
        n += 1
        if args.sample and in_sample(kind, dt, fam, shape):
            os.makedirs(args.sample, exist_ok=True)
            shutil.copy(path, args.sample)
            sampled += 1
    print(f"{n} vectors written to {args.out}" + (f", {sampled} copied to {args.sample}" if args.sample else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
