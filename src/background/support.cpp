#include "background/support.h"

#include "tessera/background/local_field.h"
#include "tessera/common/morphology.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "common/parallel.h"
#include "common/message_number.h"
#include "tessera/common/error.h"
#include "tessera/background/ismv.h"
#include "tessera/background/lbv.h"
#include "tessera/background/options.h"
#include "tessera/background/pdf.h"
#include "tessera/background/resharp.h"
#include "tessera/background/sharp.h"
#include "tessera/background/vsharp.h"

namespace tessera {

namespace {

// {name, unit, default, default text, min, max, min exclusive, integer, help, choices, max exclusive}; the defaults
// are the methods' own constants (their headers cite where each comes from).
const OptionSpec kBackgroundOptions[] = {
    {"vsharp.maxRadius", "mm", vsharp_defaults::kMaxRadiusMm, "", 1, 100, false, false,
     "the largest SMV radius; radii whose sphere fits nowhere in the mask are dropped (QSM.jl: 18 voxels)"},
    {"vsharp.minRadius", "voxels", vsharp_defaults::kMinRadiusVoxels, "", 1, 64, false, false,
     "the smallest SMV radius: the mask is eroded by it (QSM.jl: 2)"},
    {"vsharp.threshold", "", vsharp_defaults::kThreshold, "", 0, 1, true, false, "TSVD threshold of the deconvolution (Wu 2012: 0.05)",
     "", true},
    {"pdf.maxIterations", "", static_cast<double>(pdf_defaults::kMaxIterations), "", 1, 10000, false, true,
     "conjugate-gradient iterations at most (MEDI toolbox: 30)"},
    {"pdf.padVoxels", "voxels", static_cast<double>(pdf_defaults::kPadVoxels), "", 0, 1024, false, true,
     "zero padding around the mask's box where background sources may lie (MEDI toolbox: 40)"},
    {"lbv.tolerance", "", lbv_defaults::kTolerance, "", 0, 0.1, true, false,
     "relative residual at which LBV's multigrid-preconditioned CG stops (QSM.rs: 1e-6)"},
    {"lbv.maxIterations", "", static_cast<double>(lbv_defaults::kMaxIterations), "", 1, 10000, false, true,
     "LBV's CG iterations at most (QSM.rs caps its solver at 500)"},
    {"lbv.peel", "mm", lbv_defaults::kPeelMm, "", 0, 20, false, false,
     "the mask's border left out before LBV takes the field on its edge as background (MEDI's peel; 4 mm clears the "
     "cortical ribbon, whose own field LBV would otherwise spread through the brain)"},
    {"ismv.radius", "mm", ismv_defaults::kRadiusMm, "", 0.5, 50, false, false,
     "iSMV's SMV radius: the mask is eroded by it (QSM.rs: 5 mm)"},
    {"ismv.tolerance", "", ismv_defaults::kTolerance, "", 0, 0.1, true, false,
     "relative change at which iSMV stops (QSM.rs: 1e-6)"},
    {"ismv.maxIterations", "", static_cast<double>(ismv_defaults::kMaxIterations), "", 1, 10000, false, true,
     "iSMV iterations at most (QSM.rs: 50)"},
    {"sharp.radius", "mm", sharp_defaults::kRadiusMm, "", 0.5, 50, false, false,
     "SHARP's SMV radius: the mask is eroded by it (SEPIA: 4 mm)"},
    {"sharp.threshold", "", sharp_defaults::kThreshold, "", 0, 1, true, false,
     "TSVD threshold of SHARP's deconvolution (QSM.jl: 0.05)", "", true},
    {"resharp.radius", "mm", resharp_defaults::kRadiusMm, "", 0.5, 50, false, false,
     "RESHARP's SMV radius: the mask is eroded by it (QSM.rs: 6 mm)"},
    {"resharp.lambda", "", resharp_defaults::kLambda, "", 0, 1, true, false,
     "Tikhonov weight of RESHARP's deconvolution (QSM.rs: 1e-4)"},
    {"resharp.maxIterations", "", static_cast<double>(resharp_defaults::kMaxIterations), "", 1, 10000, false, true,
     "RESHARP's CG iterations at most (QSM.rs: 30)"},
    {"resharp.tolerance", "", resharp_defaults::kTolerance, "", 0, 0.1, true, false,
     "relative residual at which RESHARP's CG stops (QSM.rs: 1e-6)"},
    {"resharp.minKeptShare", "", resharp_defaults::kMinKeptShare, "", 0, 1, false, false,
     "when the radius's erosion keeps less than this share of the mask (a small head, a slab), the radius shrinks to "
     "keep it, to 2 voxels of the largest edge at the least, with a warning; 0: the radius never shrinks"},
};

}  // namespace

std::span<const OptionSpec> background_options() { return kBackgroundOptions; }

}  // namespace tessera

