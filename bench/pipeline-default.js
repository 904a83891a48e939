// The default pipeline in node: wrapped multi-echo phase + magnitude → χ with no options (the mask from the magnitude,
// the default unwrapping, echo fit, background removal and inversion), on the phantom scan, timed; r against the truth
// χ and the true local field inside the brain mask eroded by 5 voxels.
//
//   node --no-experimental-fetch bench/pipeline-default.js [--dims 160,192,144] [--voxel 1] [--snr 80] [--method M]
//        [--background B] [--threads N]   (M, B: another inversion or background removal, for comparison; N: the C++
//        stages' threads, default every core)
import os from 'node:os';
import { parseArgs } from 'node:util';
import { createTessera } from '../bindings/js/index.js';

const { values: a } = parseArgs({
  options: {
    dims: { type: 'string', default: '160,192,144' }, voxel: { type: 'string', default: '1' }, snr: { type: 'string', default: '80' },
    method: { type: 'string' }, background: { type: 'string' }, threads: { type: 'string' },
  },
});
const dims = a.dims.split(',').map(Number);
const mm = Number(a.voxel);
const geometry = { dims, voxelMm: [mm, mm, mm], b0Dir: [0, 0, 1] };
const te = [0.004, 0.008, 0.012, 0.016, 0.02];
const tessera = await createTessera({ workers: 1, ...(a.threads ? { hardwareThreads: Number(a.threads) } : {}) });
try {
  const scan = await tessera.phantomScan({ geometry, te, b0: 3, snr: Number(a.snr), seed: 6 });
  const n = dims[0] * dims[1] * dims[2];
  // The brain mask eroded by 5 voxels (a 5-voxel ball), to score where every method defines χ.
  const inside = new Uint8Array(n);
  const [nx, ny, nz] = dims;
  for (let z = 5; z < nz - 5; z++) for (let y = 5; y < ny - 5; y++) for (let x = 5; x < nx - 5; x++) {
    let ok = true;
    for (let dz = -5; dz <= 5 && ok; dz++) for (let dy = -5; dy <= 5 && ok; dy++) for (let dx = -5; dx <= 5 && ok; dx++) {
      if (dx * dx + dy * dy + dz * dz > 25) continue;
      if (!scan.mask[(x + dx) + nx * ((y + dy) + ny * (z + dz))]) ok = false;
    }
    inside[x + nx * (y + ny * z)] = ok ? 1 : 0;
  }
  const pearson = (p, q, m) => {
    let k = 0, sp = 0, sq = 0;
    for (let i = 0; i < n; i++) if (m[i]) { k++; sp += p[i]; sq += q[i]; }
    const mp = sp / k, mq = sq / k;
    let pq = 0, pp = 0, qq = 0;
    for (let i = 0; i < n; i++) if (m[i]) { const u = p[i] - mp, v = q[i] - mq; pq += u * v; pp += u * u; qq += v * v; }
    return pq / Math.sqrt(pp * qq);
  };
  const t0 = performance.now();
  const out = await tessera.pipeline({ keepInputs: true, phase: scan.phase, magnitude: scan.magnitude, te, b0: 3, geometry,
                                       ...(a.method ? { method: a.method } : {}), ...(a.background ? { background: a.background } : {})});
  const seconds = (performance.now() - t0) / 1000;
  const scored = inside.map((v, i) => (v && out.localMask.data[i] ? 1 : 0));
  console.log(`${dims.join('×')} at ${mm} mm, SNR ${a.snr}, 5 echoes, ${os.availableParallelism()} cores: ${out.report.plan.stages.join(' → ')} ` +
              `${seconds.toFixed(1)} s; local r ${pearson(out.localField.data, scan.localField, scored).toFixed(3)}, ` +
              `χ r ${pearson(out.chi.data, scan.chi, scored).toFixed(3)} (brain eroded 5 voxels ∩ local mask); ` +
              `${a.threads ?? 'every'} thread(s) in C++`);
} finally {
  await tessera.terminate();
}
