// Real run memory vs the plan, over several tile configs, with the REGISTRY's cost (model 'xqsm', the stand-in's
// bytes as weights: invert takes bytes directly; the registry's sha256 only applies to loadWeights).
// Per config (core C, halo H, K workers × T threads): a fresh runtime; volume C×C×C for K = 1 (one tile) and
// 2C×C×C for K = 2 (two tiles, one per worker), mask all ones, smooth field. Compared, measured / planned:
//   each ORT worker's heap high-water  vs plan.bytesPerTile      (what the planner budgets per tile in flight)
//   sum of the worker high-waters      vs plan.activationBytes   (bytesPerTile × tiles in flight)
//   the C++ module heap                vs plan.moduleHeapBytes
//   module + workers                   vs plan.peakBytes
// The worker heaps include the ORT runtime and the weights (≈76 MB for xQSM, bench/CALIBRATION.md), which the
// plan does not count separately. When the planner caps tiles in flight at 1 (a tile over half the 1.5 GB budget)
// the K = 2 config would run exactly as K = 1: it is planned and printed but not run again.
//
// Usage:
//   node scripts/make_standins.js /tmp/standins        # once
//   node --no-experimental-fetch bench/memory-configs.js [--onnx /tmp/standins/xqsm-standin.onnx] [--model xqsm]
//        [--cores 24,56,88,120] [--halo 4] [--workers 1,2] [--threads 1] [--json out.json]
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import { createTessera } from '../bindings/js/index.js';
import { readStandin, loadavg } from './common.js';

const { values: a } = parseArgs({
  options: {
    onnx: { type: 'string', default: '/tmp/standins/xqsm-standin.onnx' },
    model: { type: 'string', default: 'xqsm' },
    cores: { type: 'string', default: '24,56,88,120' },
    halo: { type: 'string', default: '4' },
    workers: { type: 'string', default: '1,2' },
    threads: { type: 'string', default: '1' },
    json: { type: 'string' },
  },
});
const weights = readStandin(a.onnx);
const halo = Number(a.halo);
const threads = Number(a.threads);
const mb = (b) => (b / 1e6).toFixed(1);
const load = loadavg;

const probe = await createTessera({ workers: 1 });
const info = await probe.model(a.model);
await probe.terminate();
console.log(`memory configs, node ${process.version}, ${os.cpus()[0].model} × ${os.cpus().length}, ${a.onnx} as model '${a.model}' ` +
  `(registry: ${info.bytesPerVoxel} B/voxel, divisor ${info.divisor}, ${info.costSource}); ${threads} thread(s)/worker; load average ${load()}`);

const rows = [];
for (const core of a.cores.split(',').map(Number)) {
  for (const workers of a.workers.split(',').map(Number)) {
    const dims = [workers * core, core, core];
    const nvox = dims[0] * dims[1] * dims[2];
    const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
    const mask = new Uint8Array(nvox).fill(1);
    const field = new Float32Array(nvox);
    for (let i = 0; i < nvox; i++) field[i] = 0.05 * Math.sin(0.013 * i) + 0.05 * Math.cos(0.0071 * i + 1);
    const tile = { core, halo };
    const t = await createTessera({ workers, threadsPerWorker: threads, hardwareThreads: 2 });
    try {
      const plan = await t.plan({ geometry, mask, model: a.model, tile, workers });
      const row = { core, halo, workers, threads, dims, plan };
      rows.push(row);
      if (!plan.feasible) {
        console.log(`  core ${core} K=${workers}: not feasible: ${plan.message}`);
        continue;
      }
      if (workers > 1 && plan.tilesInFlight < workers) {
        row.skipped = `planner caps tiles in flight at ${plan.tilesInFlight}: runs as ${plan.tilesInFlight} worker(s)`;
        console.log(`  core ${core} K=${workers}: ${row.skipped}; not run again`);
        continue;
      }
      const l0 = os.loadavg()[0];
      const t0 = performance.now();
      const { report } = await t.invert({ keepInputs: true, field, mask, geometry, model: a.model, weights, tile, workers, threadsPerWorker: threads });
      row.wall = (performance.now() - t0) / 1000;
      row.workerHeaps = report.memory.workerHeapHighWater;
      row.moduleHeap = report.memory.moduleHeapBytes;
      row.tilesRun = report.tilesRun;
      row.maxInFlight = report.maxInFlight;
      console.log(`  core ${core} K=${workers}: ${dims.join('×')}, ${report.tilesRun} tile(s) of ${plan.patchEdge}³, in flight ${report.maxInFlight}/${plan.tilesInFlight}, ` +
        `worker heaps ${row.workerHeaps.map(mb).join('/')} MB, module ${mb(row.moduleHeap)} MB, wall ${row.wall.toFixed(1)} s; load ${l0.toFixed(2)} → ${os.loadavg()[0].toFixed(2)}`);
    } finally {
      await t.terminate();
    }
  }
}

console.log(`\nmeasured / planned (plan at ${info.bytesPerVoxel} B/voxel, model '${a.model}'); MB = 10^6 B; worker heaps include runtime + weights`);
console.log('core  K  patch  in flight  worker max MB  bytesPerTile MB  ratio  sum workers MB  activationBytes MB  ratio  module MB  moduleHeapBytes MB  ratio  peak MB  peakBytes MB  ratio');
for (const r of rows) {
  const p = r.plan;
  const head = `${String(r.core).padStart(4)}  ${r.workers}  ${String(p.patchEdge ?? '').padStart(4)}³  ${String(p.tilesInFlight).padStart(9)}`;
  if (!r.workerHeaps) {
    console.log(`${head}  ${r.skipped ?? p.message}`);
    continue;
  }
  const wmax = Math.max(...r.workerHeaps);
  const wsum = r.workerHeaps.reduce((s, x) => s + x, 0);
  const peak = wsum + r.moduleHeap;
  console.log(`${head}  ${mb(wmax).padStart(13)}  ${mb(p.bytesPerTile).padStart(15)}  ${(wmax / p.bytesPerTile).toFixed(2).padStart(5)}  ` +
    `${mb(wsum).padStart(14)}  ${mb(p.activationBytes).padStart(18)}  ${(wsum / p.activationBytes).toFixed(2).padStart(5)}  ` +
    `${mb(r.moduleHeap).padStart(9)}  ${mb(p.moduleHeapBytes).padStart(18)}  ${(r.moduleHeap / p.moduleHeapBytes).toFixed(2).padStart(5)}  ` +
    `${mb(peak).padStart(7)}  ${mb(p.peakBytes).padStart(12)}  ${(peak / p.peakBytes).toFixed(2).padStart(5)}`);
}
console.log(`load average at end ${load()}`);
if (a.json) fs.writeFileSync(a.json, JSON.stringify({ model: a.model, bytesPerVoxel: info.bytesPerVoxel, loadavg: os.loadavg(), rows }, null, 2));
