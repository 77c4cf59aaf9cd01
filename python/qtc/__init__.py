"""qtc: bit-exact CPU reference quantizers for NVFP4, MXFP8, FP8 block and FP8 per-tensor scaling, and the
conformance checks of ``qtc verify``, callable from Python.

Arrays may be NumPy arrays (ml_dtypes bfloat16 / float8 included), CPU torch tensors (float8, bfloat16 and
``float4_e2m1fn_x2`` included), or anything with ``__dlpack__`` or the buffer protocol; C-contiguous CPU arrays are
passed to the reference without a copy. Tensors of more than two dimensions are flattened to
``(prod(leading dims), last dim)``, as TransformerEngine flattens ``(..., K)`` inputs to ``M x K``.
Tensor names and shapes are those of VECTORS.md. Bad arguments raise ``ValueError`` with the rule's message.
TransformerEngine's and torchao's quantized tensor objects are taken as they are (``qtc.frameworks``).
"""
from __future__ import annotations

import operator
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Tuple

import numpy as np

from . import _qtc
from . import frameworks

__all__ = ["quantize", "dequantize", "verify", "identify", "load_vector", "save_vector", "VerifyResult", "Identity",
           "check_checkpoint", "check_stochastic_rounding"]
__version__ = "0.2.0"

try:  # optional: typed bfloat16 / float8 NumPy arrays
    import ml_dtypes as _ml
except ImportError:  # pragma: no cover - depends on the environment
    _ml = None

# safetensors dtype names of the NumPy dtypes we accept; the ml_dtypes ones travel as raw integers of their size.
_NUMPY_DTYPES = {"float32": "F32", "float16": "F16", "bfloat16": "BF16", "uint8": "U8", "int8": "I8",
                 "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "float8_e8m0fnu": "F8_E8M0",
                 "uint16": "U16", "int16": "I16", "int32": "I32", "uint32": "U32", "int64": "I64", "uint64": "U64",
                 "float64": "F64", "bool": "BOOL"}
