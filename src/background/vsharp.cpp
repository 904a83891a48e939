#include "tessera/background/vsharp.h"

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

// ---------------------------------------------------------------------------------------------------------------
// V-SHARP
// ---------------------------------------------------------------------------------------------------------------

void validate(const VSharpParams& p) {
  checked_option(background_options(), "vsharp.maxRadius", p.max_radius_mm);
  checked_option(background_options(), "vsharp.minRadius", p.min_radius_voxels);
  // The radius step is no request option: its range is the method's own.
  if (!(p.step_voxels > 0.0 && p.step_voxels <= 64.0)) {
    bgi::invalid("vsharp: step_voxels must be in (0, 64] voxels (1 is customary), got " + message_number(p.step_voxels));
  }
  checked_option(background_options(), "vsharp.threshold", p.threshold);
}

std::vector<double> vsharp_radii_mm(const Vec3& voxel_mm, const VSharpParams& p) {
  validate(p);
  for (int a = 0; a < 3; ++a) {
    if (!(voxel_mm[a] > 0.0 && std::isfinite(voxel_mm[a]))) bgi::invalid("vsharp: voxel size must be positive and finite");
  }
  const double hi = p.max_radius_mm;
  const double lo = p.min_radius_voxels * bgi::max_edge(voxel_mm);
  const double step = p.step_voxels * bgi::max_edge(voxel_mm);
  if (hi <= lo) return {lo};  // coarse voxels: the smallest radius alone (SHARP)
  if (std::floor((hi - lo) / step) + 2.0 > static_cast<double>(kVSharpMaxRadii)) {
    bgi::invalid("vsharp: radii from " + message_number(hi) + " mm to " + message_number(lo) + " mm by " +
            message_number(step) + " mm make more than " + std::to_string(kVSharpMaxRadii) +
            " kernels: raise step_voxels or lower max_radius_mm");
  }
  std::vector<double> radii;
  for (double r = hi; r > lo + 1e-9 * lo; r -= step) radii.push_back(r);
  radii.push_back(lo);
  return radii;
}


namespace {

constexpr uint8_t kUnassigned = 255;

}  // namespace

struct VSharp::State {
  Geometry g;
  std::span<const float> field;
  std::span<const uint8_t> mask;
  VSharpParams params;
  unsigned threads = 1;
  std::vector<double> radii;
  MaskBox box;
  Dims3 padded{0, 0, 0};
  std::vector<uint8_t> assign;     // per padded voxel: index of the radius that filters it, kUnassigned elsewhere
  std::vector<Complex> field_hat;  // FFT of the masked field in the padded box
  std::vector<Complex> work;
  std::vector<float> inverse;      // TSVD inverse of 1 − S of the largest kernel
  std::vector<float> assembled;    // the high-passed field, each voxel from its radius
  uint32_t done = 0;
  bool taken = false;
  LocalField result;
};

