// SWI from multi-echo magnitude and unwrapped phase (tessera/contrast/swi.h).
#include "tessera/contrast/swi.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>

#include "common/parallel.h"
#include "contrast/echo_times.h"
#include "tessera/common/error.h"

namespace tessera {

namespace {

const std::array<OptionSpec, 5> kSwiOptions{{
    {"swi.maskPower", "", swi_defaults::kMaskPower, "", 0, 16, true, false,
     "power of the negative phase mask (Haacke 2004: 4)"},
    {"swi.highPassSigmaXY", "voxels", swi_defaults::kHighPassSigmaXyVoxels, "", 0.5, 64, false, false,
     "in-plane Gaussian sigma of the phase high-pass (CLEAR-SWI: 4)"},
    {"swi.highPassSigmaZ", "voxels", swi_defaults::kHighPassSigmaZVoxels, "", 0, 64, false, false,
     "through-plane Gaussian sigma of the phase high-pass, 0 = none (CLEAR-SWI: 0)"},
    {"swi.minIpSlab", "mm", kMinIpSlabMm, "", 0, 1000, true, false,
     "thickness of the minimum-intensity projection's sliding slab along the slice axis"},
    {"swi.paramagneticPhase", "", 0, "negative", 0, 0, false, false,
     "the phase sign of paramagnetic sources (veins), which the mask darkens (Haacke 2004: negative)",
     "negative|positive"},
}};

// The truncated, normalised 1-D Gaussian of sigma voxels: taps −r..r, r = ceil(kKernelSigmas·sigma).
std::vector<double> swi_gaussian_taps(double sigma) {
  const int r = static_cast<int>(std::ceil(swi_defaults::kKernelSigmas * sigma));
  std::vector<double> k(static_cast<size_t>(2 * r + 1));
  double sum = 0.0;
  for (int i = -r; i <= r; ++i) sum += (k[static_cast<size_t>(i + r)] = std::exp(-0.5 * (i * i) / (sigma * sigma)));
  for (double& v : k) v /= sum;
  return k;
}

}  // namespace

std::span<const OptionSpec> swi_options() { return kSwiOptions; }

void validate(const SwiParams& p) {
  checked_option(kSwiOptions, "swi.maskPower", p.mask_power);
  checked_option(kSwiOptions, "swi.highPassSigmaXY", p.high_pass_sigma_xy_voxels);
  if (p.high_pass_sigma_z_voxels != 0.0) {
    const double z = checked_option(kSwiOptions, "swi.highPassSigmaZ", p.high_pass_sigma_z_voxels);
    // A sigma along z other than 0 is at least the least in-plane sigma (swi.highPassSigmaXY's minimum).
    const OptionSpec& xy = find_option(kSwiOptions, "swi.highPassSigmaXY");
    if (z < xy.min) {
      throw Error(ErrorCode::InvalidArgument, "swi.highPassSigmaZ must be 0 (no smoothing along z) or in [" + number_text(xy.min) +
                                                  ", " + number_text(find_option(kSwiOptions, "swi.highPassSigmaZ").max) +
                                                  "] voxels, got " + number_text(z));
    }
  }
}

double negative_phase_mask(double phase_rad) {
  if (phase_rad >= 0.0) return 1.0;
  if (phase_rad <= -std::numbers::pi) return 0.0;
  return (std::numbers::pi + phase_rad) / std::numbers::pi;
}

Swi::Swi(const Geometry& g, std::span<const float> magnitude, std::span<const float> unwrapped_phase,
         std::span<const double> te_s, std::span<const uint8_t> mask, const SwiParams& params, unsigned threads)
    : geometry_(g), magnitude_(magnitude), phase_(unwrapped_phase), te_(te_s.begin(), te_s.end()), mask_(mask),
      params_(params), threads_(threads) {
  contrast::validate_echo_volumes("swi", g, te_s, magnitude, "the magnitude", mask);
  contrast::validate_echo_volumes("swi", g, te_s, unwrapped_phase, "the phase", mask);
  validate(params);
  n_ = g.voxel_count();
  echoes_ = static_cast<uint32_t>(te_s.size());
  for (uint64_t i = 0; i < magnitude.size(); ++i) {
    if (!(std::isfinite(magnitude[i]) && magnitude[i] >= 0.0f)) {
      throw Error(ErrorCode::InvalidArgument, "swi: the magnitude of echo " + std::to_string(i / n_ + 1) + " at voxel " +
                                                  std::to_string(i % n_) + " is " + std::to_string(magnitude[i]) +
                                                  "; a magnitude is finite and ≥ 0");
    }
    if (!std::isfinite(unwrapped_phase[i])) {
      throw Error(ErrorCode::NonFiniteInput, "swi: the phase of echo " + std::to_string(i / n_ + 1) + " at voxel " +
                                                 std::to_string(i % n_) + " is not finite; give finite radians");
    }
  }
  axes_ = {0, 1};
  if (params.high_pass_sigma_z_voxels > 0.0) axes_.push_back(2);
  sum_sq_.assign(n_, 0.0f);
  num_.assign(n_, 0.0f);
  den_.assign(n_, 0.0f);
}

uint32_t Swi::total_steps() const { return echoes_ + static_cast<uint32_t>(axes_.size()) + 1; }

void Swi::step() {
  if (finished()) throw Error(ErrorCode::Internal, "swi: step() after the last step");
  if (done_ < echoes_) {
    // Echo e: |S|² into the RSS, φ·|S|·TE and |S|·TE² into the frequency's sums.
    const uint64_t off = static_cast<uint64_t>(done_) * n_;
    const float te = static_cast<float>(te_[done_]);
    parallel_for(n_, threads_, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) {
        const float m = magnitude_[off + i];
        sum_sq_[i] += m * m;
        num_[i] += phase_[off + i] * m * te;
        den_[i] += m * te * te;
      }
    });
    if (done_ + 1 == echoes_) {
      // The combined phase at the longest TE, and the normalised convolution's two inputs (φ·m and m).
      const float te_max = static_cast<float>(te_.back());
      smooth_num_.assign(n_, 0.0f);
      smooth_den_.assign(n_, 0.0f);
      parallel_for(n_, threads_, [&](uint64_t b, uint64_t e) {
        for (uint64_t i = b; i < e; ++i) {
          const bool inside = (mask_.empty() || mask_[i] != 0) && den_[i] > 0.0f;
          num_[i] = inside ? num_[i] / den_[i] * te_max : 0.0f;
          smooth_num_[i] = num_[i];
          smooth_den_[i] = inside ? 1.0f : 0.0f;
        }
      });
      scratch_.assign(n_, 0.0f);
    }
  } else if (done_ < echoes_ + axes_.size()) {
    const int axis = axes_[done_ - echoes_];
    smooth_axis(axis, axis == 2 ? params_.high_pass_sigma_z_voxels : params_.high_pass_sigma_xy_voxels);
  } else {
    finish();
  }
  ++done_;
}

