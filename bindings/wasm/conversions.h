// Conversions between JavaScript values and Tessera's C++ types: the one place numbers cross the
// C++/JS boundary. bindings.cpp only registers.
#pragma once

#include <emscripten/val.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "tessera/common/b0_align.h"
#include "tessera/common/budget.h"
#include "tessera/common/error.h"
#include "tessera/common/geometry.h"
#include "tessera/networks/inversion.h"
#include "tessera/inversion/methods.h"
#include "tessera/pipeline/pipeline.h"
#include "tessera/contrast/r2star.h"
#include "tessera/pipeline/methods_text.h"
#include "tessera/pipeline/swi_from_phase.h"
#include "tessera/engine/plan.h"
#include "tessera/registry/registry.h"
#include "tessera/engine/verify.h"
#include "request_reader.h"

namespace tessera::js {

using emscripten::val;

// Runs f; a C++ exception becomes a thrown JS Error with .code and .name = "TesseraError".
template <class F>
auto guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    val err = val::global("Error").new_(std::string(e.what()));
    err.set("name", std::string("TesseraError"));
    err.set("code", std::string(error_code_name(e.code())));
    err.throw_();
  } catch (const std::exception& e) {
    val err = val::global("Error").new_(std::string(e.what()));
    err.set("name", std::string("TesseraError"));
    err.set("code", std::string("Internal"));
    err.throw_();
  }
}

// Readers of what JavaScript sends. Hand-written, not Embind value_object conversions: they refuse bad input by name
// ("dims must be an array of 3 numbers"), apply the schema's defaults and ranges, and accept the request's optional
// and alternative forms, where a generic conversion would only say "Missing field".
Geometry geometry_from(const val& v);
TileConfig tile_from(const val& v);
TileCost cost_from(const val& v);
FieldNetwork custom_network_from(const val& v);
InversionRequest request_from(const val& v);
// speed ({points: [{edge, threads, seconds}], startSeconds}, measureSpeed()'s; absent: none) into r's measured speed.
void read_speed(const val& speed, InversionRequest& r);
// Requests read (request_from, method_request_from, pipeline_request_from: one each) since the module started.
double request_parses();
// Whether a request names a classical method (method: "tv") rather than a network.
bool is_method_request(const val& v);
// A method request: {method, <method>: {param: value}, hardwareThreads}; every parameter checked against the schema, a
// parameter object of another method or a network (model, spec) beside it refused by name.
MethodRequest method_request_from(const val& v);
// Whether a request is a pipeline's (pipeline: true): from multi-echo phase to the local field or χ.
bool is_pipeline_request(const val& v);
// A pipeline request: {pipeline: true, te: [s] (or totalFieldUnits: 'hz' | 'rad/s' | 'ppm' when the volume holds a
// total field map, and no te), b0, unwrap, background, vsharp: {...}, pdf: {...}, lbv, ismv, sharp,
// resharp: {...}, brainMask: {...},
// fitResidualLimit, method?, <method>: {...}, hardwareThreads}; every option checked against the schema. identity, when
// given, receives te (or totalFieldUnits), b0 and every stage option in words (defaults filled in).
PipelineRequest pipeline_request_from(const val& v, RequestIdentity* identity = nullptr);
// pipeline_request_from without counting a parse: a request read again to describe a run (its methods text).
PipelineRequest pipeline_request_read(const val& v, RequestIdentity* identity = nullptr);
// A methods text (tessera/pipeline/methods_text.h) as {text, references: [string], steps: [{stage, title, sentence,
// parameters: {name: value in words}, references: [n]}]}.
val methods_text_to_val(const MethodsText& methods);
// A pipeline's plan as plan() returns it: {feasible, message, pipeline: true, stages, inputBytes, workspaceBytes,
// moduleHeapBytes, peakBytes, largestVoxels, threads, networks: 0, tilesInFlight: 0, warning}.
val pipeline_plan_to_val(const PipelinePlan& plan, unsigned threads);
// The phantom head scanned ({te, b0, snr, seed}): {chi (the brain's truth), mask, headMask, phase and magnitude (every
// echo, echo after echo), totalField, localField, backgroundField (ppm), te, b0}.
val phantom_scan_to_val(const val& geometry, const val& options);
// The pipeline's intermediates as standalone typed arrays ({mask, unwrappedPhase, offset, fieldHz, totalField,
// fitResidual, fitMask, localField (null for a total-field method), localMask, chi (null without a method), and the
// optional outputs, null unless asked for: swi, swiMagnitude, swiPhase, swiPhaseMask, minIp, r2star, t2star, s0,
// r2starResidual}).
val pipeline_result_to_val(const PipelineResult& result);
// An SWI request: {te: [s], unwrap, brainMask: {...}, swi: {maskPower, highPassSigmaXY, highPassSigmaZ, minIpSlab,
// paramagneticPhase}, hardwareThreads}; every option checked against its table.
SwiRequest swi_request_from(const val& v);
// R2* parameters: {r2star: {method: 'arlo' | 'loglinear'}}.
R2starParams r2star_params_from(const val& v);

