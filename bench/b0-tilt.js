// B0 off the third axis (issue #13): what ignoring the tilt costs a network that assumes B0 along the third axis, against
// resampling the field to a B0-aligned grid and χ back (b0Align). On the phantom, for each tilt θ, the phantom's field is
// the forward model with B0 tilted by θ (the same χ truth and mask at every θ), and the demo network runs on the whole
// volume through the product (invert(), ONNX Runtime Web):
//   ignore    b0Align 'off': the tilted field as if B0 were along z
//   resample  b0Align 'on': the field resampled (cubic B-spline) to the B0-aligned grid, the network there, χ resampled back
// Each χ is compared inside the mask with the θ = 0 run of the same network (the untilted answer) and with the phantom's
// truth χ. The interpolation alone (no network): the tilted field, and the untilted answer χ, resampled there and back
// (tessera.b0Resample), with the cubic B-spline the runs use, Keys' cubic convolution and trilinear, against themselves.
//
// Usage:
//   node --no-experimental-fetch bench/b0-tilt.js [--dims 128,128,96] [--voxel 1,1,1] [--angles 0,5,10,15,20,30]
//        [--azimuth 30] [--threads 2] [--onnx web/models/demo-unet.onnx]
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import { createTessera } from '../bindings/js/index.js';
import { loadavg } from './common.js';

const { values: a } = parseArgs({
  options: {
    dims: { type: 'string', default: '128,128,96' },
    voxel: { type: 'string', default: '1,1,1' },
    angles: { type: 'string', default: '0,5,10,15,20,30' },
    azimuth: { type: 'string', default: '30' },
    threads: { type: 'string', default: '2' },
    onnx: { type: 'string', default: 'web/models/demo-unet.onnx' },
  },
});
const dims = a.dims.split(',').map(Number);
const voxelMm = a.voxel.split(',').map(Number);
const angles = a.angles.split(',').map(Number);
const azimuth = (Number(a.azimuth) * Math.PI) / 180;
const threads = Number(a.threads);
const weights = new Uint8Array(fs.readFileSync(a.onnx));
const model = 'demo-unet';

/** B0 tilted by deg from the third axis, towards the azimuth in the x-y plane. */
function b0Dir(deg) {
  const t = (deg * Math.PI) / 180;
  return [Math.sin(t) * Math.cos(azimuth), Math.sin(t) * Math.sin(azimuth), Math.cos(t)];
}

/** r (Pearson) and NRMSE = ‖test − ref‖ / ‖ref‖ inside mask. */
function agreement(test, ref, mask) {
  let n = 0, st = 0, sr = 0;
  for (let i = 0; i < mask.length; i++) if (mask[i]) { n++; st += test[i]; sr += ref[i]; }
  const mt = st / n, mr = sr / n;
  let ctr = 0, ctt = 0, crr = 0, d2 = 0, r2 = 0;
  for (let i = 0; i < mask.length; i++) {
    if (!mask[i]) continue;
    const t = test[i] - mt, r = ref[i] - mr;
    ctr += t * r; ctt += t * t; crr += r * r;
    d2 += (test[i] - ref[i]) ** 2; r2 += ref[i] ** 2;
  }
  return { r: ctr / Math.sqrt(ctt * crr), nrmse: Math.sqrt(d2 / r2) };
}

const f3 = (x) => x.toFixed(3);
const tessera = await createTessera({ workers: 1, threadsPerWorker: threads, hardwareThreads: threads });
console.log(`B0 tilt, node ${process.version}, ${os.cpus()[0].model} × ${os.cpus().length}, ${a.onnx} whole volume, ${threads} threads, ` +
  `phantom ${dims.join('×')} at ${voxelMm.join('×')} mm, azimuth ${a.azimuth}°; load ${loadavg()}`);

async function run(geometry, field, mask, b0Align) {
  const t0 = performance.now();
  const { chi: { data: chi }, report } = await tessera.invert({ keepInputs: true, field, mask, geometry, model, weights, whole: true, b0Align });
  return { chi, report, seconds: (performance.now() - t0) / 1000 };
}

