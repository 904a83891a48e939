// This machine's limit: the same whole-volume network run in native ONNX Runtime (onnxruntime-node 1.30.0, CPU EP,
// 2 intra-op threads) vs ONNX Runtime Web through Tessera's API (invert({whole: true}), 1 worker × 2 threads, wasm).
// Both in one run of this script, so the ratio sees the same machine load. Voxels per second = volume voxels /
// seconds of the network run (native: session.run; web: report.wallSeconds, the driver's run including gather,
// copy to the worker and scatter; and the wall around invert(), which adds worker start + session creation).
//
// onnxruntime-node is NOT a dependency of the repository: install it into /tmp/ortnode (its install script would
// download from a host that is not reachable; the CPU binaries in the package work):
//   mkdir -p /tmp/ortnode && cd /tmp/ortnode && npm init -y && npm install onnxruntime-node@1.30.0 --onnxruntime-node-install=skip
// Usage:
//   node scripts/make_standins.js /tmp/standins        # once
//   node --no-experimental-fetch bench/native-ort.js [--onnx /tmp/standins/xqsm-standin.onnx] [--dims 128,128,96]
//        [--threads 2] [--runs 2] [--ortnode /tmp/ortnode] [--json out.json]
import { parseArgs } from 'node:util';
import { readStandin } from './common.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { createTessera } from '../bindings/js/index.js';

const { values: a } = parseArgs({
  options: {
    onnx: { type: 'string', default: '/tmp/standins/xqsm-standin.onnx' },
    dims: { type: 'string', default: '128,128,96' },
    threads: { type: 'string', default: '2' },
    runs: { type: 'string', default: '2' },
    ortnode: { type: 'string', default: '/tmp/ortnode' },
    model: { type: 'string', default: 'xqsm' },
    json: { type: 'string' },
  },
});
let ortNode;
try {
  ortNode = createRequire(path.join(path.resolve(a.ortnode), 'package.json'))('onnxruntime-node');
} catch (e) {
  console.error(`onnxruntime-node not found under ${a.ortnode} (${e.message.split('\n')[0]}). Install it there (not into the repository):\n` +
    `  mkdir -p ${a.ortnode} && cd ${a.ortnode} && npm init -y && npm install onnxruntime-node@1.30.0 --onnxruntime-node-install=skip`);
  process.exit(2);
}
const ortNodeVersion = JSON.parse(fs.readFileSync(path.join(path.resolve(a.ortnode), 'node_modules/onnxruntime-node/package.json'), 'utf8')).version;
const weights = readStandin(a.onnx);
const dims = a.dims.split(',').map(Number);
const nvox = dims[0] * dims[1] * dims[2];
const threads = Number(a.threads);
const load = () => os.loadavg().map((x) => x.toFixed(2)).join(' ');
const field = new Float32Array(nvox);
for (let i = 0; i < nvox; i++) field[i] = 0.05 * Math.sin(0.013 * i) + 0.05 * Math.cos(0.0071 * i + 1);

console.log(`native vs web, node ${process.version}, ${os.cpus()[0].model} × ${os.cpus().length}, ${a.onnx}, ` +
  `volume ${dims.join('×')} (${nvox} voxels), ${threads} threads; load average ${load()}`);

// Native: [1,1,X,Y,Z] (the shape the whole-volume driver sends; dims must be multiples of the divisor, 8 for xQSM).
const tS = performance.now();
const session = await ortNode.InferenceSession.create(weights, {
  executionProviders: ['cpu'], intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all',
});
const nativeSession = (performance.now() - tS) / 1000;
const input = new ortNode.Tensor('float32', field, [1, 1, ...dims]);
const nativeRuns = [];
for (let r = 0; r < Number(a.runs); r++) {
  const t = performance.now();
  const out = await session.run({ [session.inputNames[0]]: input });
  nativeRuns.push((performance.now() - t) / 1000);
  if (out[session.outputNames[0]].dims.join(',') !== [1, 1, ...dims].join(',')) throw new Error(`native output dims ${out[session.outputNames[0]].dims}`);
  console.log(`  native run ${r + 1}: ${nativeRuns[r].toFixed(2)} s; load ${os.loadavg()[0].toFixed(2)}`);
}
await session.release?.();
const nativeBest = Math.min(...nativeRuns);

// Web: the API's whole-volume run (mask all ones), 1 worker × `threads` threads.
const mask = new Uint8Array(nvox).fill(1);
const t = await createTessera({ workers: 1, threadsPerWorker: threads, hardwareThreads: 2 });
let webWall, webRun;
try {
  const t0 = performance.now();
  const { report } = await t.invert({ keepInputs: true, field, mask, geometry: { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] }, model: a.model, weights, whole: true, workers: 1, threadsPerWorker: threads });
  webWall = (performance.now() - t0) / 1000;
  webRun = report.wallSeconds;
  console.log(`  web whole (API): wall ${webWall.toFixed(2)} s, run ${webRun.toFixed(2)} s (tile ${report.tileSeconds.map((x) => x.toFixed(2)).join('/')} s); load ${os.loadavg()[0].toFixed(2)}`);
} finally {
  await t.terminate();
}

console.log(`\nwhole volume ${dims.join('×')} (${nvox} voxels), xQSM-shaped stand-in, ${threads} threads`);
console.log('runtime                                   session s  run s (best)  voxels/s (run)  voxels/s (wall incl. start)');
console.log(`onnxruntime-node ${ortNodeVersion} CPU EP${' '.repeat(Math.max(0, 19 - ortNodeVersion.length))}  ${nativeSession.toFixed(2).padStart(9)}  ${nativeBest.toFixed(2).padStart(12)}  ` +
  `${Math.round(nvox / nativeBest).toString().padStart(14)}  ${Math.round(nvox / (nativeBest + nativeSession)).toString().padStart(27)}`);
console.log(`onnxruntime-web 1.30.0 wasm (API whole)   ${'—'.padStart(9)}  ${webRun.toFixed(2).padStart(12)}  ${Math.round(nvox / webRun).toString().padStart(14)}  ${Math.round(nvox / webWall).toString().padStart(27)}`);
console.log(`native / web voxels per second: ${(webRun / nativeBest).toFixed(2)}× (run), ${(webWall / (nativeBest + nativeSession)).toFixed(2)}× (wall incl. start)`);
console.log(`load average at end ${load()}`);
if (a.json) fs.writeFileSync(a.json, JSON.stringify({ dims, threads, ortNodeVersion, nativeSession, nativeRuns, webWall, webRun, loadavg: os.loadavg() }, null, 2));
process.exit(0);
