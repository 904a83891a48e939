#include "tessera/background/lbv.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "background/support.h"
#include "common/message_number.h"
#include "common/conjugate_gradient.h"
#include "common/parallel.h"
#include "tessera/common/error.h"
#include "tessera/background/options.h"

namespace tessera {

namespace bgi = background_internal;

void validate(const LbvParams& p) {
  checked_option(background_options(), "lbv.tolerance", p.tolerance);
  checked_option(background_options(), "lbv.maxIterations", p.max_iterations);
  checked_option(background_options(), "lbv.peel", p.peel_mm);
}

namespace {

// Multigrid: a level's cells are the box's voxels at level 0 and 2×2×2 blocks of the finer level's above, stored with
// one inactive ghost cell on each side; inactive cells hold 0 (the homogeneous Dirichlet condition of the error).
// Pre- and post-smoothing sweeps per level, sweeps at the coarsest (each a red-black-black-red symmetric pair), and the
// coarsest level's smallest edge: fixed, so the preconditioner is one symmetric positive definite operator.
constexpr int kLbvSmoothing = 2;
constexpr int kLbvCoarsestSweeps = 30;
constexpr int64_t kLbvCoarsestEdge = 8;
constexpr int kLbvMaxLevels = 12;

struct LbvLevel {
  Dims3 n{0, 0, 0};  // cells per axis, ghosts excluded
  int64_t sx = 0, sxy = 0;
  uint64_t size = 0;  // cells with ghosts
  double w[3] = {0, 0, 0};  // 1 / h² per axis
  float wf[3] = {0, 0, 0};
  float inv_diag = 0.0f;
  std::vector<uint8_t> active;
  std::vector<float> e_own, rhs_own, res_own;
  float* e = nullptr;
  float* rhs = nullptr;
  float* res = nullptr;

