"""The pytest plugin (entry point pytest11 'qtc'): fixtures, the qtc_matrix marker and matrix(), failures shown
as qtc's message without qtc's frames, the console script, py.typed and the stub."""
import importlib.metadata
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import qtc
from qtc import pytest_plugin

pytest_plugins = ["pytester"]


def test_the_plugin_is_registered_as_a_pytest11_entry_point():
    eps = importlib.metadata.entry_points()
    group = eps.select(group="pytest11") if hasattr(eps, "select") else eps.get("pytest11", [])
    assert any(ep.name == "qtc" and ep.value == "qtc.pytest_plugin" for ep in group)


def test_matrix_keeps_only_valid_recipe_profile_pairs():
    ids = [p.id for p in pytest_plugin.matrix(profiles=("te", "ocp", "torchao"), families=("normal",))]
    assert "nvfp4-te-normal" in ids and "mxfp8-ocp-normal" in ids and "mxfp8-torchao-normal" in ids
    assert "nvfp4-ocp-normal" not in ids  # ocp defines MXFP8 only
    with pytest.raises(ValueError, match="unknown input family"):
        pytest_plugin.matrix(families=("gaussian",))


def test_input_families_are_deterministic_and_ragged():
    a = pytest_plugin.make_input("heavy", (33, 70), seed=5)
    assert a.shape == (33, 70) and a.dtype == np.float32
    np.testing.assert_array_equal(a, pytest_plugin.make_input("heavy", (33, 70), seed=5))
    assert not np.array_equal(a, pytest_plugin.make_input("heavy", (33, 70), seed=6))
    s = pytest_plugin.make_input("nan_inf_negzero", (64, 64))
    assert np.isnan(s).any() and np.isinf(s).any() and (np.signbit(s) & (s == 0)).any()
    z = pytest_plugin.make_input("zero_blocks", (4, 64))
    assert (z[:, 16:32] == 0).all() and (z[:, :16] != 0).any()


def test_plugin_fixtures_marker_and_failure_report(pytester):
    pytester.makepyfile(
        """
        import pytest, qtc

        @pytest.mark.qtc_matrix(recipes=["nvfp4", "mxfp8"], profiles=["te", "ocp"], families=["normal", "heavy"])
        def test_cases(qtc_recipe, qtc_profile, qtc_family, qtc_input, assert_conforms):
            x = qtc_input(qtc_family, (32, 64))
            params = {"scale_rule": "ocp_floor"} if qtc_profile == "ocp" else {}
            q = qtc.quantize(x, qtc_recipe, profile=qtc_profile, **params)
            assert_conforms(x, qtc_recipe, q, profile=qtc_profile, **params)

        def test_broken_kernel(qtc_input, assert_conforms):
            x = qtc_input("normal", (32, 64))
            q = qtc.quantize(x, "mxfp8")
            q["rowwise_data"][2, 40] ^= 1
            assert_conforms(x, "mxfp8", q, name="my_kernel")
        """
    )
    res = pytester.runpytest("-q", "-p", "no:cacheprovider", "--qtc-seed", "7")
    res.assert_outcomes(passed=6, failed=1)  # nvfp4-te x2, mxfp8-te x2, mxfp8-ocp x2; nvfp4-ocp left out
    out = res.stdout.str()
    assert "FAIL my_kernel [cpu]: rowwise_data: 1 of 2048 elements differ; first at [2, 40]" in out
    assert "qtc/testing.py" not in out and "def assert_conforms" not in out  # no qtc frames
    assert "array(" not in out  # no array reprs


def test_console_script_and_python_m_version():
    out = subprocess.run([sys.executable, "-m", "qtc", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"qtc {qtc.__version__}"


def test_console_script_verifies_vectors(tmp_path):
    x = pytest_plugin.make_input("normal", (32, 64))
    q = qtc.quantize(x, "mxfp8")
    qtc.save_vector(tmp_path / "good.safetensors", {"x": x, **q}, {"recipe": "mxfp8"})
    q["rowwise_scale_inv"][0, 0] ^= 1
    qtc.save_vector(tmp_path / "bad.safetensors", {"x": x, **q}, {"recipe": "mxfp8"})
    r = subprocess.run([sys.executable, "-m", "qtc", "verify", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == "1 passed, 1 failed"
    assert f"FAIL {tmp_path / 'bad.safetensors'} [cpu]: rowwise_scale_inv: 1 of" in r.stdout


def test_package_is_typed():
    root = pathlib.Path(qtc.__file__).parent
    assert (root / "py.typed").exists() and (root / "_qtc.pyi").exists()
