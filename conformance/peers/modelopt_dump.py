#!/usr/bin/env python3
"""Dump conformance vectors (VECTORS.md, schema 1) from nvidia-modelopt's own quantizers (CPU):

  * NVFP4: `NVFP4QTensor.quantize(x, 16)`: per-tensor scale `get_weights_scaling_factor_2(x)` = amax / (6 * 448),
    block scales `get_weights_scaling_factor` (the packed data, the E4M3 block scales, amax as `amax_rowwise`);
  * MXFP8: `MXFP8QTensor.quantize(x)` (E4M3 data, E8M0 scales).

    /work/venv-peers/bin/python conformance/peers/modelopt_dump.py OUT_DIR [--sample SAMPLE_DIR] [--stress N]
    build/conformance/qtc verify OUT_DIR

Rowwise planes are ModelOpt's outputs on x; columnwise planes its outputs on x.t().contiguous() (blocks along M),
stored in VECTORS.md's orientation. ModelOpt pads a ragged last dimension with zeros and crops the data (MXFP8);
NVFP4 shapes keep K % 16 == 0 and a ragged M is dumped rowwise only. Inputs go to ModelOpt in their own dtype
(F32, BF16, F16). Metadata profile=modelopt. Deterministic (fixed seeds, one thread).
"""
import argparse
import os
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402

try:  # modelopt.torch.utils imports `requests` for its dataset downloads only; no download happens here
    import requests  # noqa: F401
except ImportError:
    import types
    sys.modules["requests"] = types.ModuleType("requests")
import modelopt  # noqa: E402
from modelopt.torch.quantization.qtensor.mxfp8_tensor import MXFP8QTensor  # noqa: E402
from modelopt.torch.quantization.qtensor.nvfp4_tensor import NVFP4QTensor  # noqa: E402
from modelopt.torch.quantization.utils import reduce_amax  # noqa: E402

torch.set_num_threads(1)
SOURCE = f"nvidia-modelopt {modelopt.__version__} (torch {torch.__version__.split('+')[0]}, CPU)"
TDT = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def u8(t):
    return t.contiguous().view(torch.uint8).numpy().copy()


def nvfp4(x):
    def q(t):
        qt, sf, sf2 = NVFP4QTensor.quantize(t.clone(), 16)
        return u8(qt._quantized_data), u8(sf)
    m = x.shape[0]
    out = {}
    d, s = q(x)
    out["rowwise_data"], out["rowwise_scale_inv"] = (d, "U8"), (s, "U8")
    amax = reduce_amax(x).float().reshape(1).numpy().astype(np.float32)
    out["amax_rowwise"] = (amax, "F32")
    md = {"recipe": "nvfp4", "source": f"{SOURCE}: NVFP4QTensor.quantize(x, block_size=16) with "
                                        "get_weights_scaling_factor_2(x) = amax / (6 * 448)"}
    if m % 16 == 0:
        d, s = q(x.t().contiguous())
        out["columnwise_data"], out["columnwise_scale_inv"] = (d, "U8"), (s, "U8")
        out["amax_columnwise"] = (amax, "F32")
    else:
        md["columnwise"] = "0"
    return out, md


def mxfp8(x):
    def q(t):
        qt, sc = MXFP8QTensor.quantize(t.clone())
        return u8(qt._quantized_data), u8(sc)
    d, s = q(x)
    dt, st = q(x.t().contiguous())
    out = {"rowwise_data": (d, "U8"), "rowwise_scale_inv": (s, "U8"),
           "columnwise_data": (np.ascontiguousarray(dt.T), "U8"), "columnwise_scale_inv": (np.ascontiguousarray(st.T), "U8")}
    md = {"recipe": "mxfp8", "fp8_dtype": "e4m3", "scale_rule": "rceil",
          "source": f"{SOURCE}: MXFP8QTensor.quantize(x) (E4M3, block 32, 2^ceil(log2(amax / 448)))"}
    return out, md


NV_SHAPES = [(32, 64), (16, 48), (33, 32)]
MX_SHAPES = [(64, 96), (32, 32), (40, 50)]


def cases(stress):
    seed = 1000
    if stress:
        for i in range(stress):
            for dt in pc.DT_NAMES:
                for kind in ("nvfp4", "mxfp8"):
                    seed += 1
                    fam = pc.FAMILIES[(i + seed) % len(pc.FAMILIES)]
                    shape = (256, 512) if i % 2 == 0 else (96, 160)
                    yield f"stress{i}_{kind}_{dt}_{fam}_{shape[0]}x{shape[1]}", kind, dt, fam, shape, seed
        return
    for kind, shapes in (("nvfp4", NV_SHAPES), ("mxfp8", MX_SHAPES)):
        for dt in pc.DT_NAMES:
            for fam in pc.FAMILIES:
                for shape in shapes:
                    seed += 1
                    yield f"modelopt_{kind}_{dt}_{fam}_{shape[0]}x{shape[1]}", kind, dt, fam, shape, seed


def in_sample(kind, dt, fam, shape):
    shapes = NV_SHAPES if kind == "nvfp4" else MX_SHAPES
    if shape == shapes[2]:
        return fam in ("normal", "nan") and dt == "bf16"
    if shape != shapes[1]:
        return False
    pick = {"f32": ("allzero", "inf", "tinyblocks", "negzero", "ties"), "bf16": ("nan", "zero_blocks", "tiny", "heavy"),
            "f16": ("f16edge", "ulps", "wide", "pow2")}
    return fam in pick[dt]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--sample")
    ap.add_argument("--stress", type=int, default=0)
    args = ap.parse_args()
    n = sampled = 0
    for name, kind, dt, fam, shape, seed in cases(args.stress):
        x32 = pc.family(fam, shape[0], shape[1], seed, 6.0 if kind == "nvfp4" else 448.0).astype(np.float32)
        x = torch.from_numpy(x32).to(TDT[dt])
        tensors, md = nvfp4(x) if kind == "nvfp4" else mxfp8(x)
        tensors["x"] = pc.stored_input(x.numpy() if dt == "f32" else x.view(torch.int16).numpy(), dt)
        md.update({"qtc.schema": "1", "profile": "modelopt", "case.family": fam})
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
