// From a multi-echo scan to χ through the public API and the CLI in node: the C++ pipeline on the step engine,
// judged against the phantom head's truths.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { agreement } from '../../bench/speed-web.js';
import { createTessera, readNifti, writeNifti } from './index.js';
import { BACKGROUND_TITLES, defaultBackgroundTitle } from '../../tests/js/background-titles.js';


/** The stage title of the pipeline's default background removal, from the schema's default (whichever removal it is). */

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
let tessera;
let scan;
const geometry = { dims: [64, 64, 48], voxelMm: [3, 3, 3], b0Dir: [0, 0, 1] };
const te = [0.004, 0.008, 0.012, 0.016];
before(async () => {
  tessera = await createTessera({ workers: 1 });
  scan = await tessera.phantomScan({ geometry, te, snr: 100 });
});
after(async () => {
  await tessera?.terminate();
});

/** Pearson r inside the mask (bench/speed-web.js's agreement, the one the benchmarks use). */
const r = (a, b, mask) => agreement(a, b, mask).r;

/** The scan → RTS χ through the API, with its progress events: run once, checked by two tests (the API's outputs; the CLI's χ). */
let rtsStarted;
const rtsRun = () => (rtsStarted ??= (async () => {
  const events = [];
  const out = await tessera.pipeline({ keepInputs: true, phase: scan.phase, magnitude: scan.magnitude, mask: scan.mask, geometry, te, b0: 3, method: 'rts', onProgress: (p) => events.push(p) });
  return { out, events };
})());

test('pipeline(): the input volumes are transferred to the runtime unless keepInputs: true; every output Volume carries the input Volume\'s affine', async () => {
  const { makeVolume } = await import('./index.js');
  const affine = [0, 3, 0, -90, -3, 0, 0, 100, 0, 0, 3, -60, 0, 0, 0, 1]; // axes swapped, an origin: not diag(voxelMm)
  const phase = makeVolume({ ...geometry, affine, echoes: te.length, data: scan.phase.slice() });
  const magnitude = scan.magnitude.slice();
  const mask = scan.mask.slice();
  const out = await tessera.pipeline({ phase, magnitude, mask, te, method: 'tkd' });
  const made = Object.entries(out).filter(([, v]) => v?.data);
  assert.ok(made.length >= 9, made.map(([k]) => k).join(', '));
  for (const [k, v] of made) assert.deepEqual([v.affine, v.dims, v.voxelMm], [affine, geometry.dims, geometry.voxelMm], k);
  assert.deepEqual([phase.data.byteLength, magnitude.byteLength, mask.byteLength], [0, 0, 0], 'the inputs went to the runtime (detached here)');
  const kept = await tessera.pipeline({ phase: scan.phase, magnitude: scan.magnitude, mask: scan.mask, geometry, te, method: 'tkd', keepInputs: true });
  assert.equal(scan.phase.length, geometry.dims[0] * geometry.dims[1] * geometry.dims[2] * te.length, 'kept: the caller\'s phase');
  assert.deepEqual(kept.chi.data, out.chi.data, 'the same χ, copied or transferred');
  assert.deepEqual(kept.chi.affine, [3, 0, 0, 0, 0, 3, 0, 0, 0, 0, 3, 0, 0, 0, 0, 1], 'arrays with a geometry: diag(voxelMm)');
});

test('pipeline: wrapped multi-echo phase → RTS χ, every intermediate a Volume with the input\'s geometry', async () => {
  const { out, events } = await rtsRun();
  for (const k of ['mask', 'offset', 'fieldHz', 'totalField', 'fitResidual', 'fitMask', 'localField', 'localMask', 'chi']) {
    assert.deepEqual(out[k].dims, geometry.dims, k);
    assert.deepEqual(out[k].voxelMm, geometry.voxelMm, k);
  }
  assert.equal(out.unwrappedPhase.echoes, te.length);
  assert.deepEqual(out.report.plan.stages, ['echo fit', await defaultBackgroundTitle(tessera), 'RTS']);
  assert.ok(events.length > 5 && events.at(-1).done === events.at(-1).total, JSON.stringify(events.at(-1)));
  // The total field against the truth (up to the constant no echo fit recovers), where the fit is reliable.
  const totalR = r(out.totalField.data, scan.totalField, out.fitMask.data);
  const localR = r(out.localField.data, scan.localField, out.localMask.data);
  assert.ok(totalR > 0.97, `total field r ${totalR}`); // SNR 100; noiseless it is exact (tests/pipeline_test.cpp)
  assert.ok(localR > 0.9, `local field r ${localR}`);
  const chiR = r(out.chi.data, scan.chi, out.localMask.data);
  assert.ok(chiR > 0.85, `χ r ${chiR}`);
  assert.equal(out.chi.data.every((v, i) => out.localMask.data[i] || v === 0), true, 'χ is 0 outside the local mask');
});

