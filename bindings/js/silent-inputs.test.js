// Inputs that used to run to a wrong or meaningless χ without a word, through the public API and the CLI in node: each
// is refused in words, or warns and returns a sane χ. Real files: ../shared/data/romeo-small (Phase.nii, whose header
// leaves the phase scaled; phase_with_nan.nii); the rest on a small phantom head scan (48×48×36 at 4 mm, 3 echoes):
// a mask grown by 2 voxels into skull and air, an all-ones mask (default removal and PDF), a local field in Hz given
// as ppm, a single slice, a 100 mm voxel, a mask of −1 outside.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTessera, readEchoes, readNifti, writeNifti, GAMMA_BAR_MHZ_PER_T } from './index.js';
import { nifti4d } from '../../tests/js/nifti4d.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const ROMEO = path.resolve(here, '../../../shared/data/romeo-small');
const HAVE_ROMEO = fs.existsSync(path.join(ROMEO, 'Phase.nii'));
const geometry = { dims: [48, 48, 36], voxelMm: [4, 4, 4], b0Dir: [0, 0, 1] };
const like = { dims: geometry.dims, voxelMm: geometry.voxelMm };
const N = 48 * 48 * 36;
const TE = [0.004, 0.008, 0.012];
let tessera, scan, dir;

/** The mask grown by one voxel along each axis (6-connected dilation). */
function dilate(m, [X, Y, Z]) {
  const o = Uint8Array.from(m);
  for (let z = 0; z < Z; z++) for (let y = 0; y < Y; y++) for (let x = 0; x < X; x++) {
    const i = x + X * (y + Y * z);
    if (!m[i] && ((x > 0 && m[i - 1]) || (x < X - 1 && m[i + 1]) || (y > 0 && m[i - X]) || (y < Y - 1 && m[i + X]) || (z > 0 && m[i - X * Y]) || (z < Z - 1 && m[i + X * Y]))) o[i] = 1;
  }
  return o;
}


/** tessera-qsm with args in dir: {status, stderr, out}. */
const cli = (...args) => {
  const r = spawnSync(process.execPath, [path.join(here, 'cli.js'), ...args], { cwd: dir, encoding: 'utf8', timeout: 240000 });
  return { status: r.status, stderr: r.stderr, out: r.stdout + r.stderr };
};
const chiOf = (file) => readNifti(new Uint8Array(fs.readFileSync(path.join(dir, file)))).data;
/** 1st and 99th percentile of χ's nonzero voxels, and their count. */
function spread(chi) {
  const v = Float32Array.from(chi.filter((x) => x !== 0)).sort();
  return { n: v.length, p1: v[Math.floor(0.01 * v.length)], p99: v[Math.floor(0.99 * v.length)], finite: chi.every(Number.isFinite) };
}
/** A brain's χ: finite, defined in many voxels, its robust range within a few ppm but not collapsed to nothing. */
function assertSane(chi, what, minVoxels = 1000) {
  const s = spread(chi);
  assert.ok(s.finite, `${what}: χ finite`);
  assert.ok(s.n >= minVoxels, `${what}: χ defined in ${s.n} voxels`);
  assert.ok(s.p99 - s.p1 > 0.02 && Math.max(-s.p1, s.p99) < 2, `${what}: χ 1st–99th percentile [${s.p1}, ${s.p99}] ppm`);
  return s;
}

