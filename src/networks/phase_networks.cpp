#include "tessera/networks/phase_networks.h"

#include "networks/network_tasks.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "tessera/common/b0_align.h"
#include "tessera/common/budget.h"
#include "tessera/common/error.h"
#include "tessera/common/morphology.h"
#include "tessera/common/schema.h"
#include "tessera/engine/tiling.h"

namespace tessera {

namespace {

const OptionSpec kPhaseNetworkOptions[] = {
    {"erodeRadius", "voxels", defaults::kErodeRadius, "", 0, 255, false, true, "mask erosion before a phase network (the reference's 3)"},
    {"phaseSign", "", defaults::kPhaseSign, "", -1, 1, false, true, "+1 or -1: multiplies the phase (the reference negates it)"},
    {"b0Align", "", 0, "auto", 0, 0, false, false,
     "(quote_constants)",
     "auto|on|off"},
};

}  // namespace

std::span<const OptionSpec> phase_network_options() { return kPhaseNetworkOptions; }

namespace {

using Clock = std::chrono::steady_clock;

bool takes_b0_direction(const ModelSpec& m) { return takes_input(m, InputRole::B0Dir); }

void require_phase_model(const ModelSpec& m) {
  if (m.algorithm != Algorithm::PhaseNetwork || m.inputs.empty() || m.inputs.front() != InputRole::Phase) {
    throw Error(ErrorCode::InvalidArgument, "model '" + std::string(m.id) + "' does not reconstruct from wrapped phase");
  }
}

// Maps a voxel of the crop (host layout of the crop geometry) to its voxel in the caller's volume.
struct CropMap {
  const Geometry& source;
  const PhaseLayout& layout;
  Geometry crop;

