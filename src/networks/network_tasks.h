// The algorithms that call networks from inside, as tasks (internal/network_task.h): the same code runs natively
// (lpcnn_invert and the others drive it with PatchRunners) and on the step engine (TaskRun).
// Every span a task takes must outlive it; validation happens on the first advance().
#pragma once

#include <span>

#include "engine/network_task.h"
#include "tessera/common/budget.h"
#include "tessera/common/geometry.h"
#include "tessera/networks/phase_networks.h"
#include "tessera/registry/registry.h"

namespace tessera {

// LPCNN (tessera/physics_loops.h lpcnn_invert): three calls of network 0.
NetworkTask lpcnn_task(Geometry geometry, std::span<const float> field, std::span<const uint8_t> mask, unsigned threads);
// MoDL-QSM: three calls of network 0 (2 channels).
NetworkTask modl_qsm_task(Geometry geometry, std::span<const float> field, std::span<const uint8_t> mask, unsigned threads);
// NeXtQSM: one call of network 0 (BF), six of network 1 (VJP).
NetworkTask nextqsm_task(Geometry geometry, std::span<const float> field, std::span<const uint8_t> mask, unsigned threads);
// A phase network (tessera/phase_networks.h run_phase_network): one call of network 0 per echo; returns the volume
// (χ, or iQFM's local field), zero outside the eroded mask.
NetworkTask phase_network_task(const ModelSpec& model, Geometry geometry, std::span<const float> phase,
                               std::span<const float> magnitude, std::span<const uint8_t> mask, PhaseSettings settings,
                               Target target);

}  // namespace tessera
