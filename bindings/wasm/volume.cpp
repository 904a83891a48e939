#include "volume.h"

#include <string>

#include "conversions.h"
#include "tessera/common/error.h"

namespace tessera::js {

Volume::Volume(const val& geometry, uint32_t echoes) : geometry_(geometry_from(geometry)), echoes_(echoes) {
  if (echoes == 0 || echoes > 64) throw Error(ErrorCode::InvalidArgument, "echoes must be 1 to 64, got " + std::to_string(echoes));
  const uint64_t n = geometry_.voxel_count();
  if (n * echoes > (1ull << 30)) {
    throw Error(ErrorCode::InvalidArgument, std::to_string(echoes) + " echoes of " + std::to_string(n) +
                                                " voxels do not fit a browser's 4 GB memory: give fewer echoes");
  }
  field_.assign(n * echoes, 0.0f);
  mask_.assign(n, 0);
}

Volume::Volume(const Geometry& geometry, std::vector<float> field, std::vector<uint8_t> mask)
    : geometry_(geometry), field_(std::move(field)), mask_(std::move(mask)) {
  validate_geometry(geometry_);
  validate_volume_sizes(geometry_, field_.size(), mask_.size());
}

val Volume::geometry() const { return val(geometry_); }

val Volume::field_view() { return val(emscripten::typed_memory_view(field_.size(), field_.data())); }
val Volume::mask_view() { return val(emscripten::typed_memory_view(mask_.size(), mask_.data())); }
val Volume::magnitude_view() {
  if (magnitude_.empty()) magnitude_.assign(field_.size(), 0.0f);
  return val(emscripten::typed_memory_view(magnitude_.size(), magnitude_.data()));
}

}  // namespace tessera::js
