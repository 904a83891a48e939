// 3D complex FFT (single precision) of x-fastest volumes of any size, on pocketfft (any length: mixed radix and
// Bluestein), four lines at a time in one SIMD vector (SSE natively, simd128 in wasm). 1D transforms run along each
// axis; the lines of an axis are shared between std::thread workers when that pays (bench/FFT.md: chosen over Eigen's
// kissfft by measurement).
#pragma once

#include <complex>
#include <cstdint>
#include <span>

#include "tessera/common/geometry.h"

namespace tessera {

using Complex = std::complex<float>;

// Forward 3D DFT in place, X[k] = sum_x v[x] e^{-2 pi i k.x/n}, unnormalised.
// data.size() == dims[0] * dims[1] * dims[2] (else Error InvalidArgument).
// every dims[a] >= 1 (else Error InvalidArgument).
// threads: the most worker threads to use, the calling thread included; 0 means hardware concurrency.
// When the platform refuses a thread (wasm pool full: std::system_error) the started ones and the caller finish the work.
// The result does not depend on the thread count (each line is transformed independently).
void fft3d_forward(std::span<Complex> data, const Dims3& dims, unsigned threads = 1);

// Inverse 3D DFT in place, normalised by 1/N (N = voxel count): fft3d_inverse(fft3d_forward(v)) == v.
// data.size() == dims[0] * dims[1] * dims[2] (else Error InvalidArgument).
// every dims[a] >= 1 (else Error InvalidArgument).
// threads: as for fft3d_forward.
void fft3d_inverse(std::span<Complex> data, const Dims3& dims, unsigned threads = 1);

// The smallest m >= max(n, 1) whose only prime factors are 2, 3 and 5 (a 2-3-5-smooth length: fast for the FFT).
int64_t fast_fft_size(int64_t n);

// Heap bytes fft3d_forward / fft3d_inverse allocate beyond the volume itself (plans, twiddles, line buffers, per thread).
// every dims[a] >= 1 (else Error InvalidArgument).
// threads: the same value that will be passed to the transform (0 = hardware concurrency); an upper bound.
uint64_t fft3d_workspace_bytes(const Dims3& dims, unsigned threads = 1);

// Number of threads (calling thread included) a transform of dims would try to use for the given request.
// every dims[a] >= 1 (else Error InvalidArgument).
unsigned fft3d_planned_threads(const Dims3& dims, unsigned threads);

}  // namespace tessera
