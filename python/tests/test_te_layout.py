"""TransformerEngine objects built from TE's real class layouts (issue 23): data/te_class_layout.json holds, as read
from TE's source by scripts/te_class_layout.py (TE 2.20, transformer_engine/pytorch/tensor/), the fields each storage
class's __new__ sets and the attributes each quantizer's __init__ sets. Each test makes an object with exactly those
attributes (a class of TE's name), filled with qtc's own outputs in TE's layout, and checks that qtc infers recipe,
profile and layout from it, that it conforms, and that qtc.frameworks reads no attribute the TE class lacks (a
misspelt or renamed field read with a default would otherwise pass unnoticed). TE itself is not needed: its PyTorch
extension needs a long build."""
import enum
import json
import pathlib

import numpy as np
import pytest

import qtc
from qtc import frameworks
from qtc.testing import ConformanceError, assert_conforms

torch = pytest.importorskip("torch", reason="torch is not installed (optional)")

LAYOUT = json.loads((pathlib.Path(__file__).parent / "data" / "te_class_layout.json").read_text())

# The attributes qtc.frameworks probes to tell the kinds apart (a probe of another kind's field may miss).
KIND_PROBES = {"_rowwise_data", "_amax_rowwise", "_is_2D_scaled", "_with_gemm_swizzled_scales", "_data", "_scale_inv",
               "_fp8_dtype", "qdata", "scale", "elem_dtype", "block_size", "per_tensor_scale"}


class DType(enum.IntEnum):  # transformer_engine_torch.DType: frameworks reads the names
    kFloat8E4M3 = 7
    kFloat8E5M2 = 8
    kFloat4E2M1 = 10


def te_class(name, attributes, misses):
    """A class named as TE's whose instances hold exactly `attributes`; a read of any other attribute is recorded."""

    def __getattribute__(self, attr):
        try:
            return object.__getattribute__(self, attr)
        except AttributeError:
            if not attr.startswith("__"):
                misses.add(attr)
            raise

    cls = type(name, (), {"__getattribute__": __getattribute__, "__module__": "transformer_engine.pytorch.tensor"})

    def make(values):
        assert set(values) == set(attributes), (
            f"{name}: TE {LAYOUT['te_version']} sets {sorted(attributes)}; the test fills {sorted(values)} "
            "(TE's layout changed: update qtc.frameworks and this test)")
        obj = object.__new__(cls)
        for k, v in values.items():
            object.__setattr__(obj, k, v)
        return obj

    return make


def storage(name, values, misses, tensor_class=None):
    return te_class(tensor_class or name, LAYOUT["storage"][name]["new_sets"], misses)(values)


def quantizer(name, misses, **options):
    attrs = LAYOUT["quantizers"][name]["attributes"]
    defaults = {"dtype": DType.kFloat8E4M3, "with_rht": False, "with_post_rht_amax": False,
                "with_amax_reduction": False, "amax_reduction_group": None, "with_2d_quantization": False,
                "stochastic_rounding": False, "row_scaled_nvfp4": False, "nvfp4_use_4over6": False,
                "nvfp4_e4m3_max": 448, "nvfp4_4over6_err_mode": "MAE", "rht_matrix_random_sign_mask_t": 0,
                "block_len": 128, "force_pow_2_scales": False, "amax_epsilon": 0.0, "block_scaling_dim": 1,
                "scale": None, "amax": None}
    defaults.update(options)
    return te_class(name, attrs, misses)({k: defaults[k] for k in attrs})


def tq(x, recipe, **kw):
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in qtc.quantize(x, recipe, **kw).items()}


def make_x(m, k, seed=0):
    return np.random.default_rng(seed).standard_normal((m, k)).astype(np.float32) * 3


def test_layout_file_is_te_2_20():
    assert LAYOUT["te_version"].startswith("2.20"), LAYOUT["te_version"]
    for t, info in LAYOUT["tensors"].items():  # the torch.Tensor classes carry their storage mixin's fields
        assert info["bases"][0] == t + "Storage", (t, info)


