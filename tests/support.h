// Test networks and volumes shared by the C++ tests (not a test file itself).
#pragma once

#include <algorithm>
#include <cmath>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <numbers>
#include <span>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <string>

#include "tessera/common/dipole.h"
#include "tessera/engine/driver.h"
#include "tessera/common/error.h"
#include "tessera/common/fft.h"
#include "tessera/common/geometry.h"
#include "tessera/engine/runner.h"

namespace tessera::test {

// Deterministic pseudo-random floats in [-1, 1) (splitmix64), identical natively and in wasm.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) / static_cast<float>(1ull << 23) - 1.0f; }

 private:
  uint64_t s_;
};

// π and 2π in double precision.
inline constexpr double kPi = std::numbers::pi;
inline constexpr double kTwoPi = 2.0 * std::numbers::pi;

// Gaussian noise from the shared uniform generator (Box-Muller).
struct Gaussian {
  Rng rng;
  double next() {
    const double u1 = 0.5 * (1.0 + rng.uniform()) + 1e-12, u2 = 0.5 * (1.0 + rng.uniform());
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
  }
};

// A run's options with n threads, the rest default.
inline RunOptions threads(uint32_t n) {
  RunOptions o;
  o.threads = n;
  return o;
}

inline Geometry geometry(int64_t nx, int64_t ny, int64_t nz) {
  Geometry g;
  g.dims = {nx, ny, nz};
  return g;
}

// A volume of nx×ny×nz isotropic voxels of mm millimetres (the phantom head fits any).
inline Geometry head(int64_t nx, int64_t ny, int64_t nz, double mm) {
  Geometry g = geometry(nx, ny, nz);
  g.voxel_mm = {mm, mm, mm};
  return g;
}

// The map minus its mean inside the mask: the dipole field has no mean (D(0) = 0), so χ is compared after removing
// each map's mean in the mask.
inline std::vector<float> demeaned(std::vector<float> v, std::span<const uint8_t> mask) {
  double s = 0.0;
  uint64_t n = 0;
  for (size_t i = 0; i < v.size(); ++i)
    if (mask[i]) s += v[i], ++n;
  for (size_t i = 0; i < v.size(); ++i)
    if (mask[i]) v[i] -= static_cast<float>(s / static_cast<double>(n));
  return v;
}

// ‖(a − mean a) − (b − mean b)‖ / ‖b − mean b‖ inside the mask.
inline double demeaned_nrmse(std::span<const float> a, std::span<const float> b, std::span<const uint8_t> m) {
  double ma = 0, mb = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (m[i]) ma += a[i], mb += b[i], n += 1;
  ma /= n;
  mb /= n;
  double e = 0, r = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (m[i]) {
      const double d = (a[i] - ma) - (b[i] - mb);
      e += d * d;
      r += (b[i] - mb) * (b[i] - mb);
    }
  return std::sqrt(e / r);
}

inline std::vector<float> random_field(const Geometry& g, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> f(g.voxel_count());
  for (float& v : f) v = rng.uniform();
  return f;
}

// v with every frequency where the dipole kernel's magnitude is <= threshold set to 0: the well-conditioned band, where
// a dipole inversion can be checked against the truth (the cone's missing part left out).
// v holds g.voxel_count() values.
inline std::vector<float> dipole_band(const Geometry& g, std::span<const float> v, float threshold) {
  const std::vector<float> kernel = dipole_kernel(g);
  std::vector<Complex> c(v.begin(), v.end());
  fft3d_forward(c, g.dims);
  for (size_t i = 0; i < c.size(); ++i)
    if (std::fabs(kernel[i]) <= threshold) c[i] = 0.0f;
  fft3d_inverse(c, g.dims);
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = c[i].real();
  return out;
}

// An ellipsoid mask filling most of the volume (some empty corners for skipped tiles).
inline std::vector<uint8_t> ellipsoid_mask(const Geometry& g, double fill = 0.9) {
  std::vector<uint8_t> m(g.voxel_count());
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y)
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        double r2 = 0;
        const int64_t p[3] = {x, y, z};
        for (int a = 0; a < 3; ++a) {
          const double c = (g.dims[a] - 1) / 2.0, h = std::max(0.5, fill * g.dims[a] / 2.0);
          r2 += (p[a] - c) * (p[a] - c) / (h * h);
        }
        m[g.index(x, y, z)] = r2 <= 1.0 ? 1 : 0;
      }
  return m;
}

