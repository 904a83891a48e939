#include "tessera/inversion/ilsqr.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "inversion/lsqr.h"
#include "common/parallel.h"
#include "inversion/qsm_ops.h"
#include "tessera/common/dipole.h"
#include "tessera/common/error.h"
#include "tessera/inversion/methods.h"

namespace tessera {

namespace {

// Laplacian weights (Li et al. 2015 Eq. 7): 1 below the 60th percentile of |∇²f| in the mask, 0 above the 99.9th,
// linear between (percentiles from kamesy/QSM.m via QSM.rs ilsqr.rs pmin 60, pmax 99.9).
constexpr double kLaplacianLow = 60.0, kLaplacianHigh = 99.9;
// FastQSM (Eq. 8-14): k-space weights |D|^0.001 scaled between their 1st and 30th percentiles, a 3 mm spherical mean,
// and TKD at 1/8 for the linear scaling (QSM.m values, QSM.rs ilsqr.rs fastqsm_step).
constexpr double kFastExponent = 0.001, kFastLow = 1.0, kFastHigh = 30.0, kSphereMm = 3.0, kFastTkdThreshold = 1.0 / 8.0;
// Gradient weights of the streak estimate (Eq. 15): from |∇x_FastQSM|, 1 below the 50th percentile, 0 above the 70th.
constexpr double kGradientLow = 50.0, kGradientHigh = 70.0;

// 1 below the lo percentile of |v| over the mask, 0 above the hi one, linear between; 0 outside the mask.
void ramp_weights(std::span<const float> v, std::span<const uint8_t> mask, double lo_p, double hi_p, std::span<float> out,
                  unsigned threads) {
  std::vector<float> inside;
  for (uint64_t i = 0; i < v.size(); ++i) {
    if (mask[i]) inside.push_back(std::fabs(v[i]));
  }
  const double hi = qsm_ops::percentile(inside, hi_p);
  const double lo = qsm_ops::percentile(inside, lo_p);
  parallel_for(v.size(), threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      const double a = std::fabs(v[i]);
      double w = a <= lo ? 1.0 : a >= hi ? 0.0 : (hi - a) / (hi - lo);
      out[i] = mask[i] ? static_cast<float>(w) : 0.0f;
    }
  });
}

// 7-point Laplacian per mm² over in-mask neighbours only (a neighbour outside the mask or the volume adds nothing).
void masked_laplacian(const Geometry& g, std::span<const float> f, std::span<const uint8_t> mask, std::span<float> out,
                      unsigned threads) {
  const int64_t n3[3] = {g.dims[0], g.dims[1], g.dims[2]};
  const uint64_t stride[3] = {1, static_cast<uint64_t>(n3[0]), static_cast<uint64_t>(n3[0]) * static_cast<uint64_t>(n3[1])};
  parallel_for(g.voxel_count(), threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      if (!mask[i]) {
        out[i] = 0.0f;
        continue;
      }
      const int64_t c[3] = {static_cast<int64_t>(i % stride[1]), static_cast<int64_t>((i / stride[1]) % static_cast<uint64_t>(n3[1])),
                            static_cast<int64_t>(i / stride[2])};
      double s = 0.0;
      for (int a = 0; a < 3; ++a) {
        const double h2 = 1.0 / (g.voxel_mm[a] * g.voxel_mm[a]);
        if (c[a] > 0 && mask[i - stride[a]]) s += h2 * (static_cast<double>(f[i - stride[a]]) - f[i]);
        if (c[a] + 1 < n3[a] && mask[i + stride[a]]) s += h2 * (static_cast<double>(f[i + stride[a]]) - f[i]);
      }
      out[i] = static_cast<float>(s);
    }
  });
}

}  // namespace

void validate(const IlsqrParams& p) {
  checked_option(method_options(), "ilsqr.tolerance", p.tolerance);
  checked_option(method_options(), "ilsqr.maxIterations", p.max_iterations);
  checked_option(method_options(), "ilsqr.coneThreshold", p.cone_threshold);
}

