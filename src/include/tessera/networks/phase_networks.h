// Networks that reconstruct from wrapped phase (iQSM, iQFM, iQSM+): whole volume only, one network call
// per echo with several inputs. The pipeline follows the public reference code (the inference scripts of
// sunhongfu/iQSM and sunhongfu/iQSM_Plus): phase · sign (−1 by default), brain mask eroded by a sphere,
// iQSM+ only: y and z swapped when B0 lies closer to y, crop to the eroded mask's bounding box + 16;
// zero padding to 16 (smaller half low); inputs phase, mask, TE, B0, the border shell (1 inside, 0 on the
// padded volume's outer voxel layer, where the network's Laplacian is zeroed) and, for iQSM+, the unit B0
// direction; the output times the eroded mask; echoes combined with weights (magnitude · TE)².
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/engine/driver.h"
#include "tessera/common/geometry.h"
#include "tessera/common/schema.h"
#include "tessera/engine/plan.h"
#include "tessera/registry/registry.h"
#include "tessera/engine/runner.h"

namespace tessera {

// The phase networks' options: "erodeRadius", "phaseSign", "b0Align".
std::span<const OptionSpec> phase_network_options();

struct PhaseSettings {
  std::vector<double> te_s;   // echo times in seconds, one per echo (> 0)
  double b0_tesla = defaults::kB0Tesla;  // field strength (> 0)
  uint32_t erode_radius = defaults::kErodeRadius;  // mask erosion radius in voxels (0: none; erode_mask_voxels); the reference default is 3
  double phase_sign = defaults::kPhaseSign;  // +1 or −1: multiplies the phase before the network (reference default −1)
};

// Where a phase network's volume goes: after the optional y/z swap, the crop and the padding.
struct PhaseLayout {
  bool swap_yz = false;           // iQSM+ with B0 closer to y than to z: y and z are swapped
  Geometry working;               // the volume's geometry after the swap
  Dims3 crop_lo{0, 0, 0};         // crop region in the working volume
  Dims3 crop_dims{0, 0, 0};
  std::array<uint64_t, 3> padded{0, 0, 0};  // network dims (multiples of the divisor)
  Dims3 pad_low{0, 0, 0};
  Vec3 b0_unit{0, 0, 1};          // unit B0 direction in the working volume
  uint64_t activation_bytes = 0;  // the network's estimate for the padded volume
};

// The layout of a run of model m over this geometry with this (already eroded) mask.
// m is a phase network (kind WholeVolumeOnly); eroded holds geometry.voxel_count() values.
// Throws Error(InvalidArgument) when the eroded mask is empty.
PhaseLayout phase_layout(const ModelSpec& m, const Geometry& geometry, std::span<const uint8_t> eroded);

// Plans a phase network run: the padded volume against the single-patch limit, the module heap.
// Never throws for a volume that is too large: feasible=false and message say why and what to do.
// mask holds geometry.voxel_count() values; echoes >= 1.
// Throws Error(InvalidArgument) for invalid settings (TE, B0, sign) or a mask that erodes to nothing.
TilePlan plan_phase(const ModelSpec& m, const Geometry& geometry, std::span<const uint8_t> mask,
                    const PhaseSettings& settings, uint32_t echoes, Target target);

// Warnings for inputs the network was not designed for (B0 off the third axis for iQSM/iQFM,
// anisotropic voxels), or empty.
std::string phase_warning(const ModelSpec& m, const Geometry& geometry);

// Runs a phase network over every echo and combines them; out receives chi (or the local field for iQFM)
// in ppm, zero outside the eroded mask.
// phase holds echoes · voxel_count wrapped phases (rad, echo after echo); magnitude is empty or the same
// size; mask and out hold voxel_count values; settings.te_s.size() == echoes.
RunReport run_phase_network(const ModelSpec& m, const Geometry& geometry, std::span<const float> phase,
                            std::span<const float> magnitude, std::span<const uint8_t> mask,
                            const PhaseSettings& settings, PatchRunner& network, const RunOptions& options,
                            std::span<float> out);

}  // namespace tessera
