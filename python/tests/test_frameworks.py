"""Framework objects taken as they are (qtc.frameworks): torchao 0.18's real NVFP4Tensor / MXTensor (skipped without
torchao), and objects carrying TransformerEngine's attribute layout (transformer_engine/pytorch/tensor/storage/*.py:
the private buffer names, the swizzle flag, the quantizer's options), since TE's PyTorch extension needs a long
build; plus N-D inputs, torch's float4_e2m1fn_x2 and float8 dtypes, and BF16 without ml_dtypes."""
import enum

import numpy as np
import pytest

import qtc
from qtc import frameworks
from qtc.testing import ConformanceError, assert_conforms

torch = pytest.importorskip("torch", reason="torch is not installed (optional)")


class DType(enum.IntEnum):  # transformer_engine.pytorch.constants.DType: the names qtc reads
    kFloat8E4M3 = 7
    kFloat8E5M2 = 8
    kFloat4E2M1 = 10


class NVFP4Quantizer:  # the options TE's NVFP4Quantizer holds (nvfp4_tensor.py)
    def __init__(self, with_rht=False, with_2d_quantization=False, stochastic_rounding=False):
        self.with_rht = with_rht
        self.with_2d_quantization = with_2d_quantization
        self.stochastic_rounding = stochastic_rounding
        self.nvfp4_4over6_err_mode = "MAE"


class NVFP4TensorStorage:  # TE's storage mixin: buffers and flags, no torch.Tensor subclass needed
    def __init__(self, q, swizzled, quantizer=None):
        self._rowwise_data = q.get("rowwise_data")
        self._rowwise_scale_inv = q.get("rowwise_scale_inv")
        self._columnwise_data = q.get("columnwise_data")
        self._columnwise_scale_inv = q.get("columnwise_scale_inv")
        self._amax_rowwise = q.get("amax_rowwise")
        self._amax_columnwise = q.get("amax_columnwise")
        self._fp4_dtype = DType.kFloat4E2M1
        self._quantizer = quantizer
        self._with_gemm_swizzled_scales = swizzled
        self._row_scaled_nvfp4 = False
        self._nvfp4_use_4over6 = False
        self._nvfp4_e4m3_max = 448


class MXFP8Tensor:
    def __init__(self, q, swizzled, fp8=DType.kFloat8E4M3):
        self._rowwise_data = q.get("rowwise_data")
        self._rowwise_scale_inv = q.get("rowwise_scale_inv")
        self._columnwise_data = q.get("columnwise_data")
        self._columnwise_scale_inv = q.get("columnwise_scale_inv")
        self._quantizer = None
        self._fp8_dtype = fp8
        self._with_gemm_swizzled_scales = swizzled


class Float8BlockQuantizer:
    def __init__(self, pow2):
        self.force_pow_2_scales = pow2
        self.amax_epsilon = 0.0
        self.block_scaling_dim = 1


class Float8BlockwiseQTensor:
    def __init__(self, q, is_2d, quantizer):
        self._rowwise_data = q.get("rowwise_data")
        self._rowwise_scale_inv = q.get("rowwise_scale_inv")
        self._columnwise_data = q.get("columnwise_data")
        self._columnwise_scale_inv = q.get("columnwise_scale_inv")
        self._fp8_dtype = DType.kFloat8E4M3
        self._quantizer = quantizer
        self._is_2D_scaled = is_2d


class Float8CurrentScalingQuantizer:
    force_pow_2_scales = False
    amax_epsilon = 0.0


class Float8Quantizer:  # delayed scaling
    pass


class Float8Tensor:
    def __init__(self, q, quantizer, transpose=True):
        self._data = q["rowwise_data"]
        self._transpose = q.get("columnwise_data") if transpose else None
        self._transpose_invalid = not transpose
        self._scale_inv = q["scale_inv"]
        self._fp8_dtype = DType.kFloat8E5M2
        self._quantizer = quantizer


def tq(x, recipe, **kw):
    """qtc's own outputs as torch tensors, standing in for what a TE kernel wrote."""
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in qtc.quantize(x, recipe, **kw).items()}


def make_x(m, k, seed=0):
    return np.random.default_rng(seed).standard_normal((m, k)).astype(np.float32) * 3


