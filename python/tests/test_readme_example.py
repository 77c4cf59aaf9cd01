"""The Python example of README.md ("Use it from your tests"): one qtc.verify of a dump, one assert_conforms."""
import pathlib

import numpy as np

import qtc
from qtc.testing import assert_conforms

DUMP = pathlib.Path(__file__).resolve().parents[2] / "conformance/vectors/te/nvfp4_1x16_normal_32x64.safetensors"


def test_verify_a_dump():
    tensors, metadata = qtc.load_vector(DUMP)  # e.g. written by safetensors.torch.save_file(...)
    result = qtc.verify(tensors, **metadata)
    assert result.passed, result.message


def test_my_kernel_conforms():
    x = np.random.default_rng(0).standard_normal((256, 512), dtype=np.float32)
    out = qtc.quantize(x, "mxfp8", layout="te", swizzled=True)  # stands in for your kernel's TE buffers
    assert_conforms(x, "mxfp8", {"rowwise_data": out["rowwise_data"], "rowwise_scale_inv": out["rowwise_scale_inv"]},
                    layout="te", swizzled=True)
