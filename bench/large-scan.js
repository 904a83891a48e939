// A large multi-echo scan through the default pipeline in node (wasm, the packaged API): its plan first (from the
// geometry and echo times alone, before any data exists: a scan the 4 GB heap cannot hold is refused here, with the
// largest crop that fits), then the phantom scan made in a separate runtime, then the pipeline in a fresh runtime (wasm
// memory never shrinks), its module heap against the plan, its seconds, and r of the local field and χ against the
// phantom's truths inside the brain mask eroded by 5 voxels (as bench/pipeline-default.js scores).
//
//   node --no-experimental-fetch bench/large-scan.js [--dims 320,320,200] [--voxel 0.7] [--echoes 6] [--snr 80]
//        [--threads 2] [--json out.json]
// The echoes are 4 ms apart from TE 4 ms, at 3 T.
import os from 'node:os';
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { createTessera } from '../bindings/js/index.js';
import { loadavg } from './common.js';

const { values: a } = parseArgs({
  options: {
    dims: { type: 'string', default: '320,320,200' }, voxel: { type: 'string', default: '0.7' },
    echoes: { type: 'string', default: '6' }, snr: { type: 'string', default: '80' },
    threads: { type: 'string', default: '2' }, json: { type: 'string' },
  },
});
const dims = a.dims.split(',').map(Number);
const mm = Number(a.voxel);
const geometry = { dims, voxelMm: [mm, mm, mm], b0Dir: [0, 0, 1] };
const te = Array.from({ length: Number(a.echoes) }, (_, i) => 0.004 * (i + 1));
const threads = Number(a.threads);
const gb = (b) => `${(b / 1e9).toFixed(2)} GB`;
const n = dims[0] * dims[1] * dims[2];
const record = { dims, voxelMm: mm, echoes: te.length, snr: Number(a.snr), threads, loadavgStart: os.loadavg() };
const save = () => a.json && fs.writeFileSync(a.json, JSON.stringify(record, null, 2));
console.log(`large scan ${dims.join('×')} at ${mm} mm, ${te.length} echoes; node ${process.version}, ${os.cpus()[0].model} × ${os.cpus().length}, ` +
            `${threads} thread(s); load average ${loadavg()}`);

// The plan from the geometry, the echo times and whether a magnitude comes (the CLI makes the same one from the NIfTI
// headers): no voxel exists yet.
const t = await createTessera({ workers: 1, hardwareThreads: threads });
try {
  const plan = await t.plan({ geometry, te, b0: 3, magnitude: true, pipeline: true });
  record.plan = { feasible: plan.feasible, moduleHeapBytes: plan.moduleHeapBytes, stages: plan.stages, message: plan.message ?? null,
                  largestDims: plan.largestDims ?? null };
  console.log(`plan: ${plan.stages.join(' → ')}; module heap ${gb(plan.moduleHeapBytes)}, ${plan.feasible ? 'fits' : `refused: ${plan.message}`}`);
  save();
  if (!plan.feasible) process.exit(0);

  // The scan from a separate runtime: its forward models would otherwise raise the measured heap.
  let t0 = performance.now();
  const maker = await createTessera({ workers: 1, hardwareThreads: threads });
  let scan;
  try {
    scan = await maker.phantomScan({ geometry, te, b0: 3, snr: Number(a.snr), seed: 6 });
  } finally {
    await maker.terminate();
  }
  const { phase, magnitude, mask, chi: truth, localField } = scan;
  scan = null;
  record.phantomSeconds = (performance.now() - t0) / 1000;
  console.log(`phantom scan made in ${record.phantomSeconds.toFixed(0)} s`);

  t0 = performance.now();
  const out = await t.pipeline({ phase, magnitude, te, b0: 3, geometry, plan });
  record.seconds = (performance.now() - t0) / 1000;
  record.moduleHeapBytes = out.report.memory.moduleHeapBytes;
  record.moduleHeapBreakBytes = (await t.status()).moduleHeapBreakBytes;
  record.ratio = plan.moduleHeapBytes / record.moduleHeapBytes;
  console.log(`pipeline ${record.seconds.toFixed(0)} s; module heap ${gb(record.moduleHeapBytes)} (break ${gb(record.moduleHeapBreakBytes)}), ` +
              `plan / measured ${record.ratio.toFixed(2)}`);
  save();

  // The brain mask eroded by 5 voxels (a 5-voxel ball), to score where every method defines χ.
  const [nx, ny, nz] = dims;
  const ball = [];
  for (let dz = -5; dz <= 5; dz++) for (let dy = -5; dy <= 5; dy++) for (let dx = -5; dx <= 5; dx++) {
    if (dx * dx + dy * dy + dz * dz <= 25) ball.push(dx + nx * (dy + ny * dz));
  }
  const scored = new Uint8Array(n);
  for (let z = 5; z < nz - 5; z++) for (let y = 5; y < ny - 5; y++) for (let x = 5; x < nx - 5; x++) {
    const i = x + nx * (y + ny * z);
    if (!mask[i] || !out.localMask.data[i]) continue;
    let ok = true;
    for (const d of ball) if (!mask[i + d]) { ok = false; break; }
    scored[i] = ok ? 1 : 0;
  }
  const pearson = (p, q) => {
    let k = 0, sp = 0, sq = 0;
    for (let i = 0; i < n; i++) if (scored[i]) { k++; sp += p[i]; sq += q[i]; }
    const mp = sp / k, mq = sq / k;
    let pq = 0, pp = 0, qq = 0;
    for (let i = 0; i < n; i++) if (scored[i]) { const u = p[i] - mp, v = q[i] - mq; pq += u * v; pp += u * u; qq += v * v; }
    return pq / Math.sqrt(pp * qq);
  };
  record.localR = pearson(out.localField.data, localField);
  record.chiR = pearson(out.chi.data, truth);
  record.warnings = out.report.warnings ?? [];
  record.loadavgEnd = os.loadavg();
  console.log(`local r ${record.localR.toFixed(3)}, χ r ${record.chiR.toFixed(3)} (brain eroded 5 voxels ∩ local mask); load average ${loadavg()}`);
  save();
} finally {
  await t.terminate();
}
