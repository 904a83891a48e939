#include "tessera/inversion/medi.h"

#include <cmath>
#include <string>

#include "common/parallel.h"
#include "inversion/gauss_newton_cg.h"
#include "inversion/qsm_ops.h"
#include "tessera/common/dipole.h"
#include "tessera/common/error.h"
#include "tessera/inversion/methods.h"

namespace tessera {

void validate(const MediParams& p) {
  checked_option(method_options(), "medi.lambda", p.lambda);
  checked_option(method_options(), "medi.edgeFraction", p.edge_fraction);
  checked_option(method_options(), "medi.maxIterations", p.max_iterations);
  checked_option(method_options(), "medi.tolerance", p.tolerance);
  checked_option(method_options(), "medi.cgMaxIterations", p.cg_max_iterations);
  checked_option(method_options(), "medi.cgTolerance", p.cg_tolerance);
  checked_option(method_options(), "medi.phaseScale", p.phase_scale);
}

Medi::Medi(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask, std::span<const float> magnitude,
           const MediParams& params, unsigned threads)
    : geometry_(g), params_(params), threads_(threads), mask_(mask) {
  qsm_ops::check_field_and_mask("medi", g, field, mask);
  if (magnitude.empty()) {
    qsm_ops::refuse("medi", "MEDI needs the magnitude image (its edge prior comes from it): give magnitude, or choose another method");
  }
  qsm_ops::check_magnitude("medi", g, magnitude, mask);
  validate(params);
  const uint64_t n = g.voxel_count();
  tmp_.resize(n);
  edges_ = qsm_ops::edge_mask(g, magnitude, mask, params.edge_fraction, tmp_, threads);
  // m² with m = magnitude / mean(magnitude in the mask) inside the mask; φ in radians
  m2_.resize(n);
  qsm_ops::squared_magnitude_weights(magnitude, mask, m2_, threads);
  const float scale = static_cast<float>(params.phase_scale);
  phase_.resize(n);
  parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) phase_[i] = mask[i] ? field[i] * scale : 0.0f;
  });
  kernel_ = dipole_kernel(g);
  chi_.assign(n, 0.0f);
  p_weight_.resize(n);
  qsm_ops::resize(gn_, n);
  grad_.resize(3 * n);
  buf_.resize(n);
}

void Medi::minus_gradient(std::span<float> r) {
  const uint64_t n = chi_.size();
  // P = 1 / sqrt(|M_G ∇χ|² + e)
  qsm_ops::tv_reweighting(geometry_, edges_, chi_, medi_defaults::kEpsilon, grad_, p_weight_, threads_);
  // −(R(χ) + 2λ Dᵀ(m² sin(Dχ − φ))), minus the cost's gradient at χ
  qsm_ops::convolve(geometry_.dims, kernel_, chi_, tmp_, buf_, threads_);
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) tmp_[i] = m2_[i] * std::sin(tmp_[i] - phase_[i]);
  });
  qsm_ops::convolve(geometry_.dims, kernel_, tmp_, tmp_, buf_, threads_);
  qsm_ops::weighted_tv_term(geometry_, edges_, p_weight_, chi_, grad_, r, threads_);
  const float two_lambda = static_cast<float>(2.0 * params_.lambda);
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) r[i] = -(r[i] + two_lambda * tmp_[i]);
  });
}

void Medi::apply_system(std::span<const float> v, std::span<float> out) {
  // A v = R v + 2λ Dᵀ m² D v
  const uint64_t n = v.size();
  qsm_ops::convolve(geometry_.dims, kernel_, v, tmp_, buf_, threads_);
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) tmp_[i] *= m2_[i];
  });
  qsm_ops::convolve(geometry_.dims, kernel_, tmp_, tmp_, buf_, threads_);
  qsm_ops::weighted_tv_term(geometry_, edges_, p_weight_, v, grad_, out, threads_);
  const float two_lambda = static_cast<float>(2.0 * params_.lambda);
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) out[i] += two_lambda * tmp_[i];
  });
}

void Medi::step() {
  if (finished_) throw Error(ErrorCode::Internal, "medi: step after the last");
  ++done_;
  finished_ = qsm_ops::gauss_newton_cg_step(
      gn_, chi_, {params_.max_iterations, params_.tolerance, params_.cg_max_iterations, params_.cg_tolerance}, threads_, [&](std::span<float> r) { minus_gradient(r); },
      [&](std::span<const float> v, std::span<float> out) { apply_system(v, out); });
}

std::vector<float> Medi::take_result() {
  if (!finished_) throw Error(ErrorCode::Internal, "medi: take_result before the last step");
  const float inv = static_cast<float>(1.0 / params_.phase_scale);
  parallel_for(chi_.size(), threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) chi_[i] = mask_[i] ? chi_[i] * inv : 0.0f;
  });
  return std::move(chi_);
}

std::vector<float> medi(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                        std::span<const float> magnitude, const MediParams& params, unsigned threads) {
  Medi solver(g, field, mask, magnitude, params, threads);
  run_to_end(solver);
  return solver.take_result();
}

uint64_t medi_workspace_bytes(const Geometry& g, const MediParams& params, unsigned threads) {
  validate_geometry(g);
  validate(params);
  const uint64_t n = g.voxel_count();
  // kernel, m², φ, edges (3), χ, P, dχ, r, direction, A·direction, gradient (3), scratch (f32 each); one complex volume
  return 16 * n * sizeof(float) + n * sizeof(Complex) + fft3d_workspace_bytes(g.dims, threads);
}

}  // namespace tessera
