// The self-check of a tiled run (tessera/verify.h), driven from JavaScript: the box its plan named, cut from the run's
// volume as a volume of its own (run whole by the same step API), and the comparison of the two results.
#pragma once

#include <emscripten/val.h>

#include <memory>

#include "tessera/verify.h"
#include "volume.h"

namespace tessera::js {

using emscripten::val;

class Verification {
 public:
  // The plan's self-check (plan.verify, from plan() with verify: true), evaluated on this volume: the same box or
  // Error(InvalidArgument) "plan again"; Error(InvalidArgument) when the plan has no possible check (its message).
  Verification(std::shared_ptr<Volume> volume, const val& request, const val& plan);

  // The box as a volume (field and mask), to run whole.
  std::shared_ptr<Volume> box() const { return box_; }
  // {voxels, r, nrmse, maxAbs, lo, hi, margin}: the tiled χ (the whole volume's, x-fastest) against the box's
  // whole-volume χ over the compared part.
  val compare(const val& tiled, const val& box_chi) const;
  // ‖M (D∗χ − f)‖ / ‖M f‖ of a χ of the whole volume against its field.
  double data_consistency(const val& chi) const;

 private:
  std::shared_ptr<Volume> volume_;
  VerifyRegion region_;
  std::shared_ptr<Volume> box_;
};

}  // namespace tessera::js
