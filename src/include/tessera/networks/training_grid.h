// Networks trained on one voxel grid (the registry's training_voxel_mm, e.g. MoDL-QSM at 1 mm isotropic) run on it, as
// their reference inference does: the field is resampled in k-space (its centred spectrum zero padded or cropped to
// the training grid's dims), the network runs there, and χ is resampled back the same way onto the source grid.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/common/geometry.h"
#include "tessera/registry/registry.h"

namespace tessera {

// The training grid of g: per axis n' = max(1, round(n · v / t)) voxels of n · v / n' mm (the field of view kept), t
// the training voxel. geometry valid; every training_voxel_mm[a] > 0.
Geometry training_grid(const Geometry& geometry, const Vec3& training_voxel_mm);

// Whether a run of model on geometry is resampled: the model declares a training grid and the geometry's is not its own
// training grid (training_grid changes its dims). A grid it leaves alone is within half a voxel of the training
// voxel over the field of view, and k-space resampling to the same dims would be the identity.
bool needs_training_grid(const ModelSpec& model, const Geometry& geometry);

// values (x-fastest, from.dims) resampled to dims `to` over the same field of view: the 3D DFT's centred spectrum
// (frequencies -floor(n/2) .. ceil(n/2) - 1 per axis) keeps the frequencies both grids hold, zeros the others, is
// scaled by N_to / N_from so values keep their size, and the inverse DFT's real part is returned. A field
// band-limited to both grids' frequencies comes back from to → from to float rounding.
// values.size() == from.voxel_count(); every to[a] >= 1 (else Error InvalidArgument).
// threads: FFT threads (0 = hardware concurrency); the result does not depend on them.
std::vector<float> kspace_resample(const Geometry& from, std::span<const float> values, const Dims3& to, unsigned threads = 1);

// The mask on the grid of dims `to`: the 0/1 mask resampled as kspace_resample does, inside where it is >= 0.5.
// mask.size() == from.voxel_count(); every to[a] >= 1 (else Error InvalidArgument).
std::vector<uint8_t> kspace_resample_mask(const Geometry& from, std::span<const uint8_t> mask, const Dims3& to,
                                          unsigned threads = 1);

// χ on the training grid brought back onto the source grid (kspace_resample), zero outside the source mask.
// chi.size() == training.voxel_count(); mask.size() == source.voxel_count() (else Error InvalidArgument).
std::vector<float> from_training_grid(const Geometry& training, std::span<const float> chi, const Geometry& source,
                                      std::span<const uint8_t> mask, unsigned threads = 1);

// Module bytes a run through the training grid adds to the run on it: the field, mask and χ on the training grid, and
// the larger resampling's spectra, FFT workspace and result. every dims >= 1.
uint64_t training_grid_bytes(const Dims3& source, const Dims3& training);

// The warning of a resampled run: the network, its training voxel, the source grid and the resampled one, the rule.
std::string training_grid_warning(const ModelSpec& model, const Geometry& source, const Geometry& training);

}  // namespace tessera
