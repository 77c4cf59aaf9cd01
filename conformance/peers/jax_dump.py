#!/usr/bin/env python3
"""Dump conformance vectors (VECTORS.md, schema 1) from JAX's block-scale quantizer, the one
`jax.nn.scaled_dot_general` runs: `jax._src.cudnn.scaled_matmul_stablehlo.quantize(x, config)` on the CPU (XLA CPU).

  * MXFP8: BlockScaleConfig(mode='mxfp8', block_size=32, data_type=float8_e4m3fn or float8_e5m2,
    scale_type=float8_e8m0fnu);
  * NVFP4: BlockScaleConfig(mode='nvfp4', block_size=16, data_type=float4_e2m1fn, scale_type=float8_e4m3fn,
    global_scale = float32(max|x|) / (6 * 448)), the global scale of JAX's own tests (create_nvfp4_configs); the
    file carries that amax as `amax_rowwise` / `amax_columnwise`.

    /work/venv-peers/bin/python conformance/peers/jax_dump.py OUT_DIR [--sample SAMPLE_DIR] [--stress N | --lanes]
        [--platform cpu|cuda]

`--platform cuda` runs the same quantizer under XLA GPU (issue 25: where a GPU path gives other bits it gets its own
profile): files named jaxgpu_*, `source` naming XLA GPU and the device, metadata profile=jax (the claim `qtc identify`
checks; a difference shows there as the rule that explains it).

JAX 0.11 needs Python >= 3.12; /work/venv-peers has jax 0.10.2, whose `quantize`, `cast_to_e8m0_with_rounding_up`
and `e8m0_to_dtype` are the same text as in the jax 0.11.0 wheel; `source` names the version that ran. Rowwise planes
are quantize(x), columnwise planes quantize(x.T) in VECTORS.md's orientation; JAX needs K % block == 0 (rows of a
ragged M are dumped rowwise only for NVFP4; MXFP8 columnwise needs M % 32 == 0). Inputs go to JAX in their own
dtype (F32, BF16, F16): MXFP8 computes its scale and data scaling in that dtype. Deterministic.
"""
import argparse
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax._src.cudnn.scaled_matmul_stablehlo import BlockScaleConfig, quantize  # noqa: E402

JAXLIB = jax.lib.__version__ if hasattr(jax, 'lib') else '?'
SOURCE = f"jax {jax.__version__} (jaxlib {JAXLIB}, XLA CPU)"  # main() sets the platform (and this text) before any use
JDT = {"f32": jnp.float32, "bf16": jnp.bfloat16, "f16": jnp.float16}
FP8 = {"e4m3": jnp.float8_e4m3fn, "e5m2": jnp.float8_e5m2}


def codes(a):
    return np.asarray(a).view(np.uint8).copy()


def mx(x, fp8):
    cfg = BlockScaleConfig(mode="mxfp8", block_size=32, data_type=FP8[fp8], scale_type=jnp.float8_e8m0fnu,
                           global_scale=None, infer_only=False)
    m, k = x.shape
    q, s = quantize(x, cfg)
    out = {"rowwise_data": (codes(q), "U8"), "rowwise_scale_inv": (codes(s), "U8")}
    md = {"recipe": "mxfp8", "fp8_dtype": fp8, "scale_rule": "rceil",
          "source": f"{SOURCE}: scaled_matmul_stablehlo.quantize(x, BlockScaleConfig(mode='mxfp8', block_size=32, "
                    f"data_type=float8_{fp8}fn, scale_type=float8_e8m0fnu))".replace("e5m2fn", "e5m2")}
    if m % 32 == 0:
        qt, st = quantize(x.T, cfg)
        out["columnwise_data"] = (np.ascontiguousarray(codes(qt).T), "U8")
        out["columnwise_scale_inv"] = (np.ascontiguousarray(codes(st).T), "U8")
    else:
        md["columnwise"] = "0"
    return out, md


