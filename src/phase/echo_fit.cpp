#include "tessera/phase/echo_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <string>

#include "common/message_number.h"
#include "common/parallel.h"
#include "phase/phase_math.h"
#include "tessera/phase/brain_mask.h"
#include "tessera/common/error.h"
#include "tessera/phase/options.h"
#include "tessera/phase/unwrap.h"

namespace tessera {

namespace {

// {name, unit, default, default text, min, max, min exclusive, integer, help, choices}; the defaults are the stages'
// own constants (echo_fit.h and brain_mask.h cite where each comes from).
const OptionSpec kPhaseOptions[] = {
    {"unwrap", "", 0, "region-growing", 0, 0, false, false,
     "phase unwrapping of each echo: region-growing (quality-guided, in the spirit of ROMEO, Dymerska 2021; exact on a "
     "smooth field) or laplacian (Schofield & Zhu 2003, then made congruent with the wrapped phase)",
     "region-growing|laplacian"},
    {"fitOffset", "", 0, "smooth", 0, 0, false, false,
     "the echo fit's receive-phase offset: smooth (the fitted offset smoothed, removed, the field fitted through the "
     "origin, as MCPC-3D-S and MEDI: less noise) or free (an intercept per voxel: no assumption on the offset)",
     "smooth|free"},
    {"fitOffsetSigma", "mm", echo_fit_defaults::kOffsetSigmaMm, "", 1, 50, false, false,
     "Gaussian sigma of the offset's smoothing (fitOffset smooth; MCPC-3D-S: 10 voxels in-plane, with no first-order correction)"},
    {"fitResidualLimit", "rad", echo_fit_defaults::kResidualLimitRad, "", 0, 10, true, false,
     "voxels whose echo fit leaves a larger RMS phase residual (an inconsistent unwrap next to air) are left out of the "
     "background removal and the inversion"},
    {"brainMask.erosion", "mm", brain_mask_defaults::kErosionMm, "", 0, 100, false, false,
     "erode the brain mask made from the magnitude by this much (none by default)"},
    {"brainMask.threshold", "", 0, "otsu", 0, 0, false, false,
     "the magnitude threshold of the brain mask: otsu (Otsu 1979) or robust (BET's t2 + 0.1·(t98 − t2), Smith 2002)",
     "otsu|robust"},
};

void check_b0(double b0_tesla) {
  if (!(std::isfinite(b0_tesla) && b0_tesla > 0.0)) {
    throw Error(ErrorCode::InvalidArgument,
                "hz_to_ppm: B0 must be a positive field strength in tesla (e.g. 3), got " + message_number(b0_tesla));
  }
}

// The free fit's residual (rad) above which a voxel's offset is left out of the smoothing: the pipeline's
// fitResidualLimit default, where an unwrap is inconsistent.
constexpr double kOffsetResidualGate = echo_fit_defaults::kResidualLimitRad;
// The distance (rad) of a voxel's offset from the plainly smoothed one above which it is left out: the free offset's
// noise is ~0.1 rad at SNR 40 (3 echoes), a consistently mis-unwrapped voxel's offset is off by 2π·k·TE1/ΔTE.
constexpr double kOffsetOutlierGate = 0.5;

// Three passes of a box of half-width h (zeros beyond the volume) along one axis, in place: a Gaussian of variance
// (2h + 1)² − 1)/4 voxels² (Wells 1986). Each line is summed on its own, in order: the result does not depend on
// the thread count.
void echo_fit_box_smooth(std::vector<float>& v, const Dims3& d, int axis, int64_t h, unsigned threads) {
  if (h <= 0) return;
  const int64_t len = d[axis];
  const int64_t stride = axis == 0 ? 1 : axis == 1 ? d[0] : d[0] * d[1];
  const uint64_t lines = static_cast<uint64_t>(d[0] * d[1] * d[2] / len);
  parallel_for(lines, threads, [&](uint64_t begin, uint64_t end) {
    std::vector<double> a(static_cast<size_t>(len)), b(static_cast<size_t>(len));
    for (uint64_t l = begin; l < end; ++l) {
      const int64_t li = static_cast<int64_t>(l);
      const int64_t base = axis == 0 ? li * d[0] : axis == 1 ? (li % d[0]) + (li / d[0]) * d[0] * d[1] : li;
      for (int64_t j = 0; j < len; ++j) a[static_cast<size_t>(j)] = v[static_cast<size_t>(base + j * stride)];
      for (int pass = 0; pass < 3; ++pass) {
        double sum = 0.0;
        for (int64_t j = 0; j < std::min(h, len); ++j) sum += a[static_cast<size_t>(j)];
        for (int64_t j = 0; j < len; ++j) {
          if (j + h < len) sum += a[static_cast<size_t>(j + h)];
          b[static_cast<size_t>(j)] = sum;
          if (j - h >= 0) sum -= a[static_cast<size_t>(j - h)];
        }
        a.swap(b);
      }
      for (int64_t j = 0; j < len; ++j) v[static_cast<size_t>(base + j * stride)] = static_cast<float>(a[static_cast<size_t>(j)]);
    }
  });
}

}  // namespace

std::span<const OptionSpec> phase_options() { return kPhaseOptions; }

double hz_to_ppm(double hz, double b0_tesla) {
  check_b0(b0_tesla);
  // Hz / MHz = 1e-6: the Larmor frequency γ̄·B0 in MHz turns Hz into ppm directly
  return hz / (kGammaBarMHzPerT * b0_tesla);
}

std::vector<float> hz_to_ppm(std::span<const float> hz, double b0_tesla) {
  check_b0(b0_tesla);
  const double scale = 1.0 / (kGammaBarMHzPerT * b0_tesla);
  std::vector<float> ppm(hz.size());
  for (size_t i = 0; i < hz.size(); ++i) ppm[i] = static_cast<float>(static_cast<double>(hz[i]) * scale);
  return ppm;
}

void validate(const EchoFitParams& p) {
  if (p.unwrapper != Unwrapper::Laplacian && p.unwrapper != Unwrapper::RegionGrowing) {
    throw Error(ErrorCode::InvalidArgument, "echo_fit: unwrapper must be laplacian or region-growing, got value " +
                                                std::to_string(static_cast<int>(p.unwrapper)));
  }
  if (p.offset != OffsetFit::Free && p.offset != OffsetFit::Smooth && p.offset != OffsetFit::FirstEchoes) {
    throw Error(ErrorCode::InvalidArgument, "echo_fit: offset must be free, smooth or first-echoes, got value " +
                                                std::to_string(static_cast<int>(p.offset)));
  }
  checked_option(kPhaseOptions, "fitOffsetSigma", p.offset_sigma_mm);
}

uint32_t echo_fit_steps(uint32_t echoes, const EchoFitParams& p) {
  if (echoes < 2) return echoes;
  return echoes + 1 + (p.offset == OffsetFit::Smooth ? 1 : 0);
}

void validate_echo_data(const Geometry& g, std::span<const float> phase, std::span<const float> magnitude,
                        std::span<const double> te_s) {
  validate_geometry(g);
  const uint64_t n = g.voxel_count();
  if (te_s.empty()) {
    throw Error(ErrorCode::InvalidArgument, "echo_fit: no echo times given; give one TE (seconds) per echo");
  }
  const uint32_t echoes = static_cast<uint32_t>(te_s.size());
  const uint64_t want = static_cast<uint64_t>(echoes) * n;
  if (phase.size() != want) {
    if (phase.size() % n == 0) {
      throw Error(ErrorCode::InvalidArgument,
                  "echo_fit: the phase holds " + std::to_string(phase.size() / n) + " echoes of the " +
                      dims_text(g.dims) + " volume but " + std::to_string(echoes) +
                      " echo times were given; give one TE per echo");
    }
    throw Error(ErrorCode::InvalidArgument,
                "echo_fit: the phase holds " + std::to_string(phase.size()) + " values, not a whole number of " +
                    dims_text(g.dims) + " volumes (" + std::to_string(n) + " voxels each)");
  }
  for (uint32_t e = 0; e < echoes; ++e) {
    if (!(std::isfinite(te_s[e]) && te_s[e] > 0.0)) {
      throw Error(ErrorCode::InvalidArgument, "echo_fit: TE " + std::to_string(e + 1) + " is " +
                                                  message_number(te_s[e]) +
                                                  " s; echo times must be positive, in seconds");
    }
  }
  for (uint32_t e = 0; e < echoes; ++e) {
    if (te_s[e] > 1.0) {
      throw Error(ErrorCode::InvalidArgument, "echo_fit: TE " + std::to_string(e + 1) + " is " +
                                                  message_number(te_s[e]) + " (over 1 s): looks like milliseconds; " +
                                                  "give TE in seconds (" + message_number(te_s[e] / 1000.0) + ")");
    }
  }
  for (uint32_t e = 1; e < echoes; ++e) {
    if (!(te_s[e] > te_s[e - 1])) {
      throw Error(ErrorCode::InvalidArgument, "echo_fit: TE " + std::to_string(e + 1) + " (" + message_number(te_s[e]) +
                                                  " s) is not after TE " + std::to_string(e) + " (" +
                                                  message_number(te_s[e - 1]) +
                                                  " s); give the echoes in acquisition order, TE increasing");
    }
  }
  if (!magnitude.empty()) {
    if (magnitude.size() != want) {
      throw Error(ErrorCode::InvalidArgument,
                  "echo_fit: the magnitude holds " + std::to_string(magnitude.size()) + " values but the phase holds " +
                      std::to_string(echoes) + " echoes × " + std::to_string(n) + " voxels = " +
                      std::to_string(want) + "; give a magnitude for every phase value, or none");
    }
    for (uint64_t i = 0; i < want; ++i) {
      if (!(std::isfinite(magnitude[i]) && magnitude[i] >= 0.0f)) {
        throw Error(ErrorCode::InvalidArgument, "echo_fit: magnitude " + message_number(magnitude[i]) +
                                                    " at index " + std::to_string(i) +
                                                    " is negative or not finite; give magnitudes ≥ 0");
      }
    }
  }
  for (uint32_t e = 0; e < echoes; ++e) {
    validate_wrapped_phase(phase.subspan(static_cast<size_t>(e * n), static_cast<size_t>(n)),
                           "echo_fit: echo " + std::to_string(e + 1) + " phase");
  }
}

EchoFit::EchoFit(const Geometry& g, std::span<const float> phase, std::span<const float> magnitude,
                 std::span<const double> te_s, std::span<const uint8_t> mask, const EchoFitParams& params,
                 unsigned threads)
    : geometry_(g), phase_(phase), magnitude_(magnitude), te_(te_s.begin(), te_s.end()), mask_(mask),
      params_(params), threads_(threads) {
  validate_geometry(g);
  validate(params);
  n_ = g.voxel_count();
  validate_echo_data(g, phase, magnitude, te_s);
  echoes_ = static_cast<uint32_t>(te_.size());
  const uint64_t want = static_cast<uint64_t>(echoes_) * n_;
  (void)want;
  if (mask.size() != n_) {
    throw Error(ErrorCode::InvalidArgument, "echo_fit: mask holds " + std::to_string(mask.size()) +
                                                " values but the volume " + dims_text(g.dims) + " has " +
                                                std::to_string(n_) + " voxels");
  }
  validate_mask_not_empty(g, mask);
  for (const double t : te_) te_mean_ += t;
  te_mean_ /= static_cast<double>(echoes_);
  // The unwrapped echoes kept for the caller live as long as the fit's sums: allocated first, below the echoes' and
  // the refit's temporaries, so that the allocator reuses those temporaries' space instead of growing past it.
  if (params_.keep_unwrapped) result_.unwrapped_rad.assign(static_cast<size_t>(echoes_ * n_), 0.0f);
  std::vector<uint64_t> sizes;
  labels_ = label_components(g, mask, &sizes);
  components_ = static_cast<uint32_t>(sizes.size() - 1);
  omega0_.assign(static_cast<size_t>(n_), 0.0f);
  theta0_.assign(static_cast<size_t>(n_), 0.0f);
  for (auto* sum : {&sw_, &swt_, &swtt_, &swp_, &swtp_, &swpp_}) sum->assign(static_cast<size_t>(n_), 0.0f);
}

uint32_t EchoFit::total_steps() const { return echo_fit_steps(echoes_, params_); }

void EchoFit::step() {
  if (finished()) {
    throw Error(ErrorCode::InvalidArgument, "echo fit: step() called after the last step");
  }
  if (echoes_ >= 2 && done_ == 0) {
    estimate_offset();
  } else if (echoes_ >= 2 && done_ == echoes_ + 1) {
    refit_smooth_offset();
  } else {
    const uint32_t e = done_ - (echoes_ >= 2 ? 1 : 0);
    add_echo(e);
    if (e + 1 == echoes_) finish();
  }
  ++done_;
}

std::vector<float> EchoFit::unwrap(std::span<const float> wrapped, std::span<const float> magnitude) const {
  if (params_.unwrapper == Unwrapper::Laplacian) return unwrap_laplacian(geometry_, wrapped, mask_, threads_);
  return unwrap_region_growing(geometry_, wrapped, magnitude, mask_, threads_);
}

void EchoFit::align(std::vector<float>& u, const std::vector<float>& predicted) const {
  std::vector<double> sum(static_cast<size_t>(components_) + 1, 0.0);
  std::vector<uint64_t> count(static_cast<size_t>(components_) + 1, 0);
  for (uint64_t i = 0; i < n_; ++i) {
    const uint32_t c = labels_[i];
    if (!c) continue;
    sum[c] += (predicted.empty() ? 0.0 : static_cast<double>(predicted[i])) - static_cast<double>(u[i]);
    ++count[c];
  }
  std::vector<double> shift(sum.size(), 0.0);
  for (size_t c = 1; c < sum.size(); ++c) {
    shift[c] = kTwoPi * std::nearbyint(sum[c] / static_cast<double>(count[c]) / kTwoPi);
  }
  parallel_for(n_, threads_, [&](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) {
      if (labels_[i]) u[i] = static_cast<float>(static_cast<double>(u[i]) + shift[labels_[i]]);
    }
  });
}

