#include "verification.h"

#include <emscripten/bind.h>

#include <string>
#include <vector>

#include "conversions.h"
#include "tessera/common/error.h"
#include "tessera/quality/fidelity.h"

namespace tessera::js {

namespace {

std::vector<float> floats(const val& v, uint64_t n, const char* what) {
  std::vector<float> out = emscripten::convertJSArrayToNumberVector<float>(v);
  if (out.size() != n) {
    throw Error(ErrorCode::InvalidArgument, std::string(what) + " holds " + std::to_string(out.size()) + " values, not " + std::to_string(n));
  }
  return out;
}

}  // namespace

Verification::Verification(std::shared_ptr<Volume> volume, const PlanHandle& plan) : volume_(std::move(volume)) {
  if (plan->request.kind() != Request::Kind::Network || !plan->tiles.verify) {
    throw Error(ErrorCode::InvalidArgument, "the plan has no self-check: plan with verify: true");
  }
  region_ = *plan->tiles.verify;
  if (!region_.possible) throw Error(ErrorCode::InvalidArgument, region_.message);
  check_volume(*plan, volume_->geo(), volume_->mask());
  const Geometry& geometry = volume_->geo();
  const Geometry g = box_geometry(geometry, region_.lo, region_.hi);
  std::vector<uint8_t> mask = crop_box(geometry, volume_->mask(), region_.lo, region_.hi);
  const VolumeKey key = volume_key(g, mask);
  box_ = std::make_shared<Volume>(g, crop_box(geometry, volume_->field(), region_.lo, region_.hi), std::move(mask));
  box_plan_ = plan_on_grid(*plan, g, region_.plan, key);
}

val Verification::compare(const val& tiled, const val& box_chi) const {
  const std::vector<float> t = floats(tiled, volume_->geo().voxel_count(), "the tiled χ");
  const std::vector<float> b = floats(box_chi, box_->geo().voxel_count(), "the box's χ");
  return verification_to_val(compare_verification(volume_->geo(), t, volume_->mask(), b, region_), region_);
}

double Verification::data_consistency(const val& chi) const {
  const std::vector<float> c = floats(chi, volume_->geo().voxel_count(), "χ");
  return data_consistency_residual(volume_->geo(), c, volume_->field(), volume_->mask(), 2);
}

}  // namespace tessera::js
