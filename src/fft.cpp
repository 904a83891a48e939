#include "tessera/fft.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <unsupported/Eigen/FFT>

#include "tessera/error.h"

namespace tessera {

namespace {

// Consecutive lines of a strided axis gathered together: contiguous copies instead of one
// cache miss per element.
constexpr uint64_t kBatch = 16;
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

// Largest prime factor (kissfft's generic butterfly scratch).
int64_t largest_factor(int64_t n) {
  int64_t p = 1;
  for (int64_t f = 2; f * f <= n; ++f) {
    while (n % f == 0) {
      p = f;
      n /= f;
    }
  }
  return std::max(p, n);
}

// Runs work(thread_index) on up to `count` threads, the calling thread included; threads the
// platform refuses are simply not used. Rethrows the first exception of any worker.
template <typename Work>
void run_parallel(unsigned count, Work&& work) {
  if (count <= 1) {
    work();
    return;
  }
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto guarded = [&]() {
    try {
      work();
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  };
  std::vector<std::thread> started;
  started.reserve(count - 1);
  for (unsigned t = 1; t < count; ++t) {
    try {
      started.emplace_back(guarded);
    } catch (const std::system_error&) {
      break;  // wasm pthread pool exhausted (PTHREAD_POOL_SIZE_STRICT=2) or no more OS threads
    }
  }
  guarded();
  for (auto& t : started) t.join();
  if (failure) std::rethrow_exception(failure);
}

void transform_axis(std::span<Complex> data, const Dims3& dims, int axis, bool inverse, unsigned threads) {
  const uint64_t n = static_cast<uint64_t>(dims[axis]);
  if (n == 1) return;  // a length-1 DFT is the identity
  uint64_t inner = 1;
  for (int a = 0; a < axis; ++a) inner *= static_cast<uint64_t>(dims[a]);
  uint64_t outer = 1;
  for (int a = axis + 1; a < 3; ++a) outer *= static_cast<uint64_t>(dims[a]);
  const uint64_t batch = std::min(kBatch, inner);
  const uint64_t blocks_per_outer = (inner + batch - 1) / batch;
  const uint64_t items = outer * blocks_per_outer;
  // Items are grabbed in chunks so that the atomic counter is not a hot spot.
  const uint64_t chunk = std::max<uint64_t>(1, items / (static_cast<uint64_t>(threads) * 8 + 1));
  std::atomic<uint64_t> next{0};
  Complex* base = data.data();

  auto work = [&]() {
    Eigen::FFT<float> fft;
    fft.SetFlag(Eigen::FFT<float>::Unscaled);
    std::vector<Complex> lines(batch * n);
    std::vector<Complex> out(n);
    const int nfft = static_cast<int>(n);
    for (;;) {
      const uint64_t first = next.fetch_add(chunk);
      if (first >= items) break;
      const uint64_t last = std::min(items, first + chunk);
      for (uint64_t item = first; item < last; ++item) {
        const uint64_t o = item / blocks_per_outer;
        const uint64_t i0 = (item % blocks_per_outer) * batch;
        const uint64_t nb = std::min(batch, inner - i0);
        Complex* start = base + o * n * inner + i0;
        if (inner == 1) {
          if (inverse) fft.inv(out.data(), start, nfft); else fft.fwd(out.data(), start, nfft);
          std::copy(out.begin(), out.end(), start);
          continue;
        }
        for (uint64_t k = 0; k < n; ++k) {
          const Complex* src = start + k * inner;
          for (uint64_t b = 0; b < nb; ++b) lines[b * n + k] = src[b];
        }
        for (uint64_t b = 0; b < nb; ++b) {
          Complex* line = lines.data() + b * n;
          if (inverse) fft.inv(out.data(), line, nfft); else fft.fwd(out.data(), line, nfft);
          std::copy(out.begin(), out.end(), line);
        }
        for (uint64_t k = 0; k < n; ++k) {
          Complex* dst = start + k * inner;
          for (uint64_t b = 0; b < nb; ++b) dst[b] = lines[b * n + k];
        }
      }
    }
  };
  const unsigned useful = static_cast<unsigned>(std::min<uint64_t>(threads, items));
  run_parallel(useful, work);
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
  const unsigned t = resolve_threads(dims, threads);
  for (int axis = 0; axis < 3; ++axis) transform_axis(data, dims, axis, inverse, t);
  if (inverse && n > 1) {
    const float scale = static_cast<float>(1.0 / static_cast<double>(n));
    for (auto& v : data) v *= scale;
  }
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
  uint64_t max_line = 0;  // batch of gathered lines + output line
  uint64_t plans = 0;     // one plan per axis length and direction: twiddles + generic-butterfly scratch
  for (int a = 0; a < 3; ++a) {
    const uint64_t n = static_cast<uint64_t>(dims[a]);
    uint64_t inner = 1;
    for (int b = 0; b < a; ++b) inner *= static_cast<uint64_t>(dims[b]);
    max_line = std::max(max_line, (std::min(kBatch, inner) + 1) * n);
    plans += n + static_cast<uint64_t>(largest_factor(static_cast<int64_t>(n)));
  }
  constexpr uint64_t kOverheadPerThread = 4096;  // std::map nodes, vectors' bookkeeping
  return t * ((max_line + plans) * sizeof(Complex) + kOverheadPerThread);
}

}  // namespace tessera