  uint64_t at(int64_t x, int64_t y, int64_t z) const {
    return static_cast<uint64_t>((x + 1) + sx * (y + 1) + sxy * (z + 1));
  }
};

LbvLevel lbv_level_shape(const Dims3& n, const Vec3& h) {
  LbvLevel L;
  L.n = n;
  L.sx = n[0] + 2;
  L.sxy = L.sx * (n[1] + 2);
  L.size = static_cast<uint64_t>(L.sxy * (n[2] + 2));
  double diag = 0.0;
  for (int a = 0; a < 3; ++a) {
    L.w[a] = 1.0 / (h[a] * h[a]);
    L.wf[a] = static_cast<float>(L.w[a]);
    diag += 2.0 * L.w[a];
  }
  L.inv_diag = static_cast<float>(1.0 / diag);
  return L;
}

// The shapes of every level, finest first.
std::vector<LbvLevel> lbv_shapes(const Dims3& ext, const Vec3& voxel_mm) {
  std::vector<LbvLevel> levels;
  Dims3 n = ext;
  Vec3 h = voxel_mm;
  for (;;) {
    levels.push_back(lbv_level_shape(n, h));
    if (std::min({n[0], n[1], n[2]}) < kLbvCoarsestEdge || static_cast<int>(levels.size()) == kLbvMaxLevels) break;
    for (int a = 0; a < 3; ++a) {
      n[a] = (n[a] + 1) / 2;
      h[a] *= 2.0;
    }
  }
  return levels;
}

// Calls body(y, z) for every row of the level, rows shared among threads in blocks of about kParallelBlock cells.
template <typename Body>
void lbv_rows(const LbvLevel& L, unsigned threads, Body&& body) {
  const uint64_t nx = static_cast<uint64_t>(L.n[0]), rows = static_cast<uint64_t>(L.n[1] * L.n[2]);
  parallel_for(rows * nx, threads, [&](uint64_t b, uint64_t e) {
    for (uint64_t r = (b + nx - 1) / nx; r < (e + nx - 1) / nx; ++r) {
      body(static_cast<int64_t>(r % static_cast<uint64_t>(L.n[1])), static_cast<int64_t>(r / static_cast<uint64_t>(L.n[1])));
    }
  });
}

// Σ_a w_a (u[i + e_a] + u[i − e_a])
inline float lbv_neighbours(const LbvLevel& L, const float* u, uint64_t i) {
  return L.wf[0] * (u[i - 1] + u[i + 1]) + L.wf[1] * (u[i - L.sx] + u[i + L.sx]) +
         L.wf[2] * (u[i - L.sxy] + u[i + L.sxy]);
}

// One Gauss–Seidel half-sweep over the cells of one colour ((x + y + z) % 2 == colour) of A e = rhs.
void lbv_sweep(LbvLevel& L, int colour, unsigned threads) {
  lbv_rows(L, threads, [&](int64_t y, int64_t z) {
    const int64_t x0 = (y + z + colour) & 1;
    for (int64_t x = x0; x < L.n[0]; x += 2) {
      const uint64_t i = L.at(x, y, z);
      if (L.active[i]) L.e[i] = (L.rhs[i] + lbv_neighbours(L, L.e, i)) * L.inv_diag;
    }
  });
}

// out = A u on the active cells (A: the 7-point negative Laplacian, 0 outside), 0 elsewhere; with rhs: rhs − A u.
void lbv_apply(const LbvLevel& L, const float* u, const float* rhs, float* out, unsigned threads) {
  const float diag = 1.0f / L.inv_diag;
  lbv_rows(L, threads, [&](int64_t y, int64_t z) {
    for (int64_t x = 0; x < L.n[0]; ++x) {
      const uint64_t i = L.at(x, y, z);
      const float au = L.active[i] ? diag * u[i] - lbv_neighbours(L, u, i) : 0.0f;
      out[i] = rhs ? (L.active[i] ? rhs[i] - au : 0.0f) : au;
    }
  });
}

// One V-cycle from e = 0 on level l: its e approximates A⁻¹ rhs.
void lbv_vcycle(std::vector<LbvLevel>& levels, size_t l, unsigned threads) {
  LbvLevel& L = levels[l];
  std::fill(L.e, L.e + L.size, 0.0f);
  if (l + 1 == levels.size()) {
    for (int k = 0; k < kLbvCoarsestSweeps; ++k) {
      lbv_sweep(L, 0, threads);
      lbv_sweep(L, 1, threads);
      lbv_sweep(L, 1, threads);
      lbv_sweep(L, 0, threads);
    }
    return;
  }
  for (int k = 0; k < kLbvSmoothing; ++k) {
    lbv_sweep(L, 0, threads);
    lbv_sweep(L, 1, threads);
  }
  lbv_apply(L, L.e, L.rhs, L.res, threads);
  // Restriction: the mean of a coarse cell's children's residuals.
  LbvLevel& C = levels[l + 1];
  lbv_rows(C, threads, [&](int64_t y, int64_t z) {
    for (int64_t x = 0; x < C.n[0]; ++x) {
      float sum = 0.0f;
      for (int64_t dz = 0; dz < 2; ++dz)
        for (int64_t dy = 0; dy < 2; ++dy)
          for (int64_t dx = 0; dx < 2; ++dx) {
            const int64_t fx = 2 * x + dx, fy = 2 * y + dy, fz = 2 * z + dz;
            if (fx < L.n[0] && fy < L.n[1] && fz < L.n[2]) sum += L.res[L.at(fx, fy, fz)];
          }
      C.rhs[C.at(x, y, z)] = 0.125f * sum;
    }
  });
  lbv_vcycle(levels, l + 1, threads);
  // Prolongation: each active cell takes its parent's correction.
  lbv_rows(L, threads, [&](int64_t y, int64_t z) {
    for (int64_t x = 0; x < L.n[0]; ++x) {
      const uint64_t i = L.at(x, y, z);
      if (L.active[i]) L.e[i] += C.e[C.at(x / 2, y / 2, z / 2)];
    }
  });
  for (int k = 0; k < kLbvSmoothing; ++k) {
    lbv_sweep(L, 1, threads);
    lbv_sweep(L, 0, threads);
  }
}

}  // namespace

struct Lbv::State {
  Geometry g;
  std::span<const float> field;
  LbvParams params;
  unsigned threads = 1;
  MaskBox box;
  std::vector<LbvLevel> levels;
  std::vector<float> x, r, z, p, q;  // level 0's layout
  double rz = 0.0, b_norm = 0.0, relative = 1.0;
  uint32_t done = 0;
  bool finished = false, taken = false;
  LocalField result;

  // z = M r: one V-cycle with r as level 0's right-hand side, q as its residual scratch.
  void precondition() {
    LbvLevel& L = levels[0];
    L.e = z.data();
    L.rhs = r.data();
    L.res = q.data();
    lbv_vcycle(levels, 0, threads);
  }

