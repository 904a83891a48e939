// The operations the package offers beside a run: phantoms, comparisons, the forward field, calibration, memory
// checks and B0 resampling.
#include "conversions.h"

#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <cmath>

#include "tessera/engine/autoplan.h"
#include "tessera/engine/calibration.h"
#include "tessera/common/dipole.h"
#include "tessera/quality/fidelity.h"
#include "tessera/sim/phantom.h"
#include "tessera/session/request.h"
#include "tessera/engine/verify.h"
#include "val_fields.h"

namespace tessera::js {

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

val score_to_val(const val& geometry, const val& chi, const val& reference, const val& mask, unsigned threads) {
  const Geometry g = geometry_from(geometry);
  const std::vector<float> c = emscripten::convertJSArrayToNumberVector<float>(chi);
  const std::vector<float> r = emscripten::convertJSArrayToNumberVector<float>(reference);
  const std::vector<uint8_t> m = emscripten::convertJSArrayToNumberVector<uint8_t>(mask);
  const ChallengeScores s = challenge_scores(g, c, r, m, threads);
  val out = val::object();
  out.set("voxels", static_cast<double>(s.voxels));
  out.set("nrmse", s.nrmse);
  out.set("nrmseDetrended", s.nrmse_detrended);
  out.set("hfen", s.hfen);
  out.set("cc", s.cc);
  out.set("xsim", s.xsim);
  return out;
}

val forward_field_to_val(const val& geometry, const val& chi) {
  const Geometry g = geometry_from(geometry);
  const std::vector<float> c = emscripten::convertJSArrayToNumberVector<float>(chi);
  validate_volume_sizes(g, c.size(), g.voxel_count());
  const std::vector<float> f = forward_field(g, c, 2, 2);
  return copy_out(std::span<const float>(f));
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

val speed_probe_edges_to_val(double voxels_run, double divisor, double largest_edge) {
  if (!(voxels_run >= 0 && voxels_run <= 9.0e15) || !(divisor >= 1 && divisor <= 4096) || !(largest_edge >= 0 && largest_edge <= 1.0e6)) {
    throw Error(ErrorCode::InvalidArgument, "the speed probe needs runVoxels (the run's patch voxels, a plan's voxelsRun) >= 0, a divisor in [1, 4096] and a largest edge >= 0");
  }
  const SpeedProbeEdges e = speed_probe_edges(static_cast<uint64_t>(voxels_run), static_cast<uint32_t>(divisor), static_cast<uint64_t>(largest_edge));
  val out = val::object();
  out.set("small", static_cast<double>(e.small));
  out.set("large", static_cast<double>(e.large));
  out.set("leastSeconds", kSpeedProbeLeastSeconds);  // how long to time them
  out.set("rounds", static_cast<double>(kSpeedProbeRounds));
  out.set("leastRounds", static_cast<double>(kSpeedProbeLeastRounds));
  return out;
}

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

val memory_check_to_val(const Plan& held, double worker_heap_bytes, double module_heap_bytes,
                        double module_heap_before_bytes, const std::string& network) {
  if (held.request.kind() != Request::Kind::Network) throw Error(ErrorCode::Internal, "the memory check compares a network's run with its plan");
  const InversionRequest& r = held.request.network();
  const TilePlan& plan = held.tiles;
  MeasuredMemory m;
  m.cost = r.model ? r.model->tile_cost() : r.custom.cost;
  m.worker_heap_bytes = static_cast<uint64_t>(std::max(0.0, worker_heap_bytes));
  m.module_heap_bytes = static_cast<uint64_t>(std::max(0.0, module_heap_bytes));
  m.module_heap_before_bytes = static_cast<uint64_t>(std::max(0.0, module_heap_before_bytes));
  m.planned_bytes_per_tile = plan.bytes_per_tile;
  m.planned_module_heap_bytes = plan.module_heap_bytes;
  const std::array<uint64_t, 3>& dims = plan.patch_dims;
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
