// Plans, results and limits as the JavaScript objects plan(), invert() and pipeline() return.
#include "conversions.h"

#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <cmath>

#include "tessera/engine/calibration.h"
#include "tessera/common/dipole.h"
#include "tessera/common/error.h"
#include "tessera/quality/fidelity.h"
#include "tessera/sim/phantom.h"
#include "tessera/session/request.h"
#include "tessera/engine/verify.h"
#include "val_fields.h"

namespace tessera::js {

namespace {

// The fields of a plan without tiles (a pipeline's or a method's): its verdict, its memory and no networks.
val untiled_plan(bool feasible, const std::string& message, uint64_t input_bytes, uint64_t workspace_bytes,
                 uint64_t module_heap_bytes, uint64_t peak_bytes, uint64_t largest_voxels, const Dims3& largest_dims,
                 unsigned threads) {
  val p = val::object();
  p.set("feasible", feasible);
  p.set("message", message);
  p.set("inputBytes", static_cast<double>(input_bytes));
  p.set("workspaceBytes", static_cast<double>(workspace_bytes));
  p.set("moduleHeapBytes", static_cast<double>(module_heap_bytes));
  p.set("peakBytes", static_cast<double>(peak_bytes));
  p.set("largestVoxels", static_cast<double>(largest_voxels));
  val dims = val::array();
  for (int64_t d : largest_dims) dims.call<void>("push", static_cast<double>(d));
  p.set("largestDims", dims);
  p.set("threads", threads);
  p.set("networks", 0);
  p.set("tilesInFlight", 0);
  p.set("warning", std::string());
  return p;
}

}  // namespace

val pipeline_plan_to_val(const PipelinePlan& plan, unsigned threads) {
  val p = untiled_plan(plan.feasible, plan.message, plan.input_bytes, plan.workspace_bytes, plan.module_heap_bytes,
                       plan.module_heap_bytes, plan.largest_voxels, plan.largest_dims, threads);
  p.set("pipeline", true);
  p.set("method", plan.method);
  val stages = val::array();
  for (const std::string& stage : plan.stages) stages.call<void>("push", stage);
  p.set("stages", stages);
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
  // null for a method that inverts the total field (no background removal ran)
  o.set("localField", r.local_ppm.empty() ? val::null() : copy_out(std::span<const float>(r.local_ppm)));
  o.set("localMask", copy_out(std::span<const uint8_t>(r.local_mask)));
  o.set("chi", r.chi.empty() ? val::null() : copy_out(std::span<const float>(r.chi)));
  // The optional outputs (also): null unless asked for and reached.
  const auto optional = [&](const char* key, const std::vector<float>& v) { o.set(key, v.empty() ? val::null() : copy_out(std::span<const float>(v))); };
  optional("swi", r.swi.swi);
  optional("swiMagnitude", r.swi.magnitude);
  optional("swiPhase", r.swi.phase_rad);
  optional("swiPhaseMask", r.swi.phase_mask);
  optional("minIp", r.min_ip);
  optional("r2star", r.r2star.r2star);
  optional("t2star", r.r2star.t2star);
  optional("s0", r.r2star.s0);
  optional("r2starResidual", r.r2star.residual);
  return o;
}

val methods_text_to_val(const MethodsText& m) {
  val o = val::object();
  o.set("text", m.text);
  val refs = val::array();
  for (const std::string& r : m.references) refs.call<void>("push", r);
  o.set("references", refs);
  val steps = val::array();
  for (const MethodsStep& s : m.steps) {
    val step = val::object();
    step.set("stage", s.stage);
    step.set("title", s.title);
    step.set("sentence", s.sentence);
    val params = val::object();
    for (const auto& [name, value] : s.parameters) params.set(name, value);
    step.set("parameters", params);
    val numbers = val::array();
    for (unsigned n : s.references) numbers.call<void>("push", n);
    step.set("references", numbers);
    steps.call<void>("push", step);
  }
  o.set("steps", steps);
  return o;
}

val method_plan_to_val(const MethodPlan& plan) {
  val p = untiled_plan(plan.feasible, plan.message, plan.input_bytes, plan.workspace_bytes, plan.module_heap_bytes,
                       plan.peak_bytes, plan.largest_voxels, plan.largest_dims, plan.threads);
  p.set("method", plan.method);
  p.set("title", plan.title);
  p.set("methodSteps", plan.steps);
  p.set("wholeVolume", true);
  p.set("refusal", std::string(error_code_name(plan.refusal)));
  return p;
}

val copy_out(std::span<const float> v) {
  return val(emscripten::typed_memory_view(v.size(), v.data())).call<val>("slice");
}
val copy_out(std::span<const uint8_t> v) {
  return val(emscripten::typed_memory_view(v.size(), v.data())).call<val>("slice");
}

val limits_to_val() { return val(WasmLimits{}); }

val verification_to_val(const Agreement& a, const VerifyRegion& region) {
  val o(a);
  o.delete_(std::string("hfen"));  // the self-check computes none
  o.set("compareLo", val(region.compare_lo));
  o.set("compareHi", val(region.compare_hi));
  o.set("margin", region.margin);
  return o;
}

}  // namespace tessera::js
