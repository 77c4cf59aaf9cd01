"""pytest helpers: ``assert_conforms`` fails with the line ``qtc verify`` prints for the same tensors, raised as a
``ConformanceError`` (an AssertionError) whose fields hold the first mismatch: tensor, index, expected, got, block,
the mismatch count and percentage, and, where ``qtc identify`` finds one, the profile rule that explains it.
The frames of this module are hidden from pytest's traceback (``__tracebackhide__``)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple

import qtc
from qtc import frameworks

__all__ = ["assert_conforms", "ConformanceError", "Mismatch", "parse_mismatch"]

# "<tensor>: N of T elements differ; first at <coord>: expected <v>, got <v>[; block <x[...] = {...}>]" (verify.cpp's
# mismatch_line); <coord> is "[i, j]", "[i]" or, for TE-layout buffers, "[a, b] (compact [i, j])".
_LINE = re.compile(r"^(?P<tensor>[A-Za-z_0-9]+): (?P<count>\d+) of (?P<total>\d+) elements differ; first at "
                   r"(?P<coord>\[[-0-9, ]*\])(?: \(compact (?P<compact>\[[-0-9, ]*\])\))?: expected (?P<expected>.+?), "
                   r"got (?P<got>.+?)(?:; block (?P<block>.*))?$")


def _index(text: Optional[str]) -> Optional[Tuple[int, ...]]:
    if not text:
        return None
    inner = text.strip()[1:-1].strip()
    return tuple(int(v) for v in inner.split(",")) if inner else ()


@dataclass
class Mismatch:
    """One mismatching tensor of a verdict: where its first differing element is and what both values are."""

    tensor: str
    count: int             #: differing elements
    total: int             #: elements compared
    index: Tuple[int, ...]  #: compact (VECTORS.md) coordinates of the first one
    buffer_index: Optional[Tuple[int, ...]]  #: its coordinates in the caller's buffer (layout te), else None
    expected: str          #: the reference's value, hex and decoded, e.g. "0x3c (e4m3 1.5)"
    got: str               #: the caller's value, same form
    block: str             #: the block's inputs, e.g. "x[0, 0:16] = {...}" (may be empty)

    @property
    def percentage(self) -> float:
        return 100.0 * self.count / self.total if self.total else 0.0


def parse_mismatch(line: str) -> Optional[Mismatch]:
    """The fields of one per-tensor line of ``VerifyResult.details`` (for text from elsewhere, e.g. a log of
    ``qtc verify``; a result's fields are in ``VerifyResult.records``); None for another kind of line."""
    m = _LINE.match(line.strip())
    if m is None:
        return None
    compact = m.group("compact")
    return Mismatch(tensor=m.group("tensor"), count=int(m.group("count")), total=int(m.group("total")),
                    index=_index(compact or m.group("coord")) or (),
                    buffer_index=_index(m.group("coord")) if compact else None, expected=m.group("expected"),
                    got=m.group("got"), block=m.group("block") or "")


def _from_record(r: Mapping[str, Any]) -> Optional[Mismatch]:
    """A mismatch record of ``VerifyResult.records`` (the C++ verdict's fields); None for a tensor that could not be
    compared element by element (its ``problem`` says why)."""
    if r.get("problem"):
        return None
    buf = tuple(r.get("buffer_index") or ())
    return Mismatch(tensor=r["tensor"], count=int(r["count"]), total=int(r["total"]), index=tuple(r["index"]),
                    buffer_index=buf or None, expected=r["expected"], got=r["got"], block=r.get("block", ""))


class ConformanceError(AssertionError):
    """A failed ``assert_conforms``. ``str()`` is qtc's message; the fields are those of the first mismatching tensor
    (``mismatches`` lists every one), ``rule`` the profile rule or the profile that reproduces the outputs when
    ``qtc identify`` finds one (else None), ``result`` the full ``qtc.VerifyResult``."""

    def __init__(self, message: str, result: "qtc.VerifyResult", mismatches: List[Mismatch], rule: Optional[str]):
        super().__init__(message)
        self.result = result
        self.mismatches = mismatches
        first = mismatches[0] if mismatches else None
        self.tensor: Optional[str] = first.tensor if first else None
        self.index: Optional[Tuple[int, ...]] = first.index if first else None
        self.buffer_index: Optional[Tuple[int, ...]] = first.buffer_index if first else None
        self.expected: Optional[str] = first.expected if first else None
        self.got: Optional[str] = first.got if first else None
        self.block: Optional[str] = first.block if first else None
        self.count: Optional[int] = first.count if first else None
        self.total: Optional[int] = first.total if first else None
        self.percentage: Optional[float] = first.percentage if first else None
        self.rule = rule


def _explaining_rule(tensors: Mapping[str, Any], md: Mapping[str, Any], source: str) -> Optional[str]:
    """What ``qtc identify`` says reproduces the outputs: another profile, or one profile rule changed."""
    try:
        ident = qtc.identify(dict(tensors), source=source, **md)
    except Exception:  # an explanation is a bonus: never let it mask the verdict
        return None
    if ident.verdict == "OTHER" and ident.matches:
        return "reproduced by profile " + ", ".join(ident.matches)
    rule = getattr(ident, "explaining_rule", "")
    if rule:
        return f"{rule} ({getattr(ident, 'explaining_change', '')} in profile {getattr(ident, 'explaining_profile', '')})"
    return None


def _torchao_per_tensor_scale_problem(x: Any, obj: Any) -> Optional[str]:
    """torchao NVFP4: the object's per_tensor_scale must be torchao's amax(x) / 2688 (per_tensor_amax_to_scale)."""
    pts = getattr(obj, "per_tensor_scale", None)
    if pts is None or not hasattr(obj, "qdata") or not hasattr(x, "abs"):
        return None
    import torch

    want = (x.detach().abs().max().to(torch.float32) / torch.tensor(2688.0, dtype=torch.float32)).to(pts.device)
    got = pts.detach().to(torch.float32)
    if torch.equal(want.view(torch.int32), got.view(torch.int32)):
        return None
    return (f"per_tensor_scale: expected amax(x) / 2688 = {want.item()!r} (0x{want.view(torch.int32).item() & 0xFFFFFFFF:08x}),"
            f" got {got.item()!r} (0x{got.view(torch.int32).item() & 0xFFFFFFFF:08x})")


def assert_conforms(x: Any, recipe: Any, outputs: Optional[Mapping[str, Any]] = None, *, layout: str = "compact",
                    strict_padding: bool = False, name: Optional[str] = None,
                    explain: Optional[bool] = None, **params: Any) -> "qtc.VerifyResult":
    """Quantizes ``x`` with the reference and compares the outputs bit for bit.

    Either ``assert_conforms(x, "mxfp8", {"rowwise_data": ..., "rowwise_scale_inv": ...}, layout=..., **params)``
    with VECTORS.md names, or ``assert_conforms(x, obj)`` with a TransformerEngine or torchao quantized tensor
    object (``qtc.frameworks``: recipe, profile and layout are read from it; ``params`` override them). Padding
    of TE buffers is not compared unless ``strict_padding``. Raises ``ConformanceError`` (an AssertionError) with
    qtc's message and the first mismatch's fields; returns the ``VerifyResult`` otherwise. ``explain``: on failure,
    ask ``qtc identify`` which profile rule explains it (``ConformanceError.rule``); by default for host arrays only:
    CUDA tensors are checked on their GPU (``qtc.verify``), and identify, which runs every profile on the CPU, would
    copy them to the host (``explain=True`` does)."""
    __tracebackhide__ = True
    extra: List[str] = []
    if frameworks.is_framework_object(recipe):
        if outputs is not None:
            raise ValueError("assert_conforms(x, obj): the outputs come from the object; pass no outputs mapping")
        obj = recipe
        tensors, md = frameworks.framework_outputs(obj, **params)
        recipe_name = md.get("recipe", "?")
        problem = _torchao_per_tensor_scale_problem(x, obj)
        if problem:
            extra.append(problem)
        source = name or f"{type(obj).__name__} ({recipe_name})"
    else:
        if outputs is None:
            raise ValueError("assert_conforms(x, recipe, outputs): outputs (VECTORS.md names -> arrays) are missing")
        tensors = dict(outputs)
        md = dict(params)
        md["recipe"] = recipe
        md.update(qtc._layout_md(layout))
        source = name or f"{recipe} outputs"
    tensors = dict(tensors)
    tensors["x"] = x
    if explain is None:
        explain = all(qtc._device(v) == "cpu" for v in tensors.values())
    result = qtc.verify(tensors, source=source, strict_padding=strict_padding, **md)
    if result.passed and not extra:
        return result
    mismatches = [m for m in (_from_record(r) for r in result.records) if m is not None]
    lines = [] if result.passed else [result.line] + ["  " + d for d in result.details[1:]]
    lines += extra
    rule = _explaining_rule(tensors, md, source) if explain and result.verdict == "fail" else None
    if rule:
        lines.append(f"  explained by: {rule}")
    raise ConformanceError("\n".join(lines), result, mismatches, rule)