def nv(x):
    amax = jnp.max(jnp.abs(x)).astype(jnp.float32)
    gs = amax / (jnp.finfo(jnp.float4_e2m1fn).max.astype(jnp.float32) * jnp.finfo(jnp.float8_e4m3fn).max.astype(jnp.float32))
    cfg = BlockScaleConfig(mode="nvfp4", block_size=16, data_type=jnp.float4_e2m1fn, scale_type=jnp.float8_e4m3fn,
                           global_scale=gs, infer_only=False)
    m, k = x.shape
    q, s = quantize(x, cfg)
    a = np.asarray(amax, np.float32).reshape(1)
    out = {"rowwise_data": (pc.pack_fp4(codes(q)), "U8"), "rowwise_scale_inv": (codes(s), "U8"), "amax_rowwise": (a, "F32")}
    md = {"recipe": "nvfp4",
          "source": f"{SOURCE}: scaled_matmul_stablehlo.quantize(x, BlockScaleConfig(mode='nvfp4', block_size=16, "
                    "data_type=float4_e2m1fn, scale_type=float8_e4m3fn, global_scale=float32(max|x|) / (6 * 448)))"}
    if m % 16 == 0:
        qt, st = quantize(x.T, cfg)
        out["columnwise_data"] = (pc.pack_fp4(codes(qt)), "U8")
        out["columnwise_scale_inv"] = (codes(st), "U8")
        out["amax_columnwise"] = (a, "F32")
    else:
        md["columnwise"] = "0"
    return out, md


NV_SHAPES = [(32, 64), (16, 48), (33, 32)]
MX_SHAPES = [(64, 96), (32, 64), (40, 32)]


LANE_SHAPES = [(256, 512), (64, 64), (128, 48), (96, 160), (32, 128)]


def cases(stress, lanes=False):
    seed = 3000
    if lanes:  # NVFP4 of tensors of >= 4096 elements with NaN / Inf / zero / large inputs: XLA CPU's lane reductions
        seed = 9100
        for dt in pc.DT_NAMES:
            for fam in ("allzero", "nan", "inf", "big", "f16edge"):
                for shape in LANE_SHAPES:
                    seed += 1
                    yield f"jax_lanes_nvfp4_{dt}_{fam}_{shape[0]}x{shape[1]}", "nvfp4", dt, fam, shape, seed
        return
    if stress:
        for i in range(stress):
            for dt in pc.DT_NAMES:
                for kind in ("nvfp4", "mxfp8_e4m3", "mxfp8_e5m2"):
                    seed += 1
                    fam = pc.FAMILIES[(i + seed) % len(pc.FAMILIES)]
                    shape = (256, 512) if i % 2 == 0 else (96, 160)
                    yield f"stress{i}_{kind}_{dt}_{fam}_{shape[0]}x{shape[1]}", kind, dt, fam, shape, seed
        return
    for kind in ("nvfp4", "mxfp8_e4m3", "mxfp8_e5m2"):
        for dt in pc.DT_NAMES:
            for fam in pc.FAMILIES:
                for shape in (NV_SHAPES if kind == "nvfp4" else MX_SHAPES):
                    seed += 1
                    yield f"jax_{kind}_{dt}_{fam}_{shape[0]}x{shape[1]}", kind, dt, fam, shape, seed


def in_sample(kind, dt, fam, shape):
    shapes = NV_SHAPES if kind == "nvfp4" else MX_SHAPES
    if shape == shapes[2]:
        return fam == "normal" and dt == "f16" and kind != "mxfp8_e5m2"
    if shape != shapes[1]:
        return False
    pick = {"f32": ("allzero", "inf", "tinyblocks", "zero_blocks"), "bf16": ("nan", "tiny", "ulps", "negzero"),
            "f16": ("f16edge", "tiny", "zero_blocks", "big")}
    if kind == "mxfp8_e5m2":
        return fam in pick[dt][:2]
    return fam in pick[dt]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--sample")
    ap.add_argument("--stress", type=int, default=0)
    ap.add_argument("--lanes", action="store_true", help="NVFP4 NaN / Inf / zero tensors of >= 4096 elements (75 files)")
    ap.add_argument("--platform", default="cpu", choices=("cpu", "cuda"), help="XLA CPU (default) or XLA GPU")
    args = ap.parse_args()
    global SOURCE
    jax.config.update("jax_platforms", args.platform)
    if args.platform != "cpu":
        SOURCE = f"jax {jax.__version__} (jaxlib {JAXLIB}, XLA GPU, {jax.devices()[0].device_kind})"
    n = sampled = 0
    for name, kind, dt, fam, shape, seed in cases(args.stress, args.lanes):
        emax = 6.0 if kind == "nvfp4" else (448.0 if kind.endswith("e4m3") else 57344.0)
        x32 = pc.family(fam, shape[0], shape[1], seed, emax).astype(np.float32)
        x = jnp.asarray(x32).astype(JDT[dt])
        tensors, md = nv(x) if kind == "nvfp4" else mx(x, kind.split("_")[1])
        tensors["x"] = pc.stored_input(np.asarray(x) if dt == "f32" else np.asarray(x).view(np.uint16), dt)
        md.update({"qtc.schema": "1", "profile": "jax", "case.family": fam})
        path = pc.out_path(args.out, name if args.platform == "cpu" else "jaxgpu_" + name.removeprefix("jax_"))
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