@pytest.mark.parametrize("swizzled", [False, True])
def test_te_nvfp4_storage_is_read_with_its_swizzle_flag(swizzled):
    x = make_x(160, 96)  # 160 rows: padded to 256 in TE's scale buffers
    obj = NVFP4TensorStorage(tq(x, "nvfp4", layout="swizzled_128x4" if swizzled else "te"), swizzled, NVFP4Quantizer())
    tensors, md = frameworks.framework_outputs(obj)
    assert md["recipe"] == "nvfp4" and md["layout"] == ("swizzled_128x4" if swizzled else "te") and "swizzled" not in md
    assert set(tensors) == {"rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv",
                            "amax_rowwise", "amax_columnwise"}
    assert assert_conforms(torch.from_numpy(x), obj).passed
    assert qtc.verify(obj, x=x).passed
    obj._with_gemm_swizzled_scales = not swizzled  # the flag decides how the scales are read: now wrong
    with pytest.raises(ConformanceError) as e:
        assert_conforms(x, obj, explain=False)
    assert e.value.tensor in ("rowwise_scale_inv", "columnwise_scale_inv")


def test_te_nvfp4_flipped_code_gives_structured_fields():
    x = make_x(64, 64, 1)
    q = tq(x, "nvfp4", layout="te")
    q["rowwise_data"][5, 7] ^= 0x10  # element [5, 15]: the high nibble of byte 7
    obj = NVFP4TensorStorage(q, False, NVFP4Quantizer())
    with pytest.raises(ConformanceError) as e:
        assert_conforms(x, obj)
    err = e.value
    assert str(err).startswith("FAIL NVFP4TensorStorage (nvfp4) [cpu]: rowwise_data: 1 of 4096 elements differ; "
                               "first at [5, 15]")
    assert (err.tensor, err.index, err.count, err.total) == ("rowwise_data", (5, 15), 1, 4096)
    assert err.percentage == pytest.approx(100 / 4096)
    assert err.expected.startswith("0x") and err.got.startswith("0x") and err.expected != err.got
    assert err.block.startswith("x[5, 0:16] = {")
    assert isinstance(err, AssertionError) and not err.result.passed


def test_te_nvfp4_stochastic_rounding_is_refused_with_the_reason():
    x = make_x(32, 32)
    obj = NVFP4TensorStorage(tq(x, "nvfp4", layout="te"), False, NVFP4Quantizer(stochastic_rounding=True))
    with pytest.raises(ValueError, match="stochastic rounding"):
        assert_conforms(x, obj)


@pytest.mark.parametrize("swizzled", [False, True])
def test_te_mxfp8_with_3d_input_flattened_as_te_does(swizzled):
    x3 = make_x(3 * 50, 72).reshape(3, 50, 72)  # (..., K): TE flattens to M = 150
    q = tq(x3.reshape(150, 72), "mxfp8", layout="swizzled_128x4" if swizzled else "te")
    q["rowwise_data"] = q["rowwise_data"].reshape(3, 50, 72)  # TE keeps the input's shape for data
    obj = MXFP8Tensor(q, swizzled)
    assert frameworks.framework_outputs(obj)[1]["scale_rule"] == "rceil"
    assert assert_conforms(torch.from_numpy(x3), obj).passed
    obj._fp8_dtype = DType.kFloat8E5M2
    with pytest.raises(ConformanceError):
        assert_conforms(x3, obj, explain=False)


@pytest.mark.parametrize("is_2d,pow2", [(False, True), (True, False)])
def test_te_float8_blockwise(is_2d, pow2):
    x = make_x(130, 260, 2)  # ragged against 128
    kw = {"tile": "128x128" if is_2d else "1x128", "pow2_scales": pow2}
    obj = Float8BlockwiseQTensor(tq(x, "fp8_block", layout="te", **kw), is_2d, Float8BlockQuantizer(pow2))
    assert assert_conforms(x, obj).passed
    obj._quantizer = Float8BlockQuantizer(not pow2)
    with pytest.raises(ConformanceError):
        assert_conforms(x, obj, explain=False)


def test_te_float8_tensor_with_and_without_its_transpose():
    x = make_x(48, 80, 3)
    q = tq(x, "fp8_tensor", layout="te", fp8_dtype="e5m2")
    assert assert_conforms(x, Float8Tensor(q, Float8CurrentScalingQuantizer())).passed
    obj = Float8Tensor(q, Float8CurrentScalingQuantizer(), transpose=False)
    assert "columnwise_data" not in frameworks.framework_outputs(obj)[0]
    assert assert_conforms(x, obj).passed
    with pytest.raises(ValueError, match="delayed-scaling Float8Quantizer"):
        assert_conforms(x, Float8Tensor(q, Float8Quantizer()))


def test_not_a_framework_object_is_named():
    class Thing:
        pass

    with pytest.raises(ValueError, match="is not a quantized tensor qtc can read"):
        frameworks.framework_outputs(Thing())
    assert not frameworks.is_framework_object({"rowwise_data": 1})


# --- torchao 0.18's own objects -----------------------------------------------------------------------------------

def _torchao_mx():
    pytest.importorskip("torchao", reason="torchao is not installed (optional)")
    from torchao.prototype.mx_formats import mx_tensor, nvfp4_tensor

    return mx_tensor, nvfp4_tensor


