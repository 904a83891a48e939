#include "field_run.h"

#include <emscripten/val.h>


#include "conversions.h"
#include "engine/compute_run.h"
#include "networks/runs.h"
#include "tessera/common/error.h"
#include "tessera/common/input_checks.h"

namespace tessera::js {

FieldRun::FieldRun(std::shared_ptr<Volume> volume, PlanHandle plan) : volume_(std::move(volume)), plan_(std::move(plan)) {
  const Volume& v = *volume_;
  const ParsedRequest& r = plan_->request;
  if (r.kind == ParsedRequest::Kind::Pipeline) {
    // From multi-echo phase: the volume holds every echo's phase and magnitude; its mask is used when maskGiven.
    check_volume(*plan_, v);
    if ((r.magnitude_echoes > 0) != !v.magnitude().empty()) {
      throw Error(ErrorCode::InvalidArgument, std::string("the plan was made for a pipeline ") + (r.magnitude_echoes ? "with" : "without") +
                                                  " a magnitude: call plan() with this request");
    }
    auto pipeline = std::make_unique<Pipeline>(v.geo(), v.field(), v.magnitude(), r.mask_given ? v.mask() : std::span<const uint8_t>{}, r.pipeline);
    pipeline_ = pipeline.get();
    chi_.assign(v.voxel_count(), 0.0f);
    run_ = std::make_unique<ComputeRun>(std::move(pipeline), [this] {
      pipeline_result_ = pipeline_->take_result();
      if (!pipeline_result_.chi.empty()) chi_ = pipeline_result_.chi;
    });
    return;
  }
  if (r.kind == ParsedRequest::Kind::Method) {
    check_volume(*plan_, v);
    if ((r.magnitude_echoes > 0) != !v.magnitude().empty()) {
      throw Error(ErrorCode::InvalidArgument, std::string("the plan was made for a run ") + (r.magnitude_echoes ? "with" : "without") +
                                                  " a magnitude: call plan() with this request");
    }
    if (!r.field_units_given) {
      if (const std::string refusal = implausible_ppm_text(v.field(), v.mask()); !refusal.empty()) throw Error(ErrorCode::InvalidArgument, refusal);
    }
    warnings_ = {voxel_size_warning(v.geo())};
    if (warnings_[0].empty()) warnings_.clear();
    chi_.assign(v.voxel_count(), 0.0f);
    run_ = method_run(start_method(r.method.method, v.geo(), v.field(), v.mask(), v.magnitude(), r.method.params, r.method.threads), chi_);
    return;
  }
  const PreparedRun p = prepare_run(v, *plan_);
  if (!p.warning.empty()) warnings_.push_back(p.warning);
  chi_.assign(v.voxel_count(), 0.0f);
  run_ = start_run(p.request, p.plan, v.field(), v.mask(), v.magnitude(), chi_, r.run_threads);
}

bool FieldRun::step() { return run_->step(); }

val FieldRun::outputs() const {
  if (!succeeded_ || !pipeline_) throw Error(ErrorCode::Internal, "no outputs: a pipeline's report() has not confirmed its success");
  return pipeline_result_to_val(pipeline_result_);
}

val FieldRun::intermediates() const {
  if (!pipeline_) throw Error(ErrorCode::Internal, "no intermediates: not a pipeline run");
  return pipeline_result_to_val(succeeded_ ? pipeline_result_ : pipeline_->intermediates());
}

std::string FieldRun::warning() const {
  std::string joined;
  for (const std::string& w : warnings_) joined += (joined.empty() ? "" : "; ") + w;
  return joined;
}

val FieldRun::next() {
  if (staging_.size() != run_->input_shape().size()) staging_.resize(run_->input_shape().size());
  const auto patch = run_->next(staging_);
  if (!patch) return val::null();
  // Not one struct: the patch's job, tile and network, its shape, a view on its input (the run's own buffer, or this
  // run's staging buffer) and its further named inputs.
  const bool owned = !patch->input.empty();
  const TensorShape& shape = owned ? patch->shape : run_->input_shape();
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
    run_->fail(static_cast<uint64_t>(job), ErrorCode::RunnerFailed, "the network output is not an array");
    return;
  }
  const std::vector<float> out = emscripten::convertJSArrayToNumberVector<float>(output);
  run_->finish(static_cast<uint64_t>(job), out);
}

void FieldRun::fail(double job, const std::string& message) {
  run_->fail(static_cast<uint64_t>(job), ErrorCode::RunnerFailed, message);
}

void FieldRun::cancel() { run_->cancel(); }

val FieldRun::state() const {
  val o = val::object();
  o.set("finished", run_->finished());
  o.set("done", static_cast<double>(run_->done()));
  o.set("total", static_cast<double>(run_->total()));
  o.set("inFlight", run_->in_flight());
  return o;
}

val FieldRun::report() {
  val r(run_->report());  // throws unless the run succeeded (native patching writes chi here)
  succeeded_ = true;
  std::vector<std::string> all = warnings_;
  if (pipeline_) all.insert(all.end(), pipeline_result_.warnings.begin(), pipeline_result_.warnings.end());
  std::string joined;
  val list = val::array();
  for (const std::string& w : all) {
    joined += (joined.empty() ? "" : "; ") + w;
    list.call<void>("push", w);
  }
  r.set("warning", joined);
  r.set("warnings", list);
  // The steps that ran (an iterative method that converged early ran fewer than its plan's at most).
  if (plan_->request.kind != ParsedRequest::Kind::Network) r.set("stepsRun", static_cast<double>(run_->done()));
  return r;
}

val FieldRun::result() const {
  if (!succeeded_) throw Error(ErrorCode::Internal, "no result: report() has not confirmed a successful run");
  return copy_out(std::span<const float>(chi_));
}

}  // namespace tessera::js
