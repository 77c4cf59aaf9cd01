"""The Python module against the C++ reference: round trips in every layout, failures with qtc verify's line,
the bundled and TE-layout vectors, file I/O, dtypes and zero-copy paths, errors as ValueError, the GIL."""
import os
import subprocess
import threading
import time

import numpy as np
import pytest

import qtc
from conftest import BUNDLED, TE_LAYOUT

RECIPES = [
    ("nvfp4", {}),
    ("nvfp4", {"tile": "16x16"}),
    ("nvfp4", {"row_scaled": True}),
    ("mxfp8", {}),
    ("mxfp8", {"fp8_dtype": "e5m2", "scale_rule": "ocp_floor", "profile": "ocp"}),
    ("fp8_block", {}),
    ("fp8_block", {"tile": "128x128", "pow2_scales": True}),
    ("fp8_tensor", {}),
    ("mxfp4", {}),
    ("mxfp4", {"scale_rule": "rceil"}),
    ("mxfp4", {"scale_rule": "even", "profile": "torchao"}),
]
M, K = 144, 176  # not multiples of 128 (nor K of 32): the TE buffers have padding


def make_x(seed=0, m=M, k=K):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(np.float32)
    x[:, ::29] *= 40.0
    x[3] = 0.0
    return x


def layouts(recipe):
    out = ["compact", "te"]
    if recipe in ("nvfp4", "mxfp8", "mxfp4"):
        out += ["swizzled_128x4", "swizzled_8x4"]
    if recipe == "mxfp4":
        out.append("fbgemm_mx4")  # FBGEMM's MX4 rows: the scales inside the data tensors
    return out


