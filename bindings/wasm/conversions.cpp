#include "conversions.h"

#include <emscripten/val.h>

#include <cmath>

#include "tessera/phantom.h"

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

TileConfig tile_from(const val& v) {
  if (v.isUndefined() || v.isNull()) return TileConfig{56, 4};  // the browser default: 64³ patches
  return TileConfig{count(v, "core", 56), count(v, "halo", 4)};
}

TileCost cost_from(const val& v) {
  return TileCost{count(v, "divisor", 1), count(v, "bytesPerVoxel", 1100), static_cast<uint64_t>(number(v, "fixedBytes", 0))};
}

FieldNetwork custom_network_from(const val& v) {
  FieldNetwork n;
  n.cost = cost_from(v);
  n.norm.input_mean = number(v, "inputMean", 0.0);
  n.norm.input_std = number(v, "inputStd", 1.0);
  n.norm.output_scale = number(v, "outputStd", 1.0);
  n.norm.output_offset = number(v, "outputMean", 0.0);
  n.cost.fixed_bytes = static_cast<uint64_t>(number(v, "fixedBytes", 0));
  n.masked_input = !v["maskedInput"].isUndefined() && v["maskedInput"].as<bool>();
  if (n.cost.divisor == 0) throw Error(ErrorCode::InvalidArgument, "spec.divisor must be at least 1");
  if (n.cost.bytes_per_voxel == 0) throw Error(ErrorCode::InvalidArgument, "spec.bytesPerVoxel must be at least 1");
  if (n.norm.input_std == 0.0) throw Error(ErrorCode::InvalidArgument, "spec.inputStd must not be 0");
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
  const val tile = v["tile"];
  // tile: {core, halo} | "auto" | {core: "auto", halo?}: the auto-planner chooses.
  const bool auto_all = tile.isString() && tile.as<std::string>() == "auto";
  const bool auto_core = !tile.isUndefined() && !tile.isNull() && !tile.isString() && tile["core"].isString() &&
                         tile["core"].as<std::string>() == "auto";
  if (tile.isString() && !auto_all) throw Error(ErrorCode::InvalidArgument, "tile must be {core, halo} or \"auto\"");
  if (auto_all || auto_core) {
    r.auto_tile = true;
    r.halo_override = auto_core ? count(tile, "halo", 0) : 0;
    const val w = v["workers"];
    r.fixed_workers = (w.isUndefined() || w.isNull() || w.isString()) ? 0 : count(v, "workers", 0);
    const val t = v["threadsPerWorker"];
    r.fixed_threads = (t.isUndefined() || t.isNull() || t.isString()) ? 0 : count(v, "threadsPerWorker", 0);
    r.hardware_threads = std::max<uint32_t>(1, count(v, "hardwareThreads", 2));
  } else {
    r.tile = tile_from(tile);
    r.tile_given = !tile.isUndefined() && !tile.isNull();
  }
  r.workers = std::max<uint32_t>(1, v["workers"].isNumber() ? count(v, "workers", 1) : 1);
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
  r.phase.b0_tesla = number(v, "b0", 3.0);
  r.phase.erode_radius = count(v, "erodeRadius", 3);
  r.phase.phase_sign = number(v, "phaseSign", -1.0);
  return r;
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
  for (const std::string& role : input_roles(m)) inputs.call<void>("push", role);
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
  o.set("tile", tile);
  o.set("workers", p.workers);
  o.set("threadsPerWorker", p.threads_per_worker);
  o.set("estimatedSeconds", p.estimated_seconds);
  o.set("explanation", p.explanation);
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

val copy_out(std::span<const float> v) {
  return val(emscripten::typed_memory_view(v.size(), v.data())).call<val>("slice");
}
val copy_out(std::span<const uint8_t> v) {
  return val(emscripten::typed_memory_view(v.size(), v.data())).call<val>("slice");
}

void check_echoes(const InversionRequest& r, const Volume& v) {
  const bool phase = r.model && r.model->kind == ModelKind::WholeVolumeOnly;
  if (!phase && (v.echoes() != 1 || !v.magnitude().empty())) {
    throw Error(ErrorCode::InvalidArgument, "several echoes and a magnitude are only taken by the phase networks (iQSM family)");
  }
  if (phase && !r.phase.te_s.empty() && r.phase.te_s.size() != v.echoes()) {
    throw Error(ErrorCode::InvalidArgument, "the phase holds " + std::to_string(v.echoes()) + " echo(es) but te gives " +
                                                std::to_string(r.phase.te_s.size()) + " echo time(s): give one TE per echo");
  }
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

Volume::Volume(const val& geometry, uint32_t echoes) : geometry_(geometry_from(geometry)), echoes_(echoes) {
  if (echoes == 0 || echoes > 64) throw Error(ErrorCode::InvalidArgument, "echoes must be 1 to 64, got " + std::to_string(echoes));
  const uint64_t n = geometry_.voxel_count();
  if (n * echoes > (1ull << 30)) {
    throw Error(ErrorCode::InvalidArgument, std::to_string(echoes) + " echoes of " + std::to_string(n) +
                                                " voxels do not fit a browser's 4 GB memory: give fewer echoes");
  }
  field_.assign(n * echoes, 0.0f);
  mask_.assign(n, 0);
}

val Volume::geometry() const {
  val o = val::object();
  val dims = val::array(), vox = val::array(), b0 = val::array();
  for (int a = 0; a < 3; ++a) {
    dims.call<void>("push", static_cast<double>(geometry_.dims[a]));
    vox.call<void>("push", geometry_.voxel_mm[a]);
    b0.call<void>("push", geometry_.b0_dir[a]);
  }
  o.set("dims", dims);
  o.set("voxelMm", vox);
  o.set("b0Dir", b0);
  return o;
}

val Volume::field_view() { return val(emscripten::typed_memory_view(field_.size(), field_.data())); }
val Volume::mask_view() { return val(emscripten::typed_memory_view(mask_.size(), mask_.data())); }
val Volume::magnitude_view() {
  if (magnitude_.empty()) magnitude_.assign(field_.size(), 0.0f);
  return val(emscripten::typed_memory_view(magnitude_.size(), magnitude_.data()));
}

InversionJob::InversionJob(std::shared_ptr<Volume> volume, const val& request, uint32_t threads)
    : volume_(std::move(volume)), request_(request_from(request)) {
  request_.geometry = volume_->geo();
  check_echoes(request_, *volume_);
  const TilePlan plan = plan_inversion(request_, volume_->mask(), Target::Wasm);
  if (!plan.feasible) throw Error(ErrorCode::BudgetExceeded, plan.message);
  warning_ = inversion_warning(request_);
  networks_ = tessera::network_count(request_);
  chi_.assign(volume_->voxel_count(), 0.0f);
  RunOptions options;
  options.threads = std::max<uint32_t>(1, threads);
  options.target = Target::Wasm;
  std::shared_ptr<Volume> vol = volume_;
  InversionRequest req = request_;
  std::span<float> chi(chi_);
  job_ = std::make_unique<Job>(
      [vol, req, chi](const RunOptions& opts, Bridge& bridge) {
        std::vector<std::unique_ptr<BridgeRunner>> runners;
        std::vector<PatchRunner*> nets;
        for (uint32_t i = 0; i < tessera::network_count(req); ++i) {
          runners.push_back(std::make_unique<BridgeRunner>(bridge, i, network_output_channels(req, i)));
          nets.push_back(runners.back().get());
        }
        return run_inversion(req, vol->field(), vol->mask(), nets, opts, chi, vol->magnitude());
      },
      options);
}

val InversionJob::poll() {
  val o = val::object();
  const Job::State s = job_->state();
  o.set("state", std::string(s == Job::State::Running ? "running" : s == Job::State::Succeeded ? "succeeded" : "failed"));
  o.set("done", static_cast<double>(job_->done()));
  o.set("total", static_cast<double>(job_->total()));
  o.set("inFlight", job_->bridge().open_requests());
  val requests = val::array();
  for (const Bridge::Request& r : job_->bridge().take()) {
    val q = val::object();
    q.set("id", static_cast<double>(r.id));
    q.set("network", r.network);
    q.set("tile", static_cast<double>(r.tile));
    val dims = val::array();
    dims.call<void>("push", 1);
    dims.call<void>("push", r.shape.channels);
    for (uint64_t d : r.shape.dims) dims.call<void>("push", static_cast<double>(d));
    q.set("dims", dims);
    q.set("input", val(emscripten::typed_memory_view(r.input.size(), r.input.data())));
    val extras = val::array();
    for (const NamedInput& e : r.extras) {
      val x = val::object();
      x.set("role", e.role);
      val d = val::array();
      for (uint64_t k : e.dims) d.call<void>("push", static_cast<double>(k));
      x.set("dims", d);
      x.set("input", val(emscripten::typed_memory_view(e.data.size(), e.data.data())));
      extras.call<void>("push", x);
    }
    q.set("extras", extras);
    requests.call<void>("push", q);
  }
  o.set("requests", requests);
  return o;
}

void InversionJob::respond(double id, const val& output) {
  job_->bridge().respond(static_cast<uint64_t>(id), emscripten::convertJSArrayToNumberVector<float>(output));
}

void InversionJob::fail(double id, const std::string& message) { job_->bridge().fail(static_cast<uint64_t>(id), message); }

void InversionJob::cancel() { job_->cancel(); }

val InversionJob::report() {
  job_->join();
  if (job_->state() == Job::State::Failed) throw Error(job_->error_code(), job_->error_message());
  val r = to_val(job_->report());
  r.set("warning", warning_);
  r.set("maxOpenRequests", job_->bridge().max_open_requests());
  return r;
}

val InversionJob::result_view() {
  if (job_->state() != Job::State::Succeeded) throw Error(ErrorCode::InvalidArgument, "no result: the run has not succeeded");
  return val(emscripten::typed_memory_view(chi_.size(), chi_.data()));
}

}  // namespace tessera::js
