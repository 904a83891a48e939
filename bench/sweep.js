// Workers × threads × core sweep against the auto-planner. On a phantom (head-shaped, ellipsoid mask; made in a
// separate runtime), for each K workers × T threads in --wt and each core in --cores (halo --halo): a fresh runtime
// (hardwareThreads 2), invert() with that tile / workers / threads, wall time measured around invert() (includes ORT
// worker start + session creation, as the planner's estimate does). Then plan({tile: 'auto'}) is asked for its
// choice; if that config was not in the grid it is run too. Reported: whether the choice is within 10 % of the best
// measured wall, and per config the planner's estimate (the default ThroughputModel of
// src/include/tessera/autoplan.h, replicated here: start + ceil(active / in-flight) × edge³ × s_per_voxel / Amdahl(T))
// vs measured, and the same formula with the model FITTED to these measurements (least squares over seconds per
// voxel and worker start, grid search over the parallel fraction).
// Configs whose in-flight count the planner caps below K (a tile over half the 1.5 GB budget, or a single tile) run
// exactly as K = 1 with the same threads and are not run again: their row repeats the 1×T measurement.
//
// Usage:
//   node scripts/make_standins.js /tmp/standins        # once
//   node --no-experimental-fetch bench/sweep.js [--onnx /tmp/standins/xqsm-standin.onnx] [--model xqsm]
//        [--dims 96,96,80] [--cores 24,56,88,120] [--halo 4] [--wt 1x1,1x2,2x1] [--json out.json]
// (--dims 160,160,128 is the volume of the brief; on 2 shared cores it takes ≈ 25 min, see bench/RESULTS.md.)
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import { createTessera } from '../bindings/js/index.js';
import { readStandin, loadavg } from './common.js';

const { values: a } = parseArgs({
  options: {
    onnx: { type: 'string', default: '/tmp/standins/xqsm-standin.onnx' },
    model: { type: 'string', default: 'xqsm' },
    dims: { type: 'string', default: '96,96,80' },
    cores: { type: 'string', default: '24,56,88,120' },
    halo: { type: 'string', default: '4' },
    wt: { type: 'string', default: '1x1,1x2,2x1' },
    json: { type: 'string' },
  },
});
const weights = readStandin(a.onnx);
const dims = a.dims.split(',').map(Number);
const nvox = dims[0] * dims[1] * dims[2];
const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
const halo = Number(a.halo);
const load = loadavg;
// The auto-planner's time model BEFORE it was fitted to these benchmarks (kept as the baseline this sweep
// measured against; the planner's current model in src/include/tessera/autoplan.h is the fitted one, and its
// estimate for its own choice is plan.estimatedSeconds, printed below).
const DEFAULT_MODEL = { secondsPerVoxel: 3e-6, parallelFraction: 0.8, workerStart: 0.6 };

/** src/autoplan.cpp estimate_tiled_seconds, replicated. */
function estimate(edge, active, k, t, m) {
  if (!active) return 0;
  const f = Math.min(1, Math.max(0, m.parallelFraction));
  const speedup = 1 / ((1 - f) + f / Math.max(1, t));
  return m.workerStart + Math.ceil(active / Math.max(1, k)) * (edge ** 3 * m.secondsPerVoxel) / speedup;
}

console.log(`sweep, node ${process.version}, ${os.cpus()[0].model} × ${os.cpus().length}, ${a.onnx} as model '${a.model}', ` +
  `volume ${dims.join('×')} (${nvox} voxels), cores ${a.cores} halo ${halo}, K×T ${a.wt}; load average ${load()}`);
const maker = await createTessera({ workers: 1 });
const ph = await maker.phantom({ geometry, seed: 1 });
await maker.terminate();
console.log(`phantom mask ${ph.mask.reduce((s, v) => s + v, 0)} voxels`);

