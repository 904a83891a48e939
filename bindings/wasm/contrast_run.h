// SWI (from wrapped phase) and R2* runs that JavaScript drives step by step like a FieldRun (runtime/driver.js
// runSteps): the inputs are filled through views, start() checks them and builds the computation, then each step()
// does one step of it (ComputeRun) and the event loop gets a turn in between (progress, cancel).
#pragma once

#include <emscripten/val.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/compute_run.h"
#include "tessera/contrast/r2star.h"
#include "tessera/pipeline/swi_from_phase.h"

namespace tessera::js {

using emscripten::val;

class ContrastRun {
 public:
  // kind "swi" (request: swi_request_from) or "r2star" (te, r2star: {method}); geometry as the other runs take it;
  // echoes = the request's TEs; mask_given: the mask view is read (else SWI makes a brain mask, R2* fits every voxel
  // whose first echo is > 0). Throws Error(InvalidArgument) naming a bad option or kind.
  ContrastRun(const val& geometry, const std::string& kind, const val& request, bool mask_given);
  // The run's memory plan (plan_swi / plan_r2star as a pipeline's plan object); the constructor refused one that does
  // not fit (Error BudgetExceeded with the largest volume that does).
  val plan() const;
  // Views on the heap, valid until the next allocating call: fill them at once.
  val magnitude_view();
  val phase_view();  // SWI only
  val mask_view();
  // Checks the inputs and builds the computation (Error InvalidArgument naming the problem).
  void start();

  val next() const { return val::null(); }  // no patch: a computation only steps
  bool step();
  void cancel();
  val state() const;
  val report();
  // The main output (SWI, or R2*) as a standalone Float32Array; only after a successful report().
  val result() const;
  // SWI: {swi, minIp, magnitude (RSS), phase (high-passed, rad), phaseMask, mask, unwrappedPhase}; R2*: {r2star,
  // t2star, s0, residual}; only after a successful report().
  val outputs() const;
  uint32_t echoes() const { return static_cast<uint32_t>(te_s_.size()); }

 private:
  Geometry geometry_;
  std::string kind_;
  bool mask_given_;
  unsigned threads_ = 1;
  std::vector<double> te_s_;
  SwiRequest swi_request_;
  PipelinePlan plan_;
  R2starParams r2star_params_;
  std::vector<float> magnitude_, phase_;
  std::vector<uint8_t> mask_;
  SwiFromPhase* swi_ = nullptr;
  R2star* r2star_ = nullptr;
  SwiRunResult swi_result_;
  R2starResult r2star_result_;
  std::unique_ptr<ComputeRun> run_;
  bool succeeded_ = false;
};

}  // namespace tessera::js
