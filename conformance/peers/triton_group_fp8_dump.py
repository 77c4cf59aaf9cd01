#!/usr/bin/env python3
"""Dump FP8 group-quantization vectors (VECTORS.md, schema 1) from the Triton kernels of vLLM 0.33.0 and SGLang 0.5.23.
GPU only (Triton): to be run on the H200, where torch and triton are installed; neither vLLM nor SGLang needs to be.

The kernels are taken from the files themselves: the `@triton.jit` function is cut out of the given source file (its
text, by the Python AST) and compiled in a namespace holding only `triton` and `tl`, then launched the way the file's
wrapper launches it (one program per group of 128, BLOCK = 128, the wrapper's eps 1e-10 and the float8_e4m3fn range):

    vllm/model_executor/layers/quantization/utils/fp8_utils.py : _per_token_group_quant_fp8 (use_ue8m0 0/1)
                                                                   -> profile vllm_triton
    sglang/kernels/ops/quantization/fp8_kernel.py : _per_token_group_quant_8bit          -> profile sglang_triton
                                                    _per_token_group_quant_8bit_colmajor (SCALE_UE8M0 0/1)
                                                                   -> profile sglang_triton_colmajor

    python3 conformance/peers/triton_group_fp8_dump.py --vllm FP8_UTILS_PY --sglang FP8_KERNEL_PY "$OUT"
    build/conformance/qtc verify "$OUT"     # on this machine, after the files come back

(the two files come from the wheels: `pip download --no-deps vllm==0.33.0 sglang==0.5.23`, then unzip.) Inputs are the
families of fp8_peer_common.py with K a multiple of 128 (the wrappers require it), F32 / BF16 / F16; the files hold
`rowwise_data` and `rowwise_scale_inv` (F32, in row-major [M, K/128] order whatever the kernel's scale layout) with
recipe fp8_block tile 1x128, eps 1e-10 and pow2_scales = the UE8M0 switch. The profiles are read from the code and
have not been run against these kernels: this script is what checks them.
"""
import argparse
import ast
import importlib.util
import os
import sys
import tempfile

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fp8_peer_common import FAMILIES, family, to_input, u8, write  # noqa: E402

EPS = 1e-10
FP8 = torch.float8_e4m3fn
FMIN, FMAX = torch.finfo(FP8).min, torch.finfo(FP8).max


def load_kernel(path, name):
    """The @triton.jit function `name` of the file at `path`, compiled on its own."""
    text = open(path).read()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            src = ast.get_source_segment(text, node)
            # Triton reads a kernel's source from its file (inspect): the function goes into a module file of its own.
            d = tempfile.mkdtemp(prefix="qtc_triton_")
            f = os.path.join(d, f"{name}.py")
            with open(f, "w") as out:
                out.write(f"# {name}, cut out of {path}\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n{src}\n")
            spec = importlib.util.spec_from_file_location(name, f)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return getattr(mod, name)
    sys.exit(f"{path}: no function {name}")


def run_vllm(kernel, x, ue8m0):
    m, k = x.shape
    q = torch.empty_like(x, dtype=FP8)
    s = torch.empty((m, k // 128), dtype=torch.float32, device=x.device)
    kernel[(m * (k // 128),)](x, q, s, 128, k, x.stride(0), EPS, fp8_min=FMIN, fp8_max=FMAX, use_ue8m0=ue8m0, BLOCK=128,
                              num_warps=1, num_stages=1)
    return q, s


def run_sglang_row(kernel, x):
    m, k = x.shape
    q = torch.empty_like(x, dtype=FP8)
    s = torch.empty((m, k // 128), dtype=torch.float32, device=x.device)
    kernel[(m * (k // 128),)](x, q, s, 128, 128, EPS, FMIN, FMAX, BLOCK=128, num_warps=1, num_stages=1)
    return q, s


def run_sglang_col(kernel, x, ue8m0):
    m, k = x.shape
    q = torch.empty_like(x, dtype=FP8)
    s = torch.empty((k // 128, m), dtype=torch.float32, device=x.device).t()  # column-major [m, k/128]
    kernel[(m * (k // 128),)](x, q, s, 128, k, s.stride(1), EPS, FMIN, FMAX, BLOCK=128, SCALE_UE8M0=ue8m0, num_warps=1,
                              num_stages=1)
    return q, s.contiguous()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vllm", help="vLLM 0.33.0's vllm/model_executor/layers/quantization/utils/fp8_utils.py")
    ap.add_argument("--sglang", help="SGLang 0.5.23's sglang/kernels/ops/quantization/fp8_kernel.py")
    ap.add_argument("out")
    ap.add_argument("--shapes", default="16x128,33x256,130x384")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    runs = []
    if args.vllm:
        kv = load_kernel(args.vllm, "_per_token_group_quant_fp8")
        for ue in (False, True):
            runs.append(("vllm_triton", f"vLLM 0.33.0 fp8_utils.py _per_token_group_quant_fp8(use_ue8m0={ue})", ue,
                         lambda x, ue=ue: run_vllm(kv, x, ue)))
    if args.sglang:
        kr = load_kernel(args.sglang, "_per_token_group_quant_8bit")
        kc = load_kernel(args.sglang, "_per_token_group_quant_8bit_colmajor")
        runs.append(("sglang_triton", "SGLang 0.5.23 fp8_kernel.py _per_token_group_quant_8bit", False, lambda x: run_sglang_row(kr, x)))
        for ue in (False, True):
            runs.append(("sglang_triton_colmajor", f"SGLang 0.5.23 fp8_kernel.py _per_token_group_quant_8bit_colmajor(SCALE_UE8M0={ue})",
                         ue, lambda x, ue=ue: run_sglang_col(kc, x, ue)))
    if not runs:
        sys.exit("give --vllm and/or --sglang")
    src = f"(triton {triton.__version__}, torch {torch.__version__.split('+')[0]}, {torch.cuda.get_device_name()})"
    n, seed = 0, 2900
    for profile, what, ue, fn in runs:
        for dtype in ("f32", "bf16", "f16"):
            for fam in FAMILIES:
                for m, k in shapes:
                    seed += 1
                    x = to_input(family(fam, m, k, seed), dtype)
                    q, s = fn(x.cuda())
                    md = {"recipe": "fp8_block", "tile": "1x128", "profile": profile, "columnwise": "0", "fp8_dtype": "e4m3",
                          "eps": repr(EPS), "pow2_scales": "1" if ue else "0", "source": f"{what} {src}",
                          "case.family": fam, "case.dtype": dtype}
                    write(args.out, f"{profile}_{'ue8m0' if ue else 'f32'}_{dtype}_{fam}_{m}x{k}",
                          {"x": x, "rowwise_data": u8(q.cpu()), "rowwise_scale_inv": s.cpu()}, md)
                    n += 1
    print(f"{n} vectors written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
