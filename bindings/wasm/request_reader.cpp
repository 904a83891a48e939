#include "request_reader.h"

#include <emscripten/bind.h>

#include <algorithm>

#include "conversions.h"
#include "tessera/common/error.h"
#include "tessera/session/request.h"
#include "val_fields.h"
#include "volume.h"

namespace tessera::js {

namespace {

bool given(const val& v) { return !v.isUndefined() && !v.isNull(); }

std::vector<uint8_t> mask_from(const val& mask) {
  return given(mask) ? emscripten::convertJSArrayToNumberVector<uint8_t>(mask) : std::vector<uint8_t>{};
}

// The field where the plan reads it (plan_reads_field), else none: it is not copied in otherwise.
std::vector<float> field_from(const Request& r, const val& field) {
  if (!given(field) || !plan_reads_field(r)) return {};
  return emscripten::convertJSArrayToNumberVector<float>(field);
}

}  // namespace

namespace {

// fieldUnits: 'ppm' states a field is ppm (no plausibility refusal of its range); anything else is refused.
bool field_units_given(const val& request) {
  const val units = request["fieldUnits"];
  if (!units.isUndefined() && !units.isNull() && !(units.isString() && units.as<std::string>() == "ppm")) {
    throw Error(ErrorCode::InvalidArgument, "fieldUnits must be 'ppm' (the field is ppm, as given): convert a field in Hz or rad/s to ppm first");
  }
  return units.isString();
}

}  // namespace

Request parse_request(const val& geometry, const val& request) {
  Request p;
  p.geometry = geometry_from(geometry);
  const val magnitude = request["magnitudeEchoes"];
  p.magnitude_echoes = magnitude.isNumber() && magnitude.as<double>() > 0 ? magnitude.as<uint32_t>() : 0;
  if (is_pipeline_request(request)) {
    PipelineRequest pipeline = pipeline_request_from(request, &p.identity);
    p.mask_given = request["maskGiven"].isTrue();
    p.run_threads = pipeline.threads;
    if (pipeline.method) method_identity(*pipeline.method, pipeline.method_params, p.identity);
    p.identity.emplace_back("mask", p.mask_given ? "given" : "made from the magnitude");
    p.identity.emplace_back("magnitude", p.magnitude_echoes ? "given" : "none");
    p.what = std::move(pipeline);
  } else if (is_method_request(request)) {
    MethodRequest method = method_request_from(request);
    p.run_threads = method.threads;
    p.field_units_given = field_units_given(request);
    method_identity(method.method, method.params, p.identity);
    p.identity.emplace_back("magnitude", p.magnitude_echoes ? "given" : "none");
    p.what = std::move(method);
  } else {
    InversionRequest network = request_from(request);
    network.geometry = p.geometry;
    p.field_units_given = field_units_given(request);
    // The physics loops' FFTs run on the driver worker's thread and the pool's threads it may use.
    const val hardware = request["hardwareThreads"];
    p.run_threads = hardware.isNumber() ? std::max(1u, hardware.as<unsigned>()) : 1u;
    network_identity(network, p.identity);
    p.what = std::move(network);
  }
  return p;
}

PlanHandle plan_request(const val& geometry, const val& mask, const val& request, const val& field) {
  Request r = parse_request(geometry, request);
  const std::vector<float> f = field_from(r, field);
  return make_plan(std::move(r), mask_from(mask), f);
}

PlanHandle replan_with_speed(const Plan& held, const val& mask, const val& field, const val& speed) {
  Request r = held.request;
  if (r.kind() == Request::Kind::Network) {
    r.network().measured_speed.clear();
    r.network().measured_start_seconds = -1.0;
    read_speed(speed, r.network());
  }
  const std::vector<float> f = field_from(r, field);
  return replan(held, std::move(r), mask_from(mask), f);
}

val plan_view(const Plan& held) {
  const Request& r = held.request;
  switch (r.kind()) {
    case Request::Kind::Pipeline: return pipeline_plan_to_val(held.pipeline_plan, r.pipeline().threads);
    case Request::Kind::Method: return method_plan_to_val(held.method_plan);
    case Request::Kind::Network: break;
  }
  val p(held.tiles);
  p.set("b0Align", val(held.tiles.b0));
  p.set("warning", inversion_warning(r.network()));
  p.set("networks", network_count(r.network()));
  return p;
}

void check_request(const Plan& held, const val& geometry, const val& request) {
  check_request(held, parse_request(geometry, request));
}

}  // namespace tessera::js
