// The deep stand-in (a QSMnet-shaped 4-level U-Net declared at 1,100 B/voxel, bench/speed.js's "deep") on the
// 160×160×128 phantom in node, one request per argument: its plan, χ against the same weights' whole-volume run
// (declared at 1 B/voxel so that it fits), the predicted NRMSE, the estimate and the run.
//
// Usage:
//   node --no-experimental-fetch bench/deep-slabs.js '[{"crop":"off"},{}]'
import { createTessera } from '../bindings/js/index.js';
import { qsmnetStandin, qsmnetDivisor } from '../scripts/standins.js';
import { agreement } from './common.js';

const DEEP = { divisor: qsmnetDivisor(4), bytesPerVoxel: 1100 };
const weights = qsmnetStandin({ base: 8, levels: 4, kernel: 5 });
const geometry = { dims: [160, 160, 128], voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
const requests = JSON.parse(process.argv[2] ?? '[{"crop":"off"},{}]');
const t = await createTessera({ workers: 2, hardwareThreads: 2, threadsPerWorker: 1 });
try {
  const { field, mask } = await t.phantom({ geometry, seed: 1 });
  const ref = (await t.invert({ field, mask, geometry, spec: { ...DEEP, bytesPerVoxel: 1 }, weights, whole: true, crop: 'off' })).chi;
  console.log('| request | plan | predicted NRMSE | r / NRMSE vs whole | estimated s | run s |');
  console.log('|---|---|---:|---:|---:|---:|');
  for (const extra of requests) {
    const { chi, report } = await t.invert({ field, mask, geometry, spec: DEEP, weights, ...extra });
    const p = report.plan;
    const g = agreement(chi, ref, mask);
    const s = p.crop?.split;
    const plan = s?.pieces > 1 ? `${s.pieces} slabs along ${'xyz'[s.axis]}, halo ${s.halo}, ${p.patchDims.join('×')}` : `${p.tilesActive} × ${p.patchDims.join('×')}`;
    console.log(`| ${JSON.stringify(extra)} | ${plan} | ${p.predictedFidelity?.nrmse?.toFixed(3)} | ${g.r.toFixed(4)} / ${g.nrmse.toFixed(3)} | ` +
      `${p.estimatedSeconds.toFixed(1)} | ${report.wallSeconds.toFixed(1)} |`);
  }
} finally {
  await t.terminate();
}
process.exit(0);
