"""The six error-path calls of issue 23 in a child interpreter (python -X faulthandler): a C++ error must leave as
ValueError with the rule's message (or, for verify, as an error verdict), never kill the interpreter. On the H200's
stock image (g++ 13, Python 3.12) four of them once ended in SIGSEGV; run in-process, such a crash would take the
whole pytest session with it, so the calls run in a child and a crash fails the test naming the call, with the
child's Python traceback (faulthandler) in the message. Plus the two linkage rules that fixed it."""
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]

PRELUDE = """
import numpy as np, qtc
def expect(f, needle):
    try:
        f()
    except ValueError as e:
        assert needle in str(e), str(e)
        assert "[check `" not in str(e), str(e)
        print("ValueError:", e)
        return
    raise SystemExit("no ValueError")
"""

CALLS = {
    # a recipe rule broken (QTC_CHECK in the reference, a number in the message)
    "nvfp4_m30": "expect(lambda: qtc.quantize(np.ones((30, 64), np.float32), 'nvfp4'), "
                 "\"rule 'nvfp4-input-m16': NVFP4 needs M % 16 == 0, got M = 30\")",
    # a shape check in the module itself
    "x_of_1_dim": "expect(lambda: qtc.quantize(np.ones(64, np.float32), 'mxfp8'), 'x has shape [64]; VECTORS.md needs 2-D')",
    # QTC_FAIL in the reference (no number)
    "unknown_recipe": "expect(lambda: qtc.quantize(np.ones((32, 64), np.float32), 'nvfp5'), "
                      "\"metadata key 'recipe': unknown value 'nvfp5'\")",
    # an error thrown while the GIL is released
    "unreadable_file": "expect(lambda: qtc.load_vector('/no/such.safetensors'), '/no/such.safetensors: cannot read')",
    # verify's own errors are verdicts (caught inside the reference); a 4over6 recipe's name streams numbers
    "every_bundled_vector": textwrap.dedent(f"""
        import glob
        files = sorted(glob.glob({str(REPO / 'conformance' / 'vectors')!r} + '/**/*.safetensors', recursive=True))
        assert len(files) > 100, len(files)
        verdicts = {{}}
        for f in files:
            r = qtc.verify(f)
            verdicts[r.verdict] = verdicts.get(r.verdict, 0) + 1
        print(len(files), 'files', verdicts)
        assert any('4over6' in f for f in files)
        """),
    # the same rule error with torch imported first (torch's libraries loaded before the module)
    "torch_first": textwrap.dedent("""
        try:
            import torch
        except ImportError:
            torch = None
            print('SKIP torch is not importable')
        if torch is not None:
            expect(lambda: qtc.quantize(torch.ones(30, 64), 'nvfp4'), 'NVFP4 needs M % 16 == 0, got M = 30')
            expect(lambda: qtc.quantize(torch.ones(64), 'mxfp8'), 'VECTORS.md needs 2-D')
        """),
}


# torch last: its import is the slow part, and the calls before it run without torch's libraries loaded.
ORDER = ["nvfp4_m30", "x_of_1_dim", "unknown_recipe", "unreadable_file", "every_bundled_vector", "torch_first"]


def test_the_six_error_paths_raise_and_do_not_crash():
    """One child interpreter makes the six calls in turn (one interpreter start, not six: CI's time), printing
    `BEGIN name` / `END name`; a crash fails the test naming the call it died in, with faulthandler's traceback."""
    assert sorted(ORDER) == sorted(CALLS)
    body = "".join(f"print('BEGIN {n}', flush=True)\n{CALLS[n].strip()}\nprint('END {n}', flush=True)\n"
                   for n in ORDER)
    p = subprocess.run([sys.executable, "-X", "faulthandler", "-c", PRELUDE + body], capture_output=True, text=True,
                       timeout=600)
    out = p.stdout + p.stderr
    begun = [line.split()[1] for line in p.stdout.splitlines() if line.startswith("BEGIN ")]
    ended = [line.split()[1] for line in p.stdout.splitlines() if line.startswith("END ")]
    where = begun[-1] if begun and (not ended or ended[-1] != begun[-1]) else "after the calls"
    if p.returncode < 0:
        pytest.fail(f"the interpreter died with signal {-p.returncode} in call '{where}':\n{out[-4000:]}")
    assert p.returncode == 0, f"exit {p.returncode} in call '{where}':\n{out[-4000:]}"
    assert ended == ORDER or (ended == ORDER[:-1] and "SKIP torch" in out), out
    # four calls raise before torch_first; with torch importable, torch_first raises two more
    assert out.count("ValueError:") >= (4 if "SKIP torch" in out else 6), out

def _tool(name):
    import shutil

    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} (binutils) is not installed")
    return path


def _needed(lib):
    out = subprocess.run([_tool("readelf"), "-d", lib], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


def test_module_exports_only_its_init_function():
    """Issue 23's SIGSEGV: the module exported the libstdc++ it linked statically (the H200 image's compiler does),
    and load-time binding mixed it with the process's libstdc++.so.6 of another GCC version. The version script
    (src/qtc_python.map) keeps everything but PyInit__qtc local."""
    from qtc import _qtc

    out = subprocess.run([_tool("nm"), "-D", "--defined-only", _qtc.__file__], capture_output=True, text=True,
                         check=True).stdout
    exported = sorted(line.split()[-1] for line in out.splitlines() if line.strip())
    assert exported == ["PyInit__qtc"], f"{_qtc.__file__} exports {len(exported)} symbols, e.g. {exported[:8]}"


def test_one_cxx_runtime_in_the_module():
    """A module that carries its own C++ runtime (no libstdc++.so.6 among its NEEDED libraries) must not also need a
    shared library that brings libstdc++.so.6 (libfmt.so was one: fmt is compiled in header-only)."""
    from qtc import _qtc

    needed = _needed(_qtc.__file__)
    if any(n.startswith("libstdc++") for n in needed):
        return  # the shared C++ runtime: one copy, whichever library loads it
    ldd = _tool("ldd")
    out = subprocess.run([ldd, _qtc.__file__], capture_output=True, text=True).stdout
    paths = {line.split()[0]: line.split("=>")[1].split()[0] for line in out.splitlines() if "=>" in line}
    cxx = [n for n in needed if n in paths and os.path.exists(paths[n]) and
           any(m.startswith("libstdc++") for m in _needed(paths[n]))]
    assert not cxx, (f"{_qtc.__file__} links libstdc++ statically and also needs {cxx}, which need the shared "
                     "libstdc++.so.6: two C++ runtimes in one process (issue 23)")
