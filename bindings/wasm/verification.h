// The self-check of a tiled run (tessera/verify.h), driven from JavaScript: the box its plan named, cut from the run's
// volume as a volume of its own (run whole by the same step API), and the comparison of the two results.
#pragma once

#include <emscripten/val.h>

#include <memory>

#include "tessera/engine/verify.h"
#include "request_reader.h"
#include "volume.h"

namespace tessera::js {

using emscripten::val;

class Verification {
 public:
  // The self-check the network plan holds (planned with verify: true) on the volume the run went through (the plan's:
  // else Error(InvalidArgument), check_volume); Error(InvalidArgument) when the plan has no possible check (its message).
  Verification(std::shared_ptr<Volume> volume, const PlanHandle& plan);

  // The box as a volume (field and mask), to run whole.
  std::shared_ptr<Volume> box() const { return box_; }
  // The box's whole-volume run (the plan's network on the box).
  PlanHandle box_plan() const { return box_plan_; }
  // {voxels, r, nrmse, maxAbs, lo, hi, margin}: the tiled χ (the whole volume's, x-fastest) against the box's
  // whole-volume χ over the compared part.
  val compare(const val& tiled, const val& box_chi) const;
  // ‖M (D∗χ − f)‖ / ‖M f‖ of a χ of the whole volume against its field.
  double data_consistency(const val& chi) const;

 private:
  std::shared_ptr<Volume> volume_;
  VerifyRegion region_;
  std::shared_ptr<Volume> box_;
  PlanHandle box_plan_;
};

}  // namespace tessera::js
