// How long plan() takes: the auto-planner's search (every core, halo and stride on the mask's exact patch voxels, the
// mask's box in slabs) for the phantoms and the networks of the speed benches, in node (the wasm32 module).
// --root names another checkout's root (with its dist/wasm built) to time its planner the same way; --check prints
// each plan's JSON without its id and seconds, for a diff between two checkouts (the same choices, the same figures).
//
// Usage:
//   node --no-experimental-fetch bench/plan-time.js [--dims 160,160,128/256,256,176/160,192,144] [--repeats 3]
//        [--root /path/to/other/checkout] [--check]
//
// Prints one line per phantom and network: the fastest of `repeats` plan() calls (mask in, plan out) and the plan.
import { parseArgs } from 'node:util';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { DEEP_SPEC, loadavg } from './common.js';

const { values: a } = parseArgs({
  options: {
    dims: { type: 'string', default: '160,160,128/256,256,176/160,192,144' },
    repeats: { type: 'string', default: '3' },
    root: { type: 'string' },
    check: { type: 'boolean', default: false },
  },
});
const root = a.root ? path.resolve(a.root) : path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const { createTessera } = await import(pathToFileURL(path.join(root, 'bindings/js/index.js')).href);
const t = await createTessera({ workers: 1 });
// The demo U-Net (the registry's), its divisor declared at the deep stand-in's xQSM-like cost, and that stand-in's spec.
const demo = await t.model('demo-unet');
const NETS = {
  demo: { model: 'demo-unet' },
  [`demo at ${DEEP_SPEC.bytesPerVoxel} B/voxel`]: { spec: { divisor: demo.divisor, bytesPerVoxel: DEEP_SPEC.bytesPerVoxel } },
  [`deep (divisor ${DEEP_SPEC.divisor}, ${DEEP_SPEC.bytesPerVoxel} B/voxel)`]: { spec: DEEP_SPEC },
};
const REQUESTS = a.check
  ? [{}, { quality: 'balanced' }, { quality: 'fast' }, { crop: 'off' }, { tile: { core: 48, halo: 12 } }, { workers: 2 }, { threadsPerWorker: 1 }, { cropMargin: 12 }]
  : [{}];
try {
  if (!a.check) console.log(`plan() time, ${root}, node ${process.version}, ${os.cpus()[0].model} × ${os.cpus().length}; load ${loadavg()}`);
  for (const dims of a.dims.split('/').map((d) => d.split(',').map(Number))) {
    const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
    const { mask } = await t.phantom({ geometry, seed: 1 });
    for (const [name, network] of Object.entries(NETS)) {
      for (const extra of REQUESTS) {
        let best = Infinity;
        let p;
        for (let i = 0; i < Number(a.repeats); i++) {
          const t0 = performance.now();
          p = await t.plan({ geometry, mask, ...network, ...extra });
          best = Math.min(best, (performance.now() - t0) / 1000);
        }
        if (a.check) {
          const { id, seconds, ...figures } = p;
          console.log(JSON.stringify({ dims, name, extra, plan: figures }));
        } else {
          console.log(`${dims.join('×')} ${name}: ${best.toFixed(3)} s; ${p.explanation.split(';')[0]}`);
        }
      }
    }
  }
} finally {
  await t.terminate();
}
