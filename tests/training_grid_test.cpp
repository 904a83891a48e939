// Networks run on their training grid (tessera/networks/training_grid.h): k-space resampling against analytic truth,
// and MoDL-QSM on the 2016 challenge's voxels against the same run on a grid this test resamples itself.
#include "tessera/networks/training_grid.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <vector>

#include "networks/runs.h"
#include "tessera/common/error.h"
#include "tessera/networks/inversion.h"
#include "tessera/networks/physics_loops.h"

namespace {

using tessera::Dims3;
using tessera::Geometry;

Geometry grid(Dims3 d, tessera::Vec3 v) {
  Geometry g;
  g.dims = d;
  g.voxel_mm = v;
  return g;
}

// A field band-limited to a few cycles over the field of view, sampled at voxel i's position i · voxel (mm).
std::vector<float> band_limited(const Geometry& g) {
  std::vector<float> f(g.voxel_count());
  const double two_pi = 2.0 * std::numbers::pi;
  const double fov[3] = {g.dims[0] * g.voxel_mm[0], g.dims[1] * g.voxel_mm[1], g.dims[2] * g.voxel_mm[2]};
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y)
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        const double px = x * g.voxel_mm[0] / fov[0], py = y * g.voxel_mm[1] / fov[1], pz = z * g.voxel_mm[2] / fov[2];
        f[g.index(x, y, z)] = static_cast<float>(0.05 * std::cos(two_pi * (2 * px + py) + 0.3) +
                                                 0.02 * std::sin(two_pi * (3 * pz - px)) + 0.01 * std::cos(two_pi * 4 * py) + 0.004);
      }
  return f;
}

// The test's own resampling: per axis a direct DFT in double precision, the centred spectrum's shared frequencies
// kept (-floor(n/2) .. ceil(n/2) - 1), the inverse DFT's real part; scaled to keep values.
std::vector<double> resample_axis(const std::vector<std::complex<double>>& in, const Dims3& d, int axis, int64_t to,
                                  std::vector<std::complex<double>>& out, Dims3& od) {
  od = d;
  od[axis] = to;
  const int64_t n = d[axis];
  out.assign(static_cast<size_t>(od[0] * od[1] * od[2]), 0.0);
  const int64_t lo = std::max(-(n / 2), -(to / 2)), hi = std::min((n + 1) / 2 - 1, (to + 1) / 2 - 1);
  const int64_t stride_in = axis == 0 ? 1 : axis == 1 ? d[0] : d[0] * d[1];
  const int64_t stride_out = axis == 0 ? 1 : axis == 1 ? od[0] : od[0] * od[1];
  const int64_t lines = d[0] * d[1] * d[2] / n;
  for (int64_t l = 0; l < lines; ++l) {
    // The line's first voxel: its coordinates off the axis.
    int64_t c[3], rem = l, k = 0;
    for (int a = 0; a < 3; ++a) {
      if (a == axis) { c[a] = 0; continue; }
      const int64_t extent = d[a];
      c[a] = rem % extent;
      rem /= extent;
      ++k;
    }
    const int64_t base_in = c[0] + d[0] * (c[1] + d[1] * c[2]);
    const int64_t base_out = c[0] + od[0] * (c[1] + od[1] * c[2]);
    for (int64_t j = 0; j < to; ++j) {
      std::complex<double> sum = 0.0;
      for (int64_t f = lo; f <= hi; ++f) {
        std::complex<double> coef = 0.0;
        for (int64_t i = 0; i < n; ++i) coef += in[base_in + i * stride_in] * std::polar(1.0, -2.0 * std::numbers::pi * f * i / n);
        sum += coef * std::polar(1.0, 2.0 * std::numbers::pi * f * j / to);
      }
      out[base_out + j * stride_out] = sum / static_cast<double>(n);
    }
  }
  return {};
}

std::vector<double> own_resample(const std::vector<float>& v, const Dims3& from, const Dims3& to) {
  std::vector<std::complex<double>> a(v.begin(), v.end()), b;
  Dims3 d = from, od;
  for (int axis = 0; axis < 3; ++axis) {
    resample_axis(a, d, axis, to[axis], b, od);
    a.swap(b);
    d = od;
  }
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i].real();
  return out;
}

// Stand-in network: out = scale · in, every channel.
class Scaled : public tessera::PatchRunner {
 public:
  std::vector<float> run(std::span<const float> input, const tessera::TensorShape&) override {
    std::vector<float> out(input.begin(), input.end());
    for (float& v : out) v = 0.9f * v + 0.1f * std::tanh(v);
    return out;
  }
  uint32_t output_channels() const override { return 2; }
};