const measured = new Map(); // key `${core}|${k}|${t}` (k = tiles in flight actually used)
const rows = [];
async function runConfig(core, K, T) {
  const t = await createTessera({ workers: K, threadsPerWorker: T, hardwareThreads: 2 });
  try {
    const tile = { core, halo };
    const plan = await t.plan({ geometry, mask: ph.mask, model: a.model, tile, workers: K });
    const row = { core, K, T, patchEdge: plan.patchEdge, active: plan.tilesActive, inFlight: plan.tilesInFlight, feasible: plan.feasible };
    if (!plan.feasible) return { ...row, message: plan.message };
    const key = `${core}|${plan.tilesInFlight}|${T}`;
    if (measured.has(key)) return { ...row, wall: measured.get(key).wall, run: measured.get(key).run, repeated: true };
    const l0 = os.loadavg()[0];
    const t0 = performance.now();
    const { report } = await t.invert({ field: ph.field, mask: ph.mask, geometry, model: a.model, weights, tile, workers: K, threadsPerWorker: T });
    const wall = (performance.now() - t0) / 1000;
    measured.set(key, { wall, run: report.wallSeconds });
    console.log(`  core ${core} ${K}×${T}: ${report.tilesRun} tiles of ${plan.patchEdge}³, in flight ${plan.tilesInFlight}, wall ${wall.toFixed(1)} s (run ${report.wallSeconds.toFixed(1)} s); load ${l0.toFixed(2)} → ${os.loadavg()[0].toFixed(2)}`);
    return { ...row, wall, run: report.wallSeconds, load: [l0, os.loadavg()[0]] };
  } finally {
    await t.terminate();
  }
}

const wts = a.wt.split(',').map((s) => s.split('x').map(Number));
for (const [K, T] of wts) for (const core of a.cores.split(',').map(Number)) rows.push(await runConfig(core, K, T));

// The planner's choice.
const tp = await createTessera({ hardwareThreads: 2 });
const auto = await tp.plan({ geometry, mask: ph.mask, model: a.model, tile: 'auto' });
await tp.terminate();
console.log(`plan({tile: 'auto'}): ${auto.explanation}`);
// A choice that is not a cubic tiling (the whole volume, the mask's box, its slabs) runs as planned; it is compared
// with the tilings but left out of their fit (the model's patches are cubes).
async function runPlan(plan) {
  const t = await createTessera({ workers: plan.workers, threadsPerWorker: plan.threadsPerWorker, hardwareThreads: 2 });
  try {
    const t0 = performance.now();
    const { report } = await t.invert({ field: ph.field, mask: ph.mask, geometry, model: a.model, weights, plan });
    const wall = (performance.now() - t0) / 1000;
    console.log(`  the planner's plan (${plan.wholeVolume ? (plan.crop ? 'mask box' : 'whole volume') : 'slabs'} ${plan.patchDims.join('×')}, ${report.tilesRun} patch(es), ${plan.workers}×${plan.threadsPerWorker}): wall ${wall.toFixed(1)} s`);
    return { core: auto.tile.core, K: plan.workers, T: plan.threadsPerWorker, patchEdge: plan.patchEdge, active: plan.tilesActive, inFlight: plan.tilesInFlight, feasible: true, wall, run: report.wallSeconds, notCubic: true };
  } finally {
    await t.terminate();
  }
}
const cubic = !auto.wholeVolume && !auto.crop;
let autoRow = cubic ? rows.find((r) => r.core === auto.tile.core && r.K === auto.workers && r.T === auto.threadsPerWorker) : undefined;
if (!autoRow) {
  autoRow = cubic ? await runConfig(auto.tile.core, auto.workers, auto.threadsPerWorker) : await runPlan(auto);
  autoRow.extra = true;
  rows.push(autoRow);
}

