#include "tessera/engine/calibration.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tessera/common/error.h"
#include "tessera/session/request.h"

using namespace tessera;

namespace {

constexpr uint64_t kMiB = 1ull << 20;

uint64_t cube(uint64_t e) { return e * e * e; }

// A worker whose heap is `fixed + bpv · voxels`, committed in Emscripten's steps: each growth takes the heap to
// max(request, min(1.2 × current, request + 96 MiB)), rounded to 64 KiB pages.
uint64_t committed_heap(uint64_t start, uint64_t fixed, double bpv, uint64_t voxels) {
  const uint64_t need = fixed + static_cast<uint64_t>(bpv * static_cast<double>(voxels));
  uint64_t heap = start;
  while (heap < need) {
    uint64_t next = std::max<uint64_t>(need, std::min<uint64_t>(heap + heap / 5, need + 96 * kMiB));
    heap = (next + 65535) / 65536 * 65536;
  }
  return heap;
}

}  // namespace

TEST(Calibration, EdgesAreMultiplesOfTheDivisorFrom16) {
  EXPECT_EQ(calibration_edges(8, 3), (std::vector<uint64_t>{16, 24, 32}));
  EXPECT_EQ(calibration_edges(1, 4), (std::vector<uint64_t>{16, 24, 32, 40}));
  EXPECT_EQ(calibration_edges(16, 3), (std::vector<uint64_t>{16, 32, 48}));
  EXPECT_EQ(calibration_edges(64, 2), (std::vector<uint64_t>{64, 128}));
  EXPECT_EQ(calibration_edges(0, 2), (std::vector<uint64_t>{16, 24}));  // divisor 0 treated as 1
  EXPECT_EQ(calibration_edges(12, 3), (std::vector<uint64_t>{24, 36, 48}));
}

TEST(Calibration, ExactLineIsRecoveredAndRaisedByTheMargin) {
  const double fixed = 20e6, bpv = 300;
  std::vector<HeapPoint> ps;
  for (uint64_t e : {16, 24, 32}) ps.push_back({cube(e), static_cast<uint64_t>(fixed + bpv * cube(e)), 18'000'000});
  const CalibrationFit f = fit_calibration(ps);
  EXPECT_TRUE(f.slope_measured);
  EXPECT_EQ(f.points_fitted, 3u);
  EXPECT_NEAR(f.fitted_bytes_per_voxel, bpv, 1e-6);
  EXPECT_NEAR(f.fitted_fixed_bytes, fixed, 1.0);
  EXPECT_NEAR(f.r2, 1.0, 1e-12);
  // The budgeted slope is at least the fitted one, raised by the growth step, rounded up to 10 B.
  EXPECT_GE(f.slope_bound, f.fitted_bytes_per_voxel);
  EXPECT_GE(f.bytes_per_voxel, static_cast<uint64_t>(bpv * 1.2));
  EXPECT_EQ(f.bytes_per_voxel % 10, 0u);
  EXPECT_EQ(f.fixed_bytes % kMiB, 0u);
  for (const HeapPoint& p : ps) EXPECT_GE(f.fixed_bytes + f.bytes_per_voxel * p.voxels, p.heap_bytes);
  EXPECT_FALSE(f.note.empty());
}

TEST(Calibration, EveryMeasuredPointLiesUnderTheLine) {
  // Noisy, step-committed heaps (repeats at each edge differ).
  std::vector<HeapPoint> ps{
      {cube(16), 26'542'080, 24'444'928}, {cube(16), 27'131'904, 24'444'928}, {cube(24), 29'884'416, 24'444'928},
      {cube(24), 31'522'816, 24'444'928}, {cube(32), 38'731'776, 24'444'928}, {cube(32), 36'634'624, 24'444'928},
  };
  const CalibrationFit f = fit_calibration(ps);
  ASSERT_TRUE(f.slope_measured);
  for (const HeapPoint& p : ps) {
    EXPECT_GE(f.fixed_bytes + f.bytes_per_voxel * p.voxels, p.heap_bytes) << "voxels " << p.voxels;
    EXPECT_GE(f.fixed_bytes, p.after_session_bytes);
  }
  EXPECT_GT(f.raised_bytes, 0u);
}

TEST(Calibration, ExtrapolationCoversLargerPatchesOfAStepCommittedHeap) {
  // Measured at 16–32 on a heap that commits in Emscripten's steps; the line must cover the committed heap at every
  // larger patch up to 160³ (what the quick calibration claims about patches it never ran).
  const uint64_t fixed = 19'500'000;
  const uint64_t start = (fixed + 65535) / 65536 * 65536;  // the after-session heap: runtime and weights
  for (double bpv : {100.0, 330.0, 1000.0}) {
    std::vector<HeapPoint> ps;
    for (uint64_t e : calibration_edges(8, 3)) ps.push_back({cube(e), committed_heap(start, fixed, bpv, cube(e)), start});
    const CalibrationFit f = fit_calibration(ps);
    ASSERT_TRUE(f.slope_measured) << bpv;
    for (uint64_t e = 40; e <= 160; e += 8) {
      const uint64_t real = committed_heap(start, fixed, bpv, cube(e));
      EXPECT_GE(f.fixed_bytes + f.bytes_per_voxel * cube(e), real) << "bpv " << bpv << " edge " << e;
    }
  }
}