Ilsqr::Ilsqr(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask, const IlsqrParams& params,
             unsigned threads)
    : geometry_(g), params_(params), threads_(threads), field_(field), mask_(mask) {
  qsm_ops::check_field_and_mask("ilsqr", g, field, mask);
  validate(params);
  const uint64_t n = g.voxel_count();
  kernel_ = dipole_kernel(g);
  buf_.resize(n);
  tmp_.resize(n);
  // W from the Laplacian of the masked field
  weight_.resize(n);
  parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) tmp_[i] = mask[i] ? field[i] : 0.0f;
  });
  std::vector<float> lap(n);
  masked_laplacian(g, tmp_, mask, lap, threads);
  ramp_weights(lap, mask, kLaplacianLow, kLaplacianHigh, weight_, threads);
  // b = W f, the first solve: min ‖W (D χ − f)‖ (A = W D, Aᵀ = D W: D is real and symmetric)
  parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) lap[i] = weight_[i] * tmp_[i];
  });
  auto apply = [this](std::span<const float> in, std::span<float> out) {
    qsm_ops::convolve(geometry_.dims, kernel_, in, out, buf_, threads_);
    parallel_for(out.size(), threads_, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) out[i] *= weight_[i];
    });
  };
  auto adjoint = [this](std::span<const float> in, std::span<float> out) {
    parallel_for(in.size(), threads_, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) tmp_[i] = in[i] * weight_[i];
    });
    qsm_ops::convolve(geometry_.dims, kernel_, tmp_, out, buf_, threads_);
  };
  solver_ = std::make_unique<LsqrSolver>(n, n, apply, adjoint, params.tolerance, threads);
  solver_->start(lap);
}

Ilsqr::~Ilsqr() = default;

void Ilsqr::step() {
  switch (stage_) {
    case Stage::Lsqr:
      if (!solver_->converged()) solver_->iterate();
      if (solver_->converged() || solver_->iterations() >= params_.max_iterations) {
        x_lsqr_ = solver_->take_x();
        solver_.reset();
        weight_ = {};
        stage_ = Stage::FastQsm;
      }
      break;
    case Stage::FastQsm:
      fast_qsm_and_start_streaks();
      stage_ = Stage::Streaks;
      break;
    case Stage::Streaks:
      if (!solver_->converged()) solver_->iterate();
      if (solver_->converged() || solver_->iterations() >= params_.max_iterations) finish();
      break;
    case Stage::Done:
      throw Error(ErrorCode::Internal, "ilsqr: step after the last");
  }
  ++done_;
}

