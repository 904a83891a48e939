// How far one χ map is from another, and from the data: the measures the tiling-fidelity study, the planner's
// prediction and a run's self-check all use. Volumes are x-fastest, in ppm.
#pragma once

#include <cstdint>
#include <span>

#include "tessera/common/geometry.h"

namespace tessera {

// Agreement of a test map with a reference inside a mask (and inside [lo, hi) when a box is given).
struct Agreement {
  uint64_t voxels = 0;  // voxels compared
  double r = 0.0;       // Pearson correlation
  double nrmse = 0.0;   // ‖test − reference‖ / ‖reference‖
  double max_abs = 0.0; // max |test − reference| (ppm)
  double hfen = 0.0;    // ‖LoG(test) − LoG(reference)‖ / ‖LoG(reference)‖, LoG with σ = 1.5 voxels (0 when not asked)
};

// Compares test with reference at mask voxels inside the box [lo, hi) (the whole volume when lo == hi).
// test, reference and mask hold geometry.voxel_count() values (else Error InvalidArgument); with_hfen also
// filters both maps (σ = 1.5 voxels, 3σ support) before comparing their high frequencies.
// Throws Error(InvalidArgument) when no voxel is compared.
Agreement compare_maps(const Geometry& geometry, std::span<const float> test, std::span<const float> reference,
                       std::span<const uint8_t> mask, const Dims3& lo = {0, 0, 0}, const Dims3& hi = {0, 0, 0},
                       bool with_hfen = false);

// Data-consistency residual ‖M (D∗χ − f)‖ / ‖M f‖ of a χ map against the local field f it came from: how much of the
// measured field the map does not explain (the forward model with 2× zero padding; the mean of the field inside M is
// removed from both first, as D∗χ cannot hold a constant).
// chi, field and mask hold geometry.voxel_count() values (else Error InvalidArgument); the mask holds a voxel.
double data_consistency_residual(const Geometry& geometry, std::span<const float> chi, std::span<const float> field,
                                 std::span<const uint8_t> mask, unsigned threads = 1);

// The scores QSM-CI compares reconstructions by (its scorer, eval/qsm_eval.py: the 2016 challenge's NRMSE and HFEN,
// the 2024 XSIM), of a reconstruction r against a reference t inside an evaluation mask M.
struct ChallengeScores {
  uint64_t voxels = 0;           // voxels in M
  double nrmse = 0.0;            // 100 · ‖(r − mean r) − (t − mean t)‖ / ‖t − mean t‖ over M (%)
  double nrmse_detrended = 0.0;  // the same with r replaced by (r − i) / s, r = s·t + i fitted on the demeaned values (%)
  double hfen = 0.0;             // 100 · ‖LoG(r) − LoG(t)‖ / ‖LoG(t)‖ over M (%); NaN when LoG(t) is 0 over M
  double cc = 0.0;               // Pearson's correlation over M (0 when r is constant over M)
  double xsim = 0.0;             // SSIM with 5×5×5 uniform windows, C1 = 1e-4, C2 = 1e-6 (ppm²), averaged over M
};

// QSM-CI's scores of recon against reference inside mask (the definitions above). LoG: the Laplacian of a Gaussian of
// σ = 1.5 voxels, truncated at 5σ (8 voxels), filtered over the whole volumes with mirrored edges; XSIM's windows hold
// only the voxels inside the volume. Accumulates in double; the same bits for any thread count.
// recon, reference and mask hold geometry.voxel_count() values (else Error InvalidArgument).
// Every value of recon and reference is finite (else Error InvalidArgument with their count).
// The mask holds a voxel and the reference is not constant in it (else Error InvalidArgument).
ChallengeScores challenge_scores(const Geometry& geometry, std::span<const float> recon, std::span<const float> reference,
                                 std::span<const uint8_t> mask, unsigned threads = 1);

}  // namespace tessera
