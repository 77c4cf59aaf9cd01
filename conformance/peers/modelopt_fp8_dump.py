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
import os
import sys
from importlib.metadata import version

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fp8_peer_common import dump_cases, fp8_outputs, u8  # noqa: E402

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
    return fp8_outputs(u8(q._quantized_data), scales, mode)


def main():
    return dump_cases(__doc__, "modelopt", "modelopt", MODES, dump, lambda mode: f"{SOURCE}, block_sizes={MODES[mode]}",
                      "16x64,33x200,130x260", 2500)

if __name__ == "__main__":
    sys.exit(main())