test('pipeline: method tfi inverts the total field, with no background removal; the CLI\'s --method tfi gives the same χ', async () => {
  const out = await tessera.pipeline({ keepInputs: true, phase: scan.phase, magnitude: scan.magnitude, mask: scan.mask, geometry, te, b0: 3, method: 'tfi' });
  assert.deepEqual(out.report.plan.stages, ['echo fit', 'TFI']);
  assert.equal(out.localField, null);
  assert.deepEqual(out.localMask.data, out.fitMask.data);
  const chiR = r(out.chi.data, scan.chi, out.localMask.data);
  // measured 0.69 over the whole fit mask, its edge included; 0.84 inside the brain eroded by 5 voxels (tests/tfi_test.cpp)
  assert.ok(chiR > 0.65, `χ r ${chiR}`);
  assert.equal(out.chi.data.every((v, i) => out.localMask.data[i] || v === 0), true, 'χ is 0 outside the fit mask');
  const n = geometry.dims[0] * geometry.dims[1] * geometry.dims[2];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-tfi-'));
  try {
    fs.writeFileSync(path.join(dir, 'phase.nii'), await writeNifti4d(scan.phase, geometry, te.length));
    fs.writeFileSync(path.join(dir, 'mag.nii'), await writeNifti4d(scan.magnitude, geometry, te.length));
    fs.writeFileSync(path.join(dir, 'mask.nii'), await writeNifti(Float32Array.from(scan.mask), { dims: geometry.dims, voxelMm: geometry.voxelMm }));
    const run = spawnSync(process.execPath, [path.join(here, 'cli.js'), 'pipeline', '--phase', 'phase.nii', '--magnitude', 'mag.nii', '--mask', 'mask.nii', '--te', te.join(','), '--method', 'tfi', '--out', 'chi.nii.gz', '--keep-intermediates', 'stages', '--quiet'], { cwd: dir, encoding: 'utf8', timeout: 240000 });
    assert.equal(run.status, 0, run.stderr);
    const chi = readNifti(new Uint8Array(fs.readFileSync(path.join(dir, 'chi.nii.gz')))).data;
    assert.equal(chi.length, n);
    assert.equal(chi.every((v, i) => Object.is(v, out.chi.data[i])), true, 'the CLI\'s χ is the API\'s');
    assert.ok(fs.existsSync(path.join(dir, 'stages', 'total_field_ppm.nii.gz')));
    assert.ok(!fs.existsSync(path.join(dir, 'stages', 'local_field_ppm.nii.gz')), 'no local field before a total-field method');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('pipeline: no mask (made from the magnitude), and a network inverts the local field', async () => {
  const made = await tessera.pipeline({ keepInputs: true, phase: scan.phase, magnitude: scan.magnitude, geometry, te, method: 'tkd' });
  let both = 0, sum = 0;
  for (let i = 0; i < scan.mask.length; i++) (both += made.mask.data[i] && scan.mask[i] ? 1 : 0), (sum += (made.mask.data[i] ? 1 : 0) + (scan.mask[i] ? 1 : 0));
  assert.ok((2 * both) / sum > 0.9, `mask Dice ${(2 * both) / sum}`);
  const weights = new Uint8Array(fs.readFileSync(path.join(root, 'web/models/demo-unet.onnx')));
  const net = await tessera.pipeline({ keepInputs: true, phase: scan.phase, magnitude: scan.magnitude, mask: scan.mask, geometry, te, model: 'demo-unet', weights: [weights] });
  assert.ok(net.networkReport.tilesRun >= 1);
  assert.ok(r(net.chi.data, scan.chi, net.localMask.data) > 0.8);
});

test('pipeline: cancelled between two steps; bad inputs refused in one line each', async () => {
  const controller = new AbortController();
  let seen = 0;
  await assert.rejects(
    tessera.pipeline({ keepInputs: true, phase: scan.phase, magnitude: scan.magnitude, mask: scan.mask, geometry, te, method: 'tv', signal: controller.signal, onProgress: () => ++seen === 3 && controller.abort() }),
    (e) => e.name === 'AbortError',
  );
  const base = { phase: scan.phase, mask: scan.mask, geometry, method: 'tkd' };
  await assert.rejects(tessera.pipeline({ keepInputs: true, ...base, te: [4, 8, 12, 16] }), /looks like milliseconds; give TE in seconds \(0\.004\)/);
  await assert.rejects(tessera.pipeline({ keepInputs: true, ...base, te: [0.004, 0.008] }), /4 echo\(es\).*te gives 2/);
  const unwrapped = scan.phase.map((v, i) => v + 20 * (i % 5));
  await assert.rejects(tessera.pipeline({ keepInputs: true, ...base, phase: unwrapped, te }), /wrapped/);
  await assert.rejects(tessera.pipeline({ keepInputs: true, ...base, te, magnitude: new Float32Array(10) }), /magnitude holds 10 values/);
  await assert.rejects(tessera.pipeline({ keepInputs: true, ...base, te, mask: new Uint8Array(scan.mask.length) }), /mask/);
  await assert.rejects(tessera.pipeline({ keepInputs: true, ...base, te, tkd: { threshold: 3 } }), /tkd.threshold must be in/);
  await assert.rejects(tessera.pipeline({ keepInputs: true, ...base, te, background: 'harp' }), /background must be one of vsharp\|pdf\|lbv\|ismv\|sharp\|resharp, got 'harp'/);
  // The runtime is still usable.
  const ok = await tessera.pipeline({ keepInputs: true, ...base, te, background: 'pdf', pdf: { maxIterations: 5, padVoxels: 8 } });
  assert.deepEqual(ok.report.plan.stages, ['echo fit', 'PDF', 'TKD']);
  // The other background removals and their options, from the API.
  for (const [background, options, stage] of [['lbv', { lbv: { maxIterations: 40 } }, 'LBV'], ['ismv', { ismv: { radius: 4, maxIterations: 10 } }, 'iSMV'],
    ['sharp', { sharp: { radius: 6 } }, 'SHARP'], ['resharp', { resharp: { radius: 6, lambda: 0.001, maxIterations: 5 } }, 'RESHARP']]) {
    assert.equal(BACKGROUND_TITLES[background], stage, 'tests/js/background-titles.js names the stage as C++ does');
    const run = await tessera.pipeline({ keepInputs: true, ...base, te, background, ...options });
    assert.deepEqual(run.report.plan.stages, ['echo fit', stage, 'TKD'], background);
  }
  await assert.rejects(tessera.pipeline({ keepInputs: true, ...base, te, background: 'ismv', ismv: { radius: 0.1 } }), /ismv\.radius must be in \[0\.5, 50\] mm/);
});

test('tessera-qsm pipeline: the same χ as the API, intermediates written, bad TEs a usage error', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-pipeline-'));
  try {
    const n = scan.mask.length;
    const like4 = { dims: [...geometry.dims, te.length], voxelMm: geometry.voxelMm };
    // 4D NIfTIs written by the package (echoes along dim 4), as a scanner's converter would give them.
    const write4d = async (data, file) => {
      const bytes = await writeNifti4d(data, geometry, te.length);
      fs.writeFileSync(path.join(dir, file), bytes);
    };
    await write4d(scan.phase, 'phase.nii');
    await write4d(scan.magnitude, 'mag.nii');
    fs.writeFileSync(path.join(dir, 'mask.nii'), await writeNifti(Float32Array.from(scan.mask), { dims: geometry.dims, voxelMm: geometry.voxelMm }));
    assert.ok(like4);
    const cli = (...args) => spawnSync(process.execPath, [path.join(here, 'cli.js'), 'pipeline', ...args], { cwd: dir, encoding: 'utf8', timeout: 240000 });
    const run = cli('--phase', 'phase.nii', '--magnitude', 'mag.nii', '--mask', 'mask.nii', '--te', te.join(','), '--method', 'rts', '--out', 'chi.nii.gz', '--keep-intermediates', 'stages', '--quiet');
    assert.equal(run.status, 0, run.stderr);
    const chi = readNifti(new Uint8Array(fs.readFileSync(path.join(dir, 'chi.nii.gz')))).data;
    const api = (await rtsRun()).out; // the API's run at B0 3 T, the CLI's default
    assert.equal(chi.length, n);
    assert.equal(chi.every((v, i) => Object.is(v, api.chi.data[i])), true, 'the CLI\'s χ is the API\'s');
    for (const f of ['mask', 'fit_mask', 'total_field_hz', 'total_field_ppm', 'local_field_ppm', 'local_mask', 'offset', 'fit_residual', 'unwrapped_phase_echo4']) {
      assert.ok(fs.existsSync(path.join(dir, 'stages', `${f}.nii.gz`)), f);
    }
    const local = readNifti(new Uint8Array(fs.readFileSync(path.join(dir, 'stages', 'local_field_ppm.nii.gz')))).data;
    assert.equal(local.every((v, i) => Object.is(v, api.localField.data[i])), true);
    const bad = cli('--phase', 'phase.nii', '--mask', 'mask.nii', '--te', '4,8,12,16', '--method', 'tkd', '--out', 'x.nii');
    assert.equal(bad.status, 2, bad.stderr);
    assert.match(bad.stderr, /give TE in seconds/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

/** A 4D float32 NIfTI-1 (echoes along dim 4) of x-fastest volumes, echo after echo. */
async function writeNifti4d(data, g, echoes) {
  const header = new ArrayBuffer(352);
  const v = new DataView(header);
  v.setInt32(0, 348, true);
  const dims = [4, ...g.dims, echoes, 1, 1, 1];
  dims.forEach((d, i) => v.setInt16(40 + 2 * i, d, true));
  v.setInt16(70, 16, true);
  v.setInt16(72, 32, true);
  [1, ...g.voxelMm, 1, 0, 0, 0].forEach((p, i) => v.setFloat32(76 + 4 * i, p, true));
  v.setFloat32(108, 352, true);
  v.setFloat32(112, 1, true);
  v.setInt16(254, 1, true); // sform: scanner
  v.setFloat32(280, g.voxelMm[0], true);
  v.setFloat32(300, g.voxelMm[1], true);
  v.setFloat32(320, g.voxelMm[2], true);
  new Uint8Array(header, 344, 4).set([0x6e, 0x2b, 0x31, 0]); // "n+1"
  const out = new Uint8Array(352 + data.length * 4);
  out.set(new Uint8Array(header));
  out.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), 352);
  return out;
}

test('pipeline: a stage that fails keeps the finished stages as Volumes with the geometry the run read (no voxelMm given: 1 mm), the rest null', async () => {
  const dims = [32, 32, 24];
  const small = await tessera.phantomScan({ geometry: { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] }, te: te.slice(0, 2), seed: 2 });
  // A 3×3×3 voxel mask: RESHARP's 2 mm sphere erodes it to nothing, after the echo fit has finished.
  const mask = new Float32Array(dims[0] * dims[1] * dims[2]);
  for (let z = 10; z < 13; z++) for (let y = 14; y < 17; y++) for (let x = 14; x < 17; x++) mask[x + dims[0] * (y + dims[1] * z)] = 1;
  const err = await tessera
    .pipeline({ phase: small.phase, magnitude: small.magnitude, mask, geometry: { dims }, te: te.slice(0, 2), background: 'resharp', method: 'tkd' })
    .then(() => null, (e) => e);
  assert.ok(err, 'the run fails');
  assert.match(err.message, /RESHARP stage failed: .*erodes the mask to nothing/);
  for (const k of ['mask', 'fieldHz', 'totalField', 'unwrappedPhase']) {
    assert.deepEqual(err.intermediates[k]?.dims, dims, k);
    assert.deepEqual(err.intermediates[k].voxelMm, [1, 1, 1], `${k}: the core's default voxel size`);
    assert.deepEqual(err.intermediates[k].b0Dir, [0, 0, 1], `${k}: the core's default B0 direction`);
  }
  for (const k of ['localField', 'localMask', 'chi']) assert.equal(err.intermediates[k], null, k);
  assert.equal(err.intermediates.geometry, undefined, 'the geometry is read, not handed out');
});
