// A local field (the output of background field removal) and the exact spherical erosion the methods share.
// Volumes are x-fastest.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tessera/common/geometry.h"

namespace tessera {

// A local field and the mask it is defined on (zero outside it).
struct LocalField {
  std::vector<float> field;   // the total field's unit
  std::vector<uint8_t> mask;  // 0 or 1
};

}  // namespace tessera
