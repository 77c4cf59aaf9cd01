#!/usr/bin/env python3
"""Dump MXFP4 vectors of profile `fbgemm` in FBGEMM's own MX4 tensor layout (`layout=fbgemm_mx4`; VECTORS.md schema 1,
conformance/README.md "Scale layouts"): each plane is ONE uint8 tensor, `rowwise_data` / `columnwise_data`, holding
per group of 32 elements of a data row its 16 bytes of E2M1 codes followed by the group's exponent byte; there is no
`*_scale_inv` tensor.

The packing re-stated here is FBGEMM's (pytorch/FBGEMM, fbgemm_gpu/fbgemm_gpu/triton/quantize_ref.py
`py_quantize_mx4` at 71d6f8b, and the Triton `_kernel_quantize_mx4` in fbgemm_gpu/triton/quantize.py that
`fp32_to_mx4(..., use_triton=True)` runs on a GPU):

* a row whose length is not a multiple of group_size is padded with zeros to the next multiple (py_quantize_mx4:
  `torch.nn.functional.pad(a, (0, pad))`; the Triton kernel: masked loads with `other=0`, ROW_PADDING), so every row
  holds ceil(K / 32) groups and the padded elements quantize to code 0 (0 / 2^e has zero bits);
* codes two per byte: `low_mx4 = mx4_value[:, ::2]`, `high_mx4 = mx4_value[:, 1::2] << 4`: element 2j in the LOW
  nibble (the Triton kernel: `tl.split` of pairs, `(high << 4) | low`);
* `torch.concat([packed.view(-1, group_size // 2), (shared_exp + 127).to(int8).view(-1, 1)], dim=1)`: the
  group's 16 code bytes, then its exponent byte, shared_exp in [-127, 125] (bytes 0..252, the E8M0 byte of qtc's
  compact plane); the Triton kernel writes the same bytes at `output_offset += output_offset // (GROUP_SIZE // 2)` and
  `exp_offset = group * (GROUP_SIZE // 2 + 1) + GROUP_SIZE // 2`;
* the tensor is viewed as `orig_shape[:-1] + [-1]`: [rows, ceil(K/32) * 17] (py_quantize_mx4 returns it flat when K
  is ragged; the bytes are the same).

group_size is FBGEMM's parameter (default 32); MXFP4 has blocks of 32, so this layout is group_size = 32 only.
FBGEMM's CUDA kernel `quantize_mx_cuda` (use_triton=False) writes the same 17-byte groups but with element 2j in
the HIGH nibble (src/quantize_ops/quantize_mx.cuh: even threads store `quantized_val << 4`), and a scale from the
biased exponent of the max (floor-like), not `ceil(log2)`: neither is what these vectors hold.

The codes and exponents are those of engines_mxfp4_dump.py's `plane_fbgemm` (its NumPy reading of py_quantize_mx4,
float32, no NaN blocks) on the zero-padded rows; the packing is written here from FBGEMM's code, independently of
qtc's C++ (reference/include/qtc/layout.hpp fbgemm_mx4_data_offset / fbgemm_mx4_scale_offset). The columnwise plane is
the same quantization of x^T. Dequantized planes: VECTORS.md's decode, float32.

    python3 conformance/peers/fbgemm_mx4_dump.py OUT_DIR     (writes OUT_DIR/*.safetensors)
    build/conformance/qtc verify --strict-padding OUT_DIR

Needs: numpy. Deterministic (fixed seeds).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import engines_mxfp4_dump as eng  # noqa: E402  (plane_fbgemm, family, decode, save)

GROUP = 32


def fbgemm_pad(xf):
    """py_quantize_mx4's row padding: zeros up to a multiple of the group size."""
    r, n = xf.shape
    pad = (-n) % GROUP
    return np.concatenate([xf, np.zeros((r, pad), np.float32)], axis=1) if pad else xf


def fbgemm_packed(xf):
    """[rows, n] float32 -> FBGEMM's packed uint8 [rows, ceil(n/32) * 17], plus the codes and exponent bytes of the
    unpadded elements (for the dequantized planes)."""
    r, n = xf.shape
    codes, exps = eng.plane_fbgemm(fbgemm_pad(xf))
    low, high = codes[:, 0::2], codes[:, 1::2] << 4
    packed = (low | high).astype(np.uint8)
    groups = packed.reshape(-1, GROUP // 2)
    rows = np.concatenate([groups, exps.reshape(-1, 1)], axis=1)
    return rows.reshape(r, -1), codes[:, :n], exps


def dequantized(codes, exps):
    n = codes.shape[1]
    pad = (-n) % GROUP
    c = np.concatenate([codes, np.zeros((codes.shape[0], pad), np.uint8)], axis=1) if pad else codes
    return np.ascontiguousarray(eng.decode(c, exps)[:, :n])


# The families of the committed compact fbgemm vectors (engines_mxfp4_dump.FBGEMM_CASES), and ragged shapes: rows
# whose length is not a multiple of 32 (padded groups) and odd lengths (a half-filled last code byte).
CASES = [("normal", (64, 96)), ("ties", (32, 64)), ("pow2", (64, 64)), ("tiny", (32, 64)), ("big", (32, 32)),
         ("inf", (32, 64)), ("zeros", (64, 32)), ("near_pow2", (64, 64)),
         ("normal", (37, 45)), ("ties", (33, 50)), ("tiny", (5, 70)), ("zeros", (40, 17)), ("inf", (3, 97)),
         ("near_pow2", (48, 31)), ("normal", (1, 1)), ("big", (31, 33))]


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for ci, (fam, (m, k)) in enumerate(CASES):
        mp, kp = m + (-m) % GROUP, k + (-k) % GROUP
        x = np.ascontiguousarray(eng.family(fam, mp, kp, 26000 + ci)[:m, :k])
        rp, rc, re = fbgemm_packed(x)
        cp, cc, ce = fbgemm_packed(np.ascontiguousarray(x.T))
        md = {"qtc.schema": "1", "recipe": "mxfp4", "profile": "fbgemm", "scale_rule": "ceil", "layout": "fbgemm_mx4",
              "case.family": fam,
              "source": "fbgemm py_quantize_mx4 / triton quantize_mx4 packed rows (fbgemm_gpu/triton/quantize_ref.py, "
                        "quantize.py), not run: a faithful NumPy " + np.__version__ + " reading of the codes and of "
                        "FBGEMM's packing, rows zero-padded to 32 (conformance/peers/fbgemm_mx4_dump.py), written "
                        "independently of qtc"}
        tensors = {"x": (x, "F32"), "rowwise_data": (rp, "U8"), "dequantized_rowwise": (dequantized(rc, re), "F32"),
                   "columnwise_data": (cp, "U8"),
                   "dequantized_columnwise": (np.ascontiguousarray(dequantized(cc, ce).T), "F32")}
        eng.save(os.path.join(out, f"mxfp4_fbgemm_mx4_ceil_f32_{fam}_{m}x{k}.safetensors"), tensors, md)
    print(f"{len(CASES)} vectors written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