void Ilsqr::fast_qsm_and_start_streaks() {
  const Geometry& g = geometry_;
  const uint64_t n = g.voxel_count();
  const unsigned th = threads_;
  // F = fft(masked field)
  std::vector<Complex> f(n);
  parallel_for(n, th, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) f[i] = Complex(mask_[i] ? field_[i] : 0.0f, 0.0f);
  });
  fft3d_forward(f, g.dims, th);
  // filter = wfs + (1 − wfs) H: wfs from |D|^0.001 (Eq. 10), H the spherical mean's spectrum (Eq. 9)
  std::vector<float> filter(n);
  parallel_for(n, th, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) filter[i] = static_cast<float>(std::pow(std::fabs(static_cast<double>(kernel_[i])), kFastExponent));
  });
  {
    std::vector<float> sorted = filter;
    const double hi = qsm_ops::percentile(sorted, kFastHigh);
    const double lo = qsm_ops::percentile(sorted, kFastLow);
    const double range = hi - lo;
    parallel_for(n, th, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) {
        const double w = range > 0.0 ? (filter[i] - lo) / range : 1.0;
        filter[i] = static_cast<float>(std::clamp(w, 0.0, 1.0));
      }
    });
  }
  {
    // the sphere of radius 3 mm around voxel 0 (periodic), normalised to sum 1
    uint64_t count = 0;
    std::fill(buf_.begin(), buf_.end(), Complex(0.0f, 0.0f));
    const double r2 = kSphereMm * kSphereMm;
    for (int64_t z = 0; z < g.dims[2]; ++z)
      for (int64_t y = 0; y < g.dims[1]; ++y)
        for (int64_t x = 0; x < g.dims[0]; ++x) {
          const double dx = std::min(x, g.dims[0] - x) * g.voxel_mm[0], dy = std::min(y, g.dims[1] - y) * g.voxel_mm[1],
                       dz = std::min(z, g.dims[2] - z) * g.voxel_mm[2];
          if (dx * dx + dy * dy + dz * dz <= r2) {
            buf_[g.index(x, y, z)] = Complex(1.0f, 0.0f);
            ++count;
          }
        }
    const float inv = 1.0f / static_cast<float>(count);
    for (Complex& c : buf_) c *= inv;
    fft3d_forward(buf_, g.dims, th);
    parallel_for(n, th, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) filter[i] = filter[i] + (1.0f - filter[i]) * buf_[i].real();
    });
  }
  // x = mask · ifft(filter · sign(D) F), twice (Eq. 8, 9, 11)
  std::vector<float> x_fs(n);
  parallel_for(n, th, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      const float s = kernel_[i] > 0.0f ? 1.0f : kernel_[i] < 0.0f ? -1.0f : 0.0f;
      buf_[i] = f[i] * (s * filter[i]);
    }
  });
  fft3d_inverse(buf_, g.dims, th);
  parallel_for(n, th, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) x_fs[i] = mask_[i] ? buf_[i].real() : 0.0f;
  });
  qsm_ops::convolve(g.dims, filter, x_fs, x_fs, buf_, th);
  // TKD at 1/8 (Eq. 12), into tmp_
  parallel_for(n, th, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      const float d = kernel_[i];
      const float t = static_cast<float>(kFastTkdThreshold);
      const float inv = d == 0.0f ? 0.0f : std::fabs(d) >= t ? 1.0f / d : (d > 0.0f ? 1.0f : -1.0f) / t;
      buf_[i] = f[i] * inv;
    }
  });
  f = {};
  filter = {};
  fft3d_inverse(buf_, g.dims, th);
  // x_fs ← a x_fs + c, the least-squares fit of TKD over the mask (Eq. 13-14)
  auto sum = [&](auto term) { return parallel_sum(n, th, [&](uint64_t i) { return mask_[i] ? term(i) : 0.0; }); };
  const double s1 = sum([&](uint64_t) { return 1.0; });
  const double sx = sum([&](uint64_t i) { return static_cast<double>(x_fs[i]); });
  const double st = sum([&](uint64_t i) { return static_cast<double>(buf_[i].real()); });
  const double sxx = sum([&](uint64_t i) { return static_cast<double>(x_fs[i]) * x_fs[i]; });
  const double sxt = sum([&](uint64_t i) { return static_cast<double>(x_fs[i]) * buf_[i].real(); });
  const double det = sxx * s1 - sx * sx;
  const double a = det > 0.0 ? (s1 * sxt - sx * st) / det : 1.0;
  const double c = det > 0.0 ? (sxx * st - sx * sxt) / det : 0.0;
  parallel_for(n, th, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) x_fs[i] = mask_[i] ? static_cast<float>(a * x_fs[i] + c) : 0.0f;
  });

  // gradient weights from the FastQSM map (Eq. 15), one volume per axis
  gw_.resize(3 * n);
  std::span<float> gx(gw_.data(), n), gy(gw_.data() + n, n), gz(gw_.data() + 2 * n, n);
  qsm_ops::gradient(g, x_fs, gx, gy, gz, th);
  for (std::span<float> w : {gx, gy, gz}) ramp_weights(w, mask_, kGradientLow, kGradientHigh, w, th);
  x_fs = {};
  // the cone indicator replaces D
  const float thr = static_cast<float>(params_.cone_threshold);
  parallel_for(n, th, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) kernel_[i] = std::fabs(kernel_[i]) < thr ? 1.0f : 0.0f;
  });
  // second solve: min ‖W_g ∇ C x_sa − W_g ∇ x_lsqr‖, C the projection on the cone (Eq. 3-5)
  tmp3_.resize(3 * n);
  std::vector<float> rhs(3 * n);
  qsm_ops::gradient(g, x_lsqr_, std::span<float>(rhs.data(), n), std::span<float>(rhs.data() + n, n),
                    std::span<float>(rhs.data() + 2 * n, n), th);
  parallel_for(3 * n, th, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) rhs[i] *= gw_[i];
  });
  auto apply = [this, n](std::span<const float> in, std::span<float> out) {
    qsm_ops::convolve(geometry_.dims, kernel_, in, tmp_, buf_, threads_);
    qsm_ops::gradient(geometry_, tmp_, out.subspan(0, n), out.subspan(n, n), out.subspan(2 * n, n), threads_);
    parallel_for(3 * n, threads_, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) out[i] *= gw_[i];
    });
  };
  auto adjoint = [this, n](std::span<const float> in, std::span<float> out) {
    parallel_for(3 * n, threads_, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) tmp3_[i] = in[i] * gw_[i];
    });
    const std::span<const float> t(tmp3_);
    qsm_ops::gradient_adjoint(geometry_, t.subspan(0, n), t.subspan(n, n), t.subspan(2 * n, n), tmp_, threads_);
    qsm_ops::convolve(geometry_.dims, kernel_, tmp_, out, buf_, threads_);
  };
  solver_ = std::make_unique<LsqrSolver>(3 * n, n, apply, adjoint, params_.tolerance, th);
  solver_->start(rhs);
}