TEST(Calibration, FlatHeapDoesNotMeasureASlope) {
  // Activations fit in heap freed after session creation: the heap never grows (a QSMnet-shaped network up to 112³).
  std::vector<HeapPoint> ps{{cube(16), 1'692'800'000, 1'692'800'000}, {cube(24), 1'692'800'000, 1'692'800'000},
                            {cube(32), 1'692'800'000, 1'692'800'000}};
  EXPECT_FALSE(calibration_slope_measured(ps));
  const CalibrationFit f = fit_calibration(ps);
  EXPECT_FALSE(f.slope_measured);
  EXPECT_EQ(f.bytes_per_voxel, defaults::kBytesPerVoxel);
  EXPECT_GE(f.fixed_bytes, 1'692'800'000u);
  EXPECT_NE(f.note.find("not measured"), std::string::npos);
  // One size that grew is still not a slope; two are.
  ps.push_back({cube(40), 1'800'000'000, 1'692'800'000});
  EXPECT_FALSE(calibration_slope_measured(ps));
  ps.push_back({cube(48), 1'850'000'000, 1'692'800'000});
  EXPECT_TRUE(calibration_slope_measured(ps));
}

TEST(Calibration, BadPointsAreRefusedByName) {
  const std::vector<HeapPoint> one{{cube(16), 30'000'000, 20'000'000}, {cube(16), 31'000'000, 20'000'000}};
  try {
    fit_calibration(one);
    FAIL() << "one patch size accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("two patch sizes"), std::string::npos);
  }
  const std::vector<HeapPoint> shrunk{{cube(16), 10'000'000, 20'000'000}, {cube(24), 31'000'000, 20'000'000}};
  EXPECT_THROW(fit_calibration(shrunk), Error);
  const std::vector<HeapPoint> empty_patch{{0, 30'000'000, 20'000'000}, {cube(24), 31'000'000, 20'000'000}};
  EXPECT_THROW(fit_calibration(empty_patch), Error);
}

TEST(Calibration, OverPlanRunWarnsWithTheMeasuredFigure) {
  // The run: declared 100 B/voxel, whole volume 256×256×192, a worker heap of 4.15 GB.
  MeasuredMemory m;
  m.patch_voxels = 256ull * 256 * 192;
  m.cost = TileCost{16, 100, 0};
  m.planned_bytes_per_tile = m.cost.bytes_per_voxel * m.patch_voxels;
  m.worker_heap_bytes = 4'150'000'000;
  m.module_heap_bytes = 100'000'000;
  m.planned_module_heap_bytes = 200'000'000;
  const MemoryVerdict v = check_measured_memory(m, "net.json", true);
  EXPECT_TRUE(v.over);
  EXPECT_NEAR(v.worker_heap_vs_plan, 4.15e9 / (100.0 * m.patch_voxels), 1e-9);
  EXPECT_EQ(v.measured_bytes_per_voxel, 330u);  // 4.15e9 / 12 582 912 = 329.8, rounded up to 10 B
  EXPECT_NE(v.warning.find("--spec bytesPerVoxel 330"), std::string::npos) << v.warning;
  EXPECT_NE(v.warning.find("net.json"), std::string::npos);
  // A registry network is told to measure, not to declare.
  const MemoryVerdict r = check_measured_memory(m, "xqsm", false);
  EXPECT_NE(r.warning.find("calibrate --model xqsm"), std::string::npos) << r.warning;
}

TEST(Calibration, WithinPlanRunDoesNotWarn) {
  MeasuredMemory m;
  m.patch_voxels = cube(64);
  m.cost = TileCost{8, 370, 23'100'000};
  m.planned_bytes_per_tile = m.cost.fixed_bytes + m.cost.bytes_per_voxel * m.patch_voxels;
  m.worker_heap_bytes = m.planned_bytes_per_tile * 8 / 10;
  m.module_heap_bytes = 40'000'000;
  m.planned_module_heap_bytes = 60'000'000;
  const MemoryVerdict v = check_measured_memory(m, "demo-unet", false);
  EXPECT_FALSE(v.over);
  EXPECT_TRUE(v.warning.empty());
  EXPECT_NEAR(v.worker_heap_vs_plan, 0.8, 1e-3);
  // The module heap alone over its plan is said too, when it grew during the run.
  m.module_heap_bytes = 90'000'000;
  m.module_heap_before_bytes = 50'000'000;
  const MemoryVerdict w = check_measured_memory(m, "demo-unet", false);
  EXPECT_TRUE(w.over);
  EXPECT_NE(w.warning.find("module heap"), std::string::npos);
  // Already that large before the run (wasm memory never shrinks): not this plan's error.
  m.module_heap_before_bytes = 90'000'000;
  const MemoryVerdict before = check_measured_memory(m, "demo-unet", false);
  EXPECT_FALSE(before.over);
  EXPECT_GT(before.module_heap_vs_plan, 1.0);
  MeasuredMemory none;
  EXPECT_THROW(check_measured_memory(none, "x", true), Error);
}
