#include "tessera/engine/native_patching.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/native_patch_run.h"

#include "tessera/common/error.h"

namespace {

using tessera::Dims3;
using tessera::Geometry;
using tessera::PatchRunner;
using tessera::TensorShape;

// Returns the central out^3 of its input: the identity for a native patch network.
class CentralCrop : public PatchRunner {
 public:
  explicit CentralCrop(int64_t out) : out_(out) {}
  std::vector<float> run(std::span<const float> input, const TensorShape& shape) override {
    ++calls;
    EXPECT_EQ(shape.channels, 1u);
    EXPECT_EQ(shape.dims, (std::array<uint64_t, 3>{64, 64, 64}));
    const int64_t in = 64, o = (in - out_) / 2;
    std::vector<float> r(static_cast<size_t>(out_ * out_ * out_));
    size_t p = 0;
    for (int64_t i = 0; i < out_; ++i)
      for (int64_t j = 0; j < out_; ++j)
        for (int64_t k = 0; k < out_; ++k) r[p++] = input[static_cast<size_t>(((i + o) * in + (j + o)) * in + k + o)];
    return r;
  }
  int calls = 0;

 private:
  int64_t out_;
};

// Returns a constant per call: the call number (1, 2, ...) times step.
class CallNumber : public PatchRunner {
 public:
  CallNumber(int64_t out, float step) : out_(out), step_(step) {}
  std::vector<float> run(std::span<const float>, const TensorShape&) override {
    ++calls;
    return std::vector<float>(static_cast<size_t>(out_ * out_ * out_), step_ * static_cast<float>(calls));
  }
  int calls = 0;

 private:
  int64_t out_;
  float step_;
};

class Fixed : public PatchRunner {
 public:
  explicit Fixed(size_t n) : n_(n) {}
  std::vector<float> run(std::span<const float>, const TensorShape&) override { return std::vector<float>(n_, 0.5f); }

 private:
  size_t n_;
};

Geometry patch_geom(Dims3 d) {
  Geometry g;
  g.dims = d;
  return g;
}

std::vector<float> pattern(const Geometry& g, float amplitude) {
  std::vector<float> f(g.voxel_count());
  for (size_t i = 0; i < f.size(); ++i) f[i] = amplitude * std::sin(0.013f * static_cast<float>(i * i % 10007));
  return f;
}

}  // namespace

TEST(NativePatching, PatchGrid) {
  EXPECT_EQ(tessera::native_patch_grid({70, 50, 33}, 64, 32, 24), (std::array<int64_t, 3>{3, 2, 2}));
  EXPECT_EQ(tessera::autoqsm_patch_count({70, 50, 33}), 12u);
  EXPECT_EQ(tessera::autoqsm_patch_count({32, 1, 7}), 1u);
  EXPECT_EQ(tessera::autoqsm_patch_count({160, 160, 160}), 7u * 7u * 7u);  // ceil(128/24) + 1 = 7
  EXPECT_EQ(tessera::qsmgan_patch_count({100, 48, 49}), 6u);
  EXPECT_EQ(tessera::qsmgan_patch_count({160, 160, 160}), 64u);
  EXPECT_THROW(tessera::native_patch_grid({10, 10, 10}, 64, 32, 40), tessera::Error);
  EXPECT_THROW(tessera::autoqsm_patch_count({10, 0, 10}), tessera::Error);
}

// Identity network: the blend weights sum to exactly 1 at every voxel, so the input comes back bit for bit.
TEST(NativePatching, AutoQsmIdentityReproducesTheInputEverywhere) {
  const Geometry g = patch_geom({70, 50, 33});
  const auto field = pattern(g, 0.1f);
  std::vector<uint8_t> ones(g.voxel_count(), 1);
  CentralCrop net(32);
  const auto chi = tessera::autoqsm_invert(g, field, ones, net);
  EXPECT_EQ(net.calls, 12);
  ASSERT_EQ(chi, field);
  // With a mask, the output is masked.
  std::vector<uint8_t> half(g.voxel_count(), 0);
  for (size_t i = 0; i < half.size(); i += 2) half[i] = 1;
  const auto masked = tessera::autoqsm_invert(g, field, half, net);
  for (size_t i = 0; i < masked.size(); ++i) ASSERT_EQ(masked[i], half[i] ? field[i] : 0.0f);
}

