#include "tessera/networks/physics_loops.h"
#include "tessera/engine/tiling.h"

#include <cmath>
#include <exception>
#include <string>

#include "tessera/common/dipole.h"
#include "tessera/common/error.h"
#include "tessera/networks/training_grid.h"
#include "tessera/engine/driver.h"
#include "tessera/registry/registry.h"
#include "networks/network_tasks.h"

namespace tessera {

namespace {

uint64_t count(const Dims3& d) {
  return static_cast<uint64_t>(d[0]) * static_cast<uint64_t>(d[1]) * static_cast<uint64_t>(d[2]);
}

void check_layout_args(const char* what, const Dims3& dims, size_t a, size_t b) {
  for (int k = 0; k < 3; ++k) {
    if (dims[k] <= 0) {
      throw Error(ErrorCode::InvalidArgument,
                  std::string(what) + ": dims " + dims_text(dims) + " are invalid: every dimension must be at least 1");
    }
  }
  const uint64_t n = count(dims);
  if (a != n || b != n) {
    throw Error(ErrorCode::InvalidArgument, std::string(what) + ": buffers hold " + std::to_string(a) + " and " +
                                                std::to_string(b) + " values but dims " + dims_text(dims) + " need " +
                                                std::to_string(n));
  }
}

// A volume zero padded into a larger grid, and the way back.
struct Padding {
  Geometry original;
  Geometry padded;
  Dims3 low{0, 0, 0};

