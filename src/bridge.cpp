#include "internal/bridge.h"

#include <algorithm>

#include "tessera/error.h"

namespace tessera {

std::vector<float> Bridge::call(uint32_t network, std::span<const float> input, const TensorShape& shape,
                                std::span<const NamedInput> extras) {
  Slot slot;
  std::unique_lock lock(mutex_);
  if (closed_) throw Error(ErrorCode::Cancelled, close_reason_);
  slot.request = Request{next_id_++, network, current_tile(), shape, input, {extras.begin(), extras.end()}};
  posted_.push_back(&slot);
  open_[slot.request.id] = &slot;
  max_open_ = std::max<uint32_t>(max_open_, static_cast<uint32_t>(open_.size()));
  answered_.wait(lock, [&] { return slot.answered || closed_; });
  if (!slot.answered) {  // closed while waiting: the slot dies with this frame, so unregister it
    open_.erase(slot.request.id);
    posted_.erase(std::remove(posted_.begin(), posted_.end(), &slot), posted_.end());
    throw Error(ErrorCode::Cancelled, close_reason_);
  }
  if (slot.failed) throw Error(ErrorCode::RunnerFailed, slot.error);
  return std::move(slot.output);
}

std::vector<Bridge::Request> Bridge::take() {
  std::lock_guard lock(mutex_);
  std::vector<Request> out;
  out.reserve(posted_.size());
  for (Slot* s : posted_) out.push_back(s->request);
  posted_.clear();
  return out;
}

void Bridge::respond(uint64_t id, std::vector<float> output) {
  {
    std::lock_guard lock(mutex_);
    auto it = open_.find(id);
    if (it == open_.end()) return;
    it->second->output = std::move(output);
    it->second->answered = true;
    open_.erase(it);
  }
  answered_.notify_all();
}

void Bridge::fail(uint64_t id, const std::string& message) {
  {
    std::lock_guard lock(mutex_);
    auto it = open_.find(id);
    if (it == open_.end()) return;
    it->second->error = message;
    it->second->failed = true;
    it->second->answered = true;
    open_.erase(it);
  }
  answered_.notify_all();
}

void Bridge::close(const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    if (!closed_) close_reason_ = reason;
    closed_ = true;
  }
  answered_.notify_all();
}

uint32_t Bridge::open_requests() const {
  std::lock_guard lock(mutex_);
  return static_cast<uint32_t>(open_.size());
}

uint32_t Bridge::max_open_requests() const {
  std::lock_guard lock(mutex_);
  return max_open_;
}

}  // namespace tessera
