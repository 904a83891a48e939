// The background removals' schema options (vsharp.*, pdf.*, lbv.*, ismv.*, sharp.*, resharp.*): each method's
// validate() checks its parameters against them, and the pipeline joins them into its stages' options.
#pragma once

#include <span>

#include "tessera/common/schema.h"

namespace tessera {

// The options of every background removal, grouped by method in the order V-SHARP, PDF, LBV, iSMV, SHARP, RESHARP.
std::span<const OptionSpec> background_options();

}  // namespace tessera
