#include "tessera/phase/unwrap.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>
#include <string>

#include "common/message_number.h"
#include "common/parallel.h"
#include "phase/phase_math.h"
#include "tessera/common/error.h"
#include "tessera/common/fft.h"

namespace tessera {

namespace {

constexpr double kPi = std::numbers::pi;


void check_inputs(const char* what, const Geometry& g, std::span<const float> wrapped, std::span<const uint8_t> mask) {
  validate_geometry(g);
  const uint64_t n = g.voxel_count();
  if (wrapped.size() != n) {
    throw Error(ErrorCode::InvalidArgument, std::string(what) + ": wrapped phase holds " +
                                                std::to_string(wrapped.size()) + " values but the volume " +
                                                dims_text(g.dims) + " has " + std::to_string(n) + " voxels");
  }
  if (mask.size() != n) {
    throw Error(ErrorCode::InvalidArgument, std::string(what) + ": mask holds " + std::to_string(mask.size()) +
                                                " values but the volume " + dims_text(g.dims) + " has " +
                                                std::to_string(n) + " voxels");
  }
  validate_mask_not_empty(g, mask);
  validate_wrapped_phase(wrapped, std::string(what) + ": wrapped phase");
}

// Neighbour offsets of the 6-neighbourhood: direction d and d ^ 1 are opposite.
struct Step {
  int axis;
  int sign;
};
constexpr std::array<Step, 6> kSteps{{{0, +1}, {0, -1}, {1, +1}, {1, -1}, {2, +1}, {2, -1}}};

}  // namespace

void validate_wrapped_phase(std::span<const float> phase, const std::string& what) {
  uint64_t non_finite = 0, first_bad = 0;
  double lo = 0.0, hi = 0.0;
  bool any = false;
  for (uint64_t i = 0; i < phase.size(); ++i) {
    const float v = phase[i];
    if (!std::isfinite(v)) {
      if (non_finite++ == 0) first_bad = i;
      continue;
    }
    if (!any) lo = hi = v, any = true;
    lo = std::min(lo, static_cast<double>(v));
    hi = std::max(hi, static_cast<double>(v));
  }
  if (non_finite > 0) {
    throw Error(ErrorCode::InvalidArgument, what + ": " + std::to_string(non_finite) +
                                                " values are NaN or Inf (the first at index " +
                                                std::to_string(first_bad) +
                                                "); give a finite wrapped phase in radians, [−π, π]");
  }
  constexpr double kTolerance = 1e-3;
  if (lo >= -kPi - kTolerance && hi <= kPi + kTolerance) return;
  const std::string span = "spans " + short_message_number(lo) + " to " + short_message_number(hi);
  std::string hint;
  if (lo >= -kTolerance && hi <= kTwoPi + kTolerance) {
    hint = " rad: looks like a phase in [0, 2π); subtract 2π from the values above π to give [−π, π]";
  } else if (lo >= -kTolerance && hi > 100.0) {
    hint = ": looks like raw scanner units (e.g. 0 to 4095); convert to radians, v·2π/(range) − π, to give [−π, π]";
  } else if (lo >= -180.0 - kTolerance && hi <= 180.0 + kTolerance && (hi - lo) > 270.0) {
    hint = ": looks like degrees; multiply by π/180 to give radians in [−π, π]";
  } else if (lo >= -4096.0 - kTolerance && hi <= 4096.0 + kTolerance && (hi - lo) > 1000.0) {
    hint = ": looks like raw signed scanner units (e.g. −4096 to 4095); convert to radians, v·π/4096, to give [−π, π]";
  } else {
    hint = " rad: already unwrapped, or not radians? give the wrapped phase in [−π, π]";
  }
  throw Error(ErrorCode::InvalidArgument, what + " " + span + hint);
}

std::vector<float> unwrap_laplacian(const Geometry& g, std::span<const float> wrapped, std::span<const uint8_t> mask,
                                    unsigned threads) {
  check_inputs("unwrap_laplacian", g, wrapped, mask);
  const int64_t nx = g.dims[0], ny = g.dims[1], nz = g.dims[2];
  const uint64_t n = g.voxel_count();
  const double ih2[3] = {1.0 / (g.voxel_mm[0] * g.voxel_mm[0]), 1.0 / (g.voxel_mm[1] * g.voxel_mm[1]),
                         1.0 / (g.voxel_mm[2] * g.voxel_mm[2])};
  const int64_t stride[3] = {1, nx, nx * ny};

  // Laplacian of the true phase from wrapped neighbour differences; a missing neighbour (array face) contributes
  // nothing: the Neumann condition of the mirrored extension below.
  std::vector<float> laplacian(static_cast<size_t>(n));
  parallel_for(n, threads, [&](uint64_t begin, uint64_t end) {
    int64_t x = static_cast<int64_t>(begin % static_cast<uint64_t>(nx));
    int64_t y = static_cast<int64_t>((begin / static_cast<uint64_t>(nx)) % static_cast<uint64_t>(ny));
    int64_t z = static_cast<int64_t>(begin / (static_cast<uint64_t>(nx) * static_cast<uint64_t>(ny)));
    for (uint64_t i = begin; i < end; ++i) {
      const int64_t p[3] = {x, y, z};
      const double w = wrapped[i];
      double sum = 0.0;
      for (int a = 0; a < 3; ++a) {
        double d = 0.0;
        if (p[a] + 1 < g.dims[a]) d += wrap_phase(static_cast<double>(wrapped[i + static_cast<uint64_t>(stride[a])]) - w);
        if (p[a] > 0) d -= wrap_phase(w - static_cast<double>(wrapped[i - static_cast<uint64_t>(stride[a])]));
        sum += d * ih2[a];
      }
      laplacian[i] = static_cast<float>(sum);
      if (++x == nx) {
        x = 0;
        if (++y == ny) y = 0, ++z;
      }
    }
  });

  // Even (half-sample) extension to 2n per axis: periodic and continuous, so the FFT inverse of the 7-point
  // Laplacian solves the Neumann problem on the array.
  Geometry m = g;
  for (int a = 0; a < 3; ++a) m.dims[a] = 2 * g.dims[a];
  const uint64_t mn = m.voxel_count();
  if (mn > std::numeric_limits<size_t>::max() / sizeof(Complex)) {
    throw Error(ErrorCode::InvalidArgument,
                "unwrap_laplacian: the mirrored " + dims_text(m.dims) + " complex volume of the solve (" +
                    std::to_string(mn * sizeof(Complex) >> 20) +
                    " MiB) cannot be addressed on this platform; crop the volume to the mask or use region growing");
  }
  const int64_t mx = m.dims[0], my = m.dims[1];
  std::vector<Complex> buffer(static_cast<size_t>(mn));
  auto mirror = [](int64_t i, int64_t size) { return i < size ? i : 2 * size - 1 - i; };
  parallel_for(mn, threads, [&](uint64_t begin, uint64_t end) {
    int64_t x = static_cast<int64_t>(begin % static_cast<uint64_t>(mx));
    int64_t y = static_cast<int64_t>((begin / static_cast<uint64_t>(mx)) % static_cast<uint64_t>(my));
    int64_t z = static_cast<int64_t>(begin / (static_cast<uint64_t>(mx) * static_cast<uint64_t>(my)));
    for (uint64_t i = begin; i < end; ++i) {
      buffer[i] = Complex(laplacian[g.index(mirror(x, nx), mirror(y, ny), mirror(z, nz))], 0.0f);
      if (++x == mx) {
        x = 0;
        if (++y == my) y = 0, ++z;
      }
    }
  });
  fft3d_forward(buffer, m.dims, threads);
  // Eigenvalues of the 7-point Laplacian on the periodic 2n grid: Σ_axes 2(cos(2πk/2n) − 1)/h²; the mean (k = 0) is
  // undefined and set to 0.
  std::array<std::vector<double>, 3> eigen;
  for (int a = 0; a < 3; ++a) {
    eigen[a].resize(static_cast<size_t>(m.dims[a]));
    for (int64_t k = 0; k < m.dims[a]; ++k) {
      eigen[a][static_cast<size_t>(k)] =
          2.0 * (std::cos(kTwoPi * static_cast<double>(k) / static_cast<double>(m.dims[a])) - 1.0) * ih2[a];
    }
  }
  parallel_for(mn, threads, [&](uint64_t begin, uint64_t end) {
    int64_t x = static_cast<int64_t>(begin % static_cast<uint64_t>(mx));
    int64_t y = static_cast<int64_t>((begin / static_cast<uint64_t>(mx)) % static_cast<uint64_t>(my));
    int64_t z = static_cast<int64_t>(begin / (static_cast<uint64_t>(mx) * static_cast<uint64_t>(my)));
    for (uint64_t i = begin; i < end; ++i) {
      const double lambda = eigen[0][static_cast<size_t>(x)] + eigen[1][static_cast<size_t>(y)] +
                            eigen[2][static_cast<size_t>(z)];
      buffer[i] = (i == 0) ? Complex(0.0f, 0.0f) : buffer[i] * static_cast<float>(1.0 / lambda);
      if (++x == mx) {
        x = 0;
        if (++y == my) y = 0, ++z;
      }
    }
  });
  fft3d_inverse(buffer, m.dims, threads);
  // u, reusing the Laplacian's buffer.
  std::vector<float>& u = laplacian;
  for (int64_t z = 0; z < nz; ++z)
    for (int64_t y = 0; y < ny; ++y)
      for (int64_t x = 0; x < nx; ++x) u[g.index(x, y, z)] = buffer[m.index(x, y, z)].real();
  buffer = std::vector<Complex>();

  // u is defined up to a constant: take the one that best matches the wrapped phase (circular mean over the mask).
  const double re = parallel_sum(n, threads, [&](uint64_t i) {
    return mask[i] ? std::cos(static_cast<double>(wrapped[i]) - static_cast<double>(u[i])) : 0.0;
  });
  const double im = parallel_sum(n, threads, [&](uint64_t i) {
    return mask[i] ? std::sin(static_cast<double>(wrapped[i]) - static_cast<double>(u[i])) : 0.0;
  });
  const double offset = std::atan2(im, re);
  std::vector<float> result(static_cast<size_t>(n), 0.0f);
  parallel_for(n, threads, [&](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) {
      if (!mask[i]) continue;
      const double w = wrapped[i];
      result[i] = static_cast<float>(w + kTwoPi * std::nearbyint((static_cast<double>(u[i]) + offset - w) / kTwoPi));
    }
  });
  return result;
}

