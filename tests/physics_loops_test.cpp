#include "tessera/networks/physics_loops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/common/dipole.h"
#include "tessera/common/error.h"

namespace {

using tessera::Dims3;
using tessera::Geometry;
using tessera::PatchRunner;
using tessera::TensorShape;

// Stand-in network: out = scale * in (per channel), recording every call.
class ScaledIdentity : public PatchRunner {
 public:
  explicit ScaledIdentity(float scale, uint32_t channels = 1) : scale_(scale), channels_(channels) {}
  std::vector<float> run(std::span<const float> input, const TensorShape& shape) override {
    inputs.emplace_back(input.begin(), input.end());
    shapes.push_back(shape);
    std::vector<float> out(input.begin(), input.end());
    for (auto& v : out) v *= scale_;
    return out;
  }
  uint32_t output_channels() const override { return channels_; }
  std::vector<std::vector<float>> inputs;
  std::vector<TensorShape> shapes;

 private:
  float scale_;
  uint32_t channels_;
};

class WrongLength : public PatchRunner {
 public:
  std::vector<float> run(std::span<const float> input, const TensorShape&) override {
    return std::vector<float>(input.size() - 1, 0.0f);
  }
};

class Throwing : public PatchRunner {
 public:
  std::vector<float> run(std::span<const float>, const TensorShape&) override {
    throw std::runtime_error("session lost");
  }
};

Geometry geom(Dims3 d, tessera::Vec3 v = {1, 1, 1}, tessera::Vec3 b = {0, 0, 1}) {
  Geometry g;
  g.dims = d;
  g.voxel_mm = v;
  g.b0_dir = b;
  return g;
}

// A smooth field in ppm and an ellipsoidal mask.
void make_input(const Geometry& g, std::vector<float>& field, std::vector<uint8_t>& mask) {
  field.assign(g.voxel_count(), 0.0f);
  mask.assign(g.voxel_count(), 0);
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y)
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        const double u = (x + 0.5) / g.dims[0] - 0.5, v = (y + 0.5) / g.dims[1] - 0.5, w = (z + 0.5) / g.dims[2] - 0.5;
        field[g.index(x, y, z)] = static_cast<float>(0.05 * std::sin(7.0 * u + 3.0 * v) * std::cos(5.0 * w) + 0.01 * u);
        mask[g.index(x, y, z)] = (u * u + v * v + w * w < 0.16) ? 1 : 0;
      }
}

// Network-layout element (x, y, z) of channel c.
float net_at(const std::vector<float>& t, const Dims3& d, int c, int64_t x, int64_t y, int64_t z) {
  return t[static_cast<size_t>(c * d[0] * d[1] * d[2] + (x * d[1] + y) * d[2] + z)];
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// D(v) in double precision through the library's kernel and FFT (the operator under test is the loop).
std::vector<double> D(const Geometry& g, const std::vector<double>& v,
                      tessera::DipoleConvention c = tessera::DipoleConvention::Standard) {
  std::vector<float> f(v.begin(), v.end());
  const auto r = tessera::dipole_convolve(g, f, c);
  return std::vector<double>(r.begin(), r.end());
}

}  // namespace

TEST(PhysicsLoops, LayoutIsAReorderNotAPermutation) {
  const Dims3 d{3, 4, 5};
  const Geometry g = geom(d);
  std::vector<float> host(60), net(60), back(60);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i);
  tessera::host_to_network(d, host, net);
  for (int64_t z = 0; z < 5; ++z)
    for (int64_t y = 0; y < 4; ++y)
      for (int64_t x = 0; x < 3; ++x) ASSERT_EQ(net[(x * 4 + y) * 5 + z], host[g.index(x, y, z)]);
  tessera::network_to_host(d, net, back);
  EXPECT_EQ(back, host);
  EXPECT_EQ(tessera::pad_to_divisor({13, 16, 1}, 8), (Dims3{16, 16, 8}));
  EXPECT_THROW(tessera::host_to_network(d, host, std::span<float>(net).first(59)), tessera::Error);
}

