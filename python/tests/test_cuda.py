"""CUDA tensors in quantize / verify / assert_conforms (issue 23 item 3; run on the H200, skipped here without a GPU,
and a failure instead of a skip under QTC_REQUIRE_GPU=1). They are checked on their GPU by the CUDA kernels and the
device comparison: the verdict's backend is cuda, no host path of the module is taken, and the bytes, counts and
first-mismatch messages equal those of the same tensors on the CPU."""
import contextlib
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
    if not qtc._qtc.cuda_built:
        pytest.fail("a GPU is here but this qtc module was built without the CUDA kernels (QTC_PY_CUDA)")


@contextlib.contextmanager
def host_path_refused():
    """Fails the calls inside if the module's host-array path (_as_arg) or a tensor's .cpu() / .numpy() runs."""
    def refuse(*a, **k):
        raise AssertionError("the host path ran for CUDA tensors")

    saved = qtc._as_arg, torch.Tensor.cpu, torch.Tensor.numpy
    qtc._as_arg, torch.Tensor.cpu, torch.Tensor.numpy = refuse, refuse, refuse
    try:
        yield
    finally:
        qtc._as_arg, torch.Tensor.cpu, torch.Tensor.numpy = saved


@pytest.fixture
def no_host_path():
    """host_path_refused() for a whole test."""
    with host_path_refused():
        yield


CASES = [("nvfp4", {}), ("mxfp8", {}), ("fp8_block", {"tile": "128x128"}), ("fp8_block", {"tile": "1x128"}),
         ("fp8_tensor", {}), ("nvfp4", {"tile": "16x16"}), ("mxfp8", {"scale_rule": "ocp_floor"})]


def host(t):
    """A tensor's bytes as a host array (NumPy has no bfloat16: such a tensor comes back as its int16 bit patterns;
    the tests compare bytes)."""
    if not isinstance(t, torch.Tensor):
        return np.asarray(t)
    t = t.detach().to("cpu")
    return (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy()


@pytest.mark.parametrize("layout", ["compact", "te", "swizzled_128x4"])
@pytest.mark.parametrize("recipe,params", CASES)
def test_cuda_tensors_give_the_cpu_results(recipe, params, layout):
    if layout == "swizzled_128x4" and recipe not in ("nvfp4", "mxfp8"):
        pytest.skip("swizzled scales are NVFP4 / MXFP8 ones")
    torch.manual_seed(1)
    x = torch.randn(3, 48, 160, device="cuda", dtype=torch.bfloat16) * 4  # 3-D: flattened to 144 x 160, ragged K
    if recipe == "nvfp4":
        x = torch.randn(3, 48, 176, device="cuda", dtype=torch.bfloat16) * 4
    a = qtc.quantize(x, recipe, layout=layout, **params)
    b = qtc.quantize(x.cpu(), recipe, layout=layout, **params)
    assert sorted(a) == sorted(b)
    for k in b:
        assert isinstance(a[k], torch.Tensor) and a[k].device == x.device, k
        np.testing.assert_array_equal(host(a[k]).view(np.uint8), np.asarray(b[k]).view(np.uint8), err_msg=k)
    r = qtc.verify({"x": x, **a}, recipe=recipe, layout=layout, **params)
    assert r.passed and "[cuda]" in r.line, r.line
    assert assert_conforms(x, recipe, a, layout=layout, **params).passed


@pytest.mark.parametrize("recipe,params", CASES)
def test_a_mismatch_found_on_the_gpu_reads_as_on_the_cpu(recipe, params):
    torch.manual_seed(2)
    x = torch.randn(64, 256, device="cuda", dtype=torch.float32)
    outs = qtc.quantize(x, recipe, layout="te", **params)
    failed = 0
    for name in sorted(outs):  # every output corrupted once, at an element past the first
        bad = {k: v.clone() for k, v in outs.items()}
        flat = bad[name].view(-1).view(torch.uint8)
        flat[min(37, flat.numel() - 1)] ^= 0x11
        on_gpu = qtc.verify({"x": x, **bad}, recipe=recipe, layout="te", **params)
        on_cpu = qtc.verify({"x": x.cpu(), **{k: v.cpu() for k, v in bad.items()}}, recipe=recipe, layout="te", **params)
        assert "[cuda]" in on_gpu.line and "[cpu]" in on_cpu.line, (on_gpu.line, on_cpu.line)
        # A byte of TE's padding is no value (pass on both); every other one fails, or is equivalent (bytes differ,
        # decoded values equal), on both, with the same text and fields.
        assert on_gpu.verdict == on_cpu.verdict and on_gpu.message == on_cpu.message, (name, on_gpu.line, on_cpu.line)
        assert on_gpu.records == on_cpu.records and on_gpu.mismatches == on_cpu.mismatches, name
        failed += on_cpu.verdict in ("fail", "equivalent")
    assert failed >= len(outs) - 2, failed  # at most the two TE-padded scale buffers hit padding


def first_zero_byte(t):
    """The flat index of the first 0x00 byte of a byte tensor (a +0 code: one FP8 code, or two E2M1 nibbles)."""
    z = (t.reshape(-1).view(torch.uint8) == 0).nonzero()
    assert z.numel() > 0, "no +0 code"
    return int(z[0, 0])


@pytest.mark.parametrize("layout", ["compact", "te"])
@pytest.mark.parametrize("recipe,params", CASES)
def test_equal_values_are_equivalent_on_the_gpu_as_on_the_cpu(recipe, params, layout):
    """Bytes that differ, decoded values that do not (a -0 code for +0): EQUIVALENT on both devices, same message; the
    device decides it there (the host path stays unused; only the two quantizations reach the host, for the text)."""
    torch.manual_seed(3)
    x = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)
    x[:2, :128] = 0  # all-zero blocks: +0 codes under every recipe
    q = qtc.quantize(x, recipe, layout=layout, **params)
    for name in ("rowwise_data", "columnwise_data"):
        if name not in q:
            continue
        bad = {k: v.clone() for k, v in q.items()}
        bad[name].reshape(-1).view(torch.uint8)[first_zero_byte(bad[name])] = 0x80  # -0 in E4M3, E5M2 and E2M1's high nibble
        with host_path_refused():
            on_gpu = qtc.verify({"x": x, **bad}, recipe=recipe, layout=layout, **params)
            with pytest.raises(ConformanceError) as e:  # assert_conforms still asks for the bytes
                assert_conforms(x, recipe, bad, layout=layout, **params)
        assert on_gpu.verdict == "equivalent" and "[cuda]" in on_gpu.line, on_gpu.line
        assert "bytes differ, decoded values equal" in on_gpu.message, on_gpu.line
        assert e.value.result.verdict == "equivalent"
        on_cpu = qtc.verify({"x": x.cpu(), **{k: v.cpu() for k, v in bad.items()}}, recipe=recipe, layout=layout, **params)
        assert on_cpu.verdict == "equivalent", on_cpu.line
        assert on_gpu.message == on_cpu.message and on_gpu.records == on_cpu.records, (on_gpu.line, on_cpu.line)


