// Embind registrations only: every conversion lives behind conversions.h.
#include <emscripten/bind.h>
#include <unistd.h>

#include <cstdint>

#include "b0_aligned.h"
#include "common/parallel.h"
#include "contrast_run.h"
#include "conversions.h"
#include "field_run.h"
#include "value_types.h"
#include "verification.h"
#include "volume.h"
#include "tessera/common/dipole.h"
#include "tessera/common/physics.h"
#include "tessera/pipeline/methods_text.h"
#include "tessera/session/request.h"

using namespace emscripten;
using namespace tessera;
using namespace tessera::js;

namespace {

val registry() { return guarded([] { return array_of(model_registry()); }); }
// The request schema (tessera/request.h): every option with its unit, default and range.
val schema() { return guarded([] { return array_of(request_options()); }); }
// The request keys that are no schema option (tessera/session/request.h), for the generated request surface.
val request_keys_of() { return guarded([] { return array_of(request_keys()); }); }
// A geometry as the runs read it (defaults filled: voxelMm, b0Dir): the geometry of their output volumes.
val volume_geometry(const val& g) { return guarded([&] { return val(geometry_from(g)); }); }
val model(std::string id) { return guarded([&] { return val(model_spec(id)); }); }
val limits() { return guarded([] { return limits_to_val(); }); }
val patch_fit(val tile, val cost) { return guarded([&] { return val(wasm_patch_fit(tile_from(tile), cost_from(cost))); }); }
// Current size of the module's wasm memory: it never shrinks, so this is also its high-water mark.
double heap_bytes() { return static_cast<double>(__builtin_wasm_memory_size(0)) * 65536.0; }
// The top of the allocator's break (static data, stack and every byte malloc ever took): never lowered, so its
// high-water; the heap is this plus what Emscripten's growth committed beyond it.
double heap_break_bytes() { return static_cast<double>(reinterpret_cast<uintptr_t>(sbrk(0))); }
// Allocates the stacks of `threads` threads beside the calling one (the pool's workers) now, before any volume: they
// sit at the heap's bottom for the module's lifetime, where the plans count them (wasm_thread_heap_bytes).
void reserve_stacks(unsigned threads) { reserve_thread_stacks(threads); }
// The request read once and planned: the handle the driver worker holds (plan() returns its view).
PlanHandle plan(val geometry, val mask, val request, val field) {
  return guarded([&] { return plan_request(geometry, mask, request, field); });
}
val plan_view_of(const Plan& p) { return guarded([&] { return plan_view(p); }); }
PlanHandle plan_replan(const Plan& p, val mask, val field, val speed) {
  return guarded([&] { return replan_with_speed(p, mask, field, speed); });
}
void plan_check(const Plan& p, val geometry, val request) { guarded([&] { check_request(p, geometry, request); }); }
void plan_check_volume(const Plan& p, std::shared_ptr<Volume> volume) { guarded([&] { check_volume(p, volume->geo(), volume->mask()); }); }
double parses() { return request_parses(); }
std::shared_ptr<Volume> make_volume(val geometry, unsigned echoes) {
  return guarded([&] { return std::make_shared<Volume>(geometry, echoes); });
}
std::unique_ptr<FieldRun> start_field_run(std::shared_ptr<Volume> volume, PlanHandle plan) {
  return guarded([&] { return std::make_unique<FieldRun>(volume, plan); });
}
val phantom(val geometry, val options) { return guarded([&] { return phantom_to_val(geometry, options); }); }
val compare(val geometry, val test, val reference, val mask, val options) {
  return guarded([&] { return compare_to_val(geometry, test, reference, mask, options); });
}
val score(val geometry, val chi, val reference, val mask, unsigned threads) {
  return guarded([&] { return score_to_val(geometry, chi, reference, mask, threads); });
}
val forward_of(val geometry, val chi) { return guarded([&] { return forward_field_to_val(geometry, chi); }); }
val probe_edges(double voxels_run, double divisor, double largest_edge) {
  return guarded([&] { return speed_probe_edges_to_val(voxels_run, divisor, largest_edge); });
}
val calibration_edges(double divisor, double count) { return guarded([&] { return calibration_edges_to_val(divisor, count); }); }
bool calibration_slope(val points) { return guarded([&] { return calibration_slope_of(points); }); }
val fit_calibration(val points) { return guarded([&] { return calibration_fit_to_val(points); }); }
val memory_check(const Plan& plan, double worker_heap, double module_heap, double module_before, std::string network) {
  return guarded([&] { return memory_check_to_val(plan, worker_heap, module_heap, module_before, network); });
}
val run_next(FieldRun& r) { return guarded([&] { return r.next(); }); }
bool run_step(FieldRun& r) { return guarded([&] { return r.step(); }); }
val run_outputs(const FieldRun& r) { return guarded([&] { return r.outputs(); }); }
val phantom_scan(val geometry, val options) { return guarded([&] { return phantom_scan_to_val(geometry, options); }); }
void run_finish(FieldRun& r, double job, val output) { guarded([&] { r.finish(job, output); }); }
void run_fail(FieldRun& r, double job, std::string message) { guarded([&] { r.fail(job, message); }); }
val run_report(FieldRun& r) { return guarded([&] { return r.report(); }); }
val run_result(FieldRun& r) { return guarded([&] { return r.result(); }); }
std::unique_ptr<Verification> start_verification(std::shared_ptr<Volume> volume, PlanHandle plan) {
  return guarded([&] { return std::make_unique<Verification>(volume, plan); });
}
val verification_compare(const Verification& v, val tiled, val box_chi) { return guarded([&] { return v.compare(tiled, box_chi); }); }
double verification_consistency(const Verification& v, val chi) { return guarded([&] { return v.data_consistency(chi); }); }
std::unique_ptr<B0Aligned> align_b0(std::shared_ptr<Volume> volume, PlanHandle plan) {
  return guarded([&] { return std::make_unique<B0Aligned>(volume, plan); });
}
val b0_restore(const B0Aligned& a, val chi) { return guarded([&] { return a.restore(chi); }); }
val b0_resample(val geometry, val field, val mask, val options) {
  return guarded([&] { return b0_resample_to_val(geometry, field, mask, options); });
}

std::unique_ptr<ContrastRun> make_contrast_run(val geometry, std::string kind, val request, bool mask_given) {
  return guarded([&] { return std::make_unique<ContrastRun>(geometry, kind, request, mask_given); });
}
val contrast_magnitude_view(ContrastRun& r) { return guarded([&] { return r.magnitude_view(); }); }
val contrast_phase_view(ContrastRun& r) { return guarded([&] { return r.phase_view(); }); }
val contrast_mask_view(ContrastRun& r) { return guarded([&] { return r.mask_view(); }); }
void contrast_start(ContrastRun& r) { guarded([&] { r.start(); }); }
val contrast_next(const ContrastRun& r) { return r.next(); }
bool contrast_step(ContrastRun& r) { return guarded([&] { return r.step(); }); }
val contrast_report(ContrastRun& r) { return guarded([&] { return r.report(); }); }
val contrast_result(const ContrastRun& r) { return guarded([&] { return r.result(); }); }
val contrast_outputs(const ContrastRun& r) { return guarded([&] { return r.outputs(); }); }
val contrast_plan(const ContrastRun& r) { return guarded([&] { return r.plan(); }); }
// The methods text of a pipeline request (tessera/pipeline/methods_text.h): {text, steps, references}.
val pipeline_methods(val request, bool mask_given, std::string network) {
  return guarded([&] { return methods_text_to_val(pipeline_methods_text(pipeline_request_read(request, nullptr), mask_given, network)); });
}

}  // namespace

