// The classical methods' registry, parameters, plan and step run (tessera/methods.h, internal/method_run.h).
#include <cmath>
#include <cstdio>
#include <cstring>

#include "engine/compute_run.h"
#include "support.h"
#include "tessera/session/request.h"
#include "tessera/common/dipole.h"
#include "tessera/quality/fidelity.h"
#include "tessera/inversion/methods.h"
#include "tessera/sim/phantom.h"

namespace tessera {
namespace {

using test::head;

TEST(Methods, EveryMethodIsNamedAndItsParametersAreInTheSchema) {
  ASSERT_FALSE(methods().empty());
  const auto& all = request_options();
  auto find = [&](std::string_view name) {
    return std::find_if(all.begin(), all.end(), [&](const OptionSpec& o) { return o.name == name; }) != all.end();
  };
  EXPECT_TRUE(find("method"));
  std::string choices(request_option("method").choices);
  for (const MethodInfo& m : methods()) {
    EXPECT_NE(choices.find(std::string(m.name)), std::string::npos) << m.name;
    EXPECT_EQ(&method_info(m.name), &m);
  }
  for (const OptionSpec& o : method_options()) {
    EXPECT_TRUE(find(o.name)) << o.name;
    const std::string prefix(o.name.substr(0, o.name.find('.')));
    EXPECT_NO_THROW(method_info(prefix)) << o.name << " belongs to no method";
    EXPECT_FALSE(o.help.empty()) << o.name;
  }
  const std::string message = test::error_of([] { method_info("nope"); }, ErrorCode::InvalidArgument);
  EXPECT_NE(message.find("known: tkd"), std::string::npos) << message;
}

TEST(Methods, ParametersAreCheckedAgainstTheSchema) {
  MethodParams p;
  EXPECT_DOUBLE_EQ(p.get("tkd.threshold"), request_option("tkd.threshold").default_value);
  p.set("tkd.threshold", 0.15);
  EXPECT_DOUBLE_EQ(p.get("tkd.threshold"), 0.15);
  const std::string message = test::error_of([&] { p.set("tkd.threshold", 0.9); }, ErrorCode::InvalidArgument);
  EXPECT_NE(message.find("tkd.threshold must be in (0, 2/3)"), std::string::npos) << message;
}

// The schema prints the range it checks: TKD's threshold below 2/3 (|D| reaches 2/3 only on the B0 axis, where
// truncating at 2/3 would leave nothing regularised), iLSQR's tolerance below 1.
TEST(Methods, TheSchemaPrintsTheRangeItChecks) {
  MethodParams p;
  for (const char* name : {"tkd.threshold", "tsvd.threshold", "rts.delta", "ilsqr.coneThreshold"}) {
    EXPECT_EQ(range_text(request_option(name)), "in (0, 2/3)") << name;
    test::error_of([&] { p.set(name, 2.0 / 3.0); }, ErrorCode::InvalidArgument);
    p.set(name, std::nextafter(2.0 / 3.0, 0.0));  // the largest value below the printed bound is taken
  }
  EXPECT_EQ(range_text(request_option("ilsqr.tolerance")), "in (0, 1)");
  const std::string one = test::error_of([&] { p.set("ilsqr.tolerance", 1.0); }, ErrorCode::InvalidArgument);
  EXPECT_NE(one.find("ilsqr.tolerance must be in (0, 1),"), std::string::npos) << one;
  EXPECT_EQ(range_text(request_option("tv.lambda")), "in (0, 1]");
  p.set("tv.lambda", 1.0);
  // A word for a number says the number's range, not an empty list of choices.
  const std::string nan = test::error_of([&] { p.set_choice("tv.lambda", "NaN"); }, ErrorCode::InvalidArgument);
  EXPECT_EQ(nan.rfind("tv.lambda must be a number in (0, 1] ppm·mm, got 'NaN'", 0), 0u) << nan;
  const std::string word = test::error_of([&] { p.set_choice("tv.norm", "l3"); }, ErrorCode::InvalidArgument);
  EXPECT_NE(word.find("tv.norm must be one of anisotropic|isotropic, got 'l3'"), std::string::npos) << word;
}

// A single slice (or two) cannot be inverted in 3D: refused in words, for every method.
TEST(Methods, AVolumeTooThinForA3DInversionIsRefused) {
  for (int64_t nz : {1, 2}) {
    const Geometry g{{32, 32, nz}, {1, 1, 1}, {0, 0, 1}};
    const std::vector<float> field(g.voxel_count(), 0.01f);
    const std::vector<uint8_t> mask(g.voxel_count(), 1);
    const std::string m = test::error_of([&] { start_method(Method::Tkd, g, field, mask, {}, MethodParams{}, 1); }, ErrorCode::InvalidArgument);
    EXPECT_NE(m.find("along z: a 3D dipole inversion needs at least 3"), std::string::npos) << m;
  }
  const Geometry g{{32, 32, 3}, {1, 1, 1}, {0, 0, 1}};
  const std::vector<float> field(g.voxel_count(), 0.01f);
  const std::vector<uint8_t> mask(g.voxel_count(), 1);
  EXPECT_NE(start_method(Method::Tkd, g, field, mask, {}, MethodParams{}, 1), nullptr);
}

TEST(Methods, TkdThroughTheMethodRunEqualsTkdBitForBit) {
  const Geometry g = head(48, 48, 40, 4.0);
  const Phantom ph = make_phantom(g);
  MethodParams p;
  p.set("tkd.threshold", 0.2);
  std::vector<float> chi(g.voxel_count(), 0.0f);
  auto owned = method_run(start_method(Method::Tkd, g, ph.field, ph.mask, {}, p, 2), chi);
  ComputeRun& run = *owned;
  EXPECT_FALSE(run.next(std::span<float>{}).has_value());  // a method hands out no patch
  EXPECT_FALSE(run.finished());
  uint64_t steps = 0;
  while (run.step()) ++steps;
  EXPECT_EQ(steps, 1u);
  EXPECT_TRUE(run.finished());
  EXPECT_NO_THROW(run.report());
  const std::vector<float> direct = tkd(g, ph.field, ph.mask, 0.2f, 1, 1);
  ASSERT_EQ(direct.size(), chi.size());
  EXPECT_EQ(std::memcmp(direct.data(), chi.data(), chi.size() * sizeof(float)), 0);
  // And it is a susceptibility map: against the phantom's truth.
  const Agreement a = compare_maps(g, chi, ph.chi, ph.mask);
  EXPECT_GT(a.r, 0.8) << a.r;
}

TEST(Methods, EveryMethodRunsStepByStepAndReachesThePhantomTruth) {
  const Geometry g = head(48, 48, 40, 4.0);
  const Phantom ph = make_phantom(g);
  // MEDI's edge prior: a magnitude with the compartments' contrast.
  std::vector<float> magnitude(g.voxel_count());
  for (size_t i = 0; i < magnitude.size(); ++i) magnitude[i] = 1.0f - 2.0f * std::fabs(ph.chi[i]);
  MethodParams p;  // short runs: the defaults' iteration counts are for real volumes
  p.set("tv.maxIterations", 30);
  p.set("rts.maxIterations", 10);
  p.set("ilsqr.maxIterations", 10);
  p.set("ndi.maxIterations", 30);
  p.set("medi.maxIterations", 2);
  p.set("medi.cgMaxIterations", 10);
  for (const MethodInfo& m : methods()) {
    SCOPED_TRACE(std::string(m.name));
    std::vector<float> chi(g.voxel_count(), 0.0f);
    auto owned = method_run(start_method(m.method, g, ph.field, ph.mask, m.needs_magnitude ? std::span<const float>(magnitude) : std::span<const float>{}, p, 2), chi);
  ComputeRun& run = *owned;
    EXPECT_EQ(run.total(), method_steps(m.method, p));
    uint64_t steps = 0;
    while (run.step()) ++steps;
    EXPECT_TRUE(run.finished());
    EXPECT_NO_THROW(run.report());
    EXPECT_GE(steps, 1u);
    EXPECT_LE(steps, method_steps(m.method, p));
    for (size_t i = 0; i < chi.size(); ++i) {
      ASSERT_TRUE(std::isfinite(chi[i]));
      if (!ph.mask[i]) ASSERT_EQ(chi[i], 0.0f);
    }
    const Agreement a = compare_maps(g, chi, ph.chi, ph.mask);
    // TFI (a total-field method) given this local field also fits sources outside the mask: measured r 0.818
    EXPECT_GT(a.r, m.total_field ? 0.8 : 0.85) << m.name << " r " << a.r;
    std::printf("[ method ] %-8s steps %3llu  r %.3f\n", std::string(m.name).c_str(), static_cast<unsigned long long>(steps), a.r);
  }
}

TEST(Methods, MediWithoutAMagnitudeIsRefusedSayingSo) {
  const Geometry g = head(16, 16, 16, 2.0);
  const MethodPlan plan = plan_method(Method::Medi, g, MethodParams{}, 1, 0, Target::Wasm);
  EXPECT_FALSE(plan.feasible);
  EXPECT_NE(plan.message.find("needs the magnitude"), std::string::npos) << plan.message;
  EXPECT_TRUE(plan_method(Method::Medi, g, MethodParams{}, 1, 1, Target::Wasm).feasible);
  std::vector<float> field(g.voxel_count(), 0.0f);
  std::vector<uint8_t> mask(g.voxel_count(), 1);
  const std::string m = test::error_of([&] { start_method(Method::Medi, g, field, mask, {}, MethodParams{}); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("needs the magnitude"), std::string::npos) << m;
}

TEST(Methods, ACancelledRunReportsCancelled) {
  const Geometry g = head(32, 32, 32, 6.0);
  const Phantom ph = make_phantom(g);
  std::vector<float> chi(g.voxel_count(), 0.0f);
  auto owned = method_run(start_method(Method::Tkd, g, ph.field, ph.mask, {}, MethodParams{}, 1), chi);
  ComputeRun& run = *owned;
  run.cancel();
  EXPECT_FALSE(run.step());
  EXPECT_TRUE(run.finished());
  test::error_of([&] { run.report(); }, ErrorCode::Cancelled);
}

TEST(Methods, BadInputsAreRefusedUpFront) {
  const Geometry g = head(16, 16, 16, 2.0);
  std::vector<float> field(g.voxel_count(), 0.0f);
  std::vector<uint8_t> empty(g.voxel_count(), 0);
  std::string m = test::error_of([&] { start_method(Method::Tkd, g, field, empty, {}, MethodParams{}); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("mask"), std::string::npos) << m;
  std::vector<uint8_t> mask(g.voxel_count(), 1);
  std::vector<float> short_magnitude(10, 1.0f);
  m = test::error_of([&] { start_method(Method::Tkd, g, field, mask, short_magnitude, MethodParams{}); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("magnitude holds 10 values"), std::string::npos) << m;
  field[5] = std::nanf("");
  test::error_of([&] { start_method(Method::Tkd, g, field, mask, {}, MethodParams{}); }, ErrorCode::NonFiniteInput);
}

TEST(Methods, APlanOverTheHeapIsRefusedWithTheLargestVolumeThatFits) {
  const Geometry small = head(64, 64, 64, 1.0);
  const MethodPlan ok = plan_method(Method::Tkd, small, MethodParams{}, 2, 0, Target::Wasm);
  EXPECT_TRUE(ok.feasible) << ok.message;
  EXPECT_GT(ok.workspace_bytes, small.voxel_count() * sizeof(float));
  EXPECT_GE(ok.module_heap_bytes, ok.workspace_bytes + ok.input_bytes);
  const Geometry huge = head(1024, 1024, 512, 1.0);
  const MethodPlan refused = plan_method(Method::Tkd, huge, MethodParams{}, 2, 0, Target::Wasm);
  EXPECT_FALSE(refused.feasible);
  EXPECT_NE(refused.message.find("largest volume that fits"), std::string::npos) << refused.message;
  EXPECT_LT(refused.largest_voxels, huge.voxel_count());
  // The largest volume it names does fit.
  const double s = std::cbrt(static_cast<double>(refused.largest_voxels) / static_cast<double>(huge.voxel_count())) * 0.99;
  const Geometry fits = head(static_cast<int64_t>(1024 * s), static_cast<int64_t>(1024 * s), static_cast<int64_t>(512 * s), 1.0);
  EXPECT_TRUE(plan_method(Method::Tkd, fits, MethodParams{}, 2, 0, Target::Wasm).feasible) << dims_text(fits.dims);
}

// A plan on more threads holds their stacks in the module heap: at least one stack more per thread, and no more
// than their records and the growth slack on them.
TEST(Methods, APlanCountsTheStacksOfItsThreads) {
  const Geometry g = head(128, 128, 96, 1.0);  // over the initial memory the heap never goes under
  for (Method m : {Method::Tkd, Method::Tv}) {
    const MethodPlan one = plan_method(m, g, MethodParams{}, 1, 0, Target::Wasm);
    for (unsigned t : {2u, 4u, 8u}) {
      const MethodPlan more = plan_method(m, g, MethodParams{}, t, 0, Target::Wasm);
      const uint64_t stacks = (t - 1) * WASM_PTHREAD_STACK_BYTES;
      const uint64_t workspace = more.workspace_bytes - one.workspace_bytes;  // per-thread FFT scratch
      EXPECT_GE(more.module_heap_bytes, one.module_heap_bytes + stacks + workspace) << t;
      EXPECT_LE(more.module_heap_bytes, one.module_heap_bytes + (stacks + workspace + (t - 1) * 8192) * 6 / 5 + 1) << t;
    }
  }
}

TEST(Methods, TheLargestCropOfARefusedPlanFitsAndIsNearlyTheLargest) {
  // A volume just over the limit, where the heap's growth slack is at its cap (not 20 % of the need).
  const Geometry big = head(448, 448, 320, 0.5);
  for (Method m : {Method::Ilsqr, Method::Tv, Method::Tkd}) {
    const MethodPlan refused = plan_method(m, big, MethodParams{}, 1, 0, Target::Wasm);
    if (refused.feasible) continue;  // TKD fits this volume
    Geometry crop = big;
    crop.dims = refused.largest_dims;
    EXPECT_LE(crop.voxel_count(), refused.largest_voxels);
    EXPECT_NE(refused.message.find(dims_text(crop.dims)), std::string::npos) << refused.message;
    EXPECT_TRUE(plan_method(m, crop, MethodParams{}, 1, 0, Target::Wasm).feasible) << dims_text(crop.dims);
    // 5 % more along every axis no longer fits: the crop is close to the largest of the volume's shape.
    Geometry larger = big;
    for (int a = 0; a < 3; ++a) larger.dims[a] = static_cast<int64_t>(static_cast<double>(crop.dims[a]) * 1.05);
    EXPECT_FALSE(plan_method(m, larger, MethodParams{}, 1, 0, Target::Wasm).feasible) << dims_text(larger.dims);
  }
}

}  // namespace
}  // namespace tessera
