// The echo-time and volume checks shared by SWI and R2*.
#include "contrast/echo_times.h"

#include <cmath>

#include "common/message_number.h"
#include "tessera/common/error.h"

namespace tessera::contrast {

void validate_echo_volumes(const std::string& what, const Geometry& geometry, std::span<const double> te_s,
                           std::span<const float> echoes, const std::string& echoes_name,
                           std::span<const uint8_t> mask) {
  validate_geometry(geometry);
  if (te_s.empty()) throw Error(ErrorCode::InvalidArgument, what + ": no echo times given; give one TE (seconds) per echo");
  for (size_t e = 0; e < te_s.size(); ++e) {
    const std::string which = "TE " + std::to_string(e + 1);
    if (!(std::isfinite(te_s[e]) && te_s[e] > 0.0)) {
      throw Error(ErrorCode::InvalidArgument, what + ": " + which + " is " + message_number(te_s[e]) +
                                                  "; echo times must be positive seconds");
    }
    if (te_s[e] > 1.0) {
      throw Error(ErrorCode::InvalidArgument, what + ": " + which + " is " + message_number(te_s[e]) +
                                                  " (over 1 s): looks like milliseconds; give TE in seconds (" +
                                                  message_number(te_s[e] / 1000.0) + ")");
    }
    if (e > 0 && !(te_s[e] > te_s[e - 1])) {
      throw Error(ErrorCode::InvalidArgument, what + ": " + which + " (" + message_number(te_s[e]) +
                                                  " s) is not after TE " + std::to_string(e) + " (" +
                                                  message_number(te_s[e - 1]) +
                                                  " s); give the echoes in acquisition order, TE increasing");
    }
  }
  const uint64_t n = geometry.voxel_count();
  if (echoes.size() != te_s.size() * n) {
    const std::string held = echoes.size() % n == 0 ? std::to_string(echoes.size() / n) + " echo(es)"
                                                    : std::to_string(echoes.size()) + " values";
    throw Error(ErrorCode::InvalidArgument, what + ": " + echoes_name + " holds " + held + " of " +
                                                dims_text(geometry.dims) + " but " + std::to_string(te_s.size()) +
                                                " echo time(s) were given; give one TE per echo");
  }
  if (!mask.empty() && mask.size() != n) {
    throw Error(ErrorCode::InvalidArgument, what + ": the mask holds " + std::to_string(mask.size()) +
                                                " values but the volume " + dims_text(geometry.dims) + " has " +
                                                std::to_string(n));
  }
  validate_mask_not_empty(geometry, mask);
}

}  // namespace tessera::contrast
