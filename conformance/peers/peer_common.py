"""Shared by the dump scripts of conformance/peers/ (modelopt_dump.py, jax_dump.py, ...): the input families of
`qtc conform`, the shapes, and the VECTORS.md writer (safetensors through torch when it is there, else a minimal
writer). Deterministic: every family is a function of its seed.
"""
import json
import os
import struct

import numpy as np

DT_NAMES = ("f32", "bf16", "f16")


def family(name, m, k, seed, elem_max):
    """An [m, k] float64 numpy array of the named input family (elem_max: the element format's largest value)."""
    g = np.random.default_rng(seed)
    if name == "normal":
        return g.standard_normal((m, k))
    if name == "heavy":
        return g.standard_t(2, (m, k)) * np.exp(g.uniform(-6, 6, (m, 1)))
    if name == "wide":  # blocks at very different magnitudes, including far below the tensor amax
        return g.standard_normal((m, k)) * np.exp2(g.integers(-40, 20, (m, (k + 15) // 16)).repeat(16, axis=1)[:, :k])
    if name == "tiny":  # values down to float32 subnormals
        return g.standard_normal((m, k)) * np.exp2(g.integers(-140, -100, (m, 1)))
    if name == "tinyblocks":  # a few blocks 1e-30 .. 1e-42 below a normal tensor (scale floors, subnormal scales)
        x = g.standard_normal((m, k))
        for i in range(0, m, 2):
            c = int(g.integers(0, max(1, k // 16))) * 16
            x[i, c:c + 16] *= 10.0 ** float(g.integers(-42, -6))
        return x
    if name == "zero_blocks":
        x = g.standard_normal((m, k))
        x[::3, :] = 0.0
        x[:, :min(k, 32)] = 0.0
        x[1::4, 16:48] = -0.0
        return x
    if name == "allzero":
        return np.zeros((m, k))
    if name == "negzero":
        x = g.standard_normal((m, k))
        x[:, ::5] = -0.0
        x[::2, 1::7] = -1e-30
        return x
    if name == "ties":  # block maxima at, just below and just above elem_max * 2^e, and element tie points
        x = g.standard_normal((m, k))
        for i in range(m):
            e = int(g.integers(-20, 20))
            base = elem_max * 2.0 ** e
            x[i, 0] = [base, np.nextafter(np.float32(base), np.float32(np.inf)), np.nextafter(np.float32(base), 0),
                       base * 1.5, base * 0.75, 6.0 * 2.0 ** e][i % 6]
            mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 1.0 + 1 / 16, 1.0 + 3 / 16, 448 + 16]) * 2.0 ** e
            n = min(10, k - 1)
            x[i, 1:1 + n] = mids[:n] * np.sign(g.standard_normal(n))
        return x
    if name == "pow2":  # exact powers of two and their neighbours (scale-rule boundaries)
        e = g.integers(-30, 30, (m, k))
        return np.exp2(e) * g.choice([1.0, -1.0, 1.5, 1.75, 1.875, 1.9375, 0.9999999], (m, k))
    if name == "ulps":  # block maxima within a few float32 ulps of elem_max * 2^e
        x = g.standard_normal((m, k)) * 0.01
        for i in range(m):
            for c in range(0, k, 16):
                e = int(g.integers(-60, 60))
                base = np.float32(elem_max * 2.0 ** e)
                v = base
                for _ in range(abs(int(g.integers(-3, 4)))):
                    v = np.nextafter(v, np.float32(np.inf) if (i + c) % 2 else np.float32(0))
                w = min(16, k - c)
                x[i, c:c + w] *= float(base) * 10
                x[i, c + int(g.integers(0, w))] = float(v) * (1 if g.integers(0, 2) else -1)
        return x
    if name == "nan":
        x = g.standard_normal((m, k))
        x[0, 3 % k] = np.nan
        x[m // 2, k - 1] = -np.nan
        return x
    if name == "inf":
        x = g.standard_normal((m, k))
        x[0, 5 % k] = np.inf
        x[m - 1, 0] = -np.inf
        return x
    if name == "big":
        return g.standard_normal((m, k)) * 1e4
    if name == "f16edge":  # magnitudes near F16's limits (65504, 2^-24) next to ordinary ones
        x = g.standard_normal((m, k))
        x[::2, :] *= 6e4 / 4
        x[1::4, :] *= 2.0 ** -20
        return x
    raise ValueError(name)


FAMILIES = ["normal", "heavy", "wide", "tiny", "tinyblocks", "zero_blocks", "allzero", "negzero", "ties", "pow2",
            "ulps", "nan", "inf", "big", "f16edge"]


def write_safetensors(path, tensors, metadata):
    """tensors: name -> numpy array (float32, uint8, or uint16 holding bfloat16 / float16 bits with a dtype tag)."""
    header, blobs, off = {"__metadata__": metadata}, [], 0
    for name in sorted(tensors):
        arr, dtype = tensors[name]
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def stored_input(arr, dt):
    """The input exactly as the implementation held it: `arr` is a numpy view of its tensor (float32, or the
    2-byte BF16/F16 elements); the stored bits are its bits (frameworks differ in the NaN their float32 -> BF16
    conversion makes: PyTorch's vectorized one gives 0xFFFF, ml_dtypes 0x7FC0)."""
    if dt == "f32":
        return np.ascontiguousarray(arr, dtype=np.float32), "F32"
    return np.ascontiguousarray(arr).view(np.uint16), ("BF16" if dt == "bf16" else "F16")


def pack_fp4(codes):
    """[R, C] codes (C even) -> [R, C/2] bytes, element 2j in the low nibble of byte j."""
    c = np.asarray(codes, dtype=np.uint8)
    return (c[:, 0::2] & 0xF) | ((c[:, 1::2] & 0xF) << 4)


def out_path(out, name):
    os.makedirs(out, exist_ok=True)
    return os.path.join(out, name + ".safetensors")