HYBRIDS = [("mxfp8_nvfp4_rdq", dict(rowwise={"recipe": "mxfp8"}, columnwise={"recipe": "nvfp4"},
                                    columnwise_source="rowwise_dequantized")),
           ("nvfp4_mxfp8_rdq", dict(rowwise={"recipe": "nvfp4"}, columnwise={"recipe": "mxfp8"},
                                    columnwise_source="rowwise_dequantized")),
           ("mxfp8_fp8block_rdq", dict(rowwise={"recipe": "mxfp8"}, columnwise={"recipe": "fp8_block"},
                                       columnwise_source="rowwise_dequantized")),
           ("mxfp8_fp8tensor_original", dict(rowwise={"recipe": "mxfp8"}, columnwise={"recipe": "fp8_tensor"}))]


@pytest.mark.parametrize("layout", ["compact", "te"])
@pytest.mark.parametrize("name,md", HYBRIDS, ids=[h[0] for h in HYBRIDS])
def test_hybrid_recipes_on_the_gpu_give_the_cpu_results(name, md, layout):
    """recipe=hybrid on CUDA tensors: quantized by the kernels (the same bytes as the CPU, columnwise_source and an FP8
    tensor plane's '<plane>.scale_inv' included) and verified plane by plane on the GPU, each corrupted tensor with the
    CPU's verdict, message and records (the source's message names the backend that dequantized it)."""
    torch.manual_seed(4)
    x = torch.randn(128, 256, device="cuda", dtype=torch.bfloat16) * 3
    with host_path_refused():
        a = qtc.quantize(x, "hybrid", layout=layout, **md)
    b = qtc.quantize(x.cpu(), "hybrid", layout=layout, **md)
    assert sorted(a) == sorted(b)
    for k in b:
        assert isinstance(a[k], torch.Tensor) and a[k].device == x.device, k
        np.testing.assert_array_equal(host(a[k]).view(np.uint8), np.asarray(b[k]).view(np.uint8), err_msg=k)
    with host_path_refused():
        r = qtc.verify({"x": x, **a}, recipe="hybrid", layout=layout, **md)
    assert r.passed and "[cuda]" in r.line, r.line
    failed = 0
    for k in sorted(a):
        bad = {n: v.clone() for n, v in a.items()}
        flat = bad[k].reshape(-1).view(torch.uint8)
        flat[min(37, flat.numel() - 1)] ^= 0x11
        with host_path_refused():
            on_gpu = qtc.verify({"x": x, **bad}, recipe="hybrid", layout=layout, **md)
        on_cpu = qtc.verify({"x": x.cpu(), **{n: v.cpu() for n, v in bad.items()}}, recipe="hybrid", layout=layout, **md)
        gpu_message = on_gpu.message.replace("dequantized by backend cuda", "dequantized by backend cpu")
        assert on_gpu.verdict == on_cpu.verdict and gpu_message == on_cpu.message, (k, on_gpu.line, on_cpu.line)
        assert on_gpu.records == on_cpu.records and on_gpu.mismatches == on_cpu.mismatches, k
        failed += on_cpu.verdict in ("fail", "equivalent")
    assert failed >= len(a) - 2, failed  # at most the two TE-padded scale buffers hit padding


