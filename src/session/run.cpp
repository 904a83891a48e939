#include "session/run.h"

#include "engine/compute_run.h"
#include "networks/runs.h"
#include "tessera/common/error.h"
#include "tessera/common/input_checks.h"

namespace tessera {

namespace {

// Refuses a volume with (or without) a magnitude when the plan was made without (or with) one.
void check_magnitude(const Request& r, const VolumeData& v, const char* what) {
  if ((r.magnitude_echoes > 0) != !v.magnitude.empty()) {
    throw Error(ErrorCode::InvalidArgument, std::string("the plan was made for ") + what + (r.magnitude_echoes ? " with" : " without") +
                                                " a magnitude: call plan() with this request");
  }
}

}  // namespace

Run::Run(PlanHandle held, const VolumeData& v) : plan_(std::move(held)) {
  const Request& r = plan_->request;
  const uint64_t n = v.geometry.voxel_count();
  switch (r.kind()) {
    case Request::Kind::Pipeline: {
      // From multi-echo phase: the volume holds every echo's phase and magnitude; its mask is used when mask_given.
      check_volume(*plan_, v.geometry, v.mask);
      check_magnitude(r, v, "a pipeline");
      auto pipeline = std::make_unique<Pipeline>(v.geometry, v.field, v.magnitude, r.mask_given ? v.mask : std::span<const uint8_t>{},
                                                 r.pipeline());
      pipeline_ = pipeline.get();
      chi_.assign(n, 0.0f);
      steps_ = std::make_unique<ComputeRun>(std::move(pipeline), [this] {
        pipeline_result_ = pipeline_->take_result();
        if (!pipeline_result_.chi.empty()) chi_ = pipeline_result_.chi;
      });
      return;
    }
    case Request::Kind::Method: {
      check_volume(*plan_, v.geometry, v.mask);
      check_magnitude(r, v, "a run");
      if (!r.field_units_given) {
        if (const std::string refusal = implausible_ppm_text(v.field, v.mask); !refusal.empty()) throw Error(ErrorCode::InvalidArgument, refusal);
      }
      if (std::string w = voxel_size_warning(v.geometry); !w.empty()) warnings_.push_back(std::move(w));
      chi_.assign(n, 0.0f);
      const MethodRequest& m = r.method();
      steps_ = method_run(start_method(m.method, v.geometry, v.field, v.mask, v.magnitude, m.params, m.threads), chi_);
      return;
    }
    case Request::Kind::Network: {
      const PreparedRun p = prepare_run(*plan_, v);
      if (!is_phase_network(p.request)) {
        // A field input: the plausibility checks of the classical methods (NeXtQSM and AutoQSM take the total field).
        const ModelSpec* m = p.request.model;
        const bool total = m && (m->algorithm == Algorithm::NextQsm || m->algorithm == Algorithm::AutoQsm);
        if (!r.field_units_given) {
          const std::string refusal = total ? implausible_total_ppm_text(v.field, v.mask) : implausible_ppm_text(v.field, v.mask);
          if (!refusal.empty()) throw Error(ErrorCode::InvalidArgument, refusal);
        }
        if (std::string w = voxel_size_warning(v.geometry); !w.empty()) warnings_.push_back(std::move(w));
      }
      if (!p.warning.empty()) warnings_.push_back(p.warning);
      chi_.assign(n, 0.0f);
      steps_ = start_run(p.request, p.plan, v.field, v.mask, v.magnitude, chi_, r.run_threads);
      return;
    }
  }
}

RunReport Run::report() {
  RunReport report = steps_->report();  // throws unless the run succeeded (native patching writes chi here)
  succeeded_ = true;
  return report;
}

std::span<const float> Run::chi() const {
  if (!succeeded_) throw Error(ErrorCode::Internal, "no result: report() has not confirmed a successful run");
  return chi_;
}

std::vector<std::string> Run::warnings() const {
  std::vector<std::string> all = warnings_;
  if (pipeline_ && succeeded_) all.insert(all.end(), pipeline_result_.warnings.begin(), pipeline_result_.warnings.end());
  return all;
}

std::string Run::warning() const {
  std::string joined;
  for (const std::string& w : warnings()) joined += (joined.empty() ? "" : "; ") + w;
  return joined;
}

const PipelineResult& Run::intermediates() const {
  if (!pipeline_) throw Error(ErrorCode::Internal, "no intermediates: not a pipeline run");
  return succeeded_ ? pipeline_result_ : pipeline_->intermediates();
}

const PipelineResult& Run::outputs() const {
  if (!succeeded_ || !pipeline_) throw Error(ErrorCode::Internal, "no outputs: a pipeline's report() has not confirmed its success");
  return pipeline_result_;
}

}  // namespace tessera
