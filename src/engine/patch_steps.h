// What every run driven from outside shares (StepRun: tiled and whole-volume field -> χ; NativePatchRun: AutoQSM /
// QSMGAN): next() hands out a gathered patch while fewer than the allowed patches are in flight, finish() takes a
// network output, fail() stops new patches, report() says how it ended. A TileScheduler counts what is in flight.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "engine/scheduler.h"
#include "tessera/engine/driver.h"
#include "tessera/common/error.h"
#include "tessera/engine/runner.h"

namespace tessera {

class PatchSteps {
 public:
  struct Patch {
    uint64_t job = 0;   // what finish()/fail() take
    uint64_t tile = 0;  // the plan.grid tile it belongs to
    uint32_t network = 0;  // which network runs it (NeXtQSM: 0 = BF, 1 = VJP)
    // Runs that own their inputs (TaskRun; StepRun for a patch shrunk below input_shape()) set these, valid until
    // this job is finished or failed: the input in network layout, its shape and further named inputs. Empty input:
    // next() gathered it into the caller's buffer, of input_shape().
    std::span<const float> input;
    TensorShape shape;
    std::span<const NamedInput> extras;
  };
  virtual ~PatchSteps() = default;

  // Shape of the patches next() gathers into the caller's buffer (Patch::input carries its own).
  const TensorShape& input_shape() const { return input_shape_; }

  // Gathers the next patch into input and hands it out; nothing while the allowed patches are out, after the last,
  // or once the run stopped (first failure, cancel).
  // input.size() == input_shape().size().
  virtual std::optional<Patch> next(std::span<float> input) = 0;
  // Takes a handed-out patch's network output; a wrong length fails the run naming the patch.
  // job came from next() and was neither finished nor failed.
  virtual void finish(uint64_t job, std::span<const float> output) = 0;
  // Fails a handed-out patch: no new patch starts; report() throws this error once none is out.
  // job came from next() and was neither finished nor failed.
  virtual void fail(uint64_t job, ErrorCode code, const std::string& message) = 0;
  // Does one step of the run's own computation (an iteration of a classical method) on the calling thread; false when
  // it has none to do now. A driver calls it after handing out every patch next() gives, and lets its caller breathe
  // (a cancel get in) between two steps. Runs that only hand out patches compute in next() and finish(): false.
  virtual bool step() { return false; }
  // Stops handing out patches (and steps); those out may still be finished.
  virtual void cancel() { scheduler_.cancel(); }

  // No patch out and none will be handed out.
  virtual bool finished() const { return scheduler_.finished(); }
  // Work units (patches, or steps) done and planned.
  virtual uint64_t done() const { return scheduler_.done(); }
  virtual uint64_t total() const { return scheduler_.total(); }
  uint32_t in_flight() const { return scheduler_.in_flight(); }

  // The report of a finished run, its output written. Throws its first error (the patch named), or Error(Cancelled).
  // finished() is true.
  virtual RunReport report() const = 0;

 protected:
  PatchSteps(uint64_t total, uint32_t concurrency) : scheduler_(total, concurrency) {}
  // Throws unless the run finished with every job done: its first error, or Error(Cancelled) ("cancelled after N of
  // M <unit>").
  void check_succeeded(const char* unit) const {
    if (!finished()) throw Error(ErrorCode::Internal, "the run has patches out or to hand out: finish it first");
    if (std::exception_ptr error = scheduler_.error()) std::rethrow_exception(error);
    if (done() < total()) {
      throw Error(ErrorCode::Cancelled,
                  "cancelled after " + std::to_string(done()) + " of " + std::to_string(total()) + " " + unit);
    }
  }

  TileScheduler scheduler_;
  TensorShape input_shape_;
};

}  // namespace tessera