def test_the_gpu_path_copies_no_tensor_to_the_host(no_host_path):
    x = torch.randn(4, 32, 512, device="cuda", dtype=torch.bfloat16)
    out = qtc.quantize(x, "nvfp4", layout="swizzled_128x4")
    assert qtc.verify({"x": x, **out}, recipe="nvfp4", layout="swizzled_128x4").passed
    assert assert_conforms(x, "nvfp4", out, layout="swizzled_128x4").passed
    out["rowwise_scale_inv"].view(torch.uint8).view(-1)[5] += 1
    with pytest.raises(ConformanceError) as e:  # the failure too: only its elements and block inputs are read
        assert_conforms(x, "nvfp4", out, layout="swizzled_128x4")
    assert e.value.tensor == "rowwise_scale_inv" and e.value.count == 1 and e.value.rule is None
    assert e.value.block.startswith("x[")


def test_float8_and_float4_dtypes_on_the_gpu():
    x = torch.randn(128, 256, device="cuda", dtype=torch.bfloat16)
    q = qtc.quantize(x, "mxfp8")
    outs = {"rowwise_data": q["rowwise_data"].view(torch.float8_e4m3fn),
            "rowwise_scale_inv": q["rowwise_scale_inv"].view(torch.float8_e8m0fnu)}
    assert_conforms(x, "mxfp8", outs, columnwise=False)
    q = qtc.quantize(x, "nvfp4", columnwise=False)
    outs = {"rowwise_data": q["rowwise_data"].view(torch.float4_e2m1fn_x2),
            "rowwise_scale_inv": q["rowwise_scale_inv"].view(torch.float8_e4m3fn), "amax_rowwise": q["amax_rowwise"]}
    assert_conforms(x, "nvfp4", outs, columnwise=False)


def test_strict_padding_on_the_gpu_reads_as_on_the_cpu():
    x = torch.randn(48, 96, device="cuda", dtype=torch.float32)
    q = qtc.quantize(x, "mxfp8", layout="te")
    assert qtc.verify({"x": x, **q}, recipe="mxfp8", layout="te", strict_padding=True).passed
    s = q["rowwise_scale_inv"]
    s[-1, -1] = 7  # padding of TE's [roundup(48, 128), roundup(3, 4)] buffer
    on_gpu = qtc.verify({"x": x, **q}, recipe="mxfp8", layout="te", strict_padding=True)
    on_cpu = qtc.verify({"x": x.cpu(), **{k: v.cpu() for k, v in q.items()}}, recipe="mxfp8", layout="te",
                        strict_padding=True)
    assert on_gpu.verdict == on_cpu.verdict == "fail" and on_gpu.message == on_cpu.message, (on_gpu.line, on_cpu.line)
    assert qtc.verify({"x": x, **q}, recipe="mxfp8", layout="te").passed  # not compared by default


