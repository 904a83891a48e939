#include "held_plan.h"

#include <emscripten/bind.h>

#include <algorithm>

#include "conversions.h"
#include "tessera/common/error.h"
#include "tessera/session/request.h"
#include "val_fields.h"
#include "volume.h"

namespace tessera::js {

namespace {

std::string triple_words(const std::array<double, 3>& v) {
  return number_text(v[0]) + "×" + number_text(v[1]) + "×" + number_text(v[2]);
}

// What a registered or custom network computes with: its id, or a spec's grid and normalisation.
std::string network_words(const InversionRequest& r) {
  if (r.model) return std::string(r.model->id);
  const FieldNetwork& n = r.custom;
  return "spec (divisor " + std::to_string(n.cost.divisor) + ", inputMean " + number_text(n.norm.input_mean) + ", inputStd " +
         number_text(n.norm.input_std) + ", outputMean " + number_text(n.norm.output_offset) + ", outputStd " +
         number_text(n.norm.output_scale) + (n.masked_input ? ", maskedInput" : "") + ")";
}

// A method's name and every parameter of it, defaults filled in (worded ones by their choice).
void method_identity(Method method, const MethodParams& params, RequestIdentity& out) {
  const MethodInfo& info = method_info(method);
  out.emplace_back("method", std::string(info.name));
  const std::string prefix = std::string(info.name) + ".";
  for (const OptionSpec& o : method_options()) {
    if (o.name.substr(0, prefix.size()) != prefix) continue;
    const double v = params.get(o.name);
    // A worded parameter holds its choice's index.
    const std::vector<std::string_view> choices = option_choices(o);
    const size_t index = static_cast<size_t>(v);
    out.emplace_back(std::string(o.name), choices.empty() ? number_text(v) : std::string(choices.at(std::min(index, choices.size() - 1))));
  }
}

void network_identity(const InversionRequest& r, RequestIdentity& out) {
  out.emplace_back("network", network_words(r));
  if (is_phase_network(r)) {
    out.emplace_back("te", numbers_text(r.phase.te_s));
    out.emplace_back("b0", number_text(r.phase.b0_tesla));
    out.emplace_back("erodeRadius", std::to_string(r.phase.erode_radius));
    out.emplace_back("phaseSign", number_text(r.phase.phase_sign));
  } else {
    out.emplace_back("b0Align", std::string(b0_align_mode_name(r.b0_align)));
  }
}

const char* kind_words(ParsedRequest::Kind k) {
  switch (k) {
    case ParsedRequest::Kind::Network: return "a network's run (model or spec)";
    case ParsedRequest::Kind::Method: return "a classical method's run (method)";
    case ParsedRequest::Kind::Pipeline: return "a pipeline (pipeline: true)";
  }
  return "";
}

std::string geometry_words(const Geometry& g) {
  return dims_text(g.dims) + " at " + triple_words(g.voxel_mm) + " mm, B0 along [" + number_text(g.b0_dir[0]) + ", " +
         number_text(g.b0_dir[1]) + ", " + number_text(g.b0_dir[2]) + "]";
}

std::string mask_words(const VolumeKey& k) {
  if (k.inside == 0) return "no voxel";
  return std::to_string(k.inside) + " voxels in x " + std::to_string(k.lo[0]) + "–" + std::to_string(k.hi[0] - 1) + ", y " +
         std::to_string(k.lo[1]) + "–" + std::to_string(k.hi[1] - 1) + ", z " + std::to_string(k.lo[2]) + "–" +
         std::to_string(k.hi[2] - 1);
}

void check_geometry(const Geometry& want, const Geometry& g) {
  if (g.dims != want.dims || g.voxel_mm != want.voxel_mm || g.b0_dir != want.b0_dir) {
    throw Error(ErrorCode::InvalidArgument, "the plan was made for a volume of " + geometry_words(want) + "; this one is " +
                                                geometry_words(g) + ": call plan() with this volume");
  }
}

// Refuses a mask (by its key) other than the one the plan was made for, naming both.
void check_mask(const VolumeKey& want, const VolumeKey& got) {
  if (got.hash == want.hash && got.inside == want.inside && got.lo == want.lo && got.hi == want.hi) return;
  const bool alike = got.inside == want.inside && got.lo == want.lo && got.hi == want.hi;
  throw Error(ErrorCode::InvalidArgument, "the plan was made for another mask: " + mask_words(want) + (alike ? " (other voxels)" : "") +
                                              "; this mask holds " + mask_words(got) + ": call plan() with this mask");
}

// mask itself (moved, not copied: the module heap never shrinks), all ones when empty.
std::vector<uint8_t> mask_or_ones(const Geometry& g, std::vector<uint8_t> mask) {
  if (mask.empty()) return std::vector<uint8_t>(g.voxel_count(), 1);
  if (mask.size() != g.voxel_count()) {
    throw Error(ErrorCode::InvalidArgument, "the mask holds " + std::to_string(mask.size()) + " values but the volume " +
                                                dims_text(g.dims) + " has " + std::to_string(g.voxel_count()) +
                                                ": field and mask must have the same dims");
  }
  return mask;
}

// The network plan of r over mask (field: none, or the crop box's support where the network reads it unmasked).
TilePlan network_plan(const InversionRequest& r, std::span<const uint8_t> mask, std::span<const float> field) {
  if (!field.empty() && field.size() != r.geometry.voxel_count()) {
    throw Error(ErrorCode::InvalidArgument, "the field holds " + std::to_string(field.size()) + " values but the volume " +
                                                dims_text(r.geometry.dims) + " has " + std::to_string(r.geometry.voxel_count()) +
                                                ": field and mask must have the same dims");
  }
  return plan_inversion(r, mask, Target::Wasm, field);
}

}  // namespace

VolumeKey volume_key(const Geometry& g, std::span<const uint8_t> mask) {
  VolumeKey k;
  k.geometry = g;
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  Dims3 lo{g.dims[0], g.dims[1], g.dims[2]}, hi{0, 0, 0};
  uint64_t i = 0;
  for (int64_t z = 0; z < g.dims[2]; ++z) {
    for (int64_t y = 0; y < g.dims[1]; ++y) {
      for (int64_t x = 0; x < g.dims[0]; ++x, ++i) {
        const uint8_t m = mask[i] ? 1 : 0;
        h = (h ^ m) * 1099511628211ull;
        if (!m) continue;
        ++k.inside;
        const Dims3 p{x, y, z};
        for (int a = 0; a < 3; ++a) {
          lo[a] = std::min(lo[a], p[a]);
          hi[a] = std::max(hi[a], p[a] + 1);
        }
      }
    }
  }
  k.hash = h;
  if (k.inside) {
    k.lo = lo;
    k.hi = hi;
  }
  return k;
}

ParsedRequest parse_request(const val& geometry, const val& request) {
  ParsedRequest p;
  p.geometry = geometry_from(geometry);
  const val magnitude = request["magnitudeEchoes"];
  p.magnitude_echoes = magnitude.isNumber() && magnitude.as<double>() > 0 ? magnitude.as<uint32_t>() : 0;
  if (is_pipeline_request(request)) {
    p.kind = ParsedRequest::Kind::Pipeline;
    p.pipeline = pipeline_request_from(request, &p.identity);
    p.mask_given = request["maskGiven"].isTrue();
    p.run_threads = p.pipeline.threads;
    if (p.pipeline.method) method_identity(*p.pipeline.method, p.pipeline.method_params, p.identity);
    p.identity.emplace_back("mask", p.mask_given ? "given" : "made from the magnitude");
    p.identity.emplace_back("magnitude", p.magnitude_echoes ? "given" : "none");
  } else if (is_method_request(request)) {
    p.kind = ParsedRequest::Kind::Method;
    p.method = method_request_from(request);
    p.run_threads = p.method.threads;
    const val units = request["fieldUnits"];
    if (!units.isUndefined() && !units.isNull() && !(units.isString() && units.as<std::string>() == "ppm")) {
      throw Error(ErrorCode::InvalidArgument, "fieldUnits must be 'ppm' (the field is ppm, as given): convert a field in Hz or rad/s to ppm first");
    }
    p.field_units_given = units.isString();
    method_identity(p.method.method, p.method.params, p.identity);
    p.identity.emplace_back("magnitude", p.magnitude_echoes ? "given" : "none");
  } else {
    p.network = request_from(request);
    p.network.geometry = p.geometry;
    // The physics loops' FFTs run on the driver worker's thread and the pool's threads it may use.
    const val hardware = request["hardwareThreads"];
    p.run_threads = hardware.isNumber() ? std::max(1u, hardware.as<unsigned>()) : 1u;
    network_identity(p.network, p.identity);
  }
  return p;
}

bool HeldPlan::feasible() const {
  switch (request.kind) {
    case ParsedRequest::Kind::Network: return tiles.feasible;
    case ParsedRequest::Kind::Method: return method_plan.feasible;
    case ParsedRequest::Kind::Pipeline: return pipeline_plan.feasible;
  }
  return false;
}

const std::string& HeldPlan::message() const {
  switch (request.kind) {
    case ParsedRequest::Kind::Method: return method_plan.message;
    case ParsedRequest::Kind::Pipeline: return pipeline_plan.message;
    default: return tiles.message;
  }
}

namespace {

bool given(const val& v) { return !v.isUndefined() && !v.isNull(); }

// The plan of a parsed request over m (mask_or_ones') and field (none, or the volume's).
PlanHandle make_plan(ParsedRequest r, std::span<const uint8_t> m, std::span<const float> field) {
  auto held = std::make_shared<HeldPlan>();
  held->volume = volume_key(r.geometry, m);
  switch (r.kind) {
    case ParsedRequest::Kind::Network: held->tiles = network_plan(r.network, m, field); break;
    case ParsedRequest::Kind::Method:
      held->method_plan = plan_method(r.method.method, r.geometry, r.method.params, r.method.threads, r.magnitude_echoes, Target::Wasm);
      break;
    case ParsedRequest::Kind::Pipeline:
      held->pipeline_plan = plan_pipeline(r.geometry, r.pipeline, r.mask_given, r.magnitude_echoes > 0, Target::Wasm);
      break;
  }
  held->request = std::move(r);
  return held;
}

std::vector<uint8_t> mask_from(const val& mask) {
  return given(mask) ? emscripten::convertJSArrayToNumberVector<uint8_t>(mask) : std::vector<uint8_t>{};
}

// The field where a network's automatic plan reads it to crop (unmasked input), else none.
std::vector<float> field_from(const ParsedRequest& r, const val& field) {
  if (!given(field) || r.kind != ParsedRequest::Kind::Network) return {};
  const InversionRequest& n = r.network;
  if (!(n.crop && n.auto_tile && !n.whole_volume && !request_network(n).masked_input)) return {};
  return emscripten::convertJSArrayToNumberVector<float>(field);
}

}  // namespace

PlanHandle plan_request(const val& geometry, const val& mask, const val& request, const val& field) {
  ParsedRequest r = parse_request(geometry, request);
  const std::vector<float> f = field_from(r, field);
  const std::vector<uint8_t> m = mask_or_ones(r.geometry, mask_from(mask));
  return make_plan(std::move(r), m, f);
}

PlanHandle replan_with_speed(const HeldPlan& held, const val& mask_value, const val& field_value, const val& speed) {
  if (held.request.kind != ParsedRequest::Kind::Network) {
    throw Error(ErrorCode::InvalidArgument, "a measured speed plans a network's run; this plan is " +
                                                std::string(kind_words(held.request.kind)));
  }
  ParsedRequest r = held.request;
  r.network.measured_speed.clear();
  r.network.measured_start_seconds = -1.0;
  read_speed(speed, r.network);
  const std::vector<uint8_t> m = mask_or_ones(r.geometry, mask_from(mask_value));
  check_mask(held.volume, volume_key(r.geometry, m));
  const std::vector<float> f = field_from(r, field_value);
  return make_plan(std::move(r), m, f);
}

val plan_view(const HeldPlan& held) {
  const ParsedRequest& r = held.request;
  if (r.kind == ParsedRequest::Kind::Pipeline) return pipeline_plan_to_val(held.pipeline_plan, r.pipeline.threads);
  if (r.kind == ParsedRequest::Kind::Method) return method_plan_to_val(held.method_plan);
  val p(held.tiles);
  p.set("b0Align", val(held.tiles.b0));
  p.set("warning", inversion_warning(r.network));
  p.set("networks", network_count(r.network));
  return p;
}

void check_volume(const HeldPlan& held, const Volume& volume) {
  validate_mask_not_empty(volume.geo(), volume.mask());  // a run on an all-zero mask would write an all-zero χ
  const VolumeKey& want = held.volume;
  const Geometry& g = volume.geo();
  check_geometry(want.geometry, g);
  check_mask(want, volume_key(g, volume.mask()));
  if (!held.feasible()) throw Error(ErrorCode::BudgetExceeded, held.message().empty() ? "the plan is not feasible" : held.message());
}

void check_request(const HeldPlan& held, const val& geometry, const val& request) {
  const ParsedRequest r = parse_request(geometry, request);
  if (r.kind != held.request.kind) {
    throw Error(ErrorCode::InvalidArgument, std::string("the plan was made for ") + kind_words(held.request.kind) + "; this request is " +
                                                kind_words(r.kind) + ": call plan() with this request");
  }
  check_geometry(held.volume.geometry, r.geometry);
  const auto& want = held.request.identity;
  for (size_t i = 0; i < std::max(want.size(), r.identity.size()); ++i) {
    const bool both = i < want.size() && i < r.identity.size();
    if (both && want[i] == r.identity[i]) continue;
    const std::string name = i < want.size() ? want[i].first : r.identity[i].first;
    const std::string planned = i < want.size() ? want[i].first + " " + want[i].second : "no " + name;
    const std::string given = i < r.identity.size() ? r.identity[i].first + " " + r.identity[i].second : "no " + name;
    throw Error(ErrorCode::InvalidArgument, "the plan was made for " + planned + "; this request gives " + given +
                                                ": call plan() with this request");
  }
}

PlanHandle plan_on_grid(const HeldPlan& held, const Geometry& geometry, const TilePlan& plan, const VolumeKey& key) {
  auto on = std::make_shared<HeldPlan>();
  on->request = held.request;
  on->request.geometry = geometry;
  on->request.network.geometry = geometry;
  on->volume = key;
  on->tiles = plan;
  return on;
}

}  // namespace tessera::js
