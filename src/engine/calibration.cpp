#include "tessera/engine/calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "tessera/common/error.h"
#include "tessera/common/schema.h"

namespace tessera {

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kFirstEdge = 16;
constexpr uint64_t kEdgeGap = 8;

uint64_t round_up(uint64_t v, uint64_t d) { return d <= 1 || v % d == 0 ? v : saturating_add(v, d - v % d); }

uint64_t ceil_to(double v, uint64_t step) {
  if (!(v > 0)) return 0;
  if (v >= 1.8e19) return UINT64_MAX;
  return round_up(static_cast<uint64_t>(std::ceil(v)), step);
}

std::string mb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  return buf;
}

struct Line {
  double a = 0, b = 0, r2 = 1;
};

// Least squares y = a + b·x.
Line least_squares(const std::vector<const HeapPoint*>& ps) {
  const double n = static_cast<double>(ps.size());
  double mx = 0, my = 0;
  for (const HeapPoint* p : ps) {
    mx += static_cast<double>(p->voxels);
    my += static_cast<double>(p->heap_bytes);
  }
  mx /= n;
  my /= n;
  double sxx = 0, sxy = 0, syy = 0;
  for (const HeapPoint* p : ps) {
    const double dx = static_cast<double>(p->voxels) - mx, dy = static_cast<double>(p->heap_bytes) - my;
    sxx += dx * dx;
    sxy += dx * dy;
    syy += dy * dy;
  }
  Line l;
  l.b = sxx > 0 ? sxy / sxx : 0;
  l.a = my - l.b * mx;
  double sse = 0;
  for (const HeapPoint* p : ps) {
    const double e = static_cast<double>(p->heap_bytes) - l.a - l.b * static_cast<double>(p->voxels);
    sse += e * e;
  }
  l.r2 = syy > 0 ? 1 - sse / syy : 1;
  return l;
}

std::vector<const HeapPoint*> growing(std::span<const HeapPoint> points) {
  std::vector<const HeapPoint*> out;
  for (const HeapPoint& p : points) {
    if (p.heap_bytes > p.after_session_bytes) out.push_back(&p);
  }
  return out;
}

size_t distinct_sizes(const std::vector<const HeapPoint*>& ps) {
  std::set<uint64_t> s;
  for (const HeapPoint* p : ps) s.insert(p->voxels);
  return s.size();
}

}  // namespace

std::vector<uint64_t> calibration_edges(uint32_t divisor, uint32_t count) {
  const uint64_t d = divisor == 0 ? 1 : divisor;
  std::vector<uint64_t> edges;
  uint64_t e = round_up(kFirstEdge, d);
  for (uint32_t i = 0; i < count; ++i) {
    edges.push_back(e);
    e = round_up(e + kEdgeGap, d);
  }
  return edges;
}

bool calibration_slope_measured(std::span<const HeapPoint> points) { return distinct_sizes(growing(points)) >= 2; }

CalibrationFit fit_calibration(std::span<const HeapPoint> points) {
  std::vector<const HeapPoint*> all;
  for (const HeapPoint& p : points) {
    if (p.voxels == 0) throw Error(ErrorCode::InvalidArgument, "a calibration point has a patch of 0 voxels");
    if (p.heap_bytes < p.after_session_bytes) {
      throw Error(ErrorCode::InvalidArgument, "a calibration point's heap (" + mb(static_cast<double>(p.heap_bytes)) +
                                                  ") is below its after-session heap (" +
                                                  mb(static_cast<double>(p.after_session_bytes)) +
                                                  "): the heap high-water cannot shrink; measure again");
    }
    all.push_back(&p);
  }
  if (distinct_sizes(all) < 2) {
    throw Error(ErrorCode::InvalidArgument, "calibration needs heaps measured at two patch sizes at least (got " +
                                                std::to_string(distinct_sizes(all)) + ")");
  }
  CalibrationFit fit;
  fit.slope_margin = kCalibrationSlopeMargin;
  const double step = 1 + fit.slope_margin;
  const std::vector<const HeapPoint*> grew = growing(points);
  fit.points_fitted = static_cast<uint32_t>(grew.size());
  fit.slope_measured = distinct_sizes(grew) >= 2;
  double slope = 0;
  if (fit.slope_measured) {
    const Line l = least_squares(grew);
    fit.fitted_fixed_bytes = l.a;
    fit.fitted_bytes_per_voxel = std::max(0.0, l.b);
    fit.r2 = l.r2;
    // A heap is committed in growth steps: what the network held at a point lies in (max(after-session,
    // heap / 1.2), heap] (the last growth went from below what it asked for to at most 1.2× that). The steepest
    // line these intervals allow, between the smallest and the largest patch, bounds the slope from above
    // even where the steps hide it (small patches that fit inside one step).
    uint64_t v_lo = UINT64_MAX, v_hi = 0;
    for (const HeapPoint* p : grew) {
      v_lo = std::min(v_lo, p->voxels);
      v_hi = std::max(v_hi, p->voxels);
    }
    double held_lo = 1e300, held_hi = 0;
    for (const HeapPoint* p : grew) {
      if (p->voxels == v_lo) {
        held_lo = std::min(held_lo, std::max(static_cast<double>(p->after_session_bytes), static_cast<double>(p->heap_bytes) / step));
      }
      if (p->voxels == v_hi) held_hi = std::max(held_hi, static_cast<double>(p->heap_bytes));
    }
    const double chord = (held_hi - held_lo) / static_cast<double>(v_hi - v_lo);
    slope = std::max(fit.fitted_bytes_per_voxel, chord);
    fit.slope_bound = slope;
    fit.bytes_per_voxel = std::max<uint64_t>(10, ceil_to(slope * step, 10));
  } else {
    fit.bytes_per_voxel = defaults::kBytesPerVoxel;
  }
  // What a worker holds is under held(v) = top + slope·v at every point, top being the smallest such intercept (and
  // at least every after-session heap: the line at 0 voxels is what a worker holds before its patch). A larger
  // patch commits up to 1.2× what it holds: the line is that, raised to 1 MiB.
  double top = 0;
  for (const HeapPoint* p : all) {
    top = std::max(top, static_cast<double>(p->heap_bytes) - slope * static_cast<double>(p->voxels));
    top = std::max(top, static_cast<double>(p->after_session_bytes));
  }
  fit.fixed_bytes = ceil_to(fit.slope_measured ? top * step : top, kMiB);
  for (const HeapPoint* p : all) {  // every measured heap under the line, whatever the rounding
    const uint64_t line = saturating_mul(fit.bytes_per_voxel, p->voxels);
    if (p->heap_bytes > saturating_add(fit.fixed_bytes, line)) fit.fixed_bytes = round_up(p->heap_bytes - line, kMiB);
  }
  const double fitted = std::max(0.0, fit.fitted_fixed_bytes);
  fit.raised_bytes = static_cast<double>(fit.fixed_bytes) > fitted ? static_cast<uint64_t>(static_cast<double>(fit.fixed_bytes) - fitted) : 0;
  char buf[400];
  if (fit.slope_measured) {
    std::snprintf(buf, sizeof buf,
                  "least squares over %u point(s): %s + %.1f B/voxel (r² %.4f); budgeted %.1f B/voxel (the steepest slope the "
                  "growth-stepped heaps allow) and the line through the highest point, both +%.0f %% (a heap commits up to "
                  "20 %% more than it holds): every measured heap lies under it",
                  fit.points_fitted, mb(fit.fitted_fixed_bytes).c_str(), fit.fitted_bytes_per_voxel, fit.r2, slope,
                  100 * fit.slope_margin);
  } else {
    std::snprintf(buf, sizeof buf,
                  "the heap did not grow with the patch at the sizes measured (activations fit in heap freed after session "
                  "creation): per-voxel cost not measured, %llu B/voxel assumed (the reference engine's figure); fixed part = "
                  "the largest heap measured",
                  static_cast<unsigned long long>(defaults::kBytesPerVoxel));
  }
  fit.note = buf;
  return fit;
}

