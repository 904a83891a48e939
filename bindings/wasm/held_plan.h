// A plan the runtime holds: the request as C++ read it (once), what identifies the volume it was made for, and the plan
// itself. plan() returns a view of it (plan_view) and the driver worker keeps the plan under an id; every later step of
// the run (the run itself, the B0 resampling, the self-check, the memory check) takes the held plan, never a plan or a
// request rebuilt from JavaScript values.
#pragma once

#include <emscripten/val.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/common/geometry.h"
#include "tessera/networks/inversion.h"
#include "tessera/inversion/methods.h"
#include "tessera/pipeline/pipeline.h"
#include "tessera/engine/plan.h"

namespace tessera::js {

using emscripten::val;

class Volume;

// What a request's result depends on besides the volume, as (name, value in words) in a fixed order.
using RequestIdentity = std::vector<std::pair<std::string, std::string>>;

// What a mask identifies a volume by: its voxels inside, their bounding box [lo, hi) and a hash of every value.
struct VolumeKey {
  Geometry geometry;
  uint64_t inside = 0;
  Dims3 lo{0, 0, 0}, hi{0, 0, 0};
  uint64_t hash = 0;
};

// mask holds geometry.voxel_count() values.
VolumeKey volume_key(const Geometry& geometry, std::span<const uint8_t> mask);

// A request as C++ read it from JavaScript, of one of three kinds.
struct ParsedRequest {
  enum class Kind { Network, Method, Pipeline } kind = Kind::Network;
  Geometry geometry;
  InversionRequest network;           // Kind::Network (its geometry is `geometry`)
  MethodRequest method;               // Kind::Method
  uint32_t magnitude_echoes = 0;      // Kind::Method, Kind::Pipeline: a magnitude is given
  PipelineRequest pipeline;           // Kind::Pipeline
  bool mask_given = false;            // Kind::Pipeline
  bool field_units_given = false;     // Kind::Method: fieldUnits 'ppm' states the field is ppm (no plausibility refusal)
  unsigned run_threads = 1;           // the threads the run's own loops and FFTs use (the request's hardwareThreads)
  // The network or method and every parameter of it (defaults filled in): two requests of the same kind run alike when
  // these agree.
  RequestIdentity identity;
};

// Reads a request (network, method or pipeline) with its geometry: the one parse of an API call (counted by
// request_parses()). Throws Error(InvalidArgument) naming what is wrong.
ParsedRequest parse_request(const val& geometry, const val& request);

// The plan of a request on a volume, held by the runtime.
struct HeldPlan {
  ParsedRequest request;
  VolumeKey volume;
  TilePlan tiles;                 // Kind::Network
  MethodPlan method_plan;         // Kind::Method
  PipelinePlan pipeline_plan;     // Kind::Pipeline
  bool feasible() const;
  const std::string& message() const;  // the refusal with advice; empty when feasible
};

using PlanHandle = std::shared_ptr<HeldPlan>;  // Embind's handle type (nothing changes a held plan)

// plan(): the request read once (parse_request) and planned over mask (0/1 values, or undefined: every voxel); field
// (or undefined) widens a network's crop box to its support where the network reads it unmasked (plan_inversion).
// Throws Error(InvalidArgument) for a bad request, a mask or field of another size, an all-zero mask.
PlanHandle plan_request(const val& geometry, const val& mask, const val& request, const val& field);

// The same request planned again with this machine's measured speed ({points, startSeconds}, measureSpeed()'s); the
// request is not read again. mask and field as plan_request's, the mask the one held was made for (else Error
// InvalidArgument); held is a network's plan.
PlanHandle replan_with_speed(const HeldPlan& held, const val& mask, const val& field, const val& speed);

// The view plan() returns (without the id and cost the driver worker adds): the TilePlan's fields with b0Align, warning
// and networks; a method's or a pipeline's plan object.
val plan_view(const HeldPlan& held);

// Refuses (Error InvalidArgument naming the mismatch, or the plan's own refusal as BudgetExceeded) running held on a
// volume it was not made for: an empty mask, another geometry or mask, a plan that is not feasible.
void check_volume(const HeldPlan& held, const Volume& volume);

// Refuses (Error InvalidArgument naming the first difference) a request handed back with held that asks for another
// kind of run, geometry, network, method or parameter than held was made for. The request is read once
// (parse_request); its volume's mask is checked when the run starts (check_volume).
void check_request(const HeldPlan& held, const val& geometry, const val& request);

// held's network run on another grid: the B0-aligned one, or the self-check's box; plan is the run's plan there and
// key its volume's. held is a network's plan.
PlanHandle plan_on_grid(const HeldPlan& held, const Geometry& geometry, const TilePlan& plan, const VolumeKey& key);

}  // namespace tessera::js
