#!/usr/bin/env python3
"""NVFP4 1x16 quantization of a 4096x4096 BF16 tensor (rowwise + columnwise, one global amax) from Python: qtc's
reference (qtc.quantize) against TransformerEngine's pure-PyTorch reference NVFP4QuantizerRef, which TE's exact
tests compare its kernels with, on the same machine and the same number of threads. Also checks that both produce
the same bits (qtc's te_pyref profile follows that reference).

TransformerEngine's Python sources come from its PyPI wheel (pure Python, py3-none-any), downloaded at run time
with pip into a temporary folder (or --te-wheel PATH); only custom_recipes/ is loaded, with stand-ins for the two
base classes it imports from TE's compiled package. Nothing of TE is stored in this repository.

  python bench_nvfp4.py [--size 4096] [--reps 5] [--threads 2] [--te-version 2.20.2 | --te-wheel PATH]
Needs: numpy, torch (CPU is enough), qtc (pip install ./python).
"""
import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
import zipfile

import numpy as np
import torch

import qtc


def load_te_reference(wheel: str, folder: str):
    """Loads transformer_engine/pytorch/custom_recipes/reference_nvfp4.py from the wheel without TE's C++ parts."""
    with zipfile.ZipFile(wheel) as z:
        members = [n for n in z.namelist() if n.startswith("transformer_engine/pytorch/custom_recipes/")]
        if not any(n.endswith("reference_nvfp4.py") for n in members):
            raise SystemExit(f"{wheel} has no custom_recipes/reference_nvfp4.py (TransformerEngine >= 2.9 needed)")
        z.extractall(folder, members)

    def package(name, path=None):
        m = types.ModuleType(name)
        m.__path__ = [path] if path else []
        sys.modules[name] = m
        return m

    package("transformer_engine")
    package("transformer_engine.pytorch")
    package("transformer_engine.pytorch.tensor")
    qt = types.ModuleType("transformer_engine.pytorch.quantized_tensor")

    class Quantizer:  # the attributes NVFP4QuantizerRef's constructor sets through its base class
        def __init__(self, rowwise=True, columnwise=True):
            self.rowwise_usage = rowwise
            self.columnwise_usage = columnwise
            self.internal = False

    class QuantizedTensorStorage:
        pass

    qt.Quantizer, qt.QuantizedTensorStorage = Quantizer, QuantizedTensorStorage
    sys.modules[qt.__name__] = qt
    tu = types.ModuleType("transformer_engine.pytorch.tensor.utils")
    tu.is_custom = lambda *a, **k: False
    sys.modules[tu.__name__] = tu
    rec = os.path.join(folder, "transformer_engine", "pytorch", "custom_recipes")
    package("transformer_engine.pytorch.custom_recipes", rec)
    mods = {}
    for name in ("reference_utils", "gemm", "reference_nvfp4"):
        full = f"transformer_engine.pytorch.custom_recipes.{name}"
        spec = importlib.util.spec_from_file_location(full, os.path.join(rec, f"{name}.py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[full] = mod
        spec.loader.exec_module(mod)
        setattr(sys.modules["transformer_engine.pytorch.custom_recipes"], name, mod)
        mods[name] = mod
    return mods["reference_nvfp4"], mods["reference_utils"]


def timed(fn, reps):
    fn()  # warm-up
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), ts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--te-version", default="2.20.2")
    ap.add_argument("--te-wheel", help="a transformer_engine wheel already downloaded")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = a.te_wheel
        if wheel is None:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp,
                            f"transformer_engine=={a.te_version}"], check=True)
            wheel = next(os.path.join(tmp, f) for f in os.listdir(tmp) if f.endswith(".whl"))
        ref, utils = load_te_reference(wheel, tmp)

    n = a.size
    g = torch.Generator().manual_seed(1234)
    x = (torch.randn(n, n, generator=g) * 4.0).to(torch.bfloat16)
    te_q = ref.NVFP4QuantizerRef(dtype=utils.Fp4Formats.E2M1, rowwise=True, columnwise=True)

    def run_te():
        return te_q._quantize(x)

    def run_qtc():
        return qtc.quantize(x, "nvfp4", profile="te_pyref")

    qx, sx, qx_t, sx_t, amax_r, amax_c = run_te()
    out = run_qtc()
    same = {
        "rowwise_data": np.array_equal(qx.view(torch.uint8).numpy(), out["rowwise_data"]),
        "rowwise_scale_inv": np.array_equal(sx.view(torch.uint8)[:n, : n // 16].numpy(), out["rowwise_scale_inv"]),
        "columnwise_data": np.array_equal(qx_t.view(torch.uint8).numpy(), out["columnwise_data"]),
        "columnwise_scale_inv": np.array_equal(sx_t.view(torch.uint8)[:n, : n // 16].numpy(), out["columnwise_scale_inv"]),
        "amax": float(amax_r.reshape(-1)[0]) == float(out["amax_rowwise"][0]),
    }
    te_s, te_all = timed(run_te, a.reps)
    qtc_s, qtc_all = timed(run_qtc, a.reps)
    print(f"NVFP4 1x16 quantize, {n}x{n} BF16, rowwise + columnwise, {a.threads} threads, median of {a.reps} "
          f"(torch {torch.__version__}, TransformerEngine {os.path.basename(wheel)} NVFP4QuantizerRef)")
    print(f"  TransformerEngine PyTorch reference: {te_s:8.3f} s   runs {', '.join(f'{t:.3f}' for t in te_all)}")
    print(f"  qtc.quantize (C++ reference):        {qtc_s:8.3f} s   runs {', '.join(f'{t:.3f}' for t in qtc_all)}")
    print(f"  speed-up: {te_s / qtc_s:.1f}x; same bits: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in same.items()))
    return 0 if all(same.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
