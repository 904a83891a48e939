#include "tessera/engine/verify.h"

#include <algorithm>

#include "tessera/common/dipole.h"
#include "tessera/common/error.h"
#include "tessera/common/morphology.h"
#include "tessera/engine/fidelity_model.h"

namespace tessera {

namespace {

template <typename T>
std::vector<T> crop(const Geometry& g, std::span<const T> data, const Dims3& lo, const Dims3& hi) {
  if (data.size() != g.voxel_count()) validate_volume_sizes(g, g.voxel_count(), data.size());
  for (int a = 0; a < 3; ++a) {
    if (lo[a] < 0 || hi[a] > g.dims[a] || lo[a] >= hi[a]) throw Error(ErrorCode::InvalidArgument, "crop_box: the box is not inside the volume");
  }
  const int64_t nx = hi[0] - lo[0];
  std::vector<T> out(static_cast<size_t>(nx * (hi[1] - lo[1]) * (hi[2] - lo[2])));
  size_t o = 0;
  for (int64_t z = lo[2]; z < hi[2]; ++z)
    for (int64_t y = lo[1]; y < hi[1]; ++y) {
      const T* src = data.data() + g.index(lo[0], y, z);
      std::copy(src, src + nx, out.begin() + static_cast<std::ptrdiff_t>(o));
      o += static_cast<size_t>(nx);
    }
  return out;
}

}  // namespace

Geometry box_geometry(const Geometry& g, const Dims3& lo, const Dims3& hi) {
  Geometry b = g;
  for (int a = 0; a < 3; ++a) b.dims[a] = hi[a] - lo[a];
  validate_geometry(b);
  return b;
}

std::vector<float> crop_box(const Geometry& g, std::span<const float> data, const Dims3& lo, const Dims3& hi) {
  return crop(g, data, lo, hi);
}
std::vector<uint8_t> crop_box(const Geometry& g, std::span<const uint8_t> data, const Dims3& lo, const Dims3& hi) {
  return crop(g, data, lo, hi);
}

uint64_t verify_min_voxels(uint64_t mask_voxels) { return std::min<uint64_t>(kVerifyMinVoxels, (mask_voxels + 9) / 10); }

VerifyRegion plan_verification(const Geometry& g, std::span<const uint8_t> mask, const FieldNetwork& network, Target target) {
  validate_geometry(g);
  if (mask.size() != g.voxel_count()) validate_volume_sizes(g, g.voxel_count(), mask.size());
  VerifyRegion v;
  const MaskBox mbox = mask_box(g, mask);
  const Dims3 mlo = mbox.lo, mhi = mbox.hi;
  const uint64_t total = mbox.voxels;
  if (mbox.empty()) {
    v.message = "the mask holds no voxel: nothing to check";
    return v;
  }
  const uint32_t divisor = std::max<uint32_t>(1, network.cost.divisor);
  // The largest cube within the single-patch limit (natively: the whole volume), clamped to the volume per axis;
  // shrunk by the divisor until the box's whole-volume plan (with its divisor padding) fits.
  uint64_t edge = 0;
  for (int64_t d : g.dims) edge = std::max<uint64_t>(edge, static_cast<uint64_t>(d));
  edge = (edge + divisor - 1) / divisor * divisor;
  if (target == Target::Wasm) {
    edge = std::min<uint64_t>(edge, max_wasm_patch_edge(network.cost.bytes_per_voxel, network.cost.fixed_bytes) / divisor * divisor);
  }
  for (; edge >= divisor; edge -= divisor) {
    for (int a = 0; a < 3; ++a) {
      const int64_t e = std::min<int64_t>(static_cast<int64_t>(edge), g.dims[a]);
      const int64_t centre = (mlo[a] + mhi[a]) / 2;
      v.lo[a] = std::clamp<int64_t>(centre - e / 2, 0, g.dims[a] - e);
      v.hi[a] = v.lo[a] + e;
    }
    v.plan = plan_whole(box_geometry(g, v.lo, v.hi), network, target);
    if (v.plan.feasible) break;
  }
  if (edge < divisor || !v.plan.feasible) {
    v.message = "no box fits the single-patch limit as a whole-volume run: " + v.plan.message;
    return v;
  }
  v.margin = network.context.within.empty() ? 64u : context_radius_holding(network.context, 0.99);
  for (int a = 0; a < 3; ++a) {
    v.compare_lo[a] = v.lo[a] > 0 ? v.lo[a] + v.margin : v.lo[a];
    v.compare_hi[a] = v.hi[a] < g.dims[a] ? v.hi[a] - v.margin : v.hi[a];
    // Only the mask's part of it matters.
    v.compare_lo[a] = std::max(v.compare_lo[a], mlo[a]);
    v.compare_hi[a] = std::min(v.compare_hi[a], mhi[a]);
  }
  uint64_t compared = 0;
  if (v.compare_lo[0] < v.compare_hi[0] && v.compare_lo[1] < v.compare_hi[1] && v.compare_lo[2] < v.compare_hi[2]) {
    for (int64_t z = v.compare_lo[2]; z < v.compare_hi[2]; ++z)
      for (int64_t y = v.compare_lo[1]; y < v.compare_hi[1]; ++y)
        for (int64_t x = v.compare_lo[0]; x < v.compare_hi[0]; ++x) compared += mask[g.index(x, y, z)] ? 1 : 0;
  }
  const uint64_t needed = verify_min_voxels(total);
  if (compared < needed) {
    v.message = "the largest box that runs whole (" + std::to_string(v.hi[0] - v.lo[0]) + "×" + std::to_string(v.hi[1] - v.lo[1]) +
                "×" + std::to_string(v.hi[2] - v.lo[2]) + ") leaves " +
                (compared == 0 ? std::string("no mask voxel") : "only " + std::to_string(compared) + " mask voxels (at least " + std::to_string(needed) + " are needed)") +
                " once the network's reach (" + std::to_string(v.margin) +
                " voxels) is kept from its inner faces: the check cannot be made; compare with a whole-volume run where one fits";
    return v;
  }
  const Geometry box = box_geometry(g, v.lo, v.hi);
  // The box's field, mask and χ, and for the comparison the tiled χ and mask cropped to it.
  v.module_heap_bytes = saturating_mul(box.voxel_count(), 2 * sizeof(float) + 2 * sizeof(uint8_t) + 2 * sizeof(float));
  v.possible = true;
  return v;
}

Agreement compare_verification(const Geometry& g, std::span<const float> tiled, std::span<const uint8_t> mask,
                               std::span<const float> box_chi, const VerifyRegion& v) {
  if (!v.possible) throw Error(ErrorCode::InvalidArgument, "compare_verification: " + v.message);
  const Geometry box = box_geometry(g, v.lo, v.hi);
  if (box_chi.size() != box.voxel_count()) validate_volume_sizes(box, box.voxel_count(), box_chi.size());
  const std::vector<float> t = crop_box(g, tiled, v.lo, v.hi);
  const std::vector<uint8_t> m = crop_box(g, mask, v.lo, v.hi);
  Dims3 lo, hi;
  for (int a = 0; a < 3; ++a) lo[a] = v.compare_lo[a] - v.lo[a], hi[a] = v.compare_hi[a] - v.lo[a];
  return compare_maps(box, t, box_chi, m, lo, hi);
}

}  // namespace tessera
