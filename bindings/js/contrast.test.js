// tessera.swi() and tessera.r2star() on real data (ROMEO's small multi-echo scan) and on the phantom head scan, and
// the CLI's swi and r2star commands: sane ranges, SWI never above the magnitude, no NaN, progress and cancel.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createTessera, readEchoes, readNifti, makeVolume } from './index.js';

const ROMEO = fileURLToPath(new URL('../../../shared/data/romeo-small/', import.meta.url));
const HAVE_ROMEO = fs.existsSync(path.join(ROMEO, 'Mag.nii'));
const TE = [0.004, 0.008, 0.012]; // ROMEO's files carry no TEs (their README): any equally spaced three serve

let tessera;
before(async () => {
  tessera = await createTessera({ workers: 1, hardwareThreads: 2 });
});
after(() => tessera?.terminate());

/** ROMEO's phase in radians: the files store −π…π but their header scales it by 1/855 (README), undone here. */
function romeoInputs() {
  const mag = readEchoes(fs.readFileSync(path.join(ROMEO, 'Mag.nii')));
  const ph = readEchoes(fs.readFileSync(path.join(ROMEO, 'Phase.nii')));
  const rad = Float32Array.from(ph.data, (v) => v * 855);
  let peak = 0;
  for (const v of rad) peak = Math.max(peak, Math.abs(v));
  assert.ok(peak > 3 && peak < Math.PI + 0.01, `rescaled phase spans ±${peak}`);
  return { mag, phase: makeVolume({ ...ph, data: rad, echoes: ph.echoes }) };
}

const finite = (a) => a.every((v) => Number.isFinite(v));

test('swi on ROMEO\'s scan: finite, never above the RSS magnitude, minIP below SWI, veins darkened somewhere', { skip: !HAVE_ROMEO && 'no romeo-small data' }, async () => {
  const { mag, phase } = romeoInputs();
  const steps = [];
  const out = await tessera.swi({ keepInputs: true, phase, magnitude: mag, te: TE, onProgress: (p) => steps.push(p.done) });
  assert.deepEqual(out.swi.dims.slice(0, 3), [51, 51, 41]);
  assert.ok(finite(out.swi.data) && finite(out.minIp.data));
  let darkened = 0;
  let inside = 0;
  for (let i = 0; i < out.swi.data.length; i++) {
    assert.ok(out.swi.data[i] <= out.magnitude.data[i] * (1 + 1e-6), `voxel ${i}: SWI ${out.swi.data[i]} > magnitude ${out.magnitude.data[i]}`);
    assert.ok(out.minIp.data[i] <= out.swi.data[i]);
    if (out.mask.data[i]) {
      inside++;
      if (out.phaseMask.data[i] < 0.9) darkened++;
    }
  }
  // The RSS magnitude is sqrt(Σ|S|²) of the input's echoes.
  const n = 51 * 51 * 41;
  const i0 = Math.floor(n / 2);
  const rss = Math.sqrt([0, 1, 2].reduce((s, e) => s + mag.data[e * n + i0] ** 2, 0));
  assert.ok(Math.abs(out.magnitude.data[i0] - rss) <= 1e-5 * rss);
  assert.ok(inside > 1000, `mask of ${inside} voxels`);
  assert.ok(darkened > 0.005 * inside && darkened < 0.5 * inside, `${darkened} of ${inside} darkened`);
  assert.ok(steps.length > 10, `progress events ${steps.length}`);
  for (let k = 1; k < steps.length; k++) assert.ok(steps[k] >= steps[k - 1]);
  console.log(`romeo swi: ${darkened} of ${inside} mask voxels darkened below 0.9, ${steps.length} progress events`);
});

test('r2star on ROMEO\'s scan: ARLO and log-linear within physiological bounds in the brain', { skip: !HAVE_ROMEO && 'no romeo-small data' }, async () => {
  const { mag, phase } = romeoInputs();
  const { mask } = await tessera.swi({ keepInputs: true, phase, magnitude: mag, te: TE }); // the brain mask the core makes
  for (const method of ['arlo', 'loglinear']) {
    const out = await tessera.r2star({ keepInputs: true, magnitude: mag, te: TE, r2star: { method } });
    assert.equal(out.method, method);
    assert.ok(finite(out.r2star.data) && finite(out.t2star.data));
    const vals = [];
    for (let i = 0; i < mask.data.length; i++) if (mask.data[i]) vals.push(out.r2star.data[i]);
    vals.sort((a, b) => a - b);
    const median = vals[vals.length >> 1];
    // Brain tissue at 3 T (white matter ~20, grey ~15, deep grey up to ~50 s⁻¹; Peran 2007, Li 2011): the median
    // lies in 5…80 s⁻¹ whatever the real TEs (our 4, 8, 12 ms are assumed).
    assert.ok(median > 5 && median < 80, `${method}: median R2* ${median} s⁻¹`);
    for (const v of out.r2star.data) assert.ok(v >= 0 && v <= 2000);
    for (const v of out.t2star.data) assert.ok(v >= 0 && v <= 1);
    console.log(`romeo r2star ${method}: median ${median.toFixed(2)} s⁻¹ in ${vals.length} brain voxels (TE assumed 4, 8, 12 ms)`);
  }
});