void Swi::smooth_axis(int axis, double sigma) {
  const std::vector<double> k = swi_gaussian_taps(sigma);
  const int64_t r = static_cast<int64_t>(k.size() / 2);
  const Dims3 d = geometry_.dims;
  const int64_t stride = axis == 0 ? 1 : axis == 1 ? d[0] : d[0] * d[1];
  const int64_t len = d[axis];
  for (std::vector<float>* v : {&smooth_num_, &smooth_den_}) {
    const std::vector<float>& in = *v;
    parallel_for(n_, threads_, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) {
        const int64_t pos = (static_cast<int64_t>(i) / stride) % len;
        const int64_t lo = std::max<int64_t>(-r, -pos), hi = std::min<int64_t>(r, len - 1 - pos);
        double s = 0.0;
        for (int64_t t = lo; t <= hi; ++t) s += k[static_cast<size_t>(t + r)] * in[static_cast<uint64_t>(static_cast<int64_t>(i) + t * stride)];
        scratch_[i] = static_cast<float>(s);
      }
    });
    v->swap(scratch_);
  }
}

void Swi::finish() {
  result_.swi.assign(n_, 0.0f);
  result_.magnitude.assign(n_, 0.0f);
  result_.phase_rad.assign(n_, 0.0f);
  result_.phase_mask.assign(n_, 1.0f);
  const double power = params_.mask_power;
  parallel_for(n_, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      const float mag = std::sqrt(sum_sq_[i]);
      result_.magnitude[i] = mag;
      const bool inside = (mask_.empty() || mask_[i] != 0) && den_[i] > 0.0f && smooth_den_[i] > 0.0f;
      float w = 1.0f;
      if (inside) {
        const float hp = num_[i] - smooth_num_[i] / smooth_den_[i];
        result_.phase_rad[i] = hp;
        w = static_cast<float>(negative_phase_mask(params_.paramagnetic_positive ? -hp : hp));
        result_.phase_mask[i] = w;
      }
      result_.swi[i] = static_cast<float>(mag * std::pow(static_cast<double>(w), power));
    }
  });
  std::vector<float>().swap(sum_sq_);
  std::vector<float>().swap(num_);
  std::vector<float>().swap(den_);
  std::vector<float>().swap(smooth_num_);
  std::vector<float>().swap(smooth_den_);
  std::vector<float>().swap(scratch_);
}

SwiResult Swi::take_result() {
  if (!finished()) throw Error(ErrorCode::InvalidArgument, "swi: take_result() before the last step");
  if (taken_) throw Error(ErrorCode::InvalidArgument, "swi: take_result() called twice");
  taken_ = true;
  return std::move(result_);
}

SwiResult swi(const Geometry& geometry, std::span<const float> magnitude, std::span<const float> unwrapped_phase,
              std::span<const double> te_s, std::span<const uint8_t> mask, const SwiParams& params, unsigned threads) {
  Swi s(geometry, magnitude, unwrapped_phase, te_s, mask, params, threads);
  run_to_end(s);
  return s.take_result();
}

uint64_t swi_workspace_bytes(const Geometry& geometry, const SwiParams& params, unsigned /*threads*/) {
  validate_geometry(geometry);
  validate(params);
  return saturating_mul(geometry.voxel_count(), 40);
}

}  // namespace tessera
