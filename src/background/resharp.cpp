#include "tessera/background/resharp.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "background/support.h"
#include "common/message_number.h"
#include "common/conjugate_gradient.h"
#include "common/parallel.h"
#include "tessera/common/error.h"
#include "tessera/background/options.h"
#include "tessera/background/vsharp.h"
#include "tessera/common/fft.h"

namespace tessera {

namespace bgi = background_internal;

void validate(const ResharpParams& p) {
  checked_option(background_options(), "resharp.radius", p.radius_mm);
  checked_option(background_options(), "resharp.lambda", p.lambda);
  checked_option(background_options(), "resharp.maxIterations", p.max_iterations);
  checked_option(background_options(), "resharp.tolerance", p.tolerance);
  checked_option(background_options(), "resharp.minKeptShare", p.min_kept_share);
}

struct Resharp::State {
  Geometry g;
  std::span<const float> field;
  std::span<const uint8_t> mask;
  ResharpParams params;
  unsigned threads = 1;
  MaskBox box;
  Dims3 padded{0, 0, 0};
  std::vector<uint8_t> eroded;  // M, padded layout
  std::vector<float> hp;        // C = 1 − S in k-space
  std::vector<float> x, r, p, q;
  std::vector<Complex> c;
  double rr = 0.0, b_norm = 0.0, relative = 1.0;
  uint32_t done = 0;
  bool finished = false, taken = false;
  LocalField result;

  // out = C M C in, elementwise loads and stores (C real and symmetric: C^H = C).
  template <typename Load, typename Store>
  void apply_cmc(Load&& load, Store&& store) {
    const uint64_t n = c.size();
    parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) c[i] = Complex(load(i), 0.0f);
    });
    fft3d_forward(c, padded, threads);
    parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) c[i] *= hp[i];
    });
    fft3d_inverse(c, padded, threads);
    parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) c[i] = Complex(eroded[i] ? c[i].real() : 0.0f, 0.0f);
    });
    fft3d_forward(c, padded, threads);
    parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) c[i] *= hp[i];
    });
    fft3d_inverse(c, padded, threads);
    parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) store(i, c[i].real());
    });
  }

  void finish() {
    result.field.assign(static_cast<size_t>(g.voxel_count()), 0.0f);
    result.mask.assign(static_cast<size_t>(g.voxel_count()), 0);
    bgi::for_each_box_voxel(g, box, padded, [&](uint64_t vi, uint64_t pi) {
      if (eroded[pi]) {
        result.field[vi] = x[pi];
        result.mask[vi] = 1;
      }
    });
    for (auto* v : {&x, &r, &p, &q, &hp}) std::vector<float>().swap(*v);
    std::vector<Complex>().swap(c);
    std::vector<uint8_t>().swap(eroded);
    finished = true;
  }
};

Resharp::Resharp(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                 const ResharpParams& params, unsigned threads)
    : state_(std::make_unique<State>()) {
  bgi::check_inputs("resharp", g, field, mask);
  validate(params);
  State& s = *state_;
  s.g = g;
  s.field = field;
  s.mask = mask;
  s.params = params;
  s.threads = threads;
  const bgi::SmvAdapt adapt{params.min_kept_share, vsharp_defaults::kMinRadiusVoxels * bgi::max_edge(g.voxel_mm),
                            0.5 * bgi::min_edge(g.voxel_mm)};
  bgi::SmvGrid grid = bgi::smv_grid("resharp: radius_mm", g, mask, params.radius_mm, threads, adapt);
  s.params.radius_mm = grid.radius_mm;
  s.box = grid.box;
  s.padded = grid.padded;
  s.eroded = std::move(grid.eroded);
}

Resharp::~Resharp() = default;

uint32_t Resharp::total_steps() const { return state_->params.max_iterations; }
uint32_t Resharp::steps_done() const { return state_->done; }
bool Resharp::finished() const { return state_->finished; }
std::string Resharp::name() const { return "RESHARP"; }
double Resharp::relative_residual() const { return state_->relative; }
double Resharp::radius_mm() const { return state_->params.radius_mm; }

void Resharp::step() {
  if (finished()) throw Error(ErrorCode::Internal, "RESHARP: step() after the last step");
  State& s = *state_;
  const uint64_t n = bgi::count(s.padded);
  const unsigned t = s.threads;
  if (s.done == 0) {
    s.hp = bgi::smv_kernel_hat(s.g, s.padded, s.params.radius_mm, s.c, t);
    parallel_for(n, t, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) s.hp[i] = 1.0f - s.hp[i];
    });
    s.x.assign(static_cast<size_t>(n), 0.0f);
    s.q.assign(static_cast<size_t>(n), 0.0f);
    s.r.resize(static_cast<size_t>(n));
    // b = C M C f, the residual of x = 0 (f: the masked field).
    bgi::for_each_box_voxel(s.g, s.box, s.padded, [&](uint64_t vi, uint64_t pi) {
      if (s.mask[vi]) s.q[pi] = s.field[vi];
    });
    s.apply_cmc([&](uint64_t i) { return s.q[i]; }, [&](uint64_t i, float v) { s.r[i] = v; });
    s.p = s.r;
    s.rr = dot(s.r, s.r, t);
    s.b_norm = std::sqrt(s.rr);
    if (s.b_norm == 0.0) {  // no high-passed field inside the eroded mask: the local field is 0
      s.relative = 0.0;
      s.done = 1;
      s.finish();
      return;
    }
  }
  // One conjugate-gradient iteration on (C M C + λ) x = b.
  const float lambda = static_cast<float>(s.params.lambda);
  s.apply_cmc([&](uint64_t i) { return s.p[i]; }, [&](uint64_t i, float v) { s.q[i] = v + lambda * s.p[i]; });
  const bool stop = plain_cg_iteration(s.x, s.r, s.p, s.q, s.rr, t, [&](double rr_new) {
    s.relative = std::sqrt(rr_new) / s.b_norm;
    return s.relative < s.params.tolerance;
  });
  ++s.done;
  if (stop || s.done >= s.params.max_iterations) s.finish();
}

LocalField Resharp::take_result() {
  if (!finished() || state_->taken) throw Error(ErrorCode::Internal, "RESHARP: take_result() before the last step or twice");
  state_->taken = true;
  return std::move(state_->result);
}

LocalField resharp(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                   const ResharpParams& params, unsigned threads, const std::function<void(uint64_t, uint64_t)>& progress,
                   const std::atomic<bool>* cancel) {
  Resharp s(g, field, mask, params, threads);
  run_to_end(s, progress, cancel);
  return s.take_result();
}

uint64_t resharp_workspace_bytes(const Geometry& g, const ResharpParams& params, unsigned threads) {
  validate_geometry(g);
  validate(params);
  const Dims3 padded = bgi::smv_padded(g.dims, g.voxel_mm, params.radius_mm);
  const uint64_t n = bgi::count(padded), v = g.voxel_count();
  // distances and EDT scratch (construction), M, C, x, r, p, q, one complex volume, result, FFT scratch
  return erosion_workspace_bytes(g.dims, threads) + n * (1 + 5 * sizeof(float) + sizeof(Complex)) +
         v * (sizeof(float) + 1) + fft3d_workspace_bytes(padded, threads);
}

}  // namespace tessera