_RAW_VIEW = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class BF16Bits(np.ndarray):
    """The bits of a BF16 tensor as uint16, when ml_dtypes is not installed: ``load_vector`` and ``quantize`` return
    BF16 tensors as this uint16 subclass, and every function here takes it back as BF16 (a plain uint16 array is
    U16). ``.astype(np.float32)`` gives integers: use ``to_float32()`` for the values."""

    def to_float32(self) -> np.ndarray:
        return (np.asarray(self, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _flat2d(a: Any) -> Any:
    """(..., K) -> (prod(...), K) for tensors of more than two dimensions (TE's flattening); others as they are."""
    shape = tuple(a.shape)
    if len(shape) <= 2:
        return a
    lead = 1
    for d in shape[:-1]:
        lead *= int(d)
    return a.reshape(lead, shape[-1])


def _torch_tensor(a: Any) -> bool:
    return type(a).__module__.startswith("torch") and hasattr(a, "device") and hasattr(a, "dtype")


def _device(a: Any) -> str:
    """Where an array's data is: 'cpu', 'cuda:N', or another device's name (torch's, or DLPack's device type)."""
    if _torch_tensor(a):
        d = a.device
        return "cpu" if d.type == "cpu" else f"{d.type}:{0 if d.index is None else d.index}"
    f = getattr(a, "__dlpack_device__", None)
    if f is None or isinstance(a, np.ndarray):
        return "cpu"
    kind, index = (int(v) for v in f())
    if kind in (1, 3):  # kDLCPU, kDLCUDAHost (pinned host memory)
        return "cpu"
    return f"cuda:{index}" if kind == 2 else f"DLPack device type {kind}:{index}"


def _on_device(tensors: Mapping[str, Any]) -> str | None:
    """The one CUDA device that every tensor of a call is on, or None when all are host arrays. Refuses a mix (qtc
    compares on the device that holds the data), another device type, and CUDA tensors in a module built without the
    kernels library."""
    devices = {k: _device(v) for k, v in tensors.items()}
    cuda = sorted({d for d in devices.values() if d != "cpu"})
    if not cuda:
        return None
    for k, d in devices.items():
        if d != "cpu" and not d.startswith("cuda:"):
            raise ValueError(f"tensor '{k}' is on {d}; qtc takes CPU and CUDA tensors")
    if len(cuda) > 1 or len(set(devices.values())) > 1:
        where = ", ".join(f"'{k}' on {d}" for k, d in sorted(devices.items()))
        raise ValueError(f"tensors on several devices ({where}): pass every tensor on one device (CUDA tensors are "
                         "checked on their GPU, host arrays by the CPU reference)")
    if not getattr(_qtc, "cuda_built", False):
        first = sorted(devices)[0]
        raise ValueError(f"tensor '{first}' is on {cuda[0]}, and this qtc module was built without CUDA (no kernels "
                         "library: QTC_ENABLE_CUDA off, or no CUDA compiler found when it was installed): pass "
                         "tensor.cpu() to check it with the CPU reference, or reinstall qtc where nvcc is found")
    return cuda[0]


_TORCH_NAMES: Dict[Any, str] = {}
_TORCH_RAW8: set = set()


def _torch_names() -> Tuple[Dict[Any, str], set]:
    """torch dtype -> safetensors name; the float8 / float4 dtypes, passed as their bytes (a same-size integer view)."""
    if not _TORCH_NAMES:
        import torch

        _TORCH_NAMES.update({torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.uint8: "U8",
                             torch.int8: "I8", torch.int16: "I16", torch.int32: "I32", torch.int64: "I64",
                             torch.float64: "F64", torch.bool: "BOOL"})
        for attr, st in (("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2"), ("float8_e8m0fnu", "F8_E8M0"),
                         ("float4_e2m1fn_x2", "U8")):  # FP4 pairs: the packed bytes VECTORS.md stores as U8
            if hasattr(torch, attr):
                _TORCH_NAMES[getattr(torch, attr)] = st
                _TORCH_RAW8.add(getattr(torch, attr))
    return _TORCH_NAMES, _TORCH_RAW8


def _torch_view(name: str, a: Any) -> Tuple[Any, str]:
    """A torch tensor as (C-contiguous tensor on its own device, safetensors dtype name): BF16 and the float8 / float4
    dtypes as a same-size integer view (no copy; any DLPack version takes it), (..., K) flattened to 2-D."""
    import torch

    names, raw8 = _torch_names()
    if a.dtype not in names:
        raise ValueError(f"tensor '{name}' has torch dtype {a.dtype}; qtc takes {sorted(set(names.values()))}")
    st = names[a.dtype]
    t = a.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    if st == "BF16" or a.dtype in raw8:
        t = t.view(torch.int16 if st == "BF16" else torch.uint8)
    return _flat2d(t), st


def _to_torch(name: str, a: Any) -> Any:
    """A CUDA array of another DLPack producer (CuPy, JAX, ...) as a torch tensor (torch.from_dlpack, no copy)."""
    if _torch_tensor(a):
        return a
    try:
        import torch
    except ImportError:
        raise ValueError(f"tensor '{name}' is a CUDA array: qtc takes CUDA arrays through torch (torch.from_dlpack), "
                         "which is not installed") from None
    return torch.from_dlpack(a)


def _cuda_arg(name: str, a: Any) -> Tuple[Any, str]:
    """A CUDA array for the device path, as _torch_view makes it: the data stays on the device."""
    return _torch_view(name, _to_torch(name, a))


def _stream(device: str) -> int:
    """The current torch stream of the device: qtc's kernels run on it, after the work that made the tensors."""
    import torch

    return int(torch.cuda.current_stream(torch.device(device)).cuda_stream)


def _as_arg(name: str, a: Any) -> Tuple[Any, str]:
    """(C-contiguous CPU buffer, safetensors dtype name) without copying when the array already is one. A CUDA tensor is
    copied to the host here: what takes this path (identify, dequantize, save_vector, check_stochastic_rounding) runs
    the CPU reference; quantize, verify and assert_conforms check CUDA tensors on their GPU instead."""
    if _torch_tensor(a):
        if a.device.type == "cuda":
            a = a.detach().cpu()
        elif a.device.type != "cpu":
            raise ValueError(f"tensor '{name}' is on {a.device}; qtc takes CPU and CUDA tensors")
        return _torch_view(name, a)
    if _device(a).startswith("cuda:"):
        return _as_arg(name, _to_torch(name, a))
    arr = a if isinstance(a, np.ndarray) else np.asarray(a)
    if isinstance(arr, BF16Bits):
        return _flat2d(np.ascontiguousarray(arr).view(np.uint16)), "BF16"
    st = _NUMPY_DTYPES.get(arr.dtype.name)
    if st is None:
        raise ValueError(f"tensor '{name}' has dtype {arr.dtype}; qtc takes {sorted(set(_NUMPY_DTYPES))}")
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    if arr.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"):
        arr = arr.view(_RAW_VIEW[arr.dtype.itemsize])
    return _flat2d(arr), st


def _np_dtype(st: str):
    table = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "U8": np.uint8, "I8": np.int8, "U16": np.uint16,
             "I16": np.int16, "U32": np.uint32, "I32": np.int32, "U64": np.uint64, "I64": np.int64, "BOOL": np.bool_}
    if st in table:
        return table[st]
    if st == "BF16":
        return _ml.bfloat16 if _ml is not None else np.uint16  # raw bf16 bits without ml_dtypes
    return np.uint8  # F8_*: raw bytes, as VECTORS.md treats them


def _from_out(out: Tuple[np.ndarray, str, List[int]]) -> np.ndarray:
    raw, st, shape = out
    arr = raw.view(_np_dtype(st)).reshape(shape)
    if st == "BF16" and _ml is None:
        arr = arr.view(BF16Bits)  # keeps its BF16-ness for a round trip through verify / save_vector
    return arr


def _path(path: Any) -> str:
    """A file path for the C++ side: str or os.PathLike, without a NUL (which would end the name early)."""
    p = os.fspath(path)
    if isinstance(p, bytes):
        p = os.fsdecode(p)
    if "\0" in p:
        raise ValueError(f"path {p!r} holds a NUL byte (rule 'path-nul': a file name cannot hold one)")
    return p


def _dim(name: str, v: Any) -> int:
    """An extent of a shape: an integer (int, NumPy integer), not a float that would be truncated or a bool."""
    if isinstance(v, bool):
        raise ValueError(f"{name} must be an integer, got {v!r}")
    try:
        return operator.index(v)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {v!r} ({type(v).__name__})") from None


def _metadata(recipe: str | None, params: Mapping[str, Any]) -> Dict[str, str]:
    md: Dict[str, str] = {}
    if recipe is not None:
        md["recipe"] = str(recipe)
    for k, v in params.items():
        if v is None:
            continue
        if isinstance(v, Mapping) and k in ("rowwise", "columnwise"):
            # recipe="hybrid": a plane's recipe as a dict, e.g. rowwise={"recipe": "mxfp8"} -> rowwise.recipe=mxfp8
            for kk, vv in _metadata(None, v).items():
                md[f"{k}.{kk}"] = vv
            continue
        md[k] = ("1" if v else "0") if isinstance(v, bool) else str(v)
    return md


#: The scale layouts, one name each, from the C++ table (qtc/layout.hpp; conformance/README.md, "Scale layouts"):
#: compact (VECTORS.md shapes), te (TransformerEngine's padded buffers), swizzled_128x4 (cuBLAS's order of TE's padded
#: NVFP4 / MXFP8 / MXFP4 scales), swizzled_8x4 (FlashInfer / TensorRT-LLM's small-M order), deepgemm_packed_ue8m0
#: (FP8 block UE8M0 scales packed four per int32 word as DeepGEMM's), fbgemm_mx4 (MXFP4 as FBGEMM's MX4 rows: per 32
#: elements 16 code bytes then the E8M0 byte, in ``rowwise_data`` / ``columnwise_data``, no ``*_scale_inv``).
LAYOUTS = tuple(_qtc.layout_names())


def _layout_md(layout: str) -> Dict[str, str]:
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r} "
                         "(VECTORS.md, Native layouts; conformance/README.md, Scale layouts)")
    return {} if layout == "compact" else {"layout": layout}


