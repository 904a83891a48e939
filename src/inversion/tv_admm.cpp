#include "tessera/inversion/tv_admm.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "common/message_number.h"
#include "common/parallel.h"
#include "tessera/common/error.h"
#include "tessera/inversion/methods.h"
#include "tessera/common/fft.h"

namespace tessera {

namespace {

float shrink(float v, float t) { return v > t ? v - t : (v < -t ? v + t : 0.0f); }

}  // namespace

void forward_gradient(const Geometry& g, std::span<const float> x, std::span<float> gx, std::span<float> gy,
                      std::span<float> gz, unsigned threads) {
  const Dims3 d = g.dims;
  const uint64_t sy = static_cast<uint64_t>(d[0]), sz = sy * static_cast<uint64_t>(d[1]);
  const float ih[3] = {static_cast<float>(1.0 / g.voxel_mm[0]), static_cast<float>(1.0 / g.voxel_mm[1]),
                       static_cast<float>(1.0 / g.voxel_mm[2])};
  parallel_for(g.voxel_count(), threads, [&](uint64_t begin, uint64_t end) {
    for_voxel_range(d, begin, end, [&](uint64_t i, int64_t px, int64_t py, int64_t pz) {
      const float c = x[i];
      const uint64_t ix = px + 1 < d[0] ? i + 1 : i + 1 - sy;
      const uint64_t iy = py + 1 < d[1] ? i + sy : i + sy - sz;
      const uint64_t iz = pz + 1 < d[2] ? i + sz : i + sz - g.voxel_count();
      gx[i] = (x[ix] - c) * ih[0];
      gy[i] = (x[iy] - c) * ih[1];
      gz[i] = (x[iz] - c) * ih[2];
    });
  });
}

void gradient_adjoint(const Geometry& g, std::span<const float> gx, std::span<const float> gy, std::span<const float> gz,
                      std::span<std::complex<float>> out, unsigned threads) {
  const Dims3 d = g.dims;
  const uint64_t n = g.voxel_count();
  const uint64_t sy = static_cast<uint64_t>(d[0]), sz = sy * static_cast<uint64_t>(d[1]);
  const float ih[3] = {static_cast<float>(1.0 / g.voxel_mm[0]), static_cast<float>(1.0 / g.voxel_mm[1]),
                       static_cast<float>(1.0 / g.voxel_mm[2])};
  parallel_for(n, threads, [&](uint64_t begin, uint64_t end) {
    for_voxel_range(d, begin, end, [&](uint64_t i, int64_t px, int64_t py, int64_t pz) {
      const uint64_t ix = px > 0 ? i - 1 : i + sy - 1;
      const uint64_t iy = py > 0 ? i - sy : i + sz - sy;
      const uint64_t iz = pz > 0 ? i - sz : i + n - sz;
      const float v = (gx[ix] - gx[i]) * ih[0] + (gy[iy] - gy[i]) * ih[1] + (gz[iz] - gz[i]) * ih[2];
      out[i] = std::complex<float>(v, 0.0f);
    });
  });
}

std::array<double, 2> take_real_and_change(std::span<const std::complex<float>> c, std::span<float> x, unsigned threads) {
  const uint64_t n = x.size();
  const uint64_t blocks = (n + kParallelBlock - 1) / kParallelBlock;
  std::vector<double> partial(static_cast<size_t>(2 * blocks), 0.0);
  parallel_for(n, threads, [&](uint64_t begin, uint64_t end) {
    double diff = 0.0, norm = 0.0;
    for (uint64_t i = begin; i < end; ++i) {
      const float v = c[i].real();
      const double dv = static_cast<double>(v) - static_cast<double>(x[i]);
      diff += dv * dv;
      norm += static_cast<double>(v) * static_cast<double>(v);
      x[i] = v;
    }
    partial[static_cast<size_t>(2 * (begin / kParallelBlock))] = diff;
    partial[static_cast<size_t>(2 * (begin / kParallelBlock) + 1)] = norm;
  });
  std::array<double, 2> total{0.0, 0.0};
  for (uint64_t b = 0; b < blocks; ++b) {
    total[0] += partial[static_cast<size_t>(2 * b)];
    total[1] += partial[static_cast<size_t>(2 * b + 1)];
  }
  return total;
}

std::vector<float> crop_real_masked(const Geometry& g, const Dims3& pd, std::span<const float> x,
                                    std::span<const uint8_t> mask) {
  std::vector<float> out(static_cast<size_t>(g.voxel_count()));
  const uint64_t px = static_cast<uint64_t>(pd[0]), py = static_cast<uint64_t>(pd[1]);
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y) {
      const float* src = x.data() + (static_cast<uint64_t>(y) + py * static_cast<uint64_t>(z)) * px;
      const uint64_t o = g.index(0, y, z);
      for (int64_t i = 0; i < g.dims[0]; ++i) out[o + i] = mask[o + i] ? src[i] : 0.0f;
    }
  return out;
}

void validate(const TvAdmmParams& p) {
  checked_option(method_options(), "tv.lambda", p.lambda);
  checked_option(method_options(), "tv.rho", p.rho);
  checked_option(method_options(), "tv.tolerance", p.tolerance);
  checked_option(method_options(), "tv.maxIterations", p.max_iterations);
  checked_option(method_options(), "tv.padRatio", p.pad_ratio);
}

