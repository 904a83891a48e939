// Speed of the product's default against the engines underneath, in one run on this machine (issue #12): for each
// network × phantom, native ONNX Runtime (onnxruntime-node, CPU EP, whole volume), ONNX Runtime Web on the whole volume
// through Tessera (invert({whole: true}), where it fits the single-patch limit) and Tessera with default settings
// (quality faithful: the planner chooses), with the fidelity of every Tessera result against the whole-volume χ (the
// native one: both engines agree to ~1e-6 ppm on these networks). Voxels per second = volume voxels / seconds of the
// run (native: session.run of the padded volume; Tessera: report.wallSeconds, gather, workers and scatter included,
// session creation not), and the wall time around invert() beside it.
//
// Networks: demo (web/models/demo-unet.onnx at its registry cost) and xqsm (the xQSM-shaped stand-in with random
// weights, scripts/make_standins.js, at the registry's xQSM cost).
//
// onnxruntime-node is NOT a dependency of the repository (see bench/native-ort.js):
//   mkdir -p /tmp/ortnode && cd /tmp/ortnode && npm init -y && npm install onnxruntime-node@1.30.0 --onnxruntime-node-install=skip
// Usage:
//   node scripts/make_standins.js /tmp/standins --only xqsm        # once, for --nets xqsm
//   node --no-experimental-fetch bench/speed.js [--nets demo,xqsm] [--dims 160,160,128/256,256,176] [--threads 2]
//        [--ortnode /tmp/ortnode] [--standins /tmp/standins] [--json out.json]
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { createTessera } from '../bindings/js/index.js';
import { loadTesseraModule } from '../bindings/js/module.js';
import { loadavg, readStandin } from './common.js';

