#!/usr/bin/env python3
"""Dump FP8 conformance vectors (VECTORS.md, schema 1) from compressed-tensors' own quantizer.

compressed-tensors 0.20.0, on the CPU, presets `FP8` (weights: strategy TENSOR -> recipe fp8_tensor) and
`FP8_BLOCK` (weights: strategy BLOCK 128x128 -> fp8_block 128x128; input activations: dynamic GROUP 128 ->
fp8_block 1x128, K a multiple of 128 as compressed-tensors requires): the scales from `calculate_qparams`
(per tensor and per group through `compute_dynamic_scales_and_zp`; per block from the blocks' min and max, as
an observer passes them) and the data from `quantize(..., dtype=torch.float8_e4m3fn)`. Writes the rowwise plane
(`rowwise_data`, the scales as `rowwise_scale_inv` / `scale_inv`) with metadata profile=compressed_tensors:

    /work/venv-peers/bin/python conformance/peers/compressed_tensors_fp8_dump.py OUT_DIR
    build/conformance/qtc verify OUT_DIR

Needs: torch, compressed-tensors (0.20.0), safetensors, numpy.
"""
import argparse
import os
import sys
from importlib.metadata import version

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fp8_peer_common import FAMILIES, family, to_input, u8, write  # noqa: E402
from compressed_tensors.quantization import quant_scheme  # noqa: E402
from compressed_tensors.quantization.lifecycle.forward import quantize  # noqa: E402
from compressed_tensors.quantization.utils.helpers import calculate_qparams, compute_dynamic_scales_and_zp  # noqa: E402

SOURCE = (f"compressed-tensors {version('compressed-tensors')} calculate_qparams / compute_dynamic_scales_and_zp + "
          f"quantize (torch {torch.__version__.split('+')[0]}, CPU)")
MODES = {"tensor": ("FP8", "weights"), "1x128": ("FP8_BLOCK", "input_activations"), "128x128": ("FP8_BLOCK", "weights")}


def block_min_max(x):
    m, k = x.shape
    pm, pk = -(-m // 128) * 128, -(-k // 128) * 128
    xp = torch.zeros((pm, pk), dtype=x.dtype)
    xp[:m, :k] = x
    v = xp.view(pm // 128, 128, pk // 128, 128)
    return v.amin(dim=(1, 3)), v.amax(dim=(1, 3))


def dump(x, mode):
    preset, which = MODES[mode]
    args = getattr(quant_scheme, preset)[which]
    if mode == "128x128":
        lo, hi = block_min_max(x)
        scale, zp = calculate_qparams(lo, hi, args)
    else:
        scale, zp = compute_dynamic_scales_and_zp(x, args, module=None)
    q = quantize(x, scale, zp, args, dtype=torch.float8_e4m3fn)
    s = scale.float()
    if mode == "tensor":
        return {"rowwise_data": u8(q), "scale_inv": s.reshape(1)}
    return {"rowwise_data": u8(q), "rowwise_scale_inv": s.reshape(s.shape[-2], s.shape[-1])}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--shapes", default="16x128,33x256,130x260", help="MxK,... (1x128 groups skip K % 128 != 0)")
    ap.add_argument("--families", default=",".join(FAMILIES), help="input families (fp8_peer_common.py)")
    ap.add_argument("--dtypes", default="f32,bf16,f16")
    args = ap.parse_args()
    families, dtypes = args.families.split(","), args.dtypes.split(",")
    os.makedirs(args.out, exist_ok=True)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    n, seed = 0, 2600
    for mode in MODES:
        for dtype in dtypes:
            for fam in families:
                for m, k in shapes:
                    seed += 1
                    if mode == "1x128" and k % 128 != 0:
                        continue
                    x = to_input(family(fam, m, k, seed), dtype)
                    tensors = {"x": x, **dump(x, mode)}
                    md = {"recipe": "fp8_tensor" if mode == "tensor" else "fp8_block", "profile": "compressed_tensors",
                          "columnwise": "0", "fp8_dtype": "e4m3", "source": f"{SOURCE}, preset {MODES[mode][0]} {MODES[mode][1]}",
                          "case.family": fam, "case.dtype": dtype}
                    if mode != "tensor":
                        md["tile"] = mode
                    write(args.out, f"ct_{mode}_{dtype}_{fam}_{m}x{k}", tensors, md)
                    n += 1
    print(f"{n} vectors written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
