"""The Python example of README.md ("Use it from your tests"): one qtc.verify of a dump, assert_conforms on host
arrays, on a TransformerEngine object and on CUDA tensors (checked on the GPU)."""
import pathlib

import numpy as np
import pytest

import qtc
from qtc.testing import assert_conforms

DUMP = pathlib.Path(__file__).resolve().parents[2] / "conformance/vectors/te/nvfp4_1x16_normal_32x64.safetensors"


def test_verify_a_dump():
    tensors, metadata = qtc.load_vector(DUMP)  # e.g. written by safetensors.torch.save_file(...)
    result = qtc.verify(tensors, **metadata)
    assert result.passed, result.message


def test_my_kernel_conforms():
    x = np.random.default_rng(0).standard_normal((256, 512), dtype=np.float32)
    out = qtc.quantize(x, "mxfp8", layout="swizzled_128x4")  # stands in for your kernel's TE buffers
    assert_conforms(x, "mxfp8", {"rowwise_data": out["rowwise_data"], "rowwise_scale_inv": out["rowwise_scale_inv"]},
                    layout="swizzled_128x4")


def test_a_te_tensor_on_the_gpu_conforms():
    torch = pytest.importorskip("torch")
    te = pytest.importorskip("transformer_engine.pytorch")  # skipped where TransformerEngine is not installed
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    x = torch.randn(4, 128, 512, device="cuda", dtype=torch.bfloat16)  # (..., K): checked as 512 x 512, as TE does
    q = te.MXFP8Quantizer(te.DType.kFloat8E4M3)(x)  # TE's MXFP8Tensor, taken as it is
    assert_conforms(x, q)  # recipe and layout read from the object; raises ConformanceError


def test_cuda_tensors_are_checked_on_the_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    x = torch.randn(4, 128, 512, device="cuda", dtype=torch.bfloat16)
    out = qtc.quantize(x, "nvfp4", layout="swizzled_128x4")  # stands in for your CUDA kernel: torch tensors on the GPU
    data = out["rowwise_data"].view(torch.float4_e2m1fn_x2)  # float4 / float8 dtypes are read as their bytes
    assert_conforms(x, "nvfp4", {"rowwise_data": data, "rowwise_scale_inv": out["rowwise_scale_inv"],
                                 "amax_rowwise": out["amax_rowwise"]}, layout="swizzled_128x4")  # compared on the GPU


def test_readme_quotes_these_examples_as_they_are():
    root = pathlib.Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    section = readme[readme.index("## Use it from your tests"):]
    section = section[: section.index("\n## ", 10)]
    blocks = section.split("```")[1::2]  # the fenced code blocks, in order: cmake, cpp, python
    sources = {"cmake": root / "examples/consumer/CMakeLists.txt", "cpp": root / "examples/consumer/my_kernel_test.cpp",
               "python": pathlib.Path(__file__)}
    assert [b.split("\n", 1)[0] for b in blocks] == ["cmake", "cpp", "python"]
    for block in blocks:
        lang, body = block.split("\n", 1)
        text = sources[lang].read_text()
        if lang == "cmake":  # two separate lines of the file
            assert all(line in text.splitlines() for line in body.strip().splitlines()), body
        else:  # one contiguous excerpt
            assert body.strip() in text, body
