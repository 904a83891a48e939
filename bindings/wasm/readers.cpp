// Readers of what JavaScript sends: geometry and requests (network, method, pipeline), each request counted once.
#include "conversions.h"

#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <cmath>

#include "tessera/engine/calibration.h"
#include "tessera/common/dipole.h"
#include "tessera/quality/fidelity.h"
#include "tessera/sim/phantom.h"
#include "tessera/session/request.h"
#include "tessera/contrast/r2star.h"
#include "tessera/pipeline/swi_from_phase.h"
#include "tessera/engine/verify.h"
#include "val_fields.h"

namespace tessera::js {

namespace {

uint64_t parses = 0;  // requests read (request_parses)

}  // namespace

double request_parses() { return static_cast<double>(parses); }

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

void read_speed(const val& speed, InversionRequest& r) {
  // speed: {points: [{edge, threads, seconds}], startSeconds?}: this machine's measured patch times (measureSpeed()).
  if (speed.isUndefined() || speed.isNull()) return;
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

InversionRequest request_from(const val& v) {
  ++parses;
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
  r.hardware_threads = std::max<uint32_t>(1, count(v, "hardwareThreads", 2));
  const val t = v["threadsPerWorker"];
  r.fixed_threads = (t.isUndefined() || t.isNull() || t.isString()) ? 0 : static_cast<uint32_t>(option(v, "threadsPerWorker", "threadsPerWorker"));
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
  r.workers = v["workers"].isNumber() ? static_cast<uint32_t>(option(v, "workers", "workers")) : defaults::workers_for(r.hardware_threads);
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
  read_speed(v["speed"], r);
  // graphMacsPerVoxel: the weights' graph's multiply-accumulates per input voxel (graph-cost.js), for the estimate.
  const val macs = v["graphMacsPerVoxel"];
  if (!macs.isUndefined() && !macs.isNull()) {
    if (!macs.isNumber() || !std::isfinite(macs.as<double>()) || macs.as<double>() < 0) {
      throw Error(ErrorCode::InvalidArgument, "graphMacsPerVoxel must be a finite number >= 0 (the graph's multiply-accumulates per voxel)");
    }
    r.graph_macs_per_voxel = macs.as<double>();
  }
  return r;
}

bool is_method_request(const val& v) {
  const val m = v["method"];
  return !m.isUndefined() && !m.isNull();
}

namespace {

MethodRequest read_method_request(const val& v) {
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

}  // namespace

MethodRequest method_request_from(const val& v) {
  ++parses;
  return read_method_request(v);
}

bool is_pipeline_request(const val& v) { return v["pipeline"].isTrue(); }

namespace {

// Reads the schema options named by options (numbers and choices) from v: "a.b" from v.a.b, "a" from v.a. identity, when
// given, receives every option's value in words (its default when absent).
template <class SetNumber, class SetChoice>
void read_options(const val& v, std::span<const OptionSpec> options, SetNumber set_number, SetChoice set_choice,
                  RequestIdentity* identity) {
  for (const OptionSpec& o : options) {
    const std::string name(o.name);
    const size_t dot = name.find('.');
    val x = v;
    if (dot != std::string::npos) {
      x = v[name.substr(0, dot)];
      if (!x.isUndefined() && !x.isNull()) x = x[name.substr(dot + 1)];
    } else {
      x = v[name];
    }
    if (x.isUndefined() || x.isNull()) {
      if (identity) identity->emplace_back(name, o.default_text.empty() ? number_text(o.default_value) : std::string(o.default_text));
      continue;
    }
    if (x.isString()) set_choice(name, x.as<std::string>());
    else if (x.isNumber()) set_number(name, x.as<double>());
    else throw Error(ErrorCode::InvalidArgument, name + " must be a number or one of its choices");
    if (identity) identity->emplace_back(name, x.isString() ? x.as<std::string>() : number_text(x.as<double>()));
  }
}

}  // namespace

PipelineRequest pipeline_request_from(const val& v, RequestIdentity* identity) {
  ++parses;
  return pipeline_request_read(v, identity);
}

PipelineRequest pipeline_request_read(const val& v, RequestIdentity* identity) {
  PipelineRequest r;
  // totalFieldUnits ('hz' | 'rad/s' | 'ppm'): the volume holds a total field map in these units, not per-echo phase.
  const val units = v["totalFieldUnits"];
  if (!units.isUndefined() && !units.isNull()) {
    if (!units.isString()) throw Error(ErrorCode::InvalidArgument, "totalFieldUnits must be 'hz', 'rad/s' or 'ppm'");
    r.total_field_units = total_field_units_from_name(units.as<std::string>());
  }
  const val te = v["te"];
  // deltaTE (s): the volume holds one phase difference of two echoes ΔTE apart (a Siemens field map), not per-echo phase.
  const val delta_te = v["deltaTE"];
  if (!delta_te.isUndefined() && !delta_te.isNull()) {
    if (!delta_te.isNumber()) throw Error(ErrorCode::InvalidArgument, "deltaTE must be a number: TE2 − TE1 of the phase difference, in seconds");
    if (!te.isUndefined() && !te.isNull()) {
      throw Error(ErrorCode::InvalidArgument, "te belongs to a pipeline from per-echo phase: a phase difference takes deltaTE (TE2 − TE1, seconds) alone");
    }
    r.phase_difference = true;
    r.te_s = {delta_te.as<double>()};
  } else if (r.total_field_units != TotalFieldUnits::None) {
    if (!te.isUndefined() && !te.isNull()) {
      throw Error(ErrorCode::InvalidArgument, "te belongs to a pipeline from phase: a total field map needs no echo times (leave te out)");
    }
  } else if (te.isNumber()) {
    r.te_s = {te.as<double>()};
  } else if (!te.isUndefined() && !te.isNull() && !te["length"].isUndefined()) {
    for (unsigned i = 0; i < te["length"].as<unsigned>(); ++i) {
      if (!te[i].isNumber()) throw Error(ErrorCode::InvalidArgument, "te must hold numbers (seconds, one per echo)");
      r.te_s.push_back(te[i].as<double>());
    }
  } else {
    throw Error(ErrorCode::InvalidArgument, "the pipeline needs te: the echo times in seconds, one per echo (e.g. [0.004, 0.008]), or a total field map (totalField with totalFieldUnits)");
  }
  r.b0_tesla = option(v, "b0", "b0");
  if (identity) {
    if (r.total_field_units != TotalFieldUnits::None) identity->emplace_back("totalFieldUnits", std::string(total_field_units_name(r.total_field_units)));
    else if (r.phase_difference) identity->emplace_back("deltaTE", numbers_text(r.te_s));
    else identity->emplace_back("te", numbers_text(r.te_s));
    identity->emplace_back("b0", number_text(r.b0_tesla));
  }
  read_options(v, pipeline_options(), [&](const std::string& n, double x) { set_pipeline_option(r, n, x); },
               [&](const std::string& n, const std::string& c) { set_pipeline_choice(r, n, c); }, identity);
  // also: 'swi' | 'r2star', or a list of them: the optional outputs; their options count in the identity when asked for.
  const val also = v["also"];
  if (also.isString()) {
    set_pipeline_also(r, also.as<std::string>());
  } else if (!also.isUndefined() && !also.isNull()) {
    if (!val::global("Array").call<bool>("isArray", also)) throw Error(ErrorCode::InvalidArgument, "also must be 'swi', 'r2star' or a list of them");
    for (unsigned i = 0; i < also["length"].as<unsigned>(); ++i) {
      if (!also[i].isString()) throw Error(ErrorCode::InvalidArgument, "also must be 'swi', 'r2star' or a list of them");
      set_pipeline_also(r, also[i].as<std::string>());
    }
  }
  if (identity) identity->emplace_back("also", std::string(r.also_swi ? "swi" : "") + (r.also_swi && r.also_r2star ? "," : "") + (r.also_r2star ? "r2star" : ""));
  read_options(v, swi_options(), [&](const std::string& n, double x) { set_pipeline_option(r, n, x); },
               [&](const std::string& n, const std::string& c) { set_pipeline_choice(r, n, c); }, r.also_swi ? identity : nullptr);
  read_options(v, r2star_options(), [&](const std::string& n, double x) { set_pipeline_option(r, n, x); },
               [&](const std::string& n, const std::string& c) { set_pipeline_choice(r, n, c); }, r.also_r2star ? identity : nullptr);
  if (is_method_request(v)) {
    const MethodRequest m = read_method_request(v);
    r.method = m.method;
    r.method_params = m.params;
  } else if ((v["model"].isUndefined() || v["model"].isNull()) && (v["spec"].isUndefined() || v["spec"].isNull())) {
    r.method = kDefaultPipelineMethod;  // neither a method nor a network: the default inversion
  }
  r.threads = std::max<uint32_t>(1, count(v, "hardwareThreads", 1));
  return r;
}

namespace {

std::vector<double> contrast_te_from(const val& v, const char* what) {
  std::vector<double> te_s;
  const val te = v["te"];
  if (te.isNumber()) return {te.as<double>()};
  if (!te.isUndefined() && !te.isNull() && !te["length"].isUndefined()) {
    for (unsigned i = 0; i < te["length"].as<unsigned>(); ++i) {
      if (!te[i].isNumber()) throw Error(ErrorCode::InvalidArgument, std::string(what) + ": te must hold numbers (seconds, one per echo)");
      te_s.push_back(te[i].as<double>());
    }
    return te_s;
  }
  throw Error(ErrorCode::InvalidArgument, std::string(what) + " needs te: the echo times in seconds, one per echo (e.g. [0.004, 0.008, 0.012])");
}

}  // namespace

SwiRequest swi_request_from(const val& v) {
  ++parses;
  SwiRequest r;
  r.te_s = contrast_te_from(v, "swi");
  std::vector<OptionSpec> stages;
  for (const OptionSpec& o : pipeline_options()) {
    if (o.name == "unwrap" || o.name.starts_with("brainMask.")) stages.push_back(o);
  }
  read_options(v, stages, [&](const std::string& n, double x) { set_swi_option(r, n, x); },
               [&](const std::string& n, const std::string& c) { set_swi_choice(r, n, c); }, nullptr);
  read_options(v, swi_options(), [&](const std::string& n, double x) { set_swi_option(r, n, x); },
               [&](const std::string& n, const std::string& c) { set_swi_choice(r, n, c); }, nullptr);
  r.threads = std::max<uint32_t>(1, count(v, "hardwareThreads", 1));
  return r;
}

R2starParams r2star_params_from(const val& v) {
  ++parses;
  R2starParams p;
  read_options(v, r2star_options(),
               [&](const std::string& n, double v) { throw word_refusal(find_option(r2star_options(), n), number_text(v)); },
               [&](const std::string&, const std::string& c) { p.method = r2star_method_from_name(c); }, nullptr);
  return p;
}

}  // namespace tessera::js
