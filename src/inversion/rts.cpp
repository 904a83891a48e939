#include "tessera/inversion/rts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "common/message_number.h"
#include "common/parallel.h"
#include "tessera/common/error.h"
#include "tessera/common/fft.h"
#include "tessera/inversion/methods.h"
#include "tessera/inversion/tv_admm.h"

namespace tessera {

namespace {

using C = std::complex<float>;

// Sum of body(begin, end) over fixed blocks of [0, n), added in block order: the same bits for any thread count.
template <typename Body>
double block_sum(uint64_t n, unsigned threads, Body&& body) {
  const uint64_t blocks = (n + kParallelBlock - 1) / kParallelBlock;
  std::vector<double> partial(static_cast<size_t>(blocks), 0.0);
  parallel_for(n, threads, [&](uint64_t begin, uint64_t end) {
    partial[static_cast<size_t>(begin / kParallelBlock)] = body(begin, end);
  });
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

double norm2(C c) {
  return static_cast<double>(c.real()) * c.real() + static_cast<double>(c.imag()) * c.imag();
}

void release(std::vector<C>& v) { std::vector<C>().swap(v); }

}  // namespace

void validate(const RtsParams& p) {
  checked_option(method_options(), "rts.delta", p.delta);
  checked_option(method_options(), "rts.mu", p.mu);
  checked_option(method_options(), "rts.rho", p.rho);
  checked_option(method_options(), "rts.tolerance", p.tolerance);
  checked_option(method_options(), "rts.maxIterations", p.max_iterations);
  checked_option(method_options(), "rts.lsmrIterations", p.lsmr_iterations);
  // tau and gamma (the penalty's growth) are no request options: their ranges are the solver's own.
  auto range = [](const char* name, double v, bool ok, const std::string& rule) {
    if (!ok) throw Error(ErrorCode::InvalidArgument, "rts: " + std::string(name) + " must be " + rule + ", got " + message_number(v));
  };
  range("tau", p.tau, p.tau > 0.0 && p.tau <= 1.0,
        "in (0, 1] (" + message_number(rts_defaults::kTau) + " is the default)");
  range("gamma", p.gamma, p.gamma >= 1.0 && p.gamma <= 100.0,
        "in [1, 100] (" + message_number(rts_defaults::kGamma) + " is the default)");
  checked_option(method_options(), "rts.padRatio", p.pad_ratio);
}

Rts::Rts(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask, const RtsParams& params,
         unsigned threads)
    : g_(g), p_([&] {
        validate_inversion_inputs(g, field, mask);
        validate(params);
        Geometry p = g;
        p.dims = inversion_padded_dims(g.dims, params.pad_ratio, "rts");
        return p;
      }()),
      grid_(p_), mask_(mask), params_(params), threads_(threads), rho_(params.rho) {
  const uint64_t n = p_.voxel_count();
  const size_t sn = static_cast<size_t>(n);
  u_.resize(sn);
  v_.resize(sn);
  h_.resize(sn);
  hbar_.assign(sn, C(0.0f, 0.0f));
  xk_.assign(sn, C(0.0f, 0.0f));
  // LSMR start: β u = b = F(f), α v = Aᴴu, h = v, h̄ = 0, x = 0
  pad_into(g_, p_.dims, field, u_, threads_);
  fft3d_forward(u_, p_.dims, threads_);
  const double beta = std::sqrt(block_sum(n, threads_, [&](uint64_t b, uint64_t e) {
    double s = 0.0;
    for (uint64_t i = b; i < e; ++i) s += norm2(u_[i]);
    return s;
  }));
  const float ib = beta > 0.0 ? static_cast<float>(1.0 / beta) : 0.0f;
  const double alpha = std::sqrt(block_sum(n, threads_, [&](uint64_t b, uint64_t e) {
    double s = 0.0;
    grid_.for_range(b, e, [&](uint64_t i, int64_t x, int64_t y, int64_t z) {
      u_[i] *= ib;
      v_[i] = u_[i] * grid_.dipole(x, y, z);
      s += norm2(v_[i]);
    });
    return s;
  }));
  const float ia = alpha > 0.0 ? static_cast<float>(1.0 / alpha) : 0.0f;
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) h_[i] = v_[i] *= ia;
  });
  alpha_ = alphabar_ = alpha;
  zetabar_ = alpha * beta;
  lsmr_stalled_ = zetabar_ == 0.0;  // a zero field (or one in D's null space): x = 0 solves it
}

void Rts::step() {
  if (finished_) throw Error(ErrorCode::InvalidArgument, "RTS: step() called after it finished");
  if (lsmr_done_ < params_.lsmr_iterations) {
    if (!lsmr_stalled_) lsmr_step();
    ++lsmr_done_;
    if (lsmr_done_ == params_.lsmr_iterations) start_admm();
    return;
  }
  admm_step();
}

