// One step of a Gauss-Newton loop solved by conjugate gradients (MEDI, TFI), and the linearised edge-weighted TV term
// both regularise with. Every loop runs on parallel_for / parallel_sum: bit-identical for any thread count.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

#include "common/conjugate_gradient.h"
#include "common/parallel.h"
#include "inversion/qsm_ops.h"
#include "tessera/common/geometry.h"
#include "tessera/inversion/gauss_newton_cg.h"

namespace tessera::qsm_ops {

struct GaussNewtonLimits {
  uint32_t max_iterations;     // outer iterations
  double tolerance;            // ‖update‖ / ‖x‖ below which the loop ends
  uint32_t cg_max_iterations;  // CG iterations per outer iteration
  double cg_tolerance;         // ‖residual‖ / ‖residual at the start‖ below which CG ends
};

// Sizes the state for n unknowns.
inline void resize(GaussNewtonCg& s, uint64_t n) {
  s.update.resize(n);
  s.residual.resize(n);
  s.direction.resize(n);
  s.image.resize(n);
}

// Adds the update to x; returns whether the outer loop has finished (‖update‖ / ‖x‖ from x before the update, infinite
// on the first iteration from x = 0).
inline bool end_outer_iteration(GaussNewtonCg& s, std::span<float> x, const GaussNewtonLimits& lim, unsigned threads) {
  const double change = norm(s.update, threads), size = norm(x, threads);
  parallel_for(x.size(), threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) x[i] += s.update[i];
  });
  ++s.outer_done;
  return s.outer_done >= lim.max_iterations || (size > 0.0 && change < lim.tolerance * size) || change == 0.0;
}

// One CG iteration (and, at a CG solve's start, the outer iteration's set-up); returns whether the loop has finished.
// minus_gradient(residual): fills residual with minus the cost's gradient at x (called at each CG solve's start).
// apply(direction, image): image = A direction, the linearised system; image aliases nothing.
// x.size() == the state's size (resize).
template <class MinusGradient, class Apply>
bool gauss_newton_cg_step(GaussNewtonCg& s, std::span<float> x, const GaussNewtonLimits& lim, unsigned threads,
                          MinusGradient&& minus_gradient, Apply&& apply) {
  const uint64_t n = x.size();
  if (s.cg_done == 0) {
    minus_gradient(std::span<float>(s.residual));
    parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) {
        s.direction[i] = s.residual[i];
        s.update[i] = 0.0f;
      }
    });
    s.rs = dot(s.residual, s.residual, threads);
    s.bnorm = std::sqrt(s.rs);
    if (s.bnorm == 0.0) {  // x is stationary: nothing to solve
      end_outer_iteration(s, x, lim, threads);
      return true;
    }
  }
  apply(std::span<const float>(s.direction), std::span<float>(s.image));
  ++s.cg_done;
  const bool solved = plain_cg_iteration(std::span<float>(s.update), std::span<float>(s.residual),
                                         std::span<float>(s.direction), std::span<const float>(s.image), s.rs, threads,
                                         [&](double rs_new) { return std::sqrt(rs_new) <= lim.cg_tolerance * s.bnorm; });
  if (solved || s.cg_done >= lim.cg_max_iterations) {
    s.cg_done = 0;
    return end_outer_iteration(s, x, lim, threads);
  }
  return false;
}

// weight = 1 / sqrt(|M_G ∇x|² + eps): the reweighting of the TV term at x (MEDI's P, TFI's Q).
// edges: 3·n values (M_G per gradient component); grad: 3·n values of scratch; x, weight: n values.
inline void tv_reweighting(const Geometry& g, std::span<const float> edges, std::span<const float> x, double eps,
                           std::span<float> grad, std::span<float> weight, unsigned threads) {
  const uint64_t n = x.size();
  const std::span<float> gx = grad.subspan(0, n), gy = grad.subspan(n, n), gz = grad.subspan(2 * n, n);
  gradient(g, x, gx, gy, gz, threads);
  parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      const double ux = edges[i] * gx[i], uy = edges[n + i] * gy[i], uz = edges[2 * n + i] * gz[i];
      weight[i] = static_cast<float>(1.0 / std::sqrt(ux * ux + uy * uy + uz * uz + eps));
    }
  });
}

// out = ∇ᵀ(M_G W M_G ∇v): the linearised TV term with the reweighting W (tv_reweighting).
// edges, grad: 3·n values (grad is scratch); v, weight, out: n values; out aliases neither v nor grad.
inline void weighted_tv_term(const Geometry& g, std::span<const float> edges, std::span<const float> weight,
                             std::span<const float> v, std::span<float> grad, std::span<float> out, unsigned threads) {
  const uint64_t n = v.size();
  const std::span<float> gx = grad.subspan(0, n), gy = grad.subspan(n, n), gz = grad.subspan(2 * n, n);
  gradient(g, v, gx, gy, gz, threads);
  parallel_for(3 * n, threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      const float w = edges[i];
      grad[i] = w * weight[i % n] * w * grad[i];
    }
  });
  gradient_adjoint(g, gx, gy, gz, out, threads);
}

}  // namespace tessera::qsm_ops
