// The default's fidelity and speed in the product itself (ONNX Runtime Web through invert()): on a phantom, a network
// declared at a cost that forbids the whole volume is inverted with the default settings (quality faithful) and with
// the speed-only planner (quality fast: the crop-and-stitch default before the fidelity-first planner); the same
// network at its real cost runs on the whole volume as the reference. Prints, per run: the plan, wall seconds, the
// tiles' voxels, r / NRMSE / max |Δ| against the whole-volume run inside the mask, and the self-check (verify).
//
// Usage:
//   node --no-experimental-fetch bench/fidelity-default.js [--onnx web/models/demo-unet.onnx] [--divisor 8]
//        [--real-cost B] [--fixed B] [--declared-cost 1100] [--dims 160,192,144] [--threads 2]
// --real-cost and --fixed (bytes per voxel, fixed bytes per worker) default to the registry's demo-unet figures.
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import { createTessera } from '../bindings/js/index.js';
import { loadavg } from './common.js';

const { values: a } = parseArgs({
  options: {
    onnx: { type: 'string', default: 'web/models/demo-unet.onnx' },
    divisor: { type: 'string', default: '8' },
    'real-cost': { type: 'string' },
    fixed: { type: 'string' },
    'declared-cost': { type: 'string', default: '1100' },
    dims: { type: 'string', default: '160,192,144' },
    threads: { type: 'string', default: '2' },
  },
});
const dims = a.dims.split(',').map(Number);
const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
const weights = new Uint8Array(fs.readFileSync(a.onnx));
const divisor = Number(a.divisor);
const cores = Number(a.threads);
const tessera = await createTessera({ workers: cores, hardwareThreads: cores });
const { field, mask } = await tessera.phantom({ geometry, seed: 1 });
console.log(`fidelity of the default, node ${process.version}, ${os.cpus()[0].model} × ${os.cpus().length}, ${a.onnx}, ` +
  `phantom ${dims.join('×')}, ${cores} cores for the planner; load ${loadavg()}`);

async function run(label, request) {
  const t0 = performance.now();
  const { chi: { data: chi }, report } = await tessera.invert({ keepInputs: true, field, mask, geometry, weights, ...request });
  // The run's own wall time (the tiles; the self-check after them is timed separately in report.verify.seconds).
  const total = (performance.now() - t0) / 1000;
  return { label, chi, report, seconds: report.wallSeconds ?? total, total };
}

const demo = await tessera.model('demo-unet');
const realCost = { divisor, bytesPerVoxel: Number(a['real-cost'] ?? demo.bytesPerVoxel), fixedBytes: Number(a.fixed ?? demo.fixedBytes) };
const whole = await run('whole volume (real cost)', { spec: realCost, whole: true });
console.log(`whole volume: ${whole.seconds.toFixed(1)} s`);
const declared = { divisor, bytesPerVoxel: Number(a['declared-cost']) };
const rows = [];
for (const quality of ['faithful', 'fast']) {
  const r = await run(quality, { spec: declared, quality, verify: true });
  rows.push(r);
}

/** r and NRMSE against the reference inside the mask. */
function agreement(x, ref) {
  let n = 0, sx = 0, sr = 0;
  for (let i = 0; i < mask.length; i++) if (mask[i]) (n++, (sx += x[i]), (sr += ref[i]));
  const mx = sx / n, mr = sr / n;
  let xx = 0, rr = 0, xr = 0, e = 0, ee = 0, maxAbs = 0;
  for (let i = 0; i < mask.length; i++) {
    if (!mask[i]) continue;
    const dx = x[i] - mx, dr = ref[i] - mr;
    xx += dx * dx, rr += dr * dr, xr += dx * dr;
    e += (x[i] - ref[i]) ** 2, ee += ref[i] * ref[i];
    maxAbs = Math.max(maxAbs, Math.abs(x[i] - ref[i]));
  }
  return { r: xr / Math.sqrt(xx * rr), nrmse: Math.sqrt(e / ee), maxAbs };
}

console.log('| quality | plan | tiles | patch voxels ÷ volume | run s (self-check s) | r vs whole | NRMSE vs whole | max |Δ| ppm | self-check r / NRMSE | predicted r / NRMSE |');
console.log('|---|---|---|---|---|---|---|---|---|---|');
const nvox = dims[0] * dims[1] * dims[2];
for (const r of rows) {
  const p = r.report.plan;
  const g = agreement(r.chi, whole.chi);
  const v = r.report.verify;
  const cfg = p.wholeVolume ? 'whole' : `core ${p.tile.core} halo ${p.tile.halo}${p.tile.stride < p.tile.core ? ` stride ${p.tile.stride} ${p.tile.blend}` : ''} (${p.patchEdge}³)`;
  console.log(`| ${r.label} | ${cfg} | ${p.tilesActive} | ${((p.tilesActive * p.patchEdge ** 3) / nvox).toFixed(2)} | ${r.seconds.toFixed(1)} (${v?.seconds?.toFixed(1) ?? '-'}) | ` +
    `${g.r.toFixed(4)} | ${g.nrmse.toFixed(3)} | ${g.maxAbs.toFixed(4)} | ${v?.possible ? `${v.r.toFixed(4)} / ${v.nrmse.toFixed(3)}` : v?.message ?? '-'} | ` +
    `${p.predictedFidelity.r.toFixed(4)} / ${p.predictedFidelity.nrmse.toFixed(3)} |`);
}
const [faithful, fast] = rows;
console.log(`faithful default / fast (the former crop-and-stitch default): ${(faithful.seconds / fast.seconds).toFixed(2)}× the wall time; ` +
  `whole-volume run ${whole.seconds.toFixed(1)} s`);
await tessera.terminate();
process.exit(0);
