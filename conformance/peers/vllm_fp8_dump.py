#!/usr/bin/env python3
"""Dump FP8 conformance vectors (VECTORS.md, schema 1) from vLLM 0.33.0's native FP8 quantizers.

vLLM's `QuantFP8` (vllm/model_executor/layers/quantization/input_quant_fp8.py) does not import without vLLM's
compiled extension and its dependencies, so this script reproduces the lines of its two CPU paths, eager (the
statements are quoted below; the file of a vLLM wheel can be given with --check-source, which asserts that those
statements are still in it):
  * `forward_native`, dynamic per tensor (recipe fp8_tensor): x_max = x.abs().max().unsqueeze(-1).to(float32);
    scale = (x_max / 448).clamp(min=1 / (448 * 512)); out = (x.to(float32) * scale.reciprocal()).clamp(-448, 448)
    .to(float8_e4m3fn);
  * `_quantize_group_native`, groups of 128 (fp8_block 1x128; K padded with zeros to a multiple of 128): absmax =
    x_grouped.abs().max(dim=-1)[0].float(); scales_raw = (absmax / 448).clamp(min=1 / (448 * 512)); with use_ue8m0
    scales = exp2(ceil(log2(scales_raw))) (pow2_scales=1); x_q = (x_grouped / scales).clamp(-448, 448).to(fp8).
The scales are written as F32 (`scale_inv` / `rowwise_scale_inv`), and for UE8M0 also as E8M0 bytes
(scale_dtype=ue8m0) in a second file. Metadata profile=vllm:

    /work/venv-peers/bin/python conformance/peers/vllm_fp8_dump.py OUT_DIR [--check-source .../input_quant_fp8.py]
    build/conformance/qtc verify OUT_DIR

Needs: torch, safetensors, numpy.
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fp8_peer_common import FAMILIES, family, to_input, u8, write  # noqa: E402

VLLM = "vLLM 0.33.0"
SOURCE = (f"{VLLM} QuantFP8 (input_quant_fp8.py), its native lines reproduced in vllm_fp8_dump.py "
          f"(torch {torch.__version__.split('+')[0]}, CPU, eager)")
_FP8_DTYPE = torch.float8_e4m3fn
_FP8_MIN, _FP8_MAX = torch.finfo(_FP8_DTYPE).min, torch.finfo(_FP8_DTYPE).max
_FP8_MIN_SCALING_FACTOR = 1.0 / (_FP8_MAX * 512.0)
QUOTED = [
    "x_max = x.abs().max().unsqueeze(-1).to(torch.float32)",
    "scale = (x_max / _FP8_MAX).clamp(min=_FP8_MIN_SCALING_FACTOR)",
    "out = out.clamp(_FP8_MIN, _FP8_MAX).to(_FP8_DTYPE)",
    "absmax = x_grouped.abs().max(dim=-1, keepdim=True)[0].float()",
    "scales_raw = (absmax / _FP8_MAX).clamp(min=_FP8_MIN_SCALING_FACTOR)",
    "torch.exp2(torch.ceil(torch.log2(scales_raw)))",
    "x_scaled = x_grouped / scales",
    "x_quant = x_scaled.clamp(_FP8_MIN, _FP8_MAX).to(_FP8_DTYPE)",
]


def forward_native_per_tensor(x):
    x_max = x.abs().max().unsqueeze(-1).to(torch.float32)
    scale = (x_max / _FP8_MAX).clamp(min=_FP8_MIN_SCALING_FACTOR)
    out = x.to(torch.float32) * scale.to(torch.float32).expand(x.shape[-2:]).reciprocal()
    out = out.clamp(_FP8_MIN, _FP8_MAX).to(_FP8_DTYPE)
    return out, scale


def quantize_group_native(x, group_size, use_ue8m0):
    orig_shape = x.shape
    hidden_dim = x.shape[-1]
    num_groups = (hidden_dim + group_size - 1) // group_size
    padded_dim = num_groups * group_size
    if padded_dim != hidden_dim:
        x = F.pad(x, (0, padded_dim - hidden_dim), mode="constant", value=0.0)
    x_grouped = x.view(-1, num_groups, group_size)
    absmax = x_grouped.abs().max(dim=-1, keepdim=True)[0].float()
    scales_raw = (absmax / _FP8_MAX).clamp(min=_FP8_MIN_SCALING_FACTOR)
    scales = torch.exp2(torch.ceil(torch.log2(scales_raw))) if use_ue8m0 else scales_raw
    x_scaled = x_grouped / scales
    x_quant = x_scaled.clamp(_FP8_MIN, _FP8_MAX).to(_FP8_DTYPE)
    x_quant = x_quant.view(-1, padded_dim)
    if padded_dim != hidden_dim:
        x_quant = x_quant[..., :hidden_dim]
    x_quant = x_quant.view(orig_shape)
    scales = scales.squeeze(-1).reshape(orig_shape[:-1] + (num_groups,))
    return x_quant, scales


def e8m0_bytes(s):
    """Power-of-two float32 scales as E8M0 bytes (the exponent field; NaN -> 0xFF)."""
    b = ((s.view(torch.int32) >> 23) & 0xFF).to(torch.uint8)
    return torch.where(torch.isnan(s), torch.full_like(b, 0xFF), b)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--shapes", default="16x128,33x200,130x260")
    ap.add_argument("--check-source", help="vLLM's input_quant_fp8.py: assert the reproduced lines are in it")
    ap.add_argument("--families", default=",".join(FAMILIES), help="input families (fp8_peer_common.py)")
    ap.add_argument("--dtypes", default="f32,bf16,f16")
    args = ap.parse_args()
    families, dtypes = args.families.split(","), args.dtypes.split(",")
    if args.check_source:
        text = open(args.check_source).read()
        missing = [q for q in QUOTED if q not in text]
        if missing:
            sys.exit(f"{args.check_source} no longer holds: {missing}")
    os.makedirs(args.out, exist_ok=True)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    n, seed = 0, 2700
    for mode in ("tensor", "group", "group_ue8m0"):
        for dtype in dtypes:
            for fam in families:
                for m, k in shapes:
                    seed += 1
                    x = to_input(family(fam, m, k, seed), dtype)
                    md = {"profile": "vllm", "columnwise": "0", "fp8_dtype": "e4m3", "case.family": fam, "case.dtype": dtype}
                    if mode == "tensor":
                        q, s = forward_native_per_tensor(x)
                        write(args.out, f"vllm_tensor_{dtype}_{fam}_{m}x{k}",
                              {"x": x, "rowwise_data": u8(q), "scale_inv": s.reshape(1)},
                              {**md, "recipe": "fp8_tensor", "source": f"{SOURCE}: forward_native, per tensor"})
                        n += 1
                        continue
                    ue8m0 = mode == "group_ue8m0"
                    q, s = quantize_group_native(x, 128, ue8m0)
                    md.update({"recipe": "fp8_block", "tile": "1x128", "pow2_scales": "1" if ue8m0 else "0",
                               "source": f"{SOURCE}: _quantize_group_native, group 128, use_ue8m0={ue8m0}"})
                    write(args.out, f"vllm_{mode}_{dtype}_{fam}_{m}x{k}", {"x": x, "rowwise_data": u8(q), "rowwise_scale_inv": s}, md)
                    n += 1
                    if ue8m0 and m == shapes[0][0]:  # the same scales stored as UE8M0 bytes
                        write(args.out, f"vllm_{mode}_u8_{dtype}_{fam}_{m}x{k}",
                              {"x": x, "rowwise_data": u8(q), "rowwise_scale_inv": e8m0_bytes(s)}, {**md, "scale_dtype": "ue8m0"})
                        n += 1
    print(f"{n} vectors written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
