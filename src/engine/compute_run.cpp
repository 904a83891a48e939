#include "engine/compute_run.h"

#include <algorithm>

#include "tessera/common/error.h"

namespace tessera {

ComputeRun::ComputeRun(std::unique_ptr<Iterative> computation, std::function<void()> done)
    : PatchSteps(1, 1), computation_(std::move(computation)), done_(std::move(done)), t0_(std::chrono::steady_clock::now()) {}

std::optional<PatchSteps::Patch> ComputeRun::next(std::span<float>) { return std::nullopt; }

void ComputeRun::finish(uint64_t job, std::span<const float>) {
  throw Error(ErrorCode::Internal, "a computation hands out no patch (finish " + std::to_string(job) + ")");
}

void ComputeRun::fail(uint64_t job, ErrorCode, const std::string&) {
  throw Error(ErrorCode::Internal, "a computation hands out no patch (fail " + std::to_string(job) + ")");
}

bool ComputeRun::step() {
  if (written_ || scheduler_.cancelled()) return false;
  computation_->step();
  if (computation_->finished()) {
    done_();
    written_ = true;
    seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }
  return true;
}

bool ComputeRun::finished() const { return written_ || scheduler_.cancelled(); }

uint64_t ComputeRun::done() const { return computation_->steps_done(); }

uint64_t ComputeRun::total() const { return written_ ? computation_->steps_done() : computation_->total_steps(); }

RunReport ComputeRun::report() const {
  if (!written_) {
    throw Error(ErrorCode::Cancelled, computation_->name() + " cancelled after " + std::to_string(computation_->steps_done()) +
                                          " of " + std::to_string(computation_->total_steps()) + " steps");
  }
  RunReport r;
  r.tiles_total = r.tiles_run = 1;
  r.concurrency = r.max_in_flight = 1;
  r.wall_seconds = seconds_;
  return r;
}

std::unique_ptr<ComputeRun> method_run(std::unique_ptr<MethodComputation> computation, std::span<float> chi) {
  MethodComputation* c = computation.get();
  return std::make_unique<ComputeRun>(std::move(computation), [c, chi] {
    const std::vector<float> out = c->take_result();
    if (out.size() != chi.size()) throw Error(ErrorCode::Internal, c->name() + " returned the wrong size");
    std::copy(out.begin(), out.end(), chi.begin());
  });
}

}  // namespace tessera
