#include "tessera/inversion/ndi.h"

#include <cmath>
#include <limits>
#include <string>

#include "common/parallel.h"
#include "inversion/qsm_ops.h"
#include "tessera/common/dipole.h"
#include "tessera/common/error.h"
#include "tessera/inversion/methods.h"

namespace tessera {

void validate(const NdiParams& p) {
  checked_option(method_options(), "ndi.tau", p.tau);
  checked_option(method_options(), "ndi.lambda", p.lambda);
  checked_option(method_options(), "ndi.maxIterations", p.max_iterations);
  checked_option(method_options(), "ndi.tolerance", p.tolerance);
  checked_option(method_options(), "ndi.phaseScale", p.phase_scale);
}

Ndi::Ndi(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask, std::span<const float> magnitude,
         const NdiParams& params, unsigned threads)
    : geometry_(g), params_(params), threads_(threads), mask_(mask), cost_(std::numeric_limits<double>::quiet_NaN()) {
  qsm_ops::check_field_and_mask("ndi", g, field, mask);
  if (!magnitude.empty()) qsm_ops::check_magnitude("ndi", g, magnitude, mask);
  validate(params);
  const uint64_t n = g.voxel_count();
  kernel_ = dipole_kernel(g);
  weight2_.assign(n, 0.0f);
  float peak = 0.0f;
  if (!magnitude.empty()) {
    for (uint64_t i = 0; i < n; ++i) {
      if (mask[i]) peak = std::max(peak, magnitude[i]);
    }
  }
  phase_.resize(n);
  const float scale = static_cast<float>(params.phase_scale);
  parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      const float w = !mask[i] ? 0.0f : magnitude.empty() ? 1.0f : magnitude[i] / peak;
      weight2_[i] = w * w;
      phase_[i] = field[i] * scale;
    }
  });
  chi_.assign(n, 0.0f);
  a_.resize(n);
  b_.resize(n);
  buf_.resize(n);
}

void Ndi::step() {
  const uint64_t n = chi_.size();
  const float tau = static_cast<float>(params_.tau), lambda = static_cast<float>(params_.lambda);
  // a = Dχ; cost at χ; b = W² sin(Dχ − φ); a = Dᵀb (D real and symmetric)
  qsm_ops::convolve(geometry_.dims, kernel_, chi_, a_, buf_, threads_);
  cost_ = parallel_sum(n, threads_, [&](uint64_t i) {
    const double r = static_cast<double>(a_[i]) - static_cast<double>(phase_[i]);
    const double c = static_cast<double>(chi_[i]);
    return 2.0 * static_cast<double>(weight2_[i]) * (1.0 - std::cos(r)) + params_.lambda * c * c;
  });
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) b_[i] = weight2_[i] * std::sin(a_[i] - phase_[i]);
  });
  qsm_ops::convolve(geometry_.dims, kernel_, b_, a_, buf_, threads_);
  // χ ← χ − τ (Dᵀ W² sin(Dχ − φ) + λχ): a step along minus half the gradient of the cost
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      const float update = tau * a_[i] + tau * lambda * chi_[i];
      b_[i] = update;
      chi_[i] -= update;
    }
  });
  const double change = qsm_ops::norm(b_, threads_), size = qsm_ops::norm(chi_, threads_);
  ++done_;
  finished_ = done_ >= params_.max_iterations || change <= params_.tolerance * size;
}

std::vector<float> Ndi::take_result() {
  if (!finished_) throw Error(ErrorCode::Internal, "ndi: take_result before the last step");
  const float inv = static_cast<float>(1.0 / params_.phase_scale);
  parallel_for(chi_.size(), threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) chi_[i] = mask_[i] ? chi_[i] * inv : 0.0f;
  });
  return std::move(chi_);
}

std::vector<float> ndi(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                       const NdiParams& params, unsigned threads) {
  return ndi(g, field, mask, {}, params, threads);
}

std::vector<float> ndi(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                       std::span<const float> magnitude, const NdiParams& params, unsigned threads) {
  Ndi solver(g, field, mask, magnitude, params, threads);
  run_to_end(solver);
  return solver.take_result();
}

uint64_t ndi_workspace_bytes(const Geometry& g, const NdiParams& params, unsigned threads) {
  validate_geometry(g);
  validate(params);
  const uint64_t n = g.voxel_count();
  // kernel, W², φ, χ and two temporaries; the complex FFT buffer; the FFT's own scratch
  return 6 * n * sizeof(float) + n * sizeof(Complex) + fft3d_workspace_bytes(g.dims, threads);
}

}  // namespace tessera