before(async () => {
  tessera = await createTessera({ workers: 1 });
  scan = await tessera.phantomScan({ geometry, te: TE, snr: 100, seed: 2 });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-silent-'));
  const w = (name, bytes) => fs.writeFileSync(path.join(dir, name), bytes);
  w('phase.nii', await nifti4d(scan.phase, 3, like));
  w('mag.nii', await nifti4d(scan.magnitude, 3, like));
  w('mask.nii', await writeNifti(Float32Array.from(scan.mask), like));
  w('grown.nii', await writeNifti(Float32Array.from(dilate(dilate(scan.mask, geometry.dims), geometry.dims)), like));
  w('ones.nii', await writeNifti(new Float32Array(N).fill(1), like));
  w('minus1.nii', await writeNifti(Float32Array.from(scan.mask, (m) => (m ? 1 : -1)), like));
  w('local_hz.nii', await writeNifti(Float32Array.from(scan.localField, (v) => v * GAMMA_BAR_MHZ_PER_T * 3), like));
  const big = { dims: geometry.dims, voxelMm: [100, 100, 100] };
  w('phase_100mm.nii', await nifti4d(scan.phase, 3, big));
  w('mag_100mm.nii', await nifti4d(scan.magnitude, 3, big));
  w('mask_100mm.nii', await writeNifti(Float32Array.from(scan.mask), big));
  // One slice (z = 18) of each echo.
  const slab = { dims: [48, 48, 1], voxelMm: [4, 4, 4] };
  const slice = (a) => Float32Array.from({ length: 3 * 2304 }, (_, i) => a[Math.floor(i / 2304) * N + 18 * 2304 + (i % 2304)]);
  w('phase_slice.nii', await nifti4d(slice(scan.phase), 3, slab));
  w('mag_slice.nii', await nifti4d(slice(scan.magnitude), 3, slab));
});
after(async () => {
  await tessera?.terminate();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const base = () => ({ phase: scan.phase, magnitude: scan.magnitude, geometry, te: TE, b0: 3, method: 'tkd', keepInputs: true });
/** The pipeline on the true brain mask (0/1) through the API: run once, the reference of two tests. */
let truthStarted;
const truthRun = () => (truthStarted ??= tessera.pipeline({ ...base(), mask: scan.mask }));
const cliPipeline = (...args) => cli('pipeline', '--phase', 'phase.nii', '--magnitude', 'mag.nii', '--te', TE.join(','), '--b0', '3', '--method', 'tkd', ...args);

test('ROMEO Phase.nii (a header that leaves the phase scaled to a span of 0.0073 rad): API and CLI rescale it with a warning; χ sane', { skip: !HAVE_ROMEO && 'no romeo-small data' }, async () => {
  const phase = readEchoes(fs.readFileSync(path.join(ROMEO, 'Phase.nii')));
  const magnitude = readEchoes(fs.readFileSync(path.join(ROMEO, 'Mag.nii')));
  const out = await tessera.pipeline({ keepInputs: true, phase, magnitude, te: TE, method: 'tkd' });
  assert.ok(out.report.warnings.some((w) => /the phase spans \[-0\.00367438, 0\.00367438\], far less than the 2π of a wrapped phase in radians: rescaled/.test(w)), out.report.warnings.join('\n'));
  const api = assertSane(out.chi.data, 'API');
  const r = cli('pipeline', '--phase', path.join(ROMEO, 'Phase.nii'), '--magnitude', path.join(ROMEO, 'Mag.nii'), '--te', TE.join(','), '--method', 'tkd', '--out', 'romeo_chi.nii');
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /warning: the phase spans \[-0\.00367438, 0\.00367438\], far less than the 2π/);
  const c = assertSane(chiOf('romeo_chi.nii'), 'CLI');
  assert.equal(c.n, api.n, 'the CLI defines χ where the API does');
});

test('ROMEO phase_with_nan.nii: NaN inside the mask refused in words (API, CLI); outside the mask set to 0 with a warning, and its ±4.7 span rescaled with a warning (API, CLI: the same χ)', { skip: !HAVE_ROMEO && 'no romeo-small data' }, async () => {
  const file = path.join(ROMEO, 'phase_with_nan.nii');
  const phase = readEchoes(fs.readFileSync(file));
  const n = phase.dims[0] * phase.dims[1] * phase.dims[2];
  const ones = new Uint8Array(n).fill(1);
  await assert.rejects(tessera.pipeline({ keepInputs: true, phase, te: [0.004, 0.008], method: 'tkd' }), /640 values are NaN or Inf \(the first at index 0\); give a finite wrapped phase/);
  await assert.rejects(tessera.pipeline({ keepInputs: true, phase, mask: ones, te: [0.004, 0.008], method: 'tkd' }), /640 values are NaN or Inf/);
  const finite = Uint8Array.from({ length: n }, (_, i) => (Number.isFinite(phase.data[i]) && Number.isFinite(phase.data[n + i]) ? 1 : 0));
  // PDF cut to 5 iterations on an 8-voxel pad (its defaults: 30 on 40), here and in the CLI's run below: what is checked
  // is how the inputs are read, not PDF.
  const out = await tessera.pipeline({ keepInputs: true, phase, mask: finite, te: [0.004, 0.008], method: 'tkd', background: 'pdf', pdf: { maxIterations: 5, padVoxels: 8 } });
  assert.ok(out.report.warnings.some((w) => /phase holds 1280 NaN or infinite value\(s\) outside the mask: set to 0/.test(w)), out.report.warnings.join('\n'));
  assert.ok(out.report.warnings.some((w) => /the phase spans \[-4\.65724, 4\.70933\], far more than the 2π[\s\S]*rescaled/.test(w)), out.report.warnings.join('\n'));
  assert.ok(out.chi.data.every(Number.isFinite), 'χ finite');
  fs.writeFileSync(path.join(dir, 'nan_ones.nii'), await writeNifti(new Float32Array(n).fill(1), { dims: phase.dims.slice(0, 3), voxelMm: phase.voxelMm.slice(0, 3) }));
  const r = cli('pipeline', '--phase', file, '--mask', 'nan_ones.nii', '--te', '0.004,0.008', '--method', 'tkd', '--out', 'nan_chi.nii');
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /holds 1280 NaN or infinite values inside the mask: fix the file or the mask/);
  // The mask of the finite voxels: the CLI warns in the API's words and writes the API's χ.
  fs.writeFileSync(path.join(dir, 'nan_finite.nii'), await writeNifti(Float32Array.from(finite), { dims: phase.dims.slice(0, 3), voxelMm: phase.voxelMm.slice(0, 3) }));
  const ok = cli('pipeline', '--phase', file, '--mask', 'nan_finite.nii', '--te', '0.004,0.008', '--method', 'tkd', '--option', 'background=pdf', '--option', 'pdf.maxIterations=5', '--option', 'pdf.padVoxels=8', '--out', 'nan_finite_chi.nii');
  assert.equal(ok.status, 0, ok.stderr);
  assert.match(ok.stderr, /warning: the phase holds 1280 NaN or infinite value\(s\) outside the mask: set to 0 there/);
  assert.match(ok.stderr, /warning: the phase spans \[-4\.65724, 4\.70933\], far more than the 2π/);
  assert.deepEqual(chiOf('nan_finite_chi.nii'), out.chi.data, 'the CLI writes the API\'s χ');
});