def quantize(x: Any, recipe: str, *, layout: str = "compact", **params: Any) -> Dict[str, np.ndarray]:
    """Quantizes the 2-D array ``x`` ([M, K], float32 / bfloat16 / float16) with the reference.

    ``recipe`` is ``nvfp4``, ``mxfp8``, ``fp8_block``, ``fp8_tensor`` or ``mxfp4``; ``params`` are the VECTORS.md parameters
    (``tile='16x16'``, ``row_scaled=True``, ``fp8_dtype='e5m2'``, ``scale_rule='ocp_floor'``, ``profile='te_pyref'``,
    ``columnwise=False``, ...).
    ``recipe='hybrid'`` (TransformerEngine's HybridQuantizer; conformance/README.md, Hybrid planes) takes each plane's
    recipe as a dict: ``rowwise={'recipe': 'mxfp8'}, columnwise={'recipe': 'nvfp4'}``, with
    ``columnwise_source='rowwise_dequantized'`` (and ``columnwise_source_dtype='f32'``, ``group_rows='128,256'``);
    an FP8 tensor plane's scale is returned as ``'<plane>.scale_inv'``, the dequantized source as ``columnwise_source``.
    Returns the VECTORS.md tensors (``rowwise_data``, ``rowwise_scale_inv``, ``columnwise_data``, ...): NumPy arrays,
    or for a CUDA ``x`` torch tensors on its device, quantized there by the CUDA kernels (same bytes; uint8 for
    byte tensors as on the host). With ``layout='te'`` the scales are TransformerEngine's padded buffers, ``'swizzled_128x4'`` cuBLAS's 128x4 order of
    them, ``'swizzled_8x4'`` FlashInfer's 8x4 order, ``'fbgemm_mx4'`` (MXFP4) FBGEMM's MX4 rows: each plane's codes and
    exponent bytes in its ``*_data`` tensor, no ``*_scale_inv`` (``LAYOUTS``; host arrays only: the CUDA kernels
    refuse it naming rule 'layout-fbgemm_mx4').
    """
    md = _metadata(recipe, params)
    md.update(_layout_md(layout))
    device = _on_device({"x": x})
    if device is not None:  # on the GPU with the CUDA kernels; the outputs are torch tensors on x's device
        import torch

        dtypes = {"U8": torch.uint8, "F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}

        def alloc(name: str, dtype: str, shape: List[int]) -> Any:
            return torch.empty(tuple(shape), dtype=dtypes[dtype], device=device)

        return dict(_qtc.quantize_cuda(_cuda_arg("x", x), md, _stream(device), alloc))
    out = _qtc.quantize(_as_arg("x", x), md)
    return {k: _from_out(v) for k, v in out.items()}


def dequantize(tensors: Mapping[str, Any], recipe: str, shape: Tuple[int, int], *, plane: str = "rowwise",
               layout: str = "compact", out: str = "float32", **params: Any) -> np.ndarray:
    """Decodes one plane of quantized ``tensors`` (VECTORS.md names, as ``quantize`` returns them) to an [M, K]
    array in x's orientation. ``shape`` is x's [M, K]; ``out`` is float32, bfloat16 or float16."""
    md = _metadata(recipe, params)
    md.update(_layout_md(layout))
    names = {"float32": "F32", "bfloat16": "BF16", "float16": "F16"}
    if out not in names:
        raise ValueError(f"out must be float32, bfloat16 or float16, got {out!r}")
    if len(shape) != 2:
        raise ValueError(f"shape must be [M, K], got {shape!r}")
    rows, cols = _dim("shape[0]", shape[0]), _dim("shape[1]", shape[1])
    args = {k: _as_arg(k, v) for k, v in tensors.items() if k != "x"}
    return _from_out(_qtc.dequantize(args, md, rows, cols, plane, names[out]))


@dataclass
class VerifyResult:
    """The verdict of ``qtc verify`` on one vector: ``passed``, the first-mismatch text ``message`` (the same text
    ``qtc verify`` prints), one line per mismatching tensor in ``details``, and ``mismatches``: for every checked
    tensor the number of differing elements (-1 when the tensor could not be compared at all); ``records``: one dict
    per mismatching tensor with its fields (tensor, problem, count, total, index, buffer_index, expected, got,
    expected_bits, got_bits, block, line), read from the C++ verdict, not from its text."""

    verdict: str
    message: str
    line: str
    details: List[str] = field(default_factory=list)
    checked: List[str] = field(default_factory=list)
    mismatches: Dict[str, int] = field(default_factory=dict)
    records: List[Dict[str, Any]] = field(default_factory=list)
    recipe: str = ""
    profile: str = ""

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        return self.line


class _Unreadable(Exception):
    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path = path
        prefix = path + ": "  # the reader's message starts with the path: don't repeat it
        self.message = message[len(prefix):] if message.startswith(prefix) else message


def _tensors_and_md(tensors: Any, metadata: Mapping[str, Any]) -> Tuple[Dict[str, Tuple[Any, str]], Dict[str, str], str]:
    raw, md, source = _raw_tensors_and_md(tensors, metadata)
    return {k: _as_arg(k, v) for k, v in raw.items()}, md, source


def _raw_tensors_and_md(tensors: Any, metadata: Mapping[str, Any]) -> Tuple[Dict[str, Any], Dict[str, str], str]:
    """The tensors of a call (a mapping, a vector file's, or a framework object's with x=...) as the caller's arrays,
    the metadata and the source name."""
    source = "<memory>"
    if frameworks.is_framework_object(tensors):  # verify(obj, x=x, **overrides)
        metadata = dict(metadata)
        x = metadata.pop("x", None)
        if x is None:
            raise ValueError(f"{type(tensors).__name__}: pass the input as x=... (the tensor the object quantizes)")
        obj_tensors, md = frameworks.framework_outputs(tensors, **metadata)
        obj_tensors["x"] = x
        return dict(obj_tensors), md, type(tensors).__name__
    if isinstance(tensors, (str, bytes, os.PathLike)):
        source = _path(tensors)
        try:
            tensors, file_md = load_vector(source)
        except ValueError as e:
            raise _Unreadable(source, str(e)) from None
        file_md.update(_metadata(None, metadata))
        md = file_md
    else:
        md = _metadata(None, metadata)
    return dict(tensors), md, source


def verify(tensors: Any, source: str | None = None, strict_padding: bool = False, **metadata: Any) -> VerifyResult:
    """Checks a vector against the reference, as ``qtc verify`` does: ``tensors`` holds ``x`` and the outputs to
    check (VECTORS.md names), ``metadata`` the recipe keys (``recipe='nvfp4'``, ``layout='swizzled_128x4'``,
    ``profile=...``). ``tensors`` may also be the path of a vector file (its metadata, updated by ``metadata``), or a
    TransformerEngine / torchao quantized tensor object with its input as ``x=...`` (``qtc.frameworks``).
    Padding of TE-layout buffers is not compared unless ``strict_padding`` (then it must be zero).
    CUDA tensors (all on one GPU) are checked there: the CUDA kernels quantize x and a device pass compares the
    outputs; only the first mismatch's elements and block inputs reach the host (the verdict's backend is ``cuda``;
    a recipe the kernels do not run is ``skipped`` with the reason). The verdicts are the host's: bytes that differ
    with equal decoded values are ``equivalent`` (decided on the device; the two quantizations reach the host only
    then, for the message), and hybrid vectors (``recipe='hybrid'``) are checked plane by plane on the GPU."""
    if isinstance(tensors, (str, bytes, os.PathLike)):
        # The file is read and checked by the C++ side exactly as `qtc verify PATH` does (shapes NumPy cannot hold,
        # e.g. [2^62, 0], included).
        path = _path(tensors)
        try:
            return VerifyResult(**_qtc.verify_path(path, _metadata(None, metadata), source or path, bool(strict_padding)))
        except ValueError as e:  # as `qtc verify`: an unreadable file is an error verdict, not an exception
            u = _Unreadable(path, str(e))
            return VerifyResult(verdict="error", message=u.message, line=f"ERROR {u.path}: {u.message}")
    try:
        raw, md, src = _raw_tensors_and_md(tensors, metadata)
    except _Unreadable as e:
        return VerifyResult(verdict="error", message=e.message, line=f"ERROR {e.path}: {e.message}")
    device = _on_device(raw)
    if device is not None:  # on the GPU: the CUDA kernels quantize x there and the outputs are compared there
        args = {k: _cuda_arg(k, v) for k, v in raw.items()}
        return VerifyResult(**_qtc.verify_cuda(args, md, source or src, bool(strict_padding), _stream(device)))
    args = {k: _as_arg(k, v) for k, v in raw.items()}
    return VerifyResult(**_qtc.verify(args, md, source or src, bool(strict_padding)))


@dataclass
class Identity:
    """Which profiles (and MXFP8 scale rules) reproduce a vector, as ``qtc identify`` prints: ``verdict`` is OK (the
    claimed one does), OTHER (only others do), NONE (no profile does: see ``closest``) or ERROR (see ``error``)."""

    verdict: str
    claimed: str
    matches: List[str]
    claimed_mismatch: str
    closest: str
    closest_mismatch: str
    error: str
    explaining_profile: str = ""  #: NONE: the profile one of whose rules, changed, reproduces the vector
    explaining_rule: str = ""     #: ... that rule (profile.hpp rule_toggles), e.g. "nvfp4.zero_and_tiny_block_scale"
    explaining_change: str = ""   #: ... and the change, e.g. "flipped"


def identify(tensors: Any, source: str | None = None, **metadata: Any) -> Identity:
    """Attributes a vector (tensors + metadata, or a path) to the profiles that reproduce it bit for bit."""
    try:
        args, md, src = _tensors_and_md(tensors, metadata)
    except _Unreadable as e:
        return Identity(verdict="ERROR", claimed="", matches=[], claimed_mismatch="", closest="", closest_mismatch="",
                        error=e.message)
    return Identity(**_qtc.identify(args, md, source or src))


def check_checkpoint(path: str | os.PathLike, reference: str | os.PathLike | None = None,
                     profile: str | None = None) -> Dict[str, Any]:
    """A model checkpoint (a .safetensors file, or a folder with config.json and model.safetensors or the shards of
    model.safetensors.index.json) checked per quantized tensor in its convention (ModelOpt NVFP4 / FP8,
    compressed-tensors NVFP4 / MXFP4 / FP8 / FP8-block, DeepSeek-V3 FP8), as ``qtc verify`` on a checkpoint does.
    ``reference``: the high-precision weights of the same model; ``profile``: the qtc profile whose bits they must
    be. Returns ``exit_code`` (0 consistent, 1 a tensor has a problem, 2 unreadable), ``errors``, ``tensors`` (name,
    convention, format, shape, problems, notes), ``detected_by`` (the rule that took the path for a checkpoint, or "")
    and ``text`` (the report). Never raises for a bad checkpoint."""
    return dict(_qtc.check_checkpoint(os.fspath(path), os.fspath(reference) if reference else "", profile or ""))


def check_stochastic_rounding(tensors: Any, alpha: float = 1e-6, random_bits: int = 8, **metadata: Any) -> Dict[str, Any]:
    """Judges an NVFP4 stochastic-rounding output (tensors + metadata, or a path) by admissibility: scales and amax
    exact, every code a neighbour of the scaled value, unbiased (Hoeffding test per probability bin, false-alarm rate
    at most ``alpha`` for a correct SR; ``random_bits``: the implementation's random resolution). Returns
    ``admissible``, ``message``, ``details``, counts."""
    args, md, _ = _tensors_and_md(tensors, metadata)
    return dict(_qtc.check_stochastic_rounding(args, md, float(alpha), int(random_bits)))


def load_vector(path: str | os.PathLike) -> Tuple[Dict[str, np.ndarray], Dict[str, str]]:
    """Reads a safetensors vector: (tensors as NumPy arrays, metadata). BF16 tensors come as ml_dtypes.bfloat16
    when ml_dtypes is installed (else as uint16 bits); FP8 tensors as uint8 bytes."""
    tensors, md = _qtc.load_vector(_path(path))
    return {k: _from_out(v) for k, v in tensors.items()}, dict(md)


def save_vector(path: str | os.PathLike, tensors: Mapping[str, Any], metadata: Mapping[str, Any]) -> None:
    """Writes tensors and metadata (values converted to strings) as a safetensors vector file."""
    _qtc.save_vector(_path(path), {k: _as_arg(k, v) for k, v in tensors.items()}, _metadata(None, metadata))


from . import testing  # noqa: E402  (qtc.testing.assert_conforms)