namespace tessera::background_internal {

void invalid(const std::string& message) { throw Error(ErrorCode::InvalidArgument, message); }

void check_inputs(const char* what, const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask) {
  validate_geometry(g);
  validate_volume_sizes(g, field.size(), mask.size());
  uint64_t inside = 0, bad = 0, first_bad = 0;
  for (uint64_t i = 0; i < mask.size(); ++i) {
    if (!mask[i]) continue;
    ++inside;
    if (!std::isfinite(field[i]) && bad++ == 0) first_bad = i;
  }
  if (inside == 0) {
    invalid(std::string(what) + ": the mask holds no voxel (every value is 0): give the brain mask the field is "
                                "defined on");
  }
  if (bad) {
    const uint64_t nx = static_cast<uint64_t>(g.dims[0]), ny = static_cast<uint64_t>(g.dims[1]);
    throw Error(ErrorCode::NonFiniteInput,
                std::string(what) + ": the field holds " + std::to_string(bad) + " NaN/Inf voxels inside the mask, the "
                    "first at (" + std::to_string(first_bad % nx) + ", " + std::to_string(first_bad / nx % ny) + ", " +
                    std::to_string(first_bad / (nx * ny)) + "): remove them from the mask or fix the field");
  }
}

uint64_t count(const Dims3& d) {
  return static_cast<uint64_t>(d[0]) * static_cast<uint64_t>(d[1]) * static_cast<uint64_t>(d[2]);
}

double min_edge(const Vec3& v) { return std::min({v[0], v[1], v[2]}); }
double max_edge(const Vec3& v) { return std::max({v[0], v[1], v[2]}); }

void load_real(std::vector<Complex>& c, const std::vector<float>& v, unsigned threads) {
  parallel_for(c.size(), threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) c[i] = Complex(v[i], 0.0f);
  });
}

Dims3 smv_padded(const Dims3& ext, const Vec3& voxel_mm, double r_mm) {
  Dims3 p;
  for (int a = 0; a < 3; ++a) {
    const int64_t pad = static_cast<int64_t>(std::ceil(r_mm / voxel_mm[a]));
    p[a] = fast_fft_size(ext[a] + 2 * pad);
  }
  return p;
}

namespace {

// The box voxels deeper than radius_mm (depth2: outside_distance2's squared depths, mm², on the box and a voxel
// border), padded layout (the box at the low corner); refused when none is.
std::vector<uint8_t> erode_box_or_refuse(const std::string& parameter, const std::vector<double>& depth2, const MaskBox& box,
                                         const Dims3& padded, double radius_mm) {
  const Dims3 ext = box.ext();
  const Dims3 e{ext[0] + 2, ext[1] + 2, ext[2] + 2};
  const double r2 = radius_mm * radius_mm;
  std::vector<uint8_t> out(static_cast<size_t>(count(padded)), 0);
  double deepest = 0.0;
  uint64_t kept = 0;
  for (int64_t z = 0; z < ext[2]; ++z)
    for (int64_t y = 0; y < ext[1]; ++y)
      for (int64_t x = 0; x < ext[0]; ++x) {
        const double dd = depth2[static_cast<size_t>((x + 1) + e[0] * ((y + 1) + e[1] * (z + 1)))];
        deepest = std::max(deepest, dd);
        const uint8_t in = dd > r2 ? 1 : 0;
        out[static_cast<size_t>(x + padded[0] * (y + padded[1] * z))] = in;
        kept += in;
      }
  if (kept == 0) {
    invalid(parameter + " " + message_number(radius_mm) + " mm erodes the mask to nothing: its deepest voxel lies " +
            message_number(std::sqrt(deepest)) + " mm inside; give a smaller radius or a larger mask");
  }
  return out;
}

}  // namespace

