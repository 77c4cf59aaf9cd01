"""Vectors in FlashInfer / TensorRT-LLM's 8x4 small-M scale layout (metadata `layout=swizzled_8x4`).

FlashInfer and TensorRT-LLM do not run here (CUDA only), so the layout is applied to compact vectors that other
implementations wrote (TransformerEngine's references under vectors/te, torchao 0.18.0's dumps under
vectors/torchao), by FlashInfer's own rule, written here with NumPy and independent of qtc's C++ code:

* `flashinfer/quantization/quantization_cute_dsl_utils.py`, `compute_sf_index_swizzled_8x4_gpu(row, col, padded_cols)`:
  offset = mTile * (numKTiles * 32) + kTile * 32 + (row % 8) * 4 + col % 4 with mTile = row // 8, kTile = col // 4,
  numKTiles = ceil(padded_cols / 4): the scale matrix S [R, C] padded to [roundup(R, 8), roundup(C, 4)] and stored as
  [R/8, C/4, 8, 4] tiles, i.e. the view (R8/8, 8, C4/4, 4) permuted to (0, 2, 1, 3) (the tests' swizzle helpers do
  exactly this reshape / permute); the files are read and written with safetensors.torch (BF16 inputs);
* S is each plane's compact scale matrix (rows = the plane's outer index, columns = its blocks along K), except the
  MXFP8 columnwise plane, whose compact [ceil(M/32), K] matrix is tiled transposed (S = compact^T: rows = K), as for
  the cuBLAS 128x4 layout (TE_FORMATS.md §6; conformance/README.md, "Scale layouts").

Padding entries are 0. Everything but the scale tensors is copied unchanged; the metadata gets `layout=swizzled_8x4`
and keeps the source. Run: /work/venv-peers/bin/python conformance/peers/flashinfer_8x4_dump.py [OUT_DIR]
(default conformance/vectors/flashinfer_8x4).
"""
import os
import sys

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.normpath(os.path.join(HERE, "..", "vectors"))

# (folder under vectors/, file): ragged shapes (M not a multiple of 8, k-blocks not a multiple of 4) and both planes.
INPUTS = [
    ("te", "nvfp4_1x16_normal_32x64.safetensors"),             # NVFP4 both planes: S [32, 4] and [64, 2]
    ("te", "nvfp4_1x16_rowscaled_heavy_32x64.safetensors"),    # row-scaled NVFP4
    ("te", "mxfp8rceil_e4m3_normal_f32_65x80.safetensors"),    # MXFP8 rowwise S [65, 3], columnwise S = [3, 80]^T
    ("te", "mxfp8rceil_e5m2_zero_rows_bf16_65x80.safetensors"),
    ("torchao", "nvfp4_pts_bf16_normal_33x48.safetensors"),    # torchao NVFP4, S [33, 3]
    ("torchao", "mxfp8_e4m3_rceil_f32_normal_33x64.safetensors"),
    ("torchao/mxfp4", "mxfp4_rceil_bf16_normal_33x64.safetensors"),  # MXFP4, S [33, 2]
    ("torchao/mxfp4", "mxfp4_ocp_floor_bf16_nan_inf_33x64.safetensors"),
]


def sf_index_8x4(row: int, col: int, padded_cols: int) -> int:
    """FlashInfer's compute_sf_index_swizzled_8x4_gpu, element by element."""
    num_k_tiles = (padded_cols + 3) // 4
    return (row // 8) * (num_k_tiles * 32) + (col // 4) * 32 + (row % 8) * 4 + col % 4


def swizzle_8x4(s: np.ndarray) -> np.ndarray:
    """S [R, C] (uint8) -> the 8x4 buffer [roundup(R, 8), roundup(C, 4)], by the view/permute form, checked against
    the index form above."""
    r, c = s.shape
    r8, c4 = -(-r // 8) * 8, -(-c // 4) * 4
    padded = np.zeros((r8, c4), dtype=np.uint8)
    padded[:r, :c] = s
    out = padded.reshape(r8 // 8, 8, c4 // 4, 4).transpose(0, 2, 1, 3).reshape(r8, c4)
    flat = out.reshape(-1)
    for i in range(r):
        for j in range(c):
            assert flat[sf_index_8x4(i, j, c4)] == s[i, j]
    return np.ascontiguousarray(out)


def convert(src: str, dst: str) -> None:
    with safe_open(src, "pt") as f:
        md = dict(f.metadata())
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    assert md.get("layout", "compact") == "compact" and "swizzled" not in md, src
    recipe = md["recipe"]
    assert recipe in ("nvfp4", "mxfp8", "mxfp4"), recipe
    for plane in ("rowwise", "columnwise"):
        name = f"{plane}_scale_inv"
        if name not in tensors:
            continue
        s = tensors[name]
        assert s.dtype == torch.uint8 and s.dim() == 2, (src, name, s.dtype, s.shape)
        s = s.numpy()
        transposed = recipe == "mxfp8" and plane == "columnwise"
        tensors[name] = torch.from_numpy(swizzle_8x4(np.ascontiguousarray(s.T) if transposed else s))
    md["layout"] = "swizzled_8x4"
    save_file(tensors, dst, metadata=md)


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(VECTORS, "flashinfer_8x4")
    os.makedirs(out, exist_ok=True)
    for folder, name in INPUTS:
        prefix = folder.replace("/", "_")
        convert(os.path.join(VECTORS, folder, name), os.path.join(out, f"{prefix}_{name}"))
    print(f"wrote {len(INPUTS)} vectors to {out}")


if __name__ == "__main__":
    main()
