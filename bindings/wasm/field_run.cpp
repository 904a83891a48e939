#include "field_run.h"

#include <emscripten/val.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "conversions.h"
#include "internal/native_patch_run.h"
#include "internal/step_run.h"
#include "tessera/error.h"

namespace tessera::js {

// What FieldRun drives, whichever run it is.
class FieldRun::Steps {
 public:
  virtual ~Steps() = default;
  virtual const TensorShape& input_shape() const = 0;
  virtual std::optional<std::pair<uint64_t, uint64_t>> next(std::span<float> input) = 0;  // {job, grid tile}
  virtual void finish(uint64_t job, std::span<const float> output) = 0;
  virtual void fail(uint64_t job, const std::string& message) = 0;
  virtual void cancel() = 0;
  virtual bool finished() const = 0;
  virtual uint64_t done() const = 0;
  virtual uint64_t total() const = 0;
  virtual uint32_t in_flight() const = 0;
  virtual RunReport report() const = 0;  // throws the run's error
};

namespace {

class TiledSteps : public FieldRun::Steps {
 public:
  TiledSteps(const Volume& v, const PreparedRun& p, std::span<float> chi)
      : run_(v.geo(), v.field(), v.mask(), request_network(p.request), p.plan, network_output_channels(p.request, 0), chi) {}
  const TensorShape& input_shape() const override { return run_.input_shape(); }
  std::optional<std::pair<uint64_t, uint64_t>> next(std::span<float> input) override {
    const auto p = run_.next(input);
    if (!p) return std::nullopt;
    return std::make_pair(p->job, p->tile);
  }
  void finish(uint64_t job, std::span<const float> output) override { run_.finish(job, output); }
  void fail(uint64_t job, const std::string& message) override { run_.fail(job, ErrorCode::RunnerFailed, message); }
  void cancel() override { run_.cancel(); }
  bool finished() const override { return run_.finished(); }
  uint64_t done() const override { return run_.done(); }
  uint64_t total() const override { return run_.total(); }
  uint32_t in_flight() const override { return run_.in_flight(); }
  RunReport report() const override { return run_.report(); }

 private:
  StepRun run_;
};

// AutoQSM / QSMGAN: every patch belongs to the plan's one (whole-volume) tile; chi is written when the run succeeds.
class NativeSteps : public FieldRun::Steps {
 public:
  NativeSteps(const Volume& v, const PreparedRun& p, std::span<float> chi)
      : run_(v.geo(), v.field(), v.mask(),
             p.request.model->algorithm == Algorithm::AutoQsm ? NativePatchRun::Model::AutoQsm : NativePatchRun::Model::Qsmgan,
             p.plan.tiles_in_flight),
        plan_(p.plan),
        chi_(chi),
        t0_(std::chrono::steady_clock::now()) {}
  const TensorShape& input_shape() const override { return run_.input_shape(); }
  std::optional<std::pair<uint64_t, uint64_t>> next(std::span<float> input) override {
    const auto job = run_.next(input);
    if (!job) return std::nullopt;
    return std::make_pair(*job, uint64_t{0});
  }
  void finish(uint64_t job, std::span<const float> output) override { run_.finish(job, output); }
  void fail(uint64_t job, const std::string& message) override { run_.fail(job, ErrorCode::RunnerFailed, message); }
  void cancel() override { run_.cancel(); }
  bool finished() const override { return run_.finished(); }
  uint64_t done() const override { return run_.done(); }
  uint64_t total() const override { return run_.total(); }
  uint32_t in_flight() const override { return run_.in_flight(); }
  RunReport report() const override {
    const std::vector<float> chi = run_.result();
    std::copy(chi.begin(), chi.end(), chi_.begin());
    RunReport r;
    r.tiles_total = r.tiles_run = run_.total();  // the network's own patches
    r.concurrency = plan_.tiles_in_flight;
    r.max_in_flight = plan_.tiles_in_flight;
    r.patch_edge = run_.input_shape().dims[0];
    r.bytes_per_tile = plan_.bytes_per_tile;
    r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    return r;
  }

 private:
  NativePatchRun run_;
  TilePlan plan_;
  std::span<float> chi_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

FieldRun::FieldRun(std::shared_ptr<Volume> volume, const val& request, const val& plan) : volume_(std::move(volume)) {
  const PreparedRun p = prepare_run(*volume_, request, plan);
  if (!runs_in_steps(p.request)) {
    throw Error(ErrorCode::Internal, std::string(p.request.model->name) + " calls its network from inside an algorithm: run it as an InversionJob");
  }
  warning_ = p.warning;
  chi_.assign(volume_->voxel_count(), 0.0f);
  if (p.request.model && p.request.model->kind == ModelKind::NativePatches) {
    run_ = std::make_unique<NativeSteps>(*volume_, p, chi_);
  } else {
    run_ = std::make_unique<TiledSteps>(*volume_, p, chi_);
  }
}

FieldRun::~FieldRun() = default;

val FieldRun::next() {
  if (staging_.empty()) staging_.resize(run_->input_shape().size());
  const auto patch = run_->next(staging_);
  if (!patch) return val::null();
  val o = val::object();
  o.set("job", static_cast<double>(patch->first));
  o.set("tile", static_cast<double>(patch->second));
  val dims = val::array();
  dims.call<void>("push", 1);
  dims.call<void>("push", 1);
  for (uint64_t d : run_->input_shape().dims) dims.call<void>("push", static_cast<double>(d));
  o.set("dims", dims);
  o.set("input", copy_out(std::span<const float>(staging_)));
  return o;
}

void FieldRun::finish(double job, const val& output) {
  if (output["length"].isUndefined()) {
    run_->fail(static_cast<uint64_t>(job), "the network output is not an array");
    return;
  }
  const std::vector<float> out = emscripten::convertJSArrayToNumberVector<float>(output);
  run_->finish(static_cast<uint64_t>(job), out);
}

void FieldRun::fail(double job, const std::string& message) { run_->fail(static_cast<uint64_t>(job), message); }

void FieldRun::cancel() { run_->cancel(); }

val FieldRun::state() const {
  val o = val::object();
  o.set("finished", run_->finished());
  o.set("done", static_cast<double>(run_->done()));
  o.set("total", static_cast<double>(run_->total()));
  o.set("inFlight", run_->in_flight());
  return o;
}

val FieldRun::report() const {
  val r = to_val(run_->report());
  r.set("warning", warning_);
  return r;
}

val FieldRun::result() const {
  run_->report();  // throws unless the run succeeded (and, for native patching, writes chi)
  return copy_out(std::span<const float>(chi_));
}

}  // namespace tessera::js
