#include "tessera/engine/fidelity_model.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "tessera/engine/blend.h"
#include "tessera/common/error.h"
#include "tessera/common/morphology.h"
#include "tessera/engine/tiling.h"

namespace tessera {

namespace {

// G[d]: the fraction of the dependence beyond a plane at distance d + ½ from the voxel (a shell of radius ρ has
// (1 − d/ρ)/2 of its surface beyond a plane at distance d < ρ).
std::vector<double> beyond_plane(const ContextProfile& p) {
  const size_t n = p.within.size();
  std::vector<double> g(n + 1, 0.0);
  for (size_t d = 0; d <= n; ++d) {
    const double dist = d + 0.5;
    double s = 0;
    for (size_t rho = 1; rho < n; ++rho) {
      const double k = p.within[rho] - p.within[rho - 1];
      if (k > 0 && dist < rho) s += k * 0.5 * (1.0 - dist / rho);
    }
    g[d] = s;
  }
  return g;
}

double g_at(const std::vector<double>& g, int64_t d) {
  if (d < 0) d = 0;
  return static_cast<size_t>(d) < g.size() ? g[static_cast<size_t>(d)] : 0.0;
}

}  // namespace

ContextProfile dipole_context_profile(uint32_t radius) {
  if (radius == 0) throw Error(ErrorCode::InvalidArgument, "a context profile needs a receptive radius of at least 1 voxel");
  ContextProfile p;
  p.radius = radius;
  p.within.resize(radius + 1);
  for (uint32_t r = 0; r <= radius; ++r) p.within[r] = std::log1p(static_cast<double>(r)) / std::log1p(static_cast<double>(radius));
  return p;
}

ContextProfile measured_context_profile(std::span<const double> within) {
  if (within.empty()) throw Error(ErrorCode::InvalidArgument, "a measured context profile needs at least one value");
  double last = 0;
  for (double w : within) {
    if (!std::isfinite(w) || w < last - 1e-12 || w < 0 || w > 1 + 1e-6) {
      throw Error(ErrorCode::InvalidArgument, "a context profile must be non-decreasing fractions in [0, 1]");
    }
    last = std::max(last, w);
  }
  if (std::abs(within.back() - 1.0) > 1e-6) {
    throw Error(ErrorCode::InvalidArgument, "a context profile must end at 1 (the whole dependence), got " + std::to_string(within.back()));
  }
  ContextProfile p;
  p.within.assign(within.begin(), within.end());
  p.measured = true;
  return p;
}

uint32_t context_radius_holding(const ContextProfile& p, double fraction) {
  for (size_t r = 0; r < p.within.size(); ++r) {
    if (p.within[r] >= fraction) return static_cast<uint32_t>(r);
  }
  return p.within.empty() ? 0 : static_cast<uint32_t>(p.within.size() - 1);
}

FidelityPrediction whole_volume_fidelity() { return FidelityPrediction{}; }

bool beyond_fidelity_fit(const ContextProfile& profile, const FidelityFit& fit) {
  if (fit.fit_radius == 0) return false;
  return context_radius_holding(profile, 0.9) > context_radius_holding(dipole_context_profile(fit.fit_radius), 0.9);
}

FidelityModel::FidelityModel(const Geometry& g, std::span<const uint8_t> mask, ContextProfile profile, const FidelityFit& fit,
                             uint64_t max_samples)
    : geometry_(g), profile_(std::move(profile)), fit_(fit) {
  validate_geometry(g);
  if (mask.size() != g.voxel_count()) validate_volume_sizes(g, g.voxel_count(), mask.size());
  if (profile_.within.empty()) throw Error(ErrorCode::InvalidArgument, "the fidelity model needs a context profile");
  beyond_ = beyond_plane(profile_);
  beyond_fit_ = beyond_fidelity_fit(profile_, fit_);
  const MaskBox box = mask_box(g, mask);
  const uint64_t every = std::max<uint64_t>(1, box.voxels / std::max<uint64_t>(1, max_samples));
  lo_ = box.lo;
  hi_ = box.hi;
  uint64_t seen = 0;
  for (int64_t z = 0; z < g.dims[2]; ++z)
    for (int64_t y = 0; y < g.dims[1]; ++y)
      for (int64_t x = 0; x < g.dims[0]; ++x) {
        if (!mask[g.index(x, y, z)]) continue;
        if (seen++ % every == 0) sample_.push_back({static_cast<int32_t>(x), static_cast<int32_t>(y), static_cast<int32_t>(z)});
      }
}

FidelityPrediction FidelityModel::predict(const TileConfig& cfg, uint64_t patch_edge) const {
  validate_tile_config(cfg);
  const int64_t core = cfg.core, step = cfg.step(), halo = cfg.halo, P = static_cast<int64_t>(patch_edge);
  std::array<std::vector<Window>, 3> windows;
  for (int a = 0; a < 3; ++a) {
    const int64_t n = geometry_.dims[a];
    const int64_t count = windows_along(n, core, step);
    for (int64_t k = 0; k < count; ++k) {
      const int64_t c0 = k * step, p0 = c0 - halo;
      windows[a].push_back(Window{c0, std::min(c0 + core, n), p0, p0 + P});
    }
  }
  return predict_windows(windows, blend_profile(cfg.blend, cfg.core));
}

FidelityPrediction FidelityModel::predict_grid(const TileGrid& grid, const std::array<uint64_t, 3>& dims) const {
  if (grid.config.overlapping()) throw Error(ErrorCode::InvalidArgument, "predict_grid takes a grid whose cores do not overlap");
  std::array<std::vector<Window>, 3> windows;
  uint64_t longest = 1;
  for (const Tile& t : grid.tiles) {
    if (t.skipped) continue;
    for (int a = 0; a < 3; ++a) {
      const Window w{t.core_lo[a], t.core_hi[a], t.patch_lo[a], t.patch_lo[a] + static_cast<int64_t>(dims[a])};
      auto& list = windows[a];
      if (std::none_of(list.begin(), list.end(), [&](const Window& v) { return v.c0 == w.c0 && v.c1 == w.c1 && v.p0 == w.p0; })) {
        list.push_back(w);
      }
      longest = std::max<uint64_t>(longest, static_cast<uint64_t>(w.c1 - w.c0));
    }
  }
  return predict_windows(windows, std::vector<double>(longest, 1.0));
}

FidelityPrediction FidelityModel::predict_windows(const std::array<std::vector<Window>, 3>& windows,
                                                  const std::vector<double>& w) const {
  if (sample_.empty()) return FidelityPrediction{};
  const Geometry& g = geometry_;
  const std::vector<double>& G = beyond_;
  // Per axis, the blended deficit of every position: Σ_k w_k(x) · missing_k(x) / Σ_k w_k(x).
  std::array<std::vector<double>, 3> E;
  for (int a = 0; a < 3; ++a) {
    const int64_t n = g.dims[a];
    std::vector<double> num(static_cast<size_t>(n), 0.0), den(static_cast<size_t>(n), 0.0);
    for (const Window& win : windows[a]) {
      const int64_t c0 = std::max<int64_t>(0, win.c0), c1 = std::min(win.c1, n), p0 = win.p0, p1 = win.p1;
      for (int64_t x = c0; x < c1; ++x) {
        double miss = 0;
        if (p0 > lo_[a]) miss += std::max(0.0, g_at(G, x - p0) - g_at(G, x - lo_[a]));
        if (p1 < hi_[a]) miss += std::max(0.0, g_at(G, p1 - 1 - x) - g_at(G, hi_[a] - 1 - x));
        const double wk = w[static_cast<size_t>(x - win.c0)];
        num[static_cast<size_t>(x)] += wk * miss;
        den[static_cast<size_t>(x)] += wk;
      }
    }
    E[a].resize(static_cast<size_t>(n));
    for (int64_t x = 0; x < n; ++x) {
      const size_t i = static_cast<size_t>(x);
      E[a][i] = den[i] > 0 ? num[i] / den[i] : 0.0;
    }
  }
  double sum = 0;
  for (const auto& v : sample_) {
    const double e = E[0][static_cast<size_t>(v[0])] + E[1][static_cast<size_t>(v[1])] + E[2][static_cast<size_t>(v[2])];
    sum += e * e;
  }
  FidelityPrediction out;
  out.deficit = std::sqrt(sum / static_cast<double>(sample_.size()));
  out.beyond_fit = beyond_fit_;
  out.nrmse = out.deficit > 0 ? fit_.alpha * std::pow(out.deficit, fit_.beta) : 0.0;
  if (out.beyond_fit) out.nrmse *= fit_.beyond_fit_caution;
  out.r = std::max(0.0, 1.0 - fit_.gamma * out.nrmse * out.nrmse);
  return out;
}

}  // namespace tessera
