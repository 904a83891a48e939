// The request's schema: every option a run takes — its unit, default and range — defined once, in the layer that reads
// it (tessera/common/schema.h), and joined here. The C++ core reads and checks requests against it; JavaScript (the
// API, the CLI, the page) asks for it (schema()) to show defaults and ranges instead of keeping its own copies.
#pragma once

#include <span>
#include <string_view>

#include "tessera/common/schema.h"

namespace tessera {

// Every option, in a stable order: the run's, the acquisition's, the phase networks', the method and its parameters,
// the pipeline's stages.
std::span<const OptionSpec> request_options();

// The option with this name.
// name is one of request_options()' names (else Error Internal).
const OptionSpec& request_option(std::string_view name);

// Checks value against the option's range (and wholeness); returns it.
// Throws Error(InvalidArgument) naming the option, its unit and range, e.g. "b0 must be in (0, 30] T, got 300".
double checked_option(std::string_view name, double value);

}  // namespace tessera
