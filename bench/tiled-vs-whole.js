// Tiled vs whole-volume through the API on a volume where the whole volume fits the 2.5 GB single-patch limit:
// wall time, ratio to the whole-volume run, voxels per second (volume voxels / wall), patch voxels run, and
// Pearson r of each tiled χ against the whole-volume χ inside the mask.
// The phantom (head-shaped, ellipsoid mask) is made in a separate runtime (see bench/memory-run.js); each config
// runs in its own fresh runtime. "wall" is measured around invert() (includes ORT worker start + session
// creation); "run" is report.wallSeconds (the driver's loop only).
//
// Usage:
//   node scripts/make_standins.js /tmp/standins        # once
//   node --no-experimental-fetch bench/tiled-vs-whole.js [--onnx /tmp/standins/xqsm-standin.onnx]
//        [--dims 128,128,96] [--configs whole:1x2,56:1x2,56:2x1,auto] [--halo 4] [--json out.json]
// A config is  whole:KxT | CORE:KxT | auto  (K workers × T ORT threads; auto = tile 'auto', the planner chooses
// core, workers and threads on hardwareThreads 2).
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import { createTessera } from '../bindings/js/index.js';
import { readStandin, loadavg } from './common.js';

const { values: a } = parseArgs({
  options: {
    onnx: { type: 'string', default: '/tmp/standins/xqsm-standin.onnx' },
    dims: { type: 'string', default: '128,128,96' },
    configs: { type: 'string', default: 'whole:1x2,56:1x2,56:2x1,auto' },
    halo: { type: 'string', default: '4' },
    model: { type: 'string', default: 'xqsm' },
    json: { type: 'string' },
  },
});
const weights = readStandin(a.onnx);
const dims = a.dims.split(',').map(Number);
const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
const nvox = dims[0] * dims[1] * dims[2];
const halo = Number(a.halo);
const load = loadavg;

function pearson(x, y, mask) {
  let n = 0, sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  for (let i = 0; i < x.length; i++) {
    if (!mask[i]) continue;
    n++; sx += x[i]; sy += y[i]; sxx += x[i] * x[i]; syy += y[i] * y[i]; sxy += x[i] * y[i];
  }
  const cov = sxy / n - (sx / n) * (sy / n);
  return cov / Math.sqrt((sxx / n - (sx / n) ** 2) * (syy / n - (sy / n) ** 2));
}

function parseConfig(s) {
  if (s === 'auto') return { name: 'auto', tile: 'auto' };
  const [what, kt = '1x2'] = s.split(':');
  const [workers, threads] = kt.split('x').map(Number);
  if (what === 'whole') return { name: `whole ${workers}×${threads}`, whole: true, workers, threads };
  return { name: `core ${what} halo ${halo} ${workers}×${threads}`, tile: { core: Number(what), halo }, workers, threads };
}

console.log(`tiled vs whole, node ${process.version}, ${os.cpus()[0].model} × ${os.cpus().length}, ${a.onnx} as model '${a.model}', ` +
  `volume ${dims.join('×')} (${nvox} voxels); load average ${load()}`);
const maker = await createTessera({ workers: 1 });
const ph = await maker.phantom({ geometry, seed: 1 });
await maker.terminate();
const maskVoxels = ph.mask.reduce((s, v) => s + v, 0);
console.log(`phantom mask: ${maskVoxels} voxels (${((100 * maskVoxels) / nvox).toFixed(1)} %)`);

const rows = [];
for (const c of a.configs.split(',').map(parseConfig)) {
  const t = await createTessera({ workers: c.workers ?? 2, threadsPerWorker: c.threads ?? 1, hardwareThreads: 2 });
  try {
    const req = { field: ph.field, mask: ph.mask, geometry, model: a.model, weights };
    if (c.whole) Object.assign(req, { whole: true, workers: c.workers, threadsPerWorker: c.threads });
    else if (c.tile === 'auto') Object.assign(req, { tile: 'auto' });
    else Object.assign(req, { tile: c.tile, workers: c.workers, threadsPerWorker: c.threads });
    const l0 = os.loadavg()[0];
    const t0 = performance.now();
    const { chi: { data: chi }, report } = await t.invert({ ...req, keepInputs: true });
    const wall = (performance.now() - t0) / 1000;
    const p = report.plan;
    const pd = p.patchDims;
    const row = {
      name: c.tile === 'auto' ? `auto → core ${p.tile.core} halo ${p.tile.halo} ${p.workers}×${p.threadsPerWorker}` : c.name,
      wall,
      run: report.wallSeconds,
      tiles: report.tilesRun,
      patchVoxels: report.tilesRun * pd[0] * pd[1] * pd[2],
      estimatedSeconds: p.estimatedSeconds,
      load: [l0, os.loadavg()[0]],
      chi,
    };
    rows.push(row);
    console.log(`  ${row.name}: wall ${wall.toFixed(1)} s (run ${row.run.toFixed(1)} s), ${row.tiles} tile(s) of ${pd.join('×')}; load ${l0.toFixed(2)} → ${os.loadavg()[0].toFixed(2)}`);
  } finally {
    await t.terminate();
  }
}
const whole = rows.find((r) => r.name.startsWith('whole'));
console.log(`\nvolume ${dims.join('×')} = ${nvox} voxels; xQSM-shaped stand-in; ratio = wall / whole-volume wall`);
console.log('config                                 wall s   run s  tiles  patch voxels  overhead  voxels/s  wall ratio  r vs whole  planner est. s');
for (const r of rows) {
  console.log(`${r.name.padEnd(37)}  ${r.wall.toFixed(1).padStart(6)}  ${r.run.toFixed(1).padStart(6)}  ${String(r.tiles).padStart(5)}  ` +
    `${String(r.patchVoxels).padStart(12)}  ${(r.patchVoxels / nvox).toFixed(2).padStart(8)}  ${Math.round(nvox / r.wall).toString().padStart(8)}  ` +
    `${whole ? (r.wall / whole.wall).toFixed(2).padStart(10) : '         —'}  ${whole ? pearson(r.chi, whole.chi, ph.mask).toFixed(4).padStart(10) : '         —'}  ` +
    `${r.estimatedSeconds ? r.estimatedSeconds.toFixed(1).padStart(14) : '             —'}`);
}
console.log(`load average at end ${load()}`);
if (a.json) fs.writeFileSync(a.json, JSON.stringify({ dims, loadavg: os.loadavg(), rows: rows.map(({ chi, ...r }) => r) }, null, 2));
