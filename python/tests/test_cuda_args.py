"""The host side of CUDA tensors (issue 23 item 3), in CI without a GPU: which arrays take the device path, the
refusals (a CPU-only module, tensors on several devices, another device type) and the dtype / N-D handling that both
devices share (the float8 and float4 views and TE's (..., K) -> M x K flattening, without a copy)."""
import ctypes

import numpy as np
import pytest

import qtc
from qtc.testing import assert_conforms


class FakeDeviceArray:
    """An array that says, through DLPack, that it lives on a device (kDLCUDA = 2 by default): enough for the routing,
    which decides before any data is read."""

    def __init__(self, kind=2, index=0, shape=(32, 64)):
        self.kind, self.index, self.shape = kind, index, shape

    def __dlpack_device__(self):
        return (self.kind, self.index)

    def __dlpack__(self, *a, **k):
        raise AssertionError("the data of a refused array was read")


def test_cuda_built_tells_which_functions_exist():
    assert isinstance(qtc._qtc.cuda_built, bool)
    assert hasattr(qtc._qtc, "verify_cuda") == qtc._qtc.cuda_built == hasattr(qtc._qtc, "quantize_cuda")
    if qtc._qtc.cuda_built:
        assert qtc._qtc.cuda_device_count() >= 0


def test_devices_of_arrays():
    assert qtc._device(np.zeros(3)) == "cpu"
    assert qtc._device(FakeDeviceArray()) == "cuda:0"
    assert qtc._device(FakeDeviceArray(index=3)) == "cuda:3"
    assert qtc._device(FakeDeviceArray(kind=1)) == "cpu"
    assert qtc._device(FakeDeviceArray(kind=8)) == "DLPack device type 8:0"
    assert qtc._on_device({"x": np.zeros((2, 2)), "rowwise_data": np.zeros(2, np.uint8)}) is None


def test_a_cpu_only_module_refuses_cuda_tensors_naming_the_reason(monkeypatch):
    monkeypatch.setattr(qtc._qtc, "cuda_built", False)
    x = FakeDeviceArray()
    for call in (lambda: qtc.quantize(x, "nvfp4"),
                 lambda: qtc.verify({"x": x, "rowwise_data": FakeDeviceArray()}, recipe="nvfp4"),
                 lambda: assert_conforms(x, "mxfp8", {"rowwise_data": FakeDeviceArray()})):
        with pytest.raises(ValueError) as e:
            call()
        msg = str(e.value)
        assert "is on cuda:0" in msg and "built without CUDA" in msg and ".cpu()" in msg, msg


def test_tensors_on_several_devices_are_refused():
    x = np.ones((32, 64), np.float32)
    with pytest.raises(ValueError, match="several devices.*'rowwise_data' on cuda:0.*'x' on cpu"):
        qtc.verify({"x": x, "rowwise_data": FakeDeviceArray()}, recipe="mxfp8", columnwise=False)
    with pytest.raises(ValueError, match="several devices"):
        qtc.verify({"x": FakeDeviceArray(index=0), "rowwise_data": FakeDeviceArray(index=1)}, recipe="mxfp8")
    with pytest.raises(ValueError, match="is on DLPack device type 8:0; qtc takes CPU and CUDA tensors"):
        qtc.quantize(FakeDeviceArray(kind=8), "mxfp8")


