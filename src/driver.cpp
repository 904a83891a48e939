#include "tessera/driver.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <system_error>
#include <thread>

#include "internal/scheduler.h"
#include "tessera/blend.h"
#include "tessera/error.h"
#include "tessera/plan.h"

namespace tessera {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void validate_inputs(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask, uint64_t out_size) {
  validate_geometry(g);
  validate_volume_sizes(g, field.size(), mask.size());
  if (out_size != g.voxel_count()) {
    throw Error(ErrorCode::InvalidArgument, "output buffer holds " + std::to_string(out_size) + " values but the volume has " +
                                                std::to_string(g.voxel_count()) + " voxels");
  }
  validate_finite(g, field);
}

void fill_grid_report(RunReport& report, const TileGrid& grid, TileCost cost) {
  report.tiles_total = grid.tiles.size();
  report.tiles_skipped = grid.skipped;
  report.patch_edge = grid.patch_edge;
  report.bytes_per_tile = tile_bytes(grid.config, cost);
}

}  // namespace

FieldNetwork field_network(const ModelSpec& spec) {
  FieldNetwork n{spec.tile_cost(), spec.norm, spec.pad, spec.masked_input};
  if (!spec.measured_context.empty()) {
    n.context = measured_context_profile(spec.measured_context);
    n.context.radius = spec.receptive_radius;
  } else if (spec.receptive_radius) {
    n.context = dipole_context_profile(spec.receptive_radius);
  }
  return n;
}

RunReport tiled_scatter(uint64_t total, uint32_t concurrency, const std::function<void(uint64_t)>& work,
                        const RunOptions& options) {
  const auto t0 = Clock::now();
  TileScheduler sched(total, concurrency);
  RunReport report;
  report.concurrency = sched.concurrency();
  report.tile_seconds.assign(total, 0.0);

  auto run_one = [&](uint64_t job) {
    const auto start = Clock::now();
    try {
      work(job);
      report.tile_seconds[job] = seconds_since(start);  // each job writes its own slot
      sched.complete(job);
    } catch (...) {
      sched.fail(job, std::current_exception());
    }
  };
  auto worker = [&] {
    while (auto job = sched.try_acquire()) run_one(*job);
  };
  auto cancel_requested = [&] { return options.cancel && options.cancel->load(std::memory_order_relaxed); };

  uint64_t reported = 0;
  auto report_progress = [&](uint64_t done) {
    while (reported < done) {
      ++reported;
      if (options.progress) options.progress(reported, total);
    }
  };

  if (options.progress) options.progress(0, total);

  std::vector<std::thread> threads;
  const uint64_t wanted = std::min<uint64_t>(sched.concurrency(), total);
  for (uint64_t i = 0; i < wanted; ++i) {
    try {
      threads.emplace_back(worker);
    } catch (const std::system_error&) {
      break;  // the wasm pthread pool is exhausted (PTHREAD_POOL_SIZE_STRICT=2): run with fewer
    }
  }

  try {
    if (threads.empty()) {
      // No thread could be started: run on this thread, still reporting after every tile.
      while (!cancel_requested()) {
        auto job = sched.try_acquire();
        if (!job) break;
        run_one(*job);
        report_progress(sched.done());
      }
      if (cancel_requested()) sched.cancel();
    } else {
      while (!sched.finished()) {
        if (cancel_requested()) sched.cancel();
        report_progress(sched.wait_for_progress(reported, std::chrono::milliseconds(5)));
      }
    }
  } catch (...) {
    // A progress callback threw: stop, let the tiles in flight finish, then pass the error on.
    sched.cancel();
    for (std::thread& t : threads) t.join();
    throw;
  }
  for (std::thread& t : threads) t.join();

  if (std::exception_ptr error = sched.error()) std::rethrow_exception(error);
  report_progress(sched.done());
  if (sched.cancelled() && sched.done() < total) {
    throw Error(ErrorCode::Cancelled,
                "cancelled after " + std::to_string(sched.done()) + " of " + std::to_string(total) + " tiles");
  }
  report.tiles_run = sched.done();
  report.max_in_flight = sched.max_in_flight();
  report.wall_seconds = seconds_since(t0);
  return report;
}

RunReport tiled_field_inversion(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                                const FieldNetwork& network, TileConfig cfg, PatchRunner& runner,
                                const RunOptions& options, std::span<float> chi) {
  validate_inputs(g, field, mask, chi.size());
  validate_tile_config(cfg);
  if (options.target == Target::Wasm) check_wasm_patch_fits(cfg, network.cost);

  const TileGrid grid = make_tile_grid(g, mask, cfg, network.cost.divisor, whole_volume_shape(g, network).pad_low);
  const std::vector<const Tile*> active = active_tiles(grid);
  const uint64_t edge = grid.patch_edge;
  const std::array<uint64_t, 3> dims{edge, edge, edge};
  const TensorShape shape{1, dims};
  TileWriter writer(g, mask, grid, network.norm, chi);

  auto work = [&](uint64_t job) {
    const Tile& t = *active[job];
    const TileScope scope(static_cast<int64_t>(t.index));
    std::vector<float> input(shape.size());
    gather_patch(g, field, t.patch_lo, dims, network.norm, input,
                 network.masked_input ? mask : std::span<const uint8_t>{});
    const std::vector<float> output =
        run_checked(runner, input, shape, TensorShape{runner.output_channels(), dims}, tile_text(t));
    writer.write(t, dims, std::span<const float>(output).first(shape.spatial()));
  };
  RunReport report =
      tiled_scatter(active.size(), tile_concurrency(cfg, network.cost, options.threads, options.target), work, options);
  fill_grid_report(report, grid, network.cost);
  return report;
}

