#include "engine/threaded_driver.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "tessera/common/error.h"

namespace tessera {

namespace {

// A patch handed to a network thread, and what came back.
struct Call {
  PatchSteps::Patch patch;
  std::vector<float> gathered;  // the input when the run gathered it into our buffer
  std::vector<float> output;
  std::optional<Error> error;
};

}  // namespace

RunReport drive_threaded(PatchSteps& run, std::span<PatchRunner* const> runners, const RunOptions& options) {
  std::mutex mutex;
  std::condition_variable to_run, ran;
  std::deque<Call*> queue;  // handed out, waiting for a thread
  std::deque<Call*> back;   // answered, waiting for the run
  bool stop = false;

  // Runs c's network (on a network thread, or inline when the run has one thread).
  auto run_call = [&](Call* c) {
    const TileScope scope(static_cast<int64_t>(c->patch.tile));
    const std::span<const float> input = c->patch.input.empty() ? std::span<const float>(c->gathered) : c->patch.input;
    const TensorShape& shape = c->patch.input.empty() ? run.input_shape() : c->patch.shape;
    PatchRunner& net = *runners[c->patch.network];
    try {
      c->output = c->patch.extras.empty() ? net.run(input, shape) : net.run_named(input, shape, c->patch.extras);
    } catch (const Error& e) {
      c->error = e;
    } catch (const std::exception& e) {
      c->error = Error(ErrorCode::RunnerFailed, std::string("the network failed: ") + e.what());
    }
  };
  auto network_thread = [&] {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      to_run.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty()) return;
      Call* c = queue.front();
      queue.pop_front();
      lock.unlock();
      run_call(c);
      lock.lock();
      back.push_back(c);
      ran.notify_one();
    }
  };

  // One thread: the networks run inline, between hand-outs (no hand-over to a thread and back).
  const uint32_t wanted = options.threads > 1 ? options.threads : 0;
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<Call>> out;  // calls handed out and not yet taken back
  auto finish_threads = [&] {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    to_run.notify_all();
    for (std::thread& t : threads) t.join();
  };
  auto cancel_requested = [&] { return options.cancel && options.cancel->load(std::memory_order_relaxed); };

  try {
    for (uint32_t i = 0; i < wanted; ++i) {
      try {
        threads.emplace_back(network_thread);
      } catch (const std::system_error&) {
        break;  // fewer threads (none: inline)
      }
    }
    uint64_t reported = 0;
    bool first = true;
    // A run may learn its patch shape in its first step (TrainingGridRun): the buffer follows it.
    size_t input_size = run.input_shape().size();
    std::vector<float> buffer(input_size);
    std::vector<std::vector<float>> spare;  // gathered inputs of calls taken back, for the next patches
    for (;;) {
      if (cancel_requested()) run.cancel();
      // What came back goes into the run first: it frees slots and lets tasks go on.
      std::deque<Call*> answered;
      {
        std::lock_guard<std::mutex> lock(mutex);
        answered.swap(back);
      }
      for (Call* c : answered) {
        if (c->error) {
          run.fail(c->patch.job, c->error->code(), c->error->what());
        } else {
          run.finish(c->patch.job, c->output);
        }
        if (c->gathered.size() == input_size) spare.push_back(std::move(c->gathered));
        std::erase_if(out, [&](const std::unique_ptr<Call>& p) { return p.get() == c; });
      }
      if (run.input_shape().size() != input_size) {
        input_size = run.input_shape().size();
        buffer.assign(input_size, 0.0f);
        spare.clear();
      }
      bool handed = false;
      for (std::optional<PatchSteps::Patch> p; (p = run.next(buffer));) {
        if (p->network >= runners.size()) {
          throw Error(ErrorCode::InvalidArgument, "this run calls network " + std::to_string(p->network + 1) + " but " +
                                                      std::to_string(runners.size()) + " network(s) were given");
        }
        auto c = std::make_unique<Call>();
        c->patch = *p;
        if (p->input.empty()) {
          c->gathered.swap(buffer);  // next() writes every value of the buffer it is given
          if (spare.empty()) {
            buffer.resize(input_size);
          } else {
            buffer = std::move(spare.back());
            spare.pop_back();
          }
        }
        Call* call = c.get();
        out.push_back(std::move(c));
        handed = true;
        if (threads.empty()) {
          run_call(call);
          std::lock_guard<std::mutex> lock(mutex);
          back.push_back(call);
          continue;
        }
        {
          std::lock_guard<std::mutex> lock(mutex);
          queue.push_back(call);
        }
        to_run.notify_one();
      }
      const bool computed = !cancel_requested() && run.step();
      if (options.progress && first) options.progress(0, run.total());
      first = false;
      while (options.progress && reported < run.done()) options.progress(++reported, run.total());
      if (run.finished()) break;
      if (computed || handed) continue;
      if (out.empty()) throw Error(ErrorCode::Internal, "the run hands out no patch, has none out and is not finished");
      // Nothing to hand out or compute: wait for an answer. A cancel takes effect then: the patches out finish first
      // in any case (a network call cannot be stopped), and none is handed out in between.
      std::unique_lock<std::mutex> lock(mutex);
      ran.wait(lock, [&] { return !back.empty(); });
    }
  } catch (...) {
    // A progress callback or a bad patch threw: no new patch; let the threads finish what they hold, then pass it on.
    run.cancel();
    finish_threads();
    throw;
  }
  finish_threads();
  return run.report();
}

}  // namespace tessera
