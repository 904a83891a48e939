#include "tessera/common/fft.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <limits>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "common/parallel.h"
#include "tessera/common/error.h"

// pocketfft (Reinecke & Bell, BSD-3-Clause; the FFT of numpy and scipy; third_party/pocketfft, from Debian's python3-pythran):
// header-only C++, any length (mixed radix 2, 3, 4, 5, 7, 8, 11, generic radix, Bluestein for large primes).
// Its own threads are not used: the lines are shared out here, so that a full wasm pthread pool falls back.
// It is compiled inside tessera::fft_impl (its standard headers first), so its allocation hook below cannot meet
// another copy of pocketfft linked into the same program.
#define POCKETFFT_NO_MULTITHREADING
#define POCKETFFT_CACHE_SIZE 0
#include <array>
#include <cmath>
#include <complex>
#include <cstring>
#include <memory>
#include <stdexcept>

namespace tessera::fft_impl {

// One scratch block per thread, reused while the thread is in an axis pass.
struct ScratchBlock {
  void* data = nullptr;
  size_t bytes = 0;
  bool in_use = false;
};
// The calling thread's block during an axis pass (null outside one).
inline thread_local ScratchBlock* current_scratch = nullptr;

// pocketfft allocates a line of scratch on every exec (cfftp::pass_all). In wasm, malloc (emmalloc) has one lock
// for all threads, so two threads transforming lines fought over it line after line (the 3D FFT gained 1.45x from
// a second thread in wasm against 1.9x natively). Its allocations are routed here (unqualified lookup inside
// pocketfft::detail finds these first): in an axis pass, the thread's block; outside one, aligned_alloc / free.
namespace pocketfft::detail {
inline void* aligned_alloc(size_t alignment, size_t bytes) {
  ScratchBlock* b = current_scratch;
  if (!b || b->in_use) return std::aligned_alloc(alignment, bytes);
  if (b->bytes < bytes) {
    std::free(b->data);
    b->bytes = 0;
    b->data = std::aligned_alloc(alignment, bytes);
    if (!b->data) return nullptr;
    b->bytes = bytes;
  }
  b->in_use = true;
  return b->data;
}
// (without SSE, wasm's case, pocketfft allocates with malloc)
inline void* malloc(size_t bytes) { return aligned_alloc(alignof(std::max_align_t), bytes); }
inline void free(void* p) {
  ScratchBlock* b = current_scratch;
  if (b && p && p == b->data) {
    b->in_use = false;
    return;
  }
  std::free(p);
}
}  // namespace pocketfft::detail

#include "pocketfft/pocketfft_hdronly.hpp"

}  // namespace tessera::fft_impl

