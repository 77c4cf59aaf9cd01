"""Paths the tests share: the repository's bundled vectors and, when present, the shared TE-layout vectors."""
import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUNDLED = REPO / "conformance" / "vectors" / "te"
TE_LAYOUT = REPO / "conformance" / "vectors" / "te_layout"


@pytest.fixture
def qtc_binary():
    """The `qtc` command of the build that runs these tests (ctest sets QTC_BINARY)."""
    path = os.environ.get("QTC_BINARY")
    if not path or not os.path.exists(path):
        pytest.skip("QTC_BINARY is not set to the qtc command (ctest sets it)")
    return path