// A box mask [lo, hi) in an otherwise empty volume.
inline std::vector<uint8_t> box_mask(const Geometry& g, Dims3 lo, Dims3 hi) {
  std::vector<uint8_t> m(g.voxel_count(), 0);
  for (int64_t z = lo[2]; z < hi[2]; ++z)
    for (int64_t y = lo[1]; y < hi[1]; ++y)
      for (int64_t x = lo[0]; x < hi[0]; ++x) m[g.index(x, y, z)] = 1;
  return m;
}

// Returns its input unchanged.
class IdentityRunner : public PatchRunner {
 public:
  std::vector<float> run(std::span<const float> input, const TensorShape&) override {
    calls.fetch_add(1);
    return {input.begin(), input.end()};
  }
  std::atomic<int> calls{0};
};

// A reference 3D convolution network of receptive radius r: leaky-ReLU, one (2r+1)³ convolution
// with zero padding, leaky-ReLU. Every output voxel depends on exactly the inputs within Chebyshev
// distance r; every tap is summed (outside = 0) in a fixed order, so results are reproducible bit for bit.
class ReferenceConvRunner : public PatchRunner {
 public:
  explicit ReferenceConvRunner(int radius, uint64_t seed = 7) : r_(radius) {
    Rng rng(seed);
    const int k = 2 * r_ + 1;
    weights_.resize(static_cast<size_t>(k) * k * k);
    for (float& w : weights_) w = rng.uniform() * 0.2f;
  }
  static float leaky(float v) { return v > 0.0f ? v : 0.1f * v; }

  std::vector<float> run(std::span<const float> input, const TensorShape& s) override {
    const int64_t X = static_cast<int64_t>(s.dims[0]), Y = static_cast<int64_t>(s.dims[1]), Z = static_cast<int64_t>(s.dims[2]);
    // The activated input, zero-padded by r on every side, so the taps read without bounds checks (the same values
    // and the same order of summation as reading 0 outside).
    const int64_t r = r_, PY = Y + 2 * r, PZ = Z + 2 * r;
    std::vector<float> padded(static_cast<size_t>((X + 2 * r) * PY * PZ), 0.0f);
    for (int64_t x = 0; x < X; ++x)
      for (int64_t y = 0; y < Y; ++y)
        for (int64_t z = 0; z < Z; ++z) padded[static_cast<size_t>(((x + r) * PY + y + r) * PZ + z + r)] = leaky(input[static_cast<size_t>((x * Y + y) * Z + z)]);
    std::vector<float> out(input.size());
    for (int64_t x = 0; x < X; ++x)
      for (int64_t y = 0; y < Y; ++y)
        for (int64_t z = 0; z < Z; ++z) {
          float acc = 0.0f;
          const float* w = weights_.data();
          for (int64_t dx = 0; dx <= 2 * r; ++dx)
            for (int64_t dy = 0; dy <= 2 * r; ++dy) {
              const float* row = &padded[static_cast<size_t>(((x + dx) * PY + y + dy) * PZ + z)];
              for (int64_t dz = 0; dz <= 2 * r; ++dz) acc += *w++ * row[dz];
            }
          out[static_cast<size_t>((x * Y + y) * Z + z)] = leaky(acc);
        }
    return out;
  }

 private:
  int r_;
  std::vector<float> weights_;
};

// Counts how many runs execute at once; each run sleeps a little so overlaps really happen.
class InstrumentedRunner : public PatchRunner {
 public:
  explicit InstrumentedRunner(std::chrono::milliseconds work) : work_(work) {}
  std::vector<float> run(std::span<const float> input, const TensorShape&) override {
    const int now = in_flight.fetch_add(1) + 1;
    int seen = max_in_flight.load();
    while (now > seen && !max_in_flight.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(work_);
    started.fetch_add(1);
    in_flight.fetch_sub(1);
    return {input.begin(), input.end()};
  }
  std::atomic<int> in_flight{0};
  std::atomic<int> max_in_flight{0};
  std::atomic<int> started{0};

 private:
  std::chrono::milliseconds work_;
};

// Runs a function of (call number, input, shape) — for failures, wrong lengths, stalls.
class LambdaRunner : public PatchRunner {
 public:
  using Fn = std::function<std::vector<float>(int call, std::span<const float>, const TensorShape&)>;
  explicit LambdaRunner(Fn fn) : fn_(std::move(fn)) {}
  std::vector<float> run(std::span<const float> input, const TensorShape& s) override {
    return fn_(calls.fetch_add(1), input, s);
  }
  std::atomic<int> calls{0};

 private:
  Fn fn_;
};

// The message of the tessera::Error that f throws, checking its code; a test failure when f does not throw.
inline std::string error_of(const std::function<void()>& f, ErrorCode expected_code) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), expected_code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

}  // namespace tessera::test