void EchoFit::estimate_offset() {
  const std::span<const float> p1 = phase_.subspan(0, static_cast<size_t>(n_));
  const std::span<const float> p2 = phase_.subspan(static_cast<size_t>(n_), static_cast<size_t>(n_));
  std::vector<float> difference(static_cast<size_t>(n_));
  parallel_for(n_, threads_, [&](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) {
      difference[i] = static_cast<float>(wrap_phase(static_cast<double>(p2[i]) - static_cast<double>(p1[i])));
    }
  });
  const std::span<const float> m1 =
      magnitude_.empty() ? std::span<const float>() : magnitude_.subspan(0, static_cast<size_t>(n_));
  std::vector<float> unwrapped = unwrap(difference, m1);
  align(unwrapped, {});
  const double dte = te_[1] - te_[0];
  parallel_for(n_, threads_, [&](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) {
      // outside the mask unwrapped is 0, θ0 the first echo's phase: the corrected echoes there are the field's
      // phase since TE1, which the Laplacian (solved over the whole array) is better served by than raw phase
      const double omega = static_cast<double>(unwrapped[i]) / dte;
      omega0_[i] = static_cast<float>(omega);
      theta0_[i] = static_cast<float>(wrap_phase(static_cast<double>(p1[i]) - omega * te_[0]));
    }
  });
}