// Fit the ThroughputModel to the measured walls of the cubic tilings: wall ≈ start + waves·edge³·spv/Amdahl(T).
const pts = rows.filter((r) => r.wall !== undefined && !r.repeated && !r.notCubic);
let fit = null;
for (let f = 0; f <= 1.0001; f += 0.005) {
  const xs = pts.map((r) => Math.ceil(r.active / r.inFlight) * r.patchEdge ** 3 * ((1 - f) + f / r.T));
  const ys = pts.map((r) => r.wall);
  const n = xs.length, mx = xs.reduce((s, v) => s + v, 0) / n, my = ys.reduce((s, v) => s + v, 0) / n;
  let sxx = 0, sxy = 0;
  for (let i = 0; i < n; i++) { sxx += (xs[i] - mx) ** 2; sxy += (xs[i] - mx) * (ys[i] - my); }
  const spv = sxy / sxx, start = my - spv * mx;
  const sse = xs.reduce((s, x, i) => s + (ys[i] - start - spv * x) ** 2, 0);
  if (!fit || sse < fit.sse) fit = { secondsPerVoxel: spv, parallelFraction: Math.min(1, f), workerStart: start, sse, rms: Math.sqrt(sse / n) };
}

const valid = rows.filter((r) => r.wall !== undefined);
const best = valid.reduce((b, r) => (r.wall < b.wall ? r : b));
console.log(`\nsweep on ${dims.join('×')} (phantom mask), xQSM-shaped stand-in, halo ${halo}; wall = around invert() incl. worker start`);
console.log('K×T  core  patch  active  in flight    wall s  vs best  est. default s  meas/est  est. fitted s  meas/est');
for (const r of rows) {
  if (r.wall === undefined) { console.log(`${r.K}×${r.T}  ${String(r.core).padStart(4)}  not feasible: ${r.message}`); continue; }
  const ed = estimate(r.patchEdge, r.active, r.inFlight, r.T, DEFAULT_MODEL);
  const ef = estimate(r.patchEdge, r.active, r.inFlight, r.T, fit);
  console.log(`${r.K}×${r.T}  ${String(r.core).padStart(4)}  ${String(r.patchEdge).padStart(4)}³  ${String(r.active).padStart(6)}  ${String(r.inFlight).padStart(9)}  ` +
    `${r.wall.toFixed(1).padStart(8)}  ${(r.wall / best.wall).toFixed(2).padStart(7)}  ${ed.toFixed(1).padStart(14)}  ${(r.wall / ed).toFixed(1).padStart(8)}  ` +
    `${ef.toFixed(1).padStart(13)}  ${(r.wall / ef).toFixed(2).padStart(8)}${r.repeated ? '  (= the K=1 run: planner caps in flight)' : ''}${r.extra ? '  (the planner\'s choice, outside the grid)' : ''}`);
}
const within = autoRow.wall <= 1.1 * best.wall;
console.log(`best measured: core ${best.core} ${best.K}×${best.T}, ${best.wall.toFixed(1)} s`);
console.log(`planner's choice: core ${auto.tile.core} halo ${auto.tile.halo} ${auto.workers}×${auto.threadsPerWorker}, estimated ${auto.estimatedSeconds.toFixed(1)} s, ` +
  `measured ${autoRow.wall.toFixed(1)} s = ${(autoRow.wall / best.wall).toFixed(2)}× best → ${within ? 'WITHIN' : 'NOT within'} 10 % of the best measured`);
console.log(`fitted ThroughputModel (least squares on these walls): seconds_per_voxel ${fit.secondsPerVoxel.toExponential(3)}, parallel_fraction ${fit.parallelFraction.toFixed(3)}, ` +
  `worker_start_seconds ${fit.workerStart.toFixed(2)} (rms residual ${fit.rms.toFixed(1)} s over ${pts.length} runs); default 3e-6 / 0.8 / 0.6`);
console.log(`load average at end ${load()}`);
if (a.json) fs.writeFileSync(a.json, JSON.stringify({ dims, halo, rows, auto: { tile: auto.tile, workers: auto.workers, threads: auto.threadsPerWorker, estimatedSeconds: auto.estimatedSeconds, explanation: auto.explanation }, best, fit, within, loadavg: os.loadavg() }, null, 2));