  void finish() {
    const LbvLevel& L = levels[0];
    result.field.assign(static_cast<size_t>(g.voxel_count()), 0.0f);
    result.mask.assign(static_cast<size_t>(g.voxel_count()), 0);
    for (int64_t zz = 0; zz < box.ext()[2]; ++zz)
      for (int64_t y = 0; y < box.ext()[1]; ++y)
        for (int64_t xx = 0; xx < box.ext()[0]; ++xx) {
          const uint64_t i = L.at(xx, y, zz);
          if (!L.active[i]) continue;
          const uint64_t vi = g.index(box.lo[0] + xx, box.lo[1] + y, box.lo[2] + zz);
          result.field[vi] = field[vi] - x[i];
          result.mask[vi] = 1;
        }
    for (auto* v : {&x, &r, &z, &p, &q}) std::vector<float>().swap(*v);
    levels.clear();
    finished = true;
  }
};

Lbv::Lbv(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask, const LbvParams& params,
         unsigned threads)
    : state_(std::make_unique<State>()) {
  bgi::check_inputs("lbv", g, field, mask);
  validate(params);
  State& s = *state_;
  s.g = g;
  s.field = field;
  s.params = params;
  s.threads = threads;
  // M: the mask less its peeled border (the mask itself when peel_mm is 0).
  std::vector<uint8_t> peeled;
  if (params.peel_mm > 0.0) {
    peeled = erode_mask_mm(g, mask, params.peel_mm, threads);
    if (std::none_of(peeled.begin(), peeled.end(), [](uint8_t v) { return v != 0; })) {
      bgi::invalid("lbv: peel_mm " + message_number(params.peel_mm) +
                   " mm erodes the mask to nothing: lower peel_mm or give a larger mask");
    }
    mask = peeled;
  }
  s.box = mask_box(g, mask);
  s.levels = lbv_shapes(s.box.ext(), g.voxel_mm);
  // The interior: mask voxels whose 6 face neighbours are inside the mask (beyond the volume's faces is outside).
  LbvLevel& L = s.levels[0];
  L.active.assign(static_cast<size_t>(L.size), 0);
  auto inside = [&](int64_t x, int64_t y, int64_t z) {
    const int64_t vx = s.box.lo[0] + x, vy = s.box.lo[1] + y, vz = s.box.lo[2] + z;
    if (vx < 0 || vy < 0 || vz < 0 || vx >= g.dims[0] || vy >= g.dims[1] || vz >= g.dims[2]) return false;
    return mask[g.index(vx, vy, vz)] != 0;
  };
  uint64_t interior = 0;
  for (int64_t z = 0; z < L.n[2]; ++z)
    for (int64_t y = 0; y < L.n[1]; ++y)
      for (int64_t x = 0; x < L.n[0]; ++x) {
        const bool in = inside(x, y, z) && inside(x - 1, y, z) && inside(x + 1, y, z) && inside(x, y - 1, z) &&
                        inside(x, y + 1, z) && inside(x, y, z - 1) && inside(x, y, z + 1);
        L.active[L.at(x, y, z)] = in ? 1 : 0;
        interior += in;
      }
  if (interior == 0) {
    bgi::invalid(std::string("lbv: no voxel of the mask") + (params.peel_mm > 0.0 ? " less its peeled border" : "") +
                 " has all 6 face neighbours inside it (the mask is one voxel thin everywhere): give a thicker mask" +
                 (params.peel_mm > 0.0 ? " or lower peel_mm" : ""));
  }
}

Lbv::~Lbv() = default;

uint32_t Lbv::total_steps() const { return state_->params.max_iterations; }
uint32_t Lbv::steps_done() const { return state_->done; }
bool Lbv::finished() const { return state_->finished; }
std::string Lbv::name() const { return "LBV"; }
double Lbv::relative_residual() const { return state_->relative; }

void Lbv::step() {
  if (finished()) throw Error(ErrorCode::Internal, "LBV: step() after the last step");
  State& s = *state_;
  const unsigned t = s.threads;
  LbvLevel& L0 = s.levels[0];
  const uint64_t n = L0.size;
  if (s.done == 0) {
    // Coarse levels: a cell is active when one of its children is.
    for (size_t l = 1; l < s.levels.size(); ++l) {
      LbvLevel& F = s.levels[l - 1];
      LbvLevel& C = s.levels[l];
      C.active.assign(static_cast<size_t>(C.size), 0);
      for (int64_t z = 0; z < F.n[2]; ++z)
        for (int64_t y = 0; y < F.n[1]; ++y)
          for (int64_t x = 0; x < F.n[0]; ++x)
            if (F.active[F.at(x, y, z)]) C.active[C.at(x / 2, y / 2, z / 2)] = 1;
      for (auto* v : {&C.e_own, &C.rhs_own, &C.res_own}) v->assign(static_cast<size_t>(C.size), 0.0f);
      C.e = C.e_own.data();
      C.rhs = C.rhs_own.data();
      C.res = C.res_own.data();
    }
    // b: the border's total field as the Dirichlet values, Σ over an interior voxel's border neighbours of w_a f.
    s.x.assign(static_cast<size_t>(n), 0.0f);
    s.r.assign(static_cast<size_t>(n), 0.0f);
    s.z.assign(static_cast<size_t>(n), 0.0f);
    s.q.assign(static_cast<size_t>(n), 0.0f);
    const Geometry& g = s.g;
    for (int64_t z = 0; z < L0.n[2]; ++z)
      for (int64_t y = 0; y < L0.n[1]; ++y)
        for (int64_t x = 0; x < L0.n[0]; ++x) {
          const uint64_t i = L0.at(x, y, z);
          if (!L0.active[i]) continue;
          const uint64_t vi = g.index(s.box.lo[0] + x, s.box.lo[1] + y, s.box.lo[2] + z);
          const int64_t step[3] = {1, L0.sx, L0.sxy};
          const int64_t vstep[3] = {1, g.dims[0], g.dims[0] * g.dims[1]};
          float b = 0.0f;
          for (int a = 0; a < 3; ++a)
            for (int sign : {-1, 1}) {
              if (L0.active[static_cast<uint64_t>(static_cast<int64_t>(i) + sign * step[a])]) continue;
              b += L0.wf[a] * s.field[static_cast<uint64_t>(static_cast<int64_t>(vi) + sign * vstep[a])];
            }
          s.r[i] = b;
        }
    s.b_norm = std::sqrt(dot(s.r, s.r, t));
    if (s.b_norm == 0.0) {  // a zero border: the background is 0
      s.relative = 0.0;
      s.done = 1;
      s.finish();
      return;
    }
    s.precondition();
    s.p = s.z;
    s.rz = dot(s.r, s.z, t);
  }
  // One preconditioned conjugate-gradient iteration on A x = b.
  lbv_apply(L0, s.p.data(), nullptr, s.q.data(), t);
  bool stop = !cg_move(s.x, s.r, s.p, s.q, s.rz, t);
  if (!stop) {
    s.relative = std::sqrt(dot(s.r, s.r, t)) / s.b_norm;
    stop = s.relative <= s.params.tolerance;
    if (!stop) {
      s.precondition();
      const double rz_new = dot(s.r, s.z, t);
      const float beta = static_cast<float>(rz_new / s.rz);
      s.rz = rz_new;
      cg_next_direction(s.p, s.z, beta, t);
    }
  }
  ++s.done;
  if (stop || s.done >= s.params.max_iterations) s.finish();
}

LocalField Lbv::take_result() {
  if (!finished() || state_->taken) throw Error(ErrorCode::Internal, "LBV: take_result() before the last step or twice");
  state_->taken = true;
  return std::move(state_->result);
}

LocalField lbv(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask, const LbvParams& params,
               unsigned threads, const std::function<void(uint64_t, uint64_t)>& progress,
               const std::atomic<bool>* cancel) {
  Lbv s(g, field, mask, params, threads);
  run_to_end(s, progress, cancel);
  return s.take_result();
}

uint64_t lbv_workspace_bytes(const Geometry& g, const LbvParams& params, unsigned threads) {
  validate_geometry(g);
  validate(params);
  const std::vector<LbvLevel> levels = lbv_shapes(g.dims, g.voxel_mm);
  // level 0: active, x, r, z, p, q; coarser levels: active, e, rhs, res; the result; the peeled mask while the
  // interior is found from it (and the erosion's scratch while it is made, before the levels exist)
  uint64_t bytes = levels[0].size * (1 + 5 * sizeof(float));
  for (size_t l = 1; l < levels.size(); ++l) bytes += levels[l].size * (1 + 3 * sizeof(float));
  const uint64_t peel = params.peel_mm > 0.0 ? g.voxel_count() : 0;
  const uint64_t erosion = params.peel_mm > 0.0 ? erosion_workspace_bytes(g.dims, threads) + g.voxel_count() : 0;
  return std::max(bytes + g.voxel_count() * (sizeof(float) + 1) + peel, erosion);
}

}  // namespace tessera
