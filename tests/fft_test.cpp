#include "tessera/common/fft.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tessera/common/error.h"

namespace {

using tessera::Complex;
using tessera::Dims3;

std::vector<Complex> random_volume(const Dims3& d, uint64_t seed) {
  std::vector<Complex> v(static_cast<size_t>(d[0] * d[1] * d[2]));
  uint64_t s = seed;
  auto next = [&]() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<double>(s >> 40) / static_cast<double>(1ull << 24)) - 0.5f;
  };
  for (auto& x : v) x = Complex(next(), next());
  return v;
}

// O(N^2) reference in double: X[k] = sum_x v[x] exp(sign * 2 pi i k.x / n).
std::vector<std::complex<double>> naive_dft(const std::vector<Complex>& v, const Dims3& d, double sign) {
  const int64_t nx = d[0], ny = d[1], nz = d[2];
  std::vector<std::complex<double>> out(v.size());
  const double two_pi = 2.0 * std::acos(-1.0);
  for (int64_t kz = 0; kz < nz; ++kz)
    for (int64_t ky = 0; ky < ny; ++ky)
      for (int64_t kx = 0; kx < nx; ++kx) {
        std::complex<double> acc = 0.0;
        for (int64_t z = 0; z < nz; ++z)
          for (int64_t y = 0; y < ny; ++y)
            for (int64_t x = 0; x < nx; ++x) {
              const double ph = sign * two_pi *
                                (static_cast<double>(kx * x) / nx + static_cast<double>(ky * y) / ny +
                                 static_cast<double>(kz * z) / nz);
              acc += std::complex<double>(v[x + nx * (y + ny * z)]) * std::polar(1.0, ph);
            }
        out[kx + nx * (ky + ny * kz)] = acc;
      }
  return out;
}

void expect_matches_naive(const Dims3& d) {
  const auto v = random_volume(d, 7 + d[0] * 100 + d[1] * 10 + d[2]);
  const auto ref = naive_dft(v, d, -1.0);
  auto f = v;
  tessera::fft3d_forward(f, d);
  double max_err = 0.0, max_ref = 0.0;
  for (size_t i = 0; i < f.size(); ++i) {
    max_err = std::max(max_err, std::abs(std::complex<double>(f[i]) - ref[i]));
    max_ref = std::max(max_ref, std::abs(ref[i]));
  }
  EXPECT_LT(max_err, 1e-5 * max_ref) << d[0] << "x" << d[1] << "x" << d[2];
  // The inverse matches the naive inverse DFT divided by N.
  const auto iref = naive_dft(v, d, +1.0);
  auto g = v;
  tessera::fft3d_inverse(g, d);
  const double n = static_cast<double>(v.size());
  max_err = 0.0;
  for (size_t i = 0; i < g.size(); ++i) max_err = std::max(max_err, std::abs(std::complex<double>(g[i]) - iref[i] / n));
  EXPECT_LT(max_err, 1e-5 * max_ref / n) << "inverse " << d[0] << "x" << d[1] << "x" << d[2];
}

// The 3D DFT in double, axis by axis (separable), twiddles from (k * x) mod n: cheap enough for long lines.
std::vector<std::complex<double>> separable_dft(const std::vector<Complex>& v, const Dims3& d, double sign) {
  std::vector<std::complex<double>> a(v.begin(), v.end());
  const double two_pi = 2.0 * std::acos(-1.0);
  int64_t inner = 1;
  for (int axis = 0; axis < 3; ++axis) {
    const int64_t n = d[axis], outer = static_cast<int64_t>(v.size()) / (n * inner);
    std::vector<std::complex<double>> w(static_cast<size_t>(n)), line(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) w[k] = std::polar(1.0, sign * two_pi * static_cast<double>(k) / n);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        std::complex<double>* p = a.data() + o * n * inner + i;
        for (int64_t k = 0; k < n; ++k) {
          std::complex<double> acc = 0.0;
          for (int64_t x = 0; x < n; ++x) acc += p[x * inner] * w[(k * x) % n];
          line[k] = acc;
        }
        for (int64_t k = 0; k < n; ++k) p[k * inner] = line[k];
      }
    inner *= n;
  }
  return a;
}