// LPCNN, hand-derived from the formulas of docs/models.md in double precision, on a grid that needs no padding.
TEST(PhysicsLoops, LpcnnMatchesTheFormulas) {
  using namespace tessera::lpcnn_constants;
  const Geometry g = geom({16, 16, 8}, {1.0, 1.0, 1.5}, {0.1, 0.0, 1.0});
  std::vector<float> field;
  std::vector<uint8_t> mask;
  make_input(g, field, mask);
  const float s = 0.9f;
  ScaledIdentity net(s);
  const auto chi = tessera::lpcnn_invert(g, field, mask, net);
  ASSERT_EQ(net.inputs.size(), 3u);  // three iterations, one call each
  for (const auto& sh : net.shapes) {
    EXPECT_EQ(sh.channels, 1u);
    EXPECT_EQ(sh.dims, (std::array<uint64_t, 3>{16, 16, 8}));
  }
  const size_t n = field.size();
  std::vector<double> y(field.begin(), field.end()), m(mask.begin(), mask.end());
  const auto dy = D(g, y);
  // Iteration 0: p = a D(y); the net sees ((p - mu)/sigma) m.
  std::vector<double> in0(n), den(n);
  for (size_t i = 0; i < n; ++i) in0[i] = ((alpha * dy[i] - mu) / sigma) * m[i];
  const double scale0 = max_abs(in0);
  for (int64_t z = 0; z < 8; ++z)
    for (int64_t yy = 0; yy < 16; ++yy)
      for (int64_t x = 0; x < 16; ++x)
        ASSERT_NEAR(net_at(net.inputs[0], g.dims, 0, x, yy, z), in0[g.index(x, yy, z)], 1e-5 * scale0);
  for (size_t i = 0; i < n; ++i) den[i] = (s * in0[i] * sigma + mu) * m[i];
  // Iterations 1 and 2: p = den + a D(y) - a D(D(den)).
  for (int it = 1; it < 3; ++it) {
    const auto ddd = D(g, D(g, den));
    for (size_t i = 0; i < n; ++i) {
      const double p = den[i] + alpha * dy[i] - alpha * ddd[i];
      den[i] = (s * ((p - mu) / sigma) * m[i] * sigma + mu) * m[i];
    }
  }
  const double scale = max_abs(den);
  ASSERT_GT(scale, 1e-3);
  for (size_t i = 0; i < n; ++i) ASSERT_NEAR(chi[i], den[i], 2e-5 * scale) << i;
}

// Padding to the divisor: zeros, smaller half on the low side; the loop runs on the padded grid.
TEST(PhysicsLoops, LpcnnPadsToEightAndCrops) {
  using namespace tessera::lpcnn_constants;
  const Geometry g = geom({13, 10, 9});
  std::vector<float> field;
  std::vector<uint8_t> mask;
  make_input(g, field, mask);
  ScaledIdentity net(1.0f);
  const auto chi = tessera::lpcnn_invert(g, field, mask, net);
  ASSERT_EQ(chi.size(), field.size());
  ASSERT_EQ(net.shapes.size(), 3u);
  EXPECT_EQ(net.shapes[0].dims, (std::array<uint64_t, 3>{16, 16, 16}));
  // First input by hand on the padded grid: low padding (16-13)/2 = 1, (16-10)/2 = 3, (16-9)/2 = 3.
  const Geometry p = geom({16, 16, 16});
  std::vector<double> y(p.voxel_count(), 0.0), m(p.voxel_count(), 0.0);
  for (int64_t z = 0; z < 9; ++z)
    for (int64_t yy = 0; yy < 10; ++yy)
      for (int64_t x = 0; x < 13; ++x) {
        y[p.index(x + 1, yy + 3, z + 3)] = field[g.index(x, yy, z)];
        m[p.index(x + 1, yy + 3, z + 3)] = mask[g.index(x, yy, z)];
      }
  const auto dy = D(p, y);
  double scale = 0;
  for (size_t i = 0; i < dy.size(); ++i) scale = std::max(scale, std::fabs((alpha * dy[i] - mu) / sigma * m[i]));
  for (int64_t z = 0; z < 16; ++z)
    for (int64_t yy = 0; yy < 16; ++yy)
      for (int64_t x = 0; x < 16; ++x) {
        const double e = ((alpha * dy[p.index(x, yy, z)] - mu) / sigma) * m[p.index(x, yy, z)];
        ASSERT_NEAR(net_at(net.inputs[0], p.dims, 0, x, yy, z), e, 1e-5 * scale);
      }
  for (size_t i = 0; i < chi.size(); ++i)
    if (!mask[i]) ASSERT_EQ(chi[i], 0.0f);
}