void EchoFit::add_echo(uint32_t e) {
  const std::span<const float> p = phase_.subspan(static_cast<size_t>(e * n_), static_cast<size_t>(n_));
  const std::span<const float> m =
      magnitude_.empty() ? std::span<const float>() : magnitude_.subspan(static_cast<size_t>(e * n_), n_);
  const double te = te_[e];
  std::vector<float> corrected(static_cast<size_t>(n_));
  parallel_for(n_, threads_, [&](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) {
      corrected[i] = static_cast<float>(wrap_phase(static_cast<double>(p[i]) - static_cast<double>(theta0_[i])));
    }
  });
  std::vector<float> unwrapped = unwrap(corrected, m);
  // the prediction ω0·TE (E ≥ 2); E = 1: the mean closest to 0
  if (echoes_ >= 2) {
    parallel_for(n_, threads_, [&](uint64_t begin, uint64_t end) {
      for (uint64_t i = begin; i < end; ++i) corrected[i] = static_cast<float>(static_cast<double>(omega0_[i]) * te);
    });
    align(unwrapped, corrected);
  } else {
    align(unwrapped, {});
  }
  if (params_.keep_unwrapped) {
    if (result_.unwrapped_rad.empty()) result_.unwrapped_rad.assign(static_cast<size_t>(echoes_ * n_), 0.0f);
    float* out = result_.unwrapped_rad.data() + e * n_;
    parallel_for(n_, threads_, [&](uint64_t begin, uint64_t end) {
      for (uint64_t i = begin; i < end; ++i) out[i] = mask_[i] ? unwrapped[i] + theta0_[i] : 0.0f;
    });
  }
  // the residual against the two-echo line, r = φ_e − (θ0 + ω0·TE) (intercept fit) or φ_e − θ0 − ω0·TE (through
  // the origin: the same r): small numbers, so float sums keep their precision
  const double t = te - te_mean_;
  parallel_for(n_, threads_, [&](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) {
      if (!mask_[i]) continue;
      const double r = static_cast<double>(unwrapped[i]) - static_cast<double>(omega0_[i]) * te;
      const double mag = m.empty() ? 1.0 : static_cast<double>(m[i]);
      const double w = mag * mag;
      sw_[i] = static_cast<float>(sw_[i] + w);
      swt_[i] = static_cast<float>(swt_[i] + w * t);
      swtt_[i] = static_cast<float>(swtt_[i] + w * t * t);
      swp_[i] = static_cast<float>(swp_[i] + w * r);
      swtp_[i] = static_cast<float>(swtp_[i] + w * t * r);
      swpp_[i] = static_cast<float>(swpp_[i] + w * r * r);
    }
  });
}

