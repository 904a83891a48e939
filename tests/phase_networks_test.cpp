#include "tessera/common/morphology.h"
#include "tessera/networks/phase_networks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "support.h"
#include "tessera/common/error.h"
#include "tessera/networks/inversion.h"

namespace {

using tessera::Dims3;
using tessera::ErrorCode;
using tessera::Geometry;
using tessera::NamedInput;
using tessera::PatchRunner;
using tessera::PhaseSettings;
using tessera::TensorShape;
using tessera::test::Rng;

// A blobby mask: a few overlapping random spheres.
std::vector<uint8_t> blob_mask(const Geometry& g, uint64_t seed, int blobs = 4) {
  Rng rng(seed);
  std::vector<uint8_t> m(g.voxel_count(), 0);
  for (int b = 0; b < blobs; ++b) {
    const double cx = (rng.uniform() + 1) / 2 * g.dims[0], cy = (rng.uniform() + 1) / 2 * g.dims[1],
                 cz = (rng.uniform() + 1) / 2 * g.dims[2];
    const double r = 3 + (rng.uniform() + 1) * 3;
    for (int64_t z = 0; z < g.dims[2]; ++z)
      for (int64_t y = 0; y < g.dims[1]; ++y)
        for (int64_t x = 0; x < g.dims[0]; ++x)
          if ((x - cx) * (x - cx) + (y - cy) * (y - cy) + (z - cz) * (z - cz) <= r * r) m[g.index(x, y, z)] = 1;
  }
  return m;
}


// Erosion by the definition: keep a mask voxel when every voxel within radius r (x²+y²+z² ≤ r²) is in
// the mask, outside the volume counting as background.
std::vector<uint8_t> erode_brute(const Geometry& g, const std::vector<uint8_t>& m, int r) {
  std::vector<uint8_t> out(m.size(), 0);
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y)
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        if (!m[g.index(x, y, z)]) continue;
        bool keep = true;
        for (int dz = -r; dz <= r && keep; ++dz)
          for (int dy = -r; dy <= r && keep; ++dy)
            for (int dx = -r; dx <= r && keep; ++dx) {
              if (dx * dx + dy * dy + dz * dz > r * r) continue;
              const int64_t p[3] = {x + dx, y + dy, z + dz};
              const bool inside = p[0] >= 0 && p[1] >= 0 && p[2] >= 0 && p[0] < g.dims[0] && p[1] < g.dims[1] &&
                                  p[2] < g.dims[2];
              if (!inside || !m[g.index(p[0], p[1], p[2])]) keep = false;
            }
        out[g.index(x, y, z)] = keep ? 1 : 0;
      }
  return out;
}

// Stand-in phase network: records what it is given; its output is the phase input times b0_dir's z
// component (when given) plus 1000·TE, so tests can see every input arrive where it should.
class RecordingPhaseNet : public PatchRunner {
 public:
  std::vector<float> run(std::span<const float>, const TensorShape&) override {
    throw std::runtime_error("a phase network must be called with its named inputs");
  }
  std::vector<float> run_named(std::span<const float> input, const TensorShape& shape,
                               std::span<const NamedInput> extras) override {
    shapes.push_back(shape);
    inputs.emplace_back(input.begin(), input.end());
    roles.clear();
    float dir_z = 1.0f, te = 0.0f;
    for (const NamedInput& e : extras) {
      roles.push_back(e.role);
      named[e.role] = std::vector<float>(e.data.begin(), e.data.end());
      dims[e.role] = e.dims;
      if (e.role == "b0_dir") dir_z = e.data[2];
      if (e.role == "te") te = e.data[0];
    }
    std::vector<float> out(input.begin(), input.end());
    for (float& v : out) v = v * dir_z + 1000.0f * te;
    return out;
  }
  std::vector<TensorShape> shapes;
  std::vector<std::vector<float>> inputs;
  std::vector<std::string> roles;
  std::map<std::string, std::vector<float>> named;
  std::map<std::string, std::vector<uint64_t>> dims;
};