// Forward and inverse against the double-precision reference, relative to the largest coefficient; the same bits
// with 1 and 3 threads.
void expect_matches_separable(const Dims3& d) {
  const auto v = random_volume(d, 5 + d[0] + 7 * d[1] + 31 * d[2]);
  const auto ref = separable_dft(v, d, -1.0);
  const auto iref = separable_dft(v, d, +1.0);
  auto f = v, g = v, f3 = v, g3 = v;
  tessera::fft3d_forward(f, d, 1);
  tessera::fft3d_inverse(g, d, 1);
  tessera::fft3d_forward(f3, d, 3);
  tessera::fft3d_inverse(g3, d, 3);
  const double n = static_cast<double>(v.size());
  double max_ref = 0.0, ferr = 0.0, ierr = 0.0;
  for (size_t i = 0; i < v.size(); ++i) {
    max_ref = std::max(max_ref, std::abs(ref[i]));
    ferr = std::max(ferr, std::abs(std::complex<double>(f[i]) - ref[i]));
    ierr = std::max(ierr, std::abs(std::complex<double>(g[i]) - iref[i] / n));
  }
  EXPECT_LT(ferr, 1e-6 * max_ref) << d[0] << "x" << d[1] << "x" << d[2];
  EXPECT_LT(ierr, 1e-6 * max_ref / n) << "inverse " << d[0] << "x" << d[1] << "x" << d[2];
  EXPECT_EQ(std::memcmp(f.data(), f3.data(), f.size() * sizeof(Complex)), 0) << d[0] << "x" << d[1] << "x" << d[2];
  EXPECT_EQ(std::memcmp(g.data(), g3.data(), g.size() * sizeof(Complex)), 0) << d[0] << "x" << d[1] << "x" << d[2];
}

}  // namespace

TEST(Fft, FastSizeIsTheNextTwoThreeFiveSmoothLength) {
  // The 5-smooth (Hamming) numbers up to 64, listed by hand: 2^i 3^j 5^k.
  const int64_t smooth[] = {1, 2, 3, 4, 5, 6, 8, 9, 10, 12, 15, 16, 18, 20, 24, 25, 27, 30, 32, 36, 40, 45, 48, 50, 54, 60, 64};
  for (int64_t n = -2; n <= 64; ++n) {
    int64_t want = 0;
    for (int64_t m : smooth) {
      if (m >= std::max<int64_t>(n, 1)) {
        want = m;
        break;
      }
    }
    EXPECT_EQ(tessera::fast_fft_size(n), want) << n;
  }
  EXPECT_EQ(tessera::fast_fft_size(181), 192);    // 2^6·3
  EXPECT_EQ(tessera::fast_fft_size(1001), 1024);  // 1001..1023 each hold a factor 7, 11, 13 or above
  EXPECT_EQ(tessera::fast_fft_size(2187), 2187);  // 3^7
}

TEST(Fft, MatchesNaiveDftOnOddSizes) {
  expect_matches_naive({3, 5, 7});
  expect_matches_naive({9, 1, 4});
  expect_matches_naive({1, 1, 1});
  expect_matches_naive({11, 2, 1});
  expect_matches_naive({4, 13, 3});
}

TEST(Fft, RoundTripAnySize) {
  for (const Dims3& d : {Dims3{7, 15, 33}, Dims3{16, 8, 4}, Dims3{1, 17, 1}, Dims3{22, 10, 25}}) {
    const auto v = random_volume(d, 3);
    auto w = v;
    tessera::fft3d_forward(w, d);
    tessera::fft3d_inverse(w, d);
    double max_err = 0.0;
    for (size_t i = 0; i < v.size(); ++i) max_err = std::max(max_err, static_cast<double>(std::abs(w[i] - v[i])));
    EXPECT_LT(max_err, 2e-6) << d[0] << "x" << d[1] << "x" << d[2];
  }
}

TEST(Fft, ThreadsGiveBitIdenticalResults) {
  const Dims3 d{64, 48, 40};  // 122880 voxels: three workers pay
  const auto v = random_volume(d, 11);
  auto one = v, many = v;
  tessera::fft3d_forward(one, d, 1);
  tessera::fft3d_forward(many, d, 4);
  ASSERT_EQ(one, many);
  tessera::fft3d_inverse(one, d, 1);
  tessera::fft3d_inverse(many, d, 0);  // hardware concurrency
  ASSERT_EQ(one, many);
  EXPECT_EQ(tessera::fft3d_planned_threads(d, 1), 1u);
  EXPECT_EQ(tessera::fft3d_planned_threads({4, 4, 4}, 8), 1u);  // too small to pay
  EXPECT_EQ(tessera::fft3d_planned_threads(d, 4), 3u);
}

