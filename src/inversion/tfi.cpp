#include "tessera/inversion/tfi.h"

#include <cmath>
#include <string>

#include "common/parallel.h"
#include "inversion/gauss_newton_cg.h"
#include "inversion/qsm_ops.h"
#include "tessera/common/dipole.h"
#include "tessera/common/error.h"
#include "tessera/inversion/methods.h"

namespace tessera {

void validate(const TfiParams& p) {
  checked_option(method_options(), "tfi.lambda", p.lambda);
  checked_option(method_options(), "tfi.preconditioner", p.preconditioner);
  checked_option(method_options(), "tfi.edgeFraction", p.edge_fraction);
  checked_option(method_options(), "tfi.maxIterations", p.max_iterations);
  checked_option(method_options(), "tfi.tolerance", p.tolerance);
  checked_option(method_options(), "tfi.cgMaxIterations", p.cg_max_iterations);
  checked_option(method_options(), "tfi.cgTolerance", p.cg_tolerance);
}

Tfi::Tfi(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask, std::span<const float> magnitude,
         const TfiParams& params, unsigned threads)
    : geometry_(g), params_(params), threads_(threads), mask_(mask), outside_(static_cast<float>(params.preconditioner)) {
  qsm_ops::check_field_and_mask("tfi", g, field, mask);
  if (magnitude.empty()) {
    qsm_ops::refuse("tfi", "TFI needs the magnitude image (its data weights and edge prior come from it): give magnitude, or "
                           "choose another method");
  }
  qsm_ops::check_magnitude("tfi", g, magnitude, mask);
  validate(params);
  const uint64_t n = g.voxel_count();
  pv_.resize(n);
  edges_ = qsm_ops::edge_mask(g, magnitude, mask, params.edge_fraction, pv_, threads);
  w2_.resize(n);
  qsm_ops::squared_magnitude_weights(magnitude, mask, w2_, threads);
  field_.resize(n);
  parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) field_[i] = mask[i] ? field[i] : 0.0f;
  });
  kernel_ = dipole_kernel(g);
  y_.assign(n, 0.0f);
  q_.resize(n);
  qsm_ops::resize(gn_, n);
  reg_.resize(n);
  grad_.resize(3 * n);
  buf_.resize(n);
}

void Tfi::apply_system(std::span<const float> v, std::span<float> out) {
  const uint64_t n = v.size();
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) pv_[i] = precondition(i) * v[i];
  });
  qsm_ops::convolve(geometry_.dims, kernel_, pv_, out, buf_, threads_);
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) out[i] *= w2_[i];
  });
  qsm_ops::convolve(geometry_.dims, kernel_, out, out, buf_, threads_);
  qsm_ops::weighted_tv_term(geometry_, edges_, q_, pv_, grad_, reg_, threads_);
  const float lambda = static_cast<float>(params_.lambda);
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) out[i] = precondition(i) * (out[i] + lambda * reg_[i]);
  });
}

void Tfi::minus_gradient(std::span<float> r) {
  const uint64_t n = y_.size();
  // χ = P y; Q = 1 / sqrt(|M_G ∇χ|² + e)
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) pv_[i] = precondition(i) * y_[i];
  });
  qsm_ops::tv_reweighting(geometry_, edges_, pv_, tfi_defaults::kEpsilon, grad_, q_, threads_);
  // minus the cost's gradient at y: −P (D w² (D χ − f) + λ ∇ᵀ(M_G Q M_G ∇χ)); r is free scratch until then
  qsm_ops::convolve(geometry_.dims, kernel_, pv_, r, buf_, threads_);
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) r[i] = w2_[i] * (r[i] - field_[i]);
  });
  qsm_ops::convolve(geometry_.dims, kernel_, r, r, buf_, threads_);
  qsm_ops::weighted_tv_term(geometry_, edges_, q_, pv_, grad_, reg_, threads_);
  const float lambda = static_cast<float>(params_.lambda);
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) r[i] = -precondition(i) * (r[i] + lambda * reg_[i]);
  });
}

void Tfi::step() {
  if (finished_) throw Error(ErrorCode::Internal, "tfi: step after the last");
  ++done_;
  finished_ = qsm_ops::gauss_newton_cg_step(
      gn_, y_, {params_.max_iterations, params_.tolerance, params_.cg_max_iterations, params_.cg_tolerance}, threads_,
      [&](std::span<float> r) { minus_gradient(r); },
      [&](std::span<const float> v, std::span<float> out) { apply_system(v, out); });
}

std::vector<float> Tfi::whole_volume_chi() const {
  if (!finished_) throw Error(ErrorCode::Internal, "tfi: whole_volume_chi before the last step");
  std::vector<float> chi(y_.size());
  parallel_for(chi.size(), threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) chi[i] = precondition(i) * y_[i];
  });
  return chi;
}

std::vector<float> Tfi::take_result() {
  if (!finished_) throw Error(ErrorCode::Internal, "tfi: take_result before the last step");
  // inside the mask P = 1: χ = y
  parallel_for(y_.size(), threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) y_[i] = mask_[i] ? y_[i] : 0.0f;
  });
  return std::move(y_);
}

std::vector<float> tfi(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                       std::span<const float> magnitude, const TfiParams& params, unsigned threads) {
  Tfi solver(g, field, mask, magnitude, params, threads);
  run_to_end(solver);
  return solver.take_result();
}

uint64_t tfi_workspace_bytes(const Geometry& g, const TfiParams& params, unsigned threads) {
  validate_geometry(g);
  validate(params);
  const uint64_t n = g.voxel_count();
  // kernel, w², field, edges (3), y, q, dy, r, direction, A·direction, P, regulariser, gradient (3) (f32 each); one
  // complex volume
  return 17 * n * sizeof(float) + n * sizeof(Complex) + fft3d_workspace_bytes(g.dims, threads);
}

}  // namespace tessera