const tessera::ModelSpec& iqsm() { return tessera::model_spec("iqsm"); }
const tessera::ModelSpec& iqsm_plus() { return tessera::model_spec("iqsm-plus"); }

PhaseSettings settings(std::vector<double> te = {0.02}) {
  PhaseSettings s;
  s.te_s = std::move(te);
  s.b0_tesla = 3.0;
  s.erode_radius = 2;
  return s;
}

TEST(PhaseNetworks, ErosionMatchesTheSphereDefinition) {
  // The sphere is in voxel units (offsets with dx²+dy²+dz² ≤ r²) whatever the voxel size: anisotropic voxels give the
  // same set.
  for (const tessera::Vec3 voxel : {tessera::Vec3{1.0, 1.0, 1.0}, tessera::Vec3{0.6, 1.3, 2.5}}) {
    Geometry g = tessera::test::geometry(23, 19, 14);
    g.voxel_mm = voxel;
    for (uint64_t seed : {1u, 2u, 3u}) {
      const std::vector<uint8_t> m = blob_mask(g, seed);
      for (int r : {0, 1, 2, 3, 4, 5}) {
        EXPECT_EQ(tessera::erode_mask_voxels(g, m, r), erode_brute(g, m, r))
            << "seed " << seed << " radius " << r << " voxel " << voxel[0] << "×" << voxel[1] << "×" << voxel[2];
      }
    }
  }
  EXPECT_THROW(tessera::erode_mask_voxels(tessera::test::geometry(4, 4, 4), std::vector<uint8_t>(64, 1), 256),
               tessera::Error);
}

TEST(PhaseNetworks, LayoutCropsToTheMaskAndPadsTo16) {
  const Geometry g = tessera::test::geometry(70, 60, 50);
  const std::vector<uint8_t> m = tessera::test::box_mask(g, {20, 10, 5}, {41, 30, 45});
  // iQSM: the whole volume, padded by the reference's rule (the smaller half before).
  const tessera::PhaseLayout a = tessera::phase_layout(iqsm(), g, m);
  EXPECT_EQ(a.crop_lo, (Dims3{0, 0, 0}));
  EXPECT_EQ(a.crop_dims, g.dims);
  EXPECT_EQ(a.padded, (std::array<uint64_t, 3>{80, 64, 64}));
  EXPECT_EQ(a.pad_low, (Dims3{5, 2, 7}));
  EXPECT_FALSE(a.swap_yz);
  // iQSM+: the mask's bounding box + 16, clamped to the volume.
  const tessera::PhaseLayout b = tessera::phase_layout(iqsm_plus(), g, m);
  EXPECT_EQ(b.crop_lo, (Dims3{4, 0, 0}));
  EXPECT_EQ(b.crop_dims, (Dims3{53, 46, 50}));
  EXPECT_EQ(b.padded, (std::array<uint64_t, 3>{64, 48, 64}));
  EXPECT_EQ(b.activation_bytes, iqsm_plus().fixed_bytes + 64ull * 48 * 64 * iqsm_plus().bytes_per_voxel);
  // iQSM+ with B0 closer to y than z: y and z swap (as the reference does), the direction too.
  Geometry tilted = g;
  tilted.b0_dir = {0.0, 0.8, 0.6};
  const tessera::PhaseLayout c = tessera::phase_layout(iqsm_plus(), tilted, m);
  EXPECT_TRUE(c.swap_yz);
  EXPECT_EQ(c.working.dims, (Dims3{70, 50, 60}));
  EXPECT_NEAR(c.b0_unit[1], 0.6, 1e-12);
  EXPECT_NEAR(c.b0_unit[2], 0.8, 1e-12);
  EXPECT_EQ(c.crop_lo, (Dims3{4, 0, 0}));
  EXPECT_EQ(c.crop_dims, (Dims3{53, 50, 46}));
  // An empty mask is refused by name.
  const std::vector<uint8_t> empty(g.voxel_count(), 0);
  try {
    tessera::phase_layout(iqsm(), g, empty);
    FAIL() << "an empty mask must be refused";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("mask is empty"), std::string::npos) << e.what();
  }
}

