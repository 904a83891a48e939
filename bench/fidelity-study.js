// The tiling-fidelity study: how close a tiled χ is to the same network run on the whole volume, as a function of
// core, halo, stride and blend. Every configuration goes through Tessera's own C++ plan, gather and blend (the Embind
// FieldRun, exactly what invert() drives); only the network runs in native ONNX Runtime (onnxruntime-node, CPU EP)
// so that a study of dozens of configurations fits in minutes. Tiled-vs-whole agreement does not depend on the
// engine (ONNX Runtime Web and native agree to ~1e-6 ppm on these networks); the seconds printed are native seconds,
// and the web timing of the planner's default is measured separately (bench/RESULTS.md §11).
//
// Measures (inside the mask): Pearson r, NRMSE = ‖tiled − whole‖/‖whole‖, HFEN (LoG σ 1.5) against the whole-volume
// run, and r / NRMSE against the phantom's true χ; patch voxels run ÷ volume voxels; native seconds.
//
// onnxruntime-node is NOT a dependency of the repository: install it into /tmp/ortnode (see bench/native-ort.js):
//   mkdir -p /tmp/ortnode && cd /tmp/ortnode && npm init -y && npm install onnxruntime-node@1.30.0 --onnxruntime-node-install=skip
// Usage:
//   node --no-experimental-fetch bench/fidelity-study.js [--onnx web/models/demo-unet.onnx] [--divisor 8]
//        [--dims 160,192,144] [--threads 2] [--configs 56/4,56/20/28/cosine,...] [--json out.json]
// A config is CORE/HALO[/STRIDE[/BLEND]] (stride defaults to the core, blend to crop).
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { loadTesseraModule } from '../bindings/js/module.js';

export const DEFAULT_CONFIGS = [
  '24/4', '56/4', '120/4', '48/8', '56/8', '40/12', '32/16', '80/8', '104/12', '56/20', '88/20',
  '56/4/28/cosine', '56/4/28/linear', '56/4/28/gaussian', '56/4/42/cosine', '104/12/78/cosine', '80/8/60/cosine',
].join(',');

const { values: a } = parseArgs({
  options: {
    onnx: { type: 'string', default: 'web/models/demo-unet.onnx' },
    divisor: { type: 'string', default: '8' },
    dims: { type: 'string', default: '160,192,144' },
    threads: { type: 'string', default: '2' },
    configs: { type: 'string', default: DEFAULT_CONFIGS },
    ortnode: { type: 'string', default: '/tmp/ortnode' },
    seed: { type: 'string', default: '1' },
    json: { type: 'string' },
  },
});

let ortNode;
try {
  ortNode = createRequire(path.join(path.resolve(a.ortnode), 'package.json'))('onnxruntime-node');
} catch (e) {
  console.error(`onnxruntime-node not found under ${a.ortnode} (${e.message.split('\n')[0]}): install it there (see the header)`);
  process.exit(2);
}

const dims = a.dims.split(',').map(Number);
const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
const nvox = dims[0] * dims[1] * dims[2];
const divisor = Number(a.divisor);
const M = await loadTesseraModule({ pthreadPoolSize: 2 });
const ph = M.phantom(geometry, { seed: Number(a.seed), threads: 2 });
const volume = new M.Volume(geometry, 1);
volume.fieldView().set(ph.field);
volume.maskView().set(ph.mask);
const session = await ortNode.InferenceSession.create(new Uint8Array(fs.readFileSync(a.onnx)), {
  executionProviders: ['cpu'], intraOpNumThreads: Number(a.threads), interOpNumThreads: 1, graphOptimizationLevel: 'all',
});
// bytesPerVoxel 1 makes every config plannable here (the study measures fidelity, not the budget).
const spec = { divisor, bytesPerVoxel: 1, maskedInput: true };

/** Runs request through Tessera's FieldRun with the native session; returns {chi, seconds, patchVoxels, plan}. */
async function run(request) {
  const plan = M.plan(geometry, ph.mask, request);
  if (!plan.feasible) throw new Error(plan.message);
  const t0 = performance.now();
  const fr = M.startFieldRun(volume, request, plan);
  let patchVoxels = 0;
  for (let p; (p = fr.next()) !== null; ) {
    const input = new Float32Array(p.input); // copy off the heap before anything allocates
    patchVoxels += input.length;
    const out = await session.run({ [session.inputNames[0]]: new ortNode.Tensor('float32', input, p.dims) });
    fr.finish(p.job, out[session.outputNames[0]].data);
  }
  const report = fr.report();
  const chi = fr.result();
  fr.delete();
  return { chi, seconds: (performance.now() - t0) / 1000, patchVoxels, plan, report };
}

console.log(`fidelity study, node ${process.version}, ${os.cpus()[0].model} × ${os.cpus().length}, ${a.onnx} ` +
  `(divisor ${divisor}), phantom ${dims.join('×')} seed ${a.seed}, onnxruntime-node ${a.threads} threads; load ${os.loadavg()[0].toFixed(2)}`);
const whole = await run({ spec, whole: true });
const truth = M.compare(geometry, whole.chi, ph.chi, ph.mask, { hfen: true });
console.log(`whole volume: ${whole.seconds.toFixed(1)} s; vs truth r ${truth.r.toFixed(4)} NRMSE ${truth.nrmse.toFixed(3)}`);
console.log('| core | halo | stride | blend | patch | tiles | patch voxels ÷ volume | r vs whole | NRMSE vs whole | HFEN vs whole | r vs truth | NRMSE vs truth | native s |');
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
const rows = [];
for (const c of a.configs.split(',')) {
  const [core, halo, stride = core, blend = 'crop'] = c.split('/');
  const tile = { core: Number(core), halo: Number(halo), stride: Number(stride), blend };
  const r = await run({ spec, tile, workers: 1 });
  const vsWhole = M.compare(geometry, r.chi, whole.chi, ph.mask, { hfen: true });
  const vsTruth = M.compare(geometry, r.chi, ph.chi, ph.mask, {});
  const row = { ...tile, patch: r.plan.patchEdge, tiles: r.plan.tilesActive, overhead: r.patchVoxels / nvox,
    r: vsWhole.r, nrmse: vsWhole.nrmse, hfen: vsWhole.hfen, maxAbs: vsWhole.maxAbs, rTruth: vsTruth.r, nrmseTruth: vsTruth.nrmse, seconds: r.seconds };
  rows.push(row);
  console.log(`| ${tile.core} | ${tile.halo} | ${tile.stride} | ${blend} | ${row.patch}³ | ${row.tiles} | ${row.overhead.toFixed(2)} | ` +
    `${row.r.toFixed(4)} | ${row.nrmse.toFixed(3)} | ${row.hfen.toFixed(3)} | ${row.rTruth.toFixed(4)} | ${row.nrmseTruth.toFixed(3)} | ${row.seconds.toFixed(1)} |`);
}
if (a.json) {
  fs.writeFileSync(a.json, JSON.stringify({ onnx: a.onnx, dims, seed: Number(a.seed), divisor, whole: { seconds: whole.seconds, truth }, rows }, null, 1));
}
volume.delete();
process.exit(0);
