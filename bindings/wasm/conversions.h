// Conversions between JavaScript values and Tessera's C++ types: the one place numbers cross the
// C++/JS boundary. bindings.cpp only registers.
#pragma once

#include <emscripten/val.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "internal/job.h"
#include "tessera/b0_align.h"
#include "tessera/budget.h"
#include "tessera/error.h"
#include "tessera/geometry.h"
#include "tessera/inversion.h"
#include "tessera/plan.h"
#include "tessera/registry.h"

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

Geometry geometry_from(const val& v);
TileConfig tile_from(const val& v);
TileCost cost_from(const val& v);
FieldNetwork custom_network_from(const val& v);
InversionRequest request_from(const val& v);
// The request schema (tessera/request.h): [{name, unit, default, min, max, minExclusive, integer, help}].
val schema_to_val();

val to_val(const ModelSpec& m);
val to_val(const PatchFit& f);
val to_val(const TilePlan& p);
val to_val(const RunReport& r);

// The choice a plan object (from plan()) fixed, to hand back to a run.
PlanChoice plan_choice_from(const val& plan);

// The plan of request over a volume of this geometry and mask (a Uint8Array of 0/1, or undefined: every voxel), with
// the off-design warning, the number of networks and whether the run goes in steps (FieldRun) or as an
// InversionJob. Never allocates the volume's field.
val plan_to_val(const val& geometry, const val& mask, const val& request);

// A copy of a C++ vector as a standalone JS typed array (not a heap view).
val copy_out(std::span<const float> v);
val copy_out(std::span<const uint8_t> v);

// {voxels, r, nrmse, maxAbs, hfen} of test against reference inside mask; options {lo, hi, hfen} (tessera/fidelity.h).
val compare_to_val(const val& geometry, const val& test, const val& reference, const val& mask, const val& options);
// ‖M (D∗χ − f)‖ / ‖M f‖ (tessera/fidelity.h).
double data_consistency_of(const val& geometry, const val& chi, const val& field, const val& mask);

// The local field of a χ map by the dipole forward model (B0 from the geometry, 2× zero padding; tessera/dipole.h).
val forward_field_to_val(const val& geometry, const val& chi);

// {tiltDegrees, assumesZ, resampled, mode, thresholdDegrees, warnDegrees, alignedDims (null unless resampled), extraModuleBytes,
// summary, warning}: what a plan does about B0.
val to_val(const B0Plan& p);

// aligned_chi (a Float32Array of the aligned grid) resampled back onto the source grid at mask: a standalone
// Float32Array.
val b0_restore_to_val(const B0Alignment& alignment, std::span<const uint8_t> mask, const val& aligned_chi);

// {tiltDegrees, rotation (row-major 3×3), geometry (the aligned grid's), field, mask (the aligned grid's), back (field
// resampled there and back, at mask)} of a field; options {interpolation: 'spline' (the runs') | 'cubic' | 'linear', masked: resample
// field × mask (default true)}.
val b0_resample_to_val(const val& geometry, const val& field, const val& mask, const val& options);

// {chi, field, mask} of the numerical head phantom; options {seed, noise, threads}.
val phantom_to_val(const val& geometry, const val& options);

}  // namespace tessera::js
