// The bridge between C++ driver threads and an asynchronous network executor (in the browser: the
// JavaScript worker pool). A driver thread calling BridgeRunner::run posts a request and blocks on
// shared memory; the thread that owns the executor takes requests, runs them elsewhere and answers.
// This lets every C++ driver (tiled, whole volume, physics loops) call networks synchronously while
// JavaScript callbacks stay on the one thread that entered from JavaScript.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "tessera/runner.h"

namespace tessera {

class Bridge {
 public:
  struct Request {
    uint64_t id = 0;
    uint32_t network = 0;  // which network (NeXtQSM has two)
    int64_t tile = -1;     // grid index of the tile the call belongs to (current_tile()), -1 for none
    TensorShape shape;
    std::span<const float> input;  // valid until the request is answered
    std::vector<NamedInput> extras;  // further inputs of multi-input networks (their data: as input)
  };

  // Posts a request and blocks until it is answered; returns the output.
  // Throws Error(RunnerFailed) with the executor's message on failure, Error(Cancelled) after close().
  std::vector<float> call(uint32_t network, std::span<const float> input, const TensorShape& shape,
                          std::span<const NamedInput> extras = {});

  // Requests posted since the last take (executor side). Each stays valid until answered.
  std::vector<Request> take();
  // Answers a request with the network's output (executor side). Unknown ids are ignored.
  void respond(uint64_t id, std::vector<float> output);
  // Answers a request with a failure message (executor side).
  void fail(uint64_t id, const std::string& message);
  // Fails every open and future request with Error(Cancelled): unblocks all waiting threads.
  void close(const std::string& reason);

  // Requests posted and not yet answered.
  uint32_t open_requests() const;
  // The most requests that were open at once.
  uint32_t max_open_requests() const;

 private:
  struct Slot {
    Request request;
    bool answered = false;
    bool failed = false;
    std::vector<float> output;
    std::string error;
  };
  mutable std::mutex mutex_;
  std::condition_variable answered_;
  std::deque<Slot*> posted_;        // not yet taken
  std::map<uint64_t, Slot*> open_;  // posted and not answered
  uint64_t next_id_ = 1;
  uint32_t max_open_ = 0;
  bool closed_ = false;
  std::string close_reason_;
};

// A PatchRunner whose network runs behind a Bridge.
class BridgeRunner : public PatchRunner {
 public:
  BridgeRunner(Bridge& bridge, uint32_t network, uint32_t output_channels = 1)
      : bridge_(bridge), network_(network), output_channels_(output_channels) {}
  std::vector<float> run(std::span<const float> input, const TensorShape& shape) override {
    return bridge_.call(network_, input, shape);
  }
  std::vector<float> run_named(std::span<const float> input, const TensorShape& shape,
                               std::span<const NamedInput> extras) override {
    return bridge_.call(network_, input, shape, extras);
  }
  uint32_t output_channels() const override { return output_channels_; }

 private:
  Bridge& bridge_;
  uint32_t network_;
  uint32_t output_channels_;
};

}  // namespace tessera
