// The deep stand-in's plans against its own whole-volume run, in node through invert(): the default plan, slabs at
// asked halos and any other requests, each with its prediction, the measured r / NRMSE against the whole volume and
// against the phantom's truth, voxels run, the estimate and seconds. The whole-volume reference is the same weights
// declared at 1 B/voxel with crop off (the budget does not refuse it). --pads also runs that reference on the volume
// zero-padded by P voxels on every face: how far the whole-volume answer itself moves with the zeros around the head.
// --onnx runs another network, declared at 1,100 B/voxel too (--divisor: its patch edges' divisor, the deep stand-in's 16).
// --probe measures the network's context (receptiveField({probe: true})) and adds the default plan given that profile.
//   node --no-experimental-fetch bench/halo-sweep.js [--dims 160,160,128] [--halos default,2,32,48]
//        [--requests '[{"crop":"off"}]'] [--pads 16,32] [--onnx deep-unet.onnx] [--divisor 16] [--probe]
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { createTessera } from '../bindings/js/index.js';
import { agreement, DEEP_SPEC, deepStandin } from './common.js';

const { values: args } = parseArgs({
  options: {
    dims: { type: 'string', default: '160,160,128' },
    halos: { type: 'string', default: 'default,2,32,48' },
    requests: { type: 'string', default: '[]' },
    pads: { type: 'string', default: '' },
    onnx: { type: 'string' },
    divisor: { type: 'string', default: String(DEEP_SPEC.divisor) },
    probe: { type: 'boolean', default: false },
  },
});
const dims = args.dims.split(',').map(Number);
const spec = { ...DEEP_SPEC, divisor: Number(args.divisor) };
const asked = [
  ...(args.halos ? args.halos.split(',') : []).map((halo) => [halo, halo === 'default' ? {} : { tile: { core: 'auto', halo: Number(halo) } }]),
  ...JSON.parse(args.requests).map((r) => [JSON.stringify(r), r]),
];
const t = await createTessera({ hardwareThreads: 2 });
const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
const ph = await t.phantom({ geometry, seed: 1 });
const weights = args.onnx ? new Uint8Array(fs.readFileSync(args.onnx)) : deepStandin();
const volume = dims[0] * dims[1] * dims[2];
const run = { geometry, field: ph.field, mask: ph.mask, weights };
const fit = (a) => `${a.r.toFixed(4)} / ${a.nrmse.toFixed(3)}`;
const whole = await t.invert({ keepInputs: true, ...run, spec: { ...spec, bytesPerVoxel: 1 }, whole: true, crop: 'off' });
console.log(`${args.onnx ?? 'deep stand-in (random weights)'}, ${dims.join('×')}, whole volume ${whole.report.wallSeconds.toFixed(1)} s, ` +
  `r / NRMSE vs truth ${fit(agreement(whole.chi.data, ph.chi, ph.mask))}`);

// The whole-volume run of the volume with P zero voxels added on every face, cut back to the volume.
for (const pad of args.pads ? args.pads.split(',').map(Number) : []) {
  const pd = dims.map((d) => d + 2 * pad);
  const at = (x, y, z, d, p) => x + p + d[0] * (y + p + d[1] * (z + p));
  const field = new Float32Array(pd[0] * pd[1] * pd[2]), mask = new Uint8Array(field.length);
  for (let z = 0; z < dims[2]; z++) for (let y = 0; y < dims[1]; y++) for (let x = 0; x < dims[0]; x++) {
    field[at(x, y, z, pd, pad)] = ph.field[at(x, y, z, dims, 0)];
    mask[at(x, y, z, pd, pad)] = ph.mask[at(x, y, z, dims, 0)];
  }
  const padded = await t.invert({ keepInputs: true, geometry: { ...geometry, dims: pd }, field, mask, weights, spec: { ...spec, bytesPerVoxel: 1 }, whole: true, crop: 'off' });
  const back = new Float32Array(volume);
  for (let z = 0; z < dims[2]; z++) for (let y = 0; y < dims[1]; y++) for (let x = 0; x < dims[0]; x++) back[at(x, y, z, dims, 0)] = padded.chi.data[at(x, y, z, pd, pad)];
  console.log(`whole volume with ${pad} zero voxels added on every face (${pd.join('×')}): r / NRMSE vs the whole volume ` +
    `${fit(agreement(back, whole.chi.data, ph.mask))}, vs truth ${fit(agreement(back, ph.chi, ph.mask))}`);
}

if (args.probe) {
  const { graph, probe } = await t.receptiveField({ weights, spec, probe: true });
  console.log(`context: graph radius ${graph.radiusMax}; measured radius90 ${probe.radius90}, radius99 ${probe.radius99} ` +
    `(probe edge ${probe.edge}, ${probe.seconds.toFixed(0)} s)`);
  asked.push(['default, measured context', { context: { within: probe.within } }]);
}
if (asked.length) {
  console.log('| asked | plan | predicted r / NRMSE | measured r / NRMSE vs whole | r / NRMSE vs truth | voxels run ÷ volume | estimated s | wall s |');
  console.log('|---|---|---:|---:|---:|---:|---:|---:|');
}
for (const [name, request] of asked) {
  const { chi: { data: chi }, report } = await t.invert({ keepInputs: true, ...run, spec, ...request });
  const p = report.plan;
  const s = p.crop?.split?.pieces > 1
    ? `${p.crop.split.pieces} slabs along ${'xyz'[p.crop.split.axis]}, halo ${p.crop.split.halo}, ${p.patchDims.join('×')}`
    : `${p.tilesActive} tiles`;
  const f = p.predictedFidelity;
  console.log(`| ${name} | ${s}${p.fidelityWarning ? ' (warned)' : ''} | ${f.r.toFixed(4)} / ${f.nrmse.toFixed(3)}${f.beyondFit ? ' (caution)' : ''} | ` +
    `${fit(agreement(chi, whole.chi.data, ph.mask))} | ${fit(agreement(chi, ph.chi, ph.mask))} | ${(p.voxelsRun / volume).toFixed(2)} | ` +
    `${p.estimatedSeconds.toFixed(1)} | ${report.wallSeconds.toFixed(1)} |`);
}
await t.terminate();