@pytest.mark.parametrize("swizzled", [False, True])
@pytest.mark.parametrize("with_pts", [False, True])
def test_torchao_nvfp4_tensor_as_it_is(swizzled, with_pts):
    _, nv = _torchao_mx()
    x = torch.from_numpy(make_x(144, 96, 4))
    pts = None
    if with_pts:
        from torchao.prototype.mx_formats.nvfp4_tensor import per_tensor_amax_to_scale

        pts = per_tensor_amax_to_scale(torch.max(torch.abs(x)))
    obj = nv.NVFP4Tensor.to_nvfp4(x, per_tensor_scale=pts, is_swizzled_scales=swizzled)
    tensors, md = frameworks.framework_outputs(obj)
    assert md["profile"] == "torchao" and md["per_tensor_scale"] == ("1" if with_pts else "0")
    assert assert_conforms(x, obj).passed
    if with_pts:  # a per-tensor scale that is not torchao's amax / 2688 is named
        obj.per_tensor_scale = pts * 2
        with pytest.raises(ConformanceError, match="per_tensor_scale: expected amax"):
            assert_conforms(x, obj, explain=False)


@pytest.mark.parametrize("swizzled", [False, True])
def test_torchao_mx_tensor_as_it_is(swizzled):
    mx, _ = _torchao_mx()
    from torchao.prototype.mx_formats.config import ScaleCalculationMode

    x = torch.from_numpy(make_x(128, 96, 5)).to(torch.bfloat16)
    obj = mx.MXTensor.to_mx(x, torch.float8_e4m3fn, 32, is_swizzled_scales=swizzled)  # FLOOR: torchao's default
    assert assert_conforms(x, obj).passed
    rc = mx.MXTensor.to_mx(x, torch.float8_e4m3fn, 32, scaling_mode=ScaleCalculationMode.RCEIL,
                           is_swizzled_scales=swizzled)
    assert assert_conforms(x, rc, scale_rule="rceil").passed
    with pytest.raises(ConformanceError) as e:  # the object does not say RCEIL: identify names the rule that does
        assert_conforms(x, rc)
    assert e.value.rule is not None and "rceil" in e.value.rule


# --- dtypes and shapes ------------------------------------------------------------------------------------------

def test_float4_e2m1fn_x2_and_float8_dtypes_are_accepted():
    x = make_x(32, 64, 6)
    q = qtc.quantize(x, "nvfp4")
    t = {k: torch.from_numpy(v) for k, v in q.items()}
    if hasattr(torch, "float4_e2m1fn_x2"):
        t["rowwise_data"] = t["rowwise_data"].view(torch.float4_e2m1fn_x2)
        t["columnwise_data"] = t["columnwise_data"].view(torch.float4_e2m1fn_x2)
    t["rowwise_scale_inv"] = t["rowwise_scale_inv"].view(torch.float8_e4m3fn)
    assert qtc.verify({"x": x, **t}, recipe="nvfp4").passed
    m = {k: torch.from_numpy(v) for k, v in qtc.quantize(x, "mxfp8").items()}
    m["rowwise_data"] = m["rowwise_data"].view(torch.float8_e4m3fn)
    m["rowwise_scale_inv"] = m["rowwise_scale_inv"].view(torch.float8_e8m0fnu)
    assert qtc.verify({"x": x, **m}, recipe="mxfp8").passed


def test_nd_inputs_are_flattened_to_m_by_k():
    x3 = make_x(4 * 16, 48, 7).reshape(4, 16, 48)
    a = qtc.quantize(x3, "fp8_block")
    b = qtc.quantize(x3.reshape(64, 48), "fp8_block")
    for k in b:
        np.testing.assert_array_equal(a[k], b[k])
    assert qtc.verify({"x": torch.from_numpy(x3), **a}, recipe="fp8_block").passed


def test_bf16_round_trip_without_ml_dtypes(monkeypatch, tmp_path):
    x = torch.from_numpy(make_x(32, 64, 8)).to(torch.bfloat16)
    path = tmp_path / "v.safetensors"
    qtc.save_vector(path, {"x": x, **qtc.quantize(x, "mxfp8")}, {"recipe": "mxfp8"})
    monkeypatch.setattr(qtc, "_ml", None)
    tensors, md = qtc.load_vector(path)
    assert isinstance(tensors["x"], qtc.BF16Bits) and tensors["x"].dtype == np.uint16
    assert qtc.verify(tensors, **md).passed  # BF16 stays BF16 through the round trip
    np.testing.assert_array_equal(tensors["x"].to_float32(), x.float().numpy())
    plain = np.asarray(tensors["x"]).view(np.uint16).copy()
    assert not qtc.verify({**tensors, "x": plain}, **md).passed  # a plain uint16 array is U16, as before
