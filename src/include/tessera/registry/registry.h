// The model registry: the one source of truth for every network Tessera knows
// (facts from the published networks and the reference Rust implementation, QSM.rs). JavaScript asks
// for it through the bindings.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/common/budget.h"

namespace tessera {

enum class ModelKind {
  FieldToChi,       // fully convolutional local field -> chi: overlap-tileable
  PhysicsLoop,      // an algorithm around the net; tiled = whole algorithm per patch (off-design)
  NativePatches,    // the network fixes its own patching; ignores the user's tile settings
  WholeVolumeOnly,  // from wrapped phase; never tiled
};

const char* model_kind_name(ModelKind kind);

// What a network input holds (the registry's inputs, in the reference model's order; the first is the main one).
enum class InputRole {
  Field,   // local field (ppm), the field -> chi networks' one input
  Phase,   // wrapped phase (rad) · phase sign
  Mask,    // eroded brain mask
  Te,      // echo time (s), [1]
  B0,      // field strength (T), [1]
  B0Dir,   // unit B0 direction, [1, 1, 3]
  Border,  // border shell: 1 inside, 0 on the padded volume's outer voxel layer
};

// Stable name of a role, as JavaScript sees it ("field", "phase", "mask", "te", "b0", "b0_dir", "border").
const char* input_role_name(InputRole role);

// The algorithm a network runs in: the network alone, or one of the physics loops / patchings around it.
enum class Algorithm { Network, Lpcnn, ModlQsm, NextQsm, AutoQsm, Qsmgan, PhaseNetwork };

// Zero-padding rule of whole-volume runs: which side gets the smaller half of the padding.
enum class PadRule { SmallerHalfLow, LargerHalfLow };

// Network input = (field - input_mean) / input_std; chi = output_scale * output + output_offset.
struct Normalization {
  double input_mean = 0.0;
  double input_std = 1.0;
  double output_scale = 1.0;
  double output_offset = 0.0;
};

// The one input of a field -> chi network, and the iQSM family's inputs.
inline constexpr InputRole kFieldInput[] = {InputRole::Field};
inline constexpr InputRole kIqsmInputs[] = {InputRole::Phase, InputRole::Mask, InputRole::Te, InputRole::B0,
                                            InputRole::Border};
inline constexpr InputRole kIqsmPlusInputs[] = {InputRole::Phase, InputRole::Mask, InputRole::Te,
                                                InputRole::B0,    InputRole::B0Dir, InputRole::Border};

// Where a memory cost was measured: one runtime host at one thread count, and the cube edges it ran there.
struct CostHost {
  std::string_view host;  // "node" or "Chromium"
  uint32_t threads = 0;   // ONNX Runtime threads per worker
  uint32_t min_edge = 0;  // the smallest and the largest edge run (voxels)
  uint32_t max_edge = 0;
};

// One network's worker heap as measured: what session creation leaves, and how a patch grows it.
struct NetworkHeap {
  std::string_view network;          // which of the model's networks; empty when it runs one
  std::string_view parameters;       // the measured graph's size ("10.06 M parameters, 40.3 MB")
  uint64_t after_session_bytes = 0;  // the largest heap right after session creation, over every host and thread count
  uint32_t flat_to_edge = 0;         // patches up to this edge ran in the heap session creation freed; 0: none did
  double slope = 0.0;                // heap growth per patch voxel (B) between slope_from_edge and slope_to_edge
  uint32_t slope_from_edge = 0;
  uint32_t slope_to_edge = 0;
  uint64_t fit_fixed_bytes = 0;      // the least-squares line's intercept (slope is its slope); 0: no line fitted
  double fit_r2 = 0.0;               // that line's r²
};

// How a budget (the ModelSpec's fixed_bytes and bytes_per_voxel) follows from its measurement. Both rules take
// bytes per voxel = the networks' summed slope · (1 + margin), rounded up to 10 B.
enum class BudgetRule {
  PointsUnderLine,        // fixed: a part that puts every measured point under the line
  PointsMarginUnderLine,  // fixed: a whole MiB, at least every after-session heap (summed), with every point at least
                          // `margin` under the line (the heap grows in steps of up to 20 %)
};

// Stable name of a rule, as JavaScript sees it ("points-under-line", "points-margin-under-line").
const char* budget_rule_name(BudgetRule rule);

// A network's memory cost as data: the engine, what ran where and when, the heaps measured, how the budget follows,
// and where the points are. The budget itself is the ModelSpec's fixed_bytes and bytes_per_voxel (the planner's
// fields): it is not copied here.
struct CostMeasurement {
  std::string_view engine;          // "ONNX Runtime Web"
  std::string_view engine_version;  // "1.30.0"
  std::string_view backend;         // "wasm"
  std::string_view subject;         // what ran: "an architecture-faithful xQSM-shaped stand-in", "the shipped weights"
  std::string_view script;          // the stand-in's builder ("scripts/standins.js"); empty: no stand-in
  std::span<const CostHost> hosts;
  std::string_view date;                  // of the runs, ISO 8601
  std::span<const NetworkHeap> networks;  // one per network a tile holds at once: their heaps add up
  BudgetRule rule = BudgetRule::PointsUnderLine;
  double margin = 0.10;
  std::string_view evidence;  // the files with the points and the derivation ("bench/CALIBRATION.md, ...")
  std::string_view note;      // facts the fields above do not hold
};

// The heap a tile's workers hold right after session creation: the networks' after-session heaps summed.
uint64_t after_session_bytes(const CostMeasurement& c);

// The heap growth per patch voxel of a tile: the networks' slopes summed.
double heap_slope(const CostMeasurement& c);

// The bytes per voxel the measurement's rule gives: heap_slope · (1 + margin), rounded up to 10 B.
uint64_t rule_bytes_per_voxel(const CostMeasurement& c);

struct WeightsFile {
  std::string_view file;     // name under the official base URL
  uint64_t bytes = 0;        // 0: not recorded
  std::string_view sha256;   // empty: not recorded
  std::string_view bundled;  // non-empty: shipped with Tessera at this path (relative to the package root)
};

struct ModelSpec {
  std::string_view id;
  std::string_view name;
  ModelKind kind = ModelKind::FieldToChi;
  uint32_t divisor = 1;
  uint32_t default_halo = 4;        // the halo the auto-planner uses unless the user sets one
  uint64_t bytes_per_voxel = kReferenceBytesPerVoxel;  // tile cost: bytes per patch voxel
  uint64_t fixed_bytes = 0;         // tile cost: bytes per worker whatever the patch (runtime, weights)
  // What the two figures above were measured from; null: provisional (no measurement behind them).
  const CostMeasurement* cost_measurement = nullptr;
  // Set by the registry, never in an entry: cost_measurement == nullptr, and cost_text(*this).
  bool cost_provisional = true;
  std::string_view cost_source;
  bool masked_input = false;        // the network takes the field multiplied by the mask
  uint32_t input_channels = 1;
  uint32_t output_channels = 1;
  std::string_view input;   // what the network takes, in words
  std::string_view output;  // what it gives
  std::string_view quantity = "chi";  // what the output is: "chi" or "local-field" (both ppm)
  // The inputs in the reference model's order (the first is the main input).
  std::span<const InputRole> inputs = kFieldInput;
  Algorithm algorithm = Algorithm::Network;
  // The voxel grid (mm) the network was trained on, when its reference code resamples every input to it (k-space zero
  // padding or cropping, and χ back: tessera/networks/training_grid.h); zeros: none declared (runs at the input's).
  std::array<double, 3> training_voxel_mm{0.0, 0.0, 0.0};
  uint32_t crop_margin = 0;  // phase networks: crop to the eroded mask's bounding box + this margin (0: no crop)
  Normalization norm;
  PadRule pad = PadRule::SmallerHalfLow;
  std::array<WeightsFile, 2> weights;  // unused entries have an empty file
  std::string_view licence;
  std::string_view citation;
  std::string_view notes;
  double seconds_per_voxel = 0.0;  // ONNX Runtime Web, 1 thread, per patch voxel; 0: not measured (planner default)
  // Its convolutions' multiply-accumulates per input voxel (bindings/js/graph-cost.js on its weights, or on a stand-in of
  // its published shape); 0: not known. A field -> chi network's speed is estimated from it (kSecondsPerMac).
  double macs_per_voxel = 0.0;
  // Run on the wasm backend with its 3D ConvTranspose rewritten as one Conv of all phases + depth-to-space
  // (bindings/js/webgpu-graph.js; the same outputs to float rounding): set where measured faster with a smaller heap
  // than the export, whose measured cost then stays an upper bound (heaps 16-18 % smaller, 9-14 % faster per patch).
  bool wasm_conv_transpose_rewrite = false;
  // The theoretical receptive radius (voxels an output depends on, from the ONNX graph: bindings/js/receptive-field.js)
  // and where it comes from; 0: not known (the radius is then derived from the weights when they are given).
  uint32_t receptive_radius = 0;
  std::string_view receptive_source;
  // The measured context (a probe of the real weights: within[ρ] = fraction of the output's response to an input
  // voxel within ρ voxels; tessera/fidelity_model.h); empty when not measured (the planner then derives a
  // conservative profile from receptive_radius).
  std::span<const double> measured_context;

  bool tileable() const { return kind == ModelKind::FieldToChi || kind == ModelKind::PhysicsLoop; }
  TileCost tile_cost() const { return TileCost{divisor, bytes_per_voxel, fixed_bytes}; }
};

// Base URL of the official ONNX exports.
inline constexpr std::string_view kOfficialWeightsBase = "https://huggingface.co/qsmxt/qsm-onnx-weights/resolve/main/";

// Every registered network, in a stable order.
std::span<const ModelSpec> model_registry();

// The network with this id, or nullptr.
const ModelSpec* find_model(std::string_view id);

// The network with this id.
// Throws Error(InvalidArgument) naming the known ids when the id is unknown.
const ModelSpec& model_spec(std::string_view id);

// The sentence that says where a network's memory cost comes from, formatted from its budget (fixed_bytes,
// bytes_per_voxel) and its cost_measurement; the registry's cost_source.
std::string cost_text(const ModelSpec& spec);

// Whether the network takes this input.
bool takes_input(const ModelSpec& spec, InputRole role);

// Tile cost of a tileable network.
// Throws Error(InvalidArgument) for an unknown id or a network that cannot be tiled.
TileCost tile_cost_of(std::string_view id);

}  // namespace tessera
