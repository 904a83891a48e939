#include "contrast_run.h"

#include <emscripten/val.h>

#include "conversions.h"
#include "val_fields.h"

#include <algorithm>
#include "tessera/common/error.h"

namespace tessera::js {

namespace {

std::vector<double> contrast_run_te(const val& request) {
  std::vector<double> te;
  const val v = request["te"];
  if (v.isNumber()) return {v.as<double>()};
  if (v.isUndefined() || v.isNull() || v["length"].isUndefined()) {
    throw Error(ErrorCode::InvalidArgument, "te: give the echo times in seconds, one per echo (e.g. [0.004, 0.008, 0.012])");
  }
  for (unsigned i = 0; i < v["length"].as<unsigned>(); ++i) te.push_back(v[i].as<double>());
  return te;
}

}  // namespace

ContrastRun::ContrastRun(const val& geometry, const std::string& kind, const val& request, bool mask_given)
    : geometry_(geometry_from(geometry)), kind_(kind), mask_given_(mask_given) {
  validate_geometry(geometry_);
  if (kind == "swi") {
    swi_request_ = swi_request_from(request);
    te_s_ = swi_request_.te_s;
  } else if (kind == "r2star") {
    te_s_ = contrast_run_te(request);
    r2star_params_ = r2star_params_from(request);
    threads_ = std::max<uint32_t>(1, count(request, "hardwareThreads", 1));
  } else {
    throw Error(ErrorCode::InvalidArgument, "a contrast run is swi or r2star, got '" + kind + "'");
  }
  if (te_s_.empty()) throw Error(ErrorCode::InvalidArgument, kind + ": no echo times given; give one TE (seconds) per echo");
  // The memory plan, before any input is allocated: a run that does not fit is refused here.
  plan_ = kind == "swi" ? plan_swi(geometry_, swi_request_, mask_given, Target::Wasm)
                        : plan_r2star(geometry_, static_cast<uint32_t>(te_s_.size()), r2star_params_, threads_, Target::Wasm);
  if (!plan_.feasible) throw Error(ErrorCode::BudgetExceeded, plan_.message);
  const uint64_t n = geometry_.voxel_count();
  magnitude_.assign(n * te_s_.size(), 0.0f);
  if (kind == "swi") phase_.assign(n * te_s_.size(), 0.0f);
  if (mask_given) mask_.assign(n, 0);
}

val ContrastRun::plan() const { return pipeline_plan_to_val(plan_, kind_ == "swi" ? swi_request_.threads : threads_); }

val ContrastRun::magnitude_view() { return val(emscripten::typed_memory_view(magnitude_.size(), magnitude_.data())); }
val ContrastRun::phase_view() {
  if (kind_ != "swi") throw Error(ErrorCode::Internal, "an R2* run takes no phase");
  return val(emscripten::typed_memory_view(phase_.size(), phase_.data()));
}
val ContrastRun::mask_view() {
  if (!mask_given_) throw Error(ErrorCode::Internal, "this run was made without a mask");
  return val(emscripten::typed_memory_view(mask_.size(), mask_.data()));
}

void ContrastRun::start() {
  if (run_) throw Error(ErrorCode::Internal, "start() called twice");
  if (kind_ == "swi") {
    auto s = std::make_unique<SwiFromPhase>(geometry_, phase_, magnitude_, mask_, swi_request_);
    swi_ = s.get();
    run_ = std::make_unique<ComputeRun>(std::move(s), [this] { swi_result_ = swi_->take_result(); });
  } else {
    auto r = std::make_unique<R2star>(geometry_, magnitude_, te_s_, mask_, r2star_params_, threads_);
    r2star_ = r.get();
    run_ = std::make_unique<ComputeRun>(std::move(r), [this] { r2star_result_ = r2star_->take_result(); });
  }
}

bool ContrastRun::step() {
  if (!run_) throw Error(ErrorCode::Internal, "step() before start()");
  return run_->step();
}

void ContrastRun::cancel() {
  if (run_) run_->cancel();
}

val ContrastRun::state() const {
  val o = val::object();
  o.set("finished", run_ ? run_->finished() : false);
  o.set("done", run_ ? static_cast<double>(run_->done()) : 0.0);
  o.set("total", run_ ? static_cast<double>(run_->total()) : 0.0);
  o.set("inFlight", 0);
  return o;
}

val ContrastRun::report() {
  if (!run_) throw Error(ErrorCode::Internal, "report() before start()");
  val r(run_->report());
  succeeded_ = true;
  r.set("warning", std::string());
  return r;
}

val ContrastRun::result() const {
  if (!succeeded_) throw Error(ErrorCode::Internal, "no result: report() has not confirmed a successful run");
  return kind_ == "swi" ? copy_out(std::span<const float>(swi_result_.swi.swi))
                        : copy_out(std::span<const float>(r2star_result_.r2star));
}

val ContrastRun::outputs() const {
  if (!succeeded_) throw Error(ErrorCode::Internal, "no outputs: report() has not confirmed a successful run");
  val o = val::object();
  if (kind_ == "swi") {
    o.set("swi", copy_out(std::span<const float>(swi_result_.swi.swi)));
    o.set("minIp", copy_out(std::span<const float>(swi_result_.min_ip)));
    o.set("magnitude", copy_out(std::span<const float>(swi_result_.swi.magnitude)));
    o.set("phase", copy_out(std::span<const float>(swi_result_.swi.phase_rad)));
    o.set("phaseMask", copy_out(std::span<const float>(swi_result_.swi.phase_mask)));
    o.set("mask", copy_out(std::span<const uint8_t>(swi_result_.mask)));
    o.set("unwrappedPhase", copy_out(std::span<const float>(swi_result_.unwrapped_rad)));
  } else {
    o.set("r2star", copy_out(std::span<const float>(r2star_result_.r2star)));
    o.set("t2star", copy_out(std::span<const float>(r2star_result_.t2star)));
    o.set("s0", copy_out(std::span<const float>(r2star_result_.s0)));
    o.set("residual", copy_out(std::span<const float>(r2star_result_.residual)));
    o.set("method", std::string(r2star_method_name(r2star_params_.method)));
  }
  return o;
}

}  // namespace tessera::js
