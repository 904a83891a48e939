#include "tessera/common/input_checks.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/message_number.h"
#include "tessera/common/physics.h"
#include "tessera/common/error.h"

namespace tessera {

std::string voxel_size_warning(const Geometry& g) {
  const auto& v = g.voxel_mm;
  if (std::all_of(v.begin(), v.end(), [](double x) { return x >= kMinVoxelMm && x <= kMaxVoxelMm; })) return {};
  return "the voxel size " + message_number(v[0]) + "×" + message_number(v[1]) + "×" + message_number(v[2]) +
         " mm is outside " + message_number(kMinVoxelMm) + "–" + message_number(kMaxVoxelMm) +
         " mm: taken as millimetres as given; check the header's units (µm or m?) and pixdim";
}

void validate_dipole_extent(const Geometry& g) {
  static const char* kAxes[] = {"x", "y", "z"};
  for (int a = 0; a < 3; ++a) {
    if (g.dims[a] >= kMinDipoleAxisVoxels) continue;
    throw Error(ErrorCode::InvalidArgument,
                "the volume " + dims_text(g.dims) + " holds " + std::to_string(g.dims[a]) + " voxel(s) along " + kAxes[a] +
                    ": a 3D dipole inversion needs at least " + std::to_string(kMinDipoleAxisVoxels) +
                    " along every axis (and many more for a faithful χ), since the dipole kernel's magic-angle cone is "
                    "not sampled by fewer; give the whole 3D volume, not a slice");
  }
}

RobustRange robust_range(std::span<const float> field, std::span<const uint8_t> mask) {
  std::vector<float> inside;
  for (size_t i = 0; i < field.size(); ++i) {
    if (mask[i] && std::isfinite(field[i])) inside.push_back(field[i]);
  }
  if (inside.empty()) return {};
  auto at = [&](double p) {
    const size_t k = std::min(inside.size() - 1, static_cast<size_t>(p * static_cast<double>(inside.size() - 1) + 0.5));
    std::nth_element(inside.begin(), inside.begin() + static_cast<std::ptrdiff_t>(k), inside.end());
    return static_cast<double>(inside[k]);
  };
  RobustRange r;
  r.p1 = at(0.01);
  r.p99 = at(0.99);
  return r;
}

namespace {

// "1 ppm = 128 Hz at 3 T": the conversion the field checks' messages name, from γ̄.
std::string ppm_in_hz_at_3t() { return "1 ppm = " + message_number(3.0 * kGammaBarMHzPerT, 3) + " Hz at 3 T"; }

}  // namespace

std::string implausible_ppm_text(std::span<const float> field, std::span<const uint8_t> mask) {
  const RobustRange r = robust_range(field, mask);
  if (std::max(std::abs(r.p1), std::abs(r.p99)) <= kMaxLocalFieldPpm) return {};
  return "the local field's 1st–99th percentile inside the mask is [" + message_number(r.p1, 4) + ", " +
         message_number(r.p99, 4) + "], beyond ±" + message_number(kMaxLocalFieldPpm) +
         " ppm: a local field in ppm lies within about ±" + message_number(kMaxLocalFieldPpm) +
         " ppm, so this looks like Hz or rad/s (" + ppm_in_hz_at_3t() +
         ") or a total field with the background left in. Convert it to ppm (CLI: --units hz --b0 3), remove the "
         "background (pipeline), or state that it is ppm (CLI: --units ppm; API: fieldUnits: 'ppm')";
}

std::string implausible_total_ppm_text(std::span<const float> field, std::span<const uint8_t> mask) {
  const RobustRange r = robust_range(field, mask);
  if (std::max(std::abs(r.p1), std::abs(r.p99)) <= kMaxTotalFieldPpm) return {};
  return "the total field's 1st–99th percentile inside the mask is [" + message_number(r.p1, 4) + ", " +
         message_number(r.p99, 4) + "], beyond ±" + message_number(kMaxTotalFieldPpm) +
         " ppm: a total field in ppm lies within a few ppm, so this looks like Hz or rad/s (" + ppm_in_hz_at_3t() + "). "
         "Convert it to ppm (CLI: --units hz --b0 3), or state that it is ppm (CLI: --units ppm; API: fieldUnits: 'ppm')";
}

std::string left_out_warning(std::string_view stage, uint64_t kept, uint64_t given, std::string_view why, double bound) {
  if (given == 0 || kept >= given) return {};
  const double share = static_cast<double>(given - kept) / static_cast<double>(given);
  if (share <= bound) return {};
  return std::string(stage) + " left out " + std::to_string(given - kept) + " of " + std::to_string(given) +
         " mask voxels (" + message_number(100.0 * share, 3) + " %): " + std::string(why);
}

}  // namespace tessera
