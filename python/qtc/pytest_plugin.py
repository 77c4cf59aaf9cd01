"""The pytest plugin of qtc (entry point ``pytest11``: active once the package is installed; ``-p no:qtc`` turns it
off). It gives:

* fixtures ``qtc_seed`` (``--qtc-seed`` or the environment's ``QTC_SEED``, default 0; printed in the report header),
  ``qtc_input`` (a factory: ``qtc_input("heavy", (M, K), dtype="bfloat16")``, deterministic in the seed) and
  ``assert_conforms`` (``qtc.testing.assert_conforms``);
* a marker ``@pytest.mark.qtc_matrix(recipes=..., profiles=..., families=...)`` that parametrizes the fixtures
  ``qtc_recipe``, ``qtc_profile`` and ``qtc_family`` a test asks for over the valid recipe x profile pairs (a
  profile that does not define a recipe, e.g. ``ocp`` for NVFP4, is left out) and the input families; ids read
  ``nvfp4-te-normal``;
* ``matrix(...)``: the same cases as ``pytest.param`` objects, for ``@pytest.mark.parametrize``;
* failures of ``assert_conforms`` shown as qtc's message (``ConformanceError``), without qtc's frames.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import pytest

RECIPES: Tuple[str, ...] = ("nvfp4", "mxfp8", "fp8_block", "fp8_tensor")
PROFILES: Tuple[str, ...] = ("te", "te_pyref", "ocp", "torchao")
FAMILIES: Tuple[str, ...] = ("normal", "heavy", "zero_blocks", "tiny", "huge", "nan_inf_negzero")

_valid_cache: dict = {}


def valid(recipe: str, profile: str) -> bool:
    """Whether qtc defines ``recipe`` for ``profile`` (MXFP8 under ocp takes scale_rule=ocp_floor)."""
    key = (recipe, profile)
    if key not in _valid_cache:
        import qtc

        params = {"scale_rule": "ocp_floor"} if (recipe, profile) == ("mxfp8", "ocp") else {}
        try:
            qtc.quantize(np.zeros((32, 128), dtype=np.float32), recipe, profile=profile, **params)
            _valid_cache[key] = True
        except ValueError:
            _valid_cache[key] = False
    return _valid_cache[key]


def recipe_params(recipe: str, profile: str) -> dict:
    """The parameters a (recipe, profile) case needs besides its names (MXFP8 under ocp: scale_rule=ocp_floor)."""
    return {"scale_rule": "ocp_floor"} if (recipe, profile) == ("mxfp8", "ocp") else {}


def matrix(recipes: Iterable[str] = RECIPES, profiles: Iterable[str] = PROFILES,
           families: Iterable[str] = ("normal",)) -> List[Any]:
    """``pytest.param(recipe, profile, family, id="recipe-profile-family")`` for every valid recipe x profile pair and
    every family: ``@pytest.mark.parametrize("recipe,profile,family", matrix(...))``."""
    out = []
    for r in recipes:
        for p in profiles:
            if not valid(r, p):
                continue
            for f in families:
                if f not in FAMILIES:
                    raise ValueError(f"unknown input family {f!r} (qtc has {', '.join(FAMILIES)})")
                out.append(pytest.param(r, p, f, id=f"{r}-{p}-{f}"))
    return out


def make_input(family: str, shape: Sequence[int], dtype: str = "float32", seed: int = 0) -> np.ndarray:
    """A deterministic input of one family: ``normal`` (sd 3), ``heavy`` (log-normal magnitudes), ``zero_blocks``
    (every other 16-element block zero), ``tiny`` (around E4M3's and FP32's smallest normals), ``huge`` (near
    FP32's and BF16's largest values), ``nan_inf_negzero`` (normal with NaN, +-Inf and -0.0 sprinkled in)."""
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFFFFFFFFFF, FAMILIES.index(family) if family in FAMILIES else 99])
    shape = tuple(int(s) for s in shape)
    n = rng.standard_normal(shape)
    if family == "normal":
        v = n * 3.0
    elif family == "heavy":
        v = n * np.exp(4.0 * rng.standard_normal(shape))
    elif family == "zero_blocks":
        v = n * 3.0
        cols = np.arange(shape[-1]) if shape else np.arange(1)
        v = np.where((cols // 16) % 2 == 1, 0.0, v)
    elif family == "tiny":
        v = n * np.where(rng.random(shape) < 0.5, 2.0 ** -9, 2.0 ** -126)
    elif family == "huge":
        v = np.sign(n) * 3.0e38 * (0.25 + 0.75 * rng.random(shape))
    elif family == "nan_inf_negzero":
        v = n * 3.0
        u = rng.random(shape)
        v = np.where(u < 0.01, np.nan, v)
        v = np.where((u >= 0.01) & (u < 0.02), np.inf, v)
        v = np.where((u >= 0.02) & (u < 0.03), -np.inf, v)
        v = np.where((u >= 0.03) & (u < 0.05), -0.0, v)
    else:
        raise ValueError(f"unknown input family {family!r} (qtc has {', '.join(FAMILIES)})")
    v = v.astype(np.float32)
    if dtype == "float32":
        return v
    if dtype == "float16":
        return v.astype(np.float16)
    if dtype == "bfloat16":
        try:
            import ml_dtypes

            return v.astype(ml_dtypes.bfloat16)
        except ImportError:
            import qtc

            bits = v.view(np.uint32)
            rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
            rounded = np.where(np.isnan(v), np.uint16(0x7FC0), rounded)
            return rounded.view(qtc.BF16Bits)
    raise ValueError(f"dtype must be float32, float16 or bfloat16, got {dtype!r}")


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("qtc")
    group.addoption("--qtc-seed", default=None, help="seed of qtc's input families (default: $QTC_SEED or 0)")


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "qtc_matrix(recipes=..., profiles=..., families=...): parametrize the "
                            "fixtures qtc_recipe, qtc_profile and qtc_family over qtc's valid cases")


def _seed(config: Any) -> int:
    v = config.getoption("--qtc-seed") or os.environ.get("QTC_SEED") or "0"
    return int(v, 0)


def pytest_report_header(config: Any) -> str:
    return f"qtc: seed {_seed(config):#x} (--qtc-seed / QTC_SEED reproduces the inputs)"


def pytest_generate_tests(metafunc: Any) -> None:
    wanted = [n for n in ("qtc_recipe", "qtc_profile", "qtc_family") if n in metafunc.fixturenames]
    if not wanted:
        return
    mark = metafunc.definition.get_closest_marker("qtc_matrix")
    kw = dict(mark.kwargs) if mark else {}
    cases = matrix(kw.get("recipes", RECIPES), kw.get("profiles", ("te",)), kw.get("families", ("normal",)))
    # Only the fixtures the test asks for; cases that differ only in the others collapse.
    seen, params = set(), []
    for c in cases:
        r, p, f = c.values
        vals = tuple(v for n, v in zip(("qtc_recipe", "qtc_profile", "qtc_family"), (r, p, f)) if n in wanted)
        if vals in seen:
            continue
        seen.add(vals)
        params.append(pytest.param(*vals, id="-".join(vals)))
    metafunc.parametrize(",".join(wanted), params)


@pytest.fixture
def qtc_seed(request: Any) -> int:
    """The seed of this run's inputs (--qtc-seed, else $QTC_SEED, else 0)."""
    return _seed(request.config)