test('swi and r2star on the phantom scan: the brain\'s median R2* is white matter\'s, SWI finite and never above the magnitude', async () => {
  const geometry = { dims: [64, 64, 48], voxelMm: [3, 3, 3], b0Dir: [0, 0, 1] };
  const scan = await tessera.phantomScan({ geometry, seed: 4, snr: 100 });
  const r = await tessera.r2star({ keepInputs: true, geometry, magnitude: scan.magnitude, te: scan.te, mask: scan.mask });
  // White matter, most of the phantom brain's voxels, has T2* 53 ms (tissue_signal: 18.87 s⁻¹): the brain's median.
  const vals = [];
  for (let i = 0; i < scan.mask.length; i++) if (scan.mask[i]) vals.push(r.r2star.data[i]);
  vals.sort((a, b) => a - b);
  const median = vals[vals.length >> 1];
  assert.ok(Math.abs(median - 1 / 0.053) < 0.04 / 0.053, `phantom brain median R2* ${median}`);
  const s = await tessera.swi({ keepInputs: true, geometry, phase: scan.phase, magnitude: scan.magnitude, te: scan.te, mask: scan.mask });
  for (let i = 0; i < s.swi.data.length; i++) assert.ok(s.swi.data[i] <= s.magnitude.data[i] * (1 + 1e-6));
  assert.ok(finite(s.swi.data) && finite(s.minIp.data));
  console.log(`phantom: brain median R2* ${median.toFixed(2)} s⁻¹`);
});

test('r2star refuses ARLO on unequal echoes in words; swi cancels between steps', async () => {
  const geometry = { dims: [8, 8, 4], voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  const n = 256;
  const magnitude = new Float32Array(3 * n).map((_, i) => Math.exp(-30 * [0.004, 0.008, 0.014][Math.floor(i / n)]));
  await assert.rejects(tessera.r2star({ keepInputs: true, geometry, magnitude, te: [0.004, 0.008, 0.014] }), /equally spaced.*loglinear/);
  const ok = await tessera.r2star({ keepInputs: true, geometry, magnitude, te: [0.004, 0.008, 0.014], r2star: { method: 'loglinear' } });
  assert.ok(Math.abs(ok.r2star.data[5] - 30) < 0.01);
  const big = { dims: [64, 64, 48], voxelMm: [3, 3, 3], b0Dir: [0, 0, 1] };
  const scan = await tessera.phantomScan({ geometry: big, seed: 1 });
  const controller = new AbortController();
  let seen = 0;
  const run = tessera.swi({ keepInputs: true, geometry: big, phase: scan.phase, magnitude: scan.magnitude, te: scan.te, signal: controller.signal, onProgress: () => ++seen === 3 && controller.abort() });
  await assert.rejects(run, (e) => e.name === 'AbortError' || /cancel/i.test(e.message));
});

test('CLI: tessera-qsm swi and r2star write NIfTI with the input\'s header', { skip: !HAVE_ROMEO && 'no romeo-small data' }, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-contrast-'));
  const cli = fileURLToPath(new URL('./cli.js', import.meta.url));
  execFileSync(process.execPath, ['--no-experimental-fetch', cli, 'r2star', '--magnitude', path.join(ROMEO, 'Mag.nii'), '--te', TE.join(','), '--out', path.join(dir, 'r2s.nii'), '--t2star', path.join(dir, 't2s.nii.gz'), '--quiet']);
  const r2 = readNifti(fs.readFileSync(path.join(dir, 'r2s.nii')));
  const mag = readEchoes(fs.readFileSync(path.join(ROMEO, 'Mag.nii')));
  assert.deepEqual(r2.dims.slice(0, 3), mag.dims.slice(0, 3));
  assert.deepEqual(r2.voxelMm, mag.voxelMm);
  assert.ok(finite(r2.data));
  // The phase file is not radians as read (its header scales it by 1/855): the CLI refuses it in words, and
  // --phase-scale 855 (rad per value read) rescales it.
  execFileSync(process.execPath, ['--no-experimental-fetch', cli, 'swi', '--phase', path.join(ROMEO, 'Phase.nii'), '--magnitude', path.join(ROMEO, 'Mag.nii'), '--te', TE.join(','), '--phase-scale', '855', '--out', path.join(dir, 'swi.nii'), '--min-ip', path.join(dir, 'minip.nii'), '--quiet']);
  const swi = readNifti(fs.readFileSync(path.join(dir, 'swi.nii')));
  const minip = readNifti(fs.readFileSync(path.join(dir, 'minip.nii')));
  assert.deepEqual(swi.dims.slice(0, 3), mag.dims.slice(0, 3));
  assert.ok(finite(swi.data) && finite(minip.data));
  for (let i = 0; i < swi.data.length; i++) assert.ok(minip.data[i] <= swi.data[i]);
  fs.rmSync(dir, { recursive: true, force: true });
});
