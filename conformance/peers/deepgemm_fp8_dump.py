#!/usr/bin/env python3
"""Dump FP8 conformance vectors (VECTORS.md, schema 1) from DeepGEMM's own FP8 casts.

DeepGEMM is not on PyPI; give its checkout (github.com/deepseek-ai/DeepGEMM). This script imports the file
deep_gemm/utils/math.py of that checkout by path (pure torch: it runs on the CPU without DeepGEMM's CUDA
extension) and runs, on F32, BF16 and F16 inputs of every family of fp8_peer_common.py:
  * `per_token_cast_to_fp8(x, use_ue8m0, gran_k=128)` -> recipe fp8_block, tile 1x128 (eps 1e-4: DeepGEMM's
    amax clamp; pow2_scales = use_ue8m0), and with gran_k=32 (the activations of DeepGEMM's UE8M0 paths) -> tile 1x32,
  * `per_block_cast_to_fp8(x, use_ue8m0)` -> fp8_block 128x128,
and writes the rowwise plane (`rowwise_data`, the F32 scales `sf` as `rowwise_scale_inv`), metadata
profile=deepgemm; for use_ue8m0 also the same scales as E8M0 bytes (scale_dtype=ue8m0), and packed as DeepGEMM's
`get_mn_major_tma_aligned_packed_ue8m0_tensor` packs them (layout=deepgemm_packed_ue8m0; its torch reference reproduced):

    /work/venv-peers/bin/python conformance/peers/deepgemm_fp8_dump.py DEEPGEMM_CHECKOUT OUT_DIR
    build/conformance/qtc verify OUT_DIR

Needs: torch, safetensors, numpy.
"""
import argparse
import importlib.util
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fp8_peer_common import FAMILIES, family, to_input, u8, write  # noqa: E402


def load_math(checkout):
    path = os.path.join(checkout, "deep_gemm", "utils", "math.py")
    spec = importlib.util.spec_from_file_location("deep_gemm_utils_math", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, path


def revision(checkout):
    try:
        return subprocess.run(["git", "-C", checkout, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown revision"


def packed_ue8m0_storage(sf):
    """The storage of DeepGEMM's `get_mn_major_tma_aligned_packed_ue8m0_tensor(sf)` for a 2-D float32 sf [mn, k]:
    the lines of its torch reference (tests/test_layout.py, get_mn_major_tma_aligned_packed_ue8m0_tensor_torch_impl,
    reproduced: that file imports DeepGEMM's CUDA extension), then the MN-major int32 buffer [ceil(k/4), align(mn, 4)]
    it views, as bytes (layout=deepgemm_packed_ue8m0)."""
    ue8m0_tensor = (sf.contiguous().view(torch.int) >> 23).to(torch.uint8)
    mn, k = sf.shape
    aligned_mn = -(-mn // 4) * 4  # get_tma_aligned_size(mn, 4): 16 bytes of 4-byte words
    aligned_k = -(-k // 4) * 4
    padded = torch.zeros((aligned_mn, aligned_k), dtype=torch.uint8)
    padded[:mn, :k] = ue8m0_tensor
    padded = padded.view(-1).view(dtype=torch.int).view(aligned_mn, aligned_k // 4)
    transposed = torch.zeros((aligned_k // 4, aligned_mn), dtype=torch.int)  # .mT of it is DeepGEMM's result
    transposed.mT[:, :] = padded
    return transposed.contiguous().view(torch.uint8).view(aligned_k // 4, aligned_mn * 4)


def e8m0_bytes(s):
    return ((s.contiguous().view(torch.int32) >> 23) & 0xFF).to(torch.uint8)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkout")
    ap.add_argument("out")
    ap.add_argument("--shapes", default="16x128,33x200,130x260")
    ap.add_argument("--revision", help="the checkout's commit, when it is not a git work tree")
    ap.add_argument("--families", default=",".join(FAMILIES), help="input families (fp8_peer_common.py)")
    ap.add_argument("--dtypes", default="f32,bf16,f16")
    args = ap.parse_args()
    families, dtypes = args.families.split(","), args.dtypes.split(",")
    dg, _ = load_math(args.checkout)
    source = f"DeepGEMM {args.revision or revision(args.checkout)} deep_gemm/utils/math.py (torch {torch.__version__.split('+')[0]}, CPU)"
    os.makedirs(args.out, exist_ok=True)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    n, seed = 0, 2800
    for fn, tile in (("per_token_cast_to_fp8", "1x128"), ("per_token_cast_to_fp8", "1x32"), ("per_block_cast_to_fp8", "128x128")):
        for ue8m0 in (False, True):
            for dtype in dtypes:
                for fam in families:
                    for m, k in shapes:
                        seed += 1
                        x = to_input(family(fam, m, k, seed), dtype)
                        if fn == "per_token_cast_to_fp8":
                            q, sf = dg.per_token_cast_to_fp8(x, use_ue8m0=ue8m0, gran_k=int(tile[2:]))
                        else:
                            q, sf = dg.per_block_cast_to_fp8(x, use_ue8m0=ue8m0)
                        md = {"recipe": "fp8_block", "profile": "deepgemm", "columnwise": "0", "fp8_dtype": "e4m3", "tile": tile,
                              "eps": "0.0001", "pow2_scales": "1" if ue8m0 else "0",
                              "source": f"{source}: {fn}(use_ue8m0={ue8m0}{', gran_k=32' if tile == '1x32' else ''})", "case.family": fam, "case.dtype": dtype}
                        name = f"deepgemm_{tile}_{'ue8m0' if ue8m0 else 'f32'}_{dtype}_{fam}_{m}x{k}"
                        write(args.out, name, {"x": x, "rowwise_data": u8(q), "rowwise_scale_inv": sf.float()}, md)
                        n += 1
                        if ue8m0 and m == shapes[0][0]:
                            write(args.out, name + "_u8", {"x": x, "rowwise_data": u8(q), "rowwise_scale_inv": e8m0_bytes(sf)},
                                  {**md, "scale_dtype": "ue8m0"})
                            write(args.out, name + "_packed", {"x": x, "rowwise_data": u8(q), "rowwise_scale_inv": packed_ue8m0_storage(sf.float())},
                                  {**md, "scale_dtype": "ue8m0", "layout": "deepgemm_packed_ue8m0"})
                            n += 2
    print(f"{n} vectors written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
