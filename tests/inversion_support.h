// The phantom head and the agreement with its truth, shared by the inversion tests (not a test file itself).
#pragma once

#include <vector>

#include "support.h"
#include "tessera/common/geometry.h"
#include "tessera/quality/fidelity.h"
#include "tessera/sim/phantom.h"

namespace tessera::test {

// The phantom head of the inversion tests: 64×64×48 at 3 mm.
inline Geometry head() { return head(64, 64, 48, 3.0); }

// χ against the phantom's truth, each map's mean in the mask removed.
inline Agreement against_truth(const Geometry& g, const std::vector<float>& chi, const Phantom& ph) {
  return compare_maps(g, demeaned(chi, ph.mask), demeaned(ph.chi, ph.mask), ph.mask);
}

}  // namespace tessera::test