RunReport tiled_volume_algorithm(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                                 TileConfig cfg, TileCost cost, const VolumeAlgorithm& algorithm,
                                 const RunOptions& options, std::span<float> out) {
  validate_inputs(g, field, mask, out.size());
  validate_tile_config(cfg);
  if (cfg.overlapping()) {
    throw Error(ErrorCode::InvalidArgument, "overlapping tiles (stride " + std::to_string(cfg.stride) + " < core " +
                                                std::to_string(cfg.core) + ") are blended for field → χ networks only; "
                                                "a physics loop tiles with stride = core");
  }
  if (options.target == Target::Wasm) check_wasm_patch_fits(cfg, cost);

  const TileGrid grid = make_tile_grid(g, mask, cfg, cost.divisor);
  const std::vector<const Tile*> active = active_tiles(grid);
  const uint64_t edge = grid.patch_edge;
  Geometry patch_geometry = g;
  patch_geometry.dims = {static_cast<int64_t>(edge), static_cast<int64_t>(edge), static_cast<int64_t>(edge)};
  const uint64_t voxels = edge * edge * edge;
  std::fill(out.begin(), out.end(), 0.0f);

  auto work = [&](uint64_t job) {
    const Tile& t = *active[job];
    const TileScope scope(static_cast<int64_t>(t.index));
    std::vector<float> field_patch(voxels);
    std::vector<uint8_t> mask_patch(voxels);
    gather_host_patch(g, field, mask, t.patch_lo, edge, field_patch, mask_patch);
    std::vector<float> result;
    try {
      result = algorithm(patch_geometry, field_patch, mask_patch);
    } catch (const Error& e) {
      throw Error(e.code(), tile_text(t) + ": " + e.what());
    } catch (const std::exception& e) {
      throw Error(ErrorCode::RunnerFailed, tile_text(t) + ": the algorithm failed: " + e.what());
    }
    if (result.size() != voxels) {
      throw Error(ErrorCode::RunnerFailed, tile_text(t) + ": the algorithm returned " + std::to_string(result.size()) +
                                               " values, expected " + std::to_string(voxels) + " (" +
                                               std::to_string(edge) + "³)");
    }
    scatter_host_core(g, mask, t, edge, result, out);
  };
  RunReport report = tiled_scatter(active.size(), tile_concurrency(cfg, cost, options.threads, options.target), work, options);
  fill_grid_report(report, grid, cost);
  return report;
}

WholeVolumeShape whole_volume_shape(const Geometry& g, const FieldNetwork& network) {
  WholeVolumeShape s;
  const int64_t d = std::max<int64_t>(1, network.cost.divisor);
  uint64_t voxels = 1;
  for (int a = 0; a < 3; ++a) {
    const int64_t padded = (g.dims[a] + d - 1) / d * d;
    const int64_t pad = padded - g.dims[a];
    s.pad_low[a] = network.pad == PadRule::SmallerHalfLow ? pad / 2 : pad - pad / 2;
    s.dims[a] = static_cast<uint64_t>(padded);
    voxels = saturating_mul(voxels, s.dims[a]);
  }
  s.bytes = saturating_add(network.cost.fixed_bytes, saturating_mul(voxels, network.cost.bytes_per_voxel));
  return s;
}

RunReport whole_volume_inversion(const Geometry& g, std::span<const float> field, std::span<const uint8_t> mask,
                                 const FieldNetwork& network, PatchRunner& runner, const RunOptions& options,
                                 std::span<float> chi) {
  const auto t0 = Clock::now();
  validate_inputs(g, field, mask, chi.size());
  const TilePlan plan = plan_whole(g, network, options.target);
  if (!plan.feasible) throw Error(ErrorCode::BudgetExceeded, plan.message);
  const WholeVolumeShape s = whole_volume_shape(g, network);
  if (options.progress) options.progress(0, 1);
  if (options.cancel && options.cancel->load()) throw Error(ErrorCode::Cancelled, "cancelled before the run started");

  const TensorShape shape{1, s.dims};
  const Dims3 origin{-s.pad_low[0], -s.pad_low[1], -s.pad_low[2]};
  std::vector<float> input(shape.size());
  gather_patch(g, field, origin, s.dims, network.norm, input, network.masked_input ? mask : std::span<const uint8_t>{});
  const std::vector<float> output =
      run_checked(runner, input, shape, TensorShape{runner.output_channels(), s.dims}, "whole volume " + dims_text(s.dims));
  std::fill(chi.begin(), chi.end(), 0.0f);
  scatter_core(g, mask, Dims3{0, 0, 0}, g.dims, origin, s.dims, network.norm,
               std::span<const float>(output).first(shape.spatial()), chi);
  if (options.progress) options.progress(1, 1);

  RunReport report;
  report.tiles_total = 1;
  report.tiles_run = 1;
  report.concurrency = 1;
  report.max_in_flight = 1;
  report.patch_edge = std::max({s.dims[0], s.dims[1], s.dims[2]});
  report.bytes_per_tile = s.bytes;
  report.wall_seconds = seconds_since(t0);
  report.tile_seconds = {report.wall_seconds};
  return report;
}

}  // namespace tessera
