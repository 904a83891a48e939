#include "conversions.h"

#include "tessera/verify.h"

#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <cmath>

#include "tessera/calibration.h"
#include "tessera/dipole.h"
#include "tessera/fidelity.h"
#include "tessera/phantom.h"
#include "tessera/request.h"
#include "tessera/verify.h"

namespace tessera::js {

namespace {

double number(const val& obj, const char* key, double fallback) {
  const val v = obj[key];
  if (v.isUndefined() || v.isNull()) return fallback;
  if (!v.isNumber()) throw Error(ErrorCode::InvalidArgument, std::string(key) + " must be a number");
  const double d = v.as<double>();
  if (!std::isfinite(d)) throw Error(ErrorCode::InvalidArgument, std::string(key) + " must be finite");
  return d;
}

uint32_t count(const val& obj, const char* key, double fallback) {
  const double d = number(obj, key, fallback);
  if (d < 0 || d != std::floor(d) || d > 4294967295.0) {
    throw Error(ErrorCode::InvalidArgument, std::string(key) + " must be a whole number ≥ 0 (got " + std::to_string(d) + ")");
  }
  return static_cast<uint32_t>(d);
}

template <class T>
std::array<T, 3> triple(const val& obj, const char* key, std::array<T, 3> fallback) {
  const val v = obj[key];
  if (v.isUndefined() || v.isNull()) return fallback;
  if (v["length"].isUndefined() || v["length"].as<unsigned>() != 3) {
    throw Error(ErrorCode::InvalidArgument, std::string(key) + " must be an array of 3 numbers");
  }
  std::array<T, 3> out{};
  for (unsigned i = 0; i < 3; ++i) {
    const val e = v[i];
    if (!e.isNumber()) throw Error(ErrorCode::InvalidArgument, std::string(key) + " must be an array of 3 numbers");
    out[i] = static_cast<T>(e.as<double>());
  }
  return out;
}

}  // namespace

Geometry geometry_from(const val& v) {
  if (v.isUndefined() || v.isNull()) throw Error(ErrorCode::InvalidArgument, "geometry is required: {dims, voxelMm, b0Dir}");
  Geometry g;
  g.dims = triple<int64_t>(v, "dims", {0, 0, 0});
  g.voxel_mm = triple<double>(v, "voxelMm", {1.0, 1.0, 1.0});
  g.b0_dir = triple<double>(v, "b0Dir", {0.0, 0.0, 1.0});
  validate_geometry(g);
  return g;
}

// A number option of obj under key, or the schema's default for `option`; checked against the schema's range.
double option(const val& obj, const char* key, std::string_view option) {
  const OptionSpec& o = request_option(option);
  const double d = number(obj, key, o.default_value);
  return checked_option(option, d);
}

// tile.stride (0 or absent: the core) and tile.blend ("crop" when absent) into cfg.
void overlap_from(const val& tile, TileConfig& cfg) {
  cfg.stride = static_cast<uint32_t>(option(tile, "stride", "tile.stride"));
  const val b = tile["blend"];
  if (b.isUndefined() || b.isNull()) return;
  if (!b.isString()) throw Error(ErrorCode::InvalidArgument, "tile.blend must be crop, linear, cosine or gaussian");
  cfg.blend = blend_from_name(b.as<std::string>());
}

TileConfig tile_from(const val& v) {
  if (v.isUndefined() || v.isNull()) throw Error(ErrorCode::InvalidArgument, "tile is required: {core, halo}");
  TileConfig cfg{static_cast<uint32_t>(option(v, "core", "tile.core")), static_cast<uint32_t>(option(v, "halo", "tile.halo"))};
  overlap_from(v, cfg);
  return cfg;
}

TileCost cost_from(const val& v) {
  return TileCost{static_cast<uint32_t>(option(v, "divisor", "spec.divisor")),
                  static_cast<uint64_t>(option(v, "bytesPerVoxel", "spec.bytesPerVoxel")),
                  static_cast<uint64_t>(option(v, "fixedBytes", "spec.fixedBytes"))};
}

FieldNetwork custom_network_from(const val& v) {
  FieldNetwork n;
  n.cost = cost_from(v);
  n.norm.input_mean = option(v, "inputMean", "spec.inputMean");
  n.norm.input_std = option(v, "inputStd", "spec.inputStd");
  n.norm.output_scale = option(v, "outputStd", "spec.outputStd");
  n.norm.output_offset = option(v, "outputMean", "spec.outputMean");
  n.masked_input = !v["maskedInput"].isUndefined() && v["maskedInput"].as<bool>();
  return n;
}

InversionRequest request_from(const val& v) {
  InversionRequest r;
  const val model = v["model"];
  if (!model.isUndefined() && !model.isNull()) {
    r.model = &model_spec(model.as<std::string>());
  } else {
    const val spec = v["spec"];
    if (spec.isUndefined() || spec.isNull()) {
      throw Error(ErrorCode::InvalidArgument, "give a registry model id (model) or a custom network spec (spec)");
    }
    r.custom = custom_network_from(spec);
  }
  r.whole_volume = !v["whole"].isUndefined() && v["whole"].as<bool>();
  const val crop = v["crop"];
  if (!crop.isUndefined() && !crop.isNull()) {
    if (!crop.isString() || (crop.as<std::string>() != "auto" && crop.as<std::string>() != "off")) {
      throw Error(ErrorCode::InvalidArgument, "crop must be auto or off");
    }
    r.crop = crop.as<std::string>() == "auto";
  }
  r.crop_margin = static_cast<uint32_t>(option(v, "cropMargin", "cropMargin"));
  r.verify = !v["verify"].isUndefined() && !v["verify"].isNull() && v["verify"].as<bool>();
  const val tile = v["tile"];
  const uint32_t network_halo = r.model ? r.model->default_halo : defaults::kCustomNetworkHalo;
  // tile: {core, halo} | "auto" | {core: "auto", halo?} | absent (the schema's default: "auto").
  const bool absent = tile.isUndefined() || tile.isNull();
  const bool auto_all = absent || (tile.isString() && tile.as<std::string>() == "auto");
  const bool auto_core = !absent && !tile.isString() && tile["core"].isString() && tile["core"].as<std::string>() == "auto";
  if (tile.isString() && !auto_all) throw Error(ErrorCode::InvalidArgument, "tile must be {core, halo} or \"auto\"");
  if (auto_all || auto_core) {
    r.auto_tile = true;
    r.halo_override = auto_core && !tile["halo"].isUndefined() ? static_cast<uint32_t>(option(tile, "halo", "tile.halo")) : 0;
    const val w = v["workers"];
    r.fixed_workers = (w.isUndefined() || w.isNull() || w.isString()) ? 0 : static_cast<uint32_t>(option(v, "workers", "workers"));
    const val t = v["threadsPerWorker"];
    r.fixed_threads =
        (t.isUndefined() || t.isNull() || t.isString()) ? 0 : static_cast<uint32_t>(option(v, "threadsPerWorker", "threadsPerWorker"));
    r.hardware_threads = std::max<uint32_t>(1, count(v, "hardwareThreads", 2));
    const val q = v["quality"];
    if (!q.isUndefined() && !q.isNull()) {
      if (!q.isString()) throw Error(ErrorCode::InvalidArgument, "quality must be faithful, balanced or fast");
      r.quality = quality_from_name(q.as<std::string>());
    }
  } else {
    r.tile.core = static_cast<uint32_t>(option(tile, "core", "tile.core"));
    r.tile.halo = tile["halo"].isUndefined() ? network_halo : static_cast<uint32_t>(option(tile, "halo", "tile.halo"));
    overlap_from(tile, r.tile);
    r.tile_given = true;
  }
  r.workers = v["workers"].isNumber() ? static_cast<uint32_t>(option(v, "workers", "workers")) : 1;
  // How far the network looks: context {within: [...]} (a probe's measured profile) or {radius} (the weights' graph),
  // else spec.receptiveRadius (a custom network's declaration), else the registry's.
  const val spec = v["spec"];
  if (!r.model && !spec["receptiveRadius"].isUndefined() && !spec["receptiveRadius"].isNull()) {
    r.receptive_radius = static_cast<uint32_t>(option(spec, "receptiveRadius", "spec.receptiveRadius"));
  }
  const val context = v["context"];
  if (!context.isUndefined() && !context.isNull()) {
    const val within = context["within"];
    if (!within.isUndefined() && !within.isNull()) {
      if (within["length"].isUndefined()) throw Error(ErrorCode::InvalidArgument, "context.within must be an array (the probe's profile)");
      r.measured_context = measured_context_profile(emscripten::convertJSArrayToNumberVector<double>(within));
    } else if (!context["radius"].isUndefined()) {
      if (!r.receptive_radius) r.receptive_radius = static_cast<uint32_t>(option(context, "radius", "spec.receptiveRadius"));
    } else {
      throw Error(ErrorCode::InvalidArgument, "context must be {within: [...]} (receptiveField's probe) or {radius} (its graph)");
    }
  }
  // Phase networks: te (seconds; a number or one per echo), b0 (tesla), erodeRadius (voxels), phaseSign.
  const val te = v["te"];
  if (te.isNumber()) {
    r.phase.te_s = {number(v, "te", 0.0)};
  } else if (!te.isUndefined() && !te.isNull()) {
    if (te["length"].isUndefined()) throw Error(ErrorCode::InvalidArgument, "te must be a number of seconds or one per echo");
    for (unsigned i = 0; i < te["length"].as<unsigned>(); ++i) {
      if (!te[i].isNumber()) throw Error(ErrorCode::InvalidArgument, "te must hold numbers (seconds)");
      r.phase.te_s.push_back(te[i].as<double>());
    }
  }
  r.phase.b0_tesla = option(v, "b0", "b0");
  r.phase.erode_radius = static_cast<uint32_t>(option(v, "erodeRadius", "erodeRadius"));
  r.phase.phase_sign = option(v, "phaseSign", "phaseSign");
  const val b0_align = v["b0Align"];
  if (!b0_align.isUndefined() && !b0_align.isNull()) {
    if (!b0_align.isString()) throw Error(ErrorCode::InvalidArgument, "b0Align must be auto, on or off");
    r.b0_align = b0_align_mode_from_name(b0_align.as<std::string>());
  }
  // speed: {points: [{edge, threads, seconds}], startSeconds?}: this machine's measured patch times (measureSpeed()).
  const val speed = v["speed"];
  if (!speed.isUndefined() && !speed.isNull()) {
    const val points = speed["points"];
    if (points.isUndefined() || points.isNull() || points["length"].isUndefined()) {
      throw Error(ErrorCode::InvalidArgument, "speed must be {points: [{edge, threads, seconds}], startSeconds} (what measureSpeed() returns)");
    }
    for (unsigned i = 0; i < points["length"].as<unsigned>(); ++i) {
      const val p = points[i];
      if (!p["edge"].isNumber() || !p["threads"].isNumber() || !p["seconds"].isNumber()) {
        throw Error(ErrorCode::InvalidArgument, "speed.points[" + std::to_string(i) + "] must be {edge, threads, seconds} numbers");
      }
      const double edge = p["edge"].as<double>(), threads = p["threads"].as<double>();
      if (!(edge >= 1 && edge <= 4096 && edge == std::floor(edge)) || !(threads >= 1 && threads <= 1024 && threads == std::floor(threads))) {
        throw Error(ErrorCode::InvalidArgument, "speed.points[" + std::to_string(i) + "]: edge (voxels) and threads must be whole numbers >= 1");
      }
      r.measured_speed.push_back(SpeedPoint{static_cast<uint64_t>(edge), static_cast<uint32_t>(threads), p["seconds"].as<double>()});
    }
    const val start = speed["startSeconds"];
    if (start.isNumber()) r.measured_start_seconds = std::max(0.0, start.as<double>());
  }
  return r;
}

bool is_method_request(const val& v) {
  const val m = v["method"];
  return !m.isUndefined() && !m.isNull();
}

MethodRequest method_request_from(const val& v) {
  const val name = v["method"];
  if (!name.isString()) throw Error(ErrorCode::InvalidArgument, "method must be a method's name (" + std::string(request_option("method").choices) + ")");
  const MethodInfo& info = method_info(name.as<std::string>());
  for (const char* network : {"model", "spec"}) {
    if (!v[network].isUndefined() && !v[network].isNull()) {
      throw Error(ErrorCode::InvalidArgument, std::string("give a method or a network (") + network + "), not both");
    }
  }
  MethodRequest r;
  r.method = info.method;
  r.threads = std::max<uint32_t>(1, count(v, "hardwareThreads", 1));
  for (const MethodInfo& other : methods()) {
    const val o = v[std::string(other.name)];
    if (o.isUndefined() || o.isNull()) continue;
    if (other.method != info.method) {
      throw Error(ErrorCode::InvalidArgument, std::string(other.name) + " options were given but the method is " + std::string(info.name) +
                                                  ": give the " + std::string(info.name) + " options (" + std::string(info.name) + ": {...}) or method: '" +
                                                  std::string(other.name) + "'");
    }
    if (o.typeOf().as<std::string>() != "object") {
      throw Error(ErrorCode::InvalidArgument, std::string(info.name) + " options must be an object ({param: value})");
    }
    const val keys = val::global("Object").call<val>("keys", o);
    for (unsigned i = 0; i < keys["length"].as<unsigned>(); ++i) {
      const std::string key = keys[i].as<std::string>();
      const std::string option = std::string(info.name) + "." + key;
      bool known = false;
      std::string list;
      for (const OptionSpec& spec : method_options()) {
        if (spec.name.substr(0, info.name.size() + 1) != std::string(info.name) + ".") continue;
        list += (list.empty() ? "" : ", ") + std::string(spec.name.substr(info.name.size() + 1));
        known = known || spec.name == option;
      }
      if (!known) throw Error(ErrorCode::InvalidArgument, "unknown " + std::string(info.name) + " option '" + key + "' (known: " + list + ")");
      const val value = o[key];
      if (value.isString()) r.params.set_choice(option, value.as<std::string>());
      else if (value.isNumber()) r.params.set(option, value.as<double>());
      else throw Error(ErrorCode::InvalidArgument, option + " must be a number or one of its choices");
    }
  }
  return r;
}

bool is_pipeline_request(const val& v) { return v["pipeline"].isTrue(); }

namespace {

// Reads the schema options named by options (numbers and choices) from v: "a.b" from v.a.b, "a" from v.a.
template <class SetNumber, class SetChoice>
void read_options(const val& v, std::span<const OptionSpec> options, SetNumber set_number, SetChoice set_choice) {
  for (const OptionSpec& o : options) {
    const std::string name(o.name);
    const size_t dot = name.find('.');
    val x = v;
    if (dot != std::string::npos) {
      x = v[name.substr(0, dot)];
      if (x.isUndefined() || x.isNull()) continue;
      x = x[name.substr(dot + 1)];
    } else {
      x = v[name];
    }
    if (x.isUndefined() || x.isNull()) continue;
    if (x.isString()) set_choice(name, x.as<std::string>());
    else if (x.isNumber()) set_number(name, x.as<double>());
    else throw Error(ErrorCode::InvalidArgument, name + " must be a number or one of its choices");
  }
}

}  // namespace

PipelineRequest pipeline_request_from(const val& v) {
  PipelineRequest r;
  const val te = v["te"];
  if (te.isNumber()) {
    r.te_s = {te.as<double>()};
  } else if (!te.isUndefined() && !te.isNull() && !te["length"].isUndefined()) {
    for (unsigned i = 0; i < te["length"].as<unsigned>(); ++i) {
      if (!te[i].isNumber()) throw Error(ErrorCode::InvalidArgument, "te must hold numbers (seconds, one per echo)");
      r.te_s.push_back(te[i].as<double>());
    }
  } else {
    throw Error(ErrorCode::InvalidArgument, "the pipeline needs te: the echo times in seconds, one per echo (e.g. [0.004, 0.008])");
  }
  r.b0_tesla = option(v, "b0", "b0");
  read_options(v, pipeline_options(), [&](const std::string& n, double x) { set_pipeline_option(r, n, x); },
               [&](const std::string& n, const std::string& c) { set_pipeline_choice(r, n, c); });
  if (is_method_request(v)) {
    const MethodRequest m = method_request_from(v);
    r.method = m.method;
    r.method_params = m.params;
  }
  r.threads = std::max<uint32_t>(1, count(v, "hardwareThreads", 1));
  return r;
}

val pipeline_plan_to_val(const Geometry& g, const PipelineRequest& r, bool mask_given, bool magnitude) {
  const PipelinePlan plan = plan_pipeline(g, r, mask_given, magnitude, Target::Wasm);
  val p = val::object();  // not a TilePlan: the pipeline has no tiles
  p.set("feasible", plan.feasible);
  p.set("message", plan.message);
  p.set("pipeline", true);
  val stages = val::array();
  for (const std::string& stage : plan.stages) stages.call<void>("push", stage);
  p.set("stages", stages);
  p.set("inputBytes", static_cast<double>(plan.input_bytes));
  p.set("workspaceBytes", static_cast<double>(plan.workspace_bytes));
  p.set("moduleHeapBytes", static_cast<double>(plan.module_heap_bytes));
  p.set("peakBytes", static_cast<double>(plan.module_heap_bytes));
  p.set("largestVoxels", static_cast<double>(plan.largest_voxels));
  p.set("threads", r.threads);
  p.set("networks", 0);
  p.set("tilesInFlight", 0);
  p.set("warning", std::string());
  return p;
}

val pipeline_result_to_val(const PipelineResult& r) {
  val o = val::object();  // the intermediates, leaving as typed arrays
  o.set("mask", copy_out(std::span<const uint8_t>(r.mask)));
  o.set("unwrappedPhase", copy_out(std::span<const float>(r.unwrapped_rad)));
  o.set("offset", copy_out(std::span<const float>(r.offset_rad)));
  o.set("fieldHz", copy_out(std::span<const float>(r.field_hz)));
  o.set("totalField", copy_out(std::span<const float>(r.total_ppm)));
  o.set("fitResidual", copy_out(std::span<const float>(r.residual_rad)));
  o.set("fitMask", copy_out(std::span<const uint8_t>(r.fit_mask)));
  o.set("localField", copy_out(std::span<const float>(r.local_ppm)));
  o.set("localMask", copy_out(std::span<const uint8_t>(r.local_mask)));
  o.set("chi", r.chi.empty() ? val::null() : copy_out(std::span<const float>(r.chi)));
  return o;
}

val phantom_scan_to_val(const val& geometry, const val& options) {
  const Geometry g = geometry_from(geometry);
  AcquisitionOptions o;
  if (!options.isUndefined() && !options.isNull()) {
    o.seed = static_cast<uint64_t>(number(options, "seed", 1));
    o.b0_tesla = number(options, "b0", o.b0_tesla);
    o.snr = number(options, "snr", 0.0);
    const val te = options["te"];
    if (!te.isUndefined() && !te.isNull()) {
      o.te_s.clear();
      for (unsigned i = 0; i < te["length"].as<unsigned>(); ++i) o.te_s.push_back(te[i].as<double>());
    }
    o.threads = count(options, "threads", 1);
  }
  const PhantomAcquisition a = make_acquisition(g, o);
  val out = val::object();
  out.set("chi", copy_out(std::span<const float>(a.brain_chi)));
  out.set("mask", copy_out(std::span<const uint8_t>(a.brain_mask)));
  out.set("headMask", copy_out(std::span<const uint8_t>(a.head_mask)));
  out.set("phase", copy_out(std::span<const float>(a.phase)));
  out.set("magnitude", copy_out(std::span<const float>(a.magnitude)));
  out.set("totalField", copy_out(std::span<const float>(a.total_field)));
  out.set("localField", copy_out(std::span<const float>(a.local_field)));
  out.set("backgroundField", copy_out(std::span<const float>(a.background_field)));
  out.set("te", val::array(a.te_s.begin(), a.te_s.end()));
  out.set("b0", a.b0_tesla);
  return out;
}

val method_plan_to_val(const Geometry& geometry, const MethodRequest& request, uint32_t magnitude_echoes) {
  const MethodPlan plan = plan_method(request.method, geometry, request.params, request.threads, magnitude_echoes, Target::Wasm);
  val p = val::object();  // not a TilePlan: a method's plan has no tiles
  p.set("feasible", plan.feasible);
  p.set("message", plan.message);
  p.set("method", plan.method);
  p.set("title", plan.title);
  p.set("methodSteps", plan.steps);
  p.set("threads", plan.threads);
  p.set("inputBytes", static_cast<double>(plan.input_bytes));
  p.set("workspaceBytes", static_cast<double>(plan.workspace_bytes));
  p.set("moduleHeapBytes", static_cast<double>(plan.module_heap_bytes));
  p.set("peakBytes", static_cast<double>(plan.peak_bytes));
  p.set("largestVoxels", static_cast<double>(plan.largest_voxels));
  p.set("wholeVolume", true);
  p.set("networks", 0);
  p.set("tilesInFlight", 0);
  p.set("warning", std::string());
  return p;
}

PlanChoice plan_choice_from(const val& p) {
  if (p.isUndefined() || p.isNull() || p.typeOf().as<std::string>() != "object") {
    throw Error(ErrorCode::InvalidArgument, "plan must be the object plan() returned");
  }
  if (!p["feasible"].isTrue()) {
    const val m = p["message"];
    throw Error(ErrorCode::BudgetExceeded, m.isString() && !m.as<std::string>().empty() ? m.as<std::string>()
                                                                                       : std::string("the plan is not feasible"));
  }
  PlanChoice c;
  c.whole_volume = p["wholeVolume"].isTrue();
  const val tile = p["tile"];
  if (tile.isUndefined() || tile.isNull()) throw Error(ErrorCode::InvalidArgument, "plan.tile is missing: pass the object plan() returned");
  c.tile = TileConfig{count(tile, "core", 0), count(tile, "halo", 0)};
  c.tile.stride = count(tile, "stride", 0);
  if (tile["blend"].isString()) c.tile.blend = blend_from_name(tile["blend"].as<std::string>());
  c.workers = count(p, "workers", 1);
  c.threads_per_worker = count(p, "threadsPerWorker", 0);
  c.tiles_in_flight = count(p, "tilesInFlight", 0);
  c.tiles_total = count(p, "tilesTotal", 0);
  c.tiles_active = count(p, "tilesActive", 0);
  const val crop = p["crop"];
  if (!crop.isUndefined() && !crop.isNull()) {
    c.crop.cropped = true;
    c.crop.lo = triple<int64_t>(crop, "lo", {0, 0, 0});
    c.crop.hi = triple<int64_t>(crop, "hi", {0, 0, 0});
    c.crop.patch_lo = triple<int64_t>(crop, "patchLo", {0, 0, 0});
    c.crop.patch_dims = triple<uint64_t>(crop, "patchDims", {0, 0, 0});
    c.crop.margin = count(crop, "margin", 0);
    const val split = crop["split"];
    if (!split.isUndefined() && !split.isNull()) {
      c.crop.split = BoxSplit{count(split, "axis", 0), count(split, "pieces", 1), count(split, "halo", 0)};
    }
  }
  return c;
}

val copy_out(std::span<const float> v) {
  return val(emscripten::typed_memory_view(v.size(), v.data())).call<val>("slice");
}
val copy_out(std::span<const uint8_t> v) {
  return val(emscripten::typed_memory_view(v.size(), v.data())).call<val>("slice");
}

val plan_to_val(const val& geometry, const val& mask, const val& request, const val& field) {
  if (is_pipeline_request(request)) {
    return pipeline_plan_to_val(geometry_from(geometry), pipeline_request_from(request), request["maskGiven"].isTrue(),
                                request["magnitudeEchoes"].isNumber() && request["magnitudeEchoes"].as<double>() > 0);
  }
  if (is_method_request(request)) {
    const MethodRequest m = method_request_from(request);
    const val magnitude = request["magnitudeEchoes"];
    return method_plan_to_val(geometry_from(geometry), m, magnitude.isNumber() ? magnitude.as<uint32_t>() : 0);
  }
  InversionRequest r = request_from(request);
  r.geometry = geometry_from(geometry);
  const uint64_t n = r.geometry.voxel_count();
  std::vector<uint8_t> m;
  if (mask.isUndefined() || mask.isNull()) {
    m.assign(n, 1);
  } else {
    if (mask["length"].isUndefined() || mask["length"].as<double>() != static_cast<double>(n)) {
      throw Error(ErrorCode::InvalidArgument, "the mask does not hold " + std::to_string(n) + " values (" +
                                                  dims_text(r.geometry.dims) + "): field and mask must have the same dims");
    }
    m = emscripten::convertJSArrayToNumberVector<uint8_t>(mask);
  }
  // The field matters to the plan only where a network reads it unmasked (its crop box holds the field's support).
  std::vector<float> f;
  if (!field.isUndefined() && !field.isNull() && r.crop && r.auto_tile && !r.whole_volume && !request_network(r).masked_input) {
    if (field["length"].isUndefined() || field["length"].as<double>() != static_cast<double>(n)) {
      throw Error(ErrorCode::InvalidArgument, "the field does not hold " + std::to_string(n) + " values (" +
                                                  dims_text(r.geometry.dims) + "): field and mask must have the same dims");
    }
    f = emscripten::convertJSArrayToNumberVector<float>(field);
  }
  const TilePlan plan = plan_inversion(r, m, Target::Wasm, f);
  val p(plan);
  p.set("b0Align", val(plan.b0));
  p.set("warning", inversion_warning(r));
  p.set("networks", network_count(r));
  return p;
}

val phantom_to_val(const val& geometry, const val& options) {
  const Geometry g = geometry_from(geometry);
  PhantomOptions o;
  if (!options.isUndefined() && !options.isNull()) {
    o.seed = static_cast<uint64_t>(number(options, "seed", 1));
    o.noise_sigma = number(options, "noise", 0.0);
    o.threads = count(options, "threads", 1);
  }
  const Phantom p = make_phantom(g, o);
  // Hand-written, not a value type: val(x) would first copy the three volumes in the heap, and they leave as typed arrays.
  val out = val::object();
  out.set("chi", copy_out(std::span<const float>(p.chi)));
  out.set("field", copy_out(std::span<const float>(p.field)));
  out.set("mask", copy_out(std::span<const uint8_t>(p.mask)));
  return out;
}

val compare_to_val(const val& geometry, const val& test, const val& reference, const val& mask, const val& options) {
  const Geometry g = geometry_from(geometry);
  const std::vector<float> t = emscripten::convertJSArrayToNumberVector<float>(test);
  const std::vector<float> r = emscripten::convertJSArrayToNumberVector<float>(reference);
  const std::vector<uint8_t> m = emscripten::convertJSArrayToNumberVector<uint8_t>(mask);
  const bool given = !options.isUndefined() && !options.isNull();
  const Dims3 lo = given ? triple<int64_t>(options, "lo", {0, 0, 0}) : Dims3{0, 0, 0};
  const Dims3 hi = given ? triple<int64_t>(options, "hi", {0, 0, 0}) : Dims3{0, 0, 0};
  const bool hfen = given && options["hfen"].isTrue();
  return val(compare_maps(g, t, r, m, lo, hi, hfen));
}

double data_consistency_of(const val& geometry, const val& chi, const val& field, const val& mask) {
  const Geometry g = geometry_from(geometry);
  return data_consistency_residual(g, emscripten::convertJSArrayToNumberVector<float>(chi),
                                   emscripten::convertJSArrayToNumberVector<float>(field),
                                   emscripten::convertJSArrayToNumberVector<uint8_t>(mask));
}

val forward_field_to_val(const val& geometry, const val& chi) {
  const Geometry g = geometry_from(geometry);
  const std::vector<float> c = emscripten::convertJSArrayToNumberVector<float>(chi);
  validate_volume_sizes(g, c.size(), g.voxel_count());
  const std::vector<float> f = forward_field(g, c, 2, 2);
  return copy_out(std::span<const float>(f));
}

// What C++ reports, as Embind value types: 64-bit figures become Numbers (the module is built with WASM_BIGINT=0),
// optional members null, vectors JS arrays (val getters: Embind's register_vector would give a class handle).

namespace {

template <class T, class M>
T object_of(M T::*);
template <class T, class M>
M type_of(M T::*);
template <auto member>
using Object = decltype(object_of(member));
template <auto member>
using Type = decltype(type_of(member));

// Embind wants a setter beside every getter. These types only go from C++ to JavaScript (what JavaScript sends is read
// by the readers above); a field with no member behind it (static text, a derived figure) cannot be written back.
template <class T, class V>
void read_only(T&, V) {
  throw Error(ErrorCode::Internal, "a value Tessera reports cannot be converted back from JavaScript: read it with the request readers");
}

// A 64-bit count or byte figure as a Number (the module is built with WASM_BIGINT=0; exact below 2^53).
template <auto member>
double as_number(const Object<member>& o) {
  return static_cast<double>(o.*member);
}
template <auto member>
void from_number(Object<member>& o, double v) {
  o.*member = static_cast<Type<member>>(v);
}

// Static text (a string_view into the registry or the schema) as a string.
template <auto member>
std::string as_text(const Object<member>& o) {
  return std::string(o.*member);
}

// value_object<T> with the three kinds of field above.
template <class T>
class Fields {
 public:
  explicit Fields(const char* name) : object_(name) {}
  // A member Embind converts as it is: bool, 32-bit integers, double, std::string, a registered value type.
  template <class M>
  Fields& field(const char* name, M T::*member) {
    object_.field(name, member);
    return *this;
  }
  // A field computed from the struct.
  template <class R>
  Fields& field(const char* name, R (*get)(const T&)) {
    object_.field(name, get, &read_only<T, R>);
    return *this;
  }
  template <auto member>
  Fields& number(const char* name) {
    object_.field(name, &as_number<member>, &from_number<member>);
    return *this;
  }
  template <auto member>
  Fields& text(const char* name) {
    object_.field(name, &as_text<member>, &read_only<T, std::string>);
    return *this;
  }

