// The phase stage's schema options (unwrap, fitOffset, fitOffsetSigma, fitResidualLimit, brainMask.*): the echo fit's
// and the brain mask's validate() check their parameters against them, and the pipeline joins them into its stages'
// options.
#pragma once

#include <span>

#include "tessera/common/schema.h"

namespace tessera {

// The phase stage's options in the order unwrap, fitOffset, fitOffsetSigma, fitResidualLimit, brainMask.erosion,
// brainMask.threshold.
std::span<const OptionSpec> phase_options();

}  // namespace tessera
