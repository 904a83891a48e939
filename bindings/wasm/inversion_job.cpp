#include "inversion_job.h"

#include <emscripten/val.h>

#include "conversions.h"
#include "tessera/error.h"

namespace tessera::js {

InversionJob::InversionJob(std::shared_ptr<Volume> volume, const val& request, const val& plan)
    : volume_(std::move(volume)) {
  PreparedRun run = prepare_run(*volume_, request, plan);
  request_ = run.request;
  warning_ = run.warning;
  networks_ = tessera::network_count(request_);
  chi_.assign(volume_->voxel_count(), 0.0f);
  RunOptions options;
  options.threads = std::max<uint32_t>(1, run.plan.tiles_in_flight);
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
  val o = val::object();  // the job's state, not a struct
  const Job::State s = job_->state();
  o.set("state", std::string(s == Job::State::Running ? "running" : s == Job::State::Succeeded ? "succeeded" : "failed"));
  o.set("done", static_cast<double>(job_->done()));
  o.set("total", static_cast<double>(job_->total()));
  o.set("inFlight", job_->bridge().open_requests());
  o.set("requests", array_of(job_->bridge().take()));
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
  val r(job_->report());
  r.set("warning", warning_);
  r.set("maxOpenRequests", job_->bridge().max_open_requests());
  return r;
}

val InversionJob::result_view() {
  if (job_->state() != Job::State::Succeeded) throw Error(ErrorCode::InvalidArgument, "no result: the run has not succeeded");
  return val(emscripten::typed_memory_view(chi_.size(), chi_.data()));
}

}  // namespace tessera::js
