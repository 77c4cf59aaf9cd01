"""pytest helpers: ``assert_conforms`` fails with the line ``qtc verify`` prints for the same tensors."""
from __future__ import annotations

from typing import Any, Mapping

import qtc


def assert_conforms(x: Any, recipe: str, outputs: Mapping[str, Any], *, layout: str = "compact", swizzled: bool = False,
                    strict_padding: bool = False, name: str | None = None, **params: Any) -> qtc.VerifyResult:
    """Quantizes ``x`` with the reference for ``recipe`` (and ``params``) and compares ``outputs`` (VECTORS.md names:
    ``rowwise_data``, ``rowwise_scale_inv``, ``amax_rowwise``, ..., in ``layout``) bit for bit. Padding of TE
    buffers is not compared unless ``strict_padding`` (then it must be zero). Raises AssertionError with the first
    mismatch; returns the result otherwise."""
    tensors = dict(outputs)
    tensors["x"] = x
    md = dict(params)
    md["recipe"] = recipe
    if layout != "compact" or swizzled:
        md.update(qtc._layout_md(layout, swizzled))
    result = qtc.verify(tensors, source=name or f"{recipe} outputs", strict_padding=strict_padding, **md)
    if not result.passed:
        detail = "".join("\n  " + d for d in result.details[1:])
        raise AssertionError(result.line + detail)
    return result
