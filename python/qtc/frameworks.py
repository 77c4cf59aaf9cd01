"""Quantized tensor objects of other frameworks, taken as they are: their buffers become the VECTORS.md tensors and
their flags the recipe, profile and layout that ``qtc.verify`` / ``qtc.testing.assert_conforms`` check them against.

TransformerEngine (``transformer_engine.pytorch.tensor``; the classes and their ``*Storage`` mixins alike, read by
their attributes, so that objects carrying TE's attribute layout work without TE installed):

* ``Float8Tensor``: ``_data`` [M, K], ``_transpose`` [K, M] (when not ``_transpose_invalid``), ``_scale_inv`` [1],
  ``_fp8_dtype``; the quantizer's ``force_pow_2_scales`` / ``amax_epsilon``: recipe ``fp8_tensor`` (current
  scaling; a delayed-scaling ``Float8Quantizer``'s scale does not follow from x and is refused).
* ``Float8BlockwiseQTensor``: ``_rowwise_data``, ``_rowwise_scale_inv``, ``_columnwise_data``,
  ``_columnwise_scale_inv``, ``_is_2D_scaled``, ``_fp8_dtype``; quantizer ``force_pow_2_scales``, ``amax_epsilon``:
  recipe ``fp8_block``.
* ``MXFP8Tensor``: the four buffers, ``_with_gemm_swizzled_scales``, ``_fp8_dtype``; quantizer
  ``with_2d_quantization``: recipe ``mxfp8`` (scale rule ``rceil``).
* ``NVFP4Tensor``: the four buffers, ``_amax_rowwise``, ``_amax_columnwise``, ``_with_gemm_swizzled_scales``,
  ``_row_scaled_nvfp4``, ``_nvfp4_use_4over6``, ``_nvfp4_e4m3_max``; quantizer ``with_rht``,
  ``with_2d_quantization``, ``nvfp4_4over6_err_mode``, ``stochastic_rounding``: recipe ``nvfp4``.

All of them in layout ``te`` (TE's padded scale buffers), profile ``te``.

torchao 0.18 (``torchao.prototype.mx_formats``), profile ``torchao``:

* ``NVFP4Tensor``: ``qdata`` [M, K/2], ``scale`` (E4M3; [M, K/16], or cuBLAS-swizzled when ``is_swizzled_scales``),
  ``per_tensor_scale`` (None: ``per_tensor_scale=0``), ``block_size`` 16: recipe ``nvfp4``, rowwise only.
* ``MXTensor``: ``qdata`` (float8) [M, K], ``scale`` (E8M0), ``elem_dtype``, ``block_size`` 32,
  ``is_swizzled_scales``: recipe ``mxfp8``. The object does not record torchao's ``ScaleCalculationMode``: the
  scale rule defaults to torchao's default (FLOOR: ``ocp_floor``); pass ``scale_rule=...`` when another was used.

Keyword overrides (``profile=...``, ``scale_rule=...``, ...) replace what was inferred.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

__all__ = ["is_framework_object", "framework_outputs"]


def _is_tensor(t: Any) -> bool:
    return t is not None and hasattr(t, "shape") and hasattr(t, "dtype")


def _kind(obj: Any) -> Optional[str]:
    """te_nvfp4, te_mxfp8, te_fp8_block, te_fp8_tensor, torchao_nvfp4, torchao_mx, or None."""
    has = lambda *names: all(hasattr(obj, n) for n in names)  # noqa: E731
    if has("_rowwise_data", "_amax_rowwise"):
        return "te_nvfp4"
    if has("_rowwise_data", "_is_2D_scaled"):
        return "te_fp8_block"
    if has("_rowwise_data", "_with_gemm_swizzled_scales"):
        return "te_mxfp8"
    if has("_data", "_scale_inv", "_fp8_dtype"):
        return "te_fp8_tensor"
    if has("qdata", "scale", "elem_dtype", "block_size"):
        return "torchao_mx"
    if has("qdata", "scale", "block_size", "per_tensor_scale"):
        return "torchao_nvfp4"
    return None


def is_framework_object(obj: Any) -> bool:
    """Whether ``obj`` is one of the quantized tensor objects this module reads (by its attributes)."""
    return not isinstance(obj, (dict, str, bytes)) and _kind(obj) is not None


def _class_name(obj: Any) -> str:
    t = type(obj)
    return f"{t.__module__}.{t.__qualname__}"


def _fp8_dtype(obj: Any) -> str:
    d = getattr(obj, "_fp8_dtype", None)
    name = getattr(d, "name", str(d))
    if "E5M2" in name.upper():
        return "e5m2"
    if "E4M3" in name.upper():
        return "e4m3"
    raise ValueError(f"{_class_name(obj)}: _fp8_dtype {d!r} is neither E4M3 nor E5M2")


def _flag(v: Any) -> str:
    return "1" if bool(v) else "0"


def _put(tensors: Dict[str, Any], name: str, t: Any) -> None:
    if _is_tensor(t) and (not hasattr(t, "numel") or t.numel() > 0):
        tensors[name] = t


def _te(obj: Any, kind: str) -> Tuple[Dict[str, Any], Dict[str, str]]:
    q = getattr(obj, "_quantizer", None)
    qname = type(q).__name__ if q is not None else ""
    md: Dict[str, str] = {"profile": "te", "layout": "te"}
    tensors: Dict[str, Any] = {}
    if kind == "te_fp8_tensor":
        if qname == "Float8Quantizer":
            raise ValueError(f"{_class_name(obj)} was made by a delayed-scaling Float8Quantizer: its scale comes from "
                             "the amax history, not from x; qtc checks current scaling (recipe fp8_tensor, "
                             "Float8CurrentScalingQuantizer)")
        md["recipe"] = "fp8_tensor"
        md["fp8_dtype"] = _fp8_dtype(obj)
        _put(tensors, "rowwise_data", getattr(obj, "_data", None))
        if not getattr(obj, "_transpose_invalid", False):
            _put(tensors, "columnwise_data", getattr(obj, "_transpose", None))
        _put(tensors, "scale_inv", getattr(obj, "_scale_inv", None))
        if q is not None:
            md["pow2_scales"] = _flag(getattr(q, "force_pow_2_scales", False))
            md["eps"] = repr(float(getattr(q, "amax_epsilon", 0.0)))
        return tensors, md
    for n in ("rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv"):
        _put(tensors, n, getattr(obj, "_" + n, None))
    if kind == "te_fp8_block":
        md["recipe"] = "fp8_block"
        md["fp8_dtype"] = _fp8_dtype(obj)
        md["tile"] = "128x128" if getattr(obj, "_is_2D_scaled") else "1x128"
        if q is not None:
            md["pow2_scales"] = _flag(getattr(q, "force_pow_2_scales", False))
            md["eps"] = repr(float(getattr(q, "amax_epsilon", 0.0)))
    elif kind == "te_mxfp8":
        md["recipe"] = "mxfp8"
        md["fp8_dtype"] = _fp8_dtype(obj)
        md["scale_rule"] = "rceil"
        md["layout"] = "swizzled_128x4" if getattr(obj, "_with_gemm_swizzled_scales", False) else "te"
        if q is not None and getattr(q, "with_2d_quantization", False):
            md["tile"] = "32x32"
    else:  # te_nvfp4
        md["recipe"] = "nvfp4"
        md["layout"] = "swizzled_128x4" if getattr(obj, "_with_gemm_swizzled_scales", False) else "te"
        _put(tensors, "amax_rowwise", getattr(obj, "_amax_rowwise", None) if "rowwise_data" in tensors else None)
        _put(tensors, "amax_columnwise", getattr(obj, "_amax_columnwise", None) if "columnwise_data" in tensors else None)
        md["row_scaled"] = _flag(getattr(obj, "_row_scaled_nvfp4", False))
        if getattr(obj, "_nvfp4_use_4over6", False):
            md["fourover6"] = "1"
            md["e4m3_max"] = str(int(getattr(obj, "_nvfp4_e4m3_max", 448)))
            if q is not None and hasattr(q, "nvfp4_4over6_err_mode"):
                md["fourover6_err"] = str(q.nvfp4_4over6_err_mode).lower()
        if q is not None:
            md["rht"] = _flag(getattr(q, "with_rht", False))
            md["tile"] = "16x16" if getattr(q, "with_2d_quantization", False) else "1x16"
            if getattr(q, "stochastic_rounding", False):
                raise ValueError(f"{_class_name(obj)} was quantized with stochastic rounding: its bits depend on TE's "
                                 "random state, which the object does not hold (pass stochastic_rounding=1 and seed=... "
                                 "when the bits were drawn as qtc draws them)")
    if "rowwise_data" not in tensors:
        md["rowwise"] = "0"
    if "columnwise_data" not in tensors:
        md["columnwise"] = "0"
    return tensors, md


def _torchao(obj: Any, kind: str) -> Tuple[Dict[str, Any], Dict[str, str]]:
    md: Dict[str, str] = {"profile": "torchao", "columnwise": "0"}
    qdata, scale = obj.qdata, obj.scale
    if qdata.dim() >= 2 and qdata.stride(-2) < qdata.stride(-1):
        raise ValueError(f"{_class_name(obj)}: qdata is a transposed view (stride {tuple(qdata.stride())}); pass the "
                         "object quantized along its rows (qtc reads x's rowwise quantization)")
    rows = 1
    for d in qdata.shape[:-1]:
        rows *= int(d)
    swizzled = bool(getattr(obj, "is_swizzled_scales", False))
    if kind == "torchao_nvfp4":
        if int(obj.block_size) != 16:
            raise ValueError(f"{_class_name(obj)}: block_size {obj.block_size}; NVFP4 blocks are 16 elements")
        pts = obj.per_tensor_scale
        if pts is not None and pts.dim() != 0:
            raise ValueError(f"{_class_name(obj)}: per_tensor_scale of shape {tuple(pts.shape)} (one per expert); qtc "
                             "checks one tensor with one per-tensor scale: pass each expert's slice")
        md["recipe"] = "nvfp4"
        md["per_tensor_scale"] = "1" if pts is not None else "0"
        cols = int(qdata.shape[-1]) * 2
        kb = -(-cols // 16)
    else:
        import torch

        elem = obj.elem_dtype
        if elem in (torch.float8_e4m3fn, torch.float8_e5m2):
            md["recipe"] = "mxfp8"
            md["fp8_dtype"] = "e4m3" if elem == torch.float8_e4m3fn else "e5m2"
            cols = int(qdata.shape[-1])
        elif getattr(torch, "float4_e2m1fn_x2", None) is not None and elem == torch.float4_e2m1fn_x2:
            md["recipe"] = "mxfp4"
            cols = int(qdata.shape[-1]) * 2
        else:
            raise ValueError(f"{_class_name(obj)}: elem_dtype {elem} (qtc checks float8_e4m3fn, float8_e5m2 and "
                             "float4_e2m1fn_x2)")
        if int(obj.block_size) != 32:
            raise ValueError(f"{_class_name(obj)}: block_size {obj.block_size}; MX blocks are 32 elements")
        md["scale_rule"] = "ocp_floor"  # torchao's default ScaleCalculationMode.FLOOR; the object does not record it
        kb = -(-cols // 32)
    tensors: Dict[str, Any] = {"rowwise_data": qdata}
    if swizzled:
        md["layout"] = "swizzled_128x4"
        tensors["rowwise_scale_inv"] = scale.reshape(-(-rows // 128) * 128, -(-kb // 4) * 4)
    else:
        tensors["rowwise_scale_inv"] = scale.reshape(rows, kb)
    return tensors, md


def framework_outputs(obj: Any, **overrides: Any) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """(tensors, metadata) of a framework object: the VECTORS.md outputs it holds (framework tensors, not copied)
    and the recipe, profile and layout keys its flags give; ``overrides`` replace inferred keys (None drops one).
    Raises ValueError naming the class and the field when the object cannot be checked as it is."""
    kind = _kind(obj)
    if kind is None:
        raise ValueError(f"{_class_name(obj)} is not a quantized tensor qtc can read (TransformerEngine's Float8Tensor, "
                         "Float8BlockwiseQTensor, MXFP8Tensor, NVFP4Tensor or their storage classes; torchao's "
                         "NVFP4Tensor or MXTensor)")
    tensors, md = _te(obj, kind) if kind.startswith("te_") else _torchao(obj, kind)
    if not any(k.endswith("_data") for k in tensors):
        raise ValueError(f"{_class_name(obj)} holds no data buffer (rowwise and columnwise usage both cleared)")
    for k, v in overrides.items():
        if v is None:
            md.pop(k, None)
        else:
            md[k] = ("1" if v else "0") if isinstance(v, bool) else str(v)
    return tensors, md
