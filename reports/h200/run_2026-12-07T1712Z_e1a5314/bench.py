"""qtc.verify / quantize on CUDA tensors (the device path) against the same tensors on the host (the CPU reference),
NVFP4 and MXFP8, BF16 4096 x 4096; wall-clock medians of a few calls (figures, not a test)."""
import statistics
import time

import torch

import qtc

def med(f, n):
    ts = []
    for _ in range(n):
        torch.cuda.synchronize(); t = time.perf_counter(); f(); torch.cuda.synchronize(); ts.append(time.perf_counter() - t)
    return statistics.median(ts)

print("device:", torch.cuda.get_device_name(0))
x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
for recipe in ("nvfp4", "mxfp8"):
    out = qtc.quantize(x, recipe)
    qtc.verify({"x": x, **out}, recipe=recipe)
    gq = med(lambda: qtc.quantize(x, recipe), 5)
    gv = med(lambda: qtc.verify({"x": x, **out}, recipe=recipe), 5)
    xc = x.cpu(); oc = {k: v.cpu() for k, v in out.items()}
    cv = med(lambda: qtc.verify({"x": xc, **oc}, recipe=recipe), 1)
    assert qtc.verify({"x": xc, **oc}, recipe=recipe).passed
    print(f"{recipe} 4096x4096 bf16: quantize cuda {gq*1e3:.2f} ms; verify cuda {gv*1e3:.2f} ms, host {cv*1e3:.0f} ms")
