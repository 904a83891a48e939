#include "tessera/background/ismv.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "background/support.h"
#include "common/message_number.h"
#include "common/parallel.h"
#include "tessera/common/error.h"
#include "tessera/background/options.h"
#include "tessera/common/fft.h"

namespace tessera {

namespace bgi = background_internal;

void validate(const IsmvParams& p) {
  checked_option(background_options(), "ismv.radius", p.radius_mm);
  checked_option(background_options(), "ismv.tolerance", p.tolerance);
  checked_option(background_options(), "ismv.maxIterations", p.max_iterations);
}

struct Ismv::State {
  Geometry g;
  std::span<const float> field;
  std::span<const uint8_t> mask;
  IsmvParams params;
  unsigned threads = 1;
  MaskBox box;
  Dims3 padded{0, 0, 0};
  std::vector<uint8_t> eroded;  // E, padded layout
  std::vector<float> s;         // S in k-space
  std::vector<float> rim;       // R·f: the total field on the rim, 0 elsewhere
  std::vector<float> b;         // the background estimate
  std::vector<Complex> c;
  double e_norm = 0.0, relative = 1.0;
  uint32_t done = 0;
  bool finished = false, taken = false;
  LocalField result;

  void finish() {
    result.field.assign(static_cast<size_t>(g.voxel_count()), 0.0f);
    result.mask.assign(static_cast<size_t>(g.voxel_count()), 0);
    bgi::for_each_box_voxel(g, box, padded, [&](uint64_t vi, uint64_t pi) {
      if (eroded[pi]) {
        result.field[vi] = field[vi] - b[pi];
        result.mask[vi] = 1;
      }
    });
    for (auto* v : {&s, &rim, &b}) std::vector<float>().swap(*v);
    std::vector<Complex>().swap(c);
    std::vector<uint8_t>().swap(eroded);
    finished = true;
  }
};

Ismv::Ismv(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask, const IsmvParams& params,
           unsigned threads)
    : state_(std::make_unique<State>()) {
  bgi::check_inputs("ismv", g, field, mask);
  validate(params);
  State& s = *state_;
  s.g = g;
  s.field = field;
  s.mask = mask;
  s.params = params;
  s.threads = threads;
  bgi::SmvGrid grid = bgi::smv_grid("ismv: radius_mm", g, mask, params.radius_mm, threads);
  s.box = grid.box;
  s.padded = grid.padded;
  s.eroded = std::move(grid.eroded);
}

Ismv::~Ismv() = default;

uint32_t Ismv::total_steps() const { return state_->params.max_iterations; }
uint32_t Ismv::steps_done() const { return state_->done; }
bool Ismv::finished() const { return state_->finished; }
std::string Ismv::name() const { return "iSMV"; }
double Ismv::relative_change() const { return state_->relative; }

void Ismv::step() {
  if (finished()) throw Error(ErrorCode::Internal, "iSMV: step() after the last step");
  State& s = *state_;
  const uint64_t n = bgi::count(s.padded);
  const unsigned t = s.threads;
  if (s.done == 0) {
    s.s = bgi::smv_kernel_hat(s.g, s.padded, s.params.radius_mm, s.c, t);
    s.b.assign(static_cast<size_t>(n), 0.0f);
    s.rim.assign(static_cast<size_t>(n), 0.0f);
    bgi::for_each_box_voxel(s.g, s.box, s.padded, [&](uint64_t vi, uint64_t pi) {
      if (!s.mask[vi]) return;
      s.b[pi] = s.field[vi];
      if (!s.eroded[pi]) s.rim[pi] = s.field[vi];
    });
    s.e_norm = std::sqrt(parallel_sum(n, t, [&](uint64_t i) {
      return s.eroded[i] ? static_cast<double>(s.b[i]) * static_cast<double>(s.b[i]) : 0.0;
    }));
    if (s.e_norm == 0.0) {  // no field inside the eroded mask: the background there is the field itself
      s.relative = 0.0;
      s.done = 1;
      s.finish();
      return;
    }
  }
  // b ← E·(S∗b) + R·f
  bgi::load_real(s.c, s.b, t);
  fft3d_forward(s.c, s.padded, t);
  parallel_for(n, t, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) s.c[i] *= s.s[i];
  });
  fft3d_inverse(s.c, s.padded, t);
  const double change2 = parallel_sum(n, t, [&](uint64_t i) {
    const float next = s.eroded[i] ? s.c[i].real() : s.rim[i];
    const double d = static_cast<double>(next) - static_cast<double>(s.b[i]);
    return d * d;
  });
  parallel_for(n, t, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) s.b[i] = s.eroded[i] ? s.c[i].real() : s.rim[i];
  });
  s.relative = std::sqrt(change2) / s.e_norm;
  ++s.done;
  if (s.relative <= s.params.tolerance || s.done >= s.params.max_iterations) s.finish();
}

LocalField Ismv::take_result() {
  if (!finished() || state_->taken) throw Error(ErrorCode::Internal, "iSMV: take_result() before the last step or twice");
  state_->taken = true;
  return std::move(state_->result);
}

LocalField ismv(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask, const IsmvParams& params,
                unsigned threads, const std::function<void(uint64_t, uint64_t)>& progress,
                const std::atomic<bool>* cancel) {
  Ismv s(g, field, mask, params, threads);
  run_to_end(s, progress, cancel);
  return s.take_result();
}

uint64_t ismv_workspace_bytes(const Geometry& g, const IsmvParams& params, unsigned threads) {
  validate_geometry(g);
  validate(params);
  const Dims3 padded = bgi::smv_padded(g.dims, g.voxel_mm, params.radius_mm);
  const uint64_t n = bgi::count(padded), v = g.voxel_count();
  // distances and EDT scratch (construction), E, S, R·f, b, one complex volume, result, FFT scratch
  return erosion_workspace_bytes(g.dims, threads) + n * (1 + 3 * sizeof(float) + sizeof(Complex)) +
         v * (sizeof(float) + 1) + fft3d_workspace_bytes(padded, threads);
}

}  // namespace tessera
