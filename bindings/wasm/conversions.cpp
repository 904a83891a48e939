#include "conversions.h"

#include "tessera/verify.h"

#include <emscripten/val.h>

#include <cmath>

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

val array_of(const std::array<uint64_t, 3>& a) {
  val out = val::array();
  for (uint64_t x : a) out.call<void>("push", static_cast<double>(x));
  return out;
}

val array_of(const Dims3& a) {
  val out = val::array();
  for (int64_t x : a) out.call<void>("push", static_cast<double>(x));
  return out;
}

// {counts, patchEdge, tiles: [{index, coreLo, coreHi, patchLo, skipped}]}: the tiles a plan's run goes through.
val grid_to_val(const TileGrid& g) {
  val o = val::object();
  o.set("counts", array_of(g.counts));
  o.set("patchEdge", static_cast<double>(g.patch_edge));
  o.set("stride", g.config.step());
  o.set("blend", std::string(blend_name(g.config.blend)));
  o.set("misaligned", static_cast<double>(g.misaligned));  // active tiles off the whole volume's pooling grid
  val tiles = val::array();
  for (const Tile& t : g.tiles) {
    val x = val::object();
    x.set("index", static_cast<double>(t.index));
    x.set("coreLo", array_of(t.core_lo));
    x.set("coreHi", array_of(t.core_hi));
    x.set("patchLo", array_of(t.patch_lo));
    x.set("skipped", t.skipped);
    tiles.call<void>("push", x);
  }
  o.set("tiles", tiles);
  return o;
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

val schema_to_val() {
  val out = val::array();
  for (const OptionSpec& o : request_options()) {
    val x = val::object();
    x.set("name", std::string(o.name));
    x.set("unit", std::string(o.unit));
    if (o.default_text.empty()) {
      x.set("default", o.default_value);
    } else {
      x.set("default", std::string(o.default_text));
    }
    x.set("defaultValue", o.default_value);
    x.set("min", o.min);
    x.set("max", o.max);
    x.set("minExclusive", o.min_exclusive);
    x.set("integer", o.integer);
    x.set("help", std::string(o.help));
    val choices = val::array();
    for (std::string_view rest = o.choices; !rest.empty();) {
      const size_t bar = rest.find('|');
      choices.call<void>("push", std::string(rest.substr(0, bar)));
      rest = bar == std::string_view::npos ? std::string_view{} : rest.substr(bar + 1);
    }
    x.set("choices", choices);
    out.call<void>("push", x);
  }
  return out;
}

val to_val(const ModelSpec& m) {
  val o = val::object();
  o.set("id", std::string(m.id));
  o.set("name", std::string(m.name));
  o.set("kind", std::string(model_kind_name(m.kind)));
  o.set("tileable", m.tileable());
  o.set("divisor", m.divisor);
  o.set("bytesPerVoxel", static_cast<double>(m.bytes_per_voxel));
  o.set("fixedBytes", static_cast<double>(m.fixed_bytes));
  o.set("maskedInput", m.masked_input);
  o.set("costProvisional", m.cost_provisional);
  o.set("costSource", std::string(m.cost_source));
  o.set("inputChannels", m.input_channels);
  o.set("outputChannels", m.output_channels);
  o.set("input", std::string(m.input));
  o.set("output", std::string(m.output));
  o.set("quantity", std::string(m.quantity));
  val inputs = val::array();
  for (InputRole role : m.inputs) inputs.call<void>("push", std::string(input_role_name(role)));
  o.set("inputs", inputs);
  o.set("cropMargin", m.crop_margin);
  val norm = val::object();
  norm.set("inputMean", m.norm.input_mean);
  norm.set("inputStd", m.norm.input_std);
  norm.set("outputStd", m.norm.output_scale);
  norm.set("outputMean", m.norm.output_offset);
  o.set("normalization", norm);
  o.set("pad", std::string(m.pad == PadRule::SmallerHalfLow ? "smaller-half-low" : "larger-half-low"));
  val weights = val::array();
  for (const WeightsFile& w : m.weights) {
    if (w.file.empty()) continue;
    val f = val::object();
    f.set("file", std::string(w.file));
    f.set("url", w.bundled.empty() ? std::string(kOfficialWeightsBase) + std::string(w.file) : std::string(w.bundled));
    f.set("bundled", !w.bundled.empty());
    f.set("bytes", static_cast<double>(w.bytes));
    f.set("sha256", std::string(w.sha256));
    weights.call<void>("push", f);
  }
  o.set("weights", weights);
  o.set("licence", std::string(m.licence));
  o.set("citation", std::string(m.citation));
  o.set("notes", std::string(m.notes));
  o.set("defaultHalo", m.default_halo);
  o.set("receptiveRadius", m.receptive_radius);
  o.set("receptiveSource", std::string(m.receptive_source));
  if (m.measured_context.empty()) {
    o.set("measuredContext", val::null());
  } else {
    val w = val::array();
    for (double x : m.measured_context) w.call<void>("push", x);
    o.set("measuredContext", w);
  }
  return o;
}

val to_val(const PatchFit& f) {
  val o = val::object();
  o.set("fits", f.fits);
  o.set("patchEdge", static_cast<double>(f.patch_edge));
  o.set("bytes", static_cast<double>(f.bytes));
  o.set("largestEdge", static_cast<double>(f.largest_edge));
  o.set("largestCore", static_cast<double>(f.largest_core));
  o.set("message", f.message);
  return o;
}

val to_val(const TilePlan& p) {
  val o = val::object();
  o.set("feasible", p.feasible);
  val tile = val::object();
  tile.set("core", p.tile.core);
  tile.set("halo", p.tile.halo);
  tile.set("stride", p.tile.step());
  tile.set("blend", std::string(blend_name(p.tile.blend)));
  o.set("tile", tile);
  o.set("workers", p.workers);
  o.set("threadsPerWorker", p.threads_per_worker);
  o.set("estimatedSeconds", p.estimated_seconds);
  o.set("estimateSource", p.estimate_source);
  o.set("explanation", p.explanation);
  o.set("fidelityWarning", p.fidelity_warning);
  o.set("message", p.message);
  o.set("wholeVolume", p.whole_volume);
  o.set("patchEdge", static_cast<double>(p.patch_edge));
  o.set("patchDims", array_of(p.patch_dims));
  o.set("bytesPerTile", static_cast<double>(p.bytes_per_tile));
  o.set("tilesInFlight", p.tiles_in_flight);
  o.set("tilesTotal", static_cast<double>(p.tiles_total));
  o.set("tilesActive", static_cast<double>(p.tiles_active));
  o.set("tilesSkipped", static_cast<double>(p.tiles_skipped));
  o.set("activationBytes", static_cast<double>(p.activation_bytes));
  o.set("moduleHeapBytes", static_cast<double>(p.module_heap_bytes));
  o.set("peakBytes", static_cast<double>(p.peak_bytes));
  o.set("grid", grid_to_val(p.grid));
  if (p.verify) {
    const VerifyRegion& v = *p.verify;
    val x = val::object();
    x.set("possible", v.possible);
    x.set("message", v.message);
    auto dims = [](const Dims3& d) {
      val a = val::array();
      for (int i = 0; i < 3; ++i) a.call<void>("push", static_cast<double>(d[i]));
      return a;
    };
    x.set("lo", dims(v.lo));
    x.set("hi", dims(v.hi));
    x.set("compareLo", dims(v.compare_lo));
    x.set("compareHi", dims(v.compare_hi));
    x.set("margin", v.margin);
    x.set("plan", v.possible ? to_val(v.plan) : val::null());
    o.set("verify", x);
  } else {
    o.set("verify", val::null());
  }
  if (!p.context.within.empty()) {
    val c = val::object();
    c.set("radius", p.context.radius);
    c.set("measured", p.context.measured);
    c.set("assumed", p.context.assumed);
    c.set("radius90", context_radius_holding(p.context, 0.90));
    c.set("radius99", context_radius_holding(p.context, 0.99));
    o.set("context", c);
  } else {
    o.set("context", val::null());
  }
  if (p.fidelity_known) {
    val f = val::object();
    f.set("r", p.fidelity.r);
    f.set("nrmse", p.fidelity.nrmse);
    f.set("deficit", p.fidelity.deficit);
    o.set("predictedFidelity", f);
  } else {
    o.set("predictedFidelity", val::null());
  }
  return o;
}

val to_val(const RunReport& r) {
  val o = val::object();
  o.set("tilesTotal", static_cast<double>(r.tiles_total));
  o.set("tilesRun", static_cast<double>(r.tiles_run));
  o.set("tilesSkipped", static_cast<double>(r.tiles_skipped));
  o.set("concurrency", r.concurrency);
  o.set("maxInFlight", r.max_in_flight);
  o.set("patchEdge", static_cast<double>(r.patch_edge));
  o.set("bytesPerTile", static_cast<double>(r.bytes_per_tile));
  o.set("driverSeconds", r.wall_seconds);
  val secs = val::array();
  for (double s : r.tile_seconds) secs.call<void>("push", s);
  o.set("tileSeconds", secs);
  return o;
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
  return c;
}

val copy_out(std::span<const float> v) {
  return val(emscripten::typed_memory_view(v.size(), v.data())).call<val>("slice");
}
val copy_out(std::span<const uint8_t> v) {
  return val(emscripten::typed_memory_view(v.size(), v.data())).call<val>("slice");
}

val plan_to_val(const val& geometry, const val& mask, const val& request) {
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
  val p = to_val(plan_inversion(r, m, Target::Wasm));
  p.set("warning", inversion_warning(r));
  p.set("networks", network_count(r));
  p.set("steps", runs_in_steps(r));
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
  val out = val::object();
  out.set("chi", copy_out(std::span<const float>(p.chi)));
  out.set("field", copy_out(std::span<const float>(p.field)));
  out.set("mask", copy_out(std::span<const uint8_t>(p.mask)));
  return out;
}

val to_val(const Agreement& a) {
  val o = val::object();
  o.set("voxels", static_cast<double>(a.voxels));
  o.set("r", a.r);
  o.set("nrmse", a.nrmse);
  o.set("maxAbs", a.max_abs);
  o.set("hfen", a.hfen);
  return o;
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
  return to_val(compare_maps(g, t, r, m, lo, hi, hfen));
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

}  // namespace tessera::js
