#!/usr/bin/env python3
"""Dump NVFP4, MXFP8 and MXFP4 conformance vectors (VECTORS.md, schema 1) from compressed-tensors' own quantizer.

compressed-tensors 0.20.0, on the CPU, the presets' weight arguments (`quant_scheme.NVFP4`, `.MXFP8`, `.MXFP4`):

  * NVFP4 (TENSOR_GROUP, groups of 16, E4M3 scales): the global scale `generate_gparam(*torch.aminmax(x))`
    (2688 / amax in x's dtype, NaN/Inf -> 1, then float32), the block scales and zero points of
    `compute_dynamic_scales_and_zp(x, args, global_scale=gs)`, the E2M1 values of `quantize(x, scale, zp, args,
    global_scale=gs)` packed by the NVFP4 compressor's `pack_fp4_to_uint8`, the scales stored as the compressor
    stores them (`scale.to(torch.float8_e4m3fn)`); `amax_rowwise` is generate_gparam's max(|min|, |max|) as float32;
  * MXFP8 (GROUP, groups of 32, uint8 E8M0 scales): `compute_dynamic_scales_and_zp(x, args)` and
    `quantize(x, scale, zp, args, dtype=torch.float8_e4m3fn)`; the scales stored as the MXFP8 compressor stores them
    (`compress_mx_scale`: 127 + floor(log2(scale)));
  * MXFP4 (GROUP, groups of 32): the same scales, `quantize(x, scale, zp, args)` packed by `pack_fp4_to_uint8`.

    /work/venv-peers/bin/python conformance/peers/compressed_tensors_dump.py OUT_DIR [--sample DIR] [--stress N]
    build/conformance/qtc verify OUT_DIR

Rowwise planes are the outputs on x; columnwise planes the outputs on x.t().contiguous() (blocks along M), stored
in VECTORS.md's orientation. compressed-tensors' group quantization needs the last dimension to be a multiple of
the group size: K is one; a ragged M is dumped rowwise only. Inputs go in their own dtype (F32, BF16, F16): the
scales are computed in it. The FP4 cast on the CPU is the eager `cast_to_fp4` (compressed-tensors 0.20.0 registers
the Triton kernel for CUDA tensors only; no torch.compile on this path). Metadata profile=compressed_tensors.
Deterministic (fixed seeds, one thread).

`--device cuda` runs the same calls on CUDA tensors (on the GPU machine): the scales by PyTorch's CUDA ops, `quantize`
by compressed-tensors' Triton `_quantize_kernel` (float32 div_rn, tl.clamp, _round_to_fp4 / tl.float8e4nv) and
`pack_fp4_to_uint8` by its Triton kernel; files named ctgpu_*, metadata profile=compressed_tensors_triton, `source`
starting "compressed-tensors VERSION on CUDA" (qtc identify's implementation: the GPU path apart from the CPU one) and
naming torch, triton and the device. conformance/vectors/compressed_tensors_triton holds a sample of the 432 that an
H100 gave (reports/h200/run_r25_triton).
"""
import argparse
import os
import shutil
import sys
from importlib.metadata import version

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402
from compressed_tensors.compressors.mx_utils import compress_mx_scale  # noqa: E402
from compressed_tensors.compressors.nvfp4.helpers import pack_fp4_to_uint8  # noqa: E402
from compressed_tensors.quantization import quant_scheme  # noqa: E402
from compressed_tensors.quantization.lifecycle.forward import quantize  # noqa: E402
from compressed_tensors.quantization.utils.helpers import compute_dynamic_scales_and_zp, generate_gparam  # noqa: E402

torch.set_num_threads(1)
CT = f"compressed-tensors {version('compressed-tensors')}"
TORCH = f"torch {torch.__version__.split('+')[0]}, CPU"
DEVICE = "cpu"
PROFILE = "compressed_tensors"
TDT = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def u8(t):
    return t.contiguous().view(torch.uint8).cpu().numpy().copy()


def nvfp4_plane(t):
    args = quant_scheme.NVFP4["weights"]
    lo, hi = torch.aminmax(t)
    gs = generate_gparam(lo, hi)
    scale, zp = compute_dynamic_scales_and_zp(t, args, module=None, global_scale=gs)
    values = quantize(t, scale, zp, args, global_scale=gs)
    amax = torch.max(torch.abs(torch.min(lo, torch.zeros_like(lo))), torch.abs(torch.max(hi, torch.zeros_like(hi))))
    return u8(pack_fp4_to_uint8(values)), u8(scale.to(torch.float8_e4m3fn)), amax.float().reshape(1).cpu().numpy().copy()


def nvfp4(x):
    d, s, a = nvfp4_plane(x)
    out = {"rowwise_data": (d, "U8"), "rowwise_scale_inv": (s, "U8"), "amax_rowwise": (a, "F32")}
    md = {"recipe": "nvfp4",
          "source": f"{CT} preset NVFP4 weights: generate_gparam(*aminmax(x)), compute_dynamic_scales_and_zp(x, args, "
                    f"global_scale=gs), quantize(x, scale, zp, args, global_scale=gs), pack_fp4_to_uint8 ({TORCH})"}
    if x.shape[0] % 16 == 0:
        d, s, a = nvfp4_plane(x.t().contiguous())
        out["columnwise_data"], out["columnwise_scale_inv"], out["amax_columnwise"] = (d, "U8"), (s, "U8"), (a, "F32")
    else:
        md["columnwise"] = "0"
    return out, md