const tessera::Vec3 kChallengeVoxel = {1.0625, 1.0625, 1.071};

}  // namespace

TEST(TrainingGrid, TheGridKeepsTheFieldOfView) {
  const Geometry g = grid({160, 160, 160}, kChallengeVoxel);
  const Geometry t = tessera::training_grid(g, {1.0, 1.0, 1.0});
  EXPECT_EQ(t.dims, (Dims3{170, 170, 171}));  // 170 mm, 170 mm, 171.36 mm
  EXPECT_NEAR(t.voxel_mm[0], 1.0, 1e-12);
  EXPECT_NEAR(t.voxel_mm[2], 160 * 1.071 / 171, 1e-12);
  const tessera::ModelSpec& modl = tessera::model_spec("modl-qsm");
  EXPECT_TRUE(tessera::needs_training_grid(modl, g));
  EXPECT_FALSE(tessera::needs_training_grid(modl, t));  // the training grid is its own
  EXPECT_FALSE(tessera::needs_training_grid(modl, grid({160, 160, 160}, {1.0, 1.0, 1.0})));
  EXPECT_FALSE(tessera::needs_training_grid(tessera::model_spec("xqsm"), g));  // declares none
}

TEST(TrainingGrid, ABandLimitedFieldGoesToTheTrainingGridAndBack) {
  const Geometry g = grid({20, 18, 16}, kChallengeVoxel);
  const Geometry t = tessera::training_grid(g, {1.0, 1.0, 1.0});
  ASSERT_EQ(t.dims, (Dims3{21, 19, 17}));
  const std::vector<float> f = band_limited(g);
  const std::vector<float> on_t = tessera::kspace_resample(g, f, t.dims);
  // On the training grid it is the same continuous field sampled there.
  const std::vector<float> truth = band_limited(t);
  double worst = 0.0;
  for (size_t i = 0; i < truth.size(); ++i) worst = std::max(worst, std::fabs(double(on_t[i]) - truth[i]));
  EXPECT_LT(worst, 1e-5);
  const std::vector<float> back = tessera::kspace_resample(t, on_t, g.dims, 2);
  worst = 0.0;
  for (size_t i = 0; i < f.size(); ++i) worst = std::max(worst, std::fabs(double(back[i]) - f[i]));
  EXPECT_LT(worst, 1e-5);
}

TEST(TrainingGrid, ModlQsmOnChallengeVoxelsEqualsTheRunOnAGridResampledByHand) {
  const Geometry g = grid({20, 18, 16}, kChallengeVoxel);
  std::vector<float> field = band_limited(g);
  std::vector<uint8_t> mask(g.voxel_count(), 0);
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y)
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        const double u = (x + 0.5) / g.dims[0] - 0.5, v = (y + 0.5) / g.dims[1] - 0.5, w = (z + 0.5) / g.dims[2] - 0.5;
        mask[g.index(x, y, z)] = u * u + v * v + w * w < 0.14 ? 1 : 0;
      }
  tessera::InversionRequest r;
  r.geometry = g;
  r.model = &tessera::model_spec("modl-qsm");
  r.whole_volume = true;
  const tessera::TilePlan plan = tessera::plan_inversion(r, mask, tessera::Target::Wasm);
  ASSERT_TRUE(plan.feasible) << plan.message;
  ASSERT_TRUE(plan.training_grid.resampled);
  EXPECT_EQ(plan.training_grid.dims, (Dims3{21, 19, 17}));
  EXPECT_EQ(plan.patch_dims, (std::array<uint64_t, 3>{22, 20, 18}));  // the training grid padded even
  EXPECT_NE(tessera::inversion_warning(r).find("21×19×17"), std::string::npos) << tessera::inversion_warning(r);

  Scaled net;
  tessera::PatchRunner* nets[] = {&net};
  std::vector<float> chi(g.voxel_count());
  tessera::run_inversion(r, field, mask, nets, tessera::RunOptions{}, chi);

  // By hand: the field and the 0/1 mask resampled (mask where >= 0.5), the loop on 1 mm, χ back, zero outside.
  Geometry t = g;
  t.dims = {21, 19, 17};
  for (int a = 0; a < 3; ++a) t.voxel_mm[a] = g.dims[a] * g.voxel_mm[a] / t.dims[a];
  const std::vector<double> fd = own_resample(field, g.dims, t.dims);
  std::vector<float> mf(mask.begin(), mask.end());
  const std::vector<double> md = own_resample(mf, g.dims, t.dims);
  std::vector<float> tf(fd.begin(), fd.end());
  std::vector<uint8_t> tm(md.size());
  for (size_t i = 0; i < md.size(); ++i) tm[i] = md[i] >= 0.5 ? 1 : 0;
  Scaled net2;
  const std::vector<float> tchi = tessera::modl_qsm_invert(t, tf, tm, net2);
  const std::vector<double> back = own_resample(tchi, t.dims, g.dims);
  double worst = 0.0, peak = 0.0;
  for (size_t i = 0; i < chi.size(); ++i) {
    const double want = mask[i] ? back[i] : 0.0;
    if (!mask[i]) EXPECT_EQ(chi[i], 0.0f);
    worst = std::max(worst, std::fabs(chi[i] - want));
    peak = std::max(peak, std::fabs(want));
  }
  ASSERT_GT(peak, 1e-3);
  EXPECT_LT(worst, 1e-4 * peak) << "peak " << peak;
}