VSharp::VSharp(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
               const VSharpParams& params, unsigned threads)
    : state_(std::make_unique<State>()) {
  bgi::check_inputs("vsharp", g, field, mask);
  State& s = *state_;
  s.g = g;
  s.field = field;
  s.mask = mask;
  s.params = params;
  s.threads = threads;
  s.radii = vsharp_radii_mm(g.voxel_mm, params);
  s.box = mask_box(g, mask);
  const std::vector<double> d = outside_distance2(g, mask, s.box, threads);
  double deepest = 0.0;
  for (double v : d) deepest = std::max(deepest, v);
  // Radii whose sphere fits around no voxel would filter nothing: the largest used is the largest that fits somewhere
  // (so the default works on a small head at coarse voxels).
  const auto fits = std::find_if(s.radii.begin(), s.radii.end(), [&](double r) { return deepest > r * r; });
  if (fits == s.radii.end()) {
    bgi::invalid("vsharp: the smallest radius " + message_number(s.radii.back()) + " mm (min_radius_voxels " +
            message_number(params.min_radius_voxels) + ") erodes the mask to nothing: its deepest voxel lies " +
            message_number(std::sqrt(deepest)) + " mm inside; lower min_radius_voxels or give a larger mask");
  }
  s.radii.erase(s.radii.begin(), fits);
  s.padded = bgi::smv_padded(s.box.ext(), g.voxel_mm, s.radii.front());
  {
    Geometry pg = g;
    pg.dims = s.padded;
    validate_geometry(pg);
  }
  const Dims3 e{s.box.ext()[0] + 2, s.box.ext()[1] + 2, s.box.ext()[2] + 2};
  s.assign.assign(static_cast<size_t>(bgi::count(s.padded)), kUnassigned);
  for (int64_t z = 0; z < s.box.ext()[2]; ++z)
    for (int64_t y = 0; y < s.box.ext()[1]; ++y)
      for (int64_t x = 0; x < s.box.ext()[0]; ++x) {
        const double dd = d[static_cast<size_t>((x + 1) + e[0] * ((y + 1) + e[1] * (z + 1)))];
        uint8_t k = kUnassigned;
        for (size_t i = 0; i < s.radii.size(); ++i) {
          if (dd > s.radii[i] * s.radii[i]) {
            k = static_cast<uint8_t>(i);
            break;
          }
        }
        s.assign[static_cast<size_t>(x + s.padded[0] * (y + s.padded[1] * z))] = k;
      }
}

VSharp::~VSharp() = default;

uint32_t VSharp::total_steps() const { return static_cast<uint32_t>(state_->radii.size()) + 1; }
uint32_t VSharp::steps_done() const { return state_->done; }
bool VSharp::finished() const { return state_->done == total_steps(); }
std::string VSharp::name() const { return state_->radii.size() == 1 ? "SHARP" : "V-SHARP"; }
const std::vector<double>& VSharp::radii_mm() const { return state_->radii; }