void EchoFit::finish() {
  result_.field_hz.assign(static_cast<size_t>(n_), 0.0f);
  result_.offset_rad.assign(static_cast<size_t>(n_), 0.0f);
  result_.residual_rad.assign(static_cast<size_t>(n_), 0.0f);
  const bool intercept = params_.offset != OffsetFit::FirstEchoes && echoes_ >= 2;
  const double tm = te_mean_;
  parallel_for(n_, threads_, [&](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) {
      if (!mask_[i]) continue;
      const double sw = sw_[i], swt = swt_[i], swtt = swtt_[i], swp = swp_[i], swtp = swtp_[i], swpp = swpp_[i];
      if (!(sw > 0.0)) {
        result_.residual_rad[i] = static_cast<float>(std::numbers::pi);
        continue;
      }
      // r = a + b·(TE − tm) by weighted least squares; falls back to the line through the origin when the
      // echoes with signal do not span two TEs
      const double det = sw * swtt - swt * swt;
      double a, b, residual2;
      if (intercept && det > 1e-6 * sw * swtt) {
        b = (sw * swtp - swt * swp) / det;
        a = (swp - b * swt) / sw;
        residual2 = swpp - a * swp - b * swtp;
      } else {
        // r = b·TE − b0... through the origin in TE: Σw·TE·r / Σw·TE² with TE = t + tm
        const double stt = swtt + 2.0 * tm * swt + tm * tm * sw, stp = swtp + tm * swp;
        b = stt > 0.0 ? stp / stt : 0.0;
        a = b * tm;  // r = b·TE = a + b·t
        residual2 = swpp - b * stp;
      }
      const double omega = static_cast<double>(omega0_[i]) + b;
      const double theta = static_cast<double>(theta0_[i]) + (a - b * tm);
      result_.field_hz[i] = static_cast<float>(omega / kTwoPi);
      result_.offset_rad[i] = static_cast<float>(wrap_phase(theta));
      result_.residual_rad[i] = static_cast<float>(std::sqrt(std::max(0.0, residual2) / sw));
    }
  });
  labels_ = std::vector<uint32_t>();
  // the buffers of the fit are no longer needed, unless the smooth offset's refit follows
  if (params_.offset == OffsetFit::Smooth && echoes_ >= 2) return;
  for (auto* v : {&sw_, &swt_, &swtt_, &swp_, &swtp_, &swpp_, &omega0_, &theta0_}) *v = std::vector<float>();
}

