// The deep stand-in's tilings against its own whole-volume run, in node through invert(): the default plan and slabs
// at asked halos, each with its prediction, the measured r / NRMSE against the whole volume, voxels run and seconds.
// The whole-volume reference is the same weights declared at 1 B/voxel with crop off (the budget does not refuse it).
//   node --no-experimental-fetch bench/halo-sweep.js [--dims 160,160,128] [--halos default,2,32,48]
import { parseArgs } from 'node:util';
import { createTessera } from '../bindings/js/index.js';
import { qsmnetStandin, qsmnetDivisor } from '../scripts/standins.js';
import { agreement } from './common.js';

const { values: args } = parseArgs({
  options: { dims: { type: 'string', default: '160,160,128' }, halos: { type: 'string', default: 'default,2,32,48' } },
});
const dims = args.dims.split(',').map(Number);
const t = await createTessera({ hardwareThreads: 2 });
const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
const ph = await t.phantom({ geometry, seed: 1 });
const weights = qsmnetStandin({ base: 8, levels: 4, kernel: 5 });
const divisor = qsmnetDivisor(4);
const volume = dims[0] * dims[1] * dims[2];
const whole = await t.invert({ geometry, field: ph.field, mask: ph.mask, spec: { divisor, bytesPerVoxel: 1 }, weights, whole: true, crop: 'off' });
console.log(`deep stand-in, ${dims.join('×')}, whole volume ${whole.report.wallSeconds.toFixed(1)} s`);
console.log('| asked | plan | predicted r / NRMSE | measured r / NRMSE vs whole | voxels run ÷ volume | wall s |');
console.log('|---|---|---:|---:|---:|---:|');
for (const halo of args.halos.split(',')) {
  const tile = halo === 'default' ? undefined : { core: 'auto', halo: Number(halo) };
  const { chi, report } = await t.invert({ geometry, field: ph.field, mask: ph.mask, spec: { divisor, bytesPerVoxel: 1100 }, weights, tile });
  const g = agreement(chi, whole.chi, ph.mask);
  const p = report.plan;
  const s = p.crop?.split?.pieces ? `${p.crop.split.pieces} slabs along ${'xyz'[p.crop.split.axis]}, halo ${p.crop.split.halo}` : `${p.tilesActive} tiles`;
  const f = p.predictedFidelity;
  console.log(`| ${halo} | ${s}${p.fidelityWarning ? ' (warned)' : ''} | ${f.r.toFixed(4)} / ${f.nrmse.toFixed(3)}${f.beyondFit ? ' (caution)' : ''} | ` +
    `${g.r.toFixed(4)} / ${g.nrmse.toFixed(3)} | ${(p.voxelsRun / volume).toFixed(2)} | ${report.wallSeconds.toFixed(1)} |`);
}
await t.terminate();
