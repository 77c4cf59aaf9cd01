#!/usr/bin/env python3
"""Dump FP8 conformance vectors (VECTORS.md, schema 1) from nvidia-modelopt's own quantizer.

Runs `modelopt.torch.quantization.qtensor.FP8QTensor.quantize` (nvidia-modelopt 0.47.0, on the CPU) per tensor
(recipe fp8_tensor) and with block_sizes {-1: 128} (fp8_block tile 1x128) and {-1: 128, -2: 128} (128x128) on
F32, BF16 and F16 inputs of every family of fp8_peer_common.py, and writes the rowwise plane ModelOpt produces
(`rowwise_data`, and its scales as `rowwise_scale_inv` / `scale_inv`: ModelOpt's `scales`, amax / 448 in the
input dtype) with metadata profile=modelopt. qtc's reference must reproduce every file bit for bit:

    /work/venv-peers/bin/python conformance/peers/modelopt_fp8_dump.py OUT_DIR
    build/conformance/qtc verify OUT_DIR

Needs: torch, nvidia-modelopt (0.47.0), safetensors, numpy (`requests`, which modelopt imports for its dataset
helpers, is stubbed when missing).
"""
import argparse
import os
import sys
from importlib.metadata import version

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fp8_peer_common import FAMILIES, family, to_input, u8, write  # noqa: E402

try:  # modelopt.torch.utils imports `requests` for its dataset helpers only; the quantizer does not use it
    import requests  # noqa: F401
except ImportError:
    import types
    sys.modules["requests"] = types.ModuleType("requests")
from modelopt.torch.quantization.qtensor import FP8QTensor  # noqa: E402

SOURCE = f"nvidia-modelopt {version('nvidia-modelopt')} FP8QTensor.quantize (torch {torch.__version__.split('+')[0]}, CPU)"
MODES = {"tensor": None, "1x128": {-1: 128}, "128x128": {-1: 128, -2: 128}}


def dump(x, mode):
    q, scales = FP8QTensor.quantize(x, block_sizes=MODES[mode])
    data = u8(q._quantized_data)
    s = scales.float()
    if mode == "tensor":
        return {"rowwise_data": data, "scale_inv": s.reshape(1)}
    return {"rowwise_data": data, "rowwise_scale_inv": s.reshape(s.shape[-2], s.shape[-1])}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--shapes", default="16x64,33x200,130x260", help="MxK,... (ragged ones included)")
    ap.add_argument("--families", default=",".join(FAMILIES), help="input families (fp8_peer_common.py)")
    ap.add_argument("--dtypes", default="f32,bf16,f16")
    args = ap.parse_args()
    families, dtypes = args.families.split(","), args.dtypes.split(",")
    os.makedirs(args.out, exist_ok=True)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    n, seed = 0, 2500
    for mode in MODES:
        for dtype in dtypes:
            for fam in families:
                for m, k in shapes:
                    seed += 1
                    x = to_input(family(fam, m, k, seed), dtype)
                    tensors = {"x": x, **dump(x, mode)}
                    md = {"recipe": "fp8_tensor" if mode == "tensor" else "fp8_block", "profile": "modelopt",
                          "columnwise": "0", "fp8_dtype": "e4m3", "source": f"{SOURCE}, block_sizes={MODES[mode]}",
                          "case.family": fam, "case.dtype": dtype}
                    if mode != "tensor":
                        md["tile"] = mode
                    write(args.out, f"modelopt_{mode}_{dtype}_{fam}_{m}x{k}", tensors, md)
                    n += 1
    print(f"{n} vectors written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