def test_layout_names_come_from_the_one_table():
    assert qtc.LAYOUTS == ("compact", "te", "swizzled_128x4", "swizzled_8x4", "deepgemm_packed_ue8m0", "fbgemm_mx4")
    x = make_x(2)
    # The 8x4 buffer of NVFP4 [M, K]: [roundup(M, 8), roundup(ceil(K/16), 4)], entry (0, 1) at byte 1.
    c = qtc.quantize(x, "nvfp4")
    f = qtc.quantize(x, "nvfp4", layout="swizzled_8x4")
    m, kb = c["rowwise_scale_inv"].shape
    assert f["rowwise_scale_inv"].shape == (-(-m // 8) * 8, -(-kb // 4) * 4)
    assert f["rowwise_scale_inv"].reshape(-1)[1] == c["rowwise_scale_inv"][0, 1]
    assert f["rowwise_scale_inv"].reshape(-1)[4] == c["rowwise_scale_inv"][1, 0]


@pytest.mark.parametrize("recipe,params", RECIPES)
def test_quantize_then_verify_passes_in_every_layout(recipe, params):
    x = make_x(1)
    for layout in layouts(recipe):
        q = qtc.quantize(x, recipe, layout=layout, **params)
        r = qtc.verify({"x": x, **q}, recipe=recipe, layout=layout, **params)
        assert r.passed, r.line
        assert r.verdict == "pass" and r.message == "" and all(n == 0 for n in r.mismatches.values())
        # fbgemm_mx4: each plane's scales are checked from the exponent bytes of its data tensor.
        carried = {n.replace("_data", "_scale_inv") for n in q if n.endswith("_data")} if layout == "fbgemm_mx4" else set()
        assert set(r.checked) == set(q) | carried


def test_fbgemm_mx4_rows_hold_16_code_bytes_then_the_exponent_byte():
    x = make_x(4, 6, 45)  # K = 45: two groups per row, the second one ragged (7 code bytes used, 9 padding)
    md = {"profile": "fbgemm", "scale_rule": "ceil"}
    c = qtc.quantize(x, "mxfp4", **md)
    p = qtc.quantize(x, "mxfp4", layout="fbgemm_mx4", **md)
    assert set(p) == {"rowwise_data", "columnwise_data"}
    d = p["rowwise_data"]
    assert d.shape == (6, 34) and d.dtype == np.uint8
    assert (d[:, 0:16] == c["rowwise_data"][:, 0:16]).all()
    assert (d[:, 16] == c["rowwise_scale_inv"][:, 0]).all()
    assert (d[:, 17:24] == c["rowwise_data"][:, 16:23]).all()
    assert (d[:, 24:33] == 0).all()
    assert (d[:, 33] == c["rowwise_scale_inv"][:, 1]).all()
    assert p["columnwise_data"].shape == (45, 17)  # x^T rows of 6 elements: one padded group
    y = qtc.dequantize(p, "mxfp4", (6, 45), layout="fbgemm_mx4", **md)
    z = qtc.dequantize(c, "mxfp4", (6, 45), **md)
    assert y.tobytes() == z.tobytes()
    with pytest.raises(ValueError) as e:
        qtc.dequantize({**p, "rowwise_scale_inv": c["rowwise_scale_inv"]}, "mxfp4", (6, 45), layout="fbgemm_mx4", **md)
    assert "rule 'layout-fbgemm_mx4'" in str(e.value)
    swapped = {**p, "rowwise_data": ((d << 4) | (d >> 4)).astype(np.uint8)}  # FBGEMM's CUDA kernel's nibble order
    assert not qtc.verify({"x": x, **swapped}, recipe="mxfp4", layout="fbgemm_mx4", **md).passed


def test_quantize_shapes_follow_vectors_md():
    x = make_x(2)
    q = qtc.quantize(x, "nvfp4")
    assert q["rowwise_data"].shape == (M, K // 2) and q["rowwise_data"].dtype == np.uint8
    assert q["rowwise_scale_inv"].shape == (M, K // 16) and q["columnwise_scale_inv"].shape == (K, M // 16)
    assert q["amax_rowwise"].shape == (1,) and q["amax_rowwise"].dtype == np.float32
    t = qtc.quantize(x, "nvfp4", layout="te")
    assert t["rowwise_scale_inv"].shape == (256, 12) and t["columnwise_scale_inv"].shape == (256, 12)
    b = qtc.quantize(x, "fp8_block", layout="te")  # 1x128: transposed [ceil(K/128), roundup(M, 4)]
    assert b["rowwise_scale_inv"].shape == (2, 144) and b["rowwise_scale_inv"].dtype == np.float32
    f = qtc.quantize(x, "fp8_tensor")
    assert f["scale_inv"].shape == (1,) and f["columnwise_data"].shape == (K, M)
    assert set(qtc.quantize(x, "mxfp8", columnwise=False)) == {"rowwise_data", "rowwise_scale_inv"}


def test_flipped_byte_fails_with_the_line_qtc_verify_prints(tmp_path, qtc_binary):
    x = make_x(3)
    q = qtc.quantize(x, "mxfp8")
    q["rowwise_data"][5, 7] ^= 0x01
    path = tmp_path / "dump.safetensors"
    qtc.save_vector(path, {"x": x, **q}, {"recipe": "mxfp8", "qtc.schema": "1"})
    r = qtc.verify({"x": x, **q}, source=str(path), recipe="mxfp8")
    assert not r.passed and r.verdict == "fail"
    assert r.mismatches == {"rowwise_data": 1, "rowwise_scale_inv": 0, "columnwise_data": 0, "columnwise_scale_inv": 0}
    assert r.message.startswith("rowwise_data: 1 of 25344 elements differ; first at [5, 7]: expected ")
    cli = subprocess.run([qtc_binary, "verify", str(path)], capture_output=True, text=True)
    assert cli.returncode == 1
    assert cli.stdout.splitlines()[0] == r.line
    assert str(r) == r.line and not bool(r)
    # The same file through verify(path): the metadata comes from the file.
    assert qtc.verify(path).line == r.line


def test_flipped_scale_in_te_swizzled_layout_is_found_and_padding_is_ignored():
    x = make_x(4)
    q = qtc.quantize(x, "nvfp4", layout="swizzled_128x4")
    padded = q["rowwise_scale_inv"]
    valid = qtc.quantize(np.ones_like(x), "nvfp4", layout="swizzled_128x4")["rowwise_scale_inv"] != 0
    padded[~valid] = 0xAB  # what TE's kernels leave in padding: not compared
    assert qtc.verify({"x": x, **q}, recipe="nvfp4", layout="swizzled_128x4").passed
    padded[0, 0] ^= 0x01
    r = qtc.verify({"x": x, **q}, recipe="nvfp4", layout="swizzled_128x4")
    assert not r.passed and r.mismatches["rowwise_scale_inv"] == 1
    assert "rowwise_scale_inv: 1 of" in r.message and "first at [0, 0]" in r.message


def test_wrong_padded_shape_names_the_expected_one():
    x = make_x(5)
    q = qtc.quantize(x, "mxfp8")  # compact scales, declared as TE buffers
    r = qtc.verify({"x": x, "rowwise_data": q["rowwise_data"], "rowwise_scale_inv": q["rowwise_scale_inv"]},
                   recipe="mxfp8", layout="te")
    assert r.verdict == "error"
    assert "has shape [144, 6], expected [256, 8]" in r.message


@pytest.mark.parametrize("path", sorted(BUNDLED.glob("*.safetensors"))[::9], ids=lambda p: p.name)
def test_bundled_vectors_verify(path):
    tensors, md = qtc.load_vector(path)
    r = qtc.verify(tensors, **md)
    assert r.passed, r.line
    assert qtc.identify(tensors, **md).verdict == "OK"


def test_te_layout_vectors_verify():
    files = sorted(TE_LAYOUT.glob("*.safetensors"))
    assert len(files) > 100
    failed = [r.line for r in (qtc.verify(f) for f in files) if not r.passed]
    assert not failed, failed[:3]


def test_dequantize_matches_the_vectors_dequantized_outputs():
    files = [f for f in sorted(BUNDLED.glob("mxfp8ocp_*.safetensors"))]
    assert files
    for f in files:
        tensors, md = qtc.load_vector(f)
        params = {k: v for k, v in md.items() if k not in ("recipe", "source", "qtc.schema")}
        q = qtc.quantize(tensors["x"], md["recipe"], **params)
        for plane in ("rowwise", "columnwise"):
            if f"dequantized_{plane}" in tensors:
                d = qtc.dequantize(q, md["recipe"], tensors["x"].shape, plane=plane, **params)
                np.testing.assert_array_equal(d.view(np.uint32), tensors[f"dequantized_{plane}"].view(np.uint32))


@pytest.mark.parametrize("recipe,params", RECIPES)
def test_dequantize_in_te_layout_equals_compact(recipe, params):
    x = make_x(6)
    c = qtc.quantize(x, recipe, **params)
    d_c = qtc.dequantize(c, recipe, x.shape, **params)
    for layout in layouts(recipe)[1:]:
        t = qtc.quantize(x, recipe, layout=layout, **params)
        np.testing.assert_array_equal(qtc.dequantize(t, recipe, x.shape, layout=layout, **params), d_c)
    assert np.all(np.isfinite(d_c))


def test_save_load_round_trip_and_safetensors_compatibility(tmp_path):
    ml = pytest.importorskip("ml_dtypes")
    x = make_x(7, 32, 64).astype(ml.bfloat16)
    q = qtc.quantize(x, "nvfp4")
    path = tmp_path / "v.safetensors"
    md = {"recipe": "nvfp4", "source": "test"}
    qtc.save_vector(path, {"x": x, **q}, md)
    tensors, md2 = qtc.load_vector(path)
    assert md2 == md
    assert tensors["x"].dtype == ml.bfloat16
    np.testing.assert_array_equal(tensors["x"].view(np.uint16), x.view(np.uint16))
    for k, v in q.items():
        np.testing.assert_array_equal(tensors[k], v)
    st = pytest.importorskip("safetensors.numpy")
    loaded = st.load_file(str(path))
    np.testing.assert_array_equal(loaded["rowwise_data"], q["rowwise_data"])


def test_bfloat16_inputs_agree_across_array_types():
    ml = pytest.importorskip("ml_dtypes")
    x = make_x(8, 64, 64)
    xb = x.astype(ml.bfloat16)
    a = qtc.quantize(xb, "mxfp8")
    b = qtc.quantize(xb.view(np.uint16).view(ml.bfloat16), "mxfp8")
    np.testing.assert_array_equal(a["rowwise_data"], b["rowwise_data"])
    # bf16 and its float32 widening quantize identically (the widening is exact)
    c = qtc.quantize(xb.astype(np.float32), "mxfp8")
    np.testing.assert_array_equal(a["rowwise_data"], c["rowwise_data"])


def test_arrays_pass_without_copies():
    x = make_x(9)
    buf, dtype = qtc._as_arg("x", x)
    assert buf is x and dtype == "F32"
    ml = pytest.importorskip("ml_dtypes")
    xb = x.astype(ml.bfloat16)
    buf, dtype = qtc._as_arg("x", xb)
    assert dtype == "BF16" and np.shares_memory(buf, xb)
    ro = x.copy()
    ro.flags.writeable = False  # read-only arrays are accepted as they are
    assert qtc.verify({"x": ro, **qtc.quantize(ro, "fp8_block")}, recipe="fp8_block").passed


def test_torch_cpu_tensors():
    torch = pytest.importorskip("torch", reason="torch is not installed (optional)")
    x = make_x(10, 64, 128)
    t = torch.from_numpy(x).to(torch.bfloat16)
    a = qtc.quantize(t, "nvfp4")
    b = qtc.quantize(t.float().numpy(), "nvfp4")
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert qtc.verify({"x": t, **{k: torch.from_numpy(v) for k, v in a.items()}}, recipe="nvfp4").passed
    buf, _ = qtc._as_arg("x", t)
    assert buf.data_ptr() == t.data_ptr()


@pytest.mark.parametrize("call,needle", [
    (lambda x: qtc.quantize(x, "nvfp5"), "metadata key 'recipe': unknown value 'nvfp5'"),
    (lambda x: qtc.quantize(x[:10], "nvfp4"), "NVFP4 needs M % 16 == 0, got M = 10"),
    (lambda x: qtc.quantize(x, "nvfp4", tile="3x3"), "metadata key 'tile': unknown value '3x3'"),
    (lambda x: qtc.quantize(x[0], "mxfp8"), "x has shape [176]; VECTORS.md needs 2-D [M, K]"),
    (lambda x: qtc.quantize(x.astype(np.float64), "mxfp8"), "x has dtype F64"),
    (lambda x: qtc.quantize(x.astype(np.complex64), "mxfp8"), "has dtype complex64"),
    (lambda x: qtc.quantize(x, "mxfp8", layout="cublas"), "layout must be one of compact, te, swizzled_128x4, swizzled_8x4, deepgemm_packed_ue8m0, fbgemm_mx4, got 'cublas'"),
    (lambda x: qtc.quantize(x, "nvfp4", layout="fbgemm_mx4"), "rule 'layout-fbgemm_mx4'"),
    (lambda x: qtc.quantize(x, "fp8_block", layout="swizzled_128x4"), "rule 'layout-swizzled_128x4'"),
    (lambda x: qtc.quantize(x, "fp8_block", layout="swizzled_8x4"), "rule 'layout-swizzled_8x4'"),
    (lambda x: qtc.dequantize(qtc.quantize(x, "mxfp8"), "mxfp8", (144, 175)), "expected [144, 175]"),
    (lambda x: qtc.dequantize({}, "mxfp8", (144, 176)), "needs tensor 'rowwise_data'"),
    (lambda x: qtc.dequantize(qtc.quantize(x, "mxfp8"), "mxfp8", (144, 176), plane="diagonal"), "plane must be"),
    (lambda x: qtc.load_vector("/no/such/file.safetensors"), "/no/such/file.safetensors"),
])
def test_bad_arguments_raise_value_error(call, needle):
    with pytest.raises(ValueError) as e:
        call(make_x(11))
    assert needle in str(e.value)
    assert "[check `" not in str(e.value)


def test_malformed_inputs_never_crash(tmp_path):
    x = make_x(12)
    q = qtc.quantize(x, "nvfp4")
    cases = [
        {"x": x, "rowwise_data": q["rowwise_data"][:, :5]},
        {"x": x, "rowwise_data": q["rowwise_data"].astype(np.float32)},
        {"x": x, "amax_rowwise": np.zeros((), np.float32)},
        {"x": x, "bogus": q["rowwise_data"]},
    ]
    for t in cases:
        r = qtc.verify(t, recipe="nvfp4")
        assert r.verdict in ("error", "fail"), r.line
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\xff" * 64)
    with pytest.raises(ValueError):
        qtc.load_vector(bad)
    r = qtc.verify(bad)
    assert r.verdict == "error" and r.line.startswith(f"ERROR {bad}: invalid safetensors file: header length")
    assert qtc.identify(bad).verdict == "ERROR"


def test_gil_is_released_while_the_reference_runs():
    x = make_x(13, 2048, 2048)
    window = {}

    def work():
        window["t0"] = time.perf_counter()
        qtc.quantize(x, "nvfp4")
        window["t1"] = time.perf_counter()

    ticks = []
    th = threading.Thread(target=work)
    th.start()
    while th.is_alive():
        ticks.append(time.perf_counter())
    th.join()
    t0, t1 = window["t0"], window["t1"]
    margin = (t1 - t0) * 0.2
    inside = [t for t in ticks if t0 + margin < t < t1 - margin]
    # With the GIL held for the whole call this thread could not run inside the window at all.
    assert len(inside) > 10, (len(inside), t1 - t0)


def test_strict_padding_wants_zeros():
    x = make_x(15)
    q = qtc.quantize(x, "mxfp8", layout="te")
    assert qtc.verify({"x": x, **q}, recipe="mxfp8", layout="te", strict_padding=True).passed  # quantize pads with 0
    q["rowwise_scale_inv"][-1, -1] = 0xAB
    assert qtc.verify({"x": x, **q}, recipe="mxfp8", layout="te").passed
    r = qtc.verify({"x": x, **q}, recipe="mxfp8", layout="te", strict_padding=True)
    assert not r.passed and "rowwise_scale_inv" in r.message and "padding" in r.message


def test_assert_conforms_passes_and_fails_with_the_first_mismatch():
    from qtc.testing import assert_conforms

    x = make_x(14)
    q = qtc.quantize(x, "fp8_block", layout="te")
    assert assert_conforms(x, "fp8_block", q, layout="te").passed
    q["rowwise_scale_inv"][1, 2] = np.float32(q["rowwise_scale_inv"][1, 2]) * np.float32(2)
    with pytest.raises(AssertionError) as e:
        assert_conforms(x, "fp8_block", q, layout="te", name="my_kernel")
    # TE's [kb][i] entry (1, 2) is compact entry [2, 1]: row 2's second 128-block.
    assert str(e.value).startswith("FAIL my_kernel [cpu]: rowwise_scale_inv: 1 of 288 elements differ; "
                                   "first at [1, 2] (compact [2, 1])")


def test_mxfp4_shapes_and_the_torchao_vectors(tmp_path):
    """MXFP4 (VECTORS.md): data [M, ceil(K/2)] and x^T's [K, ceil(M/2)], E8M0 scales per 32 (TE-padded like NVFP4's);
    the committed torchao 0.18.0 dumps verify and are identified with their scale rule."""
    x = make_x(5, 37, 45)
    q = qtc.quantize(x, "mxfp4", scale_rule="rceil")
    assert q["rowwise_data"].shape == (37, 23) and q["columnwise_data"].shape == (45, 19)
    assert q["rowwise_scale_inv"].shape == (37, 2) and q["columnwise_scale_inv"].shape == (45, 2)
    assert "amax_rowwise" not in q
    t = qtc.quantize(x, "mxfp4", layout="te")
    assert t["rowwise_scale_inv"].shape == (128, 4) and t["columnwise_scale_inv"].shape == (128, 4)
    vectors = sorted((BUNDLED.parent / "torchao" / "mxfp4").glob("*.safetensors"))
    assert len(vectors) >= 40
    for v in vectors:
        tensors, metadata = qtc.load_vector(str(v))
        r = qtc.verify(tensors, **metadata)
        assert r.passed, r.line
    ident = qtc.identify(str(vectors[0]))
    assert ident.verdict == "OK" and ident.claimed.startswith("torchao+"), ident


def test_bf16_round_trip_without_ml_dtypes(monkeypatch, tmp_path):
    monkeypatch.setattr(qtc, "_ml", None)  # as in a venv without ml_dtypes
    bits = (make_x(16, 32, 64).view(np.uint32) >> 16).astype(np.uint16)
    x = bits.view(qtc.BF16Bits)  # BF16 by its type, not a U16 array
    q = qtc.quantize(x, "mxfp8")
    path = tmp_path / "bf16.safetensors"
    qtc.save_vector(path, {"x": x, **q}, {"recipe": "mxfp8"})
    tensors, md = qtc.load_vector(path)
    assert isinstance(tensors["x"], qtc.BF16Bits)
    np.testing.assert_array_equal(np.asarray(tensors["x"]), bits)
    assert qtc.verify(tensors, **md).passed
    np.testing.assert_array_equal(tensors["x"].to_float32(), (bits.astype(np.uint32) << 16).view(np.float32))
    r = qtc.verify({**tensors, "x": bits}, **md)  # a plain uint16 array stays U16: refused, not misread
    assert r.verdict == "error" and "U16" in r.message


def test_nd_inputs_are_flattened_as_te_does():
    x3 = make_x(17, 4 * 32, 96).reshape(4, 32, 96)
    a = qtc.quantize(x3, "nvfp4")
    b = qtc.quantize(x3.reshape(128, 96), "nvfp4")
    assert a["rowwise_data"].shape == (128, 48)
    for k in b:
        np.testing.assert_array_equal(a[k], b[k])
    assert qtc.verify({"x": x3, **a}, recipe="nvfp4").passed
# ---- Hostile inputs (issue 21) ----------------------------------------------------------------------

def _raw_vector(path, tensors, metadata):
    """A safetensors file written by hand: zero-size tensors of any declared shape (NumPy cannot hold them all)."""
    import json
    import struct

    header = {name: {"dtype": dtype, "shape": shape, "data_offsets": [0, 0]} for name, (dtype, shape) in tensors.items()}
    header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text)


@pytest.mark.parametrize("m,k", [(2**62, 0), (0, 2**62), (2**63 - 1, 0), (0, 2**63 - 1), (2**40, 0)])
def test_verify_path_agrees_with_the_cli_on_huge_empty_shapes(tmp_path, qtc_binary, m, k):
    import subprocess

    path = tmp_path / "v.safetensors"
    _raw_vector(path, {"x": ("F32", [m, k]), "rowwise_data": ("U8", [m, k]), "rowwise_scale_inv": ("U8", [m, (k + 31) // 32])},
                {"recipe": "mxfp8", "columnwise": "0"})
    cli = subprocess.run([qtc_binary, "verify", str(path)], capture_output=True, text=True)
    r = qtc.verify(path)
    assert {0: "pass", 1: "fail", 2: "error"}[cli.returncode] == r.verdict, (cli.stdout, r.line)
    if r.verdict != "pass":
        assert r.line in cli.stdout


def test_nul_in_a_path_is_an_error(tmp_path):
    bad = str(tmp_path / "a.safetensors") + "\0.txt"
    with pytest.raises(ValueError, match="NUL"):
        qtc.load_vector(bad)
    with pytest.raises(ValueError, match="NUL"):
        qtc.save_vector(bad, {"x": make_x(0)}, {"recipe": "mxfp8"})
    with pytest.raises(ValueError, match="NUL"):
        qtc.verify(bad)
    assert not (tmp_path / "a.safetensors").exists()


def test_schema_other_than_1_is_refused_as_the_cli_does():
    x = make_x(1)
    with pytest.raises(ValueError, match="qtc.schema"):
        qtc.quantize(x, "mxfp8", **{"qtc.schema": "2"})
    q = qtc.quantize(x, "mxfp8")
    with pytest.raises(ValueError, match="qtc.schema"):
        qtc.dequantize(q, "mxfp8", x.shape, **{"qtc.schema": "2"})
    assert qtc.verify({"x": x, **q}, recipe="mxfp8", **{"qtc.schema": "2"}).verdict == "error"


def test_non_integer_shape_is_refused():
    x = make_x(2)
    q = qtc.quantize(x, "mxfp8")
    for shape in [(x.shape[0] + 0.5, x.shape[1]), (x.shape[0], float(x.shape[1])), (True, x.shape[1]), ("64", 64)]:
        with pytest.raises(ValueError, match="must be an integer"):
            qtc.dequantize(q, "mxfp8", shape)
    assert qtc.dequantize(q, "mxfp8", (np.int64(x.shape[0]), x.shape[1])).shape == x.shape


def test_outputs_are_regular_files_only(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    for name in ("fifo", "link"):
        with pytest.raises(ValueError, match="output-regular-file"):
            qtc.save_vector(tmp_path / name, {"x": make_x(3)}, {"recipe": "mxfp8"})
    assert not (tmp_path / "target").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "link"]


def test_hybrid_planes_quantize_and_verify():
    # TE's HybridQuantizer (conformance/README.md, Hybrid planes): MXFP8 rowwise, NVFP4 columnwise of the dequantized
    # rowwise plane, which comes back in x's dtype; a changed columnwise byte fails naming the columnwise plane.
    x = make_x(3)
    md = dict(rowwise={"recipe": "mxfp8"}, columnwise={"recipe": "nvfp4"}, columnwise_source="rowwise_dequantized")
    q = qtc.quantize(x, "hybrid", **md)
    assert set(q) == {"rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv", "amax_columnwise",
                      "columnwise_source"}
    assert q["columnwise_source"].shape == x.shape and q["columnwise_data"].shape == (K, M // 2)
    r = qtc.verify({"x": x, **q}, recipe="hybrid", **md)
    assert r.passed, r.line
    bad = dict(q)
    bad["columnwise_data"] = q["columnwise_data"].copy()
    bad["columnwise_data"][0, 0] ^= 0x1
    r = qtc.verify({"x": x, **bad}, recipe="hybrid", **md)
    assert r.verdict == "fail" and "columnwise plane" in r.message and r.mismatches["columnwise_data"] > 0
    # The fused grouped MXFP8 requantization's F32 source; an FP8 tensor plane's scale under its plane's name.
    g = qtc.quantize(x, "hybrid", rowwise={"recipe": "mxfp8"}, columnwise={"recipe": "fp8_tensor"})
    assert "columnwise.scale_inv" in g and "columnwise_source" not in g
    with pytest.raises(ValueError, match="hybrid-source-dtype"):
        qtc.quantize(x, "hybrid", rowwise={"recipe": "mxfp8"}, columnwise={"recipe": "mxfp8"}, columnwise_source_dtype="f32")
