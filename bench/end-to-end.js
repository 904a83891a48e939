// End to end on a head-sized volume with tile 'auto': the planner chooses core, workers and threads
// (hardwareThreads = the machine's cores unless --hardware-threads), the run does what it chose. Prints wall time
// (around invert(): includes ORT worker start + session creation), the driver's run time, tiles, peak memory
// (C++ module heap + every ORT worker's heap high-water) vs plan.peakBytes, and the planner's estimatedSeconds vs
// the measured wall. The phantom is made in a separate runtime (its 2× padded FFT forward model would otherwise
// raise the module heap high-water of the measured run, see bench/memory-run.js).
//
// Usage:
//   node scripts/make_standins.js /tmp/standins        # once
//   node --no-experimental-fetch bench/end-to-end.js [--onnx /tmp/standins/xqsm-standin.onnx] [--model xqsm]
//        [--dims 256,256,176] [--hardware-threads 2] [--json out.json]
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import { createTessera } from '../bindings/js/index.js';
import { readStandin, loadavg } from './common.js';

const { values: a } = parseArgs({
  options: {
    onnx: { type: 'string', default: '/tmp/standins/xqsm-standin.onnx' },
    model: { type: 'string', default: 'xqsm' },
    dims: { type: 'string', default: '256,256,176' },
    'hardware-threads': { type: 'string', default: String(os.cpus().length) },
    json: { type: 'string' },
  },
});
const weights = readStandin(a.onnx);
const dims = a.dims.split(',').map(Number);
const nvox = dims[0] * dims[1] * dims[2];
const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
const hw = Number(a['hardware-threads']);
const mb = (b) => (b / 1e6).toFixed(1);
const load = loadavg;

console.log(`end to end, node ${process.version}, ${os.cpus()[0].model} × ${os.cpus().length}, ${a.onnx} as model '${a.model}', ` +
  `volume ${dims.join('×')} (${nvox} voxels), tile 'auto', hardwareThreads ${hw}; load average ${load()}`);
const maker = await createTessera({ workers: 1 });
const tp = performance.now();
const ph = await maker.phantom({ geometry, seed: 1 });
await maker.terminate();
const maskVoxels = ph.mask.reduce((s, v) => s + v, 0);
console.log(`phantom (separate runtime): ${((performance.now() - tp) / 1000).toFixed(1)} s, mask ${maskVoxels} voxels (${((100 * maskVoxels) / nvox).toFixed(1)} %)`);

const t = await createTessera({ hardwareThreads: hw });
let out;
try {
  const plan = await t.plan({ geometry, mask: ph.mask, model: a.model, tile: 'auto' });
  console.log(`plan: ${plan.explanation}`);
  let lastLog = 0;
  const l0 = os.loadavg()[0];
  const t0 = performance.now();
  const { report } = await t.invert({
    keepInputs: true,
    field: ph.field, mask: ph.mask, geometry, model: a.model, weights, tile: 'auto',
    onProgress: (p) => {
      if (p.elapsedSeconds - lastLog >= 30 || p.done === p.total) {
        lastLog = p.elapsedSeconds;
        console.log(`  ${p.done}/${p.total} tiles, ${p.elapsedSeconds.toFixed(0)} s, eta ${p.etaSeconds == null ? '—' : p.etaSeconds.toFixed(0)} s; load ${os.loadavg()[0].toFixed(2)}`);
      }
    },
  });
  const wall = (performance.now() - t0) / 1000;
  const p = report.plan;
  const workers = report.memory.workerHeapHighWater;
  const wsum = workers.reduce((s, x) => s + x, 0);
  const ts = [...report.tileSeconds].sort((x, y) => x - y);
  out = { dims, plan: p, wall, run: report.wallSeconds, tilesRun: report.tilesRun, tilesSkipped: report.tilesSkipped, workers, moduleHeap: report.memory.moduleHeapBytes, tileSecondsMedian: ts[ts.length >> 1], load: [l0, os.loadavg()[0]] };
  console.log(`\nend to end, ${dims.join('×')}, xQSM-shaped stand-in, tile 'auto' → core ${p.tile.core} halo ${p.tile.halo}, ${p.workers} worker(s) × ${p.threadsPerWorker} thread(s), patch ${p.patchEdge}³`);
  console.log('quantity                                   value');
  console.log(`wall (invert, incl. worker start)   ${wall.toFixed(1).padStart(12)} s`);
  console.log(`driver run (report.wallSeconds)     ${report.wallSeconds.toFixed(1).padStart(12)} s`);
  console.log(`planner estimatedSeconds            ${p.estimatedSeconds.toFixed(1).padStart(12)} s   measured/estimated ${(wall / p.estimatedSeconds).toFixed(1)}×`);
  console.log(`tiles run / skipped                 ${String(report.tilesRun).padStart(12)} / ${report.tilesSkipped}`);
  console.log(`median s per tile (worker)          ${ts[ts.length >> 1].toFixed(2).padStart(12)} s   (${(ts[ts.length >> 1] / p.patchEdge ** 3).toExponential(2)} s/patch voxel)`);
  console.log(`voxels/s (volume / wall)            ${Math.round(nvox / wall).toString().padStart(12)}`);
  console.log(`module heap (measured / planned)    ${mb(report.memory.moduleHeapBytes).padStart(12)} MB / ${mb(p.moduleHeapBytes)} MB`);
  console.log(`worker heap high-waters             ${workers.map(mb).join(' + ').padStart(12)} MB (plan: ${mb(p.bytesPerTile)} MB/tile × ${p.tilesInFlight} = ${mb(p.activationBytes)} MB)`);
  console.log(`peak (module + workers)             ${mb(report.memory.moduleHeapBytes + wsum).padStart(12)} MB / plan.peakBytes ${mb(p.peakBytes)} MB = ${((report.memory.moduleHeapBytes + wsum) / p.peakBytes).toFixed(2)}`);
  console.log(`load average at end ${load()}`);
} finally {
  await t.terminate();
}
if (a.json) fs.writeFileSync(a.json, JSON.stringify(out, null, 2));
