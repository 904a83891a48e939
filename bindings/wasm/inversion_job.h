// An inversion whose driver calls its network from inside an algorithm (physics loops, native patching, the
// phase networks): it runs on a C++ driver thread behind a Bridge, and JavaScript serves its network requests.
#pragma once

#include <emscripten/val.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "internal/job.h"
#include "volume.h"

namespace tessera::js {

using emscripten::val;

// An inversion running on a driver thread; JavaScript polls it and serves its network requests.
class InversionJob {
 public:
  // plan is the plan object of this request (from plan()); the run obeys it.
  InversionJob(std::shared_ptr<Volume> volume, const val& request, const val& plan);
  // {state, done, total, inFlight, requests: [{id, network, dims, input}]}; inputs are heap views.
  val poll();
  void respond(double id, const val& output);
  void fail(double id, const std::string& message);
  void cancel();
  // The report; throws the run's error as a TesseraError.
  val report();
  // View on chi (valid until the next allocating call); only after success.
  val result_view();
  std::string warning() const { return warning_; }
  uint32_t network_count() const { return networks_; }

 private:
  std::shared_ptr<Volume> volume_;  // kept alive while the driver thread reads it
  InversionRequest request_;
  std::vector<float> chi_;
  std::string warning_;
  uint32_t networks_ = 1;
  std::unique_ptr<Job> job_;
};

}  // namespace tessera::js
