// The state of a Gauss-Newton loop whose linear systems are solved by conjugate gradients, one CG iteration per step
// (MEDI, TFI): the outer update, the CG residual, direction and its image under the system, and the counts.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {

struct GaussNewtonCg {
  std::vector<float> update, residual, direction, image;
  double rs = 0.0, bnorm = 0.0;  // ‖residual‖² now; ‖residual‖ at the CG solve's start
  uint32_t outer_done = 0, cg_done = 0;
};

}  // namespace tessera
