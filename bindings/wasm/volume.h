// The volume a run reads: geometry, field (or every echo of a wrapped phase), mask and an optional magnitude,
// held in the module heap and filled by JavaScript through views.
#pragma once

#include <emscripten/val.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/common/geometry.h"
#include "tessera/networks/inversion.h"
#include "request_reader.h"

namespace tessera::js {

using emscripten::val;

// A volume in the module heap: field (f32; for phase networks the wrapped phase of every echo, echo after
// echo), mask (u8) and an optional magnitude (same size as the field), filled by JavaScript through views.
class Volume {
 public:
  // echoes >= 1 (more than 1 only for the phase networks' multi-echo data).
  Volume(const val& geometry, uint32_t echoes);
  // A volume of one echo holding these values (a box cut from another volume).
  Volume(const Geometry& geometry, std::vector<float> field, std::vector<uint8_t> mask);
  val geometry() const;
  // Views on the heap: valid until the next call that may allocate. Fill them at once.
  val field_view();
  val mask_view();
  // Allocates the magnitude (zeros) on the first call, then views it.
  val magnitude_view();
  uint32_t voxel_count() const { return static_cast<uint32_t>(mask_.size()); }
  uint32_t echoes() const { return echoes_; }
  const Geometry& geo() const { return geometry_; }
  std::span<const float> field() const { return field_; }
  std::span<const uint8_t> mask() const { return mask_; }
  std::span<const float> magnitude() const { return magnitude_; }
  // What a run reads (views on this volume's buffers).
  VolumeData data() const { return {geometry_, echoes_, field_, mask_, magnitude_}; }

 private:
  Geometry geometry_;
  uint32_t echoes_ = 1;
  std::vector<float> field_;
  std::vector<uint8_t> mask_;
  std::vector<float> magnitude_;
};

}  // namespace tessera::js
