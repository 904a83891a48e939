// QSM-CI's scores (tessera-qsm score, tessera.score()) against an implementation of the same definitions written here
// in plain loops, and the QSM-CI algorithm run (tessera-qsm qsm-ci) on a directory laid out as its contract says.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { createTessera, readNifti, writeNifti, makeVolume } from './index.js';
import { runCli } from '../../tests/js/run-cli.js';
import { defaultBackgroundTitle } from '../../tests/js/background-titles.js';


/** The stage title of the pipeline's default background removal, from the schema's default (whichever removal it is). */

let tessera;
let dir;
const f = (name) => path.join(dir, name);

before(async () => {
  tessera = await createTessera({ workers: 1 });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-score-'));
});
after(async () => {
  await tessera?.terminate();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

// ---- The five scores, from their definitions (QSM-CI's scorer), in plain loops. ----

const mean = (v, m) => {
  let s = 0, n = 0;
  for (let i = 0; i < v.length; i++) if (m[i]) (s += v[i]), n++;
  return s / n;
};

/** Demeaned and detrended NRMSE (%) and Pearson's CC of r against t inside m. */
function nrmseAndCc(r, t, m) {
  const mr = mean(r, m), mt = mean(t, m);
  const x = [], y = [];
  for (let i = 0; i < r.length; i++) if (m[i]) x.push(t[i] - mt), y.push(r[i] - mr);
  const norm = (a) => Math.sqrt(a.reduce((s, v) => s + v * v, 0));
  const nrmse = (100 * norm(y.map((v, i) => v - x[i]))) / norm(x);
  // y = slope · x + intercept by least squares, then y → (y − intercept) / slope.
  const n = x.length, sx = x.reduce((a, b) => a + b, 0), sy = y.reduce((a, b) => a + b, 0);
  const sxy = x.reduce((s, v, i) => s + v * y[i], 0), sxx = x.reduce((s, v) => s + v * v, 0), syy = y.reduce((s, v) => s + v * v, 0);
  const slope = (n * sxy - sx * sy) / (n * sxx - sx * sx), intercept = (sy - slope * sx) / n;
  const nrmseDetrended = (100 * norm(y.map((v, i) => (v - intercept) / slope - x[i]))) / norm(x);
  const cc = (n * sxy - sx * sy) / Math.sqrt((n * sxx - sx * sx) * (n * syy - sy * sy));
  return { nrmse, nrmseDetrended, cc };
}

/** Index j of an axis of n voxels folded back into it by bouncing off its half-voxel edges (scipy's 'reflect'). */
function bounce(j, n) {
  let q = j;
  while (q < 0 || q >= n) {
    if (q < 0) q = -q - 1;
    if (q >= n) q = 2 * n - q - 1;
  }
  return q;
}

/** scipy.ndimage.gaussian_laplace(v, sigma 1.5, truncate 5): Σ over the axes of G'' along it and G along the others. */
function gaussianLaplace(v, dims) {
  const sigma = 1.5, R = Math.trunc(5 * sigma + 0.5);
  const g = [];
  for (let k = -R; k <= R; k++) g.push(Math.exp((-k * k) / (2 * sigma * sigma)));
  const total = g.reduce((a, b) => a + b, 0);
  const g0 = g.map((w) => w / total);
  const g2 = g0.map((w, j) => w * ((j - R) ** 2 / sigma ** 4 - 1 / sigma ** 2));
  const [X, Y, Z] = dims;
  const at = (x, y, z) => x + X * (y + Y * z);
  const pass = (src, axis, w) => {
    const out = new Float64Array(src.length);
    for (let z = 0; z < Z; z++)
      for (let y = 0; y < Y; y++)
        for (let x = 0; x < X; x++) {
          let s = 0;
          for (let k = -R; k <= R; k++) {
            const p = [x, y, z];
            p[axis] = bounce(p[axis] + k, dims[axis]);
            s += w[k + R] * src[at(p[0], p[1], p[2])];
          }
          out[at(x, y, z)] = s;
        }
    return out;
  };
  const log = new Float64Array(v.length);
  for (let d = 0; d < 3; d++) {
    let a = Float64Array.from(v);
    for (let axis = 0; axis < 3; axis++) a = pass(a, axis, axis === d ? g2 : g0);
    for (let i = 0; i < v.length; i++) log[i] += a[i];
  }
  return log;
}

function hfen(r, t, m, dims) {
  const lr = gaussianLaplace(r, dims), lt = gaussianLaplace(t, dims);
  let num = 0, den = 0;
  for (let i = 0; i < r.length; i++) if (m[i]) (num += (lr[i] - lt[i]) ** 2), (den += lt[i] ** 2);
  return 100 * Math.sqrt(num / den);
}

/** XSIM: at each mask voxel, SSIM over its 5×5×5 window's voxels inside the volume; C1 1e-4, C2 1e-6. */
function xsim(r, t, m, dims) {
  const [X, Y, Z] = dims;
  let total = 0, counted = 0;
  for (let z = 0; z < Z; z++)
    for (let y = 0; y < Y; y++)
      for (let x = 0; x < X; x++) {
        if (!m[x + X * (y + Y * z)]) continue;
        let n = 0, a = 0, b = 0, aa = 0, bb = 0, ab = 0;
        for (let w = Math.max(0, z - 2); w <= Math.min(Z - 1, z + 2); w++)
          for (let v = Math.max(0, y - 2); v <= Math.min(Y - 1, y + 2); v++)
            for (let u = Math.max(0, x - 2); u <= Math.min(X - 1, x + 2); u++) {
              const p = r[u + X * (v + Y * w)], q = t[u + X * (v + Y * w)];
              n++, (a += p), (b += q), (aa += p * p), (bb += q * q), (ab += p * q);
            }
        const ma = a / n, mb = b / n;
        const num = (2 * ma * mb + 1e-4) * (2 * (ab / n - ma * mb) + 1e-6);
        const den = (ma * ma + mb * mb + 1e-4) * (aa / n - ma * ma + bb / n - mb * mb + 1e-6);
        if (den > 0) (total += num / den), counted++;
      }
  return total / counted;
}

function expectedScores(r, t, m, dims) {
  return { ...nrmseAndCc(r, t, m), hfen: hfen(r, t, m, dims), xsim: xsim(r, t, m, dims) };
}

function assertScores(got, want, what) {
  for (const k of ['nrmse', 'nrmseDetrended', 'hfen', 'cc', 'xsim']) {
    const rel = Math.abs(got[k] - want[k]) / Math.max(Math.abs(want[k]), 1e-12);
    assert.ok(rel < 1e-6, `${what}: ${k} ${got[k]} but the definition gives ${want[k]} (relative ${rel})`);
  }
}

// ---- tessera-qsm score on a phantom's TKD. ----

const DIMS = [40, 40, 40];
const geometry = { dims: DIMS, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
const AFFINE = [1, 0, 0, -20, 0, 1, 0, -22, 0, 0, 1, -18, 0, 0, 0, 1];

test('score: a phantom\'s TKD scored by the CLI equals the five definitions computed here; other grids are refused in words', async () => {
  const p = await tessera.phantom({ geometry, seed: 3 });
  const { data: chi } = await tessera.tkd({ keepInputs: true, field: p.field, mask: p.mask, geometry });
  const like = { dims: DIMS, voxelMm: [1, 1, 1], affine: AFFINE };
  fs.writeFileSync(f('tkd.nii.gz'), await writeNifti(chi, like, { gzip: true }));
  fs.writeFileSync(f('truth.nii'), await writeNifti(p.chi, like));
  fs.writeFileSync(f('mask.nii.gz'), await writeNifti(Float32Array.from(p.mask), like, { gzip: true }));
  const r = await runCli(['score', '--chi', 'tkd.nii.gz', '--reference', 'truth.nii', '--mask', 'mask.nii.gz', '--json'], { cwd: dir });
  assert.equal(r.code, 0, r.stderr);
  const got = JSON.parse(r.stdout);
  const want = expectedScores(chi, p.chi, p.mask, DIMS);
  assertScores(got, want, 'TKD of the phantom');
  assert.equal(got.voxels, p.mask.reduce((a, b) => a + b, 0));
  // A TKD of a noiseless phantom: close to the truth, not equal to it.
  assert.ok(got.cc > 0.7 && got.cc < 1 && got.xsim > 0 && got.xsim < 1 && got.nrmse > 1, JSON.stringify(got));

  const text = await runCli(['score', '--chi', 'tkd.nii.gz', '--reference', 'truth.nii', '--mask', 'mask.nii.gz'], { cwd: dir });
  assert.equal(text.code, 0, text.stderr);
  assert.match(text.stdout, new RegExp(`^NRMSE\\s+${want.nrmse.toFixed(3)} %  \\(demeaned\\)$`, 'm'));
  assert.match(text.stdout, new RegExp(`^XSIM\\s+${want.xsim.toFixed(6)}$`, 'm'));

  // Other dims, voxel size or placement: refused, naming what differs.
  fs.writeFileSync(f('small.nii'), await writeNifti(p.chi.subarray(0, 40 * 40 * 39), { ...like, dims: [40, 40, 39] }));
  fs.writeFileSync(f('thick.nii'), await writeNifti(p.chi, { ...like, voxelMm: [1, 1, 2], affine: AFFINE.map((v, i) => (i === 10 ? 2 : v)) }));
  fs.writeFileSync(f('moved.nii'), await writeNifti(p.chi, { ...like, affine: AFFINE.map((v, i) => (i === 3 ? -10 : v)) }));
  const refused = [
    ['small.nii', /^error: the reference small\.nii is 40×40×39 voxels but the χ tkd\.nii\.gz is 40×40×40: the scores compare voxel by voxel/],
    ['thick.nii', /^error: the reference thick\.nii has 1×1×2 mm voxels but the χ tkd\.nii\.gz has 1×1×1 mm/],
    ['moved.nii', /^error: the reference moved\.nii is placed differently in the scanner than the χ tkd\.nii\.gz .*origin \(-10, -22, -18\) mm vs sform origin \(-20, -22, -18\) mm\)/],
  ];
  for (const [file, message] of refused) {
    const bad = await runCli(['score', '--chi', 'tkd.nii.gz', '--reference', file, '--mask', 'mask.nii.gz'], { cwd: dir });
    assert.equal(bad.code, 1, `${file}: ${bad.stderr}`);
    assert.match(bad.stderr, message);
  }
  const usage = await runCli(['score', '--chi', 'tkd.nii.gz', '--reference', 'truth.nii'], { cwd: dir });
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /^error: --mask is required/);
});

test('score(): Volumes or arrays with dims; a mask reaching the volume\'s faces (mirrored LoG, cut XSIM windows)', async () => {
  const dims = [12, 10, 9];
  const n = dims[0] * dims[1] * dims[2];
  let s = 7;
  const rnd = () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648) * 2 - 1;
  const t = new Float32Array(n), r = new Float32Array(n);
  for (let z = 0; z < dims[2]; z++)
    for (let y = 0; y < dims[1]; y++)
      for (let x = 0; x < dims[0]; x++) {
        const i = x + dims[0] * (y + dims[1] * z);
        t[i] = 0.1 * Math.sin(0.7 * x + 0.3 * y) + 0.05 * Math.cos(0.9 * z) + 0.02 * rnd();
        r[i] = 0.8 * t[i] + 0.01 + 0.02 * rnd();
      }
  const all = new Uint8Array(n).fill(1);
  const want = expectedScores(r, t, all, dims);
  const volume = (data) => makeVolume({ dims, voxelMm: [1, 1, 1], data });
  assertScores(await tessera.score({ chi: volume(r), reference: volume(t) }), want, 'Volumes, no mask');
  const half = all.map((_, i) => (i % 7 < 4 ? 1 : 0));
  assertScores(await tessera.score({ chi: r, reference: t, mask: half, geometry: { dims } }), expectedScores(r, t, half, dims), 'arrays, a sparse mask');
  await assert.rejects(tessera.score({ chi: volume(r), reference: makeVolume({ dims: [12, 10, 8], voxelMm: [1, 1, 1], data: t.subarray(0, 960) }) }), /reference is 12×10×8 but chi is 12×10×9/);
  await assert.rejects(tessera.score({ chi: r, reference: t, geometry: { dims }, mask: new Uint8Array(n) }), /mask is empty/);
  await assert.rejects(tessera.score({ chi: r, reference: new Float32Array(n).fill(0.2), geometry: { dims } }), /reference is constant/);
});

