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
//        [--corrections]
// A config is CORE/HALO[/STRIDE[/BLEND]] (stride defaults to the core, blend to crop).
// --corrections also tries two low-frequency corrections of each tiled χ (item 5 of the fidelity issue) and prints
// them as extra rows: "+coarse", the network run whole on the field averaged 2× (the dipole kernel is scale-free, so
// a 2 mm field maps to a 2 mm χ), trilinearly upsampled, and its low frequencies (Gaussian σ 4 voxels, normalised
// inside the mask) put in place of the tiled χ's; "+cg", 5 conjugate-gradient iterations of dipole data consistency
// around the tiled χ: min ‖M(D χ − f)‖² + λ‖χ − χ_tiled‖² over the mask's voxels, λ 0.05.
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { loadTesseraModule } from '../bindings/js/debug.js';

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
    corrections: { type: 'boolean' },
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
const [NX, NY, NZ] = dims;
const at = (x, y, z) => x + NX * (y + NY * z);
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
  const handle = M.plan(geometry, ph.mask, request, undefined);
  const plan = handle.view();
  if (!plan.feasible) throw new Error(plan.message);
  const t0 = performance.now();
  const fr = M.startFieldRun(volume, handle);
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
  handle.delete();
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
const lowfreq = a.corrections ? await coarseChi() : null;
for (const c of a.configs.split(',')) {
  const [core, halo, stride = core, blend = 'crop'] = c.split('/');
  const tile = { core: Number(core), halo: Number(halo), stride: Number(stride), blend };
  const r = await run({ spec, tile, workers: 1 });
  const vsWhole = M.compare(geometry, r.chi, whole.chi, ph.mask, { hfen: true });
  const vsTruth = M.compare(geometry, r.chi, ph.chi, ph.mask, {});
  const row = { ...tile, patch: r.plan.patchEdge, tiles: r.plan.tilesActive, overhead: r.patchVoxels / nvox,
    r: vsWhole.r, nrmse: vsWhole.nrmse, hfen: vsWhole.hfen, maxAbs: vsWhole.maxAbs, rTruth: vsTruth.r, nrmseTruth: vsTruth.nrmse, seconds: r.seconds };
  rows.push(row);
  printRow(row, blend);
  if (lowfreq) {
    for (const [name, fix] of [['+coarse', () => withLowFrequencies(r.chi, lowfreq)], ['+cg', () => dataConsistent(r.chi)]]) {
      const t0 = performance.now();
      const chi = fix();
      const w = M.compare(geometry, chi, whole.chi, ph.mask, { hfen: true });
      const t = M.compare(geometry, chi, ph.chi, ph.mask, {});
      const fixed = { ...row, blend: `${blend}${name}`, r: w.r, nrmse: w.nrmse, hfen: w.hfen, maxAbs: w.maxAbs, rTruth: t.r, nrmseTruth: t.nrmse,
        seconds: row.seconds + (performance.now() - t0) / 1000 + (name === '+coarse' ? lowfreq.seconds : 0) };
      rows.push(fixed);
      printRow(fixed, fixed.blend);
    }
  }
}

function printRow(row, blend) {
  console.log(`| ${row.core} | ${row.halo} | ${row.stride} | ${blend} | ${row.patch}³ | ${row.tiles} | ${row.overhead.toFixed(2)} | ` +
    `${row.r.toFixed(4)} | ${row.nrmse.toFixed(3)} | ${row.hfen.toFixed(3)} | ${row.rTruth.toFixed(4)} | ${row.nrmseTruth.toFixed(3)} | ${row.seconds.toFixed(1)} |`);
}

// --- Low-frequency corrections -------------------------------------------------------------------------------------

/** The network run whole on the field averaged over 2×2×2 blocks (inside the mask), upsampled trilinearly. */
async function coarseChi() {
  const t0 = performance.now();
  const cd = dims.map((d) => Math.floor(d / 2));
  const cg = { dims: cd, voxelMm: [2, 2, 2], b0Dir: [0, 0, 1] };
  const cn = cd[0] * cd[1] * cd[2];
  const cf = new Float32Array(cn), cm = new Uint8Array(cn);
  for (let z = 0; z < cd[2]; z++) for (let y = 0; y < cd[1]; y++) for (let x = 0; x < cd[0]; x++) {
    let s = 0, k = 0;
    for (let dz = 0; dz < 2; dz++) for (let dy = 0; dy < 2; dy++) for (let dx = 0; dx < 2; dx++) {
      const i = at(2 * x + dx, 2 * y + dy, 2 * z + dz);
      if (ph.mask[i]) { s += ph.field[i]; k++; }
    }
    const j = x + cd[0] * (y + cd[1] * z);
    cf[j] = k ? s / k : 0;
    cm[j] = k >= 4 ? 1 : 0;
  }
  const v = new M.Volume(cg, 1);
  v.fieldView().set(cf);
  v.maskView().set(cm);
  const req = { spec: { ...spec, divisor }, whole: true };
  const fr = M.startFieldRun(v, M.plan(cg, cm, req, undefined));
  for (let p; (p = fr.next()) !== null; ) {
    const input = new Float32Array(p.input);
    const out = await session.run({ [session.inputNames[0]]: new ortNode.Tensor('float32', input, p.dims) });
    fr.finish(p.job, out[session.outputNames[0]].data);
  }
  fr.report();
  const coarse = fr.result();
  fr.delete();
  v.delete();
  // Trilinear: fine voxel x sits at coarse coordinate (x + ½)/2 − ½.
  const up = new Float32Array(nvox);
  const c = (x, y, z) => coarse[Math.min(cd[0] - 1, Math.max(0, x)) + cd[0] * (Math.min(cd[1] - 1, Math.max(0, y)) + cd[1] * Math.min(cd[2] - 1, Math.max(0, z)))];
  for (let z = 0; z < NZ; z++) for (let y = 0; y < NY; y++) for (let x = 0; x < NX; x++) {
    const u = (x + 0.5) / 2 - 0.5, w = (y + 0.5) / 2 - 0.5, q = (z + 0.5) / 2 - 0.5;
    const x0 = Math.floor(u), y0 = Math.floor(w), z0 = Math.floor(q), fx = u - x0, fy = w - y0, fz = q - z0;
    let s = 0;
    for (let dz = 0; dz < 2; dz++) for (let dy = 0; dy < 2; dy++) for (let dx = 0; dx < 2; dx++) {
      s += (dx ? fx : 1 - fx) * (dy ? fy : 1 - fy) * (dz ? fz : 1 - fz) * c(x0 + dx, y0 + dy, z0 + dz);
    }
    up[at(x, y, z)] = ph.mask[at(x, y, z)] ? s : 0;
  }
  const vs = M.compare(geometry, up, whole.chi, ph.mask, {});
  console.log(`coarse pass (2 mm, ${cd.join('×')}): ${((performance.now() - t0) / 1000).toFixed(1)} s; upsampled vs whole r ${vs.r.toFixed(4)} NRMSE ${vs.nrmse.toFixed(3)}`);
  return { up, seconds: (performance.now() - t0) / 1000 };
}

