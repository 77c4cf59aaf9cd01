"""Inputs and file writing shared by the FP8 dump scripts of the model toolkits and inference engines
(modelopt_fp8_dump.py, compressed_tensors_fp8_dump.py, vllm_fp8_dump.py, deepgemm_fp8_dump.py).

Every input family covers a corner where the FP8 quantizers differ (profile rules fp8.form, fp8.arith_dtype,
fp8.zero_scale, fp8.pow2, fp8.nan, fp8.cast_overflow): zero blocks, tiny blocks (below the scale floors),
NaN, +-Inf, -0.0, block amaxes at and one ulp around 448 * 2^k, values that overflow 448 after the scaling,
blocks far apart in magnitude, and ragged shapes (M and K not multiples of 128). Deterministic (fixed seeds).
"""
import argparse
import os

import numpy as np
import torch
from safetensors.torch import save_file

# One thread: which NaN a full torch.max reduction returns depends on the thread count (torchao_dump.py).
torch.set_num_threads(1)

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
FAMILIES = ("normal", "heavy", "wide", "tiny", "zero_blocks", "pow2_edges", "specials", "negzero", "huge", "subnormal",
            "flt_max", "ties")


def family(name, m, k, seed):
    """An [m, k] float64 numpy array of the named input family."""
    g = np.random.default_rng(seed)
    x = g.standard_normal((m, k))
    if name == "heavy":
        x = g.standard_t(2, (m, k)) * np.exp(g.uniform(-6, 6, (m, 1)))
    elif name == "wide":  # blocks at very different magnitudes (some below the scale floors 1e-4 and 1/(448*512))
        x = x * np.exp2(g.integers(-40, 20, (m, 1)))
        x[:, : k // 2] *= 2.0 ** -30
    elif name == "tiny":
        x = x * np.exp2(g.integers(-30, -14, (m, 1)))
    elif name == "zero_blocks":
        x[: max(1, m // 3)] = 0.0
        x[:, : min(k, 128)] = 0.0
    elif name == "pow2_edges":  # block amaxes at and one float32 ulp around 448 * 2^e
        for i in range(m):
            e = int(g.integers(-20, 20))
            a = np.float32(448.0 * 2.0 ** e)
            a = [np.nextafter(a, np.float32(0)), a, np.nextafter(a, np.float32(np.inf))][i % 3]
            x[i] = np.clip(x[i], -1, 1) * float(a) * 0.5
            x[i, i % k] = float(a) * (1 if i % 2 else -1)
    elif name == "specials":
        x[0, 0] = np.nan
        if m > 1:
            x[1, min(3, k - 1)] = np.inf
        if m > 2:
            x[2, min(5, k - 1)] = -np.inf
        if m > 3:
            x[3, :] = np.nan
        if m > 4:
            x[4, min(7, k - 1)] = -np.nan
    elif name == "negzero":
        x[0, :] = -0.0
        x[1:, : min(k, 8)] = -0.0
    elif name == "huge":  # near the input dtype's range
        x = x * 1e4
        x[0, 0] = 3.0e38
    elif name == "subnormal":  # magnitudes 2^-120 .. 2^-149 (float32 subnormals; zero in BF16/F16 below their range)
        x = np.sign(x) * np.exp2(g.uniform(-149, -120, (m, k)))
    elif name == "flt_max":  # magnitudes 2^100 .. FLT_MAX (Inf in F16)
        x = np.sign(x) * np.exp2(g.uniform(100, 128, (m, k)))
        x[0, 0] = 3.4028234663852886e38
    elif name == "ties":  # E4M3 round-to-even ties after the scaling: odd multiples of half an E4M3 step
        x = (g.integers(1, 64, (m, k)) * 2 + 1) * 2.0 ** g.integers(-8, 4, (m, 1)) / 16.0 * np.sign(x)
        x[:, 0] = 448.0 * 2.0 ** g.integers(-8, 4, m)  # block amax 448 * 2^e: s a power of two
    return x


def to_input(x64, dtype):
    """The family's values as a torch tensor of `dtype` (float64 -> float32 -> dtype, saturating F16 to +-Inf)."""
    with np.errstate(over="ignore"):
        t = torch.from_numpy(x64.astype(np.float32))
    return t.to(DTYPES[dtype])


def u8(t):
    return t.contiguous().view(torch.uint8)


def write(out_dir, name, tensors, metadata):
    md = {"qtc.schema": "1", **{k: str(v) for k, v in metadata.items()}}
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(out_dir, name + ".safetensors"), metadata=md)


def fp8_outputs(data, scale, mode):
    """The rowwise tensors of one FP8 dump: the codes, and the F32 scales as `scale_inv` [1] (mode "tensor") or as
    `rowwise_scale_inv` [blocks of M, blocks of K] (block modes)."""
    s = scale.float()
    if mode == "tensor":
        return {"rowwise_data": data, "scale_inv": s.reshape(1)}
    return {"rowwise_data": data, "rowwise_scale_inv": s.reshape(s.shape[-2], s.shape[-1])}


def dump_cases(doc, prefix, profile, modes, dump, source_of, default_shapes, first_seed, skip=lambda mode, k: False,
               on_device=None):
    """The command line and the case loop of a per-tensor / block FP8 dump script: for every mode ("tensor" or a
    tile), dtype, family and shape, `dump(x, mode)` gives the tensors and `source_of(mode)` the `source` text; files
    are named PREFIX_MODE_DTYPE_FAMILY_MxK and carry profile PROFILE. With `--device cuda` (scripts that pass
    `on_device`, a function of the device returning (prefix, profile, source_of)), x is moved to that device before
    `dump` and the outputs back to the host. Returns the exit code."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--shapes", default=default_shapes, help="MxK,...")
    ap.add_argument("--families", default=",".join(FAMILIES), help="input families (fp8_peer_common.py)")
    ap.add_argument("--dtypes", default="f32,bf16,f16")
    ap.add_argument("--device", default="cpu", help="cpu, or a torch device where the script supports one")
    args = ap.parse_args()
    device = args.device
    if device != "cpu":
        if on_device is None:
            ap.error(f"--device {device}: this script dumps the CPU path only")
        prefix, profile, source_of = on_device(device)
    families, dtypes = args.families.split(","), args.dtypes.split(",")
    os.makedirs(args.out, exist_ok=True)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    n, seed = 0, first_seed
    for mode in modes:
        for dtype in dtypes:
            for fam in families:
                for m, k in shapes:
                    seed += 1
                    if skip(mode, k):
                        continue
                    x = to_input(family(fam, m, k, seed), dtype)
                    md = {"recipe": "fp8_tensor" if mode == "tensor" else "fp8_block", "profile": profile,
                          "columnwise": "0", "fp8_dtype": "e4m3", "source": source_of(mode),
                          "case.family": fam, "case.dtype": dtype}
                    if mode != "tensor":
                        md["tile"] = mode
                    outputs = {k: v.cpu() for k, v in dump(x.to(device), mode).items()}
                    write(args.out, f"{prefix}_{mode}_{dtype}_{fam}_{m}x{k}", {"x": x, **outputs}, md)
                    n += 1
    print(f"{n} vectors written to {args.out}")
    return 0

