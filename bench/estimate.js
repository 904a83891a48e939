// The planner's time estimate before Run against the measured wall time, without and with this machine's speed probe
// (measureSpeed: a few whole patches at two edges in a one-worker pool, on the threads the plan uses). For each volume:
// the registry/default estimate, the probe's points and its own cost, the estimate with the measured speed, and the
// wall time of invert() run on the measured plan. The run takes the probe's worker when it can (warm start, like the
// page's Run after Measure speed); --cold gives it back first, so the run starts its own (worker start + session
// creation counted in the estimate and the wall). The phantom is made in a separate runtime. The load average is
// printed with every line.
//
// Usage:
//   node --no-experimental-fetch bench/estimate.js [--onnx web/models/demo-unet.onnx] [--model demo-unet]
//        [--dims 160,160,128 --dims 256,256,176] [--quality faithful] [--hardware-threads N] [--cold]
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import { createTessera } from '../bindings/js/index.js';
import { loadavg } from './common.js';

const { values: a } = parseArgs({
  options: {
    onnx: { type: 'string', default: 'web/models/demo-unet.onnx' },
    model: { type: 'string', default: 'demo-unet' },
    dims: { type: 'string', multiple: true, default: ['160,160,128', '256,256,176'] },
    quality: { type: 'string', default: 'faithful' },
    'hardware-threads': { type: 'string', default: String(os.cpus().length) },
    cold: { type: 'boolean', default: false },
  },
});
const weights = new Uint8Array(fs.readFileSync(a.onnx));
const hw = Number(a['hardware-threads']);
const cfg = (p) => (p.wholeVolume ? (p.crop ? `mask box ${p.patchDims.join('×')}` : 'whole') : p.crop ? `mask box in ${p.tilesActive} slabs of ${p.patchDims.join('×')}` : `core ${p.tile.core} halo ${p.tile.halo} stride ${p.tile.stride}, ${p.tilesActive} tiles, ${p.workers}×${p.threadsPerWorker}`);
console.log(`estimate vs wall, node ${process.version}, ${os.cpus()[0].model} × ${os.cpus().length}, ${a.onnx} as '${a.model}', quality ${a.quality}, hardwareThreads ${hw}`);

for (const d of a.dims) {
  const dims = d.split(',').map(Number);
  const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  const maker = await createTessera({ workers: 1 });
  const ph = await maker.phantom({ geometry, seed: 1 });
  await maker.terminate();
  const t = await createTessera({ hardwareThreads: hw });
  try {
    const request = { geometry, mask: ph.mask, model: a.model, quality: a.quality };
    const plain = await t.plan(request);
    const t0 = performance.now();
    const speed = await t.measureSpeed({ weights, model: a.model, threads: plain.threadsPerWorker || 1 });
    const probeWall = (performance.now() - t0) / 1000;
    if (a.cold) await t.release();
    const measured = await t.plan({ ...request, speed, weights: [weights] });
    const t1 = performance.now();
    const run = await t.invert({ keepInputs: true, ...request, field: ph.field, weights: [weights], plan: measured });
    const wall = (performance.now() - t1) / 1000;
    const pts = speed.points.map((p) => `${p.edge}³ ${p.seconds.toFixed(3)} s`).join(', ');
    console.log(`${dims.join('×')}: without probe (${plain.estimateSource}) ${plain.estimatedSeconds.toFixed(1)} s [${cfg(plain)}] ratio ${(plain.estimatedSeconds / wall).toFixed(2)}; ` +
      `probe ${probeWall.toFixed(1)} s (${pts}; start ${speed.startSeconds.toFixed(2)} s); with probe (${measured.estimateSource}) ` +
      `${measured.estimatedSeconds.toFixed(1)} s [${cfg(measured)}] ratio ${(measured.estimatedSeconds / wall).toFixed(2)}; ` +
      `measured wall ${wall.toFixed(1)} s (${run.report.pool[0].warmStart ? 'warm start: the probe\'s worker' : 'its own worker'}, heap ${run.report.memory.workerHeapVsPlan.toFixed(2)} of the plan); load ${loadavg()}`);
  } finally {
    await t.terminate();
  }
}