// Constant outputs per patch show the documented blend: linear over the 8 shared voxels, 1 elsewhere.
TEST(NativePatching, AutoQsmBlendsLinearlyOverEightVoxels) {
  const Geometry g = patch_geom({56, 20, 20});  // two patches along x: outputs [0, 32) and [24, 56)
  std::vector<float> field(g.voxel_count(), 0.0f);
  std::vector<uint8_t> ones(g.voxel_count(), 1);
  CallNumber net(32, 1.0f);
  const auto chi = tessera::autoqsm_invert(g, field, ones, net);
  ASSERT_EQ(net.calls, 2);
  for (int64_t z = 0; z < 20; ++z)
    for (int64_t y = 0; y < 20; ++y)
      for (int64_t x = 0; x < 56; ++x) {
        double expected = x < 24 ? 1.0 : (x >= 32 ? 2.0 : 1.0 + (x - 24 + 0.5) / 8.0);
        ASSERT_FLOAT_EQ(chi[g.index(x, y, z)], static_cast<float>(expected)) << x;
      }
  // Every voxel of a multi-patch grid in 3D is covered with weights summing to 1: a constant network gives 1.
  class One : public PatchRunner {
   public:
    std::vector<float> run(std::span<const float>, const TensorShape&) override { return std::vector<float>(32768, 1.0f); }
  } one;
  const Geometry g3 = patch_geom({61, 47, 58});
  std::vector<float> f3(g3.voxel_count(), 0.0f);
  std::vector<uint8_t> m3(g3.voxel_count(), 1);
  const auto c3 = tessera::autoqsm_invert(g3, f3, m3, one);
  for (float v : c3) ASSERT_EQ(v, 1.0f);
}

TEST(NativePatching, QsmGanAppliesItsScalingAndCoversEveryVoxel) {
  using namespace tessera::qsmgan_constants;
  const Geometry g = patch_geom({100, 48, 49});
  auto field = pattern(g, 0.008f);  // -100 f in (-0.8, 0.8)
  field[g.index(3, 4, 5)] = -0.05f;  // -100 f = 5: clipped to 0.999999
  field[g.index(99, 47, 48)] = 0.05f;
  std::vector<uint8_t> ones(g.voxel_count(), 1);
  CentralCrop net(48);
  const auto chi = tessera::qsmgan_invert(g, field, ones, net);
  EXPECT_EQ(net.calls, 6);
  for (size_t i = 0; i < chi.size(); ++i) {
    const double in = static_cast<double>(static_cast<float>(-100.0f * field[i]));
    const double expected = std::atanh(std::clamp(in, -0.999999, 0.999999)) / 10.0;
    ASSERT_NEAR(chi[i], expected, 1e-6 * std::max(1.0, std::fabs(expected))) << i;
  }
  EXPECT_NEAR(chi[g.index(3, 4, 5)], std::atanh(0.999999) / 10.0, 1e-6);
  EXPECT_NEAR(chi[g.index(99, 47, 48)], -std::atanh(0.999999) / 10.0, 1e-6);
  // Non-overlapping outputs: each voxel gets exactly one patch's value.
  CallNumber calls(48, 0.1f);
  const auto tiles = tessera::qsmgan_invert(g, field, ones, calls);
  for (int64_t z = 0; z < 49; ++z)
    for (int64_t x = 0; x < 100; ++x) {
      const int patch = static_cast<int>(x / 48) + 3 * static_cast<int>(z / 48) + 1;  // x-fastest patch order
      const float v = static_cast<float>(std::atanh(static_cast<double>(0.1f * static_cast<float>(patch))) / 10.0);
      ASSERT_FLOAT_EQ(tiles[g.index(x, 17, z)], v);
    }
}

