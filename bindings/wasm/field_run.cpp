#include "field_run.h"

#include <emscripten/val.h>


#include "conversions.h"
#include "tessera/common/error.h"

namespace tessera::js {

FieldRun::FieldRun(std::shared_ptr<Volume> volume, PlanHandle plan) : volume_(std::move(volume)), run_(std::move(plan), volume_->data()) {}

val FieldRun::outputs() const { return pipeline_result_to_val(run_.outputs()); }

val FieldRun::next() {
  if (staging_.size() != run_.steps().input_shape().size()) staging_.resize(run_.steps().input_shape().size());
  const auto patch = run_.steps().next(staging_);
  if (!patch) return val::null();
  // Not one struct: the patch's job, tile and network, its shape, a view on its input (the run's own buffer, or this
  // run's staging buffer) and its further named inputs.
  const bool owned = !patch->input.empty();
  const TensorShape& shape = owned ? patch->shape : run_.steps().input_shape();
  val o = val::object();
  o.set("job", static_cast<double>(patch->job));
  o.set("tile", static_cast<double>(patch->tile));
  o.set("network", patch->network);
  val dims = val::array();
  dims.call<void>("push", 1);
  dims.call<void>("push", shape.channels);
  for (uint64_t d : shape.dims) dims.call<void>("push", static_cast<double>(d));
  o.set("dims", dims);
  // Views on the heap, valid until the next allocating call: the caller copies them at once (the pool does).
  o.set("input", owned ? val(emscripten::typed_memory_view(patch->input.size(), patch->input.data()))
                       : val(emscripten::typed_memory_view(staging_.size(), staging_.data())));
  o.set("extras", array_of(patch->extras));
  return o;
}

void FieldRun::finish(double job, const val& output) {
  if (output["length"].isUndefined()) {
    run_.steps().fail(static_cast<uint64_t>(job), ErrorCode::RunnerFailed, "the network output is not an array");
    return;
  }
  const std::vector<float> out = emscripten::convertJSArrayToNumberVector<float>(output);
  run_.steps().finish(static_cast<uint64_t>(job), out);
}

void FieldRun::fail(double job, const std::string& message) {
  run_.steps().fail(static_cast<uint64_t>(job), ErrorCode::RunnerFailed, message);
}

val FieldRun::state() const {
  val o = val::object();
  o.set("finished", run_.steps().finished());
  o.set("done", static_cast<double>(run_.steps().done()));
  o.set("total", static_cast<double>(run_.steps().total()));
  o.set("inFlight", run_.steps().in_flight());
  return o;
}

val FieldRun::report() {
  val r(run_.report());  // throws unless the run succeeded (native patching writes chi here)
  val list = val::array();
  for (const std::string& w : run_.warnings()) list.call<void>("push", w);
  r.set("warning", run_.warning());
  r.set("warnings", list);
  // The steps that ran (an iterative method that converged early ran fewer than its plan's at most).
  if (run_.kind() != Request::Kind::Network) r.set("stepsRun", static_cast<double>(run_.steps_run()));
  return r;
}

val FieldRun::result() const { return copy_out(run_.chi()); }

}  // namespace tessera::js
