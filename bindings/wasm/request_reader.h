// A request as C++ reads it from JavaScript (tessera/session/session.h's Request), and the plan calls that take
// JavaScript values: each reads, then calls the session layer, which plans and checks.
#pragma once

#include <emscripten/val.h>

#include "tessera/session/session.h"

namespace tessera::js {

using emscripten::val;

class Volume;

// Reads a request (network, method or pipeline) with its geometry: the one parse of an API call (counted by
// request_parses()). Throws Error(InvalidArgument) naming what is wrong.
Request parse_request(const val& geometry, const val& request);

// plan(): the request read once (parse_request) and planned over mask (0/1 values, or undefined: every voxel) and field
// (or undefined: read only where the plan reads it).
PlanHandle plan_request(const val& geometry, const val& mask, const val& request, const val& field);

// The same request planned again with this machine's measured speed ({points, startSeconds}, measureSpeed()'s); the
// request is not read again.
PlanHandle replan_with_speed(const Plan& held, const val& mask, const val& field, const val& speed);

// The view plan() returns (without the id and cost the driver worker adds): the TilePlan's fields with b0Align, warning
// and networks; a method's or a pipeline's plan object.
val plan_view(const Plan& held);

// check_request of the request JavaScript handed back with held.
void check_request(const Plan& held, const val& geometry, const val& request);

}  // namespace tessera::js
