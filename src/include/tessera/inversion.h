// One entry point for every kind of network: picks the driver by the registry's kind (field -> chi
// tiled or whole; physics loops whole or tiled per patch; native patching) and runs it.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "tessera/driver.h"
#include "tessera/plan.h"
#include "tessera/registry.h"
#include "tessera/runner.h"

namespace tessera {

struct InversionRequest {
  Geometry geometry;
  const ModelSpec* model = nullptr;  // a registered network, or nullptr for `custom`
  FieldNetwork custom;               // a caller's own field -> chi network (model == nullptr)
  bool whole_volume = false;
  TileConfig tile;
  uint32_t workers = 1;
};

// The networks an inversion calls: 2 for NeXtQSM (BF, VJP), else 1.
uint32_t network_count(const InversionRequest& request);
// Output channels of network i (MoDL-QSM: 2).
uint32_t network_output_channels(const InversionRequest& request, uint32_t network);

// The plan of this request: tiled or whole, with the off-design warning for tiled physics loops.
// Throws Error(InvalidArgument) for networks that cannot run from a field map (iQSM family).
TilePlan plan_inversion(const InversionRequest& request, std::span<const uint8_t> mask, Target target);

// The off-design warning for this request, or empty.
std::string inversion_warning(const InversionRequest& request);

// Runs the inversion; chi receives the result.
// field, mask, chi hold geometry.voxel_count() values; networks.size() == network_count(request).
RunReport run_inversion(const InversionRequest& request, std::span<const float> field, std::span<const uint8_t> mask,
                        std::span<PatchRunner* const> networks, const RunOptions& options, std::span<float> chi);

}  // namespace tessera
