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
import { agreement, loadavg, readStandin, requireOrtNode, runNative, specOf } from './common.js';

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
const ortNode = requireOrtNode(a.ortnode, createRequire, path);
const threads = Number(a.threads);
const NETS = {
  demo: { model: 'demo-unet', weights: () => new Uint8Array(fs.readFileSync('web/models/demo-unet.onnx')) },
  xqsm: { model: 'xqsm', weights: () => readStandin(path.join(a.standins, 'xqsm-standin.onnx')) },
};
const M = await loadTesseraModule({ pthreadPoolSize: 2 });

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
    const native = await runNative(M, ortNode, session, geometry, field, mask, { spec: specOf(M, model), whole: true });
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
    const cfg = p.wholeVolume ? (p.crop ? `mask box ${p.patchDims.join('×')} (${(100 * p.patchDims.reduce((x, y) => x * y) / nvox).toFixed(0)}% of the volume), 1 × ${p.threadsPerWorker} threads` : 'whole volume') : `core ${p.tile.core} halo ${p.tile.halo}${p.tile.stride < p.tile.core ? ` stride ${p.tile.stride} ${p.tile.blend}` : ''}, ${p.tilesActive} × ${p.patchEdge}³, ${p.workers ?? 1} × ${p.threadsPerWorker} threads`;
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