@pytest.mark.parametrize("cls", ["NVFP4TensorStorage", "NVFP4Tensor"])
@pytest.mark.parametrize("swizzled", [False, True])
@pytest.mark.parametrize("tile", ["1x16", "16x16"])
def test_nvfp4(cls, swizzled, tile):
    misses = set()
    x = make_x(160, 96, 1)  # ragged against TE's 128-row scale padding
    q = tq(x, "nvfp4", layout="te", swizzled=swizzled, tile=tile)
    quant = quantizer("NVFP4Quantizer", misses, dtype=DType.kFloat4E2M1, with_2d_quantization=tile == "16x16")
    obj = storage("NVFP4TensorStorage", {
        "_rowwise_data": q["rowwise_data"], "_columnwise_data": q["columnwise_data"],
        "_rowwise_scale_inv": q["rowwise_scale_inv"], "_columnwise_scale_inv": q["columnwise_scale_inv"],
        "_amax_rowwise": q["amax_rowwise"], "_amax_columnwise": q["amax_columnwise"], "_fp4_dtype": DType.kFloat4E2M1,
        "_quantizer": quant, "_with_gemm_swizzled_scales": swizzled, "_row_scaled_nvfp4": False,
        "_nvfp4_use_4over6": False, "_nvfp4_e4m3_max": 448, "_dtype": torch.float32}, misses,
        tensor_class=cls)
    md = frameworks.framework_outputs(obj)[1]
    assert (md["recipe"], md["profile"], md["layout"], md["tile"]) == (
        "nvfp4", "te", "swizzled_128x4" if swizzled else "te", tile) and "swizzled" not in md
    assert assert_conforms(torch.from_numpy(x), obj).passed
    assert misses <= KIND_PROBES, f"qtc.frameworks read attributes TE's classes do not have: {sorted(misses - KIND_PROBES)}"
    q["rowwise_data"][3, 2] ^= 0x01
    with pytest.raises(ConformanceError) as e:
        assert_conforms(x, obj, explain=False)
    assert e.value.tensor == "rowwise_data" and e.value.index == (3, 4)


@pytest.mark.parametrize("swizzled", [False, True])
def test_mxfp8(swizzled):
    misses = set()
    x = make_x(150, 72, 2)
    q = tq(x, "mxfp8", layout="te", swizzled=swizzled, fp8_dtype="e5m2")
    obj = storage("MXFP8TensorStorage", {
        "_rowwise_data": q["rowwise_data"], "_columnwise_data": q["columnwise_data"],
        "_rowwise_scale_inv": q["rowwise_scale_inv"], "_columnwise_scale_inv": q["columnwise_scale_inv"],
        "_quantizer": quantizer("MXFP8Quantizer", misses, dtype=DType.kFloat8E5M2), "_fp8_dtype": DType.kFloat8E5M2,
        "_with_gemm_swizzled_scales": swizzled, "_dtype": torch.bfloat16}, misses)
    md = frameworks.framework_outputs(obj)[1]
    assert (md["recipe"], md["fp8_dtype"], md["scale_rule"], md["layout"]) == ("mxfp8", "e5m2", "rceil",
                                                                              "swizzled_128x4" if swizzled else "te")
    assert "swizzled" not in md
    assert assert_conforms(x, obj).passed
    assert misses <= KIND_PROBES, sorted(misses - KIND_PROBES)


@pytest.mark.parametrize("is_2d", [False, True])
def test_float8_blockwise(is_2d):
    misses = set()
    x = make_x(130, 260, 3)
    q = tq(x, "fp8_block", layout="te", tile="128x128" if is_2d else "1x128", pow2_scales=True)
    quant = quantizer("Float8BlockQuantizer", misses, force_pow_2_scales=True, block_scaling_dim=2 if is_2d else 1)
    obj = storage("Float8BlockwiseQTensorStorage", {
        "_rowwise_data": q["rowwise_data"], "_columnwise_data": q["columnwise_data"],
        "_rowwise_scale_inv": q["rowwise_scale_inv"], "_columnwise_scale_inv": q["columnwise_scale_inv"],
        "_quantizer": quant, "_fp8_dtype": DType.kFloat8E4M3, "_is_2D_scaled": is_2d, "_dtype": torch.float32}, misses)
    assert frameworks.framework_outputs(obj)[1]["tile"] == ("128x128" if is_2d else "1x128")
    assert assert_conforms(x, obj).passed
    assert misses <= KIND_PROBES, sorted(misses - KIND_PROBES)


def test_float8_tensor_current_and_delayed_scaling():
    misses = set()
    x = make_x(48, 80, 4)
    q = tq(x, "fp8_tensor", layout="te")
    values = {"_data": q["rowwise_data"], "_quantizer": quantizer("Float8CurrentScalingQuantizer", misses),
              "_fp8_dtype": DType.kFloat8E4M3, "_scale_inv": q["scale_inv"], "_transpose": q["columnwise_data"],
              "_transpose_invalid": False, "_dtype": torch.float32}
    assert assert_conforms(x, storage("Float8TensorStorage", values, misses)).passed
    assert misses <= KIND_PROBES, sorted(misses - KIND_PROBES)
    values.update(_transpose=None, _transpose_invalid=True)
    obj = storage("Float8TensorStorage", values, misses)
    assert "columnwise_data" not in frameworks.framework_outputs(obj)[0]
    assert assert_conforms(x, obj).passed
    values["_quantizer"] = quantizer("Float8Quantizer", misses)
    with pytest.raises(ValueError, match="delayed-scaling Float8Quantizer"):
        assert_conforms(x, storage("Float8TensorStorage", values, misses))
