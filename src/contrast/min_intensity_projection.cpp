// Minimum-intensity projection over a sliding slab (tessera/contrast/min_intensity_projection.h).
#include "tessera/contrast/min_intensity_projection.h"

#include <algorithm>
#include <cmath>

#include "common/message_number.h"
#include "common/parallel.h"
#include "tessera/common/budget.h"
#include "tessera/common/error.h"
#include "tessera/common/schema.h"
#include "tessera/contrast/swi.h"

namespace tessera {

uint32_t min_ip_slices(double slab_mm, double voxel_z_mm) {
  checked_option(swi_options(), "swi.minIpSlab", slab_mm);
  if (!(std::isfinite(voxel_z_mm) && voxel_z_mm > 0.0)) {
    throw Error(ErrorCode::InvalidArgument, "minIP: the slice spacing must be positive mm, got " + message_number(voxel_z_mm));
  }
  return static_cast<uint32_t>(std::max(1.0, std::round(slab_mm / voxel_z_mm)));
}

MinIntensityProjection::MinIntensityProjection(const Geometry& g, std::span<const float> volume, double slab_mm,
                                               unsigned threads)
    : geometry_(g), volume_(volume), threads_(threads) {
  validate_geometry(g);
  if (volume.size() != g.voxel_count()) {
    throw Error(ErrorCode::InvalidArgument, "minIP: the volume holds " + std::to_string(volume.size()) +
                                                " values but " + dims_text(g.dims) + " has " +
                                                std::to_string(g.voxel_count()));
  }
  validate_finite(g, volume);
  slices_ = min_ip_slices(slab_mm, g.voxel_mm[2]);
  out_.assign(g.voxel_count(), 0.0f);
}

void MinIntensityProjection::step() {
  if (finished()) throw Error(ErrorCode::Internal, "minIP: step() after the last slice");
  const int64_t z = done_, nz = geometry_.dims[2];
  const uint64_t plane = static_cast<uint64_t>(geometry_.dims[0]) * static_cast<uint64_t>(geometry_.dims[1]);
  const int64_t lo = std::max<int64_t>(0, z - (static_cast<int64_t>(slices_) - 1) / 2);
  const int64_t hi = std::min<int64_t>(nz - 1, z + static_cast<int64_t>(slices_) / 2);
  float* out = out_.data() + static_cast<uint64_t>(z) * plane;
  parallel_for(plane, threads_, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      float m = volume_[static_cast<uint64_t>(lo) * plane + i];
      for (int64_t s = lo + 1; s <= hi; ++s) m = std::min(m, volume_[static_cast<uint64_t>(s) * plane + i]);
      out[i] = m;
    }
  });
  ++done_;
}

std::vector<float> MinIntensityProjection::take_result() {
  if (!finished()) throw Error(ErrorCode::InvalidArgument, "minIP: take_result() before the last slice");
  if (taken_) throw Error(ErrorCode::InvalidArgument, "minIP: take_result() called twice");
  taken_ = true;
  return std::move(out_);
}

std::vector<float> min_intensity_projection(const Geometry& geometry, std::span<const float> volume, double slab_mm,
                                            unsigned threads) {
  MinIntensityProjection p(geometry, volume, slab_mm, threads);
  run_to_end(p);
  return p.take_result();
}

uint64_t min_intensity_projection_workspace_bytes(const Geometry& geometry) {
  validate_geometry(geometry);
  return saturating_mul(geometry.voxel_count(), 4);
}

}  // namespace tessera