TEST(Fft, WorkspaceBytes) {
  const uint64_t one = tessera::fft3d_workspace_bytes({160, 160, 160}, 1);
  const uint64_t four = tessera::fft3d_workspace_bytes({160, 160, 160}, 4);
  EXPECT_GT(one, 16u * 160u * 8u);      // at least a batch of gathered lines
  EXPECT_LT(one, uint64_t{1} << 20);    // far below the volume (32 MB)
  EXPECT_GT(four, one);                 // per-thread line buffers
  EXPECT_LE(four, 4 * one);             // the plan is shared
  // Bluestein lengths (a large prime factor) need more scratch than smooth ones.
  EXPECT_GT(tessera::fft3d_workspace_bytes({127, 8, 8}, 1), tessera::fft3d_workspace_bytes({128, 8, 8}, 1));
  // wasm32: the byte count is 64-bit arithmetic, no size_t overflow on a long axis.
  EXPECT_GT(tessera::fft3d_workspace_bytes({int64_t{1} << 28, 1, 1}, 2), uint64_t{1} << 32);
}

// Lengths that take every kind of pass: radix 2, 3, 4, 5, 7, 8, 11, a generic radix (13, 53) and Bluestein's
// algorithm (101, 127: a prime too large for a generic pass), with line groups that fill 1, 2, 3 and 4 lanes.
TEST(Fft, MatchesSeparableReferenceOnEveryKindOfLength) {
  for (const Dims3& d : {Dims3{101, 3, 2}, Dims3{2, 127, 3}, Dims3{3, 2, 53}, Dims3{13, 11, 7}, Dims3{8, 5, 4},
                         Dims3{88, 6, 9}}) {
    expect_matches_separable(d);
  }
}

// Analytic truth: a plane wave e^{2 pi i k0.x/n} transforms to N at k0 and 0 elsewhere; the inverse brings it back.
TEST(Fft, PlaneWaveIsADelta) {
  const Dims3 d{40, 36, 22};
  const int64_t k0[3] = {7, 31, 5};
  const double two_pi = 2.0 * std::acos(-1.0);
  std::vector<Complex> v(static_cast<size_t>(d[0] * d[1] * d[2]));
  for (int64_t z = 0; z < d[2]; ++z)
    for (int64_t y = 0; y < d[1]; ++y)
      for (int64_t x = 0; x < d[0]; ++x) {
        const double ph = two_pi * (static_cast<double>((k0[0] * x) % d[0]) / d[0] +
                                    static_cast<double>((k0[1] * y) % d[1]) / d[1] +
                                    static_cast<double>((k0[2] * z) % d[2]) / d[2]);
        v[x + d[0] * (y + d[1] * z)] = Complex(static_cast<float>(std::cos(ph)), static_cast<float>(std::sin(ph)));
      }
  auto f = v;
  tessera::fft3d_forward(f, d, 2);
  const double n = static_cast<double>(v.size());
  const size_t peak = static_cast<size_t>(k0[0] + d[0] * (k0[1] + d[1] * k0[2]));
  double off = 0.0;
  for (size_t i = 0; i < f.size(); ++i)
    if (i != peak) off = std::max(off, static_cast<double>(std::abs(f[i])));
  EXPECT_NEAR(f[peak].real(), n, 1e-5 * n);
  EXPECT_NEAR(f[peak].imag(), 0.0, 1e-5 * n);
  EXPECT_LT(off, 1e-5 * n);
  tessera::fft3d_inverse(f, d, 2);
  double err = 0.0;
  for (size_t i = 0; i < v.size(); ++i) err = std::max(err, static_cast<double>(std::abs(f[i] - v[i])));
  EXPECT_LT(err, 2e-6);
}

TEST(Fft, RejectsBadInput) {
  std::vector<Complex> v(10);
  try {
    tessera::fft3d_forward(v, {3, 3, 1});
    FAIL() << "size mismatch accepted";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.code(), tessera::ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("holds 10"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tessera::fft3d_inverse(v, {10, 0, 1}), tessera::Error);
  EXPECT_THROW(tessera::fft3d_forward(v, {-10, -1, 1}), tessera::Error);
  EXPECT_THROW((void)tessera::fft3d_workspace_bytes({0, 1, 1}), tessera::Error);
}

// Asking for more threads than the platform gives (the wasm test binary has a pool of 8 with
// PTHREAD_POOL_SIZE_STRICT=2, so the 9th std::thread throws std::system_error) falls back to the
// threads that did start plus the calling thread, with the same result.
TEST(Fft, MoreThreadsThanThePoolFallsBack) {
  const Dims3 d{128, 128, 128};  // 2^21 voxels: 64 workers allowed by size
  ASSERT_EQ(tessera::fft3d_planned_threads(d, 64), 64u);
  std::vector<Complex> v(size_t{1} << 21);
  for (size_t i = 0; i < v.size(); ++i) v[i] = Complex(static_cast<float>(i % 13) - 6.0f, static_cast<float>(i % 5));
  auto one = v, many = v;
  tessera::fft3d_forward(one, d, 1);
  tessera::fft3d_forward(many, d, 64);
  ASSERT_TRUE(one == many);
}