TEST(PhaseNetworks, EveryInputReachesTheNetworkInTheReferenceLayout) {
  const Geometry g = tessera::test::geometry(21, 18, 12);
  const std::vector<uint8_t> mask = tessera::test::box_mask(g, {3, 2, 1}, {19, 16, 11});
  std::vector<float> phase = tessera::test::random_field(g, 7);
  for (float& v : phase) v *= 3.14f;
  RecordingPhaseNet net;
  std::vector<float> out(g.voxel_count());
  PhaseSettings s = settings({0.025});
  const tessera::RunReport rep = tessera::run_phase_network(iqsm(), g, phase, {}, mask, s, net, {}, out);
  EXPECT_EQ(rep.tiles_run, 1u);
  ASSERT_EQ(net.shapes.size(), 1u);
  EXPECT_EQ(net.shapes[0].dims, (std::array<uint64_t, 3>{32, 32, 16}));
  EXPECT_EQ(net.roles, (std::vector<std::string>{"mask", "te", "b0", "border"}));
  EXPECT_FLOAT_EQ(net.named["te"][0], 0.025f);
  EXPECT_FLOAT_EQ(net.named["b0"][0], 3.0f);
  EXPECT_EQ(net.dims["te"], (std::vector<uint64_t>{1}));
  EXPECT_EQ(net.dims["mask"], (std::vector<uint64_t>{1, 1, 32, 32, 16}));
  const std::vector<uint8_t> eroded = erode_brute(g, mask, 2);
  // Network layout: row-major [X][Y][Z]; the volume sits at pad_low = (5, 7, 2).
  const auto at = [](uint64_t x, uint64_t y, uint64_t z) { return (x * 32 + y) * 16 + z; };
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y)
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        const uint64_t i = g.index(x, y, z), t = at(x + 5, y + 7, z + 2);
        ASSERT_FLOAT_EQ(net.inputs[0][t], -phase[i]);  // phase · (−1)
        ASSERT_FLOAT_EQ(net.named["mask"][t], eroded[i]);
        // The output is the network's value at eroded-mask voxels, 0 elsewhere.
        ASSERT_FLOAT_EQ(out[i], eroded[i] ? -phase[i] + 25.0f : 0.0f) << x << "," << y << "," << z;
      }
  // Zero padding and the border shell: 0 on the padded volume's outer voxel layer, 1 inside.
  EXPECT_FLOAT_EQ(net.inputs[0][at(0, 0, 0)], 0.0f);
  EXPECT_FLOAT_EQ(net.inputs[0][at(31, 31, 15)], 0.0f);
  for (uint64_t x = 0; x < 32; ++x)
    for (uint64_t y = 0; y < 32; ++y)
      for (uint64_t z = 0; z < 16; ++z) {
        const bool shell = x == 0 || y == 0 || z == 0 || x == 31 || y == 31 || z == 15;
        ASSERT_FLOAT_EQ(net.named["border"][at(x, y, z)], shell ? 0.0f : 1.0f);
      }
}

TEST(PhaseNetworks, IqsmPlusGetsTheSwappedVolumeAndDirectionAndUndoesTheSwap) {
  Geometry g = tessera::test::geometry(20, 26, 18);
  g.b0_dir = {0.0, 0.8, 0.6};
  const std::vector<uint8_t> mask = blob_mask(g, 5, 6);
  std::vector<float> phase = tessera::test::random_field(g, 9);
  RecordingPhaseNet net;
  std::vector<float> out(g.voxel_count());
  tessera::run_phase_network(iqsm_plus(), g, phase, {}, mask, settings({0.01}), net, {}, out);
  EXPECT_EQ(net.roles, (std::vector<std::string>{"mask", "te", "b0", "b0_dir", "border"}));
  EXPECT_EQ(net.dims["b0_dir"], (std::vector<uint64_t>{1, 1, 3}));
  EXPECT_NEAR(net.named["b0_dir"][1], 0.6, 1e-6);
  EXPECT_NEAR(net.named["b0_dir"][2], 0.8, 1e-6);
  const std::vector<uint8_t> eroded = erode_brute(g, mask, 2);
  for (uint64_t i = 0; i < out.size(); ++i) {
    ASSERT_NEAR(out[i], eroded[i] ? -phase[i] * 0.8f + 10.0f : 0.0f, 1e-5) << i;
  }
}

