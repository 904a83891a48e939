#include "b0_aligned.h"

#include <vector>

#include "conversions.h"
#include "tessera/error.h"

namespace tessera::js {

B0Aligned::B0Aligned(std::shared_ptr<Volume> source, const val& request) : source_(std::move(source)) {
  if (source_->echoes() != 1) throw Error(ErrorCode::InvalidArgument, "B0 alignment resamples a field (one echo), not a phase");
  InversionRequest r = request_from(request);
  r.geometry = source_->geo();
  alignment_ = b0_alignment(r.geometry, source_->mask());
  const bool masked = request_network(r).masked_input;
  std::vector<float> field = to_aligned_grid(alignment_, source_->field(), masked ? source_->mask() : std::span<const uint8_t>{});
  std::vector<uint8_t> mask = aligned_mask(alignment_, source_->mask());
  aligned_ = std::make_shared<Volume>(alignment_.aligned, std::move(field), std::move(mask));
}

val B0Aligned::restore(const val& aligned_chi) const { return b0_restore_to_val(alignment_, source_->mask(), aligned_chi); }

}  // namespace tessera::js
