// A phase network (iQSM family) end to end on a head-sized volume: wrapped phase of the numerical phantom
// (local field + a smooth background field, so the phase wraps), run through the public API with an
// iQSM-shaped stand-in; prints time and the memory of the run against the planner's estimate.
// Usage: node scripts/make_standins.js /tmp/standins --only iqsm   (once)
//        node --no-experimental-fetch bench/phase-run.js [--model iqsm|iqsm-plus] [--onnx /tmp/standins/iqsm-standin.onnx]
//          [--dims 160,160,128] [--voxel 1.5] [--te 0.02,0.03] [--b0 3] [--threads 2]
import { parseArgs } from 'node:util';
import os from 'node:os';
import { createTessera } from '../bindings/js/index.js';
import { GAMMA_BAR_MHZ_PER_T } from '../bindings/js/io/nifti.js';
import { readStandin, loadavg } from './common.js';

const { values: a } = parseArgs({
  options: {
    model: { type: 'string', default: 'iqsm' },
    onnx: { type: 'string' },
    dims: { type: 'string', default: '160,160,128' },
    voxel: { type: 'string', default: '1.5' },
    te: { type: 'string', default: '0.02' },
    b0: { type: 'string', default: '3' },
    threads: { type: 'string', default: '2' },
  },
});
const dims = a.dims.split(',').map(Number);
const v = Number(a.voxel);
const geometry = { dims, voxelMm: [v, v, v], b0Dir: [0, 0, 1] };
const te = a.te.split(',').map(Number);
const b0 = Number(a.b0);
const onnx = a.onnx ?? `/tmp/standins/${a.model}-standin.onnx`;
const weights = readStandin(onnx);
const mb = (x) => (x / 1e6).toFixed(1);

// The phantom comes from its own runtime so its forward model does not raise the measured module heap.
const maker = await createTessera({ workers: 1 });
const ph = await maker.phantom({ geometry, seed: 1 });
await maker.terminate();
const n = dims[0] * dims[1] * dims[2];
const phase = new Float32Array(n * te.length);
let wrapped = 0;
te.forEach((t, e) => {
  // phase = 2π·γ̄·B0·TE·(local + background field), background 2 ppm across the volume: it wraps.
  const radPerPpm = 2 * Math.PI * GAMMA_BAR_MHZ_PER_T * b0 * t;
  for (let z = 0, i = 0; z < dims[2]; z++)
    for (let y = 0; y < dims[1]; y++)
      for (let x = 0; x < dims[0]; x++, i++) {
        const bg = 2 * ((x / dims[0] - 0.5) + 0.5 * (z / dims[2] - 0.5));
        const p = radPerPpm * (ph.field[i] + bg);
        if (Math.abs(p) > Math.PI) wrapped++;
        phase[e * n + i] = Math.atan2(Math.sin(p), Math.cos(p));
      }
});

const tessera = await createTessera({ workers: 1, threadsPerWorker: Number(a.threads), hardwareThreads: os.cpus().length });
const plan = await tessera.plan({ model: a.model, geometry, mask: ph.mask, te, b0 });
console.log(`${a.model} stand-in ${onnx} on ${dims.join('×')} at ${v} mm, ${te.length} echo(es), ${wrapped} wrapped voxel-echoes; ` +
  `${os.cpus()[0].model} × ${os.cpus().length}, load ${loadavg()}`);
console.log(`plan: padded ${plan.patchDims.join('×')}, activations ${mb(plan.activationBytes)} MB, module heap ${mb(plan.moduleHeapBytes)} MB, ` +
  `peak ${mb(plan.peakBytes)} MB${plan.feasible ? '' : ` — REFUSED: ${plan.message}`}`);
if (!plan.feasible) process.exit(2);
const t0 = performance.now();
const r = await tessera.invert({ keepInputs: true, model: a.model, phase, mask: ph.mask, geometry, te, b0, weights, onProgress: (p) => process.stdout.write(`\r  echo ${p.done}/${p.total}`) });
const seconds = (performance.now() - t0) / 1000;
await tessera.terminate();
let nonzero = 0;
for (const x of r.chi.data) if (x !== 0) nonzero++;
const m = r.report.memory;
console.log(`\nrun: ${seconds.toFixed(1)} s wall (network ${r.report.tileSeconds.map((s) => s.toFixed(1)).join(' + ')} s), ${nonzero} voxels out (eroded mask), ` +
  `worker heap ${mb(Math.max(...m.workerHeapHighWater))} MB = ${m.workerHeapVsPlan.toFixed(2)} of plan, ` +
  `module heap ${mb(m.moduleHeapBytes)} MB = ${m.moduleHeapVsPlan.toFixed(2)} of plan; warning: ${r.report.warning || 'none'}`);