TEST(PhysicsLoops, ModlMatchesTheFormulas) {
  using namespace tessera::modl_constants;
  const Geometry g = geom({12, 10, 8}, {1, 1, 1}, {0.0, 0.2, 1.0});
  std::vector<float> field;
  std::vector<uint8_t> mask;
  make_input(g, field, mask);
  const float s = 0.8f;
  ScaledIdentity net(s, 2);
  const auto chi = tessera::modl_qsm_invert(g, field, mask, net);
  ASSERT_EQ(net.inputs.size(), 3u);  // 3 iterations, both channels in one [1,2,X,Y,Z] call
  for (const auto& in : net.inputs) ASSERT_EQ(in.size(), 2u * 960u);
  EXPECT_EQ(net.shapes[0].channels, 2u);
  const size_t n = field.size();
  std::vector<double> phi(field.begin(), field.end()), m(mask.begin(), mask.end());
  const auto dphi = D(g, phi);
  std::vector<double> y0(n), y1(n), x0(n), x1(n), l0(n), l1(n);
  for (size_t i = 0; i < n; ++i) {
    y0[i] = alpha * dphi[i];
    y1[i] = alpha * phi[i];
  }
  for (int it = 0; it < 3; ++it) {
    if (it == 0) {
      l0 = y0;
      l1 = y1;
    } else {
      auto r = D(g, x0);
      for (size_t i = 0; i < n; ++i) r[i] += x1[i];
      const auto dr = D(g, r);
      for (size_t i = 0; i < n; ++i) {
        l0[i] = x0[i] - alpha * dr[i] + y0[i];
        l1[i] = x1[i] - alpha * r[i] + y1[i];
      }
    }
    std::vector<double> in0(n), in1(n);
    for (size_t i = 0; i < n; ++i) {
      in0[i] = ((l0[i] - mean[0]) / std_dev[0]) * m[i];
      in1[i] = ((l1[i] - mean[1]) / std_dev[1]) * m[i];
    }
    if (it == 0) {  // the first network input, both planes, in network layout
      const double sc = std::max(max_abs(in0), max_abs(in1));
      for (int64_t z = 0; z < 8; ++z)
        for (int64_t yy = 0; yy < 10; ++yy)
          for (int64_t x = 0; x < 12; ++x) {
            ASSERT_NEAR(net_at(net.inputs[0], g.dims, 0, x, yy, z), in0[g.index(x, yy, z)], 1e-5 * sc);
            ASSERT_NEAR(net_at(net.inputs[0], g.dims, 1, x, yy, z), in1[g.index(x, yy, z)], 1e-5 * sc);
          }
    }
    for (size_t i = 0; i < n; ++i) {
      x0[i] = (s * in0[i] * m[i]) * std_dev[0] + mean[0];
      x1[i] = (s * in1[i] * m[i]) * std_dev[1] + mean[1];
    }
  }
  std::vector<double> expected(n);
  for (size_t i = 0; i < n; ++i) expected[i] = x0[i] * m[i];
  const double scale = max_abs(expected);
  ASSERT_GT(scale, 1e-3);
  for (size_t i = 0; i < n; ++i) ASSERT_NEAR(chi[i], expected[i], 2e-5 * scale) << i;
}

