#include "tessera/common/iterative.h"

#include "tessera/common/error.h"

namespace tessera {

void run_to_end(Iterative& c, const std::function<void(uint64_t, uint64_t)>& progress, const std::atomic<bool>* cancel) {
  while (!c.finished()) {
    if (cancel && cancel->load()) {
      throw Error(ErrorCode::Cancelled, c.name() + " cancelled after " + std::to_string(c.steps_done()) + " of " +
                                            std::to_string(c.total_steps()) + " steps");
    }
    c.step();
    if (progress) progress(c.steps_done(), c.total_steps());
  }
}

}  // namespace tessera
