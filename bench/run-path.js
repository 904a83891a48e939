// The run path's own cost: the same tiled inversions through two checkouts of Tessera, side by side, so a change
// of the run path (e.g. the step API that replaced the polled bridge for field -> χ networks) is measured against
// the code before it. Each run uses a fresh runtime; runs alternate between the trees (A B A B …) so load drift hits
// both alike. Reported per tree: wall seconds of invert() (median and all), tiles run, seconds per tile, and the
// max |Δχ| between the trees (the same plan must give the same χ).
//
// Networks: "tiny" (one 3×3×3 convolution, 4 channels: the run path dominates), "demo" (the bundled demo U-Net,
// web/models/demo-unet.onnx: a real network) and "modl" (a 2-channel convolution stack inside the MoDL-QSM physics
// loop: the loop's FFTs, data-consistency steps and network calls; core 0 runs it on the whole volume).
//
// Usage (a second checkout, e.g. `git worktree add /tmp/before <commit>` with its dist/wasm built):
//   node --no-experimental-fetch bench/run-path.js --a . --b /tmp/before [--dims 128,128,96] [--core 16 --halo 4]
//        [--net tiny|demo|modl] [--workers 2] [--repeats 3]
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { convStack, twoChannel } from '../tests/js/networks.js';
import { loadavg } from './common.js';

const { values: a } = parseArgs({
  options: {
    a: { type: 'string', default: '.' },
    b: { type: 'string' },
    dims: { type: 'string', default: '128,128,96' },
    core: { type: 'string', default: '16' },
    halo: { type: 'string', default: '4' },
    net: { type: 'string', default: 'tiny' },
    workers: { type: 'string', default: '2' },
    repeats: { type: 'string', default: '3' },
  },
});
if (!a.b) throw new Error('give --b DIR: the checkout to compare with');
const dims = a.dims.split(',').map(Number);
const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
const tile = Number(a.core) > 0 ? { core: Number(a.core), halo: Number(a.halo) } : undefined;
const workers = Number(a.workers);
const repeats = Number(a.repeats);
const trees = [a.a, a.b].map((d) => path.resolve(d));
const api = await Promise.all(trees.map((d) => import(pathToFileURL(path.join(d, 'bindings/js/index.js')).href)));
const NETS = {
  tiny: () => ({ weights: convStack({ layers: 1, channels: 4 }), spec: { divisor: 1, bytesPerVoxel: 1100 } }),
  demo: () => ({ weights: new Uint8Array(fs.readFileSync(path.join(trees[0], 'web/models/demo-unet.onnx'))), model: 'demo-unet' }),
  modl: () => ({ weights: twoChannel(), model: 'modl-qsm' }),
};
if (!NETS[a.net]) throw new Error(`--net must be one of ${Object.keys(NETS).join(', ')}, got ${a.net}`);
const { weights, spec, model } = NETS[a.net]();

// The phantom, once, from tree A.
const maker = await api[0].createTessera({ workers: 1 });
const { field, mask } = await maker.phantom({ geometry, seed: 1 });
await maker.terminate();

const runs = trees.map(() => []);
const chis = [];
for (let r = 0; r < repeats; r++) {
  for (let t = 0; t < trees.length; t++) {
    const tessera = await api[t].createTessera({ workers, threadsPerWorker: 1 });
    const t0 = performance.now();
    const { chi: { data: chi }, report } = await tessera.invert({ keepInputs: true, field, mask, geometry, model, spec, weights, workers, ...(tile ? { tile } : { whole: true }) });
    const wall = (performance.now() - t0) / 1000;
    await tessera.terminate();
    runs[t].push({ wall, tiles: report.tilesRun, driver: report.wallSeconds });
    if (r === 0) chis[t] = chi;
  }
}
let maxDiff = 0;
for (let i = 0; i < chis[0].length; i++) maxDiff = Math.max(maxDiff, Math.abs(chis[0][i] - chis[1][i]));
const median = (xs) => [...xs].sort((p, q) => p - q)[Math.floor(xs.length / 2)];
const how = tile ? `core ${tile.core} / halo ${tile.halo}` : 'whole volume';
console.log(`run path: ${a.net} network, ${dims.join('×')} phantom, ${how}, ${workers} workers × 1 thread, ${repeats} repeats, load ${loadavg()}`);
for (let t = 0; t < trees.length; t++) {
  const w = runs[t].map((x) => x.wall);
  console.log(
    `  ${t === 0 ? 'A' : 'B'} ${trees[t]}: median ${median(w).toFixed(2)} s (${w.map((x) => x.toFixed(2)).join(', ')}), ` +
      `${runs[t][0].tiles} tiles, ${((median(w) / runs[t][0].tiles) * 1000).toFixed(1)} ms per tile`,
  );
}
const ratio = median(runs[0].map((x) => x.wall)) / median(runs[1].map((x) => x.wall));
console.log(`  A / B wall = ${ratio.toFixed(3)}; max |Δχ| between A and B = ${maxDiff.toExponential(2)}`);
