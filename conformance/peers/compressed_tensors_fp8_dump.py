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

`--device cuda` runs the same calls on CUDA tensors (on the GPU machine): the scales by PyTorch's CUDA ops and
`quantize` by compressed-tensors' Triton `_quantize_kernel`; files named ctgpu_*, metadata
profile=compressed_tensors_triton, `source` "compressed-tensors VERSION on CUDA (Triton kernels): ..." naming torch,
triton and the device (as compressed_tensors_dump.py --device cuda).

Needs: torch, compressed-tensors (0.20.0), safetensors, numpy.
"""
import os
import sys
from importlib.metadata import version

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fp8_peer_common import dump_cases, fp8_outputs, u8  # noqa: E402
from compressed_tensors.quantization import quant_scheme  # noqa: E402
from compressed_tensors.quantization.lifecycle.forward import quantize  # noqa: E402
from compressed_tensors.quantization.utils.helpers import calculate_qparams, compute_dynamic_scales_and_zp  # noqa: E402

SOURCE = (f"compressed-tensors {version('compressed-tensors')} calculate_qparams / compute_dynamic_scales_and_zp + "
          f"quantize (torch {torch.__version__.split('+')[0]}, CPU)")
MODES = {"tensor": ("FP8", "weights"), "1x128": ("FP8_BLOCK", "input_activations"), "128x128": ("FP8_BLOCK", "weights")}


def block_min_max(x):
    m, k = x.shape
    pm, pk = -(-m // 128) * 128, -(-k // 128) * 128
    xp = torch.zeros((pm, pk), dtype=x.dtype, device=x.device)
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
    return fp8_outputs(u8(q), scale, mode)


def on_device(device):
    import triton
    torch_ver = (f"torch {torch.__version__.split('+')[0]}, triton {triton.__version__}, "
                 f"{torch.cuda.get_device_name(torch.device(device))}")
    src = (f"compressed-tensors {version('compressed-tensors')} on CUDA (Triton kernels): calculate_qparams / "
           f"compute_dynamic_scales_and_zp + quantize ({torch_ver})")
    return "ctgpu", "compressed_tensors_triton", lambda mode: f"{src}, preset {MODES[mode][0]} {MODES[mode][1]}"


def main():
    # 1x128 groups need K % 128 == 0 (compressed-tensors' group quantization)
    return dump_cases(__doc__, "ct", "compressed_tensors", MODES, dump,
                      lambda mode: f"{SOURCE}, preset {MODES[mode][0]} {MODES[mode][1]}", "16x128,33x256,130x260", 2600,
                      skip=lambda mode, k: mode == "1x128" and k % 128 != 0, on_device=on_device)

if __name__ == "__main__":
    sys.exit(main())