 private:
  emscripten::value_object<T> object_;
};

template <class A, size_t i>
double element(const A& a) {
  return static_cast<double>(a[i]);
}
template <class A, size_t i>
void set_element(A& a, double v) {
  a[i] = static_cast<typename A::value_type>(v);
}
// A std::array of 3 numbers as [x, y, z].
template <class A>
void register_triple(const char* name) {
  emscripten::value_array<A>(name)
      .element(&element<A, 0>, &set_element<A, 0>)
      .element(&element<A, 1>, &set_element<A, 1>)
      .element(&element<A, 2>, &set_element<A, 2>);
}

// An optional member: its object, or null.
template <class T>
val or_null(bool present, const T& x) {
  return present ? val(x) : val::null();
}

// dims [1, channels, x, y, z] of a network call's main input.

}  // namespace

void register_value_types() {
  register_triple<Dims3>("Dims3");
  register_triple<std::array<uint64_t, 3>>("Extent3");
  register_triple<Vec3>("Vec3");

  Fields<Geometry>("Geometry").field("dims", &Geometry::dims).field("voxelMm", &Geometry::voxel_mm).field("b0Dir", &Geometry::b0_dir);

  Fields<CalibrationFit>("CalibrationFit")
      .number<&CalibrationFit::fixed_bytes>("fixedBytes")
      .number<&CalibrationFit::bytes_per_voxel>("bytesPerVoxel")
      .field("fittedFixedBytes", &CalibrationFit::fitted_fixed_bytes)
      .field("fittedBytesPerVoxel", &CalibrationFit::fitted_bytes_per_voxel)
      .field("r2", &CalibrationFit::r2)
      .field("slopeBound", &CalibrationFit::slope_bound)
      .field("slopeMargin", &CalibrationFit::slope_margin)
      .field("pointsFitted", &CalibrationFit::points_fitted)
      .field("slopeMeasured", &CalibrationFit::slope_measured)
      .number<&CalibrationFit::raised_bytes>("raisedBytes")
      .field("note", &CalibrationFit::note);

  Fields<PatchFit>("PatchFit")
      .field("fits", &PatchFit::fits)
      .number<&PatchFit::patch_edge>("patchEdge")
      .number<&PatchFit::bytes>("bytes")
      .number<&PatchFit::largest_edge>("largestEdge")
      .number<&PatchFit::largest_core>("largestCore")
      .field("message", &PatchFit::message);

  Fields<TileConfig>("TileConfig")
      .field("core", &TileConfig::core)
      .field("halo", &TileConfig::halo)
      .field("stride", +[](const TileConfig& c) { return c.step(); })
      .field("blend", +[](const TileConfig& c) { return std::string(blend_name(c.blend)); });

  Fields<Tile>("Tile")
      .number<&Tile::index>("index")
      .field("coreLo", &Tile::core_lo)
      .field("coreHi", &Tile::core_hi)
      .field("patchLo", &Tile::patch_lo)
      .field("skipped", &Tile::skipped);

  Fields<TileGrid>("TileGrid")
      .field("counts", &TileGrid::counts)
      .number<&TileGrid::patch_edge>("patchEdge")
      .field("stride", +[](const TileGrid& g) { return g.config.step(); })
      .field("blend", +[](const TileGrid& g) { return std::string(blend_name(g.config.blend)); })
      .number<&TileGrid::misaligned>("misaligned")  // active tiles off the whole volume's pooling grid
      .field("tiles", +[](const TileGrid& g) { return array_of(g.tiles); });

  Fields<FidelityPrediction>("FidelityPrediction")
      .field("r", &FidelityPrediction::r)
      .field("nrmse", &FidelityPrediction::nrmse)
      .field("deficit", &FidelityPrediction::deficit);

  Fields<ContextProfile>("ContextProfile")
      .field("radius", &ContextProfile::radius)
      .field("measured", &ContextProfile::measured)
      .field("assumed", &ContextProfile::assumed)
      .field("radius90", +[](const ContextProfile& c) { return context_radius_holding(c, 0.90); })
      .field("radius99", +[](const ContextProfile& c) { return context_radius_holding(c, 0.99); });

  Fields<VerifyRegion>("VerifyRegion")
      .field("possible", &VerifyRegion::possible)
      .field("message", &VerifyRegion::message)
      .field("lo", &VerifyRegion::lo)
      .field("hi", &VerifyRegion::hi)
      .field("compareLo", &VerifyRegion::compare_lo)
      .field("compareHi", &VerifyRegion::compare_hi)
      .field("margin", &VerifyRegion::margin)
      .field("plan", +[](const VerifyRegion& v) { return or_null(v.possible, v.plan); });

  Fields<B0Plan>("B0Plan")
      .field("tiltDegrees", &B0Plan::tilt_degrees)
      .field("assumesZ", &B0Plan::assumes_z)
      .field("resampled", &B0Plan::resampled)
      .field("mode", +[](const B0Plan& b) { return std::string(b0_align_mode_name(b.mode)); })
      .field("thresholdDegrees", &B0Plan::threshold_degrees)
      .field("warnDegrees", &B0Plan::warn_degrees)
      .field("alignedDims", +[](const B0Plan& b) { return or_null(b.resampled, b.aligned_dims); })
      .number<&B0Plan::extra_module_bytes>("extraModuleBytes")
      .field("summary", &B0Plan::summary)
      .field("warning", &B0Plan::warning);

  Fields<BoxSplit>("BoxSplit")
      .field("axis", &BoxSplit::axis)
      .field("pieces", &BoxSplit::pieces)
      .field("halo", &BoxSplit::halo);

  Fields<CropBox>("CropBox")
      .field("lo", &CropBox::lo)
      .field("hi", &CropBox::hi)
      .field("patchLo", &CropBox::patch_lo)
      .field("patchDims", &CropBox::patch_dims)
      .field("margin", &CropBox::margin)
      .field("split", &CropBox::split);

  Fields<TilePlan>("TilePlan")
      .field("feasible", &TilePlan::feasible)
      .field("tile", &TilePlan::tile)
      .field("workers", &TilePlan::workers)
      .field("threadsPerWorker", &TilePlan::threads_per_worker)
      .field("estimatedSeconds", &TilePlan::estimated_seconds)
      .field("estimateSource", &TilePlan::estimate_source)
      .field("explanation", &TilePlan::explanation)
      .field("fidelityWarning", &TilePlan::fidelity_warning)
      .field("message", &TilePlan::message)
      .field("wholeVolume", &TilePlan::whole_volume)
      .field("crop", +[](const TilePlan& p) { return or_null(p.crop.cropped, p.crop); })
      .number<&TilePlan::patch_edge>("patchEdge")
      .field("patchDims", &TilePlan::patch_dims)
      .number<&TilePlan::bytes_per_tile>("bytesPerTile")
      .field("tilesInFlight", &TilePlan::tiles_in_flight)
      .number<&TilePlan::tiles_total>("tilesTotal")
      .number<&TilePlan::tiles_active>("tilesActive")
      .number<&TilePlan::tiles_skipped>("tilesSkipped")
      .number<&TilePlan::activation_bytes>("activationBytes")
      .number<&TilePlan::module_heap_bytes>("moduleHeapBytes")
      .number<&TilePlan::peak_bytes>("peakBytes")
      .field("grid", &TilePlan::grid)
      // Optional members are null when absent (the API's documented shape), hence val getters.
      .field("verify", +[](const TilePlan& p) { return p.verify ? val(*p.verify) : val::null(); })
      .field("context", +[](const TilePlan& p) { return or_null(!p.context.within.empty(), p.context); })
      .field("predictedFidelity", +[](const TilePlan& p) { return or_null(p.fidelity_known, p.fidelity); });

  Fields<RunReport>("RunReport")
      .number<&RunReport::tiles_total>("tilesTotal")
      .number<&RunReport::tiles_run>("tilesRun")
      .number<&RunReport::tiles_skipped>("tilesSkipped")
      .field("concurrency", &RunReport::concurrency)
      .field("maxInFlight", &RunReport::max_in_flight)
      .number<&RunReport::patch_edge>("patchEdge")
      .number<&RunReport::bytes_per_tile>("bytesPerTile")
      .field("driverSeconds", &RunReport::wall_seconds)
      .field("tileSeconds", +[](const RunReport& r) { return array_of(r.tile_seconds); });

  Fields<Agreement>("Agreement")
      .number<&Agreement::voxels>("voxels")
      .field("r", &Agreement::r)
      .field("nrmse", &Agreement::nrmse)
      .field("maxAbs", &Agreement::max_abs)
      .field("hfen", &Agreement::hfen);

  Fields<OptionSpec>("OptionSpec")
      .text<&OptionSpec::name>("name")
      .text<&OptionSpec::unit>("unit")
      .field("default", +[](const OptionSpec& o) { return o.default_text.empty() ? val(o.default_value) : val(std::string(o.default_text)); })
      .field("defaultValue", &OptionSpec::default_value)
      .field("min", &OptionSpec::min)
      .field("max", &OptionSpec::max)
      .field("minExclusive", &OptionSpec::min_exclusive)
      .field("integer", &OptionSpec::integer)
      .text<&OptionSpec::help>("help")
      .field("choices", +[](const OptionSpec& o) {
        val out = val::array();  // "faithful|balanced|fast" -> ["faithful", "balanced", "fast"]; "" -> []
        for (std::string_view rest = o.choices; !rest.empty();) {
          const size_t bar = rest.find('|');
          out.call<void>("push", std::string(rest.substr(0, bar)));
          rest = bar == std::string_view::npos ? std::string_view{} : rest.substr(bar + 1);
        }
        return out;
      });

  // A further named input of a patch (a phase network's mask, TE, B0 ...): a view on the run's buffer, valid until the
  // patch is answered.
  Fields<NamedInput>("NamedInput")
      .field("role", &NamedInput::role)
      .field("dims", +[](const NamedInput& e) {
        val out = val::array();
        for (uint64_t k : e.dims) out.call<void>("push", static_cast<double>(k));
        return out;
      })
      .field("input", +[](const NamedInput& e) { return val(emscripten::typed_memory_view(e.data.size(), e.data.data())); });

  Fields<Normalization>("Normalization")
      .field("inputMean", &Normalization::input_mean)
      .field("inputStd", &Normalization::input_std)
      .field("outputStd", &Normalization::output_scale)
      .field("outputMean", &Normalization::output_offset);

  Fields<WeightsFile>("WeightsFile")
      .text<&WeightsFile::file>("file")
      .field("url", +[](const WeightsFile& w) {
        return w.bundled.empty() ? std::string(kOfficialWeightsBase) + std::string(w.file) : std::string(w.bundled);
      })
      .field("bundled", +[](const WeightsFile& w) { return !w.bundled.empty(); })
      .number<&WeightsFile::bytes>("bytes")
      .text<&WeightsFile::sha256>("sha256");

  Fields<ModelSpec>("ModelSpec")
      .text<&ModelSpec::id>("id")
      .text<&ModelSpec::name>("name")
      .field("kind", +[](const ModelSpec& m) { return std::string(model_kind_name(m.kind)); })
      .field("tileable", +[](const ModelSpec& m) { return m.tileable(); })
      .field("divisor", &ModelSpec::divisor)
      .number<&ModelSpec::bytes_per_voxel>("bytesPerVoxel")
      .number<&ModelSpec::fixed_bytes>("fixedBytes")
      .field("maskedInput", &ModelSpec::masked_input)
      .field("costProvisional", &ModelSpec::cost_provisional)
      .text<&ModelSpec::cost_source>("costSource")
      .field("inputChannels", &ModelSpec::input_channels)
      .field("outputChannels", &ModelSpec::output_channels)
      .text<&ModelSpec::input>("input")
      .text<&ModelSpec::output>("output")
      .text<&ModelSpec::quantity>("quantity")
      .field("inputs", +[](const ModelSpec& m) {
        val out = val::array();
        for (InputRole role : m.inputs) out.call<void>("push", std::string(input_role_name(role)));
        return out;
      })
      .field("cropMargin", &ModelSpec::crop_margin)
      .field("normalization", &ModelSpec::norm)
      .field("pad", +[](const ModelSpec& m) { return std::string(m.pad == PadRule::SmallerHalfLow ? "smaller-half-low" : "larger-half-low"); })
      .field("weights", +[](const ModelSpec& m) {
        val out = val::array();  // the files recorded (unused entries have no file)
        for (const WeightsFile& w : m.weights) {
          if (!w.file.empty()) out.call<void>("push", val(w));
        }
        return out;
      })
      .text<&ModelSpec::licence>("licence")
      .text<&ModelSpec::citation>("citation")
      .text<&ModelSpec::notes>("notes")
      .field("defaultHalo", &ModelSpec::default_halo)
      .field("receptiveRadius", &ModelSpec::receptive_radius)
      .text<&ModelSpec::receptive_source>("receptiveSource")
      .field("measuredContext", +[](const ModelSpec& m) { return m.measured_context.empty() ? val::null() : array_of(m.measured_context); });
}

val limits_to_val() {
  val o = val::object();  // named constants, not a struct
  o.set("tileActivationBudget", static_cast<double>(WASM_TILE_ACTIVATION_BUDGET));
  o.set("maxPatchActivationBytes", static_cast<double>(WASM_MAX_PATCH_ACTIVATION_BYTES));
  o.set("heapCeilingBytes", static_cast<double>(WASM_HEAP_CEILING_BYTES));
  o.set("workerHeapGuardBytes", static_cast<double>(WASM_WORKER_HEAP_GUARD_BYTES));
  o.set("computeHeapLimitBytes", static_cast<double>(WASM_COMPUTE_HEAP_LIMIT_BYTES));
  return o;
}

val verification_to_val(const Agreement& a, const VerifyRegion& region) {
  val o(a);
  o.delete_(std::string("hfen"));  // the self-check computes none
  o.set("compareLo", val(region.compare_lo));
  o.set("compareHi", val(region.compare_hi));
  o.set("margin", region.margin);
  return o;
}

namespace {

std::vector<HeapPoint> heap_points_from(const val& points) {
  if (points.isUndefined() || points.isNull() || points["length"].isUndefined()) {
    throw Error(ErrorCode::InvalidArgument, "calibration points must be an array of {voxels, heapBytes, afterSessionBytes}");
  }
  std::vector<HeapPoint> out;
  const unsigned n = points["length"].as<unsigned>();
  for (unsigned i = 0; i < n; ++i) {
    const val p = points[i];
    const double voxels = number(p, "voxels", -1), heap = number(p, "heapBytes", -1), session = number(p, "afterSessionBytes", 0);
    if (voxels < 0 || heap < 0 || session < 0) {
      throw Error(ErrorCode::InvalidArgument, "calibration point " + std::to_string(i) + " needs voxels and heapBytes (numbers ≥ 0)");
    }
    out.push_back(HeapPoint{static_cast<uint64_t>(voxels), static_cast<uint64_t>(heap), static_cast<uint64_t>(session)});
  }
  return out;
}

}  // namespace

val calibration_edges_to_val(double divisor, double count) {
  if (!(divisor >= 0 && divisor <= 4096) || !(count >= 1 && count <= 64)) {
    throw Error(ErrorCode::InvalidArgument, "calibration edges need a divisor in [0, 4096] and a count in [1, 64]");
  }
  val out = val::array();
  for (uint64_t e : calibration_edges(static_cast<uint32_t>(divisor), static_cast<uint32_t>(count))) {
    out.call<void>("push", static_cast<double>(e));
  }
  return out;
}

bool calibration_slope_of(const val& points) {
  const std::vector<HeapPoint> ps = heap_points_from(points);
  return calibration_slope_measured(ps);
}

val calibration_fit_to_val(const val& points) {
  const std::vector<HeapPoint> ps = heap_points_from(points);
  return val(fit_calibration(ps));
}

val memory_check_to_val(const val& request, const val& plan, double worker_heap_bytes, double module_heap_bytes,
                        double module_heap_before_bytes, const std::string& network) {
  const InversionRequest r = request_from(request);
  MeasuredMemory m;
  m.cost = r.model ? r.model->tile_cost() : r.custom.cost;
  m.worker_heap_bytes = static_cast<uint64_t>(std::max(0.0, worker_heap_bytes));
  m.module_heap_bytes = static_cast<uint64_t>(std::max(0.0, module_heap_bytes));
  m.module_heap_before_bytes = static_cast<uint64_t>(std::max(0.0, module_heap_before_bytes));
  m.planned_bytes_per_tile = static_cast<uint64_t>(number(plan, "bytesPerTile", 0));
  m.planned_module_heap_bytes = static_cast<uint64_t>(number(plan, "moduleHeapBytes", 0));
  const std::array<uint64_t, 3> dims = triple<uint64_t>(plan, "patchDims", {0, 0, 0});
  m.patch_voxels = saturating_mul(saturating_mul(dims[0], dims[1]), dims[2]);
  const MemoryVerdict v = check_measured_memory(m, network, r.model == nullptr);
  val o = val::object();
  o.set("workerHeapVsPlan", v.worker_heap_vs_plan);
  o.set("moduleHeapVsPlan", v.module_heap_vs_plan);
  o.set("over", v.over);
  o.set("measuredBytesPerVoxel", static_cast<double>(v.measured_bytes_per_voxel));
  o.set("warning", v.over ? val(v.warning) : val::null());
  return o;
}

val b0_restore_to_val(const B0Alignment& alignment, std::span<const uint8_t> mask, const val& aligned_chi) {
  const std::vector<float> chi = emscripten::convertJSArrayToNumberVector<float>(aligned_chi);
  const std::vector<float> back = from_aligned_grid(alignment, chi, mask);
  return copy_out(std::span<const float>(back));
}

val b0_resample_to_val(const val& geometry, const val& field, const val& mask, const val& options) {
  const Geometry g = geometry_from(geometry);
  const std::vector<float> f = emscripten::convertJSArrayToNumberVector<float>(field);
  const std::vector<uint8_t> m = emscripten::convertJSArrayToNumberVector<uint8_t>(mask);
  validate_volume_sizes(g, f.size(), m.size());
  validate_mask_not_empty(g, m);
  const bool given = !options.isUndefined() && !options.isNull();
  Interpolation interpolation = Interpolation::Spline;
  if (given && !options["interpolation"].isUndefined()) {
    if (!options["interpolation"].isString()) throw Error(ErrorCode::InvalidArgument, "interpolation must be spline, cubic or linear");
    interpolation = interpolation_from_name(options["interpolation"].as<std::string>());
  }
  const bool masked = !given || options["masked"].isUndefined() || options["masked"].isTrue();
  const B0Alignment a = b0_alignment(g, m, interpolation);
  const std::vector<float> aligned = to_aligned_grid(a, f, masked ? std::span<const uint8_t>(m) : std::span<const uint8_t>{});
  const std::vector<uint8_t> aligned_m = aligned_mask(a, m);
  const std::vector<float> back = from_aligned_grid(a, aligned, m);
  val out = val::object();
  out.set("tiltDegrees", a.tilt_degrees);
  val rot = val::array();
  for (double x : a.rotation) rot.call<void>("push", x);
  out.set("rotation", rot);
  val geo = val::object();
  geo.set("dims", val(a.aligned.dims));
  val vox = val::array(), b0 = val::array();
  for (int i = 0; i < 3; ++i) {
    vox.call<void>("push", a.aligned.voxel_mm[i]);
    b0.call<void>("push", a.aligned.b0_dir[i]);
  }
  geo.set("voxelMm", vox);
  geo.set("b0Dir", b0);
  out.set("geometry", geo);
  out.set("field", copy_out(std::span<const float>(aligned)));
  out.set("mask", copy_out(std::span<const uint8_t>(aligned_m)));
  out.set("back", copy_out(std::span<const float>(back)));
  return out;
}

}  // namespace tessera::js