namespace tessera {

namespace {

// Four lines transformed at once, one per lane: the same IEEE operations as one line alone (-ffp-contract=off),
// so a line's result does not depend on its lane or on which lines share its vector. SSE natively, simd128 in wasm
// (scalar code without -msimd128).
using Lanes = float __attribute__((vector_size(16)));
constexpr uint64_t kLanes = 4;
using LaneComplex = fft_impl::pocketfft::detail::cmplx<Lanes>;
using Plan = fft_impl::pocketfft::detail::pocketfft_c<float>;

// Lines of a strided axis gathered per item: 16 consecutive complex floats are two 64-byte cache lines.
constexpr uint64_t kStridedBatch = 16;
// A worker thread is only worth it for this many voxels (per axis pass).
constexpr uint64_t kVoxelsPerThread = uint64_t{1} << 15;

void check_dims(const Dims3& dims, const char* what) {
  for (int a = 0; a < 3; ++a) {
    if (dims[a] <= 0) {
      throw Error(ErrorCode::InvalidArgument, std::string(what) + ": FFT dims " + std::to_string(dims[0]) + "x" +
                                                  std::to_string(dims[1]) + "x" + std::to_string(dims[2]) +
                                                  " are invalid: every dimension must be at least 1");
    }
    if (dims[a] > (int64_t{1} << 30)) {
      throw Error(ErrorCode::InvalidArgument, std::string(what) + ": FFT axis length " + std::to_string(dims[a]) +
                                                  " is too large");
    }
  }
}

uint64_t voxels(const Dims3& d) {
  return static_cast<uint64_t>(d[0]) * static_cast<uint64_t>(d[1]) * static_cast<uint64_t>(d[2]);
}

unsigned resolve_threads(const Dims3& dims, unsigned threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  const uint64_t by_size = std::max<uint64_t>(1, voxels(dims) / kVoxelsPerThread);
  return static_cast<unsigned>(std::min<uint64_t>(threads, by_size));
}

// Copies `count` (<= kLanes) lines of n values, line j at src + j * line_step, element k at + k * step, into the
// lanes of out[0..n); unused lanes are zero.
void gather(const Complex* src, uint64_t count, uint64_t line_step, uint64_t step, uint64_t n, LaneComplex* out) {
  if (count == kLanes) {
    for (uint64_t k = 0; k < n; ++k) {
      const Complex* p = src + k * step;
      const Complex a = p[0], b = p[line_step], c = p[2 * line_step], d = p[3 * line_step];
      out[k].r = Lanes{a.real(), b.real(), c.real(), d.real()};
      out[k].i = Lanes{a.imag(), b.imag(), c.imag(), d.imag()};
    }
    return;
  }
  float re[kLanes], im[kLanes];
  for (uint64_t k = 0; k < n; ++k) {
    for (uint64_t j = 0; j < kLanes; ++j) {
      const Complex v = j < count ? src[j * line_step + k * step] : Complex(0.0f, 0.0f);
      re[j] = v.real();
      im[j] = v.imag();
    }
    out[k].r = Lanes{re[0], re[1], re[2], re[3]};
    out[k].i = Lanes{im[0], im[1], im[2], im[3]};
  }
}

// The inverse of gather.
void scatter(const LaneComplex* in, uint64_t count, uint64_t line_step, uint64_t step, uint64_t n, Complex* dst) {
  if (count == kLanes) {
    for (uint64_t k = 0; k < n; ++k) {
      Complex* p = dst + k * step;
      const Lanes r = in[k].r, i = in[k].i;
      p[0] = Complex(r[0], i[0]);
      p[line_step] = Complex(r[1], i[1]);
      p[2 * line_step] = Complex(r[2], i[2]);
      p[3 * line_step] = Complex(r[3], i[3]);
    }
    return;
  }
  for (uint64_t k = 0; k < n; ++k) {
    for (uint64_t j = 0; j < count; ++j) dst[j * line_step + k * step] = Complex(in[k].r[j], in[k].i[j]);
  }
}

// One axis pass: every line along `axis` transformed, then multiplied by `scale`.
void transform_axis(Complex* base, const Dims3& dims, int axis, bool inverse, float scale, unsigned threads) {
  const uint64_t n = static_cast<uint64_t>(dims[axis]);
  uint64_t inner = 1;
  for (int a = 0; a < axis; ++a) inner *= static_cast<uint64_t>(dims[a]);
  uint64_t outer = 1;
  for (int a = axis + 1; a < 3; ++a) outer *= static_cast<uint64_t>(dims[a]);
  // Contiguous lines (x): an item is kLanes lines. Strided lines: kStridedBatch neighbours along the inner index.
  const uint64_t batch = inner == 1 ? kLanes : std::min(kStridedBatch, inner);
  const uint64_t blocks_per_outer = inner == 1 ? (outer + kLanes - 1) / kLanes : (inner + batch - 1) / batch;
  const uint64_t items = inner == 1 ? blocks_per_outer : outer * blocks_per_outer;
  const uint64_t chunk = std::max<uint64_t>(1, items / (static_cast<uint64_t>(threads) * 8 + 1));
  const Plan plan(static_cast<size_t>(n));
  std::atomic<uint64_t> next{0};

  auto work = [&]() {
    std::vector<LaneComplex> lines(static_cast<size_t>(((batch + kLanes - 1) / kLanes) * n));
    fft_impl::ScratchBlock scratch;  // pocketfft's exec scratch, reused line after line
    struct Scope {
      fft_impl::ScratchBlock* b;
      explicit Scope(fft_impl::ScratchBlock* block) : b(block) { fft_impl::current_scratch = block; }
      ~Scope() {
        fft_impl::current_scratch = nullptr;
        std::free(b->data);
      }
    } scope(&scratch);
    for (;;) {
      const uint64_t first = next.fetch_add(chunk);
      if (first >= items) break;
      const uint64_t last = std::min(items, first + chunk);
      for (uint64_t item = first; item < last; ++item) {
        Complex* start;
        uint64_t count, line_step, step;
        if (inner == 1) {
          start = base + item * kLanes * n;
          count = std::min(kLanes, outer - item * kLanes);
          line_step = n;
          step = 1;
        } else {
          const uint64_t o = item / blocks_per_outer;
          const uint64_t i0 = (item % blocks_per_outer) * batch;
          start = base + o * n * inner + i0;
          count = std::min(batch, inner - i0);
          line_step = 1;
          step = inner;
        }
        for (uint64_t g = 0; g * kLanes < count; ++g) {
          LaneComplex* buf = lines.data() + g * n;
          const uint64_t c = std::min(kLanes, count - g * kLanes);
          gather(start + g * kLanes * line_step, c, line_step, step, n, buf);
          plan.exec(buf, scale, !inverse);
          scatter(buf, c, line_step, step, n, start + g * kLanes * line_step);
        }
      }
    }
  };
  const unsigned useful = static_cast<unsigned>(std::min<uint64_t>(threads, items));
  run_on_threads(useful, work);
}

void fft3d(std::span<Complex> data, const Dims3& dims, bool inverse, unsigned threads, const char* what) {
  check_dims(dims, what);
  const uint64_t n = voxels(dims);
  if (data.size() != n) {
    throw Error(ErrorCode::InvalidArgument, std::string(what) + ": buffer holds " + std::to_string(data.size()) +
                                                " values but dims " + std::to_string(dims[0]) + "x" +
                                                std::to_string(dims[1]) + "x" + std::to_string(dims[2]) + " need " +
                                                std::to_string(n));
  }
  if (n == 1) return;  // a length-1 DFT is the identity, and N = 1 needs no normalisation
  const unsigned t = resolve_threads(dims, threads);
  // The inverse's 1/N is applied by the last axis that is transformed (length-1 axes are the identity).
  int last = 2;
  while (dims[last] == 1) --last;
  const float norm = static_cast<float>(1.0 / static_cast<double>(n));
  for (int axis = 0; axis <= last; ++axis) {
    if (dims[axis] == 1) continue;
    transform_axis(data.data(), dims, axis, inverse, inverse && axis == last ? norm : 1.0f, t);
  }
}

// Heap bytes of one axis pass of length n on t threads, an upper bound that follows pocketfft_c's choice of
// algorithm. FFTPACK: twiddles (< 2n complex<float>) in the plan, a ping-pong line (n) per exec. Bluestein (a prime
// factor p with p^2 > n, when its cost guess wins): b_k (n), its transform (n2/2 + 1), the transient at construction
// (n2) and an FFTPACK plan of n2 = good_size(2n - 1) in the plan; a_k and its ping-pong line (2 n2) per exec.
// Per thread: the gathered lines (kStridedBatch) and one exec's scratch, in lane-complex values.
uint64_t axis_bytes(uint64_t n, uint64_t t) {
  using fft_impl::pocketfft::detail::util;
  bool bluestein = false;
  uint64_t n2 = 0;
  const uint64_t p = n < 50 ? 0 : util::largest_prime_factor(static_cast<size_t>(n));
  if (p * p > n && 2 * n > std::numeric_limits<size_t>::max() / 4) {
    n2 = 4 * n;  // wasm32: good_size would overflow size_t; it is below 2 (2n - 1)
    bluestein = true;
  } else if (p * p > n) {
    n2 = util::good_size_cmplx(static_cast<size_t>(2 * n - 1));
    bluestein = 2 * util::cost_guess(static_cast<size_t>(n2)) * 1.5 < util::cost_guess(static_cast<size_t>(n));
  }
  constexpr uint64_t kAllocation = 64 + 16;  // aligned_alloc's alignment and header, per buffer
  const uint64_t plan = bluestein ? (n + n2 / 2 + 1 + n2 + 2 * n2) * sizeof(std::complex<float>) + 8 * kAllocation
                                  : 2 * n * sizeof(std::complex<float>) + 4 * kAllocation;
  const uint64_t exec = (bluestein ? 2 * n2 : n) * sizeof(LaneComplex) + 2 * kAllocation;
  const uint64_t gathered = (kStridedBatch / kLanes) * n * sizeof(LaneComplex) + kAllocation;
  constexpr uint64_t kOverheadPerThread = 4096;  // std::thread, vector bookkeeping
  return plan + t * (gathered + exec + kOverheadPerThread);
}

}  // namespace

void fft3d_forward(std::span<Complex> data, const Dims3& dims, unsigned threads) {
  fft3d(data, dims, false, threads, "fft3d_forward");
}

void fft3d_inverse(std::span<Complex> data, const Dims3& dims, unsigned threads) {
  fft3d(data, dims, true, threads, "fft3d_inverse");
}

unsigned fft3d_planned_threads(const Dims3& dims, unsigned threads) {
  check_dims(dims, "fft3d_planned_threads");
  return resolve_threads(dims, threads);
}

uint64_t fft3d_workspace_bytes(const Dims3& dims, unsigned threads) {
  check_dims(dims, "fft3d_workspace_bytes");
  const uint64_t t = resolve_threads(dims, threads);
  // One axis at a time: its plan (shared by the threads) and the threads' scratch.
  uint64_t peak = 0;
  for (int a = 0; a < 3; ++a) peak = std::max(peak, axis_bytes(static_cast<uint64_t>(dims[a]), t));
  return peak;
}

int64_t fast_fft_size(int64_t n) {
  for (int64_t m = std::max<int64_t>(n, 1);; ++m) {
    int64_t r = m;
    for (int64_t p : {2, 3, 5})
      while (r % p == 0) r /= p;
    if (r == 1) return m;
  }
}

}  // namespace tessera
