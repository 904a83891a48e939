// A run's volume resampled to its B0-aligned grid (tessera/b0_align.h), driven from JavaScript: the aligned volume runs
// like any other (the step API), and its χ is resampled back onto the source grid.
#pragma once

#include <emscripten/val.h>

#include <memory>

#include "tessera/common/b0_align.h"
#include "request_reader.h"
#include "volume.h"

namespace tessera::js {

using emscripten::val;

class B0Aligned {
 public:
  // The source volume resampled to its B0-aligned grid: field (× mask when the plan's network reads it masked) and
  // the aligned grid's mask.
  // plan is a network's plan made on the aligned grid (plan.b0Align.resampled) for this volume (else Error
  // InvalidArgument, check_volume); the volume holds one echo (a field).
  B0Aligned(std::shared_ptr<Volume> source, const PlanHandle& plan);
  // The aligned volume, to run (geometry with B0 along the third axis).
  std::shared_ptr<Volume> volume() const { return aligned_; }
  // The plan's run on the aligned volume.
  PlanHandle plan() const { return aligned_plan_; }
  // A χ of the aligned grid (Float32Array) resampled back onto the source grid at the source mask (0 elsewhere).
  val restore(const val& aligned_chi) const;
  double tilt_degrees() const { return alignment_.tilt_degrees; }

 private:
  std::shared_ptr<Volume> source_;
  B0Alignment alignment_;
  std::shared_ptr<Volume> aligned_;
  PlanHandle aligned_plan_;
};

}  // namespace tessera::js
