#include "b0_aligned.h"

#include <vector>

#include "conversions.h"
#include "tessera/common/error.h"

namespace tessera::js {

B0Aligned::B0Aligned(std::shared_ptr<Volume> source, const PlanHandle& plan) : source_(std::move(source)) {
  if (source_->echoes() != 1) throw Error(ErrorCode::InvalidArgument, "B0 alignment resamples a field (one echo), not a phase");
  if (plan->request.kind() != Request::Kind::Network || !plan->tiles.b0.resampled) {
    throw Error(ErrorCode::Internal, "B0 alignment runs a network plan made on the B0-aligned grid (plan.b0Align.resampled)");
  }
  check_volume(*plan, source_->geo(), source_->mask());
  const InversionRequest& r = plan->request.network();
  alignment_ = b0_alignment(r.geometry, source_->mask());
  const bool masked = request_network(r).masked_input;
  std::vector<float> field = to_aligned_grid(alignment_, source_->field(), masked ? source_->mask() : std::span<const uint8_t>{});
  std::vector<uint8_t> mask = aligned_mask(alignment_, source_->mask());
  const VolumeKey key = volume_key(alignment_.aligned, mask);
  aligned_ = std::make_shared<Volume>(alignment_.aligned, std::move(field), std::move(mask));
  aligned_plan_ = plan_on_grid(*plan, alignment_.aligned, plan->tiles, key);
}

val B0Aligned::restore(const val& aligned_chi) const { return b0_restore_to_val(alignment_, source_->mask(), aligned_chi); }

}  // namespace tessera::js
