// The pipeline from a total field map (a vendor B0 map in Hz) through the public API and the CLI in node, judged
// against the phantom head's truths and against the pipeline from its multi-echo phase.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { agreement } from '../../bench/speed-web.js';
import { createTessera, readNifti, writeNifti, GAMMA_BAR_MHZ_PER_T } from './index.js';
import { defaultBackgroundTitle } from '../../tests/js/background-titles.js';



const here = path.dirname(fileURLToPath(import.meta.url));
let tessera;
let scan;
let hz;
const geometry = { dims: [64, 64, 48], voxelMm: [3, 3, 3], b0Dir: [0, 0, 1] };
const te = [0.004, 0.008, 0.012, 0.016];
before(async () => {
  tessera = await createTessera({ workers: 1 });
  // Noiseless: the true total field given as a map and the field fitted from the phase then differ only by the fit.
  scan = await tessera.phantomScan({ geometry, te, snr: 0 });
  hz = Float32Array.from(scan.totalField, (ppm) => ppm * GAMMA_BAR_MHZ_PER_T * 3);
});
after(async () => {
  await tessera?.terminate();
});

const r = (a, b, mask) => agreement(a, b, mask).r;

/** ‖a − b‖ / ‖b‖ inside mask. */
function relative(a, b, mask) {
  let d = 0, n = 0;
  for (let i = 0; i < mask.length; i++) if (mask[i]) (d += (a[i] - b[i]) ** 2), (n += b[i] ** 2);
  return Math.sqrt(d / n);
}

test('pipeline from a total field in Hz: no echo fit, the same χ as from ppm, and close to the phase path\'s', async (t) => {
  const out = await tessera.pipeline({ keepInputs: true, totalField: hz, totalFieldUnits: 'hz', mask: scan.mask, geometry, b0: 3, method: 'rts' });
  const background = await defaultBackgroundTitle(tessera);
  assert.deepEqual(out.report.plan.stages, [background, 'RTS']);
  for (const k of ['mask', 'fieldHz', 'totalField', 'fitMask', 'localField', 'localMask', 'chi']) assert.deepEqual(out[k].dims, geometry.dims, k);
  for (const k of ['unwrappedPhase', 'offset', 'fitResidual']) assert.equal(out[k], null, k);
  assert.deepEqual(out.fitMask.data, Uint8Array.from(scan.mask, (m) => (m ? 1 : 0)));
  assert.ok(relative(out.totalField.data, scan.totalField, scan.mask) < 1e-6, 'the total field in ppm is the truth');
  const chiR = r(out.chi.data, scan.chi, out.localMask.data);
  assert.ok(chiR > 0.85, `χ r ${chiR}`);
  const ppm = await tessera.pipeline({ keepInputs: true, totalField: scan.totalField, totalFieldUnits: 'ppm', mask: scan.mask, geometry, b0: 3, method: 'rts' });
  assert.ok(relative(out.chi.data, ppm.chi.data, ppm.localMask.data) < 1e-4, 'Hz and ppm give the same χ');
  const phase = await tessera.pipeline({ keepInputs: true, phase: scan.phase, magnitude: scan.magnitude, mask: scan.mask, geometry, te, b0: 3, method: 'rts' });
  const both = phase.localMask.data.map((m, i) => (m && out.localMask.data[i] ? 1 : 0));
  const paths = r(out.chi.data, phase.chi.data, both);
  assert.ok(paths > 0.98, `χ r ${paths} against the phase path`);
  t.diagnostic(`χ r ${chiR.toFixed(4)} against the truth, ${paths.toFixed(4)} against the phase path (${background} + RTS)`);
});

test('pipeline from a total field with one echo\'s magnitude and no mask: the mask is made from it; every echo\'s magnitude is refused', async () => {
  const n = geometry.dims[0] * geometry.dims[1] * geometry.dims[2];
  const out = await tessera.pipeline({ keepInputs: true, totalField: hz, totalFieldUnits: 'hz', magnitude: scan.magnitude.subarray(0, n), geometry, method: 'tkd' });
  assert.deepEqual(out.report.plan.stages, ['brain mask', await defaultBackgroundTitle(tessera), 'TKD']);
  let both = 0, sum = 0;
  for (let i = 0; i < n; i++) (both += out.mask.data[i] && scan.mask[i] ? 1 : 0), (sum += (out.mask.data[i] ? 1 : 0) + (scan.mask[i] ? 1 : 0));
  assert.ok((2 * both) / sum > 0.8, `mask Dice ${(2 * both) / sum}`);
  assert.deepEqual(out.fitMask.data, out.mask.data);
  await assert.rejects(tessera.pipeline({ keepInputs: true, totalField: hz, totalFieldUnits: 'hz', magnitude: scan.magnitude, geometry, method: 'tkd' }), /magnitude/);
});

