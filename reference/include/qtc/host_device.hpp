/// \file host_device.hpp
/// \brief QTC_HD: marks a function that compiles for the host and, under nvcc, for the device too (the numeric
///        core: numeric.hpp, rng.hpp). No CUDA header is needed: nvcc declares the intrinsics itself.
#pragma once

#if defined(__CUDACC__)
#define QTC_HD __host__ __device__ __forceinline__
#else
#define QTC_HD inline
#endif
