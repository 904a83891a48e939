#include "tessera/engine/blend.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "tessera/common/error.h"

namespace tessera {

std::vector<double> blend_profile(Blend blend, uint32_t window) {
  if (window == 0) throw Error(ErrorCode::InvalidArgument, "a blend window needs at least 1 voxel");
  std::vector<double> p(window, 1.0);
  const double n = window;
  for (uint32_t i = 0; i < window; ++i) {
    const double u = (i + 0.5) / n;  // in (0, 1), symmetric about ½
    switch (blend) {
      case Blend::Crop: break;
      case Blend::Linear: p[i] = 1.0 - std::abs(2.0 * u - 1.0); break;
      case Blend::Cosine: p[i] = std::sin(std::numbers::pi * u) * std::sin(std::numbers::pi * u); break;
      case Blend::Gaussian: {
        const double d = (u - 0.5) * 8.0;  // (i + ½ - n/2) / σ with σ = n/8
        p[i] = std::exp(-0.5 * d * d);
        break;
      }
    }
  }
  return p;
}

std::array<std::vector<double>, 3> blend_weight_sums(const Geometry& g, const TileGrid& grid) {
  const std::vector<double> profile = blend_profile(grid.config.blend, grid.config.core);
  const int64_t core = grid.config.core, step = grid.config.step();
  std::array<std::vector<double>, 3> sums;
  for (int a = 0; a < 3; ++a) {
    sums[a].assign(static_cast<size_t>(g.dims[a]), 0.0);
    for (uint64_t k = 0; k < grid.counts[a]; ++k) {
      const int64_t lo = static_cast<int64_t>(k) * step;
      const int64_t hi = std::min<int64_t>(lo + core, g.dims[a]);
      for (int64_t x = lo; x < hi; ++x) sums[a][static_cast<size_t>(x)] += profile[static_cast<size_t>(x - lo)];
    }
  }
  return sums;
}

uint64_t TileWriter::extra_bytes(const Geometry& g, const TileConfig& config) {
  return config.overlapping() ? saturating_mul(g.voxel_count(), sizeof(int64_t)) : 0;
}

TileWriter::TileWriter(const Geometry& g, std::span<const uint8_t> mask, const TileGrid& grid, const Normalization& norm,
                       std::span<float> chi)
    : geometry_(g), mask_(mask), grid_(grid), norm_(norm), chi_(chi), blended_(grid.config.overlapping()) {
  validate_volume_sizes(g, chi.size(), mask.size());
  std::fill(chi.begin(), chi.end(), 0.0f);
  if (blended_) {
    profile_ = blend_profile(grid.config.blend, grid.config.core);
    sums_ = blend_weight_sums(g, grid);
    acc_.assign(g.voxel_count(), 0);
  }
  if (grid.active == 0) finalise();
}

void TileWriter::write(const Tile& t, const std::array<uint64_t, 3>& dims, std::span<const float> patch) {
  if (!blended_) {
    scatter_core(geometry_, mask_, t.core_lo, t.core_hi, t.patch_lo, dims, norm_, patch, chi_);
    std::lock_guard lock(mutex_);
    ++written_;
    return;
  }
  // Weighted values of this tile, checked before anything is added, then added under the lock.
  const double scale = norm_.output_scale, offset = norm_.output_offset;
  const uint64_t sy = dims[2], sx = dims[1] * dims[2];
  const int64_t nx = t.core_hi[0] - t.core_lo[0];
  std::vector<int64_t> add(static_cast<size_t>(nx * (t.core_hi[1] - t.core_lo[1]) * (t.core_hi[2] - t.core_lo[2])), 0);
  size_t k = 0;
  for (int64_t z = t.core_lo[2]; z < t.core_hi[2]; ++z) {
    const double wz = profile_[static_cast<size_t>(z - t.core_lo[2])] / sums_[2][static_cast<size_t>(z)];
    for (int64_t y = t.core_lo[1]; y < t.core_hi[1]; ++y) {
      const double wyz = wz * profile_[static_cast<size_t>(y - t.core_lo[1])] / sums_[1][static_cast<size_t>(y)];
      const uint64_t row = geometry_.index(0, y, z);
      const float* src = patch.data() + static_cast<uint64_t>(y - t.patch_lo[1]) * sy + static_cast<uint64_t>(z - t.patch_lo[2]);
      for (int64_t x = t.core_lo[0]; x < t.core_hi[0]; ++x, ++k) {
        if (!mask_[row + static_cast<uint64_t>(x)]) continue;
        const double v = scale * src[static_cast<uint64_t>(x - t.patch_lo[0]) * sx] + offset;
        if (!std::isfinite(v) || std::abs(v) > kBlendMaxMagnitude) {
          throw Error(ErrorCode::RunnerFailed, tile_text(t) + ": the network returned " +
                                                   (std::isfinite(v) ? std::to_string(v) : std::string("a non-finite value")) +
                                                   " at voxel (" + std::to_string(x) + ", " + std::to_string(y) + ", " +
                                                   std::to_string(z) + ") inside the mask");
        }
        const double w = wyz * profile_[static_cast<size_t>(x - t.core_lo[0])] / sums_[0][static_cast<size_t>(x)];
        add[k] = std::llround(w * v * kBlendFixedPointScale);
      }
    }
  }
  std::lock_guard lock(mutex_);
  k = 0;
  for (int64_t z = t.core_lo[2]; z < t.core_hi[2]; ++z) {
    for (int64_t y = t.core_lo[1]; y < t.core_hi[1]; ++y) {
      int64_t* dst = acc_.data() + geometry_.index(t.core_lo[0], y, z);
      for (int64_t x = 0; x < nx; ++x, ++k) dst[x] += add[k];
    }
  }
  if (++written_ == grid_.active) finalise();
}

void TileWriter::finalise() {
  if (!blended_) return;
  for (uint64_t i = 0; i < acc_.size(); ++i) {
    chi_[i] = mask_[i] ? static_cast<float>(static_cast<double>(acc_[i]) / kBlendFixedPointScale) : 0.0f;
  }
  std::vector<int64_t>().swap(acc_);
}

bool TileWriter::complete() const {
  std::lock_guard lock(mutex_);
  return written_ >= grid_.active;
}

}  // namespace tessera