// One LSMR iteration (Fong & Saunders 2011, damp 0) for A = Aᴴ = diag(D).
void Rts::lsmr_step() {
  const uint64_t n = p_.voxel_count();
  const float a = static_cast<float>(alpha_);
  // β u = A v − α u
  const double beta = std::sqrt(block_sum(n, threads_, [&](uint64_t b, uint64_t e) {
    double s = 0.0;
    grid_.for_range(b, e, [&](uint64_t i, int64_t x, int64_t y, int64_t z) {
      u_[i] = v_[i] * grid_.dipole(x, y, z) - u_[i] * a;
      s += norm2(u_[i]);
    });
    return s;
  }));
  // α v = Aᴴ u − β v
  const float ib = beta > 0.0 ? static_cast<float>(1.0 / beta) : 0.0f, bf = static_cast<float>(beta);
  const double alpha = std::sqrt(block_sum(n, threads_, [&](uint64_t b, uint64_t e) {
    double s = 0.0;
    grid_.for_range(b, e, [&](uint64_t i, int64_t x, int64_t y, int64_t z) {
      u_[i] *= ib;
      v_[i] = u_[i] * grid_.dipole(x, y, z) - v_[i] * bf;
      s += norm2(v_[i]);
    });
    return s;
  }));
  // the two plane rotations
  const double rho_old = rho_l_;
  rho_l_ = std::hypot(alphabar_, beta);
  if (rho_l_ == 0.0) {
    lsmr_stalled_ = true;
    return;
  }
  const double c = alphabar_ / rho_l_, s = beta / rho_l_;
  const double theta_new = s * alpha;
  alphabar_ = c * alpha;
  const double rhobar_old = rhobar_;
  const double theta_bar = sbar_ * rho_l_;
  rhobar_ = std::hypot(cbar_ * rho_l_, theta_new);
  if (rhobar_ == 0.0) {
    lsmr_stalled_ = true;
    return;
  }
  cbar_ = cbar_ * rho_l_ / rhobar_;
  sbar_ = theta_new / rhobar_;
  const double zeta = cbar_ * zetabar_;
  zetabar_ = -sbar_ * zetabar_;
  alpha_ = alpha;
  // h̄ = h − θ̄ρ/(ρ_old ρ̄_old) h̄, x += ζ/(ρρ̄) h̄, h = v − θ/ρ h
  const float ia = alpha > 0.0 ? static_cast<float>(1.0 / alpha) : 0.0f;
  const float k_hbar = static_cast<float>(theta_bar * rho_l_ / (rho_old * rhobar_old));
  const float k_x = static_cast<float>(zeta / (rho_l_ * rhobar_));
  const float k_h = static_cast<float>(theta_new / rho_l_);
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      v_[i] *= ia;
      hbar_[i] = h_[i] - hbar_[i] * k_hbar;
      xk_[i] += hbar_[i] * k_x;
      h_[i] = v_[i] - h_[i] * k_h;
    }
  });
  if (alpha == 0.0 || beta == 0.0) lsmr_stalled_ = true;  // the Krylov space is exhausted: x is exact
}

// χ₁ = mask · F⁻¹(x̂); rhs = μM F(χ₁) / (μM + ρL); y = p = 0. (QSM.jl starts from y − p = ∇χ₁, which makes the first
// χ-update return χ₁ less its mean, and its tolerance then stops after one iteration: r 0.905 against 0.939 from zero
// on make_phantom 64×64×48 at 3 mm. QSM.rs rts.rs starts from zero too.)
void Rts::start_admm() {
  const uint64_t n = p_.voxel_count();
  const size_t sn = static_cast<size_t>(n);
  work_ = std::move(xk_);
  release(v_);
  release(h_);
  release(hbar_);
  fft3d_inverse(work_, p_.dims, threads_);
  x_.assign(sn, 0.0f);
  const uint64_t px = static_cast<uint64_t>(p_.dims[0]), py = static_cast<uint64_t>(p_.dims[1]);
  for (int64_t z = 0; z < g_.dims[2]; ++z)
    for (int64_t y = 0; y < g_.dims[1]; ++y) {
      const uint64_t o = g_.index(0, y, z), q = (static_cast<uint64_t>(y) + py * static_cast<uint64_t>(z)) * px;
      for (int64_t i = 0; i < g_.dims[0]; ++i) x_[q + i] = mask_[o + i] ? work_[q + i].real() : 0.0f;
    }
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) work_[i] = C(x_[i], 0.0f);
  });
  fft3d_forward(work_, p_.dims, threads_);
  rhs_ = std::move(u_);
  const float mu = static_cast<float>(params_.mu), delta = static_cast<float>(params_.delta),
              rho = static_cast<float>(rho_);
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    grid_.for_range(b, e, [&](uint64_t i, int64_t x, int64_t y, int64_t z) {
      const float m = std::fabs(grid_.dipole(x, y, z)) > delta ? mu : 0.0f;
      const float a = m + rho * grid_.neg_laplacian(x, y, z);
      rhs_[i] = a == 0.0f ? C(0.0f, 0.0f) : work_[i] * (m / a);
    });
  });
  for (int a = 0; a < 3; ++a) {
    dual_[a].assign(sn, 0.0f);
    v3_[a].assign(sn, 0.0f);
  }
}

