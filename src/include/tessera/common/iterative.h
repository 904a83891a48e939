// A computation advanced one step at a time (one iteration of a solver, one pass of a filter), so that whoever
// drives it can report progress and stop it between steps: the JavaScript driver worker yields to its event loop
// between steps (a cancel message gets in), a native caller checks its cancel flag.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

namespace tessera {

class Iterative {
 public:
  virtual ~Iterative() = default;
  // Steps planned: an upper bound (a solver that converges early finishes before it).
  virtual uint32_t total_steps() const = 0;
  virtual uint32_t steps_done() const = 0;
  virtual bool finished() const = 0;
  // Does one step.
  // finished() is false.
  virtual void step() = 0;
  // What the computation is, for progress and messages ("TV-ADMM", "V-SHARP").
  virtual std::string name() const = 0;
};

// Runs it to the end on the calling thread: progress(done, total) after every step; the cancel flag, when given, is
// read before every step (Error Cancelled, "<name> cancelled after N of M steps").
void run_to_end(Iterative& computation, const std::function<void(uint64_t, uint64_t)>& progress = {},
                const std::atomic<bool>* cancel = nullptr);

}  // namespace tessera
