#include "internal/method_run.h"

#include <algorithm>

#include "tessera/error.h"

namespace tessera {

MethodRun::MethodRun(std::unique_ptr<MethodComputation> computation, std::span<float> chi)
    : PatchSteps(1, 1), computation_(std::move(computation)), chi_(chi), t0_(std::chrono::steady_clock::now()) {}

std::optional<PatchSteps::Patch> MethodRun::next(std::span<float>) { return std::nullopt; }

void MethodRun::finish(uint64_t job, std::span<const float>) {
  throw Error(ErrorCode::Internal, "a method run hands out no patch (finish " + std::to_string(job) + ")");
}

void MethodRun::fail(uint64_t job, ErrorCode, const std::string&) {
  throw Error(ErrorCode::Internal, "a method run hands out no patch (fail " + std::to_string(job) + ")");
}

bool MethodRun::step() {
  if (written_ || scheduler_.cancelled()) return false;
  computation_->step();
  if (computation_->finished()) {
    std::vector<float> chi = computation_->take_result();
    if (chi.size() != chi_.size()) throw Error(ErrorCode::Internal, computation_->name() + " returned the wrong size");
    std::copy(chi.begin(), chi.end(), chi_.begin());
    written_ = true;
    seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }
  return true;
}

bool MethodRun::finished() const { return written_ || scheduler_.cancelled(); }

uint64_t MethodRun::done() const { return computation_->steps_done(); }

uint64_t MethodRun::total() const { return written_ ? computation_->steps_done() : computation_->total_steps(); }

RunReport MethodRun::report() const {
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

}  // namespace tessera