void EchoFit::refit_smooth_offset() {
  // The free fit's offset θf as phasors w·e^{iθf} (w = Σ magnitude², its inverse variance up to a factor), smoothed
  // by a Gaussian (three box passes per axis): θs. To first order θs is θ at the weighted centroid of the window,
  // x + c(x), which leaves x near the mask's edge or a change of weight: θ(x) = θs − g·c with g the offset's gradient,
  // itself from the smoothed phasors of neighbour differences (first-order normalised convolution, Knutsson &
  // Westin 1993).
  const Dims3 d = geometry_.dims;
  const size_t n = static_cast<size_t>(n_);
  int64_t half[3];
  for (int a = 0; a < 3; ++a) {
    const double s = params_.offset_sigma_mm / geometry_.voxel_mm[a];
    half[a] = static_cast<int64_t>(std::nearbyint(0.5 * (std::sqrt(4.0 * s * s + 1.0) - 1.0)));
  }
  auto smooth_volume = [&](std::vector<float>& v) {
    for (int a = 0; a < 3; ++a) echo_fit_box_smooth(v, d, a, half[a], threads_);
  };
  // Voxels whose free fit is off are left out of the smoothing (they would pull their neighbours' offset): a residual
  // above kOffsetResidualGate (an inconsistent unwrap), or an offset more than kOffsetOutlierGate from a first,
  // plain smoothing (echoes unwrapped by a consistent wrong 2π·k: a line of small residual, its offset shifted).
  std::vector<float> re(n, 0.0f), im(n, 0.0f), sum_w(n, 0.0f), shift(n, 0.0f);
  std::vector<float> w_in(n, 0.0f);
  parallel_for(n_, threads_, [&](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) {
      if (!mask_[i] || !(sw_[i] > 0.0f) || !(result_.residual_rad[i] <= kOffsetResidualGate)) continue;
      const double w = static_cast<double>(sw_[i]), theta = static_cast<double>(result_.offset_rad[i]);
      w_in[i] = sw_[i];
      re[i] = static_cast<float>(w * std::cos(theta));
      im[i] = static_cast<float>(w * std::sin(theta));
    }
  });
  smooth_volume(re);
  smooth_volume(im);
  parallel_for(n_, threads_, [&](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) {
      if (w_in[i] == 0.0f) continue;
      const double plain = std::atan2(static_cast<double>(im[i]), static_cast<double>(re[i]));
      if (std::fabs(wrap_phase(static_cast<double>(result_.offset_rad[i]) - plain)) > kOffsetOutlierGate) w_in[i] = 0.0f;
    }
  });
  auto weight = [&](uint64_t i) { return static_cast<double>(w_in[i]); };
  parallel_for(n_, threads_, [&](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) {
      const double w = weight(i), theta = static_cast<double>(result_.offset_rad[i]);
      re[i] = static_cast<float>(w * std::cos(theta));
      im[i] = static_cast<float>(w * std::sin(theta));
      sum_w[i] = static_cast<float>(w);
    }
  });
  smooth_volume(re);
  smooth_volume(im);
  smooth_volume(sum_w);
  std::vector<float> gre(n), gim(n), centroid(n);
  for (int a = 0; a < 3; ++a) {
    const int64_t stride = a == 0 ? 1 : a == 1 ? d[0] : d[0] * d[1];
    // the pairs (i, i + e_a) inside: w_pair·e^{i(θ(i+e_a) − θ(i))}; the weight times the coordinate (voxels, from
    // the volume's centre)
    parallel_for(n_, threads_, [&](uint64_t begin, uint64_t end) {
      for (uint64_t i = begin; i < end; ++i) {
        const int64_t pos = (static_cast<int64_t>(i) / stride) % d[a];
        const double w = weight(i);
        centroid[i] = static_cast<float>(w * (static_cast<double>(pos) - 0.5 * static_cast<double>(d[a] - 1)));
        gre[i] = gim[i] = 0.0f;
        if (w == 0.0 || pos + 1 >= d[a]) continue;
        const uint64_t j = i + static_cast<uint64_t>(stride);
        const double wj = weight(j);
        if (wj == 0.0) continue;
        const double dt = static_cast<double>(result_.offset_rad[j]) - static_cast<double>(result_.offset_rad[i]);
        const double wp = std::min(w, wj);
        gre[i] = static_cast<float>(wp * std::cos(dt));
        gim[i] = static_cast<float>(wp * std::sin(dt));
      }
    });
    smooth_volume(gre);
    smooth_volume(gim);
    smooth_volume(centroid);
    // shift += g_a·c_a (radians): g_a per voxel, c_a = the window's weighted mean coordinate − the voxel's
    parallel_for(n_, threads_, [&](uint64_t begin, uint64_t end) {
      for (uint64_t i = begin; i < end; ++i) {
        if (!mask_[i] || !(sum_w[i] > 0.0f)) continue;
        const int64_t pos = (static_cast<int64_t>(i) / stride) % d[a];
        const double c = static_cast<double>(centroid[i]) / static_cast<double>(sum_w[i]) -
                         (static_cast<double>(pos) - 0.5 * static_cast<double>(d[a] - 1));
        const double g = (gre[i] != 0.0f || gim[i] != 0.0f) ? std::atan2(static_cast<double>(gim[i]), static_cast<double>(gre[i])) : 0.0;
        shift[i] = static_cast<float>(static_cast<double>(shift[i]) + g * c);
      }
    });
  }
  std::vector<float>().swap(gre);
  std::vector<float>().swap(gim);
  std::vector<float>().swap(centroid);
  std::vector<float>().swap(sum_w);
  std::vector<float>().swap(w_in);
  const double tm = te_mean_;
  parallel_for(n_, threads_, [&](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) {
      if (!mask_[i]) continue;
      const double sw = sw_[i], swt = swt_[i], swtt = swtt_[i], swp = swp_[i], swtp = swtp_[i], swpp = swpp_[i];
      if (!(sw > 0.0)) continue;
      if (re[i] == 0.0f && im[i] == 0.0f) continue;  // no offset to smooth around it: the free fit stands
      const double smooth =
          std::atan2(static_cast<double>(im[i]), static_cast<double>(re[i])) - static_cast<double>(shift[i]);
      // δ = θ0 − θs, unwrapped through the free fit's offset θf: (θ0 − θf) + wrap(θf − θs), θf − θ0 = a − b·tm
      // from the free fit (the residuals r_e = u_e − ω0·TE_e then satisfy r_e + δ = b·TE_e)
      const double det = sw * swtt - swt * swt;
      double free_shift = 0.0;  // θf − θ0 (0 where finish() fitted through the origin: too few echoes with signal)
      if (det > 1e-6 * sw * swtt) {
        const double b_free = (sw * swtp - swt * swp) / det;
        free_shift = (swp - b_free * swt) / sw - b_free * tm;
      }
      const double theta_free = static_cast<double>(theta0_[i]) + free_shift;
      const double delta = -free_shift + wrap_phase(theta_free - smooth);
      const double st = swt + tm * sw, stt = swtt + 2.0 * tm * swt + tm * tm * sw, stp = swtp + tm * swp + delta * st;
      const double b = stt > 0.0 ? stp / stt : 0.0;
      const double rr = swpp + 2.0 * delta * swp + delta * delta * sw;
      result_.field_hz[i] = static_cast<float>((static_cast<double>(omega0_[i]) + b) / kTwoPi);
      result_.offset_rad[i] = static_cast<float>(wrap_phase(smooth));
      result_.residual_rad[i] = static_cast<float>(std::sqrt(std::max(0.0, rr - b * stp) / sw));
    }
  });
  for (auto* v : {&sw_, &swt_, &swtt_, &swp_, &swtp_, &swpp_, &omega0_, &theta0_}) *v = std::vector<float>();
}