namespace {

// Drives a step-engine run on this thread: every patch handed out runs on net, a step between; returns when finished.
// stop_after_steps: cancel() after that many computing steps (0: never).
void drive_grid(tessera::PatchSteps& run, tessera::PatchRunner& net, int stop_after_steps = 0) {
  std::vector<float> buffer;
  int steps = 0;
  for (;;) {
    buffer.resize(run.input_shape().size());
    while (const auto p = run.next(buffer)) {
      const bool owned = !p->input.empty();
      const std::span<const float> in = owned ? p->input : std::span<const float>(buffer);
      run.finish(p->job, net.run(in, owned ? p->shape : run.input_shape()));
    }
    if (run.finished()) return;
    ASSERT_TRUE(run.step()) << "no patch out, nothing to compute, not finished";
    if (++steps == stop_after_steps) run.cancel();
  }
}

}  // namespace

TEST(TrainingGrid, TheStepEngineRunResamplesInItsStepsCountsThemAndCancels) {
  const Geometry g = grid({20, 18, 16}, kChallengeVoxel);
  const std::vector<float> field = band_limited(g);
  std::vector<uint8_t> mask(g.voxel_count(), 0);
  for (int64_t z = 3; z < 13; ++z)
    for (int64_t y = 3; y < 15; ++y)
      for (int64_t x = 3; x < 17; ++x) mask[g.index(x, y, z)] = 1;
  tessera::InversionRequest r;
  r.geometry = g;
  r.model = &tessera::model_spec("modl-qsm");
  r.whole_volume = true;
  const tessera::TilePlan plan = tessera::plan_inversion(r, mask, tessera::Target::Wasm);
  ASSERT_TRUE(plan.feasible) << plan.message;

  // The native run (run_inversion) and the step engine's give the same χ.
  Scaled net;
  tessera::PatchRunner* nets[] = {&net};
  std::vector<float> native(g.voxel_count());
  tessera::run_inversion(r, field, mask, nets, tessera::RunOptions{}, native);
  std::vector<float> chi(g.voxel_count(), 1.0f);
  const auto run = tessera::start_run(r, plan, field, mask, {}, chi, 1);
  EXPECT_EQ(run->done(), 0u);
  drive_grid(*run, net);
  const tessera::RunReport report = run->report();
  EXPECT_EQ(run->done(), run->total());
  EXPECT_GT(run->total(), 2u);  // the two resamplings and the loop's own units
  EXPECT_EQ(report.tiles_run, 1u);
  double peak = 0.0;
  for (size_t i = 0; i < chi.size(); ++i) {
    if (!mask[i]) EXPECT_EQ(chi[i], 0.0f);
    peak = std::max(peak, std::fabs(double(native[i])));
  }
  ASSERT_GT(peak, 1e-3);
  EXPECT_EQ(chi, native);  // the same resamplings and loop, one FFT thread each

  // Cancelled before anything ran, or after the field was resampled: finished, and the report says cancelled.
  std::vector<float> c1(g.voxel_count()), c2(g.voxel_count());
  const auto early = tessera::start_run(r, plan, field, mask, {}, c1, 1);
  early->cancel();
  EXPECT_TRUE(early->finished());
  EXPECT_FALSE(early->step());
  try {
    (void)early->report();
    ADD_FAILURE() << "a cancelled run reported";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.code(), tessera::ErrorCode::Cancelled);
  }
  const auto later = tessera::start_run(r, plan, field, mask, {}, c2, 1);
  drive_grid(*later, net, 1);
  EXPECT_TRUE(later->finished());
  try {
    (void)later->report();
    ADD_FAILURE() << "a cancelled run reported";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.code(), tessera::ErrorCode::Cancelled);
  }
}
