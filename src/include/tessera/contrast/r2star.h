// R2* and T2* maps from multi-echo gradient-echo magnitude, a mono-exponential decay S(TE) = S0·exp(−R2*·TE) per
// voxel. Units: R2* in s⁻¹ (per second), T2* in seconds, the echo times in seconds. Two estimators: ARLO
// (auto-regression on linear operations, Pei et al. 2015 MRM 73:843: Simpson's-rule integrals over consecutive echo
// triplets; needs ≥ 3 equally spaced echoes) and a log-linear least-squares fit (ln S against TE, every echo with
// signal, unweighted as MriResearchTools' r2star_ll). Both give a goodness-of-fit map: the RMS residual of the fitted
// decay (S0 by least squares for ARLO) relative to the mean signal. Volumes are x-fastest, echo after echo.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/common/citation.h"
#include "tessera/common/geometry.h"
#include "tessera/common/iterative.h"
#include "tessera/common/schema.h"

namespace tessera {

inline constexpr Citation kArloCitation{
    "Pei et al. 2015",
    "Pei M, Nguyen TD, Thimmappa ND, et al. Algorithm for fast monoexponential fitting based on Auto-Regression on "
    "Linear Operations (ARLO) of data. Magn Reson Med 2015;73:843-850."};

enum class R2starMethod {
  Arlo,       // Pei et al. 2015
  LogLinear,  // least squares of ln S on TE
};

namespace r2star_defaults {
// ARLO: the fast, noise-robust estimator of Pei et al. 2015 (also QSMbly's and MEDI's R2* default).
inline constexpr R2starMethod kMethod = R2starMethod::Arlo;
// Echo spacings that differ by more than this fraction of the first spacing are not "equally spaced" for ARLO's
// Simpson rule (scanners round TEs to 1 µs: 1e-3 of a 1 ms spacing).
inline constexpr double kSpacingTolerance = 1e-3;
}  // namespace r2star_defaults

// T2* where R2* is 0 or below 1/kT2starCapS (no measurable decay): the cap, 1 s, longer than any tissue's T2* at
// 1.5 T and above (CSF's is a few hundred ms) and beyond what echoes under 100 ms resolve.
inline constexpr double kT2starCapS = 1.0;
// R2* is kept in [0, kR2starMaxPerS]: a growing signal (noise) gives 0; above 2000 s⁻¹ (T2* under 0.5 ms, gone before
// any gradient echo) the estimate is noise and is clamped.
inline constexpr double kR2starMaxPerS = 2000.0;

struct R2starParams {
  R2starMethod method = r2star_defaults::kMethod;
};

// The R2* options of the schema: "r2star.method" (arlo|loglinear).
std::span<const OptionSpec> r2star_options();

// The method of a name ("arlo", "loglinear"); else Error InvalidArgument naming the choices.
R2starMethod r2star_method_from_name(std::string_view name);
std::string_view r2star_method_name(R2starMethod method);

// Throws Error(InvalidArgument) when method is not Arlo or LogLinear.
void validate(const R2starParams& params);

// Throws Error(InvalidArgument) unless te_s holds ≥ 3 echoes with equal spacings (within kSpacingTolerance), naming
// the spacings and the fix (the log-linear fit, r2star.method loglinear).
void validate_arlo_echoes(std::span<const double> te_s);

struct R2starResult {
  std::vector<float> r2star;    // s⁻¹, in [0, kR2starMaxPerS]; 0 outside the mask
  std::vector<float> t2star;    // s, 1/R2* capped at kT2starCapS; 0 outside the mask
  std::vector<float> s0;        // the fitted signal at TE = 0 (the magnitude's unit); 0 outside the mask
  std::vector<float> residual;  // RMS of S − S0·exp(−R2*·TE) over the echoes / their mean S; 0 outside the mask
};

// The fit one step per slice (z), so that progress moves through the volume.
// Inputs are read at every step: they outlive the R2star and do not change.
class R2star final : public Iterative {
 public:
  // geometry valid; magnitude E·N values (E = te_s.size()), finite and ≥ 0; te_s in seconds, positive, increasing, none
  // over 1 (ARLO: ≥ 3 equally spaced; log-linear: ≥ 2); mask empty (every voxel whose first echo is > 0) or N values,
  // not all 0; params valid. Else Error InvalidArgument naming the problem.
  // threads: loop threads (0 = hardware); results bit-identical for any count.
  R2star(const Geometry& geometry, std::span<const float> magnitude, std::span<const double> te_s,
         std::span<const uint8_t> mask, const R2starParams& params = {}, unsigned threads = 1);

  uint32_t total_steps() const override { return static_cast<uint32_t>(geometry_.dims[2]); }
  uint32_t steps_done() const override { return done_; }
  bool finished() const override { return done_ == total_steps(); }
  void step() override;
  std::string name() const override;

  // The maps, moved out.
  // finished() (else Error InvalidArgument); called once.
  R2starResult take_result();

 private:
  Geometry geometry_;
  std::span<const float> magnitude_;
  std::vector<double> te_;
  std::span<const uint8_t> mask_;
  R2starParams params_;
  unsigned threads_;
  uint64_t n_;
  uint32_t done_ = 0;
  R2starResult result_;
  bool taken_ = false;
};

// Runs an R2star to the end (arguments as its constructor).
R2starResult r2star(const Geometry& geometry, std::span<const float> magnitude, std::span<const double> te_s,
                    std::span<const uint8_t> mask, const R2starParams& params = {}, unsigned threads = 1);

// The fit of one voxel's echoes (E = te_s.size() values of s): {R2* s⁻¹ clamped to [0, kR2starMaxPerS], S0 and the
// relative residual of that R2*}; what R2star computes per voxel. No signal, fewer than 2 positive echoes
// (log-linear) or no decay to measure gives R2* 0.
struct R2starVoxel {
  double r2star;
  double s0;
  double residual;
};
R2starVoxel r2star_voxel(std::span<const float> s, std::span<const double> te_s, R2starMethod method);

// T2* (s) of an R2* (s⁻¹): 1/R2*, capped at kT2starCapS.
double t2star_of(double r2star_per_s);

// Heap bytes an R2star allocates beyond its inputs: its four maps (16·N) and one echo vector per thread.
// geometry valid; params valid (else Error InvalidArgument).
uint64_t r2star_workspace_bytes(const Geometry& geometry, uint32_t echoes, const R2starParams& params,
                                unsigned threads = 1);

}  // namespace tessera