// ---- tessera-qsm qsm-ci on a directory laid out as QSM-CI's contract says. ----

/** A gzipped 4D float32 NIfTI: writeNifti's 3D file of nz·echoes slices with dim[0] = 4, dim[3] = nz, dim[4] = echoes. */
async function gzNifti4D(data, { dims, ...like }, echoes) {
  const b = await writeNifti(data, { ...like, dims: [dims[0], dims[1], dims[2] * echoes] });
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  dv.setInt16(40, 4, true);
  dv.setInt16(46, dims[2], true);
  dv.setInt16(48, echoes, true);
  return zlib.gzipSync(b);
}

/** Pearson's r inside m. */
function pearson(a, b, m) {
  return nrmseAndCc(a, b, m).cc;
}

test('qsm-ci: phase, magnitude, mask and params.json in; totalfield, localfield and chimap (ppm, gzipped, the input\'s grid) out', async () => {
  const scanGeometry = { dims: [64, 64, 48], voxelMm: [3, 3, 3], b0Dir: [0, 0, 1] };
  const te = [0.004, 0.008, 0.012, 0.016];
  const scan = await tessera.phantomScan({ geometry: scanGeometry, te, b0: 3, snr: 100 });
  const like = { dims: scanGeometry.dims, voxelMm: [3, 3, 3], affine: [3, 0, 0, -96, 0, 3, 0, -100, 0, 0, 3, -70, 0, 0, 0, 1] };
  const input = path.join(dir, 'ci-in');
  fs.mkdirSync(input);
  fs.writeFileSync(path.join(input, 'phase.nii.gz'), await gzNifti4D(scan.phase, like, te.length));
  fs.writeFileSync(path.join(input, 'magnitude.nii.gz'), await gzNifti4D(scan.magnitude, like, te.length));
  fs.writeFileSync(path.join(input, 'mask.nii.gz'), await writeNifti(Float32Array.from(scan.mask), like, { gzip: true }));
  fs.writeFileSync(path.join(input, 'params.json'), JSON.stringify({ TE: te, B0: 3, B0_dir: [0, 0, 1], voxel_size: [3, 3, 3] }));

  const r = await runCli(['qsm-ci', input], { cwd: dir });
  assert.equal(r.code, 0, r.stderr);
  assert.ok(r.stderr.includes(`qsm-ci: 64×64×48, 4 echoes (TE 4, 8, 12, 16 ms), B0 3 T: echo fit → ${await defaultBackgroundTitle(tessera)} → TV-ADMM`), r.stderr);
  const out = {};
  for (const name of ['totalfield', 'localfield', 'chimap']) {
    const bytes = new Uint8Array(fs.readFileSync(path.join(input, `${name}.nii.gz`)));
    assert.deepEqual([bytes[0], bytes[1]], [0x1f, 0x8b], `${name}.nii.gz is gzipped`);
    out[name] = readNifti(bytes);
    assert.deepEqual(out[name].dims, scanGeometry.dims, name);
    assert.deepEqual(out[name].voxelMm, [3, 3, 3], name);
    assert.deepEqual(out[name].affine, like.affine, name);
  }
  // Against the phantom's truths where the local field is defined (the background removal's eroded mask less the voxels whose echo
  // fit is unreliable, next to air; χ and the local field are 0 elsewhere).
  const inside = (v) => scan.mask.map((m, i) => (m && v[i] !== 0 ? 1 : 0));
  const rTotal = pearson(out.totalfield.data, scan.totalField, inside(out.localfield.data));
  const rLocal = pearson(out.localfield.data, scan.localField, inside(out.localfield.data));
  const rChi = pearson(out.chimap.data, scan.chi, inside(out.chimap.data));
  console.log(`qsm-ci against the truths: total field r ${rTotal}, local field r ${rLocal}, χ r ${rChi}`);
  assert.ok(rTotal > 0.99, `total field r ${rTotal}`);
  assert.ok(rLocal > 0.9, `local field r ${rLocal}`);
  assert.ok(rChi > 0.85, `χ r ${rChi}`);

  // --in/--out, another method and background removal; then the contract's refusals.
  const other = path.join(dir, 'ci-out');
  const pdf = await runCli(['qsm-ci', '--in', input, '--out', other, '--method', 'tkd', '--background', 'pdf', '--quiet'], { cwd: dir });
  assert.equal(pdf.code, 0, pdf.stderr);
  const tkd = readNifti(new Uint8Array(fs.readFileSync(path.join(other, 'chimap.nii.gz'))));
  const rTkd = pearson(tkd.data, scan.chi, inside(tkd.data));
  console.log(`qsm-ci --method tkd --background pdf: χ r ${rTkd}`);
  assert.ok(rTkd > 0.6, `TKD χ r ${rTkd}`);

  fs.writeFileSync(path.join(input, 'params.json'), JSON.stringify({ TE: [0.004, 0.008], B0: 3 }));
  const fewTe = await runCli(['qsm-ci', input, '--out', other], { cwd: dir });
  assert.equal(fewTe.code, 1);
  assert.match(fewTe.stderr, /params\.json gives 2 echo time\(s\) but the phase .*phase\.nii\.gz holds 4 echo\(es\)/);
  fs.writeFileSync(path.join(input, 'params.json'), JSON.stringify({ TE: [4, 8, 12, 16], B0: 3 }));
  const ms = await runCli(['qsm-ci', input], { cwd: dir });
  assert.equal(ms.code, 1);
  assert.match(ms.stderr, /TE must be echo times in seconds \(values above 1 look like milliseconds\)/);
  // Without magnitude.nii.gz (optional in the contract) the run goes on (TKD: the warnings are the point, not the
  // inversion); without params.json it is refused.
  fs.writeFileSync(path.join(input, 'params.json'), JSON.stringify({ TE: te, B0: 3 }));
  fs.rmSync(path.join(input, 'magnitude.nii.gz'));
  fs.rmSync(path.join(other, 'chimap.nii.gz'));
  const noMagnitude = await runCli(['qsm-ci', input, '--out', other, '--method', 'tkd'], { cwd: dir });
  assert.equal(noMagnitude.code, 0, noMagnitude.stderr);
  assert.match(noMagnitude.stderr, /has no magnitude\.nii\.gz: the echo fit weighs every echo alike/);
  assert.match(noMagnitude.stderr, /params\.json gives no B0_dir: B0 taken as \[0, 0, 1\] in the voxel axes, from the phase's header/);
  assert.ok(fs.existsSync(path.join(other, 'chimap.nii.gz')), 'χ written without the magnitude');
  fs.rmSync(path.join(input, 'params.json'));
  const none = await runCli(['qsm-ci', input], { cwd: dir });
  assert.equal(none.code, 1);
  assert.match(none.stderr, /has no params\.json \(it needs phase\.nii\.gz, mask\.nii\.gz, params\.json, and magnitude\.nii\.gz when there is one\)/);
});
