#!/usr/bin/env python3
"""On the H200: what Triton's float32 `/` computes (issue 25, the Triton group quantizers' profiles).

1. div(1, b) for every float32 mantissa b in [1, 2) (and at two other exponents) against RN(1 / b);
2. div(a, b) for random normal a, b against RN(a * div(1, b)) (is `/` a multiplication by the reciprocal?);
3. the PTX of that kernel and of the three group-quantizer kernels (division, min/max and clamp instructions).
Writes summary lines to stdout and the reciprocal's exceptions (mantissa index, signed ulp difference) to
$OUT/rcp_exceptions.npz.
"""
import os
import re
import sys

import numpy as np
import torch
import triton
import triton.language as tl

sys.path.insert(0, "conformance/peers")
from triton_group_fp8_dump import load_kernel, FMIN, FMAX, EPS  # noqa: E402


@triton.jit
def div_kernel(a_ptr, b_ptr, o_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    a = tl.load(a_ptr + i, mask=m, other=1.0)
    b = tl.load(b_ptr + i, mask=m, other=1.0)
    tl.store(o_ptr + i, a / b, mask=m)


def tdiv(a, b):
    o = torch.empty_like(a)
    ck = div_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, o, a.numel(), BLOCK=1024)
    return o, ck


def ptx_lines(ck, pat):
    return sorted({re.sub(r"%\w+", "%r", l.strip()) for l in ck.asm["ptx"].splitlines() if re.search(pat, l)})


def main():
    out = os.environ.get("OUT", "/tmp")
    n = 1 << 23
    idx = torch.arange(n, dtype=torch.int32, device="cuda")
    res = {}
    for e, base in (("e0", 0x3F800000), ("e-100", (127 - 100) << 23), ("e100", (127 + 100) << 23)):
        b = (idx + base).view(torch.float32)
        one = torch.ones_like(b)
        r, ck = tdiv(one, b)
        rn = (1.0 / b.double()).float()
        d = (r.view(torch.int32) - rn.view(torch.int32)).cpu().numpy()
        bad = np.nonzero(d)[0]
        print(f"rcp {e}: {len(bad)} of {n} mantissas differ from RN(1/b); ulp diffs {np.unique(d[bad]).tolist()[:8]}")
        res[e] = (bad.astype(np.int32), d[bad].astype(np.int8))
    same = all(np.array_equal(res["e0"][0], res[k][0]) and np.array_equal(res["e0"][1], res[k][1]) for k in res)
    print(f"rcp exceptions identical at the three exponents: {same}")
    np.savez_compressed(os.path.join(out, "rcp_exceptions.npz"), idx=res["e0"][0], ulp=res["e0"][1])
    g = torch.Generator(device="cuda").manual_seed(25)
    a = torch.randn(1 << 24, device="cuda", generator=g) * torch.exp2(torch.randint(-60, 60, (1 << 24,), device="cuda", generator=g).float())
    b = torch.randn(1 << 24, device="cuda", generator=g) * torch.exp2(torch.randint(-60, 60, (1 << 24,), device="cuda", generator=g).float())
    q, ck = tdiv(a, b)
    rcp, _ = tdiv(torch.ones_like(b), b)
    print(f"a / b == RN(a * div(1, b)): {(q.view(torch.int32) != (a * rcp).view(torch.int32)).sum().item()} of {a.numel()} differ; "
          f"== RN(a / b): {(q.view(torch.int32) != (a / b).view(torch.int32)).sum().item()} differ")
    print("div kernel PTX:", ptx_lines(ck, r"\b(div|rcp)\."))
    # the group quantizers' PTX: their division, min/max and conversion instructions
    x = torch.randn(4, 256, device="cuda")
    for path, name in ((".carry/triton/fp8_utils.py", "_per_token_group_quant_fp8"),
                       (".carry/triton/fp8_kernel.py", "_per_token_group_quant_8bit"),
                       (".carry/triton/fp8_kernel.py", "_per_token_group_quant_8bit_colmajor")):
        k = load_kernel(path, name)
        q = torch.empty_like(x, dtype=torch.float8_e4m3fn)
        s = torch.empty((4, 2), dtype=torch.float32, device="cuda")
        if name == "_per_token_group_quant_fp8":
            ck = k[(8,)](x, q, s, 128, 256, x.stride(0), EPS, fp8_min=FMIN, fp8_max=FMAX, use_ue8m0=False, BLOCK=128, num_warps=1, num_stages=1)
        elif name == "_per_token_group_quant_8bit":
            ck = k[(8,)](x, q, s, 128, 128, EPS, FMIN, FMAX, BLOCK=128, num_warps=1, num_stages=1)
        else:
            st = torch.empty((2, 4), dtype=torch.float32, device="cuda").t()
            ck = k[(8,)](x, q, st, 128, 256, st.stride(1), EPS, FMIN, FMAX, BLOCK=128, SCALE_UE8M0=False, num_warps=1, num_stages=1)
        print(f"{name} PTX:", ptx_lines(ck, r"\b(div|rcp|min|max|cvt\.rn\.satfinite)\."))
    return 0


if __name__ == "__main__":
    sys.exit(main())