  Padding(const Geometry& g, int64_t divisor) : original(g), padded(g) {
    padded.dims = pad_to_divisor(g.dims, divisor);
    for (int a = 0; a < 3; ++a) low[a] = (padded.dims[a] - g.dims[a]) / 2;  // smaller half on the low side
  }
  template <typename T>
  std::vector<float> pad(std::span<const T> v) const {
    std::vector<float> out(static_cast<size_t>(padded.voxel_count()), 0.0f);
    for (int64_t z = 0; z < original.dims[2]; ++z)
      for (int64_t y = 0; y < original.dims[1]; ++y) {
        const T* src = v.data() + original.index(0, y, z);
        float* dst = out.data() + padded.index(low[0], y + low[1], z + low[2]);
        for (int64_t x = 0; x < original.dims[0]; ++x) dst[x] = static_cast<float>(src[x]);
      }
    return out;
  }
  std::vector<float> crop(const std::vector<float>& v) const {
    std::vector<float> out(static_cast<size_t>(original.voxel_count()));
    for (int64_t z = 0; z < original.dims[2]; ++z)
      for (int64_t y = 0; y < original.dims[1]; ++y) {
        const float* src = v.data() + padded.index(low[0], y + low[1], z + low[2]);
        float* dst = out.data() + original.index(0, y, z);
        for (int64_t x = 0; x < original.dims[0]; ++x) dst[x] = src[x];
      }
    return out;
  }
};

void validate_inputs(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask) {
  validate_geometry(g);
  validate_volume_sizes(g, field.size(), mask.size());
  validate_finite(g, field);
}

// The network call on `channels` host-layout volumes of dims (network layout [1, C, X, Y, Z]).
NetworkCall network_call(uint32_t network, const std::vector<std::vector<float>>& inputs, const Dims3& dims,
                         uint32_t out_channels, std::string where) {
  const uint64_t spatial = count(dims);
  NetworkCall c;
  c.network = network;
  c.shape.channels = static_cast<uint32_t>(inputs.size());
  for (int a = 0; a < 3; ++a) c.shape.dims[a] = static_cast<uint64_t>(dims[a]);
  c.input.resize(static_cast<size_t>(c.shape.size()));
  for (size_t ch = 0; ch < inputs.size(); ++ch) {
    host_to_network(dims, inputs[ch], std::span<float>(c.input).subspan(ch * spatial, spatial));
  }
  c.output_shape = c.shape;
  c.output_shape.channels = out_channels;
  c.where = std::move(where);
  return c;
}

// A network output's channels back in host layout.
std::vector<std::vector<float>> host_channels(const std::vector<float>& out, const Dims3& dims, uint32_t out_channels) {
  const uint64_t spatial = count(dims);
  std::vector<std::vector<float>> result(out_channels, std::vector<float>(static_cast<size_t>(spatial)));
  for (uint32_t c = 0; c < out_channels; ++c) {
    network_to_host(dims, std::span<const float>(out).subspan(c * spatial, spatial), result[c]);
  }
  return result;
}

std::string call_name(const char* model, const char* net, int call) {
  return std::string(model) + ": network " + net + " (call " + std::to_string(call) + ")";
}

}  // namespace

void host_to_network(const Dims3& dims, std::span<const float> host, std::span<float> network) {
  check_layout_args("host_to_network", dims, host.size(), network.size());
  // The tiled driver's gather with no offset and no normalisation: one reorder implementation.
  Geometry g;
  g.dims = dims;
  gather_patch(g, host, Dims3{0, 0, 0},
               {static_cast<uint64_t>(dims[0]), static_cast<uint64_t>(dims[1]), static_cast<uint64_t>(dims[2])},
               Normalization{}, network);
}

void network_to_host(const Dims3& dims, std::span<const float> network, std::span<float> host) {
  check_layout_args("network_to_host", dims, host.size(), network.size());
  const uint64_t nx = static_cast<uint64_t>(dims[0]), ny = static_cast<uint64_t>(dims[1]),
                 nz = static_cast<uint64_t>(dims[2]);
  for (uint64_t x = 0; x < nx; ++x)
    for (uint64_t y = 0; y < ny; ++y) {
      const float* src = network.data() + (x * ny + y) * nz;
      float* dst = host.data() + x + nx * y;
      for (uint64_t z = 0; z < nz; ++z) dst[nx * ny * z] = src[z];
    }
}

Dims3 pad_to_divisor(const Dims3& dims, int64_t divisor) {
  if (divisor < 1) {
    throw Error(ErrorCode::InvalidArgument, "pad_to_divisor: divisor must be >= 1, got " + std::to_string(divisor));
  }
  Dims3 out;
  for (int a = 0; a < 3; ++a) {
    if (dims[a] <= 0) {
      throw Error(ErrorCode::InvalidArgument,
                  "pad_to_divisor: dims " + dims_text(dims) + " are invalid: every dimension must be at least 1");
    }
    out[a] = (dims[a] + divisor - 1) / divisor * divisor;
  }
  return out;
}

uint64_t physics_loop_module_bytes_per_voxel(std::string_view model) {
  // LPCNN: field, mask, kernel, A^H y, p, the estimate (f32 each) = 24; at a network call its input, the call's copy,
  // the output and its host copy (16), while a convolution's complex volume (8) is still held: 48.
  if (model == "lpcnn") return 48;
  // MoDL-QSM: φ, mask, kernel, y (2 channels), the network's input and estimate (2 channels each) = 36; at a call the
  // call's input, its output and the new estimate (2 channels each: 24), with a convolution's complex volume and its
  // result (16): 76.
  if (model == "modl-qsm") return 76;
  return FieldNetwork{}.module_bytes_per_patch_voxel;
}

NetworkTask lpcnn_task(Geometry g, std::span<const float> field, std::span<const uint8_t> mask, unsigned threads) {
  using namespace lpcnn_constants;
  const int64_t divisor = model_spec("lpcnn").divisor;  // the registry's, which the planner tiles with
  validate_inputs(g, field, mask);
  const Padding pad(g, divisor);
  validate_geometry(pad.padded);
  const Dims3& d = pad.padded.dims;
  const std::vector<float> y = pad.pad(field);
  const std::vector<float> m = pad.pad(mask);
  const std::vector<float> kernel = dipole_kernel(pad.padded, DipoleConvention::Standard);
  const size_t n = y.size();
  const float a = static_cast<float>(alpha), mu_f = static_cast<float>(mu), sigma_f = static_cast<float>(sigma);

  std::vector<float> ady = apply_kernel(d, kernel, y, threads);
  for (auto& v : ady) v *= a;
  std::vector<float> den;
  std::vector<float> p(n);
  for (int it = 0; it < iterations; ++it) {
    if (it == 0) {
      p = ady;
    } else {
      const std::vector<float> dd = apply_kernel(d, kernel, apply_kernel(d, kernel, den, threads), threads);
      for (size_t i = 0; i < n; ++i) p[i] = den[i] + ady[i] - a * dd[i];
    }
    std::vector<std::vector<float>> in(1, std::vector<float>(n));
    for (size_t i = 0; i < n; ++i) in[0][i] = ((p[i] - mu_f) / sigma_f) * m[i];
    auto out = host_channels(co_await network_call(0, in, d, 1, call_name("lpcnn", "", it + 1)), d, 1);
    den = std::move(out[0]);
    for (size_t i = 0; i < n; ++i) den[i] = m[i] != 0.0f ? (den[i] * sigma_f + mu_f) * m[i] : 0.0f;  // +0 outside the mask
  }
  co_return pad.crop(den);
}

NetworkTask modl_qsm_task(Geometry g, std::span<const float> field, std::span<const uint8_t> mask, unsigned threads) {
  using namespace modl_constants;
  // The network assumes even dims: odd axes get one zero plane on the high side (registry divisor 2).
  const int64_t divisor = model_spec("modl-qsm").divisor;
  validate_inputs(g, field, mask);
  if (needs_training_grid(model_spec("modl-qsm"), g)) {
    throw Error(ErrorCode::InvalidArgument,
                "modl-qsm runs on its training grid of 1 mm voxels (it was trained so); got " + dims_text(g.dims) + " at " +
                    std::to_string(g.voxel_mm[0]) + " x " + std::to_string(g.voxel_mm[1]) + " x " +
                    std::to_string(g.voxel_mm[2]) + " mm: run it through invert (run_inversion), which resamples the "
                    "field there in k-space and χ back");
  }
  const Padding pad(g, divisor);
  validate_geometry(pad.padded);
  const Dims3& d = pad.padded.dims;
  const std::vector<float> phi = pad.pad(field);
  const std::vector<float> m = pad.pad(mask);
  const std::vector<float> kernel = dipole_kernel(pad.padded, DipoleConvention::Standard);
  const size_t n = phi.size();
  const float a = static_cast<float>(alpha);
  const float mean_f[2] = {static_cast<float>(mean[0]), static_cast<float>(mean[1])};
  const float std_f[2] = {static_cast<float>(std_dev[0]), static_cast<float>(std_dev[1])};

  // y = a A^H(phi) = [a D phi, a phi]
  std::vector<float> y0 = apply_kernel(d, kernel, phi, threads);
  std::vector<float> y1(n);
  for (size_t i = 0; i < n; ++i) {
    y0[i] *= a;
    y1[i] = a * phi[i];
  }
  std::vector<std::vector<float>> x;
  std::vector<std::vector<float>> in(2, std::vector<float>(n));
  for (int it = 0; it < iterations; ++it) {
    if (it == 0) {
      in[0] = y0;
      in[1] = y1;
    } else {
      // A(x) = D x0 + x1; A^H(r) = [D r, r]
      std::vector<float> r = apply_kernel(d, kernel, x[0], threads);
      for (size_t i = 0; i < n; ++i) r[i] += x[1][i];
      const std::vector<float> dr = apply_kernel(d, kernel, r, threads);
      for (size_t i = 0; i < n; ++i) {
        in[0][i] = x[0][i] - a * dr[i] + y0[i];
        in[1][i] = x[1][i] - a * r[i] + y1[i];
      }
    }
    for (int c = 0; c < 2; ++c)
      for (size_t i = 0; i < n; ++i) in[c][i] = ((in[c][i] - mean_f[c]) / std_f[c]) * m[i];
    x = host_channels(co_await network_call(0, in, d, 2, call_name("modl-qsm", "", it + 1)), d, 2);
    for (int c = 0; c < 2; ++c)
      for (size_t i = 0; i < n; ++i) x[c][i] = (x[c][i] * m[i]) * std_f[c] + mean_f[c];
  }
  for (size_t i = 0; i < n; ++i) x[0][i] = m[i] != 0.0f ? x[0][i] * m[i] : 0.0f;  // +0 outside the mask
  co_return pad.crop(x[0]);
}

NetworkTask nextqsm_task(Geometry g, std::span<const float> field, std::span<const uint8_t> mask, unsigned threads) {
  using namespace nextqsm_constants;
  const int64_t divisor = model_spec("nextqsm").divisor;
  validate_inputs(g, field, mask);
  const Padding pad(g, divisor);
  validate_geometry(pad.padded);
  const Dims3& d = pad.padded.dims;
  const std::vector<float> m = pad.pad(mask);
  const std::vector<float> kernel = dipole_kernel(pad.padded, DipoleConvention::NextQsm);
  const size_t n = m.size();
  const float inv_n = static_cast<float>(1.0 / static_cast<double>(n));

  std::vector<std::vector<float>> in(1, pad.pad(field));
  for (size_t i = 0; i < n; ++i) in[0][i] *= m[i];
  std::vector<float> bf = std::move(host_channels(co_await network_call(0, in, d, 1, call_name("nextqsm", "BF", 1)), d, 1)[0]);
  for (size_t i = 0; i < n; ++i) bf[i] *= m[i];
  double bf_norm2 = 0.0;
  for (float v : bf) bf_norm2 += static_cast<double>(v) * v;
  const double bf_norm = std::sqrt(bf_norm2);

  std::vector<float> x = bf;
  std::vector<float> diff(n);
  int call = 2;
  for (double lambda : lambdas) {
    const std::vector<float> dx = apply_kernel(d, kernel, x, threads);
    double u_norm2 = 0.0;
    for (size_t i = 0; i < n; ++i) {
      diff[i] = dx[i] - bf[i];  // = -u
      u_norm2 += static_cast<double>(diff[i]) * diff[i];
    }
    const double denom = bf_norm * std::sqrt(u_norm2);
    std::vector<float> g_d;
    const float scale = denom > 0.0 ? static_cast<float>(data_weight / denom) : 0.0f;
    if (denom > 0.0) g_d = apply_kernel(d, kernel, diff, threads);
    in[0] = x;
    const std::vector<float> g_r = std::move(host_channels(co_await network_call(1, in, d, 1, call_name("nextqsm", "VJP", call++)), d, 1)[0]);
    const float lam = static_cast<float>(lambda);
    for (size_t i = 0; i < n; ++i) {
      const float gd = denom > 0.0 ? scale * g_d[i] : 0.0f;
      x[i] = m[i] != 0.0f ? (x[i] - lam * gd - g_r[i] * inv_n) * m[i] : 0.0f;  // +0 outside the mask
    }
  }
  co_return pad.crop(x);
}

std::vector<float> lpcnn_invert(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                                PatchRunner& net, unsigned threads) {
  PatchRunner* const runners[] = {&net};
  return drive(lpcnn_task(g, field, mask, threads), runners);
}

std::vector<float> modl_qsm_invert(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                                   PatchRunner& net, unsigned threads) {
  PatchRunner* const runners[] = {&net};
  return drive(modl_qsm_task(g, field, mask, threads), runners);
}

std::vector<float> nextqsm_invert(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                                  PatchRunner& bf, PatchRunner& vjp, unsigned threads) {
  PatchRunner* const runners[] = {&bf, &vjp};
  return drive(nextqsm_task(g, field, mask, threads), runners);
}

}  // namespace tessera
