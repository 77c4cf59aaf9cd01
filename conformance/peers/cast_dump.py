#!/usr/bin/env python3
"""Dump FP8 per-tensor current-scaling vectors (VECTORS.md recipe fp8_tensor) made with a library's own float8
cast, to see which qtc profile (if any) reproduces it:

    python3 conformance/peers/cast_dump.py --impl torch conformance/vectors/torch_cast          # Tensor.to(torch.float8_e4m3fn / e5m2)
    python3 conformance/peers/cast_dump.py --impl ml_dtypes conformance/vectors/ml_dtypes_cast  # astype(ml_dtypes.float8_*)

Each file quantizes x the way a user of that library writes current scaling: amax = max|x| (float32),
scale = fp8_max / amax, data = cast(x * scale), scale_inv = 1 / scale, all in float32 with that library's
arithmetic; the cast is the library's own (PyTorch's and ml_dtypes' casts do not saturate: a value past the
format's range becomes NaN (E4M3) or Inf (E5M2)). Inputs: normal, heavy-tailed, BF16, and the edge
families where the rules differ (Inf, NaN, an all-zero tensor, -0.0). Deterministic (fixed seeds). Profiles
torch_cast / ml_dtypes_cast (fp8.form cast) reproduce them; `source` begins with the implementation and version as
cast_mx_dump.py's does ("torch 2.11.0", "ml_dtypes 0.7.0"), so that identify counts both scripts' files as one.
(The files of 2026-12-01 under conformance/vectors/peers/ said "PyTorch 2.15.0": the same bytes, a wrong version.)
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

FP8_MAX = {"e4m3": 448.0, "e5m2": 57344.0}


def family(name, m, k, seed):
    g = np.random.default_rng(seed)
    x = g.standard_normal((m, k)).astype(np.float32)
    if name == "heavy":
        x = (g.standard_t(2, (m, k)) * 30).astype(np.float32)
    elif name == "inf":
        x[1, 3] = np.inf
    elif name == "nan":
        x[2, 5] = np.nan
    elif name == "zero":
        x[:] = 0.0
    elif name == "negzero":
        x[0, :8] = -0.0
    return x


def write_safetensors(path, tensors, metadata):
    """A minimal safetensors writer (the format of VECTORS.md), so that the ml_dtypes dump needs no torch."""
    header, blobs, off = {"__metadata__": metadata}, [], 0
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def quantize_torch(x32, fp8, bf16):
    import torch
    x = torch.from_numpy(x32)
    if bf16:
        x = x.to(torch.bfloat16)
    xf = x.float()
    amax = torch.max(torch.abs(xf))
    scale = FP8_MAX[fp8] / amax
    dt = torch.float8_e4m3fn if fp8 == "e4m3" else torch.float8_e5m2
    q = (xf * scale).to(dt).view(torch.uint8)
    x_raw = x.view(torch.int16).numpy().tobytes() if bf16 else xf.numpy().tobytes()
    return (x_raw, q.numpy().tobytes(), amax.reshape(1).numpy().tobytes(),
            (1.0 / scale).reshape(1).numpy().tobytes(), f"torch {torch.__version__.split('+')[0]} Tensor.to(float8_{fp8})")


def quantize_ml_dtypes(x32, fp8, bf16):
    import ml_dtypes
    x = x32.astype(ml_dtypes.bfloat16) if bf16 else x32
    xf = x.astype(np.float32)
    with np.errstate(all="ignore"):
        amax = np.float32(np.max(np.abs(xf)))
        scale = np.float32(FP8_MAX[fp8]) / amax
        dt = ml_dtypes.float8_e4m3fn if fp8 == "e4m3" else ml_dtypes.float8_e5m2
        q = (xf * scale).astype(dt).view(np.uint8)
        inv = np.float32(1.0) / scale
    x_raw = x.view(np.uint16).tobytes() if bf16 else xf.tobytes()
    return (x_raw, q.tobytes(), np.array([amax], np.float32).tobytes(), np.array([inv], np.float32).tobytes(),
            f"ml_dtypes {ml_dtypes.__version__} astype(float8_{fp8}{'fn' if fp8 == 'e4m3' else ''})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--impl", choices=["torch", "ml_dtypes"], required=True)
    ap.add_argument("out")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    fn = quantize_torch if args.impl == "torch" else quantize_ml_dtypes
    n, seed = 0, 100
    m, k = 16, 32
    for fp8 in ("e4m3", "e5m2"):
        for fam in ("normal", "heavy", "bf16", "inf", "nan", "zero", "negzero"):
            seed += 1
            bf16 = fam == "bf16"
            x32 = family("normal" if bf16 else fam, m, k, seed)
            x_raw, q, amax, inv, source = fn(x32, fp8, bf16)
            tensors = {"x": ("BF16" if bf16 else "F32", (m, k), x_raw), "rowwise_data": ("U8", (m, k), q),
                       "amax": ("F32", (1,), amax), "scale_inv": ("F32", (1,), inv)}
            prof = "torch_cast" if args.impl == "torch" else "ml_dtypes_cast"
            md = {"qtc.schema": "1", "recipe": "fp8_tensor", "profile": prof, "fp8_dtype": fp8, "columnwise": "0", "pow2_scales": "0",
                  "eps": "0", "source": source + ", current scaling: amax = max|x|, data = cast(x * (fp8_max / amax))",
                  "case.family": fam}
            write_safetensors(os.path.join(args.out, f"{args.impl}_fp8tensor_{fp8}_{fam}_{m}x{k}.safetensors"), tensors, md)
            n += 1
    print(f"{n} vectors written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
