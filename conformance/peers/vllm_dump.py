#!/usr/bin/env python3
"""Dump NVFP4 conformance vectors (VECTORS.md, schema 1) from vLLM 0.33.0's `ref_nvfp4_quant` (the NVFP4 emulation
reference, vllm/model_executor/layers/quantization/utils/nvfp4_emulation_utils.py), on the CPU.

    /work/venv-peers/bin/python conformance/peers/vllm_dump.py OUT_DIR [--wheel vllm-0.33.0-...whl] [--sample DIR]

The module does not import without vLLM's GPU stack (vllm.platforms, triton), so the script takes the text of
`get_reciprocal`, `cast_to_fp4` and `ref_nvfp4_quant` out of the wheel (downloaded with
`pip download --no-deps vllm==0.33.0` when --wheel is not given) and runs exactly those functions, with
FLOAT4_E2M1_MAX_RECIPROCAL = 1 / 6.0 as the module defines it (scalar_types.float4_e2m1f.max() is 6.0).
The global scale is the one vLLM's tests pass: (448 * 6) / torch.amax(|x|) computed in x's dtype, then float32.
ref_nvfp4_quant returns E2M1 *values* (float32) and float32 block scales; the files hold the values' codes as
ml_dtypes' float4_e2m1fn cast gives them (packed, low nibble first) and the scales' E4M3 bytes. Rowwise: x;
columnwise: x.t() (ragged M: rowwise only). Inputs F32, BF16, F16 as they are. Deterministic.
"""
import argparse
import ast
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

import ml_dtypes
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402

torch.set_num_threads(1)
MODULE = "vllm/model_executor/layers/quantization/utils/nvfp4_emulation_utils.py"
FUNCS = ("get_reciprocal", "cast_to_fp4", "ref_nvfp4_quant")
TDT = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def load_functions(wheel):
    with zipfile.ZipFile(wheel) as z:
        text = z.read(MODULE).decode()
    tree = ast.parse(text)
    body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in FUNCS]
    assert {n.name for n in body} == set(FUNCS), f"{wheel}: {MODULE} lacks one of {FUNCS}"
    ns = {"torch": torch, "FLOAT4_E2M1_MAX": 6.0, "FLOAT4_E2M1_MAX_RECIPROCAL": 1 / 6.0}
    exec(compile(ast.Module(body=body, type_ignores=[]), MODULE, "exec"), ns)
    return ns["ref_nvfp4_quant"]


def fetch_wheel():
    d = tempfile.mkdtemp(prefix="vllm_wheel_")
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "vllm==0.33.0", "-d", d], check=True)
    return glob.glob(os.path.join(d, "vllm-0.33.0-*.whl"))[0]


def codes_of(values):
    return values.contiguous().numpy().astype(np.float32).astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF


def dump(ref, x):
    amax = torch.amax(torch.abs(x).flatten(), dim=-1)
    gs = ((448.0 * 6.0) / amax).to(torch.float32)

    def q(t):
        vals, sc = ref(t, gs, 16)
        return pc.pack_fp4(codes_of(vals)), sc.to(torch.float8_e4m3fn).view(torch.uint8).numpy().copy()
    d, s = q(x)
    a = amax.to(torch.float32).reshape(1).numpy()
    out = {"rowwise_data": (d, "U8"), "rowwise_scale_inv": (s, "U8"), "amax_rowwise": (a, "F32")}
    md = {"recipe": "nvfp4",
          "source": f"vLLM 0.33.0 ref_nvfp4_quant(x, global_scale=(448 * 6) / amax(|x|) in x's dtype, 16) "
                    f"(functions run from the wheel's text; torch {torch.__version__.split('+')[0]}, CPU; "
                    "codes from the returned values by ml_dtypes float4_e2m1fn)"}
    if x.shape[0] % 16 == 0:
        d, s = q(x.t().contiguous())
        out["columnwise_data"], out["columnwise_scale_inv"], out["amax_columnwise"] = (d, "U8"), (s, "U8"), (a, "F32")
    else:
        md["columnwise"] = "0"
    return out, md


SHAPES = [(32, 64), (16, 48), (33, 32)]


def cases(stress):
    seed = 5000
    if stress:
        for i in range(stress):
            for dt in pc.DT_NAMES:
                seed += 1
                fam = pc.FAMILIES[(i + seed) % len(pc.FAMILIES)]
                yield f"stress{i}_nvfp4_{dt}_{fam}_128x256", dt, fam, (128, 256), seed
        return
    for dt in pc.DT_NAMES:
        for fam in pc.FAMILIES:
            for shape in SHAPES:
                seed += 1
                yield f"vllm_nvfp4_{dt}_{fam}_{shape[0]}x{shape[1]}", dt, fam, shape, seed


def in_sample(dt, fam, shape):
    if shape == SHAPES[2]:
        return fam == "normal" and dt == "bf16"
    pick = {"f32": ("allzero", "inf", "tinyblocks", "negzero", "ties"), "bf16": ("nan", "zero_blocks", "tiny", "heavy"),
            "f16": ("f16edge", "ulps", "wide", "pow2", "big")}
    return shape == SHAPES[1] and fam in pick[dt]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--wheel")
    ap.add_argument("--sample")
    ap.add_argument("--stress", type=int, default=0)
    args = ap.parse_args()
    ref = load_functions(args.wheel or fetch_wheel())
    n = sampled = 0
    for name, dt, fam, shape, seed in cases(args.stress):
        x32 = pc.family(fam, shape[0], shape[1], seed, 6.0).astype(np.float32)
        x = torch.from_numpy(x32).to(TDT[dt])
        tensors, md = dump(ref, x)
        tensors["x"] = pc.stored_input(x.numpy() if dt == "f32" else x.view(torch.int16).numpy(), dt)
        md.update({"qtc.schema": "1", "profile": "vllm", "case.family": fam})
        path = pc.out_path(args.out, name)
        pc.write_safetensors(path, tensors, md)
        n += 1
        if args.sample and in_sample(dt, fam, shape):
            os.makedirs(args.sample, exist_ok=True)
            shutil.copy(path, args.sample)
            sampled += 1
    print(f"{n} vectors written to {args.out}" + (f", {sampled} copied to {args.sample}" if args.sample else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