test('a mask grown by 2 voxels into skull and air: API and CLI warn that it reaches outside the brain; χ sane', async () => {
  const grown = dilate(dilate(scan.mask, geometry.dims), geometry.dims);
  const out = await tessera.pipeline({ ...base(), mask: grown });
  const warn = /% of the mask's voxels have a magnitude at or below the tissue threshold \(air, noise or bone\): the mask reaches outside the brain/;
  assert.ok(out.report.warnings.some((w) => warn.test(w)), out.report.warnings.join('\n'));
  assertSane(out.chi.data, 'API');
  const truth = await truthRun();
  assert.ok(!truth.report.warnings.some((w) => warn.test(w)), 'the true brain mask gets no such warning');
  const r = cliPipeline('--mask', 'grown.nii', '--out', 'grown_chi.nii');
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /warning: .*the mask reaches outside the brain/);
  assertSane(chiOf('grown_chi.nii'), 'CLI');
});

test('an all-ones mask: refused in words with the default background removal and with PDF (API, CLI)', async () => {
  const ones = new Uint8Array(N).fill(1);
  const refusal = /% of the mask's voxels have a magnitude at or below the tissue threshold \(air, noise or bone\): the mask is mostly outside the head/;
  await assert.rejects(tessera.pipeline({ ...base(), mask: ones }), refusal);
  await assert.rejects(tessera.pipeline({ ...base(), mask: ones, background: 'pdf' }), refusal);
  await assert.rejects(tessera.pipeline({ ...base(), mask: ones, vsharp: { minRadius: 1 } }), refusal);
  for (const extra of [[], ['--option', 'background=pdf']]) {
    const r = cliPipeline('--mask', 'ones.nii', ...extra, '--out', 'ones_chi.nii');
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /the mask is mostly outside the head/);
    assert.ok(!fs.existsSync(path.join(dir, 'ones_chi.nii')), 'no χ written');
  }
});

