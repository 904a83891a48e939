#include "engine/task_run.h"

#include <algorithm>

#include "tessera/common/error.h"

namespace tessera {

TaskRun::TaskRun(uint64_t units, uint32_t in_flight, uint64_t calls_per_unit, Start start, Done done, RunReport base)
    : PatchSteps(units, in_flight),
      start_(std::move(start)),
      done_(std::move(done)),
      base_(std::move(base)),
      calls_total_(units * calls_per_unit),
      t0_(std::chrono::steady_clock::now()) {}

std::optional<PatchSteps::Patch> TaskRun::next(std::span<float>) {
  for (;;) {
    if (ready_.empty()) {
      const std::optional<uint64_t> fresh = scheduler_.try_acquire();
      if (!fresh) return std::nullopt;
      try {
        units_[*fresh] = start_(*fresh);
      } catch (...) {
        scheduler_.fail(*fresh, std::current_exception());
        throw;
      }
      ready_.push_back(*fresh);
    }
    if (scheduler_.cancelled() || scheduler_.error()) return std::nullopt;
    const uint64_t job = ready_.front();
    ready_.erase(ready_.begin());
    Unit& unit = *units_.at(job);
    NetworkCall* call = nullptr;
    try {
      call = unit.task.advance();
      if (!call) {
        done_(unit, unit.task.take_result());
        units_.erase(job);
        scheduler_.complete(job);
        seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
        continue;
      }
    } catch (...) {
      units_.erase(job);
      scheduler_.fail(job, std::current_exception());
      throw;
    }
    Patch p;
    p.job = job;
    p.tile = unit.tile;
    p.network = call->network;
    p.input = call->input;
    p.shape = call->shape;
    p.extras = call->extras;
    return p;
  }
}

void TaskRun::finish(uint64_t job, std::span<const float> output) {
  const auto it = units_.find(job);
  if (it == units_.end() || !it->second->task.pending()) {
    throw Error(ErrorCode::InvalidArgument, "no network call " + std::to_string(job) + " is out in this run");
  }
  try {
    it->second->task.answer(std::vector<float>(output.begin(), output.end()));
  } catch (...) {
    units_.erase(it);
    scheduler_.fail(job, std::current_exception());
    return;
  }
  ++calls_done_;
  ready_.push_back(job);
}

void TaskRun::fail(uint64_t job, ErrorCode code, const std::string& message) {
  const auto it = units_.find(job);
  if (it == units_.end() || !it->second->task.pending()) {
    throw Error(ErrorCode::InvalidArgument, "no network call " + std::to_string(job) + " is out in this run");
  }
  const std::string where = it->second->task.pending()->where;
  units_.erase(it);
  scheduler_.fail(job, std::make_exception_ptr(Error(code, where + ": " + message)));
}

RunReport TaskRun::report() const {
  check_succeeded("network calls");
  RunReport r = base_;
  r.concurrency = scheduler_.concurrency();
  r.max_in_flight = scheduler_.max_in_flight();
  r.wall_seconds = seconds_;
  return r;
}

}  // namespace tessera
