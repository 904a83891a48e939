// The deep stand-in's plans against its own whole-volume run, in node through invert(): the default plan, slabs at
// asked halos and any other requests, each with its prediction, the measured r / NRMSE against the whole volume,
// voxels run, the estimate and seconds. The whole-volume reference is the same weights declared at 1 B/voxel with
// crop off (the budget does not refuse it).
//   node --no-experimental-fetch bench/halo-sweep.js [--dims 160,160,128] [--halos default,2,32,48] [--requests '[{"crop":"off"}]']
import { parseArgs } from 'node:util';
import { createTessera } from '../bindings/js/index.js';
import { agreement, DEEP_SPEC, deepStandin } from './common.js';

const { values: args } = parseArgs({
  options: {
    dims: { type: 'string', default: '160,160,128' },
    halos: { type: 'string', default: 'default,2,32,48' },
    requests: { type: 'string', default: '[]' },
  },
});
const dims = args.dims.split(',').map(Number);
const asked = [
  ...(args.halos ? args.halos.split(',') : []).map((halo) => [halo, halo === 'default' ? {} : { tile: { core: 'auto', halo: Number(halo) } }]),
  ...JSON.parse(args.requests).map((r) => [JSON.stringify(r), r]),
];
const t = await createTessera({ hardwareThreads: 2 });
const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
const ph = await t.phantom({ geometry, seed: 1 });
const weights = deepStandin();
const volume = dims[0] * dims[1] * dims[2];
const run = { geometry, field: ph.field, mask: ph.mask, weights };
const whole = await t.invert({ ...run, spec: { ...DEEP_SPEC, bytesPerVoxel: 1 }, whole: true, crop: 'off' });
console.log(`deep stand-in, ${dims.join('×')}, whole volume ${whole.report.wallSeconds.toFixed(1)} s`);
console.log('| asked | plan | predicted r / NRMSE | measured r / NRMSE vs whole | voxels run ÷ volume | estimated s | wall s |');
console.log('|---|---|---:|---:|---:|---:|---:|');
for (const [name, request] of asked) {
  const { chi, report } = await t.invert({ ...run, spec: DEEP_SPEC, ...request });
  const g = agreement(chi, whole.chi, ph.mask);
  const p = report.plan;
  const s = p.crop?.split?.pieces > 1
    ? `${p.crop.split.pieces} slabs along ${'xyz'[p.crop.split.axis]}, halo ${p.crop.split.halo}, ${p.patchDims.join('×')}`
    : `${p.tilesActive} tiles`;
  const f = p.predictedFidelity;
  console.log(`| ${name} | ${s}${p.fidelityWarning ? ' (warned)' : ''} | ${f.r.toFixed(4)} / ${f.nrmse.toFixed(3)}${f.beyondFit ? ' (caution)' : ''} | ` +
    `${g.r.toFixed(4)} / ${g.nrmse.toFixed(3)} | ${(p.voxelsRun / volume).toFixed(2)} | ${p.estimatedSeconds.toFixed(1)} | ${report.wallSeconds.toFixed(1)} |`);
}
await t.terminate();