uint64_t unwrap_laplacian_workspace_bytes(const Geometry& g, unsigned threads) {
  validate_geometry(g);
  Geometry m = g;
  for (int a = 0; a < 3; ++a) m.dims[a] = 2 * g.dims[a];
  // the mirrored complex volume, the Laplacian (reused for u), FFT scratch; the result is allocated after the
  // mirrored volume is freed, so the peak is the larger of the two phases.
  const uint64_t solve = m.voxel_count() * sizeof(Complex) + g.voxel_count() * sizeof(float) +
                         fft3d_workspace_bytes(m.dims, threads);
  const uint64_t congruence = 2 * g.voxel_count() * sizeof(float) +
                              ((g.voxel_count() + kParallelBlock - 1) / kParallelBlock) * sizeof(double);
  return std::max(solve, congruence);
}

namespace {

// ROMEO-style edge weights: weights[3·i + a] is the edge from voxel i to its + neighbour along axis a, 1..255,
// 0 when either end is outside the mask or the array.
std::vector<uint8_t> edge_weights(const Geometry& g, std::span<const float> phase, std::span<const float> magnitude,
                                  std::span<const uint8_t> mask, unsigned threads) {
  const int64_t nx = g.dims[0], ny = g.dims[1];
  const uint64_t n = g.voxel_count();
  const int64_t stride[3] = {1, nx, nx * ny};
  std::vector<uint8_t> weights(static_cast<size_t>(3 * n), 0);
  const bool has_magnitude = !magnitude.empty();
  parallel_for(n, threads, [&](uint64_t begin, uint64_t end) {
    int64_t x = static_cast<int64_t>(begin % static_cast<uint64_t>(nx));
    int64_t y = static_cast<int64_t>((begin / static_cast<uint64_t>(nx)) % static_cast<uint64_t>(ny));
    int64_t z = static_cast<int64_t>(begin / (static_cast<uint64_t>(nx) * static_cast<uint64_t>(ny)));
    for (uint64_t i = begin; i < end; ++i) {
      const int64_t p[3] = {x, y, z};
      if (mask[i]) {
        for (int a = 0; a < 3; ++a) {
          if (p[a] + 1 >= g.dims[a]) continue;
          const uint64_t j = i + static_cast<uint64_t>(stride[a]);
          if (!mask[j]) continue;
          const double step = wrap_phase(static_cast<double>(phase[j]) - static_cast<double>(phase[i]));
          // phase coherence
          double w = 0.1 + 0.9 * (1.0 - std::fabs(step) / kPi);
          // phase linearity: the wrapped second difference on each side of the edge (0.9 where there is no third
          // voxel in the mask, as ROMEO does at the border)
          double linearity = 1.0;
          if (p[a] > 0 && mask[i - static_cast<uint64_t>(stride[a])]) {
            const double before = wrap_phase(static_cast<double>(phase[i]) -
                                       static_cast<double>(phase[i - static_cast<uint64_t>(stride[a])]));
            linearity *= std::max(0.0, 1.0 - std::fabs(wrap_phase(step - before)) / 2.0);
          } else {
            linearity *= 0.9;
          }
          if (p[a] + 2 < g.dims[a] && mask[j + static_cast<uint64_t>(stride[a])]) {
            const double after = wrap_phase(static_cast<double>(phase[j + static_cast<uint64_t>(stride[a])]) -
                                      static_cast<double>(phase[j]));
            linearity *= std::max(0.0, 1.0 - std::fabs(wrap_phase(after - step)) / 2.0);
          } else {
            linearity *= 0.9;
          }
          w *= 0.1 + 0.9 * linearity;
          if (has_magnitude) {
            const double m1 = std::fabs(static_cast<double>(magnitude[i]));
            const double m2 = std::fabs(static_cast<double>(magnitude[j]));
            const double small = std::min(m1, m2), big = std::max(m1, m2);
            const double coherence = big > 0.0 ? (small / big) * (small / big) : 0.0;
            w *= 0.1 + 0.9 * coherence;
          }
          weights[static_cast<size_t>(3 * i + static_cast<uint64_t>(a))] =
              static_cast<uint8_t>(1.0 + std::nearbyint(std::clamp(w, 0.0, 1.0) * 254.0));
        }
      }
      if (++x == nx) {
        x = 0;
        if (++y == ny) y = 0, ++z;
      }
    }
  });
  return weights;
}

}  // namespace

