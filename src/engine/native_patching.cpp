#include "tessera/engine/native_patching.h"

#include "engine/native_patch_run.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <string>

#include "tessera/common/error.h"

namespace tessera {

namespace {

// 1D blend weight of output index j of patch k (of K) with `overlap` voxels shared with each neighbour.
double blend_weight(int64_t j, int64_t k, int64_t patches, int64_t output, int64_t overlap) {
  if (overlap <= 0) return 1.0;
  if (k > 0 && j < overlap) return (static_cast<double>(j) + 0.5) / static_cast<double>(overlap);
  if (k < patches - 1 && j >= output - overlap) {
    return (static_cast<double>(output - j) - 0.5) / static_cast<double>(overlap);
  }
  return 1.0;
}

void validate_inputs(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask) {
  validate_geometry(g);
  validate_volume_sizes(g, field.size(), mask.size());
  validate_finite(g, field);
}

}  // namespace

namespace {

uint64_t patch_total(const Dims3& dims, NativePatchRun::Model model) {
  return model == NativePatchRun::Model::AutoQsm ? autoqsm_patch_count(dims) : qsmgan_patch_count(dims);
}

const Geometry& checked_inputs(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask) {
  validate_inputs(g, field, mask);
  return g;
}

}  // namespace

NativePatchRun::NativePatchRun(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask, Model model,
                               std::span<float> chi, uint32_t in_flight, uint64_t bytes_per_patch)
    : PatchSteps(patch_total(checked_inputs(g, field, mask).dims, model), std::max<uint32_t>(1, in_flight)),
      geometry_(g),
      mask_(mask),
      chi_(chi),
      bytes_per_patch_(bytes_per_patch),
      t0_(std::chrono::steady_clock::now()) {
  if (chi.size() != g.voxel_count()) {
    throw Error(ErrorCode::InvalidArgument, "output buffer holds " + std::to_string(chi.size()) + " values but the volume has " +
                                                std::to_string(g.voxel_count()) + " voxels");
  }
  if (model == Model::AutoQsm) {
    using namespace autoqsm_constants;
    name_ = "autoqsm";
    in_ = input, out_ = output, stride_ = stride;
    input_.assign(field.begin(), field.end());
    post_ = [](float v) { return static_cast<double>(v); };
  } else {
    using namespace qsmgan_constants;
    name_ = "qsmgan";
    in_ = input, out_ = output, stride_ = stride;
    input_.resize(field.size());
    const float scale = static_cast<float>(input_scale);
    for (size_t i = 0; i < input_.size(); ++i) input_[i] = scale * field[i];
    post_ = [](float v) {
      const double c = std::clamp(static_cast<double>(v), -clip, clip);
      return std::atanh(c) / output_divisor;
    };
  }
  grid_ = native_patch_grid(g.dims, in_, out_, stride_);
  const uint64_t ie = static_cast<uint64_t>(in_), oe = static_cast<uint64_t>(out_);
  input_shape_ = TensorShape{1, {ie, ie, ie}};
  output_shape_ = TensorShape{1, {oe, oe, oe}};
  acc_.assign(static_cast<size_t>(g.voxel_count()), 0.0);
}

std::string NativePatchRun::where(uint64_t job) const {
  return std::string(name_) + ": network (patch " + std::to_string(job + 1) + " of " + std::to_string(total()) + ")";
}

std::optional<PatchSteps::Patch> NativePatchRun::next(std::span<float> input) {
  if (input.size() != input_shape_.size()) {
    throw Error(ErrorCode::InvalidArgument, "the patch buffer holds " + std::to_string(input.size()) + " values, expected " +
                                                std::to_string(input_shape_.size()));
  }
  const std::optional<uint64_t> job = scheduler_.try_acquire();
  if (!job) return std::nullopt;
  const Geometry& g = geometry_;
  const int64_t kx = static_cast<int64_t>(*job) % grid_[0];
  const int64_t ky = static_cast<int64_t>(*job) / grid_[0] % grid_[1];
  const int64_t kz = static_cast<int64_t>(*job) / (grid_[0] * grid_[1]);
  const int64_t offset = (in_ - out_) / 2;  // the output is the centre of the input patch
  std::vector<int64_t> cx(in_), cy(in_), cz(in_);
  // Input: clamped coordinates (edge-replicate padding), network layout (z fastest).
  for (int64_t j = 0; j < in_; ++j) {
    cx[j] = std::clamp<int64_t>(kx * stride_ - offset + j, 0, g.dims[0] - 1);
    cy[j] = std::clamp<int64_t>(ky * stride_ - offset + j, 0, g.dims[1] - 1);
    cz[j] = std::clamp<int64_t>(kz * stride_ - offset + j, 0, g.dims[2] - 1);
  }
  size_t p = 0;
  for (int64_t i = 0; i < in_; ++i)
    for (int64_t j = 0; j < in_; ++j)
      for (int64_t k = 0; k < in_; ++k) input[p++] = input_[g.index(cx[i], cy[j], cz[k])];
  return Patch{*job, 0};
}

void NativePatchRun::finish(uint64_t job, std::span<const float> output) {
  try {
    check_output_size(output.size(), output_shape_, where(job));
    waiting_.emplace(job, std::vector<float>(output.begin(), output.end()));
    // Blend in patch order; a patch is done (its slot free) once blended.
    for (auto it = waiting_.find(blended_); it != waiting_.end(); it = waiting_.find(blended_)) {
      blend(blended_, it->second);
      waiting_.erase(it);
      scheduler_.complete(blended_++);
    }
  } catch (...) {
    scheduler_.fail(job, std::current_exception());
  }
}

void NativePatchRun::fail(uint64_t job, ErrorCode code, const std::string& message) {
  scheduler_.fail(job, std::make_exception_ptr(Error(code, where(job) + ": " + message)));
}

void NativePatchRun::blend(uint64_t job, std::span<const float> result) {
  const Geometry& g = geometry_;
  const int64_t kx = static_cast<int64_t>(job) % grid_[0];
  const int64_t ky = static_cast<int64_t>(job) / grid_[0] % grid_[1];
  const int64_t kz = static_cast<int64_t>(job) / (grid_[0] * grid_[1]);
  const int64_t overlap = out_ - stride_;
  const int64_t nx = g.dims[0], ny = g.dims[1], nz = g.dims[2];
  std::vector<double> wx(out_), wy(out_), wz(out_);
  for (int64_t j = 0; j < out_; ++j) {
    wx[j] = blend_weight(j, kx, grid_[0], out_, overlap);
    wy[j] = blend_weight(j, ky, grid_[1], out_, overlap);
    wz[j] = blend_weight(j, kz, grid_[2], out_, overlap);
  }
  // Output voxel (i, j, k) of the patch is volume voxel (kx*stride + i, ...); outside the volume it is dropped.
  for (int64_t i = 0; i < out_; ++i) {
    const int64_t x = kx * stride_ + i;
    if (x >= nx) break;
    for (int64_t j = 0; j < out_; ++j) {
      const int64_t y = ky * stride_ + j;
      if (y >= ny) break;
      const double wxy = wx[i] * wy[j];
      const float* src = result.data() + (i * out_ + j) * out_;
      for (int64_t k = 0; k < out_; ++k) {
        const int64_t z = kz * stride_ + k;
        if (z >= nz) break;
        acc_[g.index(x, y, z)] += wxy * wz[k] * post_(src[k]);
      }
    }
  }
}

RunReport NativePatchRun::report() const {
  check_succeeded("patches");
  for (size_t i = 0; i < acc_.size(); ++i) chi_[i] = mask_[i] ? static_cast<float>(acc_[i]) : 0.0f;
  RunReport r;
  r.tiles_total = r.tiles_run = total();  // the network's own patches
  r.concurrency = scheduler_.concurrency();
  r.max_in_flight = scheduler_.max_in_flight();
  r.patch_edge = static_cast<uint64_t>(in_);
  r.bytes_per_tile = bytes_per_patch_;
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  return r;
}

namespace {

// Runs the native patching sequentially on net (the runner's errors pass through, naming the patch).
std::vector<float> run_sequentially(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                                    NativePatchRun::Model model, PatchRunner& net) {
  std::vector<float> chi(field.size());
  NativePatchRun run(g, field, mask, model, chi);
  std::vector<float> patch(run.input_shape().size());
  while (const auto p = run.next(patch)) {
    run.finish(p->job, run_checked(net, patch, run.input_shape(), run.output_shape(), run.where(p->job)));
  }
  run.report();
  return chi;
}

}  // namespace

std::array<int64_t, 3> native_patch_grid(const Dims3& dims, int64_t input, int64_t output, int64_t stride) {
  if (!(stride >= 1 && stride <= output && output <= input)) {
    throw Error(ErrorCode::InvalidArgument, "native_patch_grid: need 1 <= stride <= output <= input, got stride " +
                                                std::to_string(stride) + ", output " + std::to_string(output) +
                                                ", input " + std::to_string(input));
  }
  std::array<int64_t, 3> grid{};
  for (int a = 0; a < 3; ++a) {
    if (dims[a] <= 0) {
      throw Error(ErrorCode::InvalidArgument,
                  "native_patch_grid: dims " + dims_text(dims) + " are invalid: every dimension must be at least 1");
    }
    grid[a] = dims[a] <= output ? 1 : (dims[a] - output + stride - 1) / stride + 1;
  }
  return grid;
}

uint64_t autoqsm_patch_count(const Dims3& dims) {
  using namespace autoqsm_constants;
  const auto g = native_patch_grid(dims, input, output, stride);
  return static_cast<uint64_t>(g[0]) * static_cast<uint64_t>(g[1]) * static_cast<uint64_t>(g[2]);
}

uint64_t qsmgan_patch_count(const Dims3& dims) {
  using namespace qsmgan_constants;
  const auto g = native_patch_grid(dims, input, output, stride);
  return static_cast<uint64_t>(g[0]) * static_cast<uint64_t>(g[1]) * static_cast<uint64_t>(g[2]);
}

std::vector<float> autoqsm_invert(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                                  PatchRunner& net) {
  return run_sequentially(g, field, mask, NativePatchRun::Model::AutoQsm, net);
}

std::vector<float> qsmgan_invert(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                                 PatchRunner& net) {
  return run_sequentially(g, field, mask, NativePatchRun::Model::Qsmgan, net);
}

}  // namespace tessera