TvAdmm::TvAdmm(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
               const TvAdmmParams& params, unsigned threads)
    : g_(g), p_([&] {
        validate_inversion_inputs(g, field, mask);
        validate(params);
        Geometry p = g;
        p.dims = inversion_padded_dims(g.dims, params.pad_ratio, "tv");
        return p;
      }()),
      grid_(p_), mask_(mask), params_(params), threads_(threads) {
  const uint64_t n = p_.voxel_count();
  rhs_.resize(static_cast<size_t>(n));
  work_.resize(static_cast<size_t>(n));
  x_.assign(static_cast<size_t>(n), 0.0f);
  for (int a = 0; a < 3; ++a) {
    u_[a].assign(static_cast<size_t>(n), 0.0f);
    v_[a].assign(static_cast<size_t>(n), 0.0f);
  }
  pad_into(g_, p_.dims, field, rhs_, threads_);
  fft3d_forward(rhs_, p_.dims, threads_);
  const float rho = static_cast<float>(params_.rho);
  parallel_for(n, threads_, [&](uint64_t begin, uint64_t end) {
    grid_.for_range(begin, end, [&](uint64_t i, int64_t x, int64_t y, int64_t z) {
      const float d = grid_.dipole(x, y, z);
      const float a = d * d + rho * grid_.neg_laplacian(x, y, z);
      rhs_[i] = a == 0.0f ? std::complex<float>(0.0f, 0.0f) : rhs_[i] * (d / a);
    });
  });
}

void TvAdmm::step() {
  if (finished_) throw Error(ErrorCode::InvalidArgument, "TV-ADMM: step() called after it finished");
  const uint64_t n = p_.voxel_count();
  const float rho = static_cast<float>(params_.rho);
  // χ-update: F⁻¹[rhs + ρ F(∇ᵀ(z − u)) / (D² + ρL)]
  gradient_adjoint(p_, v_[0], v_[1], v_[2], work_, threads_);
  fft3d_forward(work_, p_.dims, threads_);
  parallel_for(n, threads_, [&](uint64_t begin, uint64_t end) {
    grid_.for_range(begin, end, [&](uint64_t i, int64_t x, int64_t y, int64_t z) {
      const float d = grid_.dipole(x, y, z);
      const float a = d * d + rho * grid_.neg_laplacian(x, y, z);
      work_[i] = a == 0.0f ? std::complex<float>(0.0f, 0.0f) : rhs_[i] + work_[i] * (rho / a);
    });
  });
  fft3d_inverse(work_, p_.dims, threads_);
  const std::array<double, 2> s = take_real_and_change(work_, x_, threads_);
  change_ = s[1] > 0.0 ? std::sqrt(s[0] / s[1]) : 0.0;
  ++done_;
  if (change_ < params_.tolerance || done_ >= params_.max_iterations) {
    finished_ = true;
    return;
  }
  // z = shrink(∇χ + u, λ/ρ), u = u + ∇χ − z, v = z − u
  forward_gradient(p_, x_, v_[0], v_[1], v_[2], threads_);
  const float t = static_cast<float>(params_.lambda / params_.rho);
  const bool isotropic = params_.isotropic;
  parallel_for(n, threads_, [&](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) {
      float w[3], z[3];
      for (int a = 0; a < 3; ++a) w[a] = v_[a][i] + u_[a][i];
      if (isotropic) {
        const float m = std::sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);
        const float k = m > t ? (m - t) / m : 0.0f;
        for (int a = 0; a < 3; ++a) z[a] = w[a] * k;
      } else {
        for (int a = 0; a < 3; ++a) z[a] = shrink(w[a], t);
      }
      for (int a = 0; a < 3; ++a) {
        u_[a][i] = w[a] - z[a];
        v_[a][i] = z[a] - u_[a][i];
      }
    }
  });
}

std::vector<float> TvAdmm::result() const {
  if (!finished_) {
    throw Error(ErrorCode::InvalidArgument, "TV-ADMM: result() asked after " + std::to_string(done_) + " of " +
                                                std::to_string(params_.max_iterations) +
                                                " steps: run it to the end first");
  }
  return crop_real_masked(g_, p_.dims, x_, mask_);
}

std::vector<float> tv_admm(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                           const TvAdmmParams& params, unsigned threads) {
  TvAdmm it(g, field, mask, params, threads);
  run_to_end(it);
  return it.result();
}

uint64_t tv_admm_workspace_bytes(const Geometry& g, const TvAdmmParams& params, unsigned threads) {
  validate_geometry(g);
  validate(params);
  const Dims3 pd = inversion_padded_dims(g.dims, params.pad_ratio, "tv");
  const uint64_t n = static_cast<uint64_t>(pd[0]) * static_cast<uint64_t>(pd[1]) * static_cast<uint64_t>(pd[2]);
  // rhs and the FFT buffer (complex), χ, u and v (real), FFT scratch, frequency tables, χ cropped, the reduction's
  // block sums
  return n * (2 * sizeof(std::complex<float>) + 7 * sizeof(float)) + fft3d_workspace_bytes(pd, threads) +
         static_cast<uint64_t>(pd[0] + pd[1] + pd[2]) * 2 * sizeof(double) + g.voxel_count() * sizeof(float) +
         (n / kParallelBlock + 1) * 2 * sizeof(double);
}

}  // namespace tessera