TEST(PhaseNetworks, EchoesAreCombinedWithMagnitudeTimesTeSquaredWeights) {
  const Geometry g = tessera::test::geometry(16, 16, 16);
  const std::vector<uint8_t> mask = tessera::test::box_mask(g, {2, 2, 2}, {14, 14, 14});
  const uint64_t n = g.voxel_count();
  const std::vector<double> te{0.005, 0.010, 0.020};
  std::vector<float> phase(3 * n, 0.0f), magnitude(3 * n);
  for (uint64_t i = 0; i < 3 * n; ++i) magnitude[i] = 1.0f + static_cast<float>(i % 7);
  RecordingPhaseNet net;  // zero phase: echo e returns 1000·TE_e
  std::vector<float> out(n);
  std::vector<std::pair<uint64_t, uint64_t>> progress;
  tessera::RunOptions o;
  o.progress = [&](uint64_t d, uint64_t t) { progress.emplace_back(d, t); };
  const tessera::RunReport rep = tessera::run_phase_network(iqsm(), g, {phase}, magnitude, mask, settings(te), net, o, out);
  EXPECT_EQ(rep.tiles_run, 3u);
  EXPECT_EQ(progress.back(), (std::pair<uint64_t, uint64_t>{3, 3}));
  const std::vector<uint8_t> eroded = erode_brute(g, mask, 2);
  for (uint64_t i = 0; i < n; ++i) {
    double num = 0, den = 0;
    for (int e = 0; e < 3; ++e) {
      const double w = std::pow(magnitude[e * n + i] * te[e], 2);
      num += w * 1000.0 * te[e];
      den += w;
    }
    ASSERT_NEAR(out[i], eroded[i] ? num / den : 0.0, 1e-4) << i;
  }
}

TEST(PhaseNetworks, PlanRefusesAVolumeOverTheSinglePatchLimitWithAdvice) {
  const Geometry big = tessera::test::geometry(224, 224, 176);
  const std::vector<uint8_t> full(big.voxel_count(), 1);
  const tessera::TilePlan p = tessera::plan_phase(iqsm(), big, full, settings(), 1, tessera::Target::Wasm);
  EXPECT_FALSE(p.feasible);
  EXPECT_NE(p.message.find("cannot be tiled"), std::string::npos) << p.message;
  EXPECT_NE(p.message.find("crop the field of view"), std::string::npos) << p.message;
  EXPECT_GT(p.bytes_per_tile, tessera::WASM_MAX_PATCH_ACTIVATION_BYTES);
  // iQSM+ crops to the mask: a head-sized mask in the same volume fits.
  const std::vector<uint8_t> head = tessera::test::box_mask(big, {48, 40, 40}, {128, 136, 120});
  const tessera::TilePlan q = tessera::plan_phase(iqsm_plus(), big, head, settings(), 2, tessera::Target::Wasm);
  EXPECT_TRUE(q.feasible) << q.message;
  EXPECT_EQ(q.tiles_total, 2u);
  EXPECT_EQ(q.patch_dims, (std::array<uint64_t, 3>{112, 128, 112}));
  EXPECT_EQ(q.peak_bytes, q.activation_bytes + q.module_heap_bytes);
  // Natively there is no wasm limit.
  EXPECT_TRUE(tessera::plan_phase(iqsm(), big, full, settings(), 1, tessera::Target::Native).feasible);
  // The run refuses up front what the plan refuses.
  RecordingPhaseNet net;
  std::vector<float> phase(big.voxel_count(), 0.0f), out(big.voxel_count());
  tessera::RunOptions wasm;
  wasm.target = tessera::Target::Wasm;
  try {
    tessera::run_phase_network(iqsm(), big, phase, {}, full, settings(), net, wasm, out);
    FAIL() << "over the limit";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::BudgetExceeded);
  }
  EXPECT_TRUE(net.shapes.empty());
}