void Ilsqr::finish() {
  const std::span<const float> streaks = solver_->x();
  chi_.resize(x_lsqr_.size());
  parallel_for(chi_.size(), threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) chi_[i] = mask_[i] ? x_lsqr_[i] - streaks[i] : 0.0f;
  });
  solver_.reset();
  gw_ = {};
  tmp3_ = {};
  tmp_ = {};
  kernel_ = {};
  buf_ = {};
  stage_ = Stage::Done;
}

std::vector<float> Ilsqr::lsqr_result() const {
  if (x_lsqr_.empty()) throw Error(ErrorCode::Internal, "ilsqr: lsqr_result before the first solve ended");
  std::vector<float> out(x_lsqr_.size());
  for (uint64_t i = 0; i < out.size(); ++i) out[i] = mask_[i] ? x_lsqr_[i] : 0.0f;
  return out;
}

std::vector<float> Ilsqr::take_result() {
  if (stage_ != Stage::Done) throw Error(ErrorCode::Internal, "ilsqr: take_result before the last step");
  x_lsqr_ = {};
  return std::move(chi_);
}

std::vector<float> ilsqr(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                         const IlsqrParams& params, unsigned threads) {
  Ilsqr solver(g, field, mask, params, threads);
  run_to_end(solver);
  return solver.take_result();
}

uint64_t ilsqr_workspace_bytes(const Geometry& g, const IlsqrParams& params, unsigned threads) {
  validate_geometry(g);
  validate(params);
  const uint64_t n = g.voxel_count();
  // second solve: LSQR (2·3n + 4n), gradient weights 3n, right-hand side 3n, operator temporaries 3n + n, x_lsqr n,
  // cone kernel n = 24 float volumes; one complex volume; FFT scratch. The first solve and FastQSM need less (13 float
  // volumes and 2 complex ones, plus a percentile copy of n floats), but wasm's allocator does not compact: the holes
  // they leave do not all host the second solve's 3n-float buffers. Measured: the module heap
  // reached 1.07 of a plan without the first stage's 2 complex volumes and copy at 256×256×176; with them it is counted.
  return 25 * n * sizeof(float) + 3 * n * sizeof(Complex) + fft3d_workspace_bytes(g.dims, threads);
}

}  // namespace tessera
