// Brain mask from a magnitude image: a robust threshold, morphology with spheres in mm, the largest connected
// component, hole filling and an optional erosion. What a mask should look like follows FSL BET (Smith 2002, Hum
// Brain Mapp 17:143): one solid brain, no skull, no holes; the steps follow QSM.rs's threshold masking
// (src/pipeline/masking.rs: Otsu, close, fill holes, erode).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tessera/common/citation.h"
#include "tessera/common/geometry.h"

namespace tessera {

inline constexpr Citation kOtsuCitation{
    "Otsu 1979",
    "Otsu N. A threshold selection method from gray-level histograms. IEEE Trans Syst Man Cybern 1979;9:62-66."};
inline constexpr Citation kBetCitation{
    "Smith 2002", "Smith SM. Fast robust automated brain extraction. Hum Brain Mapp 2002;17:143-155."};

enum class MaskThreshold {
  Otsu,         // Otsu's between-class variance maximum (Otsu 1979, IEEE Trans SMC 9:62)
  RobustRange,  // BET's brain/background estimate t2 + fraction·(t98 − t2) (Smith 2002, §2.2)
};

namespace brain_mask_defaults {
// Otsu: QSM.rs masking.rs's threshold method (otsu_threshold with 256 bins); needs no tuning on magnitude images,
// whose histogram is a dark background mode and a bright tissue mode.
inline constexpr MaskThreshold kThreshold = MaskThreshold::Otsu;
// Histogram bins for Otsu: QSM.rs masking.rs (otsu_threshold(input, 256)).
inline constexpr int kHistogramBins = 256;
// BET's fraction of the robust range (t2 + 0.1·(t98 − t2)), Smith 2002 §2.2; used by MaskThreshold::RobustRange.
inline constexpr double kRobustFraction = 0.1;
// Opening sphere radius in mm, before the component is chosen: removes noise specks and cuts bridges thinner than
// twice the radius (the optic nerve, vessels to the scalp) so the skull does not join the brain. Chosen here:
// 2 mm is below any brain structure worth keeping and above the 1 mm of a speck at 1 mm voxels.
inline constexpr double kOpeningRadiusMm = 2.0;
// Closing sphere radius in mm, after the component is chosen: closes sulci and dark vessels at the surface the
// threshold cut, as QSM.rs masking.rs's Close step does (there in voxels; here in mm so voxel size does not matter).
// Chosen here: 4 mm closes gaps up to 8 mm without bridging to anything (the other components are gone).
inline constexpr double kClosingRadiusMm = 4.0;
// Fill enclosed holes (ventricles and veins dark in magnitude): QSM.rs masking.rs FillHoles; a BET mask has none.
inline constexpr bool kFillHoles = true;
// Final erosion in mm: 0 keeps the mask; QSM pipelines erode 1-2 voxels to drop the unreliable brain edge (QSMxT's
// default erodes), which the caller chooses.
inline constexpr double kErosionMm = 0.0;
}  // namespace brain_mask_defaults

struct BrainMaskParams {
  MaskThreshold threshold = brain_mask_defaults::kThreshold;
  int histogram_bins = brain_mask_defaults::kHistogramBins;
  double robust_fraction = brain_mask_defaults::kRobustFraction;
  double opening_radius_mm = brain_mask_defaults::kOpeningRadiusMm;
  double closing_radius_mm = brain_mask_defaults::kClosingRadiusMm;
  bool fill_holes = brain_mask_defaults::kFillHoles;
  double erosion_mm = brain_mask_defaults::kErosionMm;
};

// Throws Error(InvalidArgument) naming the parameter, its range and unit: histogram_bins in [16, 65536],
// robust_fraction in (0, 1), radii finite in [0, 100] mm, erosion in the range of its schema option brainMask.erosion
// (tessera/phase/options.h: [0, 100] mm), threshold a known method.
void validate(const BrainMaskParams& params);

// The mask (1 inside, 0 outside) of the brain in a magnitude image:
// 1. threshold t over the robust range [t2, t98] (2nd and 98th percentiles of all voxels, as BET): Otsu on a
//    histogram of that range, or t2 + robust_fraction·(t98 − t2); inside where magnitude > t;
// 2. opening with a sphere of opening_radius_mm; 3. the largest 6-connected component (the first in x-fastest order
//    on a tie); 4. closing with a sphere of closing_radius_mm; 5. holes (background not 6-connected to the array's
//    faces) filled; 6. erosion with a sphere of erosion_mm.
// Morphology is exact Euclidean (distance transform, Felzenszwalb & Huttenlocher 2012) in mm with the voxel size;
// outside the array counts as neither inside nor outside (a mask touching a face is not eroded from it).
// geometry valid; magnitude.size() == voxel_count(), finite (else Error InvalidArgument).
// params valid (validate); something must survive steps 1-2 (else Error InvalidArgument naming the threshold).
// threads: threads for the distance transforms (0 = hardware); the result is the same for any count.
std::vector<uint8_t> brain_mask(const Geometry& geometry, std::span<const float> magnitude,
                                const BrainMaskParams& params = {}, unsigned threads = 1);

// Step 1's threshold of brain_mask: tissue lies above it, background (air, noise, bone) at or below.
// magnitude non-empty and finite; params valid.
double magnitude_threshold(std::span<const float> magnitude, const BrainMaskParams& params = {});

// Heap bytes brain_mask allocates at its peak beyond its input: the sorted copy for the percentiles (4·N), three
// masks (3·N), squared distances (8·N), component labels (4·N), the flood queue (8·N), per-thread line buffers.
// geometry valid; params valid (else Error InvalidArgument).
uint64_t brain_mask_workspace_bytes(const Geometry& geometry, const BrainMaskParams& params, unsigned threads = 1);

// 6-connected components of a mask: labels 1..count in order of each component's first voxel (x-fastest), 0
// outside. Sizes (voxels per label, index 0 unused) in sizes when given.
// geometry valid with voxel_count() < 2³²; mask.size() == voxel_count() (else Error InvalidArgument).
std::vector<uint32_t> label_components(const Geometry& geometry, std::span<const uint8_t> mask,
                                       std::vector<uint64_t>* sizes = nullptr);

}  // namespace tessera
