#!/usr/bin/env python3
"""Pack the measured exceptions of sm_90's rcp.approx.f32 into reference/data/rcp_approx_sm90.deflate (issue 25).

Input: an npz with `idx` (int32, the float32 mantissas m in [0, 2^23) whose reciprocal 1 / (1 + m 2^-23) under
PTX rcp.approx / div.full.f32 is not RN(1 / b)) and `ulp` (int8, the signed difference of the result's bits from
RN's, +-1), as reports/h200/run_s25b_triton/rcp_probe.py measured them on the H200 (the same set at exponents 0,
-100 and +100). Output: the table of 2^23 two-bit entries (0: RN, 1: RN + 1 ulp, 2: RN - 1 ulp; entry m in bits
2(m % 4) of byte m / 4), compressed as a raw DEFLATE stream (RFC 1951, Python's zlib with wbits -15), which
reference/src/peers/rcp_approx.cpp inflates; reference/CMakeLists.txt embeds the file in qtc_ref.

    python3 scripts/rcp_table.py reports/h200/run_s25b_triton/rcp_exceptions.npz reference/data/rcp_approx_sm90.deflate
"""
import sys
import zlib

import numpy as np


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    d = np.load(sys.argv[1])
    idx, ulp = d["idx"].astype(np.int64), d["ulp"].astype(np.int64)
    if len(idx) != len(ulp) or not np.all(np.abs(ulp) == 1) or len(np.unique(idx)) != len(idx) or idx.min() < 0 or idx.max() >= 1 << 23:
        sys.exit(f"{sys.argv[1]}: not a table of distinct mantissas with +-1 ulp differences")
    t = np.zeros(1 << 23, np.uint8)
    t[idx] = np.where(ulp > 0, 1, 2)
    packed = (t.reshape(-1, 4).astype(np.uint32) << np.array([0, 2, 4, 6], np.uint32)).sum(1).astype(np.uint8).tobytes()
    c = zlib.compressobj(9, zlib.DEFLATED, -15, 9)
    data = c.compress(packed) + c.flush()
    with open(sys.argv[2], "wb") as f:
        f.write(data)
    print(f"{len(idx)} exceptions ({int((ulp > 0).sum())} +1 ulp, {int((ulp < 0).sum())} -1 ulp); "
          f"{len(packed)} bytes packed, {len(data)} deflated -> {sys.argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
