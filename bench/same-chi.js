// Whether a change kept every χ: the same runs through the current wasm module (dist/wasm) and a baseline module
// (another commit's dist/wasm/node, e.g. copied aside before a rebuild), byte for byte: every classical method at its
// defaults on the phantom's field, the demo network (the default plan, a tiled plan, the whole volume), every other
// registry network's default plan with its stand-in (field networks and physics loops on the phantom's field, the phase
// networks on the phantom scan's wrapped phase), and the pipeline from that phase (RTS; every intermediate). Prints one line per output and exits 1 when
// any differs.
//
// Usage: node bench/same-chi.js --baseline DIR [--dims 96,96,64] [--voxel 2,2,2] [--network-dims 64,64,48] [--threads 2]
//   --network-dims: the 1 mm phantom of the registry networks' stand-ins.
//   DIR: a folder holding tessera.js, tessera.wasm and tessera.worker.js (node flavour).
// Across a change of the JavaScript as well (the baseline module needs its own commit's JS): run this file in each
// checkout, the baseline's with --dump FILE (each output's sha256), then the current one with --against FILE.
//   node bench/same-chi.js --dump /tmp/base.json      (in a worktree of the baseline commit, its module built)
//   node bench/same-chi.js --against /tmp/base.json   (here)
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createTessera } from '../bindings/js/index.js';
import { smallStandin } from '../scripts/standins-small.js';

const args = Object.fromEntries(process.argv.slice(2).reduce((a, x, i, all) => (x.startsWith('--') ? [...a, [x.slice(2), all[i + 1]]] : a), []));
if (!args.baseline && !args.dump && !args.against) {
  console.error('usage: node bench/same-chi.js --baseline DIR | --dump FILE | --against FILE [--dims 96,96,64] [--voxel 2,2,2] [--threads 2]');
  process.exit(2);
}
const dims = (args.dims ?? '96,96,64').split(',').map(Number);
const voxelMm = (args.voxel ?? '2,2,2').split(',').map(Number);
const threads = Number(args.threads ?? 2);
const geometry = { dims, voxelMm, b0Dir: [0, 0, 1] };
const te = [0.004, 0.008, 0.012, 0.016];
// Every other registry network, with its stand-ins (scripts/standins-small.js: the real export's operators, random
// weights, small): registry id → the stand-ins of its weights files, in order.
const FIELD_NETWORKS = {
  xqsm: ['xqsm'], qsmnet: ['qsmnet'], 'qsmnet-plus': ['qsmnet'], ir2qsm: ['ir2qsm'], lpcnn: ['lpcnn'], 'modl-qsm': ['modl-qsm'],
  nextqsm: ['nextqsm-bf', 'nextqsm-vjp'],
};
const PHASE_NETWORKS = { iqsm: ['iqsm'], iqfm: ['iqsm'], 'iqsm-plus': ['iqsm-plus'] };
const NETWORK_DIMS = (args['network-dims'] ?? '64,64,48').split(',').map(Number);

/** Every output of the runs, in order: [[name, Float32Array | Uint8Array]]. */
async function outputs(wasmBase) {
  const t = await createTessera({ hardwareThreads: threads, ...(wasmBase ? { wasmBase } : {}) });
  try {
    const out = [];
    const ph = await t.phantom({ geometry });
    const methods = (await t.schema()).find((o) => o.name === 'method').choices;
    for (const method of methods) {
      // The methods whose edge prior comes from the magnitude (MEDI, TFI) refuse a run without one.
      const magnitude = method === 'medi' || method === 'tfi' ? { magnitude: ph.chi.map((v) => 1 + Math.abs(v)) } : {};
      out.push([method, (await t.invert({ field: ph.field, mask: ph.mask, geometry, method, ...magnitude, keepInputs: true })).chi.data]);
    }
    const [weights] = await t.loadWeights('demo-unet');
    const net = { field: ph.field, mask: ph.mask, geometry, model: 'demo-unet', weights: [weights], keepInputs: true };
    out.push(['demo-unet default plan', (await t.invert(net)).chi.data]);
    out.push(['demo-unet tile 32/8', (await t.invert({ ...net, tile: { core: 32, halo: 8 } })).chi.data]);
    out.push(['demo-unet whole', (await t.invert({ ...net, whole: true })).chi.data]);
    // The registry's networks were trained at 1 mm (some refuse other voxels): their own 1 mm phantom and scan.
    const g1 = { dims: NETWORK_DIMS, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
    const ph1 = await t.phantom({ geometry: g1 });
    for (const [model, files] of Object.entries(FIELD_NETWORKS)) {
      out.push([`${model} default plan (stand-in)`, (await t.invert({ field: ph1.field, mask: ph1.mask, geometry: g1, model, weights: files.map(smallStandin), keepInputs: true })).chi.data]);
    }
    const scan1 = await t.phantomScan({ geometry: g1, te, snr: 100 });
    for (const [model, files] of Object.entries(PHASE_NETWORKS)) {
      const run = { phase: scan1.phase, magnitude: scan1.magnitude, mask: ph1.mask, geometry: g1, te, b0: 3, model, weights: files.map(smallStandin), keepInputs: true };
      out.push([`${model} (stand-in)`, (await t.invert(run)).chi.data]);
    }
    const scan = await t.phantomScan({ geometry, te, snr: 100 });
    const p = await t.pipeline({ phase: scan.phase, magnitude: scan.magnitude, geometry, te, b0: 3, method: 'rts' });
    for (const [k, v] of Object.entries(p)) if (v?.data) out.push([`pipeline ${k}`, v.data]);
    return out;
  } finally {
    await t.terminate();
  }
}

const bytesOf = (a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
const sha = (a) => createHash('sha256').update(bytesOf(a)).digest('hex');
const now = await outputs(null);
if (args.dump) {
  fs.writeFileSync(args.dump, JSON.stringify(now.map(([name, a]) => [name, sha(a)]), null, 1));
  console.log(`${now.length} outputs' sha256 written to ${args.dump}`);
  process.exit(0);
}
const base = args.against ? JSON.parse(fs.readFileSync(args.against, 'utf8')) : (await outputs(args.baseline)).map(([name, a]) => [name, a]);
let differ = 0;
for (let i = 0; i < now.length; i++) {
  const [name, a] = now[i], b = base[i]?.[1];
  const same = typeof b === 'string' ? base[i][0] === name && sha(a) === b : b && a.length === b.length && bytesOf(a).equals(bytesOf(b));
  let maxAbs = 0;
  if (b && typeof b !== 'string' && !same) for (let j = 0; j < Math.min(a.length, b.length); j++) maxAbs = Math.max(maxAbs, Math.abs(a[j] - b[j]));
  if (!same) differ++;
  console.log(`${same ? 'same   ' : 'DIFFERS'} ${name}${same || typeof b === 'string' ? '' : ` (max |Δ| ${maxAbs.toExponential(2)})`}`);
}
console.log(`${now.length - differ} of ${now.length} outputs byte-identical to the baseline (${dims.join('×')} at ${voxelMm.join('×')} mm, ${threads} threads)`);
process.exit(differ ? 1 : 0);