TEST(PhysicsLoops, ModlRefusesNon1mmAndPadsOddDims) {
  std::vector<float> field;
  std::vector<uint8_t> mask;
  const Geometry aniso = geom({12, 10, 8}, {1.0, 1.0, 2.0});
  make_input(aniso, field, mask);
  ScaledIdentity net(1.0f, 2);
  try {
    tessera::modl_qsm_invert(aniso, field, mask, net);
    FAIL() << "2 mm slices accepted";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.code(), tessera::ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("1 mm"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(net.inputs.empty());
  const Geometry odd = geom({11, 10, 7});
  make_input(odd, field, mask);
  const auto chi = tessera::modl_qsm_invert(odd, field, mask, net);
  EXPECT_EQ(chi.size(), field.size());
  ASSERT_EQ(net.shapes.size(), 3u);
  EXPECT_EQ(net.shapes[0].dims, (std::array<uint64_t, 3>{12, 10, 8}));
}

TEST(PhysicsLoops, NextQsmMatchesTheFormulas) {
  using namespace tessera::nextqsm_constants;
  const Geometry g = geom({20, 18, 16}, {1.0, 1.0, 1.0}, {0.0, 0.0, 1.0});
  std::vector<float> field;
  std::vector<uint8_t> mask;
  make_input(g, field, mask);
  ScaledIdentity bf(0.8f), vjp(0.5f);
  const auto chi = tessera::nextqsm_invert(g, field, mask, bf, vjp);
  ASSERT_EQ(bf.inputs.size(), 1u);
  ASSERT_EQ(vjp.inputs.size(), 6u);  // seven network calls in all
  EXPECT_EQ(bf.shapes[0].dims, (std::array<uint64_t, 3>{64, 64, 64}));
  // By hand on the padded 64^3 grid (low padding 22, 23, 24), NeXtQSM kernel.
  const Geometry p = geom({64, 64, 64});
  const double N = 64.0 * 64.0 * 64.0;
  std::vector<double> f(p.voxel_count(), 0.0), m(p.voxel_count(), 0.0);
  for (int64_t z = 0; z < 16; ++z)
    for (int64_t y = 0; y < 18; ++y)
      for (int64_t x = 0; x < 20; ++x) {
        f[p.index(x + 22, y + 23, z + 24)] = field[g.index(x, y, z)];
        m[p.index(x + 22, y + 23, z + 24)] = mask[g.index(x, y, z)];
      }
  const size_t n = f.size();
  std::vector<double> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = 0.8 * (f[i] * m[i]) * m[i];
  double nb = 0;
  for (double v : b) nb += v * v;
  nb = std::sqrt(nb);
  std::vector<double> x = b, diff(n);
  for (double lambda : lambdas) {
    const auto dx = D(p, x, tessera::DipoleConvention::NextQsm);
    double nu = 0;
    for (size_t i = 0; i < n; ++i) {
      diff[i] = dx[i] - b[i];
      nu += diff[i] * diff[i];
    }
    nu = std::sqrt(nu);
    const auto gd = D(p, diff, tessera::DipoleConvention::NextQsm);
    for (size_t i = 0; i < n; ++i) x[i] = (x[i] - lambda * 100.0 / (nb * nu) * gd[i] - 0.5 * x[i] / N) * m[i];
  }
  double scale = 0;
  for (double v : x) scale = std::max(scale, std::fabs(v));
  ASSERT_GT(scale, 1e-3);
  for (int64_t z = 0; z < 16; ++z)
    for (int64_t y = 0; y < 18; ++y)
      for (int64_t xx = 0; xx < 20; ++xx)
        ASSERT_NEAR(chi[g.index(xx, y, z)], x[p.index(xx + 22, y + 23, z + 24)], 1e-4 * scale);
  // The BF input is field * mask in network layout.
  for (int64_t z = 0; z < 64; ++z)
    for (int64_t y = 0; y < 64; ++y)
      for (int64_t xx = 0; xx < 64; ++xx)
        ASSERT_EQ(net_at(bf.inputs[0], p.dims, 0, xx, y, z), static_cast<float>(f[p.index(xx, y, z)] * m[p.index(xx, y, z)]));
}

TEST(PhysicsLoops, RejectsBadRunnersAndInputs) {
  const Geometry g = geom({8, 8, 8});
  std::vector<float> field;
  std::vector<uint8_t> mask;
  make_input(g, field, mask);
  WrongLength wrong;
  Throwing throwing;
  ScaledIdentity ok(1.0f);
  auto expect_code = [](auto&& f, tessera::ErrorCode code, const char* needle) {
    try {
      f();
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const tessera::Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_code([&] { tessera::lpcnn_invert(g, field, mask, wrong); }, tessera::ErrorCode::RunnerFailed, "returned 511");
  expect_code([&] { tessera::modl_qsm_invert(g, field, mask, wrong); }, tessera::ErrorCode::RunnerFailed, "expected 1024");
  expect_code([&] { tessera::nextqsm_invert(g, field, mask, ok, wrong); }, tessera::ErrorCode::RunnerFailed, "VJP");
  expect_code([&] { tessera::lpcnn_invert(g, field, mask, throwing); }, tessera::ErrorCode::RunnerFailed, "session lost");
  std::vector<uint8_t> short_mask(511, 1);
  expect_code([&] { tessera::lpcnn_invert(g, field, short_mask, ok); }, tessera::ErrorCode::InvalidArgument, "mask");
  Geometry zero = g;
  zero.dims = {8, 0, 8};
  expect_code([&] { tessera::nextqsm_invert(zero, field, mask, ok, ok); }, tessera::ErrorCode::InvalidArgument, "dims");
  field[5] = NAN;
  expect_code([&] { tessera::modl_qsm_invert(g, field, mask, ok); }, tessera::ErrorCode::NonFiniteInput, "");
}