void VSharp::step() {
  if (finished()) throw Error(ErrorCode::Internal, name() + ": step() after the last step");
  State& s = *state_;
  const Geometry& g = s.g;
  const uint64_t n = bgi::count(s.padded);
  const unsigned t = s.threads;
  if (s.done == 0) {
    s.field_hat.assign(static_cast<size_t>(n), Complex(0.0f, 0.0f));
    bgi::for_each_box_voxel(g, s.box, s.padded, [&](uint64_t vi, uint64_t pi) {
      if (s.mask[vi]) s.field_hat[pi] = Complex(s.field[vi], 0.0f);
    });
    fft3d_forward(s.field_hat, s.padded, t);
    s.work.resize(static_cast<size_t>(n));
    s.assembled.assign(static_cast<size_t>(n), 0.0f);
  }
  if (s.done < s.radii.size()) {
    // One radius: its SMV kernel S in k-space, the high-passed field (1 − S)·F back in image space, kept where this
    // radius is the voxel's largest whose sphere fits in the mask.
    const uint32_t k = s.done;
    const double r = s.radii[k];
    const double r2 = r * r;
    int64_t reach[3];
    for (int a = 0; a < 3; ++a) reach[a] = static_cast<int64_t>(std::floor(r / g.voxel_mm[a]));
    std::fill(s.work.begin(), s.work.end(), Complex(0.0f, 0.0f));
    uint64_t voxels = 0;
    for (int64_t dz = -reach[2]; dz <= reach[2]; ++dz)
      for (int64_t dy = -reach[1]; dy <= reach[1]; ++dy)
        for (int64_t dx = -reach[0]; dx <= reach[0]; ++dx) {
          const double px = static_cast<double>(dx) * g.voxel_mm[0], py = static_cast<double>(dy) * g.voxel_mm[1],
                       pz = static_cast<double>(dz) * g.voxel_mm[2];
          if (px * px + py * py + pz * pz > r2) continue;
          const int64_t ix = (dx + s.padded[0]) % s.padded[0], iy = (dy + s.padded[1]) % s.padded[1],
                        iz = (dz + s.padded[2]) % s.padded[2];
          s.work[static_cast<size_t>(ix + s.padded[0] * (iy + s.padded[1] * iz))] = Complex(1.0f, 0.0f);
          ++voxels;
        }
    fft3d_forward(s.work, s.padded, t);
    const float scale = 1.0f / static_cast<float>(voxels);
    const float thr = static_cast<float>(s.params.threshold);
    if (k == 0) s.inverse.resize(static_cast<size_t>(n));
    parallel_for(n, t, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) {
        const float hp = 1.0f - s.work[i].real() * scale;  // 1 − S (S is real: the sphere is symmetric)
        if (k == 0) s.inverse[i] = std::fabs(hp) < thr ? 0.0f : 1.0f / hp;
        s.work[i] = s.field_hat[i] * hp;
      }
    });
    fft3d_inverse(s.work, s.padded, t);
    parallel_for(n, t, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i)
        if (s.assign[i] == k) s.assembled[i] = s.work[i].real();
    });
    if (k + 1 == s.radii.size()) std::vector<Complex>().swap(s.field_hat);
  } else {
    // Deconvolution by the largest kernel (TSVD), kept on the mask eroded by the smallest radius.
    bgi::load_real(s.work, s.assembled, t);
    std::vector<float>().swap(s.assembled);
    fft3d_forward(s.work, s.padded, t);
    parallel_for(n, t, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) s.work[i] *= s.inverse[i];
    });
    fft3d_inverse(s.work, s.padded, t);
    s.result.field.assign(static_cast<size_t>(g.voxel_count()), 0.0f);
    s.result.mask.assign(static_cast<size_t>(g.voxel_count()), 0);
    bgi::for_each_box_voxel(g, s.box, s.padded, [&](uint64_t vi, uint64_t pi) {
      if (s.assign[pi] != kUnassigned) {
        s.result.field[vi] = s.work[pi].real();
        s.result.mask[vi] = 1;
      }
    });
    std::vector<Complex>().swap(s.work);
    std::vector<float>().swap(s.inverse);
    std::vector<uint8_t>().swap(s.assign);
  }
  ++s.done;
}

LocalField VSharp::take_result() {
  if (!finished() || state_->taken) {
    throw Error(ErrorCode::Internal, name() + ": take_result() before the last step or twice");
  }
  state_->taken = true;
  return std::move(state_->result);
}

LocalField vsharp(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                  const VSharpParams& params, unsigned threads, const std::function<void(uint64_t, uint64_t)>& progress,
                  const std::atomic<bool>* cancel) {
  VSharp v(g, field, mask, params, threads);
  run_to_end(v, progress, cancel);
  return v.take_result();
}

uint64_t vsharp_workspace_bytes(const Geometry& g, const VSharpParams& params, unsigned threads) {
  validate_geometry(g);
  const std::vector<double> radii = vsharp_radii_mm(g.voxel_mm, params);
  const Dims3 padded = bgi::smv_padded(g.dims, g.voxel_mm, radii.front());
  const uint64_t n = bgi::count(padded), v = g.voxel_count();
  // The largest of: the construction (distances and EDT scratch, the assignment); the radii (assignment, two complex
  // volumes, inverse kernel, assembled field); the deconvolution (assignment, one complex volume, inverse kernel, the
  // result's field and mask: the field's transform and the assembled field are freed by then); FFT scratch.
  const uint64_t construction = erosion_workspace_bytes(g.dims, threads) + n;
  const uint64_t per_radius = n * (1 + 2 * sizeof(Complex) + 2 * sizeof(float));
  const uint64_t deconvolution = n * (1 + sizeof(Complex) + sizeof(float)) + v * (sizeof(float) + 1);
  return std::max({construction, per_radius, deconvolution}) + fft3d_workspace_bytes(padded, threads);
}

}  // namespace tessera
