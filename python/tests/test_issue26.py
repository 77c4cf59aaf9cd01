"""Issue 26 from Python: checkpoints in their conventions, value equivalence, admissible stochastic rounding."""
import os

import numpy as np
import pytest

import qtc

HERE = os.path.dirname(os.path.abspath(__file__))
CKPT = os.path.join(HERE, "..", "..", "conformance", "checkpoints")


def test_checkpoint_fixture_is_consistent():
    r = qtc.check_checkpoint(os.path.join(CKPT, "modelopt_nvfp4"), reference=os.path.join(CKPT, "reference_bf16"),
                             profile="te")
    assert r["exit_code"] == 0, r["text"]
    assert {t["convention"] for t in r["tensors"]} == {"modelopt nvfp4"}
    assert len(r["tensors"]) == 7


def test_ct_mxfp4_checkpoint_is_torchao_even_bit_for_bit():
    r = qtc.check_checkpoint(os.path.join(CKPT, "ct_mxfp4"), reference=os.path.join(CKPT, "reference_bf16"),
                             profile="torchao")
    assert r["exit_code"] == 0, r["text"]
    assert r["detected_by"] == "config.json has a quantization_config (quant_method compressed-tensors)", r["detected_by"]
    for t in r["tensors"]:
        assert any("bit for bit those of qtc mxfp4_even_torchao_rowonly profile torchao" in n for n in t["notes"]), r["text"]


def test_checkpoint_hostile_is_an_error_not_an_exception(tmp_path):
    bad = tmp_path / "model.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    (tmp_path / "config.json").write_text("{}")
    r = qtc.check_checkpoint(tmp_path)
    assert r["exit_code"] == 2 and r["errors"], r


def test_equivalent_verdict():
    x = np.zeros((32, 64), dtype=np.float32)
    x[1:] = np.random.default_rng(3).standard_normal((31, 64)).astype(np.float32)
    out = qtc.quantize(x, "mxfp8")
    data = np.array(out["rowwise_data"], copy=True)
    data[0, 3] = 0x80  # -0.0 for +0.0
    res = qtc.verify({"x": x, "rowwise_data": data, "rowwise_scale_inv": out["rowwise_scale_inv"]}, recipe="mxfp8")
    assert res.verdict == "equivalent", res.message
    assert "-0.0 and +0.0 decode to the same zero" in res.message


def test_stochastic_rounding_admissible_and_round_to_nearest_not():
    x = np.random.default_rng(5).standard_normal((128, 256)).astype(np.float32)
    sr = qtc.quantize(x, "nvfp4", stochastic_rounding=1, seed=11)
    rn = qtc.quantize(x, "nvfp4")
    keys = ("rowwise_data", "rowwise_scale_inv", "amax_rowwise")
    good = qtc.check_stochastic_rounding({"x": x, **{k: sr[k] for k in keys}}, recipe="nvfp4", stochastic_rounding=1)
    assert good["admissible"], good["message"]
    bad = qtc.check_stochastic_rounding({"x": x, **{k: rn[k] for k in keys}}, recipe="nvfp4", stochastic_rounding=1)
    assert not bad["admissible"] and "unbiasedness rejected" in bad["message"]
