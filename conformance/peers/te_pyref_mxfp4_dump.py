#!/usr/bin/env python3
"""Dump MXFP4 vectors (VECTORS.md, schema 1, recipe `mxfp4`, profile `te_pyref`, scale_rule `rceil`) from
TransformerEngine's own MXFP4 rule: its PyTorch reference quantizer `NVFP4QuantizerRef(pow_2_scales=True,
quant_tile_shape=(1, 32))` (transformer_engine/pytorch/custom_recipes/quantization_ref_nvfp4.py in TE 2.16-2.18,
reference_nvfp4.py on main; the same `cast_to_e8` and `pow_2_scales` branch since TE 2.8's
experimental/quantization_microblock_ref.py). It is TE's only MXFP4 quantizer: the CUDA kernel behind it
(common/transpose/quantize_transpose_vector_blockwise_fp4.cu) refuses pow2_scale ("No support for pow2_scale for
MXFP4 for now"), so the MXFP4 rule of TransformerEngine is this reference's, run here on the CPU.

The reference is pure PyTorch. This script executes the file as TE ships it, read from a TE checkout, with the few TE
modules it imports replaced by stand-ins (the `Quantizer` / `QuantizedTensorStorage` base classes, the Fp4Formats enum,
roundup_div and HIGH_PRECISION_FLOAT_DTYPES of custom_recipes.utils (reference_utils on main), and GEMMType /
MMParams of custom_recipes.quantization (gemm on main), which only its qgemm uses). TE's `_quantize` cannot run in this mode at any version from
2.8 to main: `row_input` / `col_input` are assigned only in its NVFP4 branch (UnboundLocalError; its own comment "TODO
Fix bug where global_amax_row and global_amax_col are not defined"). So this script calls what `_quantize` calls, with
the arguments it passes: `_pad_tensor` (zeros to whole blocks of 32), the rule `_quantize_blockwise_reference(x_padded,
None, 32, 1, pow_2_scales=True, eps=0.0)` (the global amax is unused with pow_2_scales) and `_rm_pad_tensor`, on x for
the rowwise plane and on x.t().contiguous() for the columnwise one: TE's own functions compute every output. Its scale tensors are float32 decode scales 2^e (cast_to_e8: 2^clamp(ceil(
log2(amax / 6)), -127, 127)); the vector stores them as E8M0 bytes, the float32 exponent field (2^-127 -> 0x00, a NaN
scale -> 0xFF; each is asserted to be a power of two or NaN). Codes: TE's packed bytes as they are (element 2j in the
low nibble). The columnwise plane is TE's own `qx_t` (the quantization of x.t().contiguous()), which is VECTORS.md's
orientation. The dequantized planes are VECTORS.md's decode 2^(e-127) * E2M1 (NaN for 0xFF), float32.

    python conformance/peers/te_pyref_mxfp4_dump.py TE_FILE TE_VERSION OUT_DIR
      TE_FILE: transformer_engine/pytorch/custom_recipes/quantization_ref_nvfp4.py of a TE checkout, e.g.
               git -C TransformerEngine show v2.18:transformer_engine/pytorch/custom_recipes/quantization_ref_nvfp4.py > ref.py
    build/conformance/qtc verify OUT_DIR

Shapes have even M and K (TE's `_rm_pad_tensor` keeps N // 2 bytes of a row), M or K not a multiple of 32 in one
case (TE pads with zeros to whole blocks, which leaves every block max as it is). Needs: torch (CPU), numpy.
Deterministic (fixed seeds, one CPU thread).
"""
import enum
import os
import sys
import types

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engines_mxfp4_dump import CASES, decode, family, save, to_input  # noqa: E402

torch.set_num_threads(1)


def load_te_reference(path):
    """Executes TE's reference module with stand-ins for the TE modules it imports; returns its namespace."""

    class Quantizer:  # transformer_engine.pytorch.quantized_tensor.Quantizer: the usage flags the reference reads
        def __init__(self, rowwise=True, columnwise=True):
            self.rowwise_usage = rowwise
            self.columnwise_usage = columnwise
            self.internal = False

    class QuantizedTensorStorage:  # only subclassed by the reference's dataclass
        pass

    class Fp4Formats(enum.Enum):  # custom_recipes.utils.Fp4Formats
        E2M1 = "fp4_e2m1"

    utils = types.ModuleType("transformer_engine.pytorch.custom_recipes.utils")
    utils.Fp4Formats = Fp4Formats
    utils.roundup_div = lambda x, y: (x + y - 1) // y
    utils.HIGH_PRECISION_FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
    qt = types.ModuleType("transformer_engine.pytorch.quantized_tensor")
    qt.Quantizer, qt.QuantizedTensorStorage = Quantizer, QuantizedTensorStorage
    recipes = types.ModuleType("transformer_engine.pytorch.custom_recipes")
    recipes.utils = recipes.reference_utils = utils  # main renamed utils to reference_utils, quantization to gemm
    recipes.quantization = types.ModuleType("transformer_engine.pytorch.custom_recipes.quantization")

    class GEMMType(enum.Enum):  # custom_recipes.quantization.GEMMType: a default argument of its qgemm
        FPROP = "fprop"
        DGRAD = "dgrad"
        WGRAD = "wgrad"

    recipes.quantization.GEMMType = GEMMType
    recipes.quantization.MMParams = object  # an annotation of its qgemm
    recipes.gemm = recipes.quantization
    pt = types.ModuleType("transformer_engine.pytorch")
    pt.custom_recipes, pt.quantized_tensor = recipes, qt
    te = types.ModuleType("transformer_engine")
    te.pytorch = pt
    for name, mod in [("transformer_engine", te), ("transformer_engine.pytorch", pt),
                      ("transformer_engine.pytorch.custom_recipes", recipes),
                      ("transformer_engine.pytorch.custom_recipes.utils", utils),
                      ("transformer_engine.pytorch.custom_recipes.quantization", recipes.quantization),
                      ("transformer_engine.pytorch.custom_recipes.reference_utils", utils),
                      ("transformer_engine.pytorch.custom_recipes.gemm", recipes.quantization),
                      ("transformer_engine.pytorch.quantized_tensor", qt)]:
        sys.modules[name] = mod
    ns = {"__name__": "te_quantization_ref_nvfp4"}
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), ns)  # noqa: S102  (TE's own file, as shipped)
    return ns


