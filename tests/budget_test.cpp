#include "tessera/common/budget.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "tessera/common/error.h"

#ifdef __EMSCRIPTEN__
#include <emscripten/stack.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "common/parallel.h"
#endif

using namespace tessera;

namespace {
constexpr uint64_t kBpv = 1100;  // the reference engine's budgeting figure
TileCost cost(uint32_t divisor) { return TileCost{divisor, kBpv}; }

std::string tile_refusal(TileConfig cfg, TileCost c) {
  try {
    check_wasm_patch_fits(cfg, c);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::BudgetExceeded);
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Budget, PatchSizeRoundsUpToDivisor) {
  EXPECT_EQ(tile_patch_size({56, 4}, 8), 64u);
  EXPECT_EQ(tile_patch_size({121, 4}, 8), 136u);
  EXPECT_EQ(tile_patch_size({121, 4}, 1), 129u);
  EXPECT_EQ(tile_patch_size({5, 0}, 16), 16u);
  EXPECT_EQ(tile_patch_size({5, 0}, 0), 5u);  // divisor 0 treated as 1
}

TEST(Budget, MaxPatchEdgeFor1100BytesPerVoxel) {
  EXPECT_EQ(max_wasm_patch_edge(1100), 131u);
  // Check the defining property directly, not only the number.
  EXPECT_LE(patch_bytes(131, 1100), WASM_MAX_PATCH_ACTIVATION_BYTES);
  EXPECT_GT(patch_bytes(132, 1100), WASM_MAX_PATCH_ACTIVATION_BYTES);
}

TEST(Budget, TilesWithinBudget) {
  EXPECT_EQ(tiles_within_wasm_budget({56, 4}, cost(1)), 5u);
  EXPECT_EQ(tiles_within_wasm_budget({24, 4}, cost(1)), 41u);
  EXPECT_EQ(tiles_within_wasm_budget({120, 4}, cost(1)), 1u);
  EXPECT_EQ(tiles_within_wasm_budget({128, 8}, cost(1)), 1u);
  EXPECT_EQ(tiles_within_wasm_budget({192, 32}, cost(1)), 1u);
}

TEST(Budget, TilesInFlightIsMinOfThreadsAndBudget) {
  EXPECT_EQ(wasm_tiles_in_flight({56, 4}, cost(8), 2), 2u);
  EXPECT_EQ(wasm_tiles_in_flight({56, 4}, cost(8), 16), 5u);
  EXPECT_EQ(wasm_tiles_in_flight({56, 4}, cost(8), 0), 1u);
  EXPECT_EQ(tile_concurrency({56, 4}, cost(8), 16, Target::Native), 16u);
  EXPECT_EQ(tile_concurrency({56, 4}, cost(8), 16, Target::Wasm), 5u);
  EXPECT_EQ(tile_concurrency({56, 4}, cost(8), 0, Target::Native), 1u);
}

TEST(Budget, PatchFitsWithDivisor8) {
  EXPECT_NO_THROW(check_wasm_patch_fits({56, 4}, cost(8)));
  EXPECT_NO_THROW(check_wasm_patch_fits({120, 4}, cost(8)));
  const std::string m = tile_refusal({121, 4}, cost(8));
  EXPECT_NE(m.find("136³"), std::string::npos) << m;
}

TEST(Budget, PatchFitsWithDivisor1) {
  EXPECT_NO_THROW(check_wasm_patch_fits({123, 4}, cost(1)));
  EXPECT_NE(tile_refusal({124, 4}, cost(1)).find("132³"), std::string::npos);
}

TEST(Budget, NativeDefaultRefusedWithAdvice) {
  const std::string m = tile_refusal(TileConfig{}, cost(8));
  EXPECT_NE(m.find("144³"), std::string::npos) << m;
  EXPECT_NE(m.find("largest core that fits is 112"), std::string::npos) << m;
  EXPECT_NE(m.find("largest patch that fits is 128³"), std::string::npos) << m;
  EXPECT_NE(m.find("3.28 GB"), std::string::npos) << m;  // 144³ · 1100 B
  // The advice itself must be true: the suggested core fits, one more does not.
  EXPECT_NO_THROW(check_wasm_patch_fits({112, 8}, cost(8)));
  EXPECT_THROW(check_wasm_patch_fits({113, 8}, cost(8)), Error);
}

TEST(Budget, HugeHaloSaysReduceTheHalo) {
  const std::string m = tile_refusal({8, 64}, cost(8));
  EXPECT_NE(m.find("reduce the halo"), std::string::npos) << m;
  EXPECT_EQ(m.find("largest core that fits"), std::string::npos) << m;
  const PatchFit fit = wasm_patch_fit({8, 64}, cost(8));
  EXPECT_EQ(fit.largest_core, 0u);
  // The suggested maximum halo leaves room for a 1-voxel core within the largest patch.
  EXPECT_NE(m.find("at most 63"), std::string::npos) << m;
}

TEST(Budget, CountNeverRisesAsCoreGrows) {
  for (uint32_t divisor : {1u, 8u, 16u}) {
    uint64_t previous = std::numeric_limits<uint64_t>::max();
    for (uint32_t core = 8; core <= 200; ++core) {
      const uint64_t n = tiles_within_wasm_budget({core, 4}, cost(divisor));
      EXPECT_LE(n, previous) << "core " << core << " divisor " << divisor;
      EXPECT_GE(n, 1u);
      previous = n;
    }
  }
}

TEST(Budget, DegenerateConfigsNeitherCrashNorWrap) {
  // core 0, halo 0: a zero-size patch costs nothing; the count saturates instead of dividing by 0.
  EXPECT_EQ(tile_patch_size({0, 0}, 8), 0u);
  EXPECT_EQ(tile_bytes({0, 0}, cost(8)), 0u);
  EXPECT_EQ(tiles_within_wasm_budget({0, 0}, cost(8)), std::numeric_limits<uint64_t>::max());
  EXPECT_GE(wasm_tiles_in_flight({0, 0}, cost(8), 4), 1u);
  EXPECT_THROW(validate_tile_config({0, 4}), Error);
  // Huge core: 64-bit products that would wrap on 32-bit size_t saturate instead.
  const TileConfig huge{std::numeric_limits<uint32_t>::max(), std::numeric_limits<uint32_t>::max()};
  EXPECT_EQ(tile_bytes(huge, cost(8)), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(tiles_within_wasm_budget(huge, cost(8)), 1u);
  EXPECT_FALSE(wasm_patch_fit(huge, cost(8)).fits);
  EXPECT_THROW(validate_tile_config(huge), Error);
  // 2048³ · 1100 is 9.4e12: above 2^32, so a 32-bit product would have wrapped to a small number.
  EXPECT_EQ(patch_bytes(2048, 1100), 2048ull * 2048ull * 2048ull * 1100ull);
  EXPECT_EQ(saturating_mul(std::numeric_limits<uint64_t>::max(), 2), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(saturating_add(std::numeric_limits<uint64_t>::max(), 1), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(max_wasm_patch_edge(0), max_wasm_patch_edge(1));
}

TEST(Budget, AFixedPartPerWorkerCountsInEveryFigure) {
  // A QSMnet-like network: 1.7 GB per worker before any patch, then 430 B/voxel.
  const TileCost heavy{16, 430, 1'700'000'000};
  EXPECT_EQ(tile_bytes({48, 8}, heavy), 1'700'000'000ull + 64ull * 64 * 64 * 430);
  // e³·430 <= 0.8e9  =>  e <= 122.
  EXPECT_EQ(max_wasm_patch_edge(430, 1'700'000'000), 122u);
  EXPECT_EQ(tiles_within_wasm_budget({48, 8}, heavy), 1u);  // the fixed part alone is over 1.5 GB
  EXPECT_EQ(wasm_tiles_in_flight({48, 8}, heavy, 4), 1u);
  const PatchFit ok = wasm_patch_fit({96, 8}, heavy);  // 112³
  EXPECT_TRUE(ok.fits);
  const PatchFit big = wasm_patch_fit({112, 8}, heavy);  // 128³
  EXPECT_FALSE(big.fits);
  EXPECT_EQ(big.largest_edge, 112u);
  EXPECT_EQ(big.largest_core, 96u);
  EXPECT_NE(big.message.find("1.70 GB per worker"), std::string::npos) << big.message;
  // A fixed part over the single-patch limit cannot run at all, and says so.
  const PatchFit never = wasm_patch_fit({8, 0}, TileCost{8, 100, 3'000'000'000});
  EXPECT_FALSE(never.fits);
  EXPECT_NE(never.message.find("cannot run in a browser"), std::string::npos) << never.message;
  // A small network: more tiles fit with a small fixed part than the per-voxel rate alone would say.
  const TileCost light{8, 1120, 72'400'000};
  EXPECT_EQ(tiles_within_wasm_budget({56, 4}, light), 1'500'000'000ull / (72'400'000ull + 262144ull * 1120));
}

// Each thread beyond the calling one holds a stack of the link's size in the module heap, and a few small records.
TEST(Budget, ThreadsBeyondTheFirstHoldTheirStacks) {
  EXPECT_EQ(wasm_thread_heap_bytes(0), 0u);
  EXPECT_EQ(wasm_thread_heap_bytes(1), 0u);
  const uint64_t one = wasm_thread_heap_bytes(2);
  EXPECT_GE(one, WASM_PTHREAD_STACK_BYTES);
  EXPECT_LE(one, WASM_PTHREAD_STACK_BYTES + 8192);
  for (unsigned t : {3u, 4u, 8u, 16u}) EXPECT_EQ(wasm_thread_heap_bytes(t), (t - 1) * one) << t;
}

#ifdef __EMSCRIPTEN__
// The stack a started thread really has (its base minus its end) is the one the plans count.
TEST(Budget, AThreadsStackIsTheSizeThePlansCount) {
  uint64_t size = 0;
  std::thread t([&] { size = emscripten_stack_get_base() - emscripten_stack_get_end(); });
  t.join();
  EXPECT_EQ(size, WASM_PTHREAD_STACK_BYTES);
}

// Loops run their threads on the kept stacks: after the first, more loops on as many threads take no stack again (the
// break moves by less than one stack: only the threads' small records are allocated anew).
TEST(Budget, ParallelLoopsRunOnTheKeptStacks) {
  reserve_thread_stacks(3);
  std::vector<float> v(1u << 20, 0.0f);
  auto loop = [&] {
    parallel_for(v.size(), 4, [&](uint64_t begin, uint64_t end) {
      for (uint64_t i = begin; i < end; ++i) v[i] += 1.0f;
    });
  };
  loop();
  const unsigned held = thread_stacks().held;
  const uintptr_t brk = reinterpret_cast<uintptr_t>(sbrk(0));
  for (int i = 0; i < 5; ++i) loop();
  EXPECT_EQ(thread_stacks().held, held);
  EXPECT_LT(reinterpret_cast<uintptr_t>(sbrk(0)) - brk, 64u << 10);
  for (float x : v) ASSERT_EQ(x, 6.0f);
}
#endif
