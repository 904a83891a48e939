#include "tessera/inversion/medi.h"

#include <cmath>
#include <string>

#include "common/parallel.h"
#include "inversion/qsm_ops.h"
#include "tessera/common/dipole.h"
#include "tessera/common/error.h"

namespace tessera {

void validate(const MediParams& p) {
  if (!(p.lambda > 0.0 && p.lambda <= 1e7)) {
    qsm_ops::refuse("medi", "lambda (data-term weight) must be in (0, 1e7] (the MEDI toolbox uses 1000), got " + std::to_string(p.lambda));
  }
  if (!(p.edge_fraction >= 0.0 && p.edge_fraction < 1.0)) {
    qsm_ops::refuse("medi", "edge_fraction must be in [0, 1) of the mask's gradient components (MEDI: 0.3), got " +
           std::to_string(p.edge_fraction));
  }
  if (p.max_iterations < 1 || p.max_iterations > 100) {
    qsm_ops::refuse("medi", "max_iterations (Gauss-Newton) must be in [1, 100] (MEDI: 10), got " + std::to_string(p.max_iterations));
  }
  if (!(p.tolerance >= 0.0 && p.tolerance < 1.0)) {
    qsm_ops::refuse("medi", "tolerance (Gauss-Newton ‖dχ‖/‖χ‖) must be in [0, 1) (MEDI: 0.1), got " + std::to_string(p.tolerance));
  }
  if (p.cg_max_iterations < 1 || p.cg_max_iterations > 1000) {
    qsm_ops::refuse("medi", "cg_max_iterations must be in [1, 1000] (MEDI: 100), got " + std::to_string(p.cg_max_iterations));
  }
  if (!(p.cg_tolerance > 0.0 && p.cg_tolerance < 1.0)) {
    qsm_ops::refuse("medi", "cg_tolerance must be in (0, 1) (MEDI: 0.01), got " + std::to_string(p.cg_tolerance));
  }
  if (!(p.phase_scale > 0.0 && p.phase_scale <= 1000.0)) {
    qsm_ops::refuse("medi", "phase_scale must be in (0, 1000] rad/ppm (4.01 at 3 T, ΔTE 5 ms), got " + std::to_string(p.phase_scale));
  }
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
  dx_.resize(n);
  r_.resize(n);
  dir_.resize(n);
  adir_.resize(n);
  grad_.resize(3 * n);
  buf_.resize(n);
}

void Medi::regulariser(std::span<const float> v, std::span<float> out) {
  const uint64_t n = v.size();
  const std::span<float> gx(grad_.data(), n), gy(grad_.data() + n, n), gz(grad_.data() + 2 * n, n);
  qsm_ops::gradient(geometry_, v, gx, gy, gz, threads_);
  parallel_for(3 * n, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      const float w = edges_[i];
      grad_[i] = w * p_weight_[i % n] * w * grad_[i];
    }
  });
  qsm_ops::gradient_adjoint(geometry_, gx, gy, gz, out, threads_);
}

void Medi::start_gauss_newton() {
  const uint64_t n = chi_.size();
  // P = 1 / sqrt(|M_G ∇χ|² + e)
  const std::span<float> gx(grad_.data(), n), gy(grad_.data() + n, n), gz(grad_.data() + 2 * n, n);
  qsm_ops::gradient(geometry_, chi_, gx, gy, gz, threads_);
  const double eps = medi_defaults::kEpsilon;
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      const double ux = edges_[i] * gx[i], uy = edges_[n + i] * gy[i], uz = edges_[2 * n + i] * gz[i];
      p_weight_[i] = static_cast<float>(1.0 / std::sqrt(ux * ux + uy * uy + uz * uz + eps));
    }
  });
  // b = R(χ) + 2λ Dᵀ(m² sin(Dχ − φ)), the gradient of the cost at χ; CG solves A dχ = −b from dχ = 0
  qsm_ops::convolve(geometry_.dims, kernel_, chi_, tmp_, buf_, threads_);
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) tmp_[i] = m2_[i] * std::sin(tmp_[i] - phase_[i]);
  });
  qsm_ops::convolve(geometry_.dims, kernel_, tmp_, tmp_, buf_, threads_);
  regulariser(chi_, r_);
  const float two_lambda = static_cast<float>(2.0 * params_.lambda);
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      r_[i] = -(r_[i] + two_lambda * tmp_[i]);
      dir_[i] = r_[i];
      dx_[i] = 0.0f;
    }
  });
  rs_ = qsm_ops::dot(r_, r_, threads_);
  bnorm_ = std::sqrt(rs_);
  cg_done_ = 0;
}

void Medi::end_gauss_newton() {
  const double change = qsm_ops::norm(dx_, threads_), size = qsm_ops::norm(chi_, threads_);
  parallel_for(chi_.size(), threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) chi_[i] += dx_[i];
  });
  ++gn_done_;
  // ‖dχ‖/‖χ‖ with χ before the update (infinite on the first iteration, from χ = 0)
  finished_ = gn_done_ >= params_.max_iterations || (size > 0.0 && change < params_.tolerance * size) || change == 0.0;
}

void Medi::step() {
  if (finished_) throw Error(ErrorCode::Internal, "medi: step after the last");
  ++done_;
  if (cg_done_ == 0) {
    start_gauss_newton();
    if (bnorm_ == 0.0) {  // χ is stationary: nothing to solve
      end_gauss_newton();
      finished_ = true;
      return;
    }
  }
  // one CG iteration on A = R + 2λ Dᵀ m² D
  const uint64_t n = chi_.size();
  qsm_ops::convolve(geometry_.dims, kernel_, dir_, tmp_, buf_, threads_);
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) tmp_[i] *= m2_[i];
  });
  qsm_ops::convolve(geometry_.dims, kernel_, tmp_, tmp_, buf_, threads_);
  regulariser(dir_, adir_);
  const float two_lambda = static_cast<float>(2.0 * params_.lambda);
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) adir_[i] += two_lambda * tmp_[i];
  });
  const double curvature = qsm_ops::dot(dir_, adir_, threads_);
  ++cg_done_;
  bool solved = !(curvature > 0.0);
  if (!solved) {
    const float alpha = static_cast<float>(rs_ / curvature);
    parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) {
        dx_[i] += alpha * dir_[i];
        r_[i] -= alpha * adir_[i];
      }
    });
    const double rs_new = qsm_ops::dot(r_, r_, threads_);
    solved = std::sqrt(rs_new) <= params_.cg_tolerance * bnorm_;
    const float beta = static_cast<float>(rs_new / rs_);
    rs_ = rs_new;
    if (!solved) {
      parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
        for (uint64_t i = b; i < e; ++i) dir_[i] = r_[i] + beta * dir_[i];
      });
    }
  }
  if (solved || cg_done_ >= params_.cg_max_iterations) {
    end_gauss_newton();
    cg_done_ = 0;
  }
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
