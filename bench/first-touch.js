// What memory the machine has never handed out costs a run: one demo U-Net patch of the size the default runs at
// 256×256×176 (the mask's box, 144×176×128) in a fresh ONNX Runtime Web worker, twice (the second run reuses the heap
// the first grew), after the process touched `--hog` GB of its own memory first (0: nothing). On a virtual machine whose
// host backs guest memory only when first touched, the first run pays for every page of its heap it grows into; a
// plan's estimate (this machine's speed from small probe patches) does not see that cost.
//
// Usage:
//   node --no-experimental-fetch bench/first-touch.js [--hog 0,1,2] [--dims 128,176,144] [--threads 2]
//
// Prints, per hog: the first and second run's seconds, and the process's minor page faults during the first run.
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import { WorkerPool } from '../bindings/js/runtime/pool.js';
import { patchInput } from './tile-speed.js';
import { loadavg } from './common.js';

const { values: a } = parseArgs({
  options: {
    hog: { type: 'string', default: '0,1,0,1' },
    dims: { type: 'string', default: '128,176,144' }, // ONNX order (z, y, x): the box 144×176×128
    threads: { type: 'string', default: '2' },
  },
});
const dims = a.dims.split(',').map(Number);
const voxels = dims.reduce((x, y) => x * y);
const model = new Uint8Array(fs.readFileSync(new URL('../web/models/demo-unet.onnx', import.meta.url)));
const minorFaults = () => process.resourceUsage().minorPageFault;
console.log(`first touch, node ${process.version}, ${os.cpus()[0].model} × ${os.cpus().length}, demo U-Net patch ${dims.join('×')} ` +
  `(${(voxels / 1e6).toFixed(2)} M voxels), ${a.threads} threads; load ${loadavg()}`);
console.log('| hog GB | first run s | second run s | first ÷ second | minor faults in the first run (k) | worker heap GB |');
console.log('|---:|---:|---:|---:|---:|---:|');
const input = patchInput(Math.ceil(Math.cbrt(voxels)) + 1).subarray(0, voxels);
for (const hogGb of a.hog.split(',').map(Number)) {
  // The hog: touched page by page, kept alive for the runs, then dropped.
  let hog = new Uint8Array(hogGb * 1e9);
  for (let i = 0; i < hog.length; i += 4096) hog[i] = 1;
  const pool = new WorkerPool({ model, workers: 1, threadsPerWorker: Number(a.threads) });
  try {
    await pool.ready();
    const seconds = [];
    let faults = 0;
    for (let k = 0; k < 2; k++) {
      const f0 = minorFaults();
      const t0 = performance.now();
      await pool.run({ id: k, input: input.slice(), dims: [1, 1, ...dims] });
      seconds.push((performance.now() - t0) / 1000);
      if (k === 0) faults = minorFaults() - f0;
    }
    const heap = pool.stats().perWorker[0].heapHighWater;
    console.log(`| ${hogGb} | ${seconds[0].toFixed(2)} | ${seconds[1].toFixed(2)} | ${(seconds[0] / seconds[1]).toFixed(2)} | ${(faults / 1e3).toFixed(0)} | ${(heap / 1e9).toFixed(2)} |`);
  } finally {
    await pool.terminate();
    hog = null;
  }
}
console.log(`load at end ${loadavg()}`);