void Rts::admm_step() {
  const uint64_t n = p_.voxel_count();
  const float mu = static_cast<float>(params_.mu), delta = static_cast<float>(params_.delta);
  float rho = static_cast<float>(rho_);
  // χ-update: χ̂ = rhs + ρ F(∇ᵀ(y − p)) / (μM + ρL)
  gradient_adjoint(p_, v3_[0], v3_[1], v3_[2], work_, threads_);
  fft3d_forward(work_, p_.dims, threads_);
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    grid_.for_range(b, e, [&](uint64_t i, int64_t x, int64_t y, int64_t z) {
      const float m = std::fabs(grid_.dipole(x, y, z)) > delta ? mu : 0.0f;
      const float a = m + rho * grid_.neg_laplacian(x, y, z);
      work_[i] = a == 0.0f ? C(0.0f, 0.0f) : rhs_[i] + work_[i] * (rho / a);
    });
  });
  fft3d_inverse(work_, p_.dims, threads_);
  const std::array<double, 2> s = take_real_and_change(work_, x_, threads_);
  change_ = s[1] > 0.0 ? std::sqrt(s[0] / s[1]) : 0.0;
  ++admm_done_;
  if (change_ < params_.tolerance || admm_done_ >= params_.max_iterations) {
    finished_ = true;
    return;
  }
  // y = shrink(∇χ + p, 1/ρ), p = p + ∇χ − y, v = y − p; primal residual Σ |∇χ − y|
  forward_gradient(p_, x_, v3_[0], v3_[1], v3_[2], threads_);
  const float t = 1.0f / rho;
  const double residual = block_sum(n, threads_, [&](uint64_t b, uint64_t e) {
    double sum = 0.0;
    for (uint64_t i = b; i < e; ++i) {
      float r2 = 0.0f;
      for (int a = 0; a < 3; ++a) {
        const float d = v3_[a][i];
        const float w = dual_[a][i] + d;
        const float y = w > t ? w - t : (w < -t ? w + t : 0.0f);
        dual_[a][i] = w - y;
        v3_[a][i] = y - dual_[a][i];
        r2 += (d - y) * (d - y);
      }
      sum += std::sqrt(static_cast<double>(r2));
    }
    return sum;
  });
  const bool grow = !first_residual_ && residual > params_.tau * residual_;
  first_residual_ = false;
  residual_ = residual;
  if (!grow) return;
  // ρ ← γρ: rescale the constant right-hand side and the scaled duals p, and y − p with them (QSM.jl keeps y − p of
  // the old scale for one iteration)
  const float rho_new = static_cast<float>(rho_ * params_.gamma), ig = static_cast<float>(1.0 / params_.gamma);
  parallel_for(n, threads_, [&](uint64_t b, uint64_t e) {
    grid_.for_range(b, e, [&](uint64_t i, int64_t x, int64_t y, int64_t z) {
      const float m = std::fabs(grid_.dipole(x, y, z)) > delta ? mu : 0.0f;
      const float l = grid_.neg_laplacian(x, y, z);
      const float a0 = m + rho * l;
      if (a0 != 0.0f) rhs_[i] *= a0 / (m + rho_new * l);
      for (int a = 0; a < 3; ++a) {
        const float p_old = dual_[a][i], p_new = p_old * ig;
        v3_[a][i] = (v3_[a][i] + p_old) - p_new;  // y − p_new
        dual_[a][i] = p_new;
      }
    });
  });
  rho_ = rho_new;
}

std::vector<float> Rts::result() const {
  if (!finished_) {
    throw Error(ErrorCode::InvalidArgument, "RTS: result() asked after " + std::to_string(steps_done()) + " of " +
                                                std::to_string(total_steps()) + " steps: run it to the end first");
  }
  return crop_real_masked(g_, p_.dims, x_, mask_);
}

std::vector<float> rts(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                       const RtsParams& params, unsigned threads) {
  Rts it(g, field, mask, params, threads);
  run_to_end(it);
  return it.result();
}

uint64_t rts_workspace_bytes(const Geometry& g, const RtsParams& params, unsigned threads) {
  validate_geometry(g);
  validate(params);
  const Dims3 pd = inversion_padded_dims(g.dims, params.pad_ratio, "rts");
  const uint64_t n = static_cast<uint64_t>(pd[0]) * static_cast<uint64_t>(pd[1]) * static_cast<uint64_t>(pd[2]);
  // max(step 1: 5 complex + χ₁ at the switch, step 2: 2 complex + 7 real) = 44 bytes a padded voxel
  const uint64_t per_voxel = std::max<uint64_t>(5 * sizeof(C) + sizeof(float), 2 * sizeof(C) + 7 * sizeof(float));
  return n * per_voxel + fft3d_workspace_bytes(pd, threads) +
         static_cast<uint64_t>(pd[0] + pd[1] + pd[2]) * 2 * sizeof(double) + g.voxel_count() * sizeof(float) +
         (n / kParallelBlock + 1) * 2 * sizeof(double);
}

}  // namespace tessera