// A method's plan as plan() returns it: {feasible, message, method, title, methodSteps, threads, inputBytes,
// workspaceBytes, moduleHeapBytes, peakBytes, largestVoxels, wholeVolume: true, networks: 0, tilesInFlight: 0, warning: ""}.
val method_plan_to_val(const MethodPlan& plan);

// Registers the structs Tessera reports as Embind value types: val(x) is then the object index.d.ts documents.
// Called once, from EMSCRIPTEN_BINDINGS, before any val(x) of them.
void register_value_types();

// A JS array of val(x) for each x (Embind's register_vector would give a class handle, not an array).
// x is not a 64-bit integer (no BigInt type is registered: convert those to double).
template <class Range>
val array_of(const Range& items) {
  using X = std::remove_cvref_t<decltype(*std::begin(items))>;
  static_assert(!std::is_same_v<X, uint64_t> && !std::is_same_v<X, int64_t>, "64-bit integers cross as double");
  val out = val::array();
  for (const auto& x : items) out.call<void>("push", val(x));
  return out;
}

// {tileActivationBudget, maxPatchActivationBytes, heapCeilingBytes, workerHeapGuardBytes, computeHeapLimitBytes}: the
// module's memory limits.
val limits_to_val();

// A copy of a C++ vector as a standalone JS typed array (not a heap view).
val copy_out(std::span<const float> v);
val copy_out(std::span<const uint8_t> v);

// {voxels, r, nrmse, maxAbs, compareLo, compareHi, margin}: the self-check's agreement over region's compared part
// (it computes no HFEN, so the object has none).
val verification_to_val(const Agreement& a, const VerifyRegion& region);

// {voxels, r, nrmse, maxAbs, hfen} of test against reference inside mask; options {lo, hi, hfen} (tessera/fidelity.h).
val compare_to_val(const val& geometry, const val& test, const val& reference, const val& mask, const val& options);

// {voxels, nrmse, nrmseDetrended, hfen, cc, xsim}: QSM-CI's scores of chi against reference inside mask
// (tessera/quality/fidelity.h challenge_scores), on up to threads threads.
val score_to_val(const val& geometry, const val& chi, const val& reference, const val& mask, unsigned threads);

// The local field of a χ map by the dipole forward model (B0 from the geometry, 2× zero padding; tessera/dipole.h).
val forward_field_to_val(const val& geometry, const val& chi);

// aligned_chi (a Float32Array of the aligned grid) resampled back onto the source grid at mask: a standalone
// Float32Array.
val b0_restore_to_val(const B0Alignment& alignment, std::span<const uint8_t> mask, const val& aligned_chi);

// {tiltDegrees, rotation (row-major 3×3), geometry (the aligned grid's), field, mask (the aligned grid's), back (field
// resampled there and back, at mask)} of a field; options {interpolation: 'spline' (the runs') | 'cubic' | 'linear', masked: resample
// field × mask (default true)}.
val b0_resample_to_val(const val& geometry, const val& field, const val& mask, const val& options);

// {chi, field, mask} of the numerical head phantom; options {seed, noise, threads}.
val phantom_to_val(const val& geometry, const val& options);

// The speed probe's two patch edges ({small, large}) for a run of voxels_run patch voxels (0: not known).
val speed_probe_edges_to_val(double voxels_run, double divisor, double largest_edge);
// Calibration (tessera/calibration.h): the patch edges to measure for a divisor (count of them).
val calibration_edges_to_val(double divisor, double count);
// {slopeMeasured} of points [{voxels, heapBytes, afterSessionBytes}]: whether they measure a per-voxel slope.
bool calibration_slope_of(const val& points);
// The safe cost of points [{voxels, heapBytes, afterSessionBytes}]: {fixedBytes, bytesPerVoxel, fittedFixedBytes,
// fittedBytesPerVoxel, r2, slopeBound, slopeMargin, pointsFitted, slopeMeasured, raisedBytes, note}.
val calibration_fit_to_val(const val& points);
// A run's measured heaps against the network plan it obeyed: {workerHeapVsPlan, moduleHeapVsPlan, over,
// measuredBytesPerVoxel, warning (null when nothing exceeded its plan)}. network names the network for the advice.
val memory_check_to_val(const Plan& plan, double worker_heap_bytes, double module_heap_bytes,
                        double module_heap_before_bytes, const std::string& network);

}  // namespace tessera::js
