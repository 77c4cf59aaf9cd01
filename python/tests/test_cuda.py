"""CUDA tensors in quantize / verify / assert_conforms (run on the H200; skipped here without a GPU, and a failure
instead of a skip under QTC_REQUIRE_GPU=1). This build copies CUDA tensors to the host and checks them with the
CPU reference; the results must equal those of the same tensors on the CPU."""
import os

import numpy as np
import pytest

import qtc
from qtc.testing import ConformanceError, assert_conforms

torch = pytest.importorskip("torch", reason="torch is not installed (optional)")


@pytest.fixture(autouse=True)
def gpu():
    if not torch.cuda.is_available():
        why = "no CUDA device (torch.cuda.is_available() is False)"
        if os.environ.get("QTC_REQUIRE_GPU") == "1":
            pytest.fail("QTC_REQUIRE_GPU=1: " + why)
        pytest.skip(why)


@pytest.mark.parametrize("recipe,params", [("nvfp4", {}), ("mxfp8", {}), ("fp8_block", {"tile": "128x128"}),
                                           ("fp8_tensor", {})])
def test_cuda_tensors_give_the_cpu_results(recipe, params):
    x = torch.randn(3, 48, 160, device="cuda", dtype=torch.bfloat16) * 4  # 3-D: flattened to 144 x 160
    a = qtc.quantize(x, recipe, layout="te", **params)
    b = qtc.quantize(x.cpu(), recipe, layout="te", **params)
    for k in b:
        np.testing.assert_array_equal(a[k], b[k])
    outs = {k: torch.from_numpy(np.ascontiguousarray(v)).cuda() for k, v in a.items()}
    assert qtc.verify({"x": x, **outs}, recipe=recipe, layout="te", **params).passed
    assert assert_conforms(x, recipe, outs, layout="te", **params).passed
    first = next(k for k in outs if k.endswith("_data"))
    outs[first].view(-1)[7] ^= 1
    with pytest.raises(ConformanceError) as e:
        assert_conforms(x, recipe, outs, layout="te", explain=False, **params)
    assert e.value.tensor == first


def test_te_mxfp8_tensor_on_the_gpu():
    te = pytest.importorskip("transformer_engine.pytorch", reason="TransformerEngine is not installed")
    x = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16)
    q = te.MXFP8Quantizer(te.DType.kFloat8E4M3)(x)
    assert assert_conforms(x, q).passed
