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
//        [--dims 96,96,80] [--cores 24,56,88,120] [--halo 4] [--wt 1x1,1x2,2x1] [--runtimes node,chromium]
//        [--chromium /usr/bin/chromium] [--json out.json]
// --runtimes chromium runs the same grid (bench/sweep-runs.js) in headless Chromium on a cross-origin isolated page;
// with playwright-core, run it without --no-experimental-fetch (playwright needs the global Headers).
// (--dims 160,160,128 is the volume of the brief; on 2 shared cores it takes ≈ 25 min, see bench/RESULTS.md.)
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTessera } from '../bindings/js/index.js';
import { readStandin, loadavg } from './common.js';
import { sweepRuns } from './sweep-runs.js';
import { launchChromium, benchPage } from '../scripts/chromium.js';
import { startServer } from '../scripts/serve.js';

const { values: a } = parseArgs({
  options: {
    onnx: { type: 'string', default: '/tmp/standins/xqsm-standin.onnx' },
    model: { type: 'string', default: 'xqsm' },
    dims: { type: 'string', default: '96,96,80' },
    cores: { type: 'string', default: '24,56,88,120' },
    halo: { type: 'string', default: '4' },
    wt: { type: 'string', default: '1x1,1x2,2x1' },
    runtimes: { type: 'string', default: 'node' },
    chromium: { type: 'string', default: '/usr/bin/chromium' },
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

const cores = a.cores.split(',').map(Number);
const wts = a.wt.split(',').map((s) => s.split('x').map(Number));
const runtimes = a.runtimes.split(',');
const results = {};
const logLine = (text) => console.log(`  ${text}; load ${os.loadavg()[0].toFixed(2)}`);
if (runtimes.includes('node')) {
  console.log('node:');
  results.node = await sweepRuns({ createTessera, geometry, field: ph.field, mask: ph.mask, model: a.model, weights, cores, halo, wts, log: logLine });
  printSweep('node', results.node);
}
if (runtimes.includes('chromium')) {
  // The same runs in headless Chromium: a cross-origin isolated page imports the served package and bench/sweep-runs.js
  // and fetches the phantom and the weights.
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-sweep-'));
  const files = { field: ph.field, mask: ph.mask, weights };
  const overrides = {};
  for (const [what, data] of Object.entries(files)) {
    fs.writeFileSync(path.join(tmp, what), data);
    overrides[`/__sweep/${what}`] = path.join(tmp, what);
  }
  fs.writeFileSync(path.join(tmp, 'page.html'), `<!doctype html><meta charset="utf-8"><title>tessera sweep</title>
<script type="module">
import { createTessera } from '/bindings/js/index.js';
import { sweepRuns } from '/bench/sweep-runs.js';
const bytes = async (what) => new Uint8Array(await (await fetch('/__sweep/' + what)).arrayBuffer());
window.__run = async (c) => {
  if (!crossOriginIsolated) throw new Error('the page is not cross-origin isolated');
  const field = new Float32Array((await bytes('field')).buffer);
  return sweepRuns({ ...c, createTessera, field, mask: await bytes('mask'), weights: await bytes('weights'), log: window.__log });
};
window.__ready = true;
</script>`);
  overrides['/__sweep.html'] = path.join(tmp, 'page.html');
  const srv = await startServer({ overrides });
  const context = await launchChromium(path.join(tmp, 'profile'), a.chromium);
  try {
    const page = await benchPage(context);
    await page.exposeFunction('__log', logLine);
    await page.goto(`${srv.url}/__sweep.html`);
    await page.waitForFunction(() => window.__ready === true);
    console.log(`chromium (${await page.evaluate(() => navigator.userAgent)}):`);
    results.chromium = await page.evaluate((c) => window.__run(c), { geometry, model: a.model, cores, halo, wts });
  } finally {
    await context.close();
    await srv.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  printSweep('chromium', results.chromium);
}
console.log(`load average at end ${load()}`);
if (a.json) fs.writeFileSync(a.json, JSON.stringify({ dims, halo, ...results, loadavg: os.loadavg() }, null, 2));
process.exit(0);

/** The table, the planner's choice against the best measured, and the cubic model fitted to these walls. */
function printSweep(runtime, { rows, auto, autoRow }) {
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
  console.log(`\n${runtime}: sweep on ${dims.join('×')} (phantom mask), ${a.model} (${a.onnx}), halo ${halo}; wall = around invert() incl. worker start`);
  console.log('K×T  core  patch  active  in flight    wall s  vs best  est. default s  meas/est  est. fitted s  meas/est');
  for (const r of rows) {
    if (r.wall === undefined) { console.log(`${r.K}×${r.T}  ${String(r.core).padStart(4)}  not feasible: ${r.message}`); continue; }
    if (r.notCubic) {
      console.log(`${r.K}×${r.T}  ${r.kind} ${auto.patchDims.join('×')}: wall ${r.wall.toFixed(1)} s, ${(r.wall / best.wall).toFixed(2)}× best (the planner's choice; not a cubic tiling, outside the model's fit)`);
      continue;
    }
    const ed = estimate(r.patchEdge, r.active, r.inFlight, r.T, DEFAULT_MODEL);
    const ef = estimate(r.patchEdge, r.active, r.inFlight, r.T, fit);
    console.log(`${r.K}×${r.T}  ${String(r.core).padStart(4)}  ${String(r.patchEdge).padStart(4)}³  ${String(r.active).padStart(6)}  ${String(r.inFlight).padStart(9)}  ` +
      `${r.wall.toFixed(1).padStart(8)}  ${(r.wall / best.wall).toFixed(2).padStart(7)}  ${ed.toFixed(1).padStart(14)}  ${(r.wall / ed).toFixed(1).padStart(8)}  ` +
      `${ef.toFixed(1).padStart(13)}  ${(r.wall / ef).toFixed(2).padStart(8)}${r.repeated ? '  (= the K=1 run: planner caps in flight)' : ''}${r.extra ? '  (the planner\'s choice, outside the grid)' : ''}`);
  }
  // Two threads in one worker against one, per core: the speed-up and the Amdahl fraction it implies (f = 2(1 − 1/s)).
  for (const core of new Set(rows.map((r) => r.core))) {
    const w = (K, T) => rows.find((r) => r.core === core && r.K === K && r.T === T && r.wall !== undefined && !r.notCubic && !r.repeated)?.wall;
    if (w(1, 1) && w(1, 2)) {
      const s = w(1, 1) / w(1, 2);
      console.log(`core ${core}: 1×2 is ${s.toFixed(2)}× 1×1 (Amdahl fraction ${(2 * (1 - 1 / s)).toFixed(2)})` +
        `${w(2, 1) ? `, 2×1 is ${(w(1, 1) / w(2, 1)).toFixed(2)}×` : ''}`);
    }
  }
  const within = autoRow.wall <= 1.1 * best.wall;
  const choice = autoRow.notCubic ? `${autoRow.kind} ${auto.patchDims.join('×')}` : `core ${auto.tile.core} halo ${auto.tile.halo}`;
  console.log(`best measured: ${best.notCubic ? best.kind : `core ${best.core}`} ${best.K}×${best.T}, ${best.wall.toFixed(1)} s`);
  console.log(`planner's choice: ${choice} ${auto.workers}×${auto.threadsPerWorker}, estimated ${auto.estimatedSeconds.toFixed(1)} s, ` +
    `measured ${autoRow.wall.toFixed(1)} s = ${(autoRow.wall / best.wall).toFixed(2)}× best → ${within ? 'WITHIN' : 'NOT within'} 10 % of the best measured`);
  if (!Number.isFinite(fit.secondsPerVoxel)) console.log(`no fit: ${pts.length} cubic run(s) with distinct work, it needs at least 3`);
  else console.log(`fitted ThroughputModel (least squares on these walls): seconds_per_voxel ${fit.secondsPerVoxel.toExponential(3)}, parallel_fraction ${fit.parallelFraction.toFixed(3)}, ` +
    `worker_start_seconds ${fit.workerStart.toFixed(2)} (rms residual ${fit.rms.toFixed(1)} s over ${pts.length} runs); default 3e-6 / 0.8 / 0.6`);
  return { best, fit, within };
}