  CropMap(const Geometry& g, const PhaseLayout& l) : source(g), layout(l) {
    crop.dims = l.crop_dims;
    crop.voxel_mm = l.working.voxel_mm;
    crop.b0_dir = l.b0_unit;
  }
  uint64_t operator()(int64_t i, int64_t j, int64_t k) const {
    const int64_t x = layout.crop_lo[0] + i, y = layout.crop_lo[1] + j, z = layout.crop_lo[2] + k;
    return layout.swap_yz ? source.index(x, z, y) : source.index(x, y, z);
  }
  template <class F>
  void for_each(F&& f) const {
    uint64_t c = 0;
    for (int64_t k = 0; k < crop.dims[2]; ++k)
      for (int64_t j = 0; j < crop.dims[1]; ++j)
        for (int64_t i = 0; i < crop.dims[0]; ++i) f(c++, (*this)(i, j, k));
  }
};

// The module heap of a run: the caller's volumes, the crop's working buffers and the network tensors
// (three volume inputs and the output, each held twice at the hand-over).
uint64_t phase_module_bytes(const Geometry& g, const PhaseLayout& l, uint32_t echoes) {
  const uint64_t n = g.voxel_count();
  const uint64_t crop = static_cast<uint64_t>(l.crop_dims[0]) * l.crop_dims[1] * l.crop_dims[2];
  const uint64_t padded = saturating_mul(l.padded[0], saturating_mul(l.padded[1], l.padded[2]));
  uint64_t need = WASM_MODULE_BASELINE_BYTES;
  need = saturating_add(need, saturating_mul(n, saturating_add(saturating_mul(echoes, echoes > 1 ? 8 : 4), 1 + 1 + 4)));
  need = saturating_add(need, saturating_mul(crop, 4 + 4 + 4 + 4 + 1));
  need = saturating_add(need, saturating_mul(padded, 4 * 4 * 2));
  return wasm_module_heap_bytes(need);
}

void validate_settings(const PhaseSettings& s) {
  if (s.te_s.empty()) throw Error(ErrorCode::InvalidArgument, "give the echo time (te, in seconds) of every echo");
  for (double te : s.te_s) checked_option(acquisition_options(), "te", te);
  checked_option(acquisition_options(), "b0", s.b0_tesla);
  checked_option(phase_network_options(), "phaseSign", s.phase_sign);
  checked_option(phase_network_options(), "erodeRadius", s.erode_radius);
}

}  // namespace

PhaseLayout phase_layout(const ModelSpec& m, const Geometry& g, std::span<const uint8_t> eroded) {
  require_phase_model(m);
  validate_geometry(g);
  PhaseLayout l;
  const double norm = std::sqrt(g.b0_dir[0] * g.b0_dir[0] + g.b0_dir[1] * g.b0_dir[1] + g.b0_dir[2] * g.b0_dir[2]);
  Vec3 b{g.b0_dir[0] / norm, g.b0_dir[1] / norm, g.b0_dir[2] / norm};
  l.swap_yz = takes_b0_direction(m) && std::abs(b[1]) > std::abs(b[2]);
  l.working = g;
  if (l.swap_yz) {
    std::swap(l.working.dims[1], l.working.dims[2]);
    std::swap(l.working.voxel_mm[1], l.working.voxel_mm[2]);
    std::swap(b[1], b[2]);
    l.working.b0_dir = b;
  }
  l.b0_unit = b;
  const MaskBox box = mask_box(g, eroded);
  Dims3 lo = box.lo, hi = box.hi;
  if (box.empty()) {
    throw Error(ErrorCode::InvalidArgument, "the brain mask is empty after erosion: give a mask of the brain (or a smaller "
                                            "erode radius)");
  }
  if (l.swap_yz) {
    std::swap(lo[1], lo[2]);
    std::swap(hi[1], hi[2]);
  }
  const int64_t margin = m.crop_margin;
  const int64_t d = std::max<int64_t>(1, m.divisor);
  uint64_t voxels = 1;
  for (int a = 0; a < 3; ++a) {
    l.crop_lo[a] = m.crop_margin ? std::max<int64_t>(0, lo[a] - margin) : 0;
    const int64_t crop_hi = m.crop_margin ? std::min<int64_t>(l.working.dims[a], hi[a] + margin) : l.working.dims[a];
    l.crop_dims[a] = crop_hi - l.crop_lo[a];
    const int64_t padded = (l.crop_dims[a] + d - 1) / d * d;
    l.pad_low[a] = (padded - l.crop_dims[a]) / 2;  // the reference: the smaller half before
    l.padded[a] = static_cast<uint64_t>(padded);
    voxels = saturating_mul(voxels, l.padded[a]);
  }
  l.activation_bytes = saturating_add(m.fixed_bytes, saturating_mul(voxels, m.bytes_per_voxel));
  return l;
}

namespace {

// The plan of a run with this layout.
TilePlan plan_layout(const ModelSpec& m, const Geometry& g, const PhaseLayout& l, uint32_t echoes, Target target) {
  TilePlan p;
  p.whole_volume = true;
  p.patch_dims = l.padded;
  p.patch_edge = std::max({l.padded[0], l.padded[1], l.padded[2]});
  p.bytes_per_tile = l.activation_bytes;
  p.tiles_in_flight = 1;
  p.tiles_total = p.tiles_active = std::max<uint32_t>(1, echoes);  // one network call per echo
  p.activation_bytes = l.activation_bytes;
  p.module_heap_bytes = phase_module_bytes(g, l, std::max<uint32_t>(1, echoes));
  p.peak_bytes = saturating_add(p.activation_bytes, p.module_heap_bytes);
  p.grid = whole_volume_grid(g, Dims3{0, 0, 0}, p.patch_edge);
  if (target == Target::Wasm && l.activation_bytes > WASM_MAX_PATCH_ACTIVATION_BYTES) {
    const uint64_t per_voxel = std::max<uint64_t>(1, m.bytes_per_voxel);
    const uint64_t room = WASM_MAX_PATCH_ACTIVATION_BYTES > m.fixed_bytes ? WASM_MAX_PATCH_ACTIVATION_BYTES - m.fixed_bytes : 0;
    const uint64_t max_voxels = room / per_voxel;
    const uint64_t edge = static_cast<uint64_t>(std::floor(std::cbrt(static_cast<double>(max_voxels)))) / m.divisor * m.divisor;
    p.message = std::string(m.name) + " runs on the whole volume (it cannot be tiled): " +
                (m.crop_margin ? "the mask's bounding box + " + std::to_string(m.crop_margin) + " voxels" : "the volume") +
                " padded to " + dims_text(l.padded) + " needs " + format_gb(l.activation_bytes) + " at " +
                std::to_string(m.bytes_per_voxel) + " B/voxel, over the " + format_gb(WASM_MAX_PATCH_ACTIVATION_BYTES) +
                " single-patch limit. At most " + std::to_string(max_voxels / 1000000) + "." +
                std::to_string(max_voxels / 100000 % 10) + " M padded voxels fit (e.g. " + std::to_string(edge) + "³): crop " +
                "the field of view to the brain or resample to coarser voxels";
    return p;
  }
  p.feasible = true;
  return p;
}

}  // namespace

TilePlan plan_phase(const ModelSpec& m, const Geometry& g, std::span<const uint8_t> mask, const PhaseSettings& s,
                    uint32_t echoes, Target target) {
  require_phase_model(m);
  validate_geometry(g);
  if (mask.size() != g.voxel_count()) validate_volume_sizes(g, g.voxel_count(), mask.size());
  validate_settings(s);
  return plan_layout(m, g, phase_layout(m, g, erode_mask_voxels(g, mask, s.erode_radius)), echoes, target);
}

// A phase network that assumes B0 along the third axis is warned about above this tilt (the page shows the plan's words).
constexpr double kPhaseB0WarnDegrees = 5.0;

std::string phase_warning(const ModelSpec& m, const Geometry& g) {
  std::string w;
  const double degrees = b0_tilt_degrees(g.b0_dir);
  if (!takes_b0_direction(m) && degrees > kPhaseB0WarnDegrees) {
    w = std::string(m.name) + " assumes B0 along the volume's third axis; yours is " +
        std::to_string(static_cast<int>(std::lround(degrees))) + "° off (use iQSM+ for oblique acquisitions)";
  }
  const double vmin = std::min({g.voxel_mm[0], g.voxel_mm[1], g.voxel_mm[2]});
  const double vmax = std::max({g.voxel_mm[0], g.voxel_mm[1], g.voxel_mm[2]});
  if (vmax > vmin * 1.05) {
    if (!w.empty()) w += "; ";
    w += std::string(m.name) + " was trained on isotropic voxels (the reference resamples to isotropic first); these are " +
         std::to_string(g.voxel_mm[0]).substr(0, 4) + "×" + std::to_string(g.voxel_mm[1]).substr(0, 4) + "×" +
         std::to_string(g.voxel_mm[2]).substr(0, 4) + " mm: resample for best results";
  }
  return w;
}

NetworkTask phase_network_task(const ModelSpec& m, Geometry g, std::span<const float> phase, std::span<const float> magnitude,
                               std::span<const uint8_t> mask, PhaseSettings s, Target target) {
  require_phase_model(m);
  validate_geometry(g);
  validate_settings(s);
  const uint64_t n = g.voxel_count();
  const uint32_t echoes = static_cast<uint32_t>(s.te_s.size());
  if (phase.size() != n * echoes) {
    throw Error(ErrorCode::InvalidArgument, "phase holds " + std::to_string(phase.size()) + " values; " +
                                                std::to_string(echoes) + " echo(es) of " + std::to_string(n) +
                                                " voxels need " + std::to_string(n * echoes) + " (one TE per echo)");
  }
  if (!magnitude.empty() && magnitude.size() != phase.size()) {
    throw Error(ErrorCode::InvalidArgument, "magnitude holds " + std::to_string(magnitude.size()) +
                                                " values; it must match the phase (" + std::to_string(phase.size()) + ")");
  }
  if (mask.size() != n) validate_volume_sizes(g, n, mask.size());
  for (uint32_t e = 0; e < echoes; ++e) validate_finite(g, phase.subspan(e * n, n));
  if (!magnitude.empty()) {
    for (uint32_t e = 0; e < echoes; ++e) validate_finite(g, magnitude.subspan(e * n, n));
  }

  const std::vector<uint8_t> eroded = erode_mask_voxels(g, mask, s.erode_radius);
  const PhaseLayout l = phase_layout(m, g, eroded);
  const TilePlan plan = plan_layout(m, g, l, echoes, target);
  if (!plan.feasible) throw Error(ErrorCode::BudgetExceeded, plan.message);
  const CropMap map(g, l);
  const uint64_t cn = map.crop.voxel_count();
  std::vector<uint8_t> crop_mask(cn);
  std::vector<float> crop_maskf(cn);
  map.for_each([&](uint64_t c, uint64_t src) {
    crop_mask[c] = eroded[src];
    crop_maskf[c] = eroded[src] ? 1.0f : 0.0f;
  });

  // The inputs every echo shares.
  const TensorShape shape{1, l.padded};
  const Dims3 origin{-l.pad_low[0], -l.pad_low[1], -l.pad_low[2]};
  const Normalization identity{};
  std::vector<float> mask_t(shape.size()), border_t(shape.size());
  gather_patch(map.crop, crop_maskf, origin, l.padded, identity, mask_t);
  for (uint64_t x = 0; x < l.padded[0]; ++x)
    for (uint64_t y = 0; y < l.padded[1]; ++y)
      for (uint64_t z = 0; z < l.padded[2]; ++z) {
        const bool edge = x == 0 || y == 0 || z == 0 || x + 1 == l.padded[0] || y + 1 == l.padded[1] || z + 1 == l.padded[2];
        border_t[(x * l.padded[1] + y) * l.padded[2] + z] = edge ? 0.0f : 1.0f;
      }
  const std::vector<uint64_t> volume_dims{1, 1, l.padded[0], l.padded[1], l.padded[2]};
  const std::vector<float> b0_t{static_cast<float>(s.b0_tesla)};
  const std::vector<float> dir_t{static_cast<float>(l.b0_unit[0]), static_cast<float>(l.b0_unit[1]),
                                 static_cast<float>(l.b0_unit[2])};

  std::vector<double> num(cn, 0.0), den(cn, 0.0);
  std::vector<float> crop_phase(cn), input(shape.size()), result(cn);
  const Normalization sign{0.0, 1.0 / s.phase_sign, 1.0, 0.0};  // network input = phase · sign
  for (uint32_t e = 0; e < echoes; ++e) {
    const std::span<const float> ph = phase.subspan(e * n, n);
    map.for_each([&](uint64_t c, uint64_t src) { crop_phase[c] = ph[src]; });
    gather_patch(map.crop, crop_phase, origin, l.padded, sign, input);
    const std::vector<float> te_t{static_cast<float>(s.te_s[e])};
    std::vector<NamedInput> extras;
    for (InputRole role : m.inputs.subspan(1)) {
      const std::string r = input_role_name(role);
      switch (role) {
        case InputRole::Mask: extras.push_back({r, volume_dims, mask_t}); break;
        case InputRole::Border: extras.push_back({r, volume_dims, border_t}); break;
        case InputRole::Te: extras.push_back({r, {1}, te_t}); break;
        case InputRole::B0: extras.push_back({r, {1}, b0_t}); break;
        case InputRole::B0Dir: extras.push_back({r, {1, 1, 3}, dir_t}); break;
        default: throw Error(ErrorCode::Internal, std::string("input role '") + r + "' is not an extra input of a phase network");
      }
    }
    NetworkCall call{0, shape, TensorShape{1, l.padded}, input, std::move(extras),
                     "echo " + std::to_string(e + 1) + " (whole volume " + dims_text(l.padded) + ")"};
    const std::vector<float> y = co_await std::move(call);
    scatter_core(map.crop, crop_mask, Dims3{0, 0, 0}, map.crop.dims, origin, l.padded, identity, y, result);
    const std::span<const float> mag = magnitude.empty() ? std::span<const float>{} : magnitude.subspan(e * n, n);
    map.for_each([&](uint64_t c, uint64_t src) {
      const double a = (mag.empty() ? 1.0 : mag[src]) * s.te_s[e];
      num[c] += a * a * result[c];
      den[c] += a * a;
    });
  }
  std::vector<float> out(static_cast<size_t>(n), 0.0f);
  map.for_each([&](uint64_t c, uint64_t src) {
    out[src] = (crop_mask[c] && den[c] > 0) ? static_cast<float>(num[c] / den[c]) : 0.0f;
  });
  co_return out;
}

RunReport run_phase_network(const ModelSpec& m, const Geometry& g, std::span<const float> phase,
                            std::span<const float> magnitude, std::span<const uint8_t> mask, const PhaseSettings& s,
                            PatchRunner& net, const RunOptions& options, std::span<float> out) {
  const auto t0 = Clock::now();
  if (out.size() != g.voxel_count()) validate_volume_sizes(g, out.size(), mask.size());
  NetworkTask task = phase_network_task(m, g, phase, magnitude, mask, s, options.target);
  RunReport report;
  report.tiles_total = static_cast<uint64_t>(s.te_s.size());
  report.concurrency = report.max_in_flight = 1;
  if (options.progress) options.progress(0, report.tiles_total);
  for (NetworkCall* c; (c = task.advance()) != nullptr;) {
    if (options.cancel && options.cancel->load()) throw Error(ErrorCode::Cancelled, "cancelled");
    const auto te0 = Clock::now();
    task.answer(run_checked(net, c->input, c->shape, c->output_shape, c->where, c->extras));
    report.tiles_run++;
    report.tile_seconds.push_back(std::chrono::duration<double>(Clock::now() - te0).count());
    if (options.progress) options.progress(report.tiles_run, report.tiles_total);
  }
  const std::vector<float> chi = task.take_result();
  std::copy(chi.begin(), chi.end(), out.begin());
  const TilePlan plan = plan_phase(m, g, mask, s, static_cast<uint32_t>(s.te_s.size()), options.target);
  report.patch_edge = plan.patch_edge;
  report.bytes_per_tile = plan.bytes_per_tile;
  report.wall_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return report;
}

}  // namespace tessera