EchoFitResult EchoFit::take_result() {
  if (!finished()) {
    throw Error(ErrorCode::InvalidArgument, "echo fit: take_result() before the last step (" +
                                                std::to_string(done_) + " of " + std::to_string(total_steps()) + ")");
  }
  if (taken_) throw Error(ErrorCode::InvalidArgument, "echo fit: take_result() called twice");
  taken_ = true;
  return std::move(result_);
}

EchoFitResult echo_fit(const Geometry& geometry, std::span<const float> phase, std::span<const float> magnitude,
                       std::span<const double> te_s, std::span<const uint8_t> mask, const EchoFitParams& params,
                       unsigned threads) {
  EchoFit fit(geometry, phase, magnitude, te_s, mask, params, threads);
  run_to_end(fit);
  return fit.take_result();
}

uint64_t echo_fit_workspace_bytes(const Geometry& g, uint32_t echoes, const EchoFitParams& params, unsigned threads) {
  validate_geometry(g);
  validate(params);
  if (echoes == 0) throw Error(ErrorCode::InvalidArgument, "echo_fit_workspace_bytes: echoes must be at least 1");
  const uint64_t n = g.voxel_count();
  const uint64_t unwrapper = params.unwrapper == Unwrapper::Laplacian ? unwrap_laplacian_workspace_bytes(g, threads)
                                                                      : unwrap_region_growing_workspace_bytes(g);
  // Held through the echoes: labels 4, ω and θ 8, the six sums 24; with them the largest of: an echo's corrected phase
  // 4 and its unwrapping (whose result is the unwrapped echo); the alignment of an unwrapped echo (corrected and
  // unwrapped 8, component sums and counts: at most one component per 2 voxels, 16 bytes each); the results 12. The
  // smooth offset's refit, the labels freed: ω, θ and the sums 32, the results 12 and its eight float volumes 32. The
  // unwrapped echoes kept for the caller are the caller's (keep_unwrapped).
  const uint64_t echoes_stage = 36 * n + std::max({4 * n + unwrapper, 16 * n, 12 * n});
  const uint64_t refit = params.offset == OffsetFit::Smooth && echoes >= 2 ? 76 * n : 0;
  return std::max(echoes_stage, refit) + static_cast<uint64_t>(echoes) * sizeof(double);
}

}  // namespace tessera