@pytest.fixture
def qtc_input(qtc_seed: int) -> Callable[..., np.ndarray]:
    """``qtc_input(family, shape, dtype="float32", seed=None)``: make_input with this run's seed by default."""

    def make(family: str, shape: Sequence[int], dtype: str = "float32", seed: Optional[int] = None) -> np.ndarray:
        return make_input(family, shape, dtype, qtc_seed if seed is None else seed)

    return make


@pytest.fixture
def assert_conforms() -> Callable[..., Any]:
    """qtc.testing.assert_conforms."""
    from qtc.testing import assert_conforms as f

    return f


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any):
    outcome = yield
    rep = outcome.get_result()
    if call.excinfo is None or rep.passed:
        return
    try:
        from qtc.testing import ConformanceError
    except ImportError:  # pragma: no cover
        return
    if call.excinfo.errisinstance(ConformanceError) and item.config.getoption("tbstyle", "auto") == "auto":
        # qtc's message in full, then the test's own line: the arrays' reprs and qtc's frames are noise here.
        e = call.excinfo.value
        own = [t for t in call.excinfo.traceback if str(t.path) == str(getattr(item, "path", ""))]
        where = f"{own[-1].path}:{own[-1].lineno + 1}" if own else item.nodeid
        rep.longrepr = f"{where}: ConformanceError\n{e}"
