#!/usr/bin/env python3
# \file torch_peer.py
# \brief The torch.compile peer of bench_quantize_cuda: the same NVFP4 1x16 (TE rules, rowwise + columnwise,
#        device amax) and MXFP8 E4M3 RCEIL (rowwise + columnwise) algorithms written as PyTorch ops and compiled
#        with torch.compile, timed the same way (CUDA events around each call, inputs rotated between two
#        buffers, warm-up first, median), at 16384x16384 BF16; bytes counted as in the C++ benchmark (input once
#        plus every output byte). Writes JSON (argv[1], default torch_peer.json).
import json
import statistics
import sys
import time

import torch

M = K = 16384
FLT_MAX = 3.4028234663852886e38


def e2m1_codes(v):
    """RN-even E2M1 codes (satfinite) with the sign of v; v is float32."""
    a = v.abs()
    c = ((a > 0.25).to(torch.uint8) + (a >= 0.75).to(torch.uint8) + (a > 1.25).to(torch.uint8) +
         (a >= 1.75).to(torch.uint8) + (a > 2.5).to(torch.uint8) + (a >= 3.5).to(torch.uint8) +
         (a > 5.0).to(torch.uint8))
    return c | (torch.signbit(v).to(torch.uint8) << 3)


def nvfp4_1d(t, s_enc, s_dec):
    """Blocks of 16 along the last dim of t [R, C]: packed codes [R, C/2] and E4M3 scale bytes [R, C/16]."""
    R, C = t.shape
    b = t.reshape(R, C // 16, 16)
    bamax = b.abs().amax(-1, keepdim=True)
    sf = torch.clamp(bamax * (s_enc * (1.0 / 6.0)), max=448.0).to(torch.float8_e4m3fn)
    enc = torch.clamp(1.0 / (sf.float() * s_dec), max=FLT_MAX)
    codes = e2m1_codes(b * enc).reshape(R, C // 2, 2)
    packed = codes[..., 0] | (codes[..., 1] << 4)
    return packed, sf.reshape(R, C // 16).view(torch.uint8)


def nvfp4_quantize(x):
    xf = x.float()
    amax = xf.abs().amax()
    s_enc = torch.clamp(2688.0 / amax, max=FLT_MAX)
    s_enc = torch.where((amax == 0) | (s_enc == 0), torch.ones_like(s_enc), s_enc)
    s_dec = 1.0 / s_enc
    rd, rs = nvfp4_1d(xf, s_enc, s_dec)
    cd, cs = nvfp4_1d(xf.t(), s_enc, s_dec)
    return rd, rs, cd, cs, amax


def e8m0_up(v):
    bits = v.view(torch.int32)
    e = bits >> 23
    m = bits & 0x7FFFFF
    up = (m > 0) & (e != 0xFE) & ~((e == 0) & (m <= 0x400000))
    return e + up.to(torch.int32)


def mx_quant(b, dim):
    bamax = b.abs().amax(dim, keepdim=True)
    e = e8m0_up(bamax * 0.002232142857142857)  # RN(1/448) as float32
    inv = ((254 - e).clamp(min=1) << 23).view(torch.float32)
    q = torch.clamp(b * inv, -448.0, 448.0).to(torch.float8_e4m3fn).view(torch.uint8)
    return q, e.to(torch.uint8)


def mxfp8_quantize(x):
    xf = x.float()
    rq, rs = mx_quant(xf.reshape(M, K // 32, 32), -1)
    cq, cs = mx_quant(xf.reshape(M // 32, 32, K), 1)
    return rq.reshape(M, K), rs.reshape(M, K // 32), cq.reshape(M, K), cs.reshape(M // 32, K)


def time_fn(fn, inputs, iters=20):
    for i in range(3):
        fn(inputs[i % 2])
    torch.cuda.synchronize()
    ts = []
    for i in range(iters):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn(inputs[i % 2])
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts), ts


def out_bytes(outs):
    return sum(o.numel() * o.element_size() for o in outs)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "torch_peer.json"
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(1234)
    inputs = [torch.randn(M, K, device=dev, dtype=torch.float32, generator=g).mul_(4.0).to(torch.bfloat16) for _ in range(2)]
    n = 1 << 30
    src = torch.empty(4 * n, dtype=torch.uint8, device=dev).fill_(7)
    dst = torch.empty_like(src)
    copy_ms, _ = time_fn(lambda _: dst.copy_(src), [None, None], iters=10)
    copy_gbps = 2 * src.numel() / (copy_ms * 1e-3) / 1e9
    results = {"context": {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(),
                           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "shape": [M, K],
                           "copy_4GiB_GBps": copy_gbps},
               "benchmarks": []}
    for name, fn in [("NVFP4_1x16_BF16", nvfp4_quantize), ("MXFP8_E4M3_rceil_BF16", mxfp8_quantize)]:
        cfn = torch.compile(fn)
        t0 = time.time()
        outs = cfn(inputs[0])
        torch.cuda.synchronize()
        compile_s = time.time() - t0
        ms, ts = time_fn(cfn, inputs)
        byts = inputs[0].numel() * 2 + out_bytes(outs)
        gbps = byts / (ms * 1e-3) / 1e9
        results["benchmarks"].append({"name": name + "_torch_compile", "median_ms": ms, "times_ms": ts, "bytes": byts,
                                      "GBps": gbps, "frac_of_copy": gbps / copy_gbps, "compile_s": compile_s})
        print(f"{name}: {ms:.3f} ms, {gbps:.1f} GB/s, frac_of_copy {gbps / copy_gbps:.3f} (compile {compile_s:.1f} s)",
              flush=True)
    with open(path, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
