// R2* and T2* from multi-echo magnitude by ARLO or a log-linear fit (tessera/contrast/r2star.h).
#include "tessera/contrast/r2star.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "common/message_number.h"
#include "common/parallel.h"
#include "contrast/echo_times.h"
#include "tessera/common/budget.h"
#include "tessera/common/error.h"

namespace tessera {

namespace {

const std::array<OptionSpec, 1> kR2starOptions{{
    {"r2star.method", "", 0, "arlo", 0, 0, false, false,
     "R2* estimator: ARLO (Pei 2015; ≥ 3 equally spaced echoes) or a log-linear least-squares fit", "arlo|loglinear"},
}};

// S0 by least squares for a fixed R2*, and the RMS residual over the mean signal.
R2starVoxel r2star_amplitude(std::span<const float> s, std::span<const double> te, double r) {
  double sx = 0.0, xx = 0.0, mean = 0.0;
  for (size_t e = 0; e < s.size(); ++e) {
    const double x = std::exp(-r * te[e]);
    sx += s[e] * x;
    xx += x * x;
    mean += s[e];
  }
  mean /= static_cast<double>(s.size());
  const double s0 = xx > 0.0 ? sx / xx : 0.0;
  double rss = 0.0;
  for (size_t e = 0; e < s.size(); ++e) {
    const double d = s[e] - s0 * std::exp(-r * te[e]);
    rss += d * d;
  }
  const double residual = mean > 0.0 ? std::sqrt(rss / static_cast<double>(s.size())) / mean : 0.0;
  return {r, s0, residual};
}

double r2star_clamped(double r) { return std::isfinite(r) ? std::clamp(r, 0.0, kR2starMaxPerS) : 0.0; }

}  // namespace

std::span<const OptionSpec> r2star_options() { return kR2starOptions; }

R2starMethod r2star_method_from_name(std::string_view name) {
  if (name == "arlo") return R2starMethod::Arlo;
  if (name == "loglinear") return R2starMethod::LogLinear;
  throw word_refusal(find_option(kR2starOptions, "r2star.method"), name);
}

std::string_view r2star_method_name(R2starMethod method) {
  return method == R2starMethod::Arlo ? "arlo" : "loglinear";
}

void validate(const R2starParams& params) {
  if (params.method != R2starMethod::Arlo && params.method != R2starMethod::LogLinear) {
    throw Error(ErrorCode::InvalidArgument, "r2star.method must be one of " + std::string(find_option(kR2starOptions, "r2star.method").choices) +
                                                ", got value " + std::to_string(static_cast<int>(params.method)));
  }
}

void validate_arlo_echoes(std::span<const double> te_s) {
  if (te_s.size() < 3) {
    throw Error(ErrorCode::InvalidArgument, "r2star: ARLO needs at least 3 equally spaced echoes, got " +
                                                std::to_string(te_s.size()) +
                                                "; use the log-linear fit (r2star.method loglinear) for 2 echoes");
  }
  const double d0 = te_s[1] - te_s[0];
  for (size_t e = 2; e < te_s.size(); ++e) {
    const double d = te_s[e] - te_s[e - 1];
    if (std::abs(d - d0) > r2star_defaults::kSpacingTolerance * d0) {
      throw Error(ErrorCode::InvalidArgument, "r2star: ARLO needs equally spaced echoes, but TE " + std::to_string(e) +
                                                  " → " + std::to_string(e + 1) + " is " + message_number(d * 1000.0) +
                                                  " ms against " + message_number(d0 * 1000.0) +
                                                  " ms for TE 1 → 2; use the log-linear fit (r2star.method loglinear)");
    }
  }
}

R2starVoxel r2star_voxel(std::span<const float> s, std::span<const double> te, R2starMethod method) {
  const size_t echoes = s.size();
  double r = 0.0;
  if (method == R2starMethod::Arlo) {
    // Pei 2015: S_i − S_{i+2} = R2*·∫ S over [TE_i, TE_{i+2}], the integral by Simpson's rule; the least-squares
    // solution with Simpson's error term is T2* = (Σs² + (Δ/3)Σsδ) / ((Δ/3)Σδ² + Σsδ).
    const double a = (te[1] - te[0]) / 3.0;
    double ss = 0.0, sd = 0.0, dd = 0.0;
    for (size_t i = 0; i + 2 < echoes; ++i) {
      const double si = a * (static_cast<double>(s[i]) + 4.0 * s[i + 1] + s[i + 2]);
      const double di = static_cast<double>(s[i]) - s[i + 2];
      ss += si * si;
      sd += si * di;
      dd += di * di;
    }
    const double t2 = ss + a * sd;
    r = t2 > 0.0 ? (a * dd + sd) / t2 : 0.0;
  } else {
    // ln S = ln S0 − R2*·TE by least squares over the echoes with signal.
    double k = 0.0, st = 0.0, sy = 0.0;
    for (size_t e = 0; e < echoes; ++e) {
      if (s[e] > 0.0f) {
        k += 1.0;
        st += te[e];
        sy += std::log(static_cast<double>(s[e]));
      }
    }
    if (k >= 2.0) {
      const double tm = st / k, ym = sy / k;
      double stt = 0.0, sty = 0.0;
      for (size_t e = 0; e < echoes; ++e) {
        if (s[e] > 0.0f) {
          const double t = te[e] - tm;
          stt += t * t;
          sty += t * (std::log(static_cast<double>(s[e])) - ym);
        }
      }
      r = stt > 0.0 ? -sty / stt : 0.0;
    }
  }
  return r2star_amplitude(s, te, r2star_clamped(r));
}

double t2star_of(double r) { return r > 1.0 / kT2starCapS ? 1.0 / r : kT2starCapS; }

R2star::R2star(const Geometry& g, std::span<const float> magnitude, std::span<const double> te_s,
               std::span<const uint8_t> mask, const R2starParams& params, unsigned threads)
    : geometry_(g), magnitude_(magnitude), te_(te_s.begin(), te_s.end()), mask_(mask), params_(params),
      threads_(threads) {
  contrast::validate_echo_volumes("r2star", g, te_s, magnitude, "the magnitude", mask);
  validate(params);
  if (params.method == R2starMethod::Arlo) {
    validate_arlo_echoes(te_s);
  } else if (te_s.size() < 2) {
    throw Error(ErrorCode::InvalidArgument, "r2star: a decay needs at least 2 echoes, got 1");
  }
  n_ = g.voxel_count();
  for (uint64_t i = 0; i < magnitude.size(); ++i) {
    if (!(std::isfinite(magnitude[i]) && magnitude[i] >= 0.0f)) {
      throw Error(ErrorCode::InvalidArgument, "r2star: the magnitude of echo " + std::to_string(i / n_ + 1) +
                                                  " at voxel " + std::to_string(i % n_) + " is " +
                                                  message_number(magnitude[i]) + "; a magnitude is finite and ≥ 0");
    }
  }
  result_.r2star.assign(n_, 0.0f);
  result_.t2star.assign(n_, 0.0f);
  result_.s0.assign(n_, 0.0f);
  result_.residual.assign(n_, 0.0f);
}

std::string R2star::name() const {
  return params_.method == R2starMethod::Arlo ? "R2* (ARLO)" : "R2* (log-linear)";
}

void R2star::step() {
  if (finished()) throw Error(ErrorCode::Internal, "r2star: step() after the last slice");
  const uint64_t plane = static_cast<uint64_t>(geometry_.dims[0]) * static_cast<uint64_t>(geometry_.dims[1]);
  const uint64_t base = static_cast<uint64_t>(done_) * plane;
  const size_t echoes = te_.size();
  parallel_for(plane, threads_, [&](uint64_t b, uint64_t e) {
    std::vector<float> s(echoes);
    for (uint64_t j = b; j < e; ++j) {
      const uint64_t i = base + j;
      const bool inside = mask_.empty() ? magnitude_[i] > 0.0f : mask_[i] != 0;
      if (!inside) continue;
      for (size_t k = 0; k < echoes; ++k) s[k] = magnitude_[k * n_ + i];
      const R2starVoxel v = r2star_voxel(s, te_, params_.method);
      result_.r2star[i] = static_cast<float>(v.r2star);
      result_.t2star[i] = static_cast<float>(t2star_of(v.r2star));
      result_.s0[i] = static_cast<float>(v.s0);
      result_.residual[i] = static_cast<float>(v.residual);
    }
  });
  ++done_;
}

R2starResult R2star::take_result() {
  if (!finished()) throw Error(ErrorCode::InvalidArgument, "r2star: take_result() before the last slice");
  if (taken_) throw Error(ErrorCode::InvalidArgument, "r2star: take_result() called twice");
  taken_ = true;
  return std::move(result_);
}

R2starResult r2star(const Geometry& geometry, std::span<const float> magnitude, std::span<const double> te_s,
                    std::span<const uint8_t> mask, const R2starParams& params, unsigned threads) {
  R2star fit(geometry, magnitude, te_s, mask, params, threads);
  run_to_end(fit);
  return fit.take_result();
}

uint64_t r2star_workspace_bytes(const Geometry& geometry, uint32_t echoes, const R2starParams& params,
                                unsigned threads) {
  validate_geometry(geometry);
  validate(params);
  const uint64_t t = parallel_threads(geometry.voxel_count(), threads);
  return saturating_add(saturating_mul(geometry.voxel_count(), 16), saturating_mul(t, 4ull * echoes));
}

}  // namespace tessera
