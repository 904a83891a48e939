#include "verification.h"

#include <emscripten/bind.h>

#include <string>
#include <vector>

#include "conversions.h"
#include "tessera/error.h"
#include "tessera/fidelity.h"

namespace tessera::js {

namespace {

Dims3 dims_from(const val& v, const char* what) {
  if (v.isUndefined() || v.isNull() || v["length"].isUndefined() || v["length"].as<unsigned>() != 3) {
    throw Error(ErrorCode::InvalidArgument, std::string("plan.verify.") + what + " must be [x, y, z]: plan again with verify: true");
  }
  return {static_cast<int64_t>(v[0].as<double>()), static_cast<int64_t>(v[1].as<double>()), static_cast<int64_t>(v[2].as<double>())};
}

std::vector<float> floats(const val& v, uint64_t n, const char* what) {
  std::vector<float> out = emscripten::convertJSArrayToNumberVector<float>(v);
  if (out.size() != n) {
    throw Error(ErrorCode::InvalidArgument, std::string(what) + " holds " + std::to_string(out.size()) + " values, not " + std::to_string(n));
  }
  return out;
}

}  // namespace

Verification::Verification(std::shared_ptr<Volume> volume, const val& request, const val& plan) : volume_(std::move(volume)) {
  const val v = plan["verify"];
  if (v.isUndefined() || v.isNull()) throw Error(ErrorCode::InvalidArgument, "the plan has no self-check: plan with verify: true");
  if (!v["possible"].as<bool>()) throw Error(ErrorCode::InvalidArgument, v["message"].as<std::string>());
  InversionRequest r = request_from(request);
  r.geometry = volume_->geo();
  region_ = plan_verification(r.geometry, volume_->mask(), request_network(r), Target::Wasm);
  if (!region_.possible) throw Error(ErrorCode::InvalidArgument, region_.message);
  if (dims_from(v["lo"], "lo") != region_.lo || dims_from(v["hi"], "hi") != region_.hi) {
    throw Error(ErrorCode::InvalidArgument, "the plan's self-check box was made for another volume, mask or network: plan again");
  }
  const Geometry g = box_geometry(r.geometry, region_.lo, region_.hi);
  box_ = std::make_shared<Volume>(g, crop_box(r.geometry, volume_->field(), region_.lo, region_.hi),
                                  crop_box(r.geometry, volume_->mask(), region_.lo, region_.hi));
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