TEST(NativePatching, RejectsBadRunnersAndInputs) {
  const Geometry g = patch_geom({40, 30, 20});
  std::vector<float> field(g.voxel_count(), 0.01f);
  std::vector<uint8_t> mask(g.voxel_count(), 1);
  Fixed wrong(48 * 48 * 48);  // right for QSMGAN, wrong for AutoQSM
  try {
    tessera::autoqsm_invert(g, field, mask, wrong);
    FAIL() << "wrong output length accepted";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.code(), tessera::ErrorCode::RunnerFailed);
    EXPECT_NE(std::string(e.what()).find("expected 32768"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(tessera::qsmgan_invert(g, field, mask, wrong));
  class Throwing : public PatchRunner {
   public:
    std::vector<float> run(std::span<const float>, const TensorShape&) override { throw std::runtime_error("oom"); }
  } throwing;
  try {
    tessera::qsmgan_invert(g, field, mask, throwing);
    FAIL() << "runner exception swallowed";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.code(), tessera::ErrorCode::RunnerFailed);
    EXPECT_NE(std::string(e.what()).find("oom"), std::string::npos) << e.what();
  }
  std::vector<uint8_t> short_mask(10, 1);
  EXPECT_THROW(tessera::autoqsm_invert(g, field, short_mask, wrong), tessera::Error);
  Geometry zero = g;
  zero.dims = {0, 30, 20};
  EXPECT_THROW(tessera::qsmgan_invert(zero, field, mask, wrong), tessera::Error);
}

// Driven like the worker pool: up to three patches out, outputs handed back in a shuffled order. The blend waits
// for earlier patches, so the result is bit-identical to the sequential run; a waiting output stays in flight.
TEST(NativePatching, OutOfOrderCompletionGivesTheSequentialResult) {
  const Geometry g = patch_geom({70, 58, 40});
  const std::vector<float> field = pattern(g, 0.05f);
  std::vector<uint8_t> mask(g.voxel_count(), 1);
  for (size_t i = 0; i < mask.size(); i += 7) mask[i] = 0;
  for (const auto model : {tessera::NativePatchRun::Model::AutoQsm, tessera::NativePatchRun::Model::Qsmgan}) {
    const bool autoqsm = model == tessera::NativePatchRun::Model::AutoQsm;
    // A network whose output depends on its input (the central crop, squashed for QSMGAN's atanh).
    CentralCrop crop(autoqsm ? 32 : 48);
    const std::vector<float> sequential =
        autoqsm ? tessera::autoqsm_invert(g, field, mask, crop) : tessera::qsmgan_invert(g, field, mask, crop);
    std::vector<float> chi(g.voxel_count());
    tessera::NativePatchRun run(g, field, mask, model, chi, 3);
    ASSERT_GT(run.total(), 3u);
    std::mt19937 rng(5);
    std::vector<std::pair<uint64_t, std::vector<float>>> out;
    std::vector<float> patch(run.input_shape().size());
    uint32_t most = 0;
    while (!run.finished()) {
      while (const auto p = run.next(patch)) out.emplace_back(p->job, crop.run(patch, run.input_shape()));
      most = std::max(most, run.in_flight());
      ASSERT_FALSE(out.empty());
      const size_t pick = rng() % out.size();
      run.finish(out[pick].first, out[pick].second);
      out.erase(out.begin() + static_cast<long>(pick));
    }
    EXPECT_EQ(most, 3u);
    EXPECT_EQ(run.report().tiles_run, run.total());
    ASSERT_EQ(chi.size(), sequential.size());
    EXPECT_EQ(std::memcmp(chi.data(), sequential.data(), chi.size() * sizeof(float)), 0) << (autoqsm ? "autoqsm" : "qsmgan");
  }
}

TEST(NativePatching, AFailedOrCancelledRunSaysSo) {
  const Geometry g = patch_geom({70, 58, 40});
  const std::vector<float> field = pattern(g, 0.05f);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  std::vector<float> patch(64 * 64 * 64), chi(g.voxel_count());
  {
    tessera::NativePatchRun run(g, field, mask, tessera::NativePatchRun::Model::AutoQsm, chi, 2);
    const auto a = run.next(patch);
    const auto b = run.next(patch);
    run.fail(b->job, tessera::ErrorCode::RunnerFailed, "the worker died");
    EXPECT_FALSE(run.next(patch));
    run.finish(a->job, std::vector<float>(32 * 32 * 32, 0.0f));
    ASSERT_TRUE(run.finished());
    try {
      run.report();
      FAIL() << "a failed run gave a result";
    } catch (const tessera::Error& e) {
      EXPECT_NE(std::string(e.what()).find("autoqsm: network (patch 2 of "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("the worker died"), std::string::npos) << e.what();
    }
  }
  {
    tessera::NativePatchRun run(g, field, mask, tessera::NativePatchRun::Model::Qsmgan, chi, 1);
    const auto a = run.next(patch);
    run.cancel();
    run.finish(a->job, std::vector<float>(48 * 48 * 48, 0.0f));
    ASSERT_TRUE(run.finished());
    EXPECT_THROW(run.report(), tessera::Error);
  }
}
