/// \file rcp_approx.hpp
/// \brief The float32 reciprocal of NVIDIA sm_90's PTX rcp.approx.f32, as Triton's float32 `/` (div.full.f32,
///        a * rcp.approx(b)) computes it (issue 25, profiles vllm_triton / sglang_triton*: fp8.form rcp-max-mul-rcp).
///        Not correctly rounded: for 1,108,522 of the 2^23 mantissas the result is RN(1 / b) +- 1 ulp. The
///        exceptions were measured on an H200 (reports/h200/run_s25b_triton: every mantissa at exponents 0, -100
///        and +100, the same set at each), stored in reference/data/rcp_approx_sm90.deflate (scripts/rcp_table.py),
///        and checked on an H100 at every exponent -126..125 of both signs (reports/h200/run_r25_triton: 0 differ).
#pragma once
#include <cstdint>

namespace qtc {

/// The table's entry for float32 mantissa `m` (the low 23 bits): 0 when rcp.approx gives RN(1 / b), +1 or -1 for
/// the signed difference of its result's bits from RN's. Inflated once, on the first call (thread-safe).
int rcp_approx_sm90_ulp(uint32_t mantissa);

/// rcp.approx.f32(b) on sm_90 for b normal with |b| < 2^126 (a normal result): RN(1 / b)'s bits plus the table's
/// entry for b's mantissa, sign kept. +-0 -> +-Inf, +-Inf -> +-0, NaN -> 0x7FFFFFFF. Outside that domain (b subnormal,
/// |b| >= 2^126, where the hardware is not RN either: run_r25_triton) RN(1 / b); the quantizers' scales lie inside.
float rcp_approx_sm90(float b);

}  // namespace qtc