def test_dequantized_outputs_and_fp8_tensor_scalars_on_the_gpu():
    x = torch.randn(64, 128, device="cuda", dtype=torch.float16)
    q = qtc.quantize(x, "fp8_tensor")
    deq = torch.from_numpy(qtc.dequantize({k: v.cpu() for k, v in q.items()}, "fp8_tensor", (64, 128))).cuda()
    assert qtc.verify({"x": x, **q, "dequantized_rowwise": deq}, recipe="fp8_tensor").passed
    deq[3, 4] += 1
    r = qtc.verify({"x": x, **q, "dequantized_rowwise": deq}, recipe="fp8_tensor")
    assert r.verdict == "fail" and r.records[0]["tensor"] == "dequantized_rowwise" and r.records[0]["index"] == [3, 4]


def test_a_recipe_the_kernels_do_not_run_is_skipped_with_the_reason():
    x = torch.randn(40, 64, device="cuda", dtype=torch.float32)  # M = 40: the NVFP4 kernels need M % 16 == 0
    params = {"profile": "torchao", "columnwise": False}  # torchao's rowwise plane of a ragged M: the CPU reference's
    ref = qtc.quantize(x.cpu(), "nvfp4", **params)
    outs = {k: torch.from_numpy(np.ascontiguousarray(v)).cuda() for k, v in ref.items()}
    r = qtc.verify({"x": x, **outs}, recipe="nvfp4", **params)
    assert r.verdict == "skipped" and "M % 16" in r.message and "CPU" in r.message, r.line
    assert qtc.verify({"x": x.cpu(), **ref}, recipe="nvfp4", **params).passed
    with pytest.raises(ValueError, match="M % 16"):
        qtc.quantize(x, "nvfp4", **params)


def test_the_caller_stream_and_a_second_device_rule():
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):  # the kernels run on the current stream, after the work that made x
        x = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16).mul_(3)
        out = qtc.quantize(x, "mxfp8")
        assert qtc.verify({"x": x, **out}, recipe="mxfp8").passed
    with pytest.raises(ValueError, match="one device"):
        qtc.verify({"x": x, "rowwise_data": out["rowwise_data"].cpu()}, recipe="mxfp8", columnwise=False)


def test_error_verdicts_on_the_gpu_read_as_on_the_cpu():
    x = torch.randn(64, 128, device="cuda", dtype=torch.float32)
    q = qtc.quantize(x, "nvfp4", columnwise=False)
    bad = [({"x": x, **q}, {"recipe": "nvfp5"}),                                      # unknown recipe
           ({k: v for k, v in q.items()}, {"recipe": "nvfp4"}),                       # no x
           ({"x": x.view(-1), **q}, {"recipe": "nvfp4"}),                             # 1-D x
           ({"x": x.int(), **q}, {"recipe": "nvfp4"}),                                # integer x
           ({"x": x, **q, "foo": q["amax_rowwise"]}, {"recipe": "nvfp4"}),            # not an output
           ({"x": x, **q, "rowwise_data": q["rowwise_data"][:32]}, {"recipe": "nvfp4"}),  # wrong shape
           ({"x": x, **q, "rowwise_data": q["rowwise_data"].float()}, {"recipe": "nvfp4"}),  # wrong dtype
           ({"x": x, **q}, {"recipe": "nvfp4", "layout": "deepgemm_packed_ue8m0"}),   # layout the recipe lacks
           ({"x": x}, {"recipe": "nvfp4"})]                                           # nothing to check
    for tensors, md in bad:
        on_gpu = qtc.verify(tensors, **md)
        on_cpu = qtc.verify({k: v.cpu() for k, v in tensors.items()}, **md)
        assert on_gpu.verdict == on_cpu.verdict == "error", (on_gpu.line, on_cpu.line)
        assert on_gpu.message == on_cpu.message and "internal error" not in on_gpu.message, (on_gpu.line, on_cpu.line)
    for call in (lambda t: qtc.quantize(t.view(-1), "nvfp4"), lambda t: qtc.quantize(t.int(), "nvfp4"),
                 lambda t: qtc.quantize(t, "nvfp5"), lambda t: qtc.quantize(t[:30], "nvfp4"),
                 lambda t: qtc.quantize(t, "nvfp4", layout="deepgemm_packed_ue8m0")):
        with pytest.raises(ValueError) as on_gpu:
            call(x)
        with pytest.raises(ValueError) as on_cpu:
            call(x.cpu())
        assert str(on_gpu.value) == str(on_cpu.value)


def test_te_mxfp8_tensor_on_the_gpu():
    te = pytest.importorskip("transformer_engine.pytorch", reason="TransformerEngine is not installed")
    x = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16)
    q = te.MXFP8Quantizer(te.DType.kFloat8E4M3)(x)
    assert assert_conforms(x, q).passed