const upright = { dims, voxelMm, b0Dir: [0, 0, 1] };
const base = await tessera.phantom({ geometry: upright, seed: 1 });
const truth = base.chi;
const mask = base.mask;
const untilted = await run(upright, base.field, mask, 'off');
console.log(`untilted answer: ${untilted.seconds.toFixed(1)} s, vs truth r ${f3(agreement(untilted.chi, truth, mask).r)}, ` +
  `NRMSE ${f3(agreement(untilted.chi, truth, mask).nrmse)}`);

const rows = [];
for (const deg of angles) {
  const geometry = { dims, voxelMm, b0Dir: b0Dir(deg) };
  const { field } = deg === 0 ? base : await tessera.phantom({ geometry, seed: 1 });
  const ignore = deg === 0 ? untilted : await run(geometry, field, mask, 'off');
  const resample = await run(geometry, field, mask, 'on');
  const spline = await tessera.b0Resample({ field, mask, geometry });
  const cubic = await tessera.b0Resample({ field, mask, geometry, interpolation: 'cubic' });
  const linear = await tessera.b0Resample({ field, mask, geometry, interpolation: 'linear' });
  const chiTrip = await tessera.b0Resample({ field: untilted.chi, mask, geometry });
  const row = {
    deg,
    aligned: resample.report.b0Align?.alignedDims?.join('×') ?? '(none)',
    ignore: { vsUntilted: agreement(ignore.chi, untilted.chi, mask), vsTruth: agreement(ignore.chi, truth, mask), s: ignore.seconds },
    resample: { vsUntilted: agreement(resample.chi, untilted.chi, mask), vsTruth: agreement(resample.chi, truth, mask), s: resample.seconds },
    fieldSpline: agreement(spline.back, field, mask),
    fieldCubic: agreement(cubic.back, field, mask),
    fieldLinear: agreement(linear.back, field, mask),
    chiSpline: agreement(chiTrip.back, untilted.chi, mask),
  };
  rows.push(row);
  console.log(`θ ${deg}°: ignore vs untilted r ${f3(row.ignore.vsUntilted.r)} NRMSE ${f3(row.ignore.vsUntilted.nrmse)} (${row.ignore.s.toFixed(1)} s); ` +
    `resample r ${f3(row.resample.vsUntilted.r)} NRMSE ${f3(row.resample.vsUntilted.nrmse)} (${row.resample.s.toFixed(1)} s, grid ${row.aligned}); ` +
    `interpolation: field spline ${f3(row.fieldSpline.nrmse)} cubic ${f3(row.fieldCubic.nrmse)} linear ${f3(row.fieldLinear.nrmse)}, χ spline ${f3(row.chiSpline.nrmse)}; load ${loadavg()}`);
}

console.log('\n| θ | ignore: vs untilted r / NRMSE | resample: vs untilted r / NRMSE | ignore: vs truth r / NRMSE | resample: vs truth r / NRMSE | ' +
  'interpolation only, NRMSE: field spline / cubic / linear, χ spline | aligned grid | seconds ignore / resample |');
console.log('|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  const p = (x) => `${f3(x.r)} / ${f3(x.nrmse)}`;
  console.log(`| ${r.deg}° | ${p(r.ignore.vsUntilted)} | ${p(r.resample.vsUntilted)} | ${p(r.ignore.vsTruth)} | ${p(r.resample.vsTruth)} | ` +
    `${f3(r.fieldSpline.nrmse)} / ${f3(r.fieldCubic.nrmse)} / ${f3(r.fieldLinear.nrmse)}, ${f3(r.chiSpline.nrmse)} | ${r.aligned} | ${r.ignore.s.toFixed(1)} / ${r.resample.s.toFixed(1)} |`);
}
const over = rows.find((r) => r.ignore.vsUntilted.nrmse > 0.05);
const wins = rows.find((r) => r.deg > 0 && r.resample.vsUntilted.nrmse < r.ignore.vsUntilted.nrmse);
console.log(`\nignoring the tilt first costs NRMSE > 0.05 against the untilted answer at: ${over ? `${over.deg}°` : 'none of these angles'}; ` +
  `resampling first beats ignoring at: ${wins ? `${wins.deg}°` : 'none of these angles'}`);
await tessera.terminate();