test('a local field in Hz given as ppm: refused in words naming the units (API invert, CLI invert)', async () => {
  const hz = Float32Array.from(scan.localField, (v) => v * GAMMA_BAR_MHZ_PER_T * 3);
  await assert.rejects(tessera.invert({ keepInputs: true, field: hz, mask: scan.mask, geometry, method: 'tkd' }), /beyond ±1 ppm[\s\S]*looks like Hz or rad\/s/);
  const r = cli('invert', '--field', 'local_hz.nii', '--mask', 'mask.nii', '--method', 'tkd', '--out', 'hz_chi.nii');
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /looks like Hz or rad\/s[\s\S]*--units hz --b0 3/);
  // Given its units, the same file inverts.
  const ok = cli('invert', '--field', 'local_hz.nii', '--units', 'hz', '--b0', '3', '--mask', 'mask.nii', '--method', 'tkd', '--out', 'hz_chi.nii');
  assert.equal(ok.status, 0, ok.stderr);
  assertSane(chiOf('hz_chi.nii'), 'CLI --units hz');
});

test('a single slice (nz = 1): refused in words (API pipeline and invert, CLI pipeline)', async () => {
  const g1 = { dims: [48, 48, 1], voxelMm: [4, 4, 4], b0Dir: [0, 0, 1] };
  const thin = /48×48×1 holds 1 voxel\(s\) along z: a 3D dipole inversion needs at least 3 along every axis/;
  const slice = (a, e) => Float32Array.from({ length: e * 2304 }, (_, i) => a[Math.floor(i / 2304) * N + 18 * 2304 + (i % 2304)]);
  await assert.rejects(tessera.pipeline({ keepInputs: true, phase: slice(scan.phase, 3), magnitude: slice(scan.magnitude, 3), geometry: g1, te: TE, method: 'tkd' }), thin);
  await assert.rejects(tessera.invert({ keepInputs: true, field: slice(scan.localField, 1), geometry: g1, method: 'tkd' }), thin);
  const r = cli('pipeline', '--phase', 'phase_slice.nii', '--magnitude', 'mag_slice.nii', '--te', TE.join(','), '--method', 'tkd', '--out', 'slice_chi.nii');
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, thin);
});

test('a 100 mm voxel: API and CLI warn that it is outside 0.1–10 mm; χ as with the same grid at 4 mm (the inversion is scale-free)', async () => {
  const big = { ...geometry, voxelMm: [100, 100, 100] };
  const out = await tessera.pipeline({ ...base(), geometry: big, mask: scan.mask });
  const warn = /the voxel size 100×100×100 mm is outside 0\.1–10 mm: taken as millimetres as given; check the header's units/;
  assert.ok(out.report.warnings.some((w) => warn.test(w)), out.report.warnings.join('\n'));
  assertSane(out.chi.data, 'API');
  const r = cli('pipeline', '--phase', 'phase_100mm.nii', '--magnitude', 'mag_100mm.nii', '--mask', 'mask_100mm.nii', '--te', TE.join(','), '--method', 'tkd', '--out', 'big_chi.nii');
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /warning: the voxel size 100×100×100 mm is outside 0\.1–10 mm/);
  assertSane(chiOf('big_chi.nii'), 'CLI');
});

test('a mask of −1 outside: read as outside with a warning (API, CLI); χ equals the 0/1 mask\'s', async () => {
  const minus = Float32Array.from(scan.mask, (m) => (m ? 1 : -1));
  const outside = scan.mask.filter((m) => !m).length;
  const out = await tessera.pipeline({ ...base(), mask: minus });
  assert.ok(out.report.warnings.some((w) => new RegExp(`the mask holds ${outside} value\\(s\\) other than 0 and 1 \\(in \\[-1, -1\\]\\): read as inside where > 0, outside where 0, negative`).test(w)), out.report.warnings.join('\n'));
  const ref = await truthRun();
  assert.deepEqual(out.chi.data, ref.chi.data);
  assertSane(out.chi.data, 'API');
  const r = cliPipeline('--mask', 'minus1.nii', '--out', 'minus1_chi.nii');
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, new RegExp(`warning: the mask holds ${outside} value\\(s\\) other than 0 and 1`));
  // The CLI's χ with the −1 mask is the 0/1 mask's, bit for bit (the API's run on the same scan: the CLI runs the API).
  assert.deepEqual(chiOf('minus1_chi.nii'), ref.chi.data);
});
