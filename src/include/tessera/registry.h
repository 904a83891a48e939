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

#include "tessera/budget.h"

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
  bool cost_provisional = true;     // true until measured in ONNX Runtime Web
  bool masked_input = false;        // the network takes the field multiplied by the mask
  std::string_view cost_source;     // how the figure was obtained
  uint32_t input_channels = 1;
  uint32_t output_channels = 1;
  std::string_view input;   // what the network takes, in words
  std::string_view output;  // what it gives
  std::string_view quantity = "chi";  // what the output is: "chi" or "local-field" (both ppm)
  // The inputs in the reference model's order (the first is the main input).
  std::span<const InputRole> inputs = kFieldInput;
  Algorithm algorithm = Algorithm::Network;
  uint32_t crop_margin = 0;  // phase networks: crop to the eroded mask's bounding box + this margin (0: no crop)
  Normalization norm;
  PadRule pad = PadRule::SmallerHalfLow;
  std::array<WeightsFile, 2> weights;  // unused entries have an empty file
  std::string_view licence;
  std::string_view citation;
  std::string_view notes;
  double seconds_per_voxel = 0.0;  // ONNX Runtime Web, 1 thread, per patch voxel; 0: not measured (planner default)
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

// Whether the network takes this input.
bool takes_input(const ModelSpec& spec, InputRole role);

// Tile cost of a tileable network.
// Throws Error(InvalidArgument) for an unknown id or a network that cannot be tiled.
TileCost tile_cost_of(std::string_view id);

}  // namespace tessera
