// The request's schema: every option a run takes — its unit, default and range — defined once, in the layer that reads
// it (tessera/common/schema.h), and joined here. The C++ core reads and checks requests against it; JavaScript (the
// API, the CLI, the page) asks for it (schema()) to show defaults and ranges instead of keeping its own copies.
#pragma once

#include <cstdint>
#include <span>
#include <string>
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

// The request surface: which kinds of request take each option, and the keys that are no option. JavaScript's key
// lists and request types are generated from these (scripts/request-surface.js).

// The kinds of request, as bits: a network's run (invert() or plan() with model or spec), a classical method's (with
// method), a pipeline's (pipeline(), or plan() with pipeline: true), swi()'s and r2star()'s (no plan()).
enum RequestKindBits : uint8_t { kNetworkRequest = 1, kMethodRequest = 2, kPipelineRequest = 4, kSwiRequest = 8, kR2starRequest = 16 };

// The kinds' names as JavaScript spells them, in bit order: "network", "method", "pipeline", "swi", "r2star".
std::span<const std::string_view> request_kind_names();

// The kinds of request that take the option (its table's: the run's and the phase networks' options a network's; the
// acquisition's and a custom network's spec a network's and a pipeline's, te also swi()'s and r2star()'s; the method
// and its parameters a method's and a pipeline's; the stages' and the optional outputs' a pipeline's, unwrap,
// brainMask.* and swi.* also swi()'s, r2star.* also r2star()'s).
// option is one of request_options()' (else Error Internal).
uint8_t request_option_kinds(const OptionSpec& option);

// The kinds of request that cannot go without the option (method: a method's run; te: swi()'s and r2star()'s); 0 for
// most.
uint8_t request_option_required(const OptionSpec& option);

// The option's TypeScript type: its choices as words ('a' | 'b'), boolean for an on/off option, else number; a few
// options take more (te: one or several echo times; also: a word or a list; tile: {core, halo, ...} as the group
// interface TileOptions, or 'auto').
std::string request_option_type(const OptionSpec& option);

// Whether a request key must be given.
enum class KeyPresence {
  Optional,
  RequiredToRun,  // a run needs it; plan() of the same request does not (the weights)
  PlanOnly,       // only in plan()'s request, and required there (pipeline: true)
};

// A request key that is no schema option: a volume, the network's identity and weights, a plan handed back, a run
// control. name: as JavaScript spells it; a dotted name ("spec.maskedInput") is a field of an option group.
struct RequestKey {
  std::string_view name;
  uint8_t kinds;               // RequestKindBits of the requests that take it
  std::string_view type;       // TypeScript
  std::string_view doc;        // one line
  KeyPresence presence = KeyPresence::Optional;
  std::string_view plan_type;  // its type in plan()'s request when that differs; empty: type
};

// Every request key that is no schema option; a name appears once per kind.
std::span<const RequestKey> request_keys();

}  // namespace tessera
