#include "tessera/registry.h"

#include <string>

#include "tessera/error.h"

namespace tessera {

namespace {

constexpr std::string_view kMeasuredXqsm =
    "measured in ONNX Runtime Web 1.30.0 (wasm, 2 threads) on an architecture-faithful xQSM-shaped stand-in "
    "(scripts/standins.js), node and Chromium, 32-96³ patches, 2026-11-29: every worker heap high-water lies under "
    "72.4 MiB (76 MB) + 1120 B/voxel (bench/CALIBRATION.md; bench/RESULTS.md saw 72.4 MB too tight at 64³)";
constexpr std::string_view kMeasuredQsmnet =
    "measured in ONNX Runtime Web 1.30.0 (wasm, 2 threads) on an architecture-faithful QSMnet-shaped stand-in "
    "(scripts/standins.js), node, 64-144³ patches, 2026-11-29: 1.69 GB per worker after session creation, flat to "
    "112³, then +384 B/voxel; budgeted as 1.70 GB + 430 B/voxel (bench/CALIBRATION.md)";
// Issue #12: the stand-ins of scripts/standins-ir2qsm.js and scripts/standins-loops.js, measured with
// bench/calibrate.js (node) and bench/calibrate-browser.js (Chromium); points in bench/calibration.json, every one
// checked under these lines by tests/js/registry-costs.test.js. Rule: bytes per voxel = the slope of the points that
// grew the heap past its after-session size + 10 %; fixed = the smallest whole MiB at least every after-session heap
// with every point at least 10 % under the line (the heap grows in steps of up to 20 %).
constexpr std::string_view kMeasuredIr2qsm =
    "measured in ONNX Runtime Web 1.30.0 (wasm) on an architecture-faithful IR2QSM-shaped stand-in (scripts/standins-ir2qsm.js, "
    "10.06 M parameters, 40.3 MB), node 2 threads 32-96³ and 1 thread 32-64³, Chromium 64³, 2026-12-02: 148.9 MB per "
    "worker after session creation, flat to 48³, then +518 B/voxel (64-96³); budgeted as 142 MiB + 570 B/voxel, every "
    "point ≥ 10 % under the line (bench/CALIBRATION.md)";
constexpr std::string_view kMeasuredLpcnn =
    "measured in ONNX Runtime Web 1.30.0 (wasm) on an architecture-faithful stand-in of LPCNN's network "
    "(scripts/standins-loops.js, 0.45 M parameters), node 2 threads 32-96³ and 1 thread 32-64³, Chromium 64³, "
    "2026-12-02: heap ≈ 17.0 MB + 387 B/voxel (r² 0.9996); budgeted as 24 MiB + 430 B/voxel, every point ≥ 10 % under "
    "the line; one pool worker runs the loop's 3 calls of a tile (bench/CALIBRATION.md); the loop's FFT workspace lives "
    "in the C++ module heap";
constexpr std::string_view kMeasuredModl =
    "measured in ONNX Runtime Web 1.30.0 (wasm) on an architecture-faithful stand-in of MoDL-QSM's network (2 channels "
    "in and out; scripts/standins-loops.js, 0.45 M parameters), node 2 threads 32-96³ and 1 thread 32-64³, Chromium "
    "64³, 2026-12-02: heap ≈ 17.6 MB + 391 B/voxel (r² 0.9997); budgeted as 24 MiB + 430 B/voxel, every point ≥ 10 % "
    "under the line; one pool worker runs the loop's 3 calls of a tile (bench/CALIBRATION.md)";
constexpr std::string_view kMeasuredNextqsm =
    "measured in ONNX Runtime Web 1.30.0 (wasm) on architecture-faithful stand-ins of NeXtQSM's BF U-Net (28.3 M "
    "parameters) and VJP net (its VN U-Net and the backward pass, 10.6 M; scripts/standins-loops.js), node 2 threads "
    "and 1 thread, Chromium 64³, 2026-12-02: a tile holds one worker of each (one pool per network): BF 305.7-366.6 MB "
    "after session creation (2 / 1 threads), flat at 64³, +415 B/voxel to 128³; VJP 155.5 MB + 3602 B/voxel (32-64³: a "
    "transposed convolution's column buffer), 1.39-1.45 GB together at 64³; 128³ fails in the VJP net (ORT size "
    "overflow); budgeted as 498 MiB (both sessions) + 4420 B/voxel, so patches stay at 64³ (bench/CALIBRATION.md)";
constexpr std::string_view kDefaultCost =
    "provisional: no measurement; budgeted at the reference engine's figure (bytes per voxel)";

constexpr std::string_view kUnstatedLicence =
    "not stated in models.md: check the upstream repository before redistribution";

// Shared by the iQSM family (iQSM and iQFM share their architecture and paper).
constexpr std::string_view kIqsmCost =
    "measured in ONNX Runtime Web 1.30.0 (wasm, 2 threads, node) on an iQSM-shaped stand-in (LoT layer + depth-4 "
    "U-Net, 4.31 M parameters, random weights: scripts/standins.js; iQFM has the same architecture), whole 64-160³ "
    "volumes, 2026-11-29: heap high-water ≈ 72 MB + 295 B/voxel (r² 0.999), budgeted as 50 MiB + 330 B/voxel with "
    "every point under the line (bench/calibration-iqsm.json)";
constexpr std::string_view kIqsmInput =
    "wrapped phase · -1 (rad), eroded mask, TE (s), B0 (T), border shell; B0 along the third axis";
constexpr std::string_view kIqsmCitation =
    "Gao Y, Xiong Z, Fazlollahi A, et al. Instant tissue field and magnetic susceptibility mapping from MRI raw phase "
    "using Laplacian enhanced deep neural networks. NeuroImage. 2022;259:119410";
constexpr std::string_view kPhaseNotes =
    "whole-volume only; from wrapped phase (17.2-17.7 MB weights; size and sha256 not recorded in models.md)";

constexpr std::string_view kStandinRadius =
    "the graph of the architecture-faithful stand-in (scripts/standins.js; checked by receptive-field.test.js); the "
    "weights' own graph is used when they are given";

// The demo network's measured context: `tessera-qsm receptive-field --model demo-unet --probe --json` (a 104³
// phantom patch, ±0.1 ppm at its centre, ONNX Runtime Web; 90 % within 29 voxels, 99 % within 42), 4 decimals.
constexpr double kDemoContext[] = {
    0,      0.0379, 0.0792, 0.1192, 0.1785, 0.23,   0.2666, 0.3111, 0.3561, 0.4051, 0.442,  0.4754, 0.5051,
    0.5333, 0.5602, 0.5842, 0.6106, 0.6349, 0.6594, 0.6833, 0.7101, 0.7376, 0.764,  0.79,   0.8158, 0.8403,
    0.8596, 0.8745, 0.8878, 0.9016, 0.9157, 0.9285, 0.9388, 0.9474, 0.9553, 0.9622, 0.9685, 0.9738, 0.9787,
    0.9828, 0.9863, 0.989,  0.9911, 0.9929, 0.9944, 0.9957, 0.9966, 0.9974, 0.9981, 0.9986, 0.999,  1};

// The registry itself. Facts from shared/docs/models.md; keep this the only copy.
const ModelSpec kModels[] = {
    {
        .id = "xqsm",
        .name = "xQSM",
        .kind = ModelKind::FieldToChi,
        .divisor = 8,
        .bytes_per_voxel = 1120,
        .fixed_bytes = 76'000'000,
        .cost_provisional = false,
        .cost_source = kMeasuredXqsm,
        .input = "local field (ppm), no normalisation",
        .output = "chi (ppm), no scaling (global residual inside the graph)",
        .weights = {{{"xqsm.onnx", 20901826, "81854ec2ca85bba25c2f9aae05efdcac299d0efffb03fe6a0e6797019e46b487"}}},
        .licence = kUnstatedLicence,
        .citation = "Gao Y, Zhu X, Moffat BA, et al. xQSM: quantitative susceptibility mapping with octave "
                    "convolutional and noise-regularized neural networks. NMR Biomed. 2021;34:e4461",
        // xQSM-shaped stand-in in Tessera on a quiet machine, 1-thread equivalent (Amdahl 0.90, RESULTS §22) of two runs at
        // 2 threads: the 128×144×112 mask box 71.5 s (6.3e-5) and 31 tiles of 96³ 987 s (6.5e-5) (bench/RESULTS.md §16;
        // the 3.94e-5 of 64³ tiles measured under load in §1 estimated the tiled run at 0.66× its time).
        .seconds_per_voxel = 6.3e-5,
        .receptive_radius = 65,
        .receptive_source = kStandinRadius,
    },
    {
        .id = "qsmnet",
        .name = "QSMnet",
        .kind = ModelKind::FieldToChi,
        .divisor = 16,
        .bytes_per_voxel = 430,
        .fixed_bytes = 1'700'000'000,
        .cost_provisional = false,
        .cost_source = kMeasuredQsmnet,
        .input = "local field (ppm), normalised (f - 0) / 0.01",
        .output = "chi (ppm) = 0.0317 · output + 0",
        .norm = {0.0, 0.01, 0.0317, 0.0},
        .weights = {{{"qsmnet.onnx", 397801854, "8fd1d79b7a9258a262a2faab9e8469757ae7735f3da6212e431acfb207c21b54"}}},
        .licence = "academic research only",
        .citation = "Yoon J, Gong E, Chatnuntawech I, et al. Quantitative susceptibility mapping using deep "
                    "neural network: QSMnet. NeuroImage. 2018;179:199-206",
        .receptive_radius = 199,
        .receptive_source = kStandinRadius,
    },
    {
        .id = "qsmnet-plus",
        .name = "QSMnet+",
        .kind = ModelKind::FieldToChi,
        .divisor = 16,
        .bytes_per_voxel = 430,
        .fixed_bytes = 1'700'000'000,
        .cost_provisional = false,
        .cost_source = kMeasuredQsmnet,
        .input = "local field (ppm), normalised (f - 0) / 0.0205",
        .output = "chi (ppm) = 0.0734 · output + 0",
        .norm = {0.0, 0.0205, 0.0734, 0.0},
        .weights = {{{"qsmnet-plus.onnx", 397801854,
                      "0ed31f9a1b66f75fee4a96022b6bc3838b91bc5b819714dade5ca87cd331683d"}}},
        .licence = "academic research only",
        .citation = "Jung W, Yoon J, Ji S, et al. Exploring linearity of deep neural network trained QSM: "
                    "QSMnet+. NeuroImage. 2020;211:116619",
        .receptive_radius = 199,
        .receptive_source = kStandinRadius,
    },
    {
        .id = "ir2qsm",
        .name = "IR2QSM",
        .kind = ModelKind::FieldToChi,
        .divisor = 8,
        .bytes_per_voxel = 570,
        .fixed_bytes = 148'897'792,  // 142 MiB
        .cost_provisional = false,
        .cost_source = kMeasuredIr2qsm,
        .input = "local field (ppm)",
        .output = "chi (ppm)",
        .pad = PadRule::LargerHalfLow,
        .weights = {{{"ir2qsm.onnx", 40259354, "dcaf7a26d6633900f339f94be16d580ccea6147bbf6da26eacb9a5e1acdc0c53"}}},
        .licence = kUnstatedLicence,
        .citation = "Li M, Chen C, Xiong Z, et al. Quantitative susceptibility mapping via deep neural networks "
                    "with iterative reverse concatenations and recurrent modules. Med Phys. 2025 "
                    "(doi:10.1002/mp.17747)",
        // The stand-in, 64³, node, 1 thread, scaled to a quiet machine by the xQSM stand-in run alongside (RESULTS §12).
        .seconds_per_voxel = 4.7e-5,
    },
    {
        .id = "lpcnn",
        .name = "LPCNN",
        .kind = ModelKind::PhysicsLoop,
        .divisor = 8,
        .bytes_per_voxel = 430,
        .fixed_bytes = 25'165'824,  // 24 MiB
        .cost_provisional = false,
        .cost_source = kMeasuredLpcnn,
        .input = "local field (ppm) and mask; 3 proximal-gradient iterations around the net",
        .output = "chi (ppm)",
        .algorithm = Algorithm::Lpcnn,
        .weights = {{{"lpcnn.onnx", 1790869, "831f2a161f6ab8ee7bf64cc2dd8bca532fc971d0083cf5729d6302d3ed31625d"}}},
        .licence = kUnstatedLicence,
        .citation = "Lai KW, Aggarwal M, van Zijl P, Li X, Sulam J. Learned proximal networks for quantitative "
                    "susceptibility mapping. MICCAI 2020",
        .notes = "tiled mode runs the whole physics loop per patch: off-design, results approximate",
        .seconds_per_voxel = 1.48e-4,  // the loop's 3 calls of the stand-in, 64³, 1 thread, load-scaled (RESULTS §12)
    },
    {
        .id = "modl-qsm",
        .name = "MoDL-QSM",
        .kind = ModelKind::PhysicsLoop,
        // models.md says "divisor 1; assumes ... even dims": the loop pads odd axes by one plane, so patches are
        // planned (and budgeted) at the even size the network really sees.
        .divisor = 2,
        .bytes_per_voxel = 430,
        .fixed_bytes = 25'165'824,  // 24 MiB
        .cost_provisional = false,
        .cost_source = kMeasuredModl,
        .input_channels = 2,
        .output_channels = 2,
        .input = "local field (ppm) and mask; 1 mm isotropic, even dims; 3 model-based iterations",
        .output = "chi (ppm): channel 0 · mask",
        .algorithm = Algorithm::ModlQsm,
        .weights = {{{"modl-qsm.onnx", 1794143, "1f8da7d39eaaa4c3f0f9e67298fba5f14230e769cfd6349c81d0b74a6f800c57"}}},
        .licence = kUnstatedLicence,
        .citation = "Feng R, Zhao J, Wang H, et al. MoDL-QSM: model-based deep learning for quantitative "
                    "susceptibility mapping. NeuroImage. 2021;240:118376",
        .notes = "tiled mode runs the whole physics loop per patch: off-design, results approximate",
        .seconds_per_voxel = 1.29e-4,  // the loop's 3 calls of the stand-in, 64³, 1 thread, load-scaled (RESULTS §12)
    },
    {
        .id = "nextqsm",
        .name = "NeXtQSM",
        .kind = ModelKind::PhysicsLoop,
        .divisor = 64,
        .bytes_per_voxel = 4420,
        .fixed_bytes = 522'190'848,  // 498 MiB
        .cost_provisional = false,
        .cost_source = kMeasuredNextqsm,
        .input = "total field (ppm) and mask; does its own background removal; 6 unrolled steps",
        .output = "chi (ppm)",
        .algorithm = Algorithm::NextQsm,
        .weights = {{{"nextqsm-bf.onnx", 113211474, "d0f0b0391153f8e5e07ef85d46fbe492afc8394fab008350540a6868d0b4a3ba"},
                     {"nextqsm-vjp.onnx", 42437407, "50fe388663c05b1d3996139975270e500e13feb025f1b792576dbc0da814a4bc"}}},
        .licence = "MIT",
        .citation = "Cognolato F, O'Brien K, Jin J, et al. NeXtQSM: a complete deep learning pipeline for "
                    "data-consistent quantitative susceptibility mapping trained with hybrid data. Med Image Anal. "
                    "2023;84:102700",
        .notes = "tiled mode runs the whole physics loop per patch: off-design, results approximate",
        .seconds_per_voxel = 1.26e-4,  // BF + 6 VJP calls of the stand-ins, 64³, 1 thread, load-scaled (RESULTS §12)
    },
    {
        .id = "autoqsm",
        .name = "AutoQSM",
        .kind = ModelKind::NativePatches,
        .divisor = 1,
        .bytes_per_voxel = kReferenceBytesPerVoxel,
        .cost_source = kDefaultCost,
        .input = "total field (ppm); fixed 64³ in, central 32³ out, stride 24, 8-voxel linear blend, "
                 "edge-replicate padding",
        .output = "chi (ppm)",
        .algorithm = Algorithm::AutoQsm,
        .weights = {{{"autoqsm.onnx", 5609662, "c2f23c6ae735fd1677e8623da22cb6f25b4a932ae50ba1ef08a75439e240977e"}}},
        .licence = kUnstatedLicence,
        .citation = "Wei H, Cao S, Zhang Y, et al. Learning-based single-step quantitative susceptibility "
                    "mapping reconstruction without brain extraction. NeuroImage. 2019;202:116064",
        .notes = "patches are fixed by the network: the user's tile settings do not apply",
    },
    {
        .id = "qsmgan",
        .name = "QSMGAN",
        .kind = ModelKind::NativePatches,
        .divisor = 1,
        .bytes_per_voxel = kReferenceBytesPerVoxel,
        .cost_source = kDefaultCost,
        .input = "local field (ppm) · -100; 64³ in, 48³ out at stride 48",
        .output = "chi (ppm) = atanh(clip(output, ±0.999999)) / 10",
        .algorithm = Algorithm::Qsmgan,
        .norm = {0.0, -0.01, 1.0, 0.0},
        .weights = {{{"qsmgan.onnx", 10753955, "238573a6fa8a563004fc28e63a30694289d1a1a204f3c406daba486b1122d604"}}},
        .licence = "MIT",
        .citation = "Chen Y, Jakary A, Avadiappan S, Hess CP, Lupo JM. QSMGAN: improved quantitative "
                    "susceptibility mapping using 3D generative adversarial networks with increased receptive "
                    "field. NeuroImage. 2020;207:116389",
        .notes = "patches are fixed by the network: the user's tile settings do not apply",
    },
    {
        .id = "iqsm",
        .name = "iQSM",
        .kind = ModelKind::WholeVolumeOnly,
        .divisor = 16,
        .bytes_per_voxel = 330,
        .fixed_bytes = 52'428'800,
        .cost_provisional = false,
        .cost_source = kIqsmCost,
        .input = kIqsmInput,
        .output = "chi (ppm)",
        .inputs = kIqsmInputs,
        .algorithm = Algorithm::PhaseNetwork,
        .weights = {{{"iqsm.onnx", 0, ""}}},
        .licence = kUnstatedLicence,
        .citation = kIqsmCitation,
        .notes = kPhaseNotes,
    },
    {
        .id = "iqfm",
        .name = "iQFM",
        .kind = ModelKind::WholeVolumeOnly,
        .divisor = 16,
        .bytes_per_voxel = 330,
        .fixed_bytes = 52'428'800,
        .cost_provisional = false,
        .cost_source = kIqsmCost,
        .input = kIqsmInput,
        .output = "local field (ppm)",
        .quantity = "local-field",
        .inputs = kIqsmInputs,
        .algorithm = Algorithm::PhaseNetwork,
        .weights = {{{"iqfm.onnx", 0, ""}}},
        .licence = kUnstatedLicence,
        .citation = kIqsmCitation,
        .notes = kPhaseNotes,
    },
    {
        .id = "iqsm-plus",
        .name = "iQSM+",
        .kind = ModelKind::WholeVolumeOnly,
        .divisor = 16,
        .bytes_per_voxel = 360,
        .fixed_bytes = 100'663'296,
        .cost_provisional = false,
        .cost_source = "measured in ONNX Runtime Web 1.30.0 (wasm, 2 threads, node) on an iQSM+-shaped stand-in (LoT layer + "
                       "orientation-edited depth-4 U-Net, 4.35 M parameters, random weights: scripts/standins.js), whole "
                       "64-160³ volumes, 2026-11-29: heap high-water ≈ 63 MB + 327 B/voxel (r² 0.97; 1.24-1.50 GB at 160³ "
                       "between repeats), budgeted as 96 MiB + 360 B/voxel: every point under the line with one heap growth "
                       "step (≤ 96 MiB) to spare, after a 128×160×128 run reached the 68 MiB line (bench/calibration-iqsm.json, "
                       "bench/RESULTS.md)",
        .input = "wrapped phase · -1 (rad), eroded mask, TE (s), B0 (T), B0 direction, border shell; any B0 "
                 "direction",
        .output = "chi (ppm)",
        .inputs = kIqsmPlusInputs,
        .algorithm = Algorithm::PhaseNetwork,
        .crop_margin = 16,
        .weights = {{{"iqsm-plus.onnx", 0, ""}}},
        .licence = kUnstatedLicence,
        .citation = "Gao Y, Xiong Z, Shan S, et al. Plug-and-play latent feature editing for orientation-adaptive "
                    "quantitative susceptibility mapping neural networks. Med Image Anal. 2024",
        .notes = kPhaseNotes,
    },
    {
        .id = "demo-unet",
        .name = "Tessera demo U-Net",
        .kind = ModelKind::FieldToChi,
        .divisor = 8,
        .bytes_per_voxel = 370,
        .fixed_bytes = 23'100'000,
        .cost_provisional = false,
        .masked_input = true,
        .cost_source = "measured in ONNX Runtime Web 1.30.0 (wasm, 2 threads, node), 32-96³ patches, 2026-11-29: heap "
                       "high-water = 19.5 MB + 328 B/voxel (r² 0.996), budgeted with 10% margin "
                       "(bench/calibration-demo-unet.json)",
        .input = "local field (ppm) multiplied by the brain mask; B0 along the volume's third axis; 1 mm-like voxels",
        .output = "chi (ppm)",
        .weights = {{{"demo-unet.onnx", 5609982, "750a2452b1d6a69cf8b0f64e519f61366d9e552a343fbc4e02fa3a256f55feba",
                      "web/models/demo-unet.onnx"}}},
        .licence = "MIT (Tessera's own; trained on synthetic data by scripts/train_demo_net.py)",
        .citation = "Tessera demo network: a 1.4 M-parameter 3D U-Net trained on random synthetic susceptibility "
                    "patches (scripts/train_demo_net.md). A demonstration, not a clinical model",
        .notes = "demo only: r = 0.85 against the numerical phantom's truth; not for clinical use",
        // The speed probe's fit (measureSpeed: 32³ 0.34 s, 64³ 1.96 s, 1 thread, node, quiet AMD EPYC; RESULTS §16).
        .seconds_per_voxel = 7.1e-6,
        .receptive_radius = 51,
        .receptive_source = "the shipped graph (bindings/js/receptive-field.js; checked by receptive-field.test.js); "
                            "measured context from a probe of the shipped weights",
        .measured_context = kDemoContext,
    },
};

}  // namespace

const char* model_kind_name(ModelKind kind) {
  switch (kind) {
    case ModelKind::FieldToChi: return "field-to-chi";
    case ModelKind::PhysicsLoop: return "physics-loop";
    case ModelKind::NativePatches: return "native-patches";
    case ModelKind::WholeVolumeOnly: return "whole-volume-only";
  }
  return "unknown";
}

std::span<const ModelSpec> model_registry() { return kModels; }

const ModelSpec* find_model(std::string_view id) {
  for (const ModelSpec& m : kModels) {
    if (m.id == id) return &m;
  }
  return nullptr;
}

const ModelSpec& model_spec(std::string_view id) {
  if (const ModelSpec* m = find_model(id)) return *m;
  std::string known;
  for (const ModelSpec& m : kModels) {
    if (!known.empty()) known += ", ";
    known += m.id;
  }
  throw Error(ErrorCode::InvalidArgument, "unknown model '" + std::string(id) + "'; known models: " + known);
}

bool takes_input(const ModelSpec& m, InputRole role) {
  for (InputRole r : m.inputs) {
    if (r == role) return true;
  }
  return false;
}

const char* input_role_name(InputRole role) {
  switch (role) {
    case InputRole::Field: return "field";
    case InputRole::Phase: return "phase";
    case InputRole::Mask: return "mask";
    case InputRole::Te: return "te";
    case InputRole::B0: return "b0";
    case InputRole::B0Dir: return "b0_dir";
    case InputRole::Border: return "border";
  }
  return "unknown";
}

TileCost tile_cost_of(std::string_view id) {
  const ModelSpec& m = model_spec(id);
  if (!m.tileable()) {
    throw Error(ErrorCode::InvalidArgument, "model '" + std::string(id) + "' (" + model_kind_name(m.kind) +
                                                ") cannot be tiled with user settings: " + std::string(m.notes));
  }
  return m.tile_cost();
}

}  // namespace tessera