std::vector<float> unwrap_region_growing(const Geometry& g, std::span<const float> wrapped,
                                         std::span<const float> magnitude, std::span<const uint8_t> mask,
                                         unsigned threads) {
  check_inputs("unwrap_region_growing", g, wrapped, mask);
  const uint64_t n = g.voxel_count();
  if (!magnitude.empty()) {
    if (magnitude.size() != n) {
      throw Error(ErrorCode::InvalidArgument,
                  "unwrap_region_growing: magnitude holds " + std::to_string(magnitude.size()) +
                      " values but the volume " + dims_text(g.dims) + " has " + std::to_string(n) +
                      " voxels: give one magnitude per voxel, or none");
    }
    for (uint64_t i = 0; i < n; ++i) {
      if (!std::isfinite(magnitude[i])) {
        throw Error(ErrorCode::InvalidArgument, "unwrap_region_growing: magnitude has a NaN or Inf at index " +
                                                    std::to_string(i) + "; give finite magnitudes");
      }
    }
  }
  const int64_t nx = g.dims[0], ny = g.dims[1];
  const int64_t stride[3] = {1, nx, nx * ny};
  const std::vector<uint8_t> weights = edge_weights(g, wrapped, magnitude, mask, threads);

  auto coordinate = [&](uint64_t i, int a) {
    if (a == 0) return static_cast<int64_t>(i % static_cast<uint64_t>(nx));
    if (a == 1) return static_cast<int64_t>((i / static_cast<uint64_t>(nx)) % static_cast<uint64_t>(ny));
    return static_cast<int64_t>(i / (static_cast<uint64_t>(nx) * static_cast<uint64_t>(ny)));
  };
  // The weight of the edge from i in direction d (0 when there is none).
  auto edge = [&](uint64_t i, int d) -> uint8_t {
    const Step s = kSteps[static_cast<size_t>(d)];
    const int64_t c = coordinate(i, s.axis);
    if (s.sign > 0) return c + 1 < g.dims[s.axis] ? weights[static_cast<size_t>(3 * i + s.axis)] : 0;
    return c > 0 ? weights[static_cast<size_t>(3 * (i - static_cast<uint64_t>(stride[s.axis])) + s.axis)] : 0;
  };
  auto neighbour = [&](uint64_t i, int d) {
    const Step s = kSteps[static_cast<size_t>(d)];
    return s.sign > 0 ? i + static_cast<uint64_t>(stride[s.axis]) : i - static_cast<uint64_t>(stride[s.axis]);
  };

  // Seed order: mask voxels by summed edge weight, best first, then by index (a counting sort: deterministic).
  constexpr size_t kQualities = 6 * 255 + 1;
  std::vector<uint64_t> count(kQualities, 0);
  uint64_t inside = 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (!mask[i]) continue;
    unsigned q = 0;
    for (int d = 0; d < 6; ++d) q += edge(i, d);
    ++count[kQualities - 1 - q];
    ++inside;
  }
  uint64_t running = 0;
  for (auto& c : count) {
    const uint64_t here = c;
    c = running;
    running += here;
  }
  std::vector<uint64_t> seeds(static_cast<size_t>(inside));
  for (uint64_t i = 0; i < n; ++i) {
    if (!mask[i]) continue;
    unsigned q = 0;
    for (int d = 0; d < 6; ++d) q += edge(i, d);
    seeds[static_cast<size_t>(count[kQualities - 1 - q]++)] = i;
  }

  std::vector<float> result(static_cast<size_t>(n), 0.0f);
  std::vector<uint8_t> visited(static_cast<size_t>(n), 0);
  // Bucket queue: one LIFO list per weight; an item is (target << 3) | d, d the direction from target to its
  // already-unwrapped reference.
  std::array<std::vector<uint64_t>, 256> buckets;
  int top = 0;
  auto push_neighbours = [&](uint64_t i) {
    for (int d = 0; d < 6; ++d) {
      const uint8_t w = edge(i, d);
      if (w == 0) continue;
      const uint64_t j = neighbour(i, d);
      if (visited[j]) continue;
      buckets[w].push_back((j << 3) | static_cast<uint64_t>(d ^ 1));
      top = std::max(top, static_cast<int>(w));
    }
  };
  for (const uint64_t seed : seeds) {
    if (visited[seed]) continue;
    visited[seed] = 1;
    result[seed] = wrapped[seed];
    push_neighbours(seed);
    while (true) {
      while (top > 0 && buckets[static_cast<size_t>(top)].empty()) --top;
      if (top == 0) break;
      const uint64_t item = buckets[static_cast<size_t>(top)].back();
      buckets[static_cast<size_t>(top)].pop_back();
      const uint64_t target = item >> 3;
      if (visited[target]) continue;
      const uint64_t reference = neighbour(target, static_cast<int>(item & 7));
      const double w = wrapped[target];
      result[target] =
          static_cast<float>(w - kTwoPi * std::nearbyint((w - static_cast<double>(result[reference])) / kTwoPi));
      visited[target] = 1;
      push_neighbours(target);
    }
  }
  return result;
}

uint64_t unwrap_region_growing_workspace_bytes(const Geometry& g) {
  validate_geometry(g);
  const uint64_t n = g.voxel_count();
  // weights 3, visited 1, seeds 8, result 4; the bucket queue: one pending item (8 bytes) per voxel, in vectors that
  // double (a growing region's frontier holds far fewer than the 6 pushes per voxel a voxel may receive); bucket counts
  return 32 * n + (6 * 255 + 1) * sizeof(uint64_t) + 256 * 3 * sizeof(void*);
}

}  // namespace tessera