TEST(PhaseNetworks, BadInputIsRefusedByName) {
  const Geometry g = tessera::test::geometry(16, 16, 16);
  const std::vector<uint8_t> mask = tessera::test::box_mask(g, {2, 2, 2}, {14, 14, 14});
  std::vector<float> phase(g.voxel_count(), 0.1f), out(g.voxel_count());
  RecordingPhaseNet net;
  const auto refused = [&](PhaseSettings s, std::span<const float> ph, std::span<const uint8_t> mk, const std::string& what,
                           ErrorCode code = ErrorCode::InvalidArgument) {
    try {
      tessera::run_phase_network(iqsm(), g, ph, {}, mk, s, net, {}, out);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const tessera::Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refused(settings({}), phase, mask, "echo time");
  refused(settings({20.0}), phase, mask, "seconds (20 ms = 0.02)");
  refused(settings({-0.01}), phase, mask, "te must be in (0, 1] s, got -0.01");
  PhaseSettings b0 = settings();
  b0.b0_tesla = 0;
  refused(b0, phase, mask, "tesla");
  PhaseSettings sign = settings();
  sign.phase_sign = 2;
  refused(sign, phase, mask, "+1 or -1");
  refused(settings({0.01, 0.02}), phase, mask, "one TE per echo");
  const std::vector<uint8_t> thin = tessera::test::box_mask(g, {5, 5, 5}, {8, 8, 8});
  refused(settings(), phase, thin, "mask is empty");
  std::vector<float> nan_phase = phase;
  nan_phase[100] = std::nanf("");
  refused(settings(), nan_phase, mask, "NaN", ErrorCode::NonFiniteInput);
  EXPECT_TRUE(net.shapes.empty());
  // Field -> chi networks are not phase networks.
  EXPECT_THROW(tessera::plan_phase(tessera::model_spec("xqsm"), g, mask, settings(), 1, tessera::Target::Wasm), tessera::Error);
}

TEST(PhaseNetworks, InversionDispatchesPhaseNetworksAndWarnsOffDesign) {
  Geometry g = tessera::test::geometry(24, 24, 20);
  g.b0_dir = {0.0, 0.3, 0.95};
  const std::vector<uint8_t> mask = tessera::test::box_mask(g, {3, 3, 3}, {21, 21, 17});
  std::vector<float> phase = tessera::test::random_field(g, 3);
  tessera::InversionRequest r;
  r.geometry = g;
  r.model = &iqsm();
  r.auto_tile = true;  // ignored: phase networks run whole
  r.phase = settings({0.02});
  const tessera::TilePlan p = tessera::plan_inversion(r, mask, tessera::Target::Wasm);
  EXPECT_TRUE(p.feasible) << p.message;
  EXPECT_TRUE(p.whole_volume);
  EXPECT_NE(tessera::inversion_warning(r).find("third axis"), std::string::npos) << tessera::inversion_warning(r);
  RecordingPhaseNet net;
  PatchRunner* nets[] = {&net};
  std::vector<float> out(g.voxel_count());
  tessera::run_inversion(r, phase, mask, nets, {}, out);
  ASSERT_EQ(net.shapes.size(), 1u);
  const std::vector<uint8_t> eroded = erode_brute(g, mask, 2);
  for (uint64_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], eroded[i] ? -phase[i] + 20.0f : 0.0f, 1e-5);
  // An explicit tile config is refused: these networks cannot be tiled.
  r.auto_tile = false;
  r.tile_given = true;
  r.tile = {56, 4};
  try {
    tessera::plan_inversion(r, mask, tessera::Target::Wasm);
    FAIL() << "tiling a whole-volume-only network";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("cannot be tiled"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tessera::run_inversion(r, phase, mask, nets, {}, out), tessera::Error);
  r.whole_volume = true;  // whole: fine
  EXPECT_TRUE(tessera::plan_inversion(r, mask, tessera::Target::Wasm).feasible);
  // iQSM+ takes any direction: no warning about it.
  r.model = &iqsm_plus();
  EXPECT_EQ(tessera::inversion_warning(r).find("third axis"), std::string::npos);
}

}  // namespace
