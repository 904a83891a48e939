#include "volume.h"

#include <string>

#include "conversions.h"
#include "tessera/common/error.h"

namespace tessera::js {

void check_echoes(const InversionRequest& r, const Volume& v) {
  const bool phase = r.model && r.model->kind == ModelKind::WholeVolumeOnly;
  if (!phase && (v.echoes() != 1 || !v.magnitude().empty())) {
    throw Error(ErrorCode::InvalidArgument, "several echoes and a magnitude are only taken by the phase networks (iQSM family)");
  }
  if (phase && !r.phase.te_s.empty() && r.phase.te_s.size() != v.echoes()) {
    throw Error(ErrorCode::InvalidArgument, "the phase holds " + std::to_string(v.echoes()) + " echo(es) but te gives " +
                                                std::to_string(r.phase.te_s.size()) + " echo time(s): give one TE per echo");
  }
}

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

PreparedRun prepare_run(const Volume& volume, const HeldPlan& held) {
  if (held.request.kind != ParsedRequest::Kind::Network) throw Error(ErrorCode::Internal, "prepare_run runs a network's plan");
  check_volume(held, volume);
  PreparedRun p;
  p.request = held.request.network;
  check_echoes(p.request, volume);
  p.plan = held.tiles;
  p.warning = inversion_warning(p.request);
  p.request.auto_tile = false;
  p.request.tile = p.plan.tile;
  p.request.whole_volume = p.plan.whole_volume;
  p.request.workers = p.plan.tiles_in_flight;
  return p;
}

}  // namespace tessera::js