def e8m0_bytes(scale):
    """TE's float32 decode scales -> E8M0 bytes (asserted powers of two in [2^-127, 2^127], or NaN)."""
    s = scale.contiguous().numpy().astype(np.float32)
    u = s.view(np.uint32)
    nan = np.isnan(s)
    pow2 = ((u & 0x807FFFFF) == 0) & ((u >> 23) > 0) & ((u >> 23) < 0xFF)
    assert (nan | pow2 | (u == 0x00400000)).all(), "a TE decode scale that is not a power of two"
    return np.where(nan, 0xFF, np.where(u == 0x00400000, 0, u >> 23)).astype(np.uint8)


def unpack(packed, n):
    p = packed.contiguous().numpy().astype(np.uint8)
    return np.stack([p & 0xF, p >> 4], axis=-1).reshape(p.shape[0], -1)[:, :n]


def near_pow2(m, k, seed):
    """Block maxima 6 * 2^j (1 + i 2^-23): where ceil(log2(amax / 6)) in float32 falls below the exact round-up."""
    g = np.random.default_rng(seed)
    x = g.standard_normal((m, k)).astype(np.float32)
    for i in range(m):
        for b in range(k // 32):
            a = np.float32(6.0 * 2.0 ** int(g.integers(-30, 30)) * (1 + int(g.integers(0, 6)) * 2.0 ** -23))
            x[i, 32 * b:32 * b + 32] = np.clip(x[i, 32 * b:32 * b + 32], -a, a) * np.float32(0.5)
            x[i, 32 * b + int(g.integers(0, 32))] = a
    return x


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    ns = load_te_reference(sys.argv[1])
    version, out = sys.argv[2], sys.argv[3]
    os.makedirs(out, exist_ok=True)
    ref = ns["NVFP4QuantizerRef"]
    ref(dtype=sys.modules["transformer_engine.pytorch.custom_recipes.utils"].Fp4Formats.E2M1, pow_2_scales=True,
        quant_tile_shape=(1, 32))  # the constructor accepts the MXFP4 mode

    def plane(t):  # what _quantize does for one plane, pow_2_scales=True, tile (1, 32)
        rows, cols = t.shape
        q, sc = ref._quantize_blockwise_reference(ref._pad_tensor(t, row_divisor=1, col_divisor=32), None, 32, 1,
                                                  pow_2_scales=True, eps=0.0)
        return ref._rm_pad_tensor(q, (rows, cols // 2)), sc

    tdt = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
    cases = list(CASES) + [("near_pow2", (32, 64)), ("normal", (38, 48))]
    n = 0
    for ci, (fam, (m, k)) in enumerate(cases):
        for di, dt in enumerate(("f32", "bf16", "f16")):
            seed = 27000 + 10 * ci + di
            x = near_pow2(m, k, seed) if fam == "near_pow2" else family(fam, m, k, seed)
            raw, _, st = to_input(x, dt)
            xt = torch.from_numpy(np.ascontiguousarray(raw).view(np.float32 if st == "F32" else np.int16)).view(tdt[st])
            qx, sx = plane(xt)
            qx_t, sx_t = plane(xt.t().contiguous())
            c, s = unpack(qx, k), e8m0_bytes(sx)[:, :(k + 31) // 32]
            ct, stt = unpack(qx_t, m), e8m0_bytes(sx_t)[:, :(m + 31) // 32]
            tensors = {"x": (raw, st), "rowwise_data": (qx.contiguous().numpy().astype(np.uint8), "U8"),
                       "rowwise_scale_inv": (s, "U8"), "dequantized_rowwise": (decode_ragged(c, s), "F32"),
                       "columnwise_data": (qx_t.contiguous().numpy().astype(np.uint8), "U8"),
                       "columnwise_scale_inv": (stt, "U8"),
                       "dequantized_columnwise": (np.ascontiguousarray(decode_ragged(ct, stt).T), "F32")}
            md = {"qtc.schema": "1", "recipe": "mxfp4", "profile": "te_pyref", "scale_rule": "rceil",
                  "case.family": fam,
                  "source": f"TransformerEngine {version} transformer_engine/pytorch/custom_recipes/"
                            "quantization_ref_nvfp4.py NVFP4QuantizerRef._quantize_blockwise_reference(pow_2_scales="
                            "True, tile 1x32) as _quantize calls it (its own _quantize fails in this mode), run on the "
                            f"CPU (torch {torch.__version__.split('+')[0]}; "
                            "conformance/peers/te_pyref_mxfp4_dump.py)"}
            save(os.path.join(out, f"mxfp4_te_pyref_rceil_{dt}_{fam}_{m}x{k}.safetensors"), tensors, md)
            n += 1
    print(f"{n} vectors written to {out}")
    return 0


def decode_ragged(codes, scales):
    """decode() for a row length that need not be a multiple of 32."""
    n = codes.shape[1]
    pad = (-n) % 32
    c = np.pad(codes, ((0, 0), (0, pad)))
    return np.ascontiguousarray(decode(c, scales)[:, :n])


if __name__ == "__main__":
    sys.exit(main())