MemoryVerdict check_measured_memory(const MeasuredMemory& m, const std::string& network, bool custom) {
  if (m.planned_bytes_per_tile == 0 || m.planned_module_heap_bytes == 0) {
    throw Error(ErrorCode::InvalidArgument, "the plan holds no memory figures (bytesPerTile, moduleHeapBytes): pass the plan the run obeyed");
  }
  MemoryVerdict v;
  v.worker_heap_vs_plan = static_cast<double>(m.worker_heap_bytes) / static_cast<double>(m.planned_bytes_per_tile);
  v.module_heap_vs_plan = static_cast<double>(m.module_heap_bytes) / static_cast<double>(m.planned_module_heap_bytes);
  if (m.patch_voxels > 0 && m.worker_heap_bytes > m.cost.fixed_bytes) {
    v.measured_bytes_per_voxel =
        ceil_to(static_cast<double>(m.worker_heap_bytes - m.cost.fixed_bytes) / static_cast<double>(m.patch_voxels), 10);
  }
  std::string w;
  char buf[256];
  if (v.worker_heap_vs_plan > 1.0) {
    std::snprintf(buf, sizeof buf, "an ONNX Runtime worker heap reached %s, %.2f× the %s planned per tile (", format_gb(m.worker_heap_bytes).c_str(),
                  v.worker_heap_vs_plan, format_gb(m.planned_bytes_per_tile).c_str());
    w = buf;
    w += (m.cost.fixed_bytes ? format_gb(m.cost.fixed_bytes) + " + " : std::string()) + std::to_string(m.cost.bytes_per_voxel) +
         " B/voxel × " + std::to_string(m.patch_voxels) + " voxels): " + std::to_string(v.measured_bytes_per_voxel) +
         " B/voxel measured at this patch (the heap beyond the declared fixed bytes, per patch voxel)";
    if (custom) {
      w += "; declare \"bytesPerVoxel\": " + std::to_string(v.measured_bytes_per_voxel) + " in " + network +
           " (--spec bytesPerVoxel " + std::to_string(v.measured_bytes_per_voxel) +
           "), or leave bytesPerVoxel out to have the network calibrated (tessera-qsm calibrate --weights net.onnx)";
    } else {
      w += "; the registry's figure for " + network + " is too low: measure it (tessera-qsm calibrate --model " + network +
           " --weights FILE) and report it";
    }
  }
  const bool module_grew = m.module_heap_before_bytes == 0 || m.module_heap_bytes > m.module_heap_before_bytes;
  if (v.module_heap_vs_plan > 1.0 && module_grew) {
    if (!w.empty()) w += ". ";
    std::snprintf(buf, sizeof buf, "the C++ module heap reached %s, %.2f× the %s planned (the volumes and patches in flight)",
                  format_gb(m.module_heap_bytes).c_str(), v.module_heap_vs_plan, format_gb(m.planned_module_heap_bytes).c_str());
    w += buf;
  }
  v.over = !w.empty();
  v.warning = std::move(w);
  return v;
}

}  // namespace tessera
