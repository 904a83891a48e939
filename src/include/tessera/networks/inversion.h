// One entry point for every kind of network: picks the driver by the registry's kind (field -> chi
// tiled or whole; physics loops whole or tiled per patch; native patching) and runs it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/engine/autoplan.h"
#include "tessera/engine/driver.h"
#include "tessera/networks/phase_networks.h"
#include "tessera/engine/plan.h"
#include "tessera/registry/registry.h"
#include "tessera/engine/runner.h"

namespace tessera {

struct InversionRequest {
  Geometry geometry;
  const ModelSpec* model = nullptr;  // a registered network, or nullptr for `custom`
  FieldNetwork custom;               // a caller's own field -> chi network (model == nullptr)
  bool whole_volume = false;
  TileConfig tile;
  bool tile_given = false;  // the caller set tile explicitly (refused for whole-volume-only networks)
  uint32_t workers = 1;
  // Automatic tiling: the auto-planner chooses core (unless fixed_core), workers and threads.
  bool auto_tile = false;
  uint32_t halo_override = 0;     // 0: the network's default halo
  uint32_t fixed_core = 0;
  uint32_t fixed_workers = 0;
  uint32_t fixed_threads = 0;
  uint32_t hardware_threads = 2;
  Quality quality = Quality::Faithful;  // the auto-planner's fidelity target (field -> chi networks)
  // How far the network looks: a measured profile (the probe's), else the theoretical receptive radius (the
  // registry's, or the custom network's); 0 and empty: unknown.
  ContextProfile measured_context;
  uint32_t receptive_radius = 0;
  // This machine's measured speed of the network (a probe's patch times; the planner fits them), and the measured
  // worker start-up (seconds; < 0: the planner's default). Empty: the registry's figure, else the default.
  std::vector<SpeedPoint> measured_speed;
  double measured_start_seconds = -1.0;
  // The multiply-accumulates per input voxel of the network's convolutions (its weights' graph; 0: not known): a
  // field -> chi network's speed, unless measured, is estimated from it (kSecondsPerMac), before its registry figure.
  double graph_macs_per_voxel = 0.0;
  bool verify = false;  // plan the self-check (tessera/verify.h) of a tiled field -> chi run
  // Phase networks (iQSM family): echo times (one per echo), B0, erosion, phase sign.
  PhaseSettings phase;
  // Networks that assume B0 along the third axis: resample to a B0-aligned grid (tessera/b0_align.h).
  B0AlignMode b0_align = B0AlignMode::Auto;
  bool crop = true;  // automatic plans of field -> chi networks may run the input's support only (tessera/crop.h)
  uint32_t crop_margin = kCropMargin;  // voxels kept around the support before the grid rounding
};

// The networks an inversion calls: 2 for NeXtQSM (BF, VJP), else 1.
uint32_t network_count(const InversionRequest& request);
// Output channels of network i (MoDL-QSM: 2).
uint32_t network_output_channels(const InversionRequest& request, uint32_t network);

// The plan of this request: tiled, automatic (plan.tile/workers/threads_per_worker hold the choice) or
// whole.
// Phase networks (iQSM family) plan their whole-volume run over request.phase.te_s.size() echoes; an
// explicit tile config for them is refused (Error InvalidArgument).
// field, when given (a network that reads its field unmasked), widens an automatic plan's crop box to every voxel
// where the network's input is not zero; without it the box holds the mask and the run checks the field.
TilePlan plan_inversion(const InversionRequest& request, std::span<const uint8_t> mask, Target target,
                        std::span<const float> field = {});

// What a plan fixed for its run, as a caller hands the plan back (a plan is a value: made once, passed to the
// run, obeyed).
struct PlanChoice {
  bool whole_volume = false;
  TileConfig tile;
  uint32_t workers = 1;
  uint32_t threads_per_worker = 0;
  uint32_t tiles_in_flight = 1;
  uint64_t tiles_total = 0;
  uint64_t tiles_active = 0;
  CropBox crop;  // a whole-volume plan cut to the input's support
};

// The plan a run obeys: the choice evaluated on this request's volume and mask (deterministic; no search).
// Throws Error(InvalidArgument) when the choice was made for another volume, mask or network (its tile counts
// differ) or asks for more tiles in flight than the budget allows, Error(BudgetExceeded) when it does not fit.
// request.geometry is valid; mask holds its voxel count of values.
TilePlan plan_of_choice(const InversionRequest& request, std::span<const uint8_t> mask, const PlanChoice& choice,
                        Target target);

// Whether this request runs in steps driven from outside (field -> chi networks tiled or whole: StepRun; AutoQSM /
// QSMGAN native patching: NativePatchRun) rather than on a driver thread that calls its network from inside an
// algorithm (physics loops, phase networks).
bool runs_in_steps(const InversionRequest& request);

// Whether the request's network reconstructs from wrapped phase (iQSM, iQFM, iQSM+: the registry says its input).
bool is_phase_network(const InversionRequest& request);

// The FieldNetwork the request runs (a registered one, or the custom one).
FieldNetwork request_network(const InversionRequest& request);

// Whether the request's network assumes B0 along the volume's third axis (field → χ networks, registered or custom, and
// native patching; not the physics loops, whose dipole kernels take B0, nor the phase networks).
bool assumes_b0_along_z(const InversionRequest& request);

// The B0 decision of this request (tessera/b0_align.h; aligned dims not filled in).
// request.geometry is valid.
B0Plan request_b0_plan(const InversionRequest& request);

// The off-design warning for this request, or empty.
std::string inversion_warning(const InversionRequest& request);

// Runs the inversion; chi receives the result (iQFM: the local field).
// mask, chi hold geometry.voxel_count() values; field too, except for phase networks: the wrapped phase
// of every echo (echoes · voxel_count values) and magnitude empty or the same size;
// networks.size() == network_count(request).
RunReport run_inversion(const InversionRequest& request, std::span<const float> field, std::span<const uint8_t> mask,
                        std::span<PatchRunner* const> networks, const RunOptions& options, std::span<float> chi,
                        std::span<const float> magnitude = {});

}  // namespace tessera
