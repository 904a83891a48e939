// LSQR (Paige & Saunders 1982, ACM TOMS 8(1)) for min ‖A x − b‖ with A given as two operators, advanced one
// iteration at a time so an Iterative can yield between iterations. Vectors are float, scalars double; every vector
// loop runs on parallel_for / parallel_sum (bit-identical for any thread count).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "common/parallel.h"

namespace tessera {

class LsqrSolver {
 public:
  // out = A in (in: n values, out: m values) and out = Aᵀ in (in: m values, out: n values).
  using Operator = std::function<void(std::span<const float> in, std::span<float> out)>;

  // Solver for an m×n operator; stops when ‖r‖ <= tol·‖b‖ or ‖Aᵀr‖ <= tol·‖A‖·‖r‖ (MATLAB lsqr's two tests).
  LsqrSolver(uint64_t m, uint64_t n, Operator a, Operator at, double tol, unsigned threads)
      : m_(m), n_(n), a_(std::move(a)), at_(std::move(at)), tol_(tol), threads_(threads),
        u_(m), v_(n), w_(n), x_(n, 0.0f), tm_(m), tn_(n) {}

  // Floats the solver holds for an m×n operator (its six vectors).
  static uint64_t floats(uint64_t m, uint64_t n) { return 2 * m + 4 * n; }

  // β u = b, α v = Aᵀu, x = 0. b holds m values.
  void start(std::span<const float> b) {
    parallel_for(m_, threads_, [&](uint64_t s, uint64_t e) {
      for (uint64_t i = s; i < e; ++i) u_[i] = b[i];
    });
    beta_ = normalise(u_);
    bnorm_ = beta_;
    at_(u_, v_);
    alpha_ = normalise(v_);
    parallel_for(n_, threads_, [&](uint64_t s, uint64_t e) {
      for (uint64_t i = s; i < e; ++i) w_[i] = v_[i];
    });
    phibar_ = beta_;
    rhobar_ = alpha_;
    anorm2_ = alpha_ * alpha_;
    iterations_ = 0;
    converged_ = alpha_ * beta_ == 0.0;  // b = 0 or Aᵀb = 0: x = 0 solves it
  }

  // One bidiagonalisation step and the update of x. start() was called; converged() is false.
  void iterate() {
    a_(v_, tm_);
    parallel_for(m_, threads_, [&](uint64_t s, uint64_t e) {
      for (uint64_t i = s; i < e; ++i) u_[i] = static_cast<float>(tm_[i] - alpha_ * u_[i]);
    });
    beta_ = normalise(u_);
    at_(u_, tn_);
    parallel_for(n_, threads_, [&](uint64_t s, uint64_t e) {
      for (uint64_t i = s; i < e; ++i) v_[i] = static_cast<float>(tn_[i] - beta_ * v_[i]);
    });
    alpha_ = normalise(v_);
    anorm2_ += alpha_ * alpha_ + beta_ * beta_;

    const double rho = std::sqrt(rhobar_ * rhobar_ + beta_ * beta_);
    const double c = rhobar_ / rho, s = beta_ / rho;
    const double theta = s * alpha_;
    rhobar_ = -c * alpha_;
    const double phi = c * phibar_;
    phibar_ *= s;
    const double t1 = phi / rho, t2 = -theta / rho;
    parallel_for(n_, threads_, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) {
        x_[i] = static_cast<float>(x_[i] + t1 * w_[i]);
        w_[i] = static_cast<float>(v_[i] + t2 * w_[i]);
      }
    });
    ++iterations_;
    const double normr = phibar_;
    const double normar = alpha_ * std::fabs(c) * phibar_;
    const double anorm = std::sqrt(anorm2_);
    converged_ = normr <= tol_ * bnorm_ || normar <= tol_ * anorm * normr || alpha_ == 0.0 || beta_ == 0.0;
  }

  bool converged() const { return converged_; }
  uint32_t iterations() const { return iterations_; }
  // ‖b − A x‖ / ‖b‖ (the recurrence's estimate; 0 for b = 0).
  double relative_residual() const { return bnorm_ > 0.0 ? phibar_ / bnorm_ : 0.0; }
  std::span<const float> x() const { return x_; }
  std::vector<float> take_x() { return std::move(x_); }

 private:
  double normalise(std::vector<float>& a) {
    const double nrm = std::sqrt(parallel_sum(a.size(), threads_, [&](uint64_t i) {
      return static_cast<double>(a[i]) * static_cast<double>(a[i]);
    }));
    if (nrm > 0.0) {
      const double inv = 1.0 / nrm;
      parallel_for(a.size(), threads_, [&](uint64_t s, uint64_t e) {
        for (uint64_t i = s; i < e; ++i) a[i] = static_cast<float>(a[i] * inv);
      });
    }
    return nrm;
  }

  uint64_t m_, n_;
  Operator a_, at_;
  double tol_;
  unsigned threads_;
  std::vector<float> u_, v_, w_, x_, tm_, tn_;
  double alpha_ = 0, beta_ = 0, bnorm_ = 0, phibar_ = 0, rhobar_ = 0, anorm2_ = 0;
  uint32_t iterations_ = 0;
  bool converged_ = false;
};

}  // namespace tessera