test('pipeline from a total field: a Hz map given as ppm, a missing unit and te with a total field are refused in words', async () => {
  await assert.rejects(tessera.pipeline({ keepInputs: true, totalField: hz, totalFieldUnits: 'ppm', mask: scan.mask, geometry, method: 'tkd' }), /looks like Hz[\s\S]*--units hz/);
  await assert.rejects(tessera.pipeline({ keepInputs: true, totalField: hz, mask: scan.mask, geometry, method: 'tkd' }), /totalField needs totalFieldUnits/);
  await assert.rejects(tessera.pipeline({ keepInputs: true, totalField: hz, totalFieldUnits: 'tesla', mask: scan.mask, geometry, method: 'tkd' }), /hz, rad\/s or ppm/);
  await assert.rejects(tessera.pipeline({ keepInputs: true, totalField: hz, totalFieldUnits: 'hz', te, mask: scan.mask, geometry, method: 'tkd' }), /needs no echo times/);
  const nan = Float32Array.from(hz);
  nan[scan.mask.indexOf(1)] = NaN;
  await assert.rejects(tessera.pipeline({ keepInputs: true, totalField: nan, totalFieldUnits: 'hz', mask: scan.mask, geometry, method: 'tkd' }), /1 NaN or infinite value\(s\) inside the mask/);
});

test('CLI: pipeline --total-field map.nii.gz --units hz writes the API\'s χ; --units ppm on it is refused', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-total-'));
  try {
    const like = { dims: geometry.dims, voxelMm: geometry.voxelMm };
    fs.writeFileSync(path.join(dir, 'b0map.nii.gz'), await writeNifti(hz, like, { gzip: true }));
    fs.writeFileSync(path.join(dir, 'mask.nii'), await writeNifti(Float32Array.from(scan.mask), like));
    const cli = (...args) => spawnSync(process.execPath, [path.join(here, 'cli.js'), 'pipeline', ...args], { cwd: dir, encoding: 'utf8', timeout: 240000 });
    const run = cli('--total-field', 'b0map.nii.gz', '--units', 'hz', '--mask', 'mask.nii', '--b0', '3', '--method', 'rts', '--out', 'chi.nii.gz', '--keep-intermediates', 'stages');
    assert.equal(run.status, 0, run.stderr);
    assert.ok((run.stderr + run.stdout).includes(`a total field in Hz, B0 3 T: ${await defaultBackgroundTitle(tessera)} → RTS`), run.stderr);
    const chi = readNifti(new Uint8Array(fs.readFileSync(path.join(dir, 'chi.nii.gz')))).data;
    const api = await tessera.pipeline({ keepInputs: true, totalField: hz, totalFieldUnits: 'hz', mask: scan.mask, geometry, b0: 3, method: 'rts' });
    assert.equal(chi.every((v, i) => Object.is(v, api.chi.data[i])), true, 'the CLI\'s χ is the API\'s');
    assert.ok(fs.existsSync(path.join(dir, 'stages', 'total_field_ppm.nii.gz')));
    assert.ok(!fs.existsSync(path.join(dir, 'stages', 'fit_residual.nii.gz')), 'no echo fit ran');
    const wrong = cli('--total-field', 'b0map.nii.gz', '--units', 'ppm', '--mask', 'mask.nii', '--method', 'tkd', '--out', 'x.nii');
    assert.notEqual(wrong.status, 0);
    assert.match(wrong.stderr, /looks like Hz \(--units hz/);
    const noUnits = cli('--total-field', 'b0map.nii.gz', '--mask', 'mask.nii', '--method', 'tkd', '--out', 'x.nii');
    assert.equal(noUnits.status, 2, noUnits.stderr);
    assert.match(noUnits.stderr, /--total-field needs --units hz, rad\/s or ppm/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