def mx_plane(t, preset):
    args = getattr(quant_scheme, preset)["weights"]
    scale, zp = compute_dynamic_scales_and_zp(t, args, module=None)
    sbytes = u8(compress_mx_scale(scale, torch.uint8))
    if preset == "MXFP8":
        return u8(quantize(t, scale, zp, args, dtype=torch.float8_e4m3fn)), sbytes
    return u8(pack_fp4_to_uint8(quantize(t, scale, zp, args))), sbytes


def mx(x, preset):
    recipe = preset.lower()
    d, s = mx_plane(x, preset)
    out = {"rowwise_data": (d, "U8"), "rowwise_scale_inv": (s, "U8")}
    md = {"recipe": recipe, "scale_rule": "pow2_round",
          "source": f"{CT} preset {preset} weights: compute_dynamic_scales_and_zp(x, args), quantize(x, scale, zp, args"
                    + (", dtype=float8_e4m3fn)" if preset == "MXFP8" else "), pack_fp4_to_uint8")
                    + f", compress_mx_scale ({TORCH})"}
    if recipe == "mxfp8":
        md["fp8_dtype"] = "e4m3"
    if x.shape[0] % 32 == 0:
        dt, st = mx_plane(x.t().contiguous(), preset)
        if recipe == "mxfp8":  # VECTORS.md: MXFP8 columnwise data in x's orientation, scales [ceil(M/32), K]
            dt = np.ascontiguousarray(dt.T)
        st = np.ascontiguousarray(st.T) if recipe == "mxfp8" else st
        out["columnwise_data"], out["columnwise_scale_inv"] = (dt, "U8"), (st, "U8")
    else:
        md["columnwise"] = "0"
    return out, md


def family(name, m, k, seed, elem_max):
    """peer_common's families, and `nanlanes`: NaN, -NaN and +-Inf in the first and the last blocks of the tensor, so
    that NaN blocks fall both in PyTorch's vector lanes and in the remainder of its loops (the NaN's sign decides
    compressed-tensors' NaN block scales; 33x32 NVFP4 and 40x64 BF16/F16 MX block tensors have a remainder)."""
    if name != "nanlanes":
        return pc.family(name, m, k, seed, elem_max)
    x = np.random.default_rng(seed).standard_normal((m, k))
    x[0, 0] = np.nan
    x[m - 1, k - 1] = np.nan
    x[max(0, m - 2), 0] = -np.nan
    x[max(0, m - 3), min(1, k - 1)] = np.inf
    x[m // 2, k // 2] = -np.inf
    return x


FAMILIES = pc.FAMILIES + ["nanlanes"]
SHAPES = {"nvfp4": [(32, 64), (16, 48), (33, 32)], "mxfp8": [(64, 96), (32, 32), (40, 64)],
          "mxfp4": [(64, 96), (32, 32), (40, 64)]}
ELEM_MAX = {"nvfp4": 6.0, "mxfp8": 448.0, "mxfp4": 6.0}


def cases(stress):
    seed = 7000
    if stress:
        for i in range(stress):
            for dt in pc.DT_NAMES:
                for kind in SHAPES:
                    seed += 1
                    fam = FAMILIES[(i + seed) % len(FAMILIES)]
                    shape = (256, 512) if i % 2 == 0 else (96, 160)
                    yield f"stress{i}_{kind}_{dt}_{fam}_{shape[0]}x{shape[1]}", kind, dt, fam, shape, seed
        return
    for kind, shapes in SHAPES.items():
        for dt in pc.DT_NAMES:
            for fam in FAMILIES:
                for shape in shapes:
                    seed += 1
                    yield f"ct_{kind}_{dt}_{fam}_{shape[0]}x{shape[1]}", kind, dt, fam, shape, seed


def in_sample(kind, dt, fam, shape):
    shapes = SHAPES[kind]
    if shape == shapes[2]:
        return (fam == "normal" and dt == "bf16") or fam == "nanlanes"
    if shape != shapes[1]:
        return False
    pick = {"f32": ("allzero", "inf", "nan", "tinyblocks", "negzero", "ties"),
            "bf16": ("nan", "inf", "zero_blocks", "tiny", "heavy"), "f16": ("f16edge", "nan", "inf", "ulps", "wide", "pow2")}
    return fam in pick[dt]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--sample")
    ap.add_argument("--stress", type=int, default=0)
    ap.add_argument("--kinds", default=",".join(SHAPES), help="nvfp4,mxfp8,mxfp4")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda: compressed-tensors' Triton path")
    args = ap.parse_args()
    global CT, TORCH, DEVICE, PROFILE
    if args.device != "cpu":
        import triton
        DEVICE = args.device
        CT = f"{CT} on CUDA (Triton kernels):"
        TORCH = f"torch {torch.__version__.split('+')[0]}, triton {triton.__version__}, {torch.cuda.get_device_name()}"
        PROFILE = "compressed_tensors_triton"
    kinds = args.kinds.split(",")
    n = sampled = 0
    for name, kind, dt, fam, shape, seed in cases(args.stress):
        if kind not in kinds:
            continue
        x32 = family(fam, shape[0], shape[1], seed, ELEM_MAX[kind]).astype(np.float32)
        x = torch.from_numpy(x32).to(TDT[dt])
        xd = x.to(DEVICE)
        tensors, md = nvfp4(xd) if kind == "nvfp4" else mx(xd, kind.upper())
        tensors["x"] = pc.stored_input(x.numpy() if dt == "f32" else x.view(torch.int16).numpy(), dt)
        md.update({"qtc.schema": "1", "profile": PROFILE, "case.family": fam, "case.dtype": dt})
        path = pc.out_path(args.out, name if DEVICE == "cpu" else "ctgpu_" + name.removeprefix("ct_"))
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
