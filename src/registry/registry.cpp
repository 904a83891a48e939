#include "tessera/registry/registry.h"

#include <cmath>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

#include "tessera/common/error.h"
#include "tessera/common/schema.h"

namespace tessera {

namespace {

// Every measurement ran the same engine (bindings/js/runtime/ort-worker.js; the method: bench/CALIBRATION.md).
constexpr std::string_view kOrt = "ONNX Runtime Web";
constexpr std::string_view kOrtVersion = "1.30.0";
constexpr std::string_view kOrtBackend = "wasm";
constexpr std::string_view kCalibration = "bench/CALIBRATION.md, bench/calibration.json";

constexpr CostHost kXqsmHosts[] = {{"node", 2, 32, 96}, {"Chromium", 2, 32, 64}};
constexpr NetworkHeap kXqsmHeap[] = {{.parameters = "5.22 M parameters",
                                      .after_session_bytes = 75'890'688,
                                      .slope = 1011.7,
                                      .slope_from_edge = 32,
                                      .slope_to_edge = 96,
                                      .fit_fixed_bytes = 74'480'854,
                                      .fit_r2 = 0.9986}};
constexpr CostMeasurement kXqsmCost = {
    .engine = kOrt,
    .engine_version = kOrtVersion,
    .backend = kOrtBackend,
    .subject = "an architecture-faithful xQSM-shaped stand-in",
    .script = "scripts/standins.js",
    .hosts = kXqsmHosts,
    .date = "2026-11-29",
    .networks = kXqsmHeap,
    .evidence = "bench/CALIBRATION.md, bench/calibration.json",
    .note = "the fixed part is raised from the calibration's own 72.4 MB, which one Chromium 64³ heap passed by "
            "17 280 B",
};

// QSMnet and QSMnet+ share the architecture and the file size (the normalisation does not change memory).
constexpr CostHost kQsmnetHosts[] = {{"node", 2, 64, 144}};
constexpr NetworkHeap kQsmnetHeap[] = {{.parameters = "99.45 M parameters",
                                        .after_session_bytes = 1'692'794'880,
                                        .flat_to_edge = 112,
                                        .slope = 384,
                                        .slope_from_edge = 128,
                                        .slope_to_edge = 144}};
constexpr CostMeasurement kQsmnetCost = {
    .engine = kOrt,
    .engine_version = kOrtVersion,
    .backend = kOrtBackend,
    .subject = "an architecture-faithful QSMnet-shaped stand-in",
    .script = "scripts/standins.js",
    .hosts = kQsmnetHosts,
    .date = "2026-11-29",
    .networks = kQsmnetHeap,
    .evidence = kCalibration,
};

// IR2QSM and the physics loops (LPCNN, MoDL-QSM, NeXtQSM): stand-ins of scripts/standins-ir2qsm.js and scripts/standins-loops.js, measured with
// bench/calibrate.js (node) and bench/calibrate-browser.js (Chromium); every point in bench/calibration.json is
// checked under the registry's lines by tests/js/registry-costs.test.js.
constexpr CostHost kLoopHosts[] = {{"node", 2, 32, 96}, {"node", 1, 32, 64}, {"Chromium", 2, 64, 64}};
constexpr NetworkHeap kIr2qsmHeap[] = {{.parameters = "10.06 M parameters, 40.3 MB",
                                        .after_session_bytes = 148'897'792,
                                        .flat_to_edge = 48,
                                        .slope = 517.6,
                                        .slope_from_edge = 64,
                                        .slope_to_edge = 96}};
constexpr CostMeasurement kIr2qsmCost = {
    .engine = kOrt,
    .engine_version = kOrtVersion,
    .backend = kOrtBackend,
    .subject = "an architecture-faithful IR2QSM-shaped stand-in",
    .script = "scripts/standins-ir2qsm.js",
    .hosts = kLoopHosts,
    .date = "2026-12-02",
    .networks = kIr2qsmHeap,
    .rule = BudgetRule::PointsMarginUnderLine,
    .evidence = kCalibration,
};
constexpr NetworkHeap kLpcnnHeap[] = {{.parameters = "0.45 M parameters",
                                       .after_session_bytes = 20'185'088,
                                       .slope = 386.6,
                                       .slope_from_edge = 32,
                                       .slope_to_edge = 96,
                                       .fit_fixed_bytes = 16'955'916,
                                       .fit_r2 = 0.9996}};
constexpr CostMeasurement kLpcnnCost = {
    .engine = kOrt,
    .engine_version = kOrtVersion,
    .backend = kOrtBackend,
    .subject = "an architecture-faithful stand-in of LPCNN's network",
    .script = "scripts/standins-loops.js",
    .hosts = kLoopHosts,
    .date = "2026-12-02",
    .networks = kLpcnnHeap,
    .rule = BudgetRule::PointsMarginUnderLine,
    .evidence = kCalibration,
    .note = "one pool worker runs the loop's 3 calls of a tile; the loop's FFT workspace lives in the C++ module heap",
};
constexpr NetworkHeap kModlHeap[] = {{.parameters = "0.45 M parameters",
                                      .after_session_bytes = 20'185'088,
                                      .slope = 390.9,
                                      .slope_from_edge = 32,
                                      .slope_to_edge = 96,
                                      .fit_fixed_bytes = 17'550'229,
                                      .fit_r2 = 0.9997}};
constexpr CostMeasurement kModlCost = {
    .engine = kOrt,
    .engine_version = kOrtVersion,
    .backend = kOrtBackend,
    .subject = "an architecture-faithful stand-in of MoDL-QSM's network, 2 channels in and out",
    .script = "scripts/standins-loops.js",
    .hosts = kLoopHosts,
    .date = "2026-12-02",
    .networks = kModlHeap,
    .rule = BudgetRule::PointsMarginUnderLine,
    .evidence = kCalibration,
    .note = "one pool worker runs the loop's 3 calls of a tile",
};
constexpr CostHost kNextqsmHosts[] = {{"node", 2, 32, 128}, {"node", 1, 32, 128}, {"Chromium", 2, 64, 64}};
constexpr NetworkHeap kNextqsmHeaps[] = {{.network = "BF U-Net",
                                          .parameters = "28.3 M parameters",
                                          .after_session_bytes = 366'608'384,
                                          .flat_to_edge = 64,
                                          .slope = 414.5,
                                          .slope_from_edge = 64,
                                          .slope_to_edge = 128},
                                         {.network = "VJP net",
                                          .parameters = "its VN U-Net and the backward pass, 10.6 M parameters",
                                          .after_session_bytes = 155'516'928,
                                          .slope = 3602.4,
                                          .slope_from_edge = 32,
                                          .slope_to_edge = 64}};
constexpr CostMeasurement kNextqsmCost = {
    .engine = kOrt,
    .engine_version = kOrtVersion,
    .backend = kOrtBackend,
    .subject = "architecture-faithful stand-ins of NeXtQSM's two networks",
    .script = "scripts/standins-loops.js",
    .hosts = kNextqsmHosts,
    .date = "2026-12-02",
    .networks = kNextqsmHeaps,
    .rule = BudgetRule::PointsMarginUnderLine,
    .evidence = kCalibration,
    .note = "a tile holds one worker of each network (one pool per network); the BF U-Net holds 305.7 MB after "
            "session creation at 2 threads; 1.39-1.45 GB together at 64³; the VJP net's slope is a transposed "
            "convolution's column buffer and 128³ fails in it (ORT size overflow), so patches stay at 64³",
};

// The iQSM family: iQSM and iQFM share the architecture (and the stand-in).
constexpr CostHost kPhaseHosts[] = {{"node", 2, 64, 160}};
constexpr NetworkHeap kIqsmHeap[] = {{.parameters = "4.31 M parameters",
                                      .after_session_bytes = 80'216'064,
                                      .slope = 295,
                                      .slope_from_edge = 64,
                                      .slope_to_edge = 160,
                                      .fit_fixed_bytes = 71'833'004,
                                      .fit_r2 = 0.9994}};
constexpr CostMeasurement kIqsmCost = {
    .engine = kOrt,
    .engine_version = kOrtVersion,
    .backend = kOrtBackend,
    .subject = "an iQSM-shaped stand-in with random weights, a LoT layer + depth-4 U-Net",
    .script = "scripts/standins.js",
    .hosts = kPhaseHosts,
    .date = "2026-11-29",
    .networks = kIqsmHeap,
    .evidence = "bench/calibration-iqsm.json",
    .note = "iQFM has the same architecture",
};
constexpr NetworkHeap kIqsmPlusHeap[] = {{.parameters = "4.35 M parameters",
                                          .after_session_bytes = 56'098'816,
                                          .slope = 327.1,
                                          .slope_from_edge = 64,
                                          .slope_to_edge = 160,
                                          .fit_fixed_bytes = 63'199'697,
                                          .fit_r2 = 0.97}};
constexpr CostMeasurement kIqsmPlusCost = {
    .engine = kOrt,
    .engine_version = kOrtVersion,
    .backend = kOrtBackend,
    .subject = "an iQSM+-shaped stand-in with random weights, a LoT layer + orientation-edited depth-4 U-Net",
    .script = "scripts/standins.js",
    .hosts = kPhaseHosts,
    .date = "2026-11-29",
    .networks = kIqsmPlusHeap,
    .evidence = "bench/calibration-iqsm.json",
    .note = "1.24-1.50 GB at 160³ between repeats; the line keeps one heap growth step (≤ 96 MiB) to spare above "
            "every point, after a 128×160×128 run reached the 68 MiB line",
};

constexpr CostHost kDemoHosts[] = {{"node", 2, 32, 96}};
constexpr NetworkHeap kDemoHeap[] = {{.parameters = "1.4 M parameters",
                                      .after_session_bytes = 29'097'984,
                                      .slope = 327.8,
                                      .slope_from_edge = 32,
                                      .slope_to_edge = 96,
                                      .fit_fixed_bytes = 19'487'306,
                                      .fit_r2 = 0.996}};
constexpr CostMeasurement kDemoCost = {
    .engine = kOrt,
    .engine_version = kOrtVersion,
    .backend = kOrtBackend,
    .subject = "the shipped weights",
    .hosts = kDemoHosts,
    .date = "2026-11-29",
    .networks = kDemoHeap,
    // The margin rule: a heap grows in Emscripten's steps, so a patch between the measured edges can commit the next
    // step early (48×48×40 reached 1.06× a line that only had the measured points under it).
    .rule = BudgetRule::PointsMarginUnderLine,
    .evidence = "bench/calibration-demo-unet.json",
};

constexpr std::string_view kUnstatedLicence =
    "not stated by the sources of this registry: check the upstream repository before redistribution";

// Shared by the iQSM family (iQSM and iQFM share their architecture and paper).
constexpr std::string_view kIqsmInput =
    "wrapped phase · -1 (rad), eroded mask, TE (s), B0 (T), border shell; B0 along the third axis";
constexpr std::string_view kIqsmCitation =
    "Gao Y, Xiong Z, Fazlollahi A, et al. Instant tissue field and magnetic susceptibility mapping from MRI raw phase "
    "using Laplacian enhanced deep neural networks. NeuroImage. 2022;259:119410";
constexpr std::string_view kPhaseNotes =
    "whole-volume only; from wrapped phase (17.2-17.7 MB weights; their exact size and sha256 are not known to this registry)";

// The stand-ins: scripts/standins.js; their radii are checked by bindings/js/receptive-field.test.js.
constexpr std::string_view kStandinRadius =
    "the graph of an architecture-faithful stand-in of the network (same layers, random weights); the weights' own "
    "graph is used when they are given";

// The demo network's measured context: `tessera-qsm receptive-field --model demo-unet --probe --json` (a 104³
// phantom patch, ±0.1 ppm at its centre, ONNX Runtime Web; 90 % within 29 voxels, 99 % within 42), 4 decimals.
constexpr double kDemoContext[] = {
    0,      0.0379, 0.0792, 0.1192, 0.1785, 0.23,   0.2666, 0.3111, 0.3561, 0.4051, 0.442,  0.4754, 0.5051,
    0.5333, 0.5602, 0.5842, 0.6106, 0.6349, 0.6594, 0.6833, 0.7101, 0.7376, 0.764,  0.79,   0.8158, 0.8403,
    0.8596, 0.8745, 0.8878, 0.9016, 0.9157, 0.9285, 0.9388, 0.9474, 0.9553, 0.9622, 0.9685, 0.9738, 0.9787,
    0.9828, 0.9863, 0.989,  0.9911, 0.9929, 0.9944, 0.9957, 0.9966, 0.9974, 0.9981, 0.9986, 0.999,  1};

// The registry's entries. Facts from shared/docs/models.md; keep this the only copy. cost_provisional and cost_source
// are filled in by registry() from each entry's budget and cost_measurement.
// QSMnet's and QSMnet+'s work per voxel (one architecture): the QSMnet-shaped stand-in at its published size
// (scripts/make_standins.js --only qsmnet, 397.8 MB like the real files; graph-cost.test.js checks it).
constexpr double kQsmnetMacs = 1'035'872;

constexpr ModelSpec kEntries[] = {
    {
        .id = "xqsm",
        .name = "xQSM",
        .kind = ModelKind::FieldToChi,
        .divisor = 8,
        .bytes_per_voxel = 1120,
        .fixed_bytes = 76'000'000,
        .cost_measurement = &kXqsmCost,
        .input = "local field (ppm), no normalisation",
        .output = "chi (ppm), no scaling (global residual inside the graph)",
        .weights = {{{"xqsm.onnx", 20901826, "81854ec2ca85bba25c2f9aae05efdcac299d0efffb03fe6a0e6797019e46b487"}}},
        .licence = kUnstatedLicence,
        .citation = "Gao Y, Zhu X, Moffat BA, et al. xQSM: quantitative susceptibility mapping with octave "
                    "convolutional and noise-regularized neural networks. NMR Biomed. 2021;34:e4461",
        // The xQSM-shaped stand-in at its published size (scripts/make_standins.js; graph-cost.test.js checks it): its
        // time is this work at kSecondsPerMac (within 25 % of the runs; the 6.3e-5 s per voxel measured
        // earlier ran 1.5-1.8× over them).
        .macs_per_voxel = 396'524,
        .wasm_conv_transpose_rewrite = true,  // its stand-in ran 8-14 % faster per patch, heap -16 %
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
        .cost_measurement = &kQsmnetCost,
        .input = "local field (ppm), normalised (f - 0) / 0.01",
        .output = "chi (ppm) = 0.0317 · output + 0",
        .norm = {0.0, 0.01, 0.0317, 0.0},
        .weights = {{{"qsmnet.onnx", 397801854, "8fd1d79b7a9258a262a2faab9e8469757ae7735f3da6212e431acfb207c21b54"}}},
        .licence = "academic research only",
        .citation = "Yoon J, Gong E, Chatnuntawech I, et al. Quantitative susceptibility mapping using deep "
                    "neural network: QSMnet. NeuroImage. 2018;179:199-206",
        .macs_per_voxel = kQsmnetMacs,
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
        .cost_measurement = &kQsmnetCost,
        .input = "local field (ppm), normalised (f - 0) / 0.0205",
        .output = "chi (ppm) = 0.0734 · output + 0",
        .norm = {0.0, 0.0205, 0.0734, 0.0},
        .weights = {{{"qsmnet-plus.onnx", 397801854,
                      "0ed31f9a1b66f75fee4a96022b6bc3838b91bc5b819714dade5ca87cd331683d"}}},
        .licence = "academic research only",
        .citation = "Jung W, Yoon J, Ji S, et al. Exploring linearity of deep neural network trained QSM: "
                    "QSMnet+. NeuroImage. 2020;211:116619",
        .macs_per_voxel = kQsmnetMacs,
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
        .cost_measurement = &kIr2qsmCost,
        .input = "local field (ppm)",
        .output = "chi (ppm)",
        .pad = PadRule::LargerHalfLow,
        .weights = {{{"ir2qsm.onnx", 40259354, "dcaf7a26d6633900f339f94be16d580ccea6147bbf6da26eacb9a5e1acdc0c53"}}},
        .licence = kUnstatedLicence,
        .citation = "Li M, Chen C, Xiong Z, et al. Quantitative susceptibility mapping via deep neural networks "
                    "with iterative reverse concatenations and recurrent modules. Med Phys. 2025 "
                    "(doi:10.1002/mp.17747)",
        // The stand-in, 64³, node, 1 thread, scaled to a quiet machine by the xQSM stand-in run alongside.
        .seconds_per_voxel = 4.7e-5,
    },
    {
        .id = "lpcnn",
        .name = "LPCNN",
        .kind = ModelKind::PhysicsLoop,
        .divisor = 8,
        .bytes_per_voxel = 430,
        .fixed_bytes = 25'165'824,  // 24 MiB
        .cost_measurement = &kLpcnnCost,
        .input = "local field (ppm) and mask; 3 proximal-gradient iterations around the net",
        .output = "chi (ppm)",
        .algorithm = Algorithm::Lpcnn,
        .weights = {{{"lpcnn.onnx", 1790869, "831f2a161f6ab8ee7bf64cc2dd8bca532fc971d0083cf5729d6302d3ed31625d"}}},
        .licence = kUnstatedLicence,
        .citation = "Lai KW, Aggarwal M, van Zijl P, Li X, Sulam J. Learned proximal networks for quantitative "
                    "susceptibility mapping. MICCAI 2020",
        .notes = "tiled mode runs the whole physics loop per patch: off-design, results approximate",
        .seconds_per_voxel = 1.48e-4,  // the loop's 3 calls of the stand-in, 64³, 1 thread, load-scaled
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
        .cost_measurement = &kModlCost,
        .input_channels = 2,
        .output_channels = 2,
        .input = "local field (ppm) and mask; trained at 1 mm isotropic (other voxels are resampled there), even dims; 3 model-based iterations",
        .output = "chi (ppm): channel 0 · mask",
        .algorithm = Algorithm::ModlQsm,
        // models.md: "assumes 1 mm isotropic"; the authors' inference resamples the field to 1 mm in k-space and back.
        .training_voxel_mm = {1.0, 1.0, 1.0},
        .weights = {{{"modl-qsm.onnx", 1794143, "1f8da7d39eaaa4c3f0f9e67298fba5f14230e769cfd6349c81d0b74a6f800c57"}}},
        .licence = kUnstatedLicence,
        .citation = "Feng R, Zhao J, Wang H, et al. MoDL-QSM: model-based deep learning for quantitative "
                    "susceptibility mapping. NeuroImage. 2021;240:118376",
        .notes = "tiled mode runs the whole physics loop per patch: off-design, results approximate",
        .seconds_per_voxel = 1.29e-4,  // the loop's 3 calls of the stand-in, 64³, 1 thread, load-scaled
    },
    {
        .id = "nextqsm",
        .name = "NeXtQSM",
        .kind = ModelKind::PhysicsLoop,
        .divisor = 64,
        .bytes_per_voxel = 4420,
        .fixed_bytes = 522'190'848,  // 498 MiB
        .cost_measurement = &kNextqsmCost,
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
        .seconds_per_voxel = 1.26e-4,  // BF + 6 VJP calls of the stand-ins, 64³, 1 thread, load-scaled
    },
    {
        .id = "autoqsm",
        .name = "AutoQSM",
        .kind = ModelKind::NativePatches,
        .divisor = 1,
        .bytes_per_voxel = kReferenceBytesPerVoxel,
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
        .cost_measurement = &kIqsmCost,
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
        .cost_measurement = &kIqsmCost,
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
        .cost_measurement = &kIqsmPlusCost,
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
        .fixed_bytes = 29'360'128,  // 28 MiB
        .cost_measurement = &kDemoCost,
        .masked_input = true,
        .input = "local field (ppm) multiplied by the brain mask; B0 along the volume's third axis; 1 mm-like voxels",
        .output = "chi (ppm)",
        .weights = {{{"demo-unet.onnx", 5609982, "750a2452b1d6a69cf8b0f64e519f61366d9e552a343fbc4e02fa3a256f55feba",
                      "web/models/demo-unet.onnx"}}},
        .licence = "MIT (Tessera's own; trained on synthetic data by scripts/train_demo_net.py)",
        .citation = "Tessera demo network: a 1.4 M-parameter 3D U-Net trained on random synthetic susceptibility "
                    "patches (scripts/train_demo_net.md). A demonstration, not a clinical model",
        .notes = "demo only: r = 0.85 against the numerical phantom's truth; not for clinical use",
        // The shipped graph's work (graph-cost.test.js checks it), at kSecondsPerMac (within 25 % of the
        // runs; the 7.1e-6 s per voxel of an earlier probe ran 1.2-1.7× over them).
        .macs_per_voxel = 53'616,
        .wasm_conv_transpose_rewrite = true,  // the shipped graph ran 6-9 % faster per patch, heap -18 %
        .receptive_radius = 51,
        .receptive_source = "the shipped graph (bindings/js/receptive-field.js; checked by receptive-field.test.js); "
                            "measured context from a probe of the shipped weights",
        .measured_context = kDemoContext,
    },
};

constexpr uint64_t kMiB = 1ull << 20;

// A budget's fixed part, exact: whole MiB as MiB, else decimal MB (GB from 1 GB on).
std::string budget_bytes_text(uint64_t bytes) {
  if (bytes % kMiB == 0) return number_text(static_cast<double>(bytes / kMiB)) + " MiB";
  if (bytes >= 1'000'000'000) return number_text(static_cast<double>(bytes) / 1e9) + " GB";
  return number_text(static_cast<double>(bytes) / 1e6) + " MB";
}

// A measured heap, to 0.1 MB.
std::string measured_mb(uint64_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return buffer;
}

// "32-96³", or "64³" for one edge.
std::string edges_text(uint32_t from, uint32_t to) {
  return (from == to ? std::to_string(to) : std::to_string(from) + "-" + std::to_string(to)) + "³";
}

// Items joined by ", " with " and " before the last.
std::string listed(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? " and " : ", ";
    out += items[i];
  }
  return out;
}

// "1692.8 MB per worker after session creation, flat to 112³, then +384 B/voxel (128-144³)", or with a fitted line
// "75.9 MB per worker after session creation, heap ≈ 74.5 MB + 1011.7 B/voxel (32-96³, r² 0.9986)".
std::string heap_text(const NetworkHeap& h) {
  std::string out = measured_mb(h.after_session_bytes) + " per worker after session creation";
  if (h.flat_to_edge) out += ", flat to " + std::to_string(h.flat_to_edge) + "³";
  const std::string edges = edges_text(h.slope_from_edge, h.slope_to_edge);
  if (h.fit_fixed_bytes) {
    return out + ", heap ≈ " + measured_mb(h.fit_fixed_bytes) + " + " + number_text(h.slope) + " B/voxel (" + edges +
           ", r² " + number_text(h.fit_r2) + ")";
  }
  return out + (h.flat_to_edge ? ", then +" : ", +") + number_text(h.slope) + " B/voxel (" + edges + ")";
}

std::string measured_text(const ModelSpec& m, const CostMeasurement& c) {
  const bool one = c.networks.size() == 1;
  std::string out = "measured in " + std::string(c.engine) + " " + std::string(c.engine_version) + " (" +
                    std::string(c.backend) + ") on " + std::string(c.subject);
  std::vector<std::string> about;
  if (!c.script.empty()) about.emplace_back(c.script);
  if (one && !c.networks[0].parameters.empty()) about.emplace_back(c.networks[0].parameters);
  if (!about.empty()) out += " (" + about[0] + (about.size() > 1 ? "; " + about[1] : std::string()) + ")";
  std::vector<std::string> hosts;
  for (const CostHost& h : c.hosts) {
    const char* threads = h.threads == 1 ? " thread " : " threads ";
    hosts.push_back(std::string(h.host) + " " + std::to_string(h.threads) + threads +
                    edges_text(h.min_edge, h.max_edge));
  }
  out += ", " + listed(hosts) + (m.kind == ModelKind::WholeVolumeOnly ? " whole volumes" : " patches") + ", " +
         std::string(c.date) + ": ";
  for (size_t i = 0; i < c.networks.size(); ++i) {
    const NetworkHeap& h = c.networks[i];
    if (i > 0) out += "; ";
    if (!one) {
      out += std::string(h.network) + (h.parameters.empty() ? "" : " (" + std::string(h.parameters) + ")") + ": ";
    }
    out += heap_text(h);
  }
  const std::string margin = number_text(c.margin * 100.0) + " %";
  out += "; budgeted as " + budget_bytes_text(m.fixed_bytes) + " + " + std::to_string(m.bytes_per_voxel) +
         " B/voxel" + (one ? "" : " for the " + std::to_string(c.networks.size()) + " networks together") +
         ": the slope + " + margin + ", with ";
  out += c.rule == BudgetRule::PointsUnderLine
             ? "every point under the line"
             : "every point ≥ " + margin + " under the line and the fixed part ≥ every after-session heap";
  if (!c.note.empty()) out += "; " + std::string(c.note);
  return out + " (" + std::string(c.evidence) + ")";
}

struct Registry {
  std::vector<std::string> sentences;  // cost_text of each entry, in kEntries' order
  std::vector<ModelSpec> models;       // kEntries with cost_provisional and cost_source set
};

const Registry& registry() {
  static const Registry r = [] {
    Registry out;
    for (const ModelSpec& e : kEntries) out.sentences.push_back(cost_text(e));
    for (size_t i = 0; i < std::size(kEntries); ++i) {
      ModelSpec m = kEntries[i];
      m.cost_provisional = m.cost_measurement == nullptr;
      m.cost_source = out.sentences[i];  // the vector is complete: its strings no longer move
      out.models.push_back(m);
    }
    return out;
  }();
  return r;
}

}  // namespace

uint64_t after_session_bytes(const CostMeasurement& c) {
  uint64_t sum = 0;
  for (const NetworkHeap& h : c.networks) sum += h.after_session_bytes;
  return sum;
}

double heap_slope(const CostMeasurement& c) {
  double sum = 0.0;
  for (const NetworkHeap& h : c.networks) sum += h.slope;
  return sum;
}

uint64_t rule_bytes_per_voxel(const CostMeasurement& c) {
  return static_cast<uint64_t>(std::ceil(heap_slope(c) * (1.0 + c.margin) / 10.0)) * 10;
}

const char* budget_rule_name(BudgetRule rule) {
  switch (rule) {
    case BudgetRule::PointsUnderLine: return "points-under-line";
    case BudgetRule::PointsMarginUnderLine: return "points-margin-under-line";
  }
  return "unknown";
}

std::string cost_text(const ModelSpec& m) {
  if (m.cost_measurement) return measured_text(m, *m.cost_measurement);
  std::string out = "provisional: no measurement; budgeted as " +
                    (m.fixed_bytes ? budget_bytes_text(m.fixed_bytes) + " + " : std::string()) +
                    std::to_string(m.bytes_per_voxel) + " B/voxel";
  if (m.fixed_bytes == 0 && m.bytes_per_voxel == kReferenceBytesPerVoxel) out += ", the reference engine's figure";
  return out;
}

const char* model_kind_name(ModelKind kind) {
  switch (kind) {
    case ModelKind::FieldToChi: return "field-to-chi";
    case ModelKind::PhysicsLoop: return "physics-loop";
    case ModelKind::NativePatches: return "native-patches";
    case ModelKind::WholeVolumeOnly: return "whole-volume-only";
  }
  return "unknown";
}

std::span<const ModelSpec> model_registry() { return registry().models; }

const ModelSpec* find_model(std::string_view id) {
  for (const ModelSpec& m : model_registry()) {
    if (m.id == id) return &m;
  }
  return nullptr;
}

const ModelSpec& model_spec(std::string_view id) {
  if (const ModelSpec* m = find_model(id)) return *m;
  std::string known;
  for (const ModelSpec& m : model_registry()) {
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