const { values: a } = parseArgs({
  options: {
    nets: { type: 'string', default: 'demo,xqsm' },
    dims: { type: 'string', default: '160,160,128/256,256,176' },
    threads: { type: 'string', default: '2' },
    ortnode: { type: 'string', default: '/tmp/ortnode' },
    standins: { type: 'string', default: '/tmp/standins' },
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
const threads = Number(a.threads);
const NETS = {
  demo: { model: 'demo-unet', weights: () => new Uint8Array(fs.readFileSync('web/models/demo-unet.onnx')) },
  xqsm: { model: 'xqsm', weights: () => readStandin(path.join(a.standins, 'xqsm-standin.onnx')) },
};
const M = await loadTesseraModule({ pthreadPoolSize: 2 });

/** The whole volume through Tessera's own gather and scatter (FieldRun), the network in onnxruntime-node. */
async function nativeWhole(session, geometry, field, mask, model) {
  const volume = new M.Volume(geometry, 1);
  volume.fieldView().set(field);
  volume.maskView().set(mask);
  // The registry network as a spec at 1 B/voxel: the same gather and normalisation, with no wasm budget in the way
  // (the native run is not bound by the browser's heap).
  const m = M.model(model);
  const n = m.normalization;
  const spec = { divisor: m.divisor, bytesPerVoxel: 1, maskedInput: m.maskedInput, inputMean: n.inputMean, inputStd: n.inputStd, outputMean: n.outputMean, outputStd: n.outputStd };
  const request = { spec, whole: true };
  const plan = M.plan(geometry, mask, request);
  const fr = M.startFieldRun(volume, request, plan);
  let seconds = 0;
  for (let p; (p = fr.next()) !== null; ) {
    const input = new Float32Array(p.input);
    const t0 = performance.now();
    const out = await session.run({ [session.inputNames[0]]: new ortNode.Tensor('float32', input, p.dims) });
    seconds += (performance.now() - t0) / 1000;
    fr.finish(p.job, out[session.outputNames[0]].data);
  }
  fr.report();
  const chi = fr.result();
  fr.delete();
  volume.delete();
  return { chi, seconds };
}

function agreement(x, ref, mask) {
  let n = 0, sx = 0, sr = 0;
  for (let i = 0; i < mask.length; i++) if (mask[i]) (n++, (sx += x[i]), (sr += ref[i]));
  const mx = sx / n, mr = sr / n;
  let xx = 0, rr = 0, xr = 0, e = 0, ee = 0;
  for (let i = 0; i < mask.length; i++) {
    if (!mask[i]) continue;
    const dx = x[i] - mx, dr = ref[i] - mr;
    xx += dx * dx, rr += dr * dr, xr += dx * dr, e += (x[i] - ref[i]) ** 2, ee += ref[i] * ref[i];
  }
  return { r: xr / Math.sqrt(xx * rr), nrmse: Math.sqrt(e / ee) };
}

console.log(`speed, node ${process.version}, ${os.cpus()[0].model} × ${os.cpus().length}, ${threads} threads everywhere; load ${loadavg()}`);
console.log('| network | phantom | native whole s (Mvox/s) | Web whole s (Mvox/s) | Tessera default: plan | run s (wall s) | Mvox/s | ÷ native | ÷ Web whole | r / NRMSE vs whole | estimated s |');
console.log('|---|---|---|---|---|---|---|---|---|---|---|');
const rows = [];
for (const net of a.nets.split(',')) {
  const { model } = NETS[net];
  const weights = NETS[net].weights();
  const session = await ortNode.InferenceSession.create(weights, { executionProviders: ['cpu'], intraOpNumThreads: threads, interOpNumThreads: 1 });
  for (const d of a.dims.split('/')) {
    const dims = d.split(',').map(Number);
    const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
    const nvox = dims[0] * dims[1] * dims[2];
    const { field, mask } = M.phantom(geometry, { seed: 1, threads: 2 });
    const native = await nativeWhole(session, geometry, field, mask, model);
    const tessera = await createTessera({ workers: threads, hardwareThreads: threads, threadsPerWorker: 1 });
    let web = null;
    const wholePlan = await tessera.plan({ geometry, mask, model, whole: true });
    if (wholePlan.feasible) {
      const t0 = performance.now();
      const { report } = await tessera.invert({ field, mask, geometry, model, weights, whole: true, threadsPerWorker: threads });
      web = { seconds: report.wallSeconds, wall: (performance.now() - t0) / 1000 };
    }
    const t0 = performance.now();
    const { chi, report } = await tessera.invert({ field, mask, geometry, model, weights });
    const wall = (performance.now() - t0) / 1000;
    await tessera.terminate();
    const p = report.plan;
    const g = agreement(chi, native.chi, mask);
    const cfg = p.wholeVolume ? 'whole volume' : `core ${p.tile.core} halo ${p.tile.halo}${p.tile.stride < p.tile.core ? ` stride ${p.tile.stride} ${p.tile.blend}` : ''}, ${p.tilesActive} × ${p.patchEdge}³, ${p.workers ?? 1} × ${p.threadsPerWorker} threads`;
    const row = {
      net, dims, native: native.seconds, web, tessera: report.wallSeconds, wall, plan: cfg, estimated: p.estimatedSeconds,
      r: g.r, nrmse: g.nrmse, vsNative: native.seconds / report.wallSeconds, vsWeb: web ? web.seconds / report.wallSeconds : null,
    };
    rows.push(row);
    const mv = (s) => (nvox / s / 1e6).toFixed(3);
    console.log(`| ${net} | ${dims.join('×')} | ${native.seconds.toFixed(1)} (${mv(native.seconds)}) | ${web ? `${web.seconds.toFixed(1)} (${mv(web.seconds)})` : 'does not fit'} | ` +
      `${cfg} | ${report.wallSeconds.toFixed(1)} (${wall.toFixed(1)}) | ${mv(report.wallSeconds)} | ${row.vsNative.toFixed(2)} | ${row.vsWeb?.toFixed(2) ?? '-'} | ` +
      `${g.r.toFixed(4)} / ${g.nrmse.toFixed(3)} | ${p.estimatedSeconds.toFixed(0)} |`);
  }
  await session.release();
}
console.log(`load at end ${loadavg()}`);
if (a.json) fs.writeFileSync(a.json, JSON.stringify({ threads, rows }, null, 1));
process.exit(0);
