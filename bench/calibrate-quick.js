// The quick calibration (tessera.calibrate / `tessera-qsm calibrate`: a few small patches, seconds) against heaps
// measured at larger patches it never ran, and against the careful figures of bench/calibrate.js (the registry's):
// is the quick line over every real heap (conservative), and by how much?
//
// Usage (node):
//   node --no-experimental-fetch bench/calibrate-quick.js --onnx web/models/demo-unet.onnx --divisor 8 \
//     --repeats 3 --check 48,64,80,96 [--threads 1] [--careful FIXED,BPV] [--inputs ...]
// (the registry's figures: `tessera-qsm models --json`, fixedBytes and bytesPerVoxel)
// For each repeat: a fresh calibration (its points, figures and seconds). Then, for each --check edge, one fresh
// worker runs a patch of that edge (bindings/js/calibrate.js measurePoint, as the calibration does) and its heap is
// compared with every quick line and with the careful line (--careful fixedBytes,bytesPerVoxel).
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import { createTessera } from '../bindings/js/index.js';
import { measurePoint } from '../bindings/js/calibrate.js';

const { values: a } = parseArgs({
  options: {
    onnx: { type: 'string' },
    divisor: { type: 'string', default: '1' },
    repeats: { type: 'string', default: '3' },
    check: { type: 'string', default: '48,64,96' },
    threads: { type: 'string', default: '1' },
    careful: { type: 'string' },
  },
});
if (!a.onnx) {
  console.error('usage: node --no-experimental-fetch bench/calibrate-quick.js --onnx NET.onnx [--divisor 8] [--repeats 3] [--check 48,64,96] [--threads 1] [--careful FIXED,BPV]');
  process.exit(2);
}
const model = new Uint8Array(fs.readFileSync(a.onnx));
const divisor = Number(a.divisor);
const threads = Number(a.threads);
const MB = (b) => (b / 1e6).toFixed(1);
console.log(`${a.onnx} (${model.byteLength} B), divisor ${divisor}, ${threads} thread(s), ${os.cpus()[0].model} × ${os.cpus().length}, node ${process.version}`);

const tessera = await createTessera({ workers: 1, threadsPerWorker: threads });
const quick = [];
try {
  for (let r = 1; r <= Number(a.repeats); r++) {
    const c = await tessera.calibrate({ weights: model.slice(), spec: { divisor }, threadsPerWorker: threads }); // a fresh copy: no cached result
    quick.push(c);
    console.log(
      `quick ${r}: ${MB(c.fixedBytes)} MB + ${c.bytesPerVoxel} B/voxel in ${c.seconds.toFixed(1)} s; points ` +
        c.points.map((p) => `${p.edge}³ ${MB(p.heapBytes)} MB (session ${MB(p.afterSessionBytes)})`).join(', ') +
        `; least squares ${MB(c.fit.fittedFixedBytes)} MB + ${c.fit.fittedBytesPerVoxel.toFixed(1)} B/voxel (r² ${c.fit.r2.toFixed(4)}), slope bound ${c.fit.slopeBound.toFixed(1)}`,
    );
  }
} finally {
  await tessera.terminate();
}
const careful = a.careful ? a.careful.split(',').map(Number) : null;
const line = (fixed, bpv, e) => fixed + bpv * e ** 3;
console.log('\n edge   measured heap (MB)  quick line min–max (MB)  quick/measured   careful line (MB)  careful/measured   quick/careful');
let allCovered = true;
for (const edge of a.check.split(',').map(Number)) {
  const p = await measurePoint({ model, edge, threads, runs: 1 });
  const q = quick.map((c) => line(c.fixedBytes, c.bytesPerVoxel, edge));
  const covered = q.every((v) => v >= p.heapBytes);
  allCovered &&= covered;
  const c = careful ? line(careful[0], careful[1], edge) : null;
  console.log(
    `${String(edge).padStart(5)}  ${MB(p.heapBytes).padStart(18)}  ${`${MB(Math.min(...q))}–${MB(Math.max(...q))}`.padStart(23)}  ` +
      `${`${(Math.min(...q) / p.heapBytes).toFixed(2)}–${(Math.max(...q) / p.heapBytes).toFixed(2)}`.padStart(14)}${covered ? ' ' : '!'}  ` +
      `${c ? MB(c).padStart(17) : '-'.padStart(17)}  ${c ? (c / p.heapBytes).toFixed(2).padStart(16) : '-'.padStart(16)}  ` +
      `${c ? `${(Math.min(...q) / c).toFixed(2)}–${(Math.max(...q) / c).toFixed(2)}`.padStart(14) : ''}`,
  );
}
console.log(`\nevery measured heap under every quick line: ${allCovered ? 'yes' : 'NO (marked !)'}; quick calibration ` +
  `${Math.min(...quick.map((c) => c.seconds)).toFixed(1)}–${Math.max(...quick.map((c) => c.seconds)).toFixed(1)} s`);
