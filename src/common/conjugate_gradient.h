// The conjugate-gradient updates shared by the iterative solvers (PDF, RESHARP, LBV, MEDI, TFI): the dot product, the
// move along a direction and the new direction. Every loop runs on parallel_for / parallel_sum, so results are
// bit-identical for any thread count. Internal (include as "common/conjugate_gradient.h").
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

#include "common/parallel.h"

namespace tessera {

// a·b summed in double.
// a and b hold the same count.
inline double dot(std::span<const float> a, std::span<const float> b, unsigned threads) {
  return parallel_sum(a.size(), threads, [&](uint64_t i) { return static_cast<double>(a[i]) * static_cast<double>(b[i]); });
}

// One move along p after the caller formed q = A p: x += α p, r −= α q with α = rho / (p·q); rho is r·z of the
// direction (z = r without a preconditioner). Returns false and moves nothing when p·q is not > 0 (A is not positive
// on p, or p is 0: the solve stops).
// x, r, p and q hold the same count; none aliases another.
inline bool cg_move(std::span<float> x, std::span<float> r, std::span<const float> p, std::span<const float> q,
                    double rho, unsigned threads) {
  const double pq = dot(p, q, threads);
  if (!(pq > 0.0)) return false;
  const float alpha = static_cast<float>(rho / pq);
  parallel_for(x.size(), threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      x[i] += alpha * p[i];
      r[i] -= alpha * q[i];
    }
  });
  return true;
}

// The next direction: p = z + β p.
// p and z hold the same count.
inline void cg_next_direction(std::span<float> p, std::span<const float> z, float beta, unsigned threads) {
  parallel_for(p.size(), threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) p[i] = z[i] + beta * p[i];
  });
}

// One iteration of plain (unpreconditioned) CG after the caller formed q = A p; rr is r·r on entry and on return.
// converged(rr_new) says whether the new residual ends the solve. Returns true when the solve ends (converged, or A
// not positive on p); otherwise p is the next direction.
// x, r, p and q hold the same count; none aliases another.
template <class Converged>
bool plain_cg_iteration(std::span<float> x, std::span<float> r, std::span<float> p, std::span<const float> q, double& rr,
                        unsigned threads, Converged&& converged) {
  if (!cg_move(x, r, p, q, rr, threads)) return true;
  const double rr_new = dot(r, r, threads);
  const float beta = static_cast<float>(rr_new / rr);
  rr = rr_new;
  if (converged(rr_new)) return true;
  cg_next_direction(p, r, beta, threads);
  return false;
}

}  // namespace tessera
