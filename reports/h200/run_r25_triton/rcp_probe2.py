#!/usr/bin/env python3
"""On the H200 (issue 25, r25): Triton's float32 1 / b (div.full.f32 = rcp.approx) against the table model
RN(1 / b) + table[mantissa] (rcp_exceptions.npz, measured at exponents 0, -100, +100) at every exponent, negative b,
subnormal b, |b| >= 2^126, and the specials. Prints one summary line per group."""
import sys
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def div_kernel(a_ptr, b_ptr, o_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    a = tl.load(a_ptr + i, mask=m, other=1.0)
    b = tl.load(b_ptr + i, mask=m, other=1.0)
    tl.store(o_ptr + i, a / b, mask=m)


def tdiv(a, b):
    o = torch.empty_like(a)
    div_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, o, a.numel(), BLOCK=1024)
    return o


def main():
    d = np.load(sys.argv[1])
    n = 1 << 23
    delta = torch.zeros(n, dtype=torch.int32, device="cuda")
    delta[torch.from_numpy(d["idx"].astype(np.int64)).cuda()] = torch.from_numpy(d["ulp"].astype(np.int32)).cuda()
    idx = torch.arange(n, dtype=torch.int32, device="cuda")
    bad_exp, worst = [], 0
    for sign in (0, 1):
        for e in range(1, 253):  # |b| in [2^-126, 2^126): a normal result
            bits = idx + (e << 23)
            if sign:
                bits = bits | -2**31
            b = bits.view(torch.float32)
            r = tdiv(torch.ones_like(b), b)
            rn = (1.0 / b.double()).float()
            dd = r.view(torch.int32) - rn.view(torch.int32)
            k = int((dd != delta).sum().item())
            if k:
                bad_exp.append((sign, e - 127, k))
                worst = max(worst, k)
    print(f"table model at sign +-, exponents -126..125: {len(bad_exp)} of 504 binades differ; first {bad_exp[:6]}")
    for e in (0, 253, 254):  # subnormal b, |b| in [2^126, 2^128)
        b = (idx + (e << 23)).view(torch.float32)
        r = tdiv(torch.ones_like(b), b)
        rn = (1.0 / b.double()).float()
        model = (rn.view(torch.int32) + (delta if e else 0)).view(torch.float32)
        if e == 0:
            model = rn
        dr = (r.view(torch.int32) != rn.view(torch.int32)).sum().item()
        dm = (r.view(torch.int32) != model.view(torch.int32)).sum().item()
        zero = (r == 0).sum().item()
        inf = torch.isinf(r).sum().item()
        print(f"biased exponent {e}: vs RN {dr} differ, vs RN + table {dm} differ; results 0: {zero}, Inf: {inf}; "
              f"samples {[hex(v & 0xFFFFFFFF) for v in r.view(torch.int32)[[1, 1 << 20, (1 << 22) + 5, n - 1]].tolist()]}")
    sp = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan")], device="cuda")
    r = tdiv(torch.ones_like(sp), sp)
    print("1 / [0, -0, Inf, -Inf, NaN] =", [hex(v & 0xFFFFFFFF) for v in r.view(torch.int32).tolist()])
    return 0


if __name__ == "__main__":
    sys.exit(main())