SmvGrid smv_grid(const std::string& parameter, const Geometry& g, std::span<const uint8_t> mask, double radius_mm,
                 unsigned threads, const SmvAdapt& adapt) {
  SmvGrid grid;
  grid.box = mask_box(g, mask);
  const std::vector<double> depth2 = outside_distance2(g, mask, grid.box, threads);
  grid.radius_mm = radius_mm;
  if (adapt.min_share > 0.0 && radius_mm > adapt.floor_mm) {
    uint64_t inside = 0;
    for (double d : depth2) inside += d > 0.0;
    auto share = [&](double r) {
      uint64_t kept = 0;
      for (double d : depth2) kept += d > r * r;
      return static_cast<double>(kept) / static_cast<double>(inside);
    };
    while (grid.radius_mm > adapt.floor_mm && share(grid.radius_mm) < adapt.min_share) {
      grid.radius_mm = std::max(adapt.floor_mm, grid.radius_mm - adapt.step_mm);
    }
  }
  // A sphere narrower than every voxel edge holds only its centre: the mean value is the field itself, so the whole
  // field would be taken for background and the local field would be zero.
  if (grid.radius_mm < min_edge(g.voxel_mm)) {
    if (adapt.min_share > 0.0 && adapt.floor_mm >= min_edge(g.voxel_mm)) {
      grid.radius_mm = adapt.floor_mm;
    } else {
      invalid(parameter + " " + message_number(radius_mm) + " mm is under the smallest voxel edge (" +
              message_number(min_edge(g.voxel_mm)) + " mm): the sphere holds only its centre, so the whole field would "
              "be taken for background; give a radius of at least one voxel edge, or check the header's voxel size");
    }
  }
  grid.padded = smv_padded(grid.box.ext(), g.voxel_mm, grid.radius_mm);
  Geometry pg = g;
  pg.dims = grid.padded;
  validate_geometry(pg);
  grid.eroded = erode_box_or_refuse(parameter, depth2, grid.box, grid.padded, grid.radius_mm);
  return grid;
}

std::vector<uint8_t> eroded_or_refuse(const std::string& parameter, const Geometry& g, std::span<const uint8_t> mask,
                                      const MaskBox& box, const Dims3& padded, double radius_mm, unsigned threads) {
  return erode_box_or_refuse(parameter, outside_distance2(g, mask, box, threads), box, padded, radius_mm);
}

std::vector<float> smv_kernel_hat(const Geometry& g, const Dims3& padded, double r_mm, std::vector<Complex>& work,
                                  unsigned threads) {
  const uint64_t n = count(padded);
  const double r2 = r_mm * r_mm;
  int64_t reach[3];
  for (int a = 0; a < 3; ++a) reach[a] = static_cast<int64_t>(std::floor(r_mm / g.voxel_mm[a]));
  work.assign(static_cast<size_t>(n), Complex(0.0f, 0.0f));
  uint64_t voxels = 0;
  for (int64_t dz = -reach[2]; dz <= reach[2]; ++dz)
    for (int64_t dy = -reach[1]; dy <= reach[1]; ++dy)
      for (int64_t dx = -reach[0]; dx <= reach[0]; ++dx) {
        const double px = static_cast<double>(dx) * g.voxel_mm[0], py = static_cast<double>(dy) * g.voxel_mm[1],
                     pz = static_cast<double>(dz) * g.voxel_mm[2];
        if (px * px + py * py + pz * pz > r2) continue;
        const int64_t ix = (dx + padded[0]) % padded[0], iy = (dy + padded[1]) % padded[1],
                      iz = (dz + padded[2]) % padded[2];
        work[static_cast<size_t>(ix + padded[0] * (iy + padded[1] * iz))] = Complex(1.0f, 0.0f);
        ++voxels;
      }
  fft3d_forward(work, padded, threads);
  const float scale = 1.0f / static_cast<float>(voxels);
  std::vector<float> s(static_cast<size_t>(n));
  parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) s[i] = work[i].real() * scale;
  });
  return s;
}

}  // namespace tessera::background_internal