/** Separable Gaussian blur (σ voxels, 3σ support) of x·mask, divided by the blurred mask: a low-pass inside the mask. */
function maskedLowPass(x, sigma = 4) {
  const r = Math.ceil(3 * sigma);
  const k = Array.from({ length: 2 * r + 1 }, (_, i) => Math.exp(-((i - r) ** 2) / (2 * sigma * sigma)));
  const blur = (v) => {
    let cur = v;
    for (const [stride, n] of [[1, NX], [NX, NY], [NX * NY, NZ]]) {
      const out = new Float64Array(nvox);
      for (let i = 0; i < nvox; i++) {
        const pos = Math.floor(i / stride) % n;
        let s = 0;
        for (let t = -r; t <= r; t++) {
          const p = pos + t;
          if (p >= 0 && p < n) s += k[t + r] * cur[i + t * stride];
        }
        out[i] = s;
      }
      cur = out;
    }
    return cur;
  };
  const xm = new Float64Array(nvox), m = new Float64Array(nvox);
  for (let i = 0; i < nvox; i++) if (ph.mask[i]) { xm[i] = x[i]; m[i] = 1; }
  const bx = blur(xm), bm = blur(m);
  const out = new Float32Array(nvox);
  for (let i = 0; i < nvox; i++) out[i] = ph.mask[i] && bm[i] > 1e-6 ? bx[i] / bm[i] : 0;
  return out;
}

function withLowFrequencies(chi, { up }) {
  const d = new Float32Array(nvox);
  for (let i = 0; i < nvox; i++) d[i] = up[i] - chi[i];
  const lp = maskedLowPass(d);
  const out = new Float32Array(nvox);
  for (let i = 0; i < nvox; i++) out[i] = ph.mask[i] ? chi[i] + lp[i] : 0;
  return out;
}

/** min ‖M(Dχ − f)‖² + λ‖χ − χ0‖² over mask voxels: CG on (P D M D P + λ) χ = P D M f + λ χ0, from χ0. */
function dataConsistent(chi0, iterations = 5, lambda = 0.05) {
  const P = (v) => { const o = new Float32Array(nvox); for (let i = 0; i < nvox; i++) o[i] = ph.mask[i] ? v[i] : 0; return o; };
  const A = (v) => { const dv = P(M.forwardField(geometry, P(v))); const ddv = P(M.forwardField(geometry, dv)); for (let i = 0; i < nvox; i++) ddv[i] += lambda * v[i]; return ddv; };
  const Df = P(M.forwardField(geometry, P(ph.field)));
  const b = new Float32Array(nvox);
  for (let i = 0; i < nvox; i++) b[i] = ph.mask[i] ? Df[i] + lambda * chi0[i] : 0;
  const x = P(chi0);
  const Ax = A(x);
  const rr = new Float64Array(nvox), p = new Float64Array(nvox);
  let rs = 0;
  for (let i = 0; i < nvox; i++) { rr[i] = b[i] - Ax[i]; p[i] = rr[i]; rs += rr[i] * rr[i]; }
  for (let it = 0; it < iterations && rs > 0; it++) {
    const Ap = A(Float32Array.from(p));
    let pAp = 0;
    for (let i = 0; i < nvox; i++) pAp += p[i] * Ap[i];
    const alpha = rs / pAp;
    let rs2 = 0;
    for (let i = 0; i < nvox; i++) { x[i] += alpha * p[i]; rr[i] -= alpha * Ap[i]; rs2 += rr[i] * rr[i]; }
    for (let i = 0; i < nvox; i++) p[i] = rr[i] + (rs2 / rs) * p[i];
    rs = rs2;
  }
  return x;
}
if (a.json) {
  // (rows include the corrections' when --corrections ran)
  fs.writeFileSync(a.json, JSON.stringify({ onnx: a.onnx, dims, seed: Number(a.seed), divisor, whole: { seconds: whole.seconds, truth }, rows }, null, 1));
}
volume.delete();
process.exit(0);