EMSCRIPTEN_BINDINGS(tessera) {
  register_value_types();
  // γ̄ for value-types.test.js, which holds io/nifti.js's copy (that module loads without wasm) equal to it
  constant("GAMMA_BAR_MHZ_PER_T", tessera::kGammaBarMHzPerT);
  function("valueTypes", &value_types_record);  // their record: scripts/value-types.js writes value-types.d.ts from it

  function("registry", &registry);
  function("model", &model);
  function("limits", &limits);
  function("schema", &schema);
  function("volumeGeometry", &volume_geometry);
  function("requestKeys", &request_keys_of);  // scripts/request-surface.js writes the JS request surface from these
  function("patchFit", &patch_fit);
  function("heapBytes", &heap_bytes);
  function("heapBreakBytes", &heap_break_bytes);
  function("reserveThreadStacks", &reserve_stacks);
  function("plan", &plan);
  // Requests read so far (one per API call): the runtime's internal counters, not the package's API.
  function("requestParses", &parses);
  class_<Plan>("Plan")
      .smart_ptr<PlanHandle>("PlanHandle")
      .function("view", &plan_view_of)
      .function("replan", &plan_replan)
      .function("check", &plan_check)
      .function("checkVolume", &plan_check_volume);
  function("startFieldRun", &start_field_run);
  function("phantom", &phantom);
  function("phantomScan", &phantom_scan);
  function("compare", &compare);
  function("score", &score);
  function("forwardField", &forward_of);
  function("calibrationEdges", &calibration_edges);
  function("speedProbeEdges", &probe_edges);
  function("calibrationSlopeMeasured", &calibration_slope);
  function("fitCalibration", &fit_calibration);
  function("memoryCheck", &memory_check);
  function("pipelineMethods", &pipeline_methods);

  class_<Volume>("Volume")
      .smart_ptr_constructor("Volume", &make_volume)
      .function("geometry", &Volume::geometry)
      .function("fieldView", &Volume::field_view)
      .function("maskView", &Volume::mask_view)
      .function("magnitudeView", &Volume::magnitude_view)
      .function("echoes", &Volume::echoes)
      .function("voxelCount", &Volume::voxel_count);

  class_<FieldRun>("FieldRun")
      .function("next", &run_next)
      .function("finish", &run_finish)
      .function("fail", &run_fail)
      .function("step", &run_step)
      .function("outputs", &run_outputs)
      .function("cancel", &FieldRun::cancel)
      .function("state", &FieldRun::state)
      .function("report", &run_report)
      .function("result", &run_result)
      .function("warning", &FieldRun::warning)
      .function("intermediates", &FieldRun::intermediates);
  function("startVerification", &start_verification);
  class_<Verification>("Verification")
      .function("box", &Verification::box)
      .function("boxPlan", &Verification::box_plan)
      .function("compare", &verification_compare)
      .function("dataConsistency", &verification_consistency);
  // SWI (from wrapped phase) and R2*: a computation stepped by runtime/driver.js like a FieldRun.
  function("contrastRun", &make_contrast_run);
  class_<ContrastRun>("ContrastRun")
      .function("magnitudeView", &contrast_magnitude_view)
      .function("phaseView", &contrast_phase_view)
      .function("maskView", &contrast_mask_view)
      .function("start", &contrast_start)
      .function("next", &contrast_next)
      .function("step", &contrast_step)
      .function("cancel", &ContrastRun::cancel)
      .function("state", &ContrastRun::state)
      .function("report", &contrast_report)
      .function("result", &contrast_result)
      .function("outputs", &contrast_outputs)
      .function("plan", &contrast_plan)
      .function("echoes", &ContrastRun::echoes);
  function("alignB0", &align_b0);
  function("b0Resample", &b0_resample);
  class_<B0Aligned>("B0Aligned")
      .function("volume", &B0Aligned::volume)
      .function("plan", &B0Aligned::plan)
      .function("restore", &b0_restore)
      .function("tiltDegrees", &B0Aligned::tilt_degrees);
}
