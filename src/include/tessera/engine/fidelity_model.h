// The tiling-fidelity model: predicts how far a tiled χ will be from the whole-volume χ, before running, from
// where each voxel's patch ends relative to how far the network looks. A network's output at a voxel depends on
// inputs around it, a fraction within[ρ] of that dependence within radius ρ (its context profile: measured by the
// probe, or derived from the theoretical receptive radius). A voxel whose patch face lies at distance d misses the
// part of the dependence beyond that face (minus what the whole-volume run misses too, beyond the mask's extent);
// overlapping tiles blend their deficits with the run's own weights. The deficit maps to NRMSE and r through two
// constants fitted to the tiling study (bench/fidelity-study.js: the demo U-Net on the 160×192×144 phantom).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/common/budget.h"
#include "tessera/common/geometry.h"
#include "tessera/engine/tiling.h"

namespace tessera {

// How far a network looks: within[ρ] = fraction of its output's dependence on inputs within radius ρ voxels.
struct ContextProfile {
  std::vector<double> within;  // non-decreasing, within.back() == 1
  bool measured = false;       // from a probe of the network (else derived from its theoretical radius)
  uint32_t radius = 0;         // the theoretical receptive radius it came from (0 when only measured)
  bool assumed = false;        // the network's reach was not known: a planner's assumption
};

// The smallest radius holding this fraction of the dependence (within[ρ] >= fraction); 0 for an empty profile.
uint32_t context_radius_holding(const ContextProfile& profile, double fraction);

// The profile of a dipole-inversion network known only by its theoretical receptive radius: the dipole kernel falls
// as 1/ρ³, so the dependence per shell falls as 1/ρ and within[ρ] = ln(1 + ρ) / ln(1 + radius).
// radius >= 1.
ContextProfile dipole_context_profile(uint32_t radius);

// A measured profile (e.g. the probe's cumulative fractions), checked.
// Throws Error(InvalidArgument) unless within is non-empty, non-decreasing, in [0, 1] and ends at 1 (± 1e-6).
ContextProfile measured_context_profile(std::span<const double> within);

// The constants that turn the deficit into fidelity: NRMSE = alpha · deficit^beta, 1 − r = gamma · NRMSE².
struct FidelityFit {
  double alpha = 1.0;
  double beta = 1.0;
  double gamma = 0.5;
  // The reach the fit was checked on: the graph radius of the network it was fitted to. A profile that holds 90 % of
  // its dependence further out than that network's theoretical profile is beyond the fit.
  uint32_t fit_radius = 0;
  // Beyond the fit, the predicted NRMSE is multiplied by this: the largest under-prediction measured on such a network.
  double beyond_fit_caution = 1.0;
};
// Fitted (least squares on log scale) to the tiling study of the demo network with its probed profile: 13 configs on
// the pooling grid, crop and cosine, patches 64³-128³ on the 160×192×144 phantom; predicted ÷ measured NRMSE 0.70-1.48
// (median 1.01). On the two-level U-Net (probed: 99 % within 9 voxels) the same constants predict 6-15× the measured
// NRMSE, and with profiles derived from the theoretical radius 0.76-2.2× (demo) and 58-245× (two-level): the model errs
// towards caution (bench/fit-fidelity.js). Its reach is the demo's graph radius, 51 voxels. On a
// deeper network (the QSMnet-shaped stand-in: graph radius 199, probed radius90 58) it predicted 0.23-0.40× the
// measured NRMSE of slabs with halos 2-48, so beyond that reach predictions carry a caution of 1 / 0.23 = 4.4
// (with it, predicted 0.108 where 0.105 was measured).
inline constexpr FidelityFit kFidelityFit{0.548, 0.732, 0.536, 51, 4.4};

struct FidelityPrediction {
  double deficit = 0.0;  // RMS over the mask of the blended fraction of dependence the patches miss
  double nrmse = 0.0;    // predicted ‖tiled − whole‖ / ‖whole‖ inside the mask
  double r = 1.0;        // predicted Pearson r of tiled against whole inside the mask
  bool beyond_fit = false;  // the network reaches further than the fit was checked on: nrmse carries its caution
};

// Whether a network of this profile reaches further than the fit was checked on.
bool beyond_fidelity_fit(const ContextProfile& profile, const FidelityFit& fit = kFidelityFit);

// Predicts tiled-vs-whole fidelity for many configs over one volume: the mask's extent and a sample of its voxels
// (at most 60 000 by default, every k-th in raster order) are taken once, so each prediction costs O(dims + sample).
class FidelityModel {
 public:
  // geometry valid; mask holds its voxel count of values (else Error InvalidArgument).
  FidelityModel(const Geometry& geometry, std::span<const uint8_t> mask, ContextProfile profile,
                const FidelityFit& fit = kFidelityFit, uint64_t max_samples = 60000);

  // The fidelity of a tiled run of config whose patches have this edge (tile_patch_size of the network's divisor).
  // config valid; patch_edge >= config.core + 2·config.halo.
  FidelityPrediction predict(const TileConfig& config, uint64_t patch_edge) const;

  // The fidelity of a run of grid's active tiles, each with a patch of patch_dims at its patch_lo, written core only:
  // a grid that is a product of per-axis windows (a cubic tiling, or box_split_grid's slabs).
  // grid's cores do not overlap (not blended); every core lies inside its patch.
  FidelityPrediction predict_grid(const TileGrid& grid, const std::array<uint64_t, 3>& patch_dims) const;

  const ContextProfile& profile() const { return profile_; }
  // The mask's extent [lo, hi) per axis (lo == hi == 0 for an empty mask).
  const std::array<int64_t, 3>& mask_lo() const { return lo_; }
  const std::array<int64_t, 3>& mask_hi() const { return hi_; }

 private:
  Geometry geometry_;
  ContextProfile profile_;
  FidelityFit fit_;
  bool beyond_fit_ = false;                // beyond_fidelity_fit(profile_, fit_)
  std::vector<double> beyond_;             // fraction of the dependence beyond a plane at distance d + ½
  std::array<int64_t, 3> lo_{0, 0, 0}, hi_{0, 0, 0};  // the mask's extent
  std::vector<std::array<int32_t, 3>> sample_;        // mask voxels the mean runs over

  // One window along an axis: a core [c0, c1) written with weight w(x - c0) (blend) from the patch [p0, p1).
  struct Window {
    int64_t c0, c1, p0, p1;
  };
  FidelityPrediction predict_windows(const std::array<std::vector<Window>, 3>& windows, const std::vector<double>& w) const;
};

// The prediction of a whole-volume run: exact by definition.
FidelityPrediction whole_volume_fidelity();

}  // namespace tessera
