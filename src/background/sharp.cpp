#include "tessera/background/sharp.h"

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

void validate(const SharpParams& p) {
  checked_option(background_options(), "sharp.radius", p.radius_mm);
  checked_option(background_options(), "sharp.threshold", p.threshold);
}

struct Sharp::State {
  Geometry g;
  std::span<const float> field;
  std::span<const uint8_t> mask;
  SharpParams params;
  unsigned threads = 1;
  MaskBox box;
  Dims3 padded{0, 0, 0};
  std::vector<uint8_t> eroded;  // padded layout
  std::vector<float> s;         // S in k-space
  std::vector<Complex> work;
  uint32_t done = 0;
  bool taken = false;
  LocalField result;
};

Sharp::Sharp(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask, const SharpParams& params,
             unsigned threads)
    : state_(std::make_unique<State>()) {
  bgi::check_inputs("sharp", g, field, mask);
  validate(params);
  State& s = *state_;
  s.g = g;
  s.field = field;
  s.mask = mask;
  s.params = params;
  s.threads = threads;
  bgi::SmvGrid grid = bgi::smv_grid("sharp: radius_mm", g, mask, params.radius_mm, threads);
  s.box = grid.box;
  s.padded = grid.padded;
  s.eroded = std::move(grid.eroded);
}

Sharp::~Sharp() = default;

uint32_t Sharp::total_steps() const { return 2; }
uint32_t Sharp::steps_done() const { return state_->done; }
bool Sharp::finished() const { return state_->done == 2; }
std::string Sharp::name() const { return "SHARP"; }

void Sharp::step() {
  if (finished()) throw Error(ErrorCode::Internal, "SHARP: step() after the last step");
  State& s = *state_;
  const uint64_t n = bgi::count(s.padded);
  const unsigned t = s.threads;
  if (s.done == 0) {
    // The high-passed masked field (1 − S)·F, kept on the eroded mask.
    s.s = bgi::smv_kernel_hat(s.g, s.padded, s.params.radius_mm, s.work, t);
    std::fill(s.work.begin(), s.work.end(), Complex(0.0f, 0.0f));
    bgi::for_each_box_voxel(s.g, s.box, s.padded, [&](uint64_t vi, uint64_t pi) {
      if (s.mask[vi]) s.work[pi] = Complex(s.field[vi], 0.0f);
    });
    fft3d_forward(s.work, s.padded, t);
    parallel_for(n, t, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) s.work[i] *= 1.0f - s.s[i];
    });
    fft3d_inverse(s.work, s.padded, t);
    parallel_for(n, t, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) s.work[i] = Complex(s.eroded[i] ? s.work[i].real() : 0.0f, 0.0f);
    });
  } else {
    // Deconvolution by 1 − S (TSVD), kept on the eroded mask.
    const float thr = static_cast<float>(s.params.threshold);
    fft3d_forward(s.work, s.padded, t);
    parallel_for(n, t, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) {
        const float hp = 1.0f - s.s[i];
        s.work[i] = std::fabs(hp) < thr ? Complex(0.0f, 0.0f) : s.work[i] / hp;
      }
    });
    fft3d_inverse(s.work, s.padded, t);
    s.result.field.assign(static_cast<size_t>(s.g.voxel_count()), 0.0f);
    s.result.mask.assign(static_cast<size_t>(s.g.voxel_count()), 0);
    bgi::for_each_box_voxel(s.g, s.box, s.padded, [&](uint64_t vi, uint64_t pi) {
      if (s.eroded[pi]) {
        s.result.field[vi] = s.work[pi].real();
        s.result.mask[vi] = 1;
      }
    });
    std::vector<Complex>().swap(s.work);
    std::vector<float>().swap(s.s);
    std::vector<uint8_t>().swap(s.eroded);
  }
  ++s.done;
}

LocalField Sharp::take_result() {
  if (!finished() || state_->taken) throw Error(ErrorCode::Internal, "SHARP: take_result() before the last step or twice");
  state_->taken = true;
  return std::move(state_->result);
}

LocalField sharp(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                 const SharpParams& params, unsigned threads, const std::function<void(uint64_t, uint64_t)>& progress,
                 const std::atomic<bool>* cancel) {
  Sharp s(g, field, mask, params, threads);
  run_to_end(s, progress, cancel);
  return s.take_result();
}

uint64_t sharp_workspace_bytes(const Geometry& g, const SharpParams& params, unsigned threads) {
  validate_geometry(g);
  validate(params);
  const Dims3 padded = bgi::smv_padded(g.dims, g.voxel_mm, params.radius_mm);
  const uint64_t n = bgi::count(padded), v = g.voxel_count();
  // distances and EDT scratch (construction), eroded mask, kernel, one complex volume, result, FFT scratch
  return erosion_workspace_bytes(g.dims, threads) + n * (1 + sizeof(float) + sizeof(Complex)) +
         v * (sizeof(float) + 1) +
         fft3d_workspace_bytes(padded, threads);
}

}  // namespace tessera