def test_shared_views_float8_float4_and_nd_flattening_without_a_copy():
    torch = pytest.importorskip("torch", reason="torch is not installed (optional)")
    x = torch.randn(2, 3, 32, 64, dtype=torch.bfloat16)
    t, st = qtc._torch_view("x", x)
    assert st == "BF16" and tuple(t.shape) == (192, 64) and t.dtype == torch.int16 and t.data_ptr() == x.data_ptr()
    for dt, name in (("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2"), ("float8_e8m0fnu", "F8_E8M0")):
        if hasattr(torch, dt):
            a = torch.zeros(4, 8, 16, dtype=torch.uint8).view(getattr(torch, dt))
            v, s = qtc._torch_view("rowwise_data", a)
            assert s == name and tuple(v.shape) == (32, 16) and v.dtype == torch.uint8 and v.data_ptr() == a.data_ptr()
    if hasattr(torch, "float4_e2m1fn_x2"):
        a = torch.zeros(2, 16, 32, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
        v, s = qtc._torch_view("rowwise_data", a)
        assert s == "U8" and tuple(v.shape) == (32, 32) and v.dtype == torch.uint8 and v.data_ptr() == a.data_ptr()
    nc = torch.randn(64, 32).t()  # not contiguous: one contiguous copy, on the tensor's own device
    v, s = qtc._torch_view("x", nc)
    assert s == "F32" and v.is_contiguous() and torch.equal(v, nc)
    with pytest.raises(ValueError, match="torch dtype torch.complex64"):
        qtc._torch_view("x", torch.zeros(2, 2, dtype=torch.complex64))


def test_nd_input_and_float_dtypes_give_the_2d_results():
    torch = pytest.importorskip("torch", reason="torch is not installed (optional)")
    x = torch.randn(4, 16, 128, dtype=torch.bfloat16)
    q = qtc.quantize(x, "nvfp4", columnwise=False)
    assert q["rowwise_data"].shape == (64, 64)
    outs = {"rowwise_data": torch.from_numpy(q["rowwise_data"]).view(torch.float4_e2m1fn_x2).reshape(4, 16, 64),
            "rowwise_scale_inv": torch.from_numpy(q["rowwise_scale_inv"]).view(torch.float8_e4m3fn),
            "amax_rowwise": torch.from_numpy(q["amax_rowwise"])}
    assert assert_conforms(x, "nvfp4", outs, columnwise=False).passed


# --- verify_cuda's argument checks without a GPU: DLPack descriptors of CUDA arrays whose data is never read -----------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class CudaDescriptor:
    """A DLPack producer (unversioned capsule) of a C-contiguous array on cuda:`device` with a dangling data pointer:
    the module reads its shape, element size and device, never its data, before any check fails."""

    def __init__(self, shape, itemsize, device=0):
        self._shape = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        self._mt = _DLManagedTensor()
        t = self._mt.dl_tensor
        t.data, t.device, t.ndim = 0x1000, _DLDevice(2, device), len(shape)
        t.dtype = _DLDataType(1, 8 * itemsize, 1)  # unsigned integers of the element size: what _torch_view passes
        t.shape, t.strides, t.byte_offset = self._shape, None, 0
        self.device = device

    def __dlpack_device__(self):
        return (2, self.device)

    def __dlpack__(self, *args, **kwargs):
        return _capsule_new(ctypes.addressof(self._mt), b"dltensor", None)


_SIZES = {"F32": 4, "BF16": 2, "F16": 2, "U8": 1, "I32": 4}
_NP = {"F32": np.float32, "F16": np.float16, "U8": np.uint8, "I32": np.int32}


def _pair(shape, st, device=0):
    return CudaDescriptor(shape, _SIZES[st], device), st


def test_verify_cuda_refuses_bad_arguments_before_any_cuda_call_as_the_host_path_does():
    if not qtc._qtc.cuda_built:
        pytest.skip("a CPU-only module (QTC_PY_CUDA off): it has no verify_cuda")
    M, K = 64, 128
    good = {"x": ((M, K), "F32"), "rowwise_data": ((M, K // 2), "U8"), "rowwise_scale_inv": ((M, K // 16), "U8"),
            "amax_rowwise": ((1,), "F32")}
    nv = {"recipe": "nvfp4", "columnwise": False}
    cases = [(good, {"recipe": "nvfp5"}), ({k: v for k, v in good.items() if k != "x"}, nv),
             ({**good, "x": ((M * K,), "F32")}, nv), ({**good, "x": ((M, K), "I32")}, nv),
             ({**good, "foo": ((1,), "F32")}, nv), ({**good, "rowwise_data": ((32, K // 2), "U8")}, nv),
             ({**good, "rowwise_data": ((M, K // 2), "F32")}, nv), (good, {**nv, "layout": "deepgemm_packed_ue8m0"}),
             ({"x": ((M, K), "F32")}, nv), ({**good, "x": ((30, K), "F32")}, nv)]
    for spec, params in cases:
        md = qtc._metadata(None, params)
        on_dev = qtc.VerifyResult(**qtc._qtc.verify_cuda({k: _pair(*v) for k, v in spec.items()}, md, "<memory>", False, 0))
        host = {k: np.zeros(shape, _NP[st]) for k, (shape, st) in spec.items()}
        on_cpu = qtc.verify(host, **params)
        assert on_dev.verdict == on_cpu.verdict == "error", (on_dev.line, on_cpu.line)
        assert on_dev.message == on_cpu.message and "[cuda]" in on_dev.line, (on_dev.line, on_cpu.line)
    two = {k: _pair(*v, device=1 if k == "x" else 0) for k, v in good.items()}
    r = qtc.VerifyResult(**qtc._qtc.verify_cuda(two, qtc._metadata(None, nv), "<memory>", False, 0))
    assert r.verdict == "error" and "pass every tensor on one device" in r.message, r.line
    # recipe=hybrid (verified plane by plane on the device): its argument errors too, on the host, as the CPU path words them.
    hyb = {"recipe": "hybrid", "rowwise": {"recipe": "mxfp8"}, "columnwise": {"recipe": "nvfp4"}}
    hgood = {"x": ((M, K), "F32"), "rowwise_data": ((M, K), "U8"), "rowwise_scale_inv": ((M, K // 32), "U8")}
    hcases = [({**hgood, "foo": ((1,), "F32")}, hyb), ({k: v for k, v in hgood.items() if k != "x"}, hyb),
              (hgood, {**hyb, "columnwise": {"recipe": "nvfp5"}}), ({**hgood, "columnwise_source": ((M, K), "F32")}, hyb),
              ({"x": ((M, K), "F32")}, hyb), ({**hgood, "x": ((M * K,), "F32")}, hyb),
              ({**hgood, "x": ((M, K), "I32")}, hyb)]
    for spec, params in hcases:
        md = qtc._metadata(None, params)
        on_dev = qtc.VerifyResult(**qtc._qtc.verify_cuda({k: _pair(*v) for k, v in spec.items()}, md, "<memory>", False, 0))
        on_cpu = qtc.verify({k: np.zeros(shape, _NP[st]) for k, (shape, st) in spec.items()}, **params)
        assert on_dev.verdict == on_cpu.verdict == "error", (on_dev.line, on_cpu.line)
        assert on_dev.message == on_cpu.message and "[cuda]" in on_dev.line, (on_dev.line, on_cpu.line)
    if qtc._qtc.cuda_device_count() == 0:  # valid arguments reach the device: no device here, an error verdict, no crash
        r = qtc.VerifyResult(**qtc._qtc.verify_cuda({k: _pair(*v) for k, v in good.items()}, qtc._metadata(None, nv),
                                                    "<memory>", False, 0))
        assert r.verdict == "error" and "which this process cannot use" in r.message, r.line
        r = qtc.VerifyResult(**qtc._qtc.verify_cuda({k: _pair(*v) for k, v in hgood.items()}, qtc._metadata(None, hyb),
                                                    "<memory>", False, 0))
        assert r.verdict == "error" and r.message.startswith("rowwise plane (") and "which this process cannot use" in r.message, r.line


def test_quantize_cuda_refuses_bad_arguments_as_the_host_path_does():
    if not qtc._qtc.cuda_built:
        pytest.skip("a CPU-only module (QTC_PY_CUDA off): it has no quantize_cuda")

    def alloc(*a):
        raise AssertionError("nothing is allocated for refused arguments")

    hyb = {"rowwise": {"recipe": "mxfp8"}, "columnwise": {"recipe": "nvfp4"}, "columnwise_source": "rowwise_dequantized"}
    bad_plane = {**hyb, "columnwise": {"recipe": "nvfp5"}}
    for shape, st, recipe, params in (((64 * 128,), "F32", "nvfp4", {}), ((64, 128), "I32", "nvfp4", {}),
                                      ((64, 128), "F32", "nvfp5", {}), ((30, 128), "F32", "nvfp4", {}),
                                      ((64 * 128,), "F32", "hybrid", hyb), ((64, 128), "I32", "hybrid", hyb),
                                      ((64, 128), "F32", "hybrid", bad_plane), ((30, 128), "F32", "hybrid", hyb),
                                      ((64, 128), "F32", "hybrid", {**hyb, "layout": "deepgemm_packed_ue8m0"})):
        with pytest.raises(ValueError) as on_dev:
            qtc._qtc.quantize_cuda(_pair(shape, st), qtc._metadata(recipe, params), 0, alloc)
        with pytest.raises(ValueError) as on_cpu:
            qtc.quantize(np.zeros(shape, _NP[st]), recipe, **params)
        assert str(on_dev.value) == str(on_cpu.value)
