// An algorithm that calls networks from the middle of its computation (the physics loops, the phase networks), written
// as a C++20 coroutine: it computes, and at each network call (co_await NetworkCall{...}) it suspends until whoever
// drives it runs the network and resumes it with the output. Natively drive() answers from PatchRunners inline; on the
// step engine TaskRun (internal/task_run.h) hands the call out as a patch and resumes the task when the output comes
// back. No thread waits on another, nothing polls.
#pragma once

#if __has_include(<coroutine>)
#include <coroutine>
namespace tessera::coro {
using std::coroutine_handle;
using std::suspend_always;
}  // namespace tessera::coro
#else
#include <experimental/coroutine>  // libc++ 14 (Emscripten 3.1.6): the pre-standard header, same machinery
namespace tessera::coro {
using std::experimental::coroutine_handle;
using std::experimental::suspend_always;
}  // namespace tessera::coro
#endif

#include <cstdint>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tessera/common/error.h"
#include "tessera/engine/runner.h"

namespace tessera {

// One network call of a task: network index (NeXtQSM: 0 = BF, 1 = VJP), the input in network layout, further named
// inputs (views on the task's own buffers, valid until the call is answered), and what the output must hold.
struct NetworkCall {
  uint32_t network = 0;
  TensorShape shape;
  TensorShape output_shape;
  std::vector<float> input;
  std::vector<NamedInput> extras;
  std::string where;  // how messages name the call: "lpcnn: network (call 2)"
};

class NetworkTask {
 public:
  struct promise_type;
  using Handle = coro::coroutine_handle<promise_type>;

  struct promise_type {
    std::optional<NetworkCall> call;  // posted, not answered yet
    std::vector<float> output;        // the answer to the last call
    std::vector<float> result;        // what the task returned
    std::exception_ptr error;

    NetworkTask get_return_object() { return NetworkTask(Handle::from_promise(*this)); }
    coro::suspend_always initial_suspend() noexcept { return {}; }
    coro::suspend_always final_suspend() noexcept { return {}; }
    void return_value(std::vector<float> v) { result = std::move(v); }
    void unhandled_exception() { error = std::current_exception(); }

    // co_await NetworkCall{...}: posts the call and suspends; resumes with its output (length checked).
    struct Awaiter {
      promise_type* p;
      bool await_ready() const noexcept { return false; }
      void await_suspend(Handle) const noexcept {}
      std::vector<float> await_resume() const { return std::move(p->output); }
    };
    Awaiter await_transform(NetworkCall c) {
      call = std::move(c);
      return Awaiter{this};
    }
  };

  NetworkTask() = default;
  explicit NetworkTask(Handle h) : h_(h) {}
  NetworkTask(NetworkTask&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  NetworkTask& operator=(NetworkTask&& o) noexcept {
    if (this != &o) {
      if (h_) h_.destroy();
      h_ = std::exchange(o.h_, {});
    }
    return *this;
  }
  NetworkTask(const NetworkTask&) = delete;
  NetworkTask& operator=(const NetworkTask&) = delete;
  ~NetworkTask() {
    if (h_) h_.destroy();
  }

  // Computes up to the next network call (returned; valid until answer()) or the end (nullptr). Rethrows the
  // algorithm's error.
  // No call is pending (answer() was called for the last one).
  NetworkCall* advance() {
    if (!h_.done()) h_.resume();
    if (h_.promise().error) std::rethrow_exception(std::exchange(h_.promise().error, nullptr));
    return h_.done() ? nullptr : &*h_.promise().call;
  }
  // The pending call, or nullptr.
  NetworkCall* pending() { return !h_ || h_.done() || !h_.promise().call ? nullptr : &*h_.promise().call; }
  // Answers the pending call; the output's length is checked against the call (Error RunnerFailed naming it).
  void answer(std::vector<float> output) {
    NetworkCall& c = *h_.promise().call;
    check_output_size(output.size(), c.output_shape, c.where);
    h_.promise().output = std::move(output);
    h_.promise().call.reset();
  }
  bool done() const { return !h_ || h_.done(); }
  // What the task returned; done() is true.
  std::vector<float> take_result() { return std::move(h_.promise().result); }

 private:
  Handle h_;
};

// Runs a task to its end on this thread, each call answered by runners[call.network] (run_checked: a runner's error
// names the call).
// runners holds a runner for every network index the task calls.
inline std::vector<float> drive(NetworkTask task, std::span<PatchRunner* const> runners) {
  for (NetworkCall* c; (c = task.advance()) != nullptr;) {
    if (c->network >= runners.size()) throw Error(ErrorCode::Internal, c->where + ": no runner for network " + std::to_string(c->network));
    task.answer(run_checked(*runners[c->network], c->input, c->shape, c->output_shape, c->where, c->extras));
  }
  return task.take_result();
}

}  // namespace tessera
