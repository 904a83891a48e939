// The speed probe's estimate against the run it estimates, by how many times the probe times its pair of patches: the
// demo U-Net's default on a phantom, in node. Per trial and per repeats setting, a fresh runtime: the draft plan (its
// voxelsRun sizes the probe), measureSpeed({repeats}) (0: the default, C++'s rounds until the runs add up to
// leastSeconds), the plan with that speed, and the run, which takes the probe's worker.
//
// Usage:
//   node --no-experimental-fetch bench/probe-repeats.js [--dims 160,160,128] [--repeats 1,3,0] [--trials 3]
//
// Prints one line per run: the probe's seconds, each edge's timed runs (ms), the estimate, the run, estimate ÷ run.
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import { createTessera } from '../bindings/js/index.js';
import { loadavg } from './common.js';

const { values: a } = parseArgs({
  options: {
    dims: { type: 'string', default: '160,160,128' },
    repeats: { type: 'string', default: '1,3,0' },
    trials: { type: 'string', default: '3' },
  },
});
const geometry = { dims: a.dims.split(',').map(Number), voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
const weights = new Uint8Array(fs.readFileSync(new URL('../web/models/demo-unet.onnx', import.meta.url)));
const model = 'demo-unet';
console.log(`probe repeats, node ${process.version}, ${os.cpus()[0].model} × ${os.cpus().length}, demo U-Net, ${geometry.dims.join('×')}; load ${loadavg()}`);
console.log('| trial | repeats | probe s | smaller: runs ms | larger: runs ms | estimate s | run s | estimate ÷ run |');
console.log('|---:|---:|---:|---|---|---:|---:|---:|');
let phantom;
for (let trial = 1; trial <= Number(a.trials); trial++) {
  for (const repeats of a.repeats.split(',').map(Number)) {
    const t = await createTessera({ workers: 2, hardwareThreads: 2, threadsPerWorker: 1 });
    try {
      phantom ??= await t.phantom({ geometry, seed: 1 });
      const { field, mask } = phantom;
      const draft = await t.plan({ geometry, mask, model });
      const t0 = performance.now();
      const speed = await t.measureSpeed({ weights, model, threads: draft.threadsPerWorker, repeats: repeats || undefined, runVoxels: draft.voxelsRun });
      const probe = (performance.now() - t0) / 1000;
      const plan = await t.plan({ geometry, mask, model, speed });
      const { report } = await t.invert({ keepInputs: true, field, mask, geometry, model, weights, plan });
      const ms = (v) => v.map((x) => (1000 * x).toFixed(0)).join(' ');
      const [s, l] = speed.points.map((p) => p.edge);
      console.log(`| ${trial} | ${repeats || 'default'} | ${probe.toFixed(2)} | ${s}³: ${ms(speed.runs.small)} | ${l}³: ${ms(speed.runs.large)} | ` +
        `${plan.estimatedSeconds.toFixed(2)} | ${report.wallSeconds.toFixed(2)} | ${(plan.estimatedSeconds / report.wallSeconds).toFixed(2)}${report.pool?.[0]?.warmStart ? '' : ' (cold)'} |`);
    } finally {
      await t.terminate();
    }
  }
}
console.log(`load at end ${loadavg()}`);
process.exit(0);
