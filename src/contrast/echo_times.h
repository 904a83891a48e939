// The echo-time checks the contrast layer shares (SWI and R2*): TEs in seconds, positive, increasing, and their
// count against the volumes given.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "tessera/common/geometry.h"

namespace tessera::contrast {

// Throws Error(InvalidArgument) naming what is wrong ("<what>: ..."): no TE, a TE that is not finite and positive,
// one over 1 (milliseconds, with the value in seconds), TEs not increasing, a volume of values that is not
// te_s.size() · voxel_count(), a mask of another size or with no voxel inside.
// geometry valid.
void validate_echo_volumes(const std::string& what, const Geometry& geometry, std::span<const double> te_s,
                           std::span<const float> echoes, const std::string& echoes_name,
                           std::span<const uint8_t> mask);

}  // namespace tessera::contrast
