#!/usr/bin/env python3
"""Checks qtc's model of XLA CPU's float32 reduce-max (profile jax, peer_codec.hpp lane_block_amax /
lane_tensor_amax) against JAX itself, on inputs holding NaNs:

    /work/venv-peers/bin/python conformance/peers/jax_lane_probe.py

* jnp.max(jnp.abs(x), axis=-1) over blocks of 16 / 32 (what scaled_matmul_stablehlo.quantize computes) of a tensor
  of >= 4096 elements: 8 lanes, acc = v[0:8], acc = maxps(acc, v[8c:8c+8]), lanes 0-3 with 4-7, 0-1 with 2-3, 0 with
  1, then maxps(acc, -Inf); maxps(a, b) = a > b ? a : b. Below 4096 elements XLA propagates NaN.
* jnp.max(jnp.abs(x)) of the whole tensor (>= 4096 elements): chunks of 32768 elements, each as above over the flat
  index (lane = index mod 8), the chunk results combined with maxps from -Inf.
Prints the mismatch counts (0 expected) and exits 1 on any.
"""
import sys

import numpy as np
import jax
import jax.numpy as jnp

jax.config.update("jax_platforms", "cpu")


def mx(a, b):
    return np.where(a > b, a, b)


def lanes(v):  # v: [rows, 8 * c]
    acc = v[:, 0:8]
    for c in range(8, v.shape[1], 8):
        acc = mx(acc, v[:, c:c + 8])
    for w in (4, 2, 1):
        acc = mx(acc[:, :w], acc[:, w:2 * w])
    return acc[:, 0]


def same(a, b):
    a, b = np.float32(a), np.float32(b)
    return a.view(np.uint32) == b.view(np.uint32) or (np.isnan(a) and np.isnan(b))


def main():
    g = np.random.default_rng(25)
    bad = total = 0
    for block in (16, 32):
        for shape in ((128, 32), (64, 96), (256, 512)):
            x = np.abs(g.standard_normal(shape).astype(np.float32)).reshape(-1, block)
            for b in range(x.shape[0]):
                if b % 4:
                    x[b, g.choice(block, b % 4, replace=False)] = np.nan
            t = np.asarray(jnp.max(jnp.abs(jnp.asarray(x.reshape(shape[0], -1, block))), axis=-1)).reshape(-1)
            r = mx(lanes(x), np.float32(-np.inf))
            bad += sum(0 if same(t[i], r[i]) else 1 for i in range(len(t)))
            total += len(t)
    print(f"block maxima: {bad} of {total} differ")
    bad_t = 0
    for shape in ((128, 32), (64, 96), (256, 256), (256, 512)):
        for _ in range(20):
            x = (g.standard_normal(shape) * np.exp2(g.integers(-5, 5, shape))).astype(np.float32)
            x.flat[g.choice(x.size, int(g.integers(1, 6)), replace=False)] = np.nan
            t = np.asarray(jnp.max(jnp.abs(jnp.asarray(x))))
            f = np.abs(x).ravel()
            acc = np.float32(-np.inf)
            for c in range(0, f.size, 32768):
                acc = mx(acc, lanes(f[c:c + 32768].reshape(1, -1))[0])
            bad_t += 0 if same(t, mx(acc, np.float32(-np.inf))) else 1
    print(f"tensor maxima: {bad_t} of 80 differ")
    return 1 if bad or bad_t else 0


if __name__ == "__main__":
    sys.exit(main())
