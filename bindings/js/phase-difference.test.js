// The pipeline from a phase difference of two echoes with its two echo times (a Siemens field map: φ(TE2) − φ(TE1),
// stored as scanner integers) through the public API and the CLI in node, judged against the phantom head's true total
// field and χ, and against the pipeline from the two echoes' phase.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { agreement } from '../../bench/speed-web.js';
import { createTessera, readNifti, writeNifti } from './index.js';
import { defaultBackgroundTitle } from '../../tests/js/background-titles.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const geometry = { dims: [64, 64, 48], voxelMm: [3, 3, 3], b0Dir: [0, 0, 1] };
const n = 64 * 64 * 48;
const te = [0.004, 0.008];
let tessera, scan, diff, integers, magnitude;
before(async () => {
  tessera = await createTessera({ workers: 1 });
  scan = await tessera.phantomScan({ geometry, te, snr: 100, seed: 3 });
  diff = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const d = scan.phase[n + i] - scan.phase[i];
    diff[i] = d - 2 * Math.PI * Math.round(d / (2 * Math.PI));
  }
  // As a Siemens scanner stores it: −4096…4095 for −π…π.
  integers = Float32Array.from(diff, (d) => Math.max(-4096, Math.min(4095, Math.round((d * 4096) / Math.PI))));
  magnitude = scan.magnitude.subarray(0, n);
});
after(async () => {
  await tessera?.terminate();
});

const r = (a, b, mask) => agreement(a, b, mask).r;

test('pipeline from a phase difference with deltaTE: the true total field, χ near the truth and the two-echo phase path', async (t) => {
  const out = await tessera.pipeline({ keepInputs: true, phaseDifference: diff, deltaTE: te[1] - te[0], magnitude, mask: scan.mask, geometry, b0: 3, method: 'rts' });
  assert.deepEqual(out.report.plan.stages, ['echo fit', await defaultBackgroundTitle(tessera), 'RTS']);
  assert.deepEqual(out.report.warnings.filter((w) => /rescaled|scanner integers/.test(w)), [], 'radians are taken as they are');
  // The total field inside the fit mask against the truth (ppm): the noise of two SNR-100 echoes at ΔTE 4 ms is about
  // 0.005 ppm; a voxel whose unwrapping slipped by 2π is off by 1/(ΔTE·γ̄B0) ≈ 2 ppm (a few, next to the mask's edge).
  const errors = [];
  let given = 0;
  for (let i = 0; i < n; i++) {
    given += scan.mask[i] ? 1 : 0;
    if (out.fitMask.data[i]) errors.push(Math.abs(out.totalField.data[i] - scan.totalField[i]));
  }
  errors.sort((a, b) => a - b);
  const median = errors[errors.length >> 1], p99 = errors[Math.floor(0.99 * errors.length)];
  const slipped = errors.filter((e) => e > 0.5).length / errors.length;
  assert.ok(errors.length / given > 0.95, `fit mask keeps ${errors.length} of ${given}`);
  assert.ok(median < 0.01 && p99 < 0.03, `total field error: median ${median}, 99th percentile ${p99} ppm`);
  assert.ok(slipped < 0.002, `${(100 * slipped).toFixed(3)} % of the fit mask off by a 2π slip`);
  // χ against the truth as good as from the two echoes' phase fitted with a free offset per voxel (the same information:
  // a difference cancels the offset; the default smooth offset knows more, the field through the origin), and close to it.
  const chiR = r(out.chi.data, scan.chi, out.localMask.data);
  const phase = await tessera.pipeline({ keepInputs: true, phase: scan.phase, magnitude: scan.magnitude, mask: scan.mask, geometry, te, b0: 3, method: 'rts', fitOffset: 'free' });
  const phaseR = r(phase.chi.data, scan.chi, phase.localMask.data);
  assert.ok(chiR > phaseR - 0.02, `χ r ${chiR} against the truth, ${phaseR} from the two echoes' phase`);
  const both = phase.localMask.data.map((m, i) => (m && out.localMask.data[i] ? 1 : 0));
  const paths = r(out.chi.data, phase.chi.data, both);
  assert.ok(paths > 0.95, `χ r ${paths} against the two-echo phase path`);
  t.diagnostic(`total field error median ${median.toFixed(4)}, p99 ${p99.toFixed(4)} ppm, ${(100 * slipped).toFixed(3)} % slipped; χ r ${chiR.toFixed(4)} vs truth (phase path ${phaseR.toFixed(4)}), ${paths.toFixed(4)} vs the phase path with a free offset (${await defaultBackgroundTitle(tessera)} + RTS)`);
});

test('pipeline from a phase difference in scanner integers: read as such with a warning, χ as from radians', async () => {
  const rad = await tessera.pipeline({ keepInputs: true, phaseDifference: diff, deltaTE: 0.004, magnitude, mask: scan.mask, geometry, b0: 3, method: 'tkd' });
  const ints = await tessera.pipeline({ keepInputs: true, phaseDifference: integers, deltaTE: 0.004, magnitude, mask: scan.mask, geometry, b0: 3, method: 'tkd' });
  assert.ok(ints.report.warnings.some((w) => /phase difference is stored as integers[\s\S]*scanner integers/.test(w)), ints.report.warnings.join('\n'));
  const rr = r(ints.chi.data, rad.chi.data, rad.localMask.data);
  assert.ok(rr > 0.999, `χ r ${rr} between integers and radians`);
});

test('pipeline from a phase difference: no deltaTE, te beside it, a ΔTE in ms and a phase beside it are refused in words', async () => {
  const base = { phaseDifference: diff, magnitude, mask: scan.mask, geometry, method: 'tkd', keepInputs: true };
  await assert.rejects(tessera.pipeline(base), /phaseDifference needs deltaTE/);
  await assert.rejects(tessera.pipeline({ ...base, deltaTE: 0.004, te: [0.004] }), /te belongs to a pipeline from per-echo phase/);
  await assert.rejects(tessera.pipeline({ ...base, deltaTE: 4 }), /milliseconds|ms/);
  await assert.rejects(tessera.pipeline({ ...base, deltaTE: 0.004, phase: diff }), /give one of phase/);
  await assert.rejects(tessera.pipeline({ keepInputs: true, phase: diff, deltaTE: 0.004, mask: scan.mask, geometry, method: 'tkd' }), /deltaTE is the echo-time difference of a phase difference/);
});

test('CLI: pipeline --phase-difference F --te1 --te2 writes the API\'s χ and warns of scanner integers; a missing TE2 is a usage error', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-phasediff-'));
  try {
    const like = { dims: geometry.dims, voxelMm: geometry.voxelMm };
    fs.writeFileSync(path.join(dir, 'phasediff.nii.gz'), await writeNifti(integers, like, { gzip: true }));
    fs.writeFileSync(path.join(dir, 'magnitude.nii'), await writeNifti(Float32Array.from(magnitude), like));
    fs.writeFileSync(path.join(dir, 'mask.nii'), await writeNifti(Float32Array.from(scan.mask), like));
    const cli = (...args) => spawnSync(process.execPath, [path.join(here, 'cli.js'), 'pipeline', ...args], { cwd: dir, encoding: 'utf8', timeout: 240000 });
    const run = cli('--phase-difference', 'phasediff.nii.gz', '--te1', '0.004', '--te2', '0.008', '--magnitude', 'magnitude.nii', '--mask', 'mask.nii', '--b0', '3', '--method', 'tkd', '--out', 'chi.nii.gz', '--report', 'r.json');
    assert.equal(run.status, 0, run.stderr);
    assert.ok((run.stderr + run.stdout).includes(`a phase difference (ΔTE 4 ms), B0 3 T: echo fit → ${await defaultBackgroundTitle(tessera)} → TKD`), run.stderr);
    assert.match(run.stderr, /warning: the phase difference is stored as integers/);
    const chi = readNifti(new Uint8Array(fs.readFileSync(path.join(dir, 'chi.nii.gz')))).data;
    const api = await tessera.pipeline({ keepInputs: true, phaseDifference: integers, deltaTE: 0.004, magnitude, mask: scan.mask, geometry, b0: 3, method: 'tkd' });
    let differ = 0;
    for (let i = 0; i < n; i++) if (!Object.is(chi[i], api.chi.data[i])) differ++;
    assert.equal(differ, 0, 'the CLI\'s χ is the API\'s');
    const report = JSON.parse(fs.readFileSync(path.join(dir, 'r.json'), 'utf8'));
    assert.equal(report.inputs.deltaTE, 0.004);
    assert.equal(report.inputs.phaseDifference, 'phasediff.nii.gz');
    const noTe2 = cli('--phase-difference', 'phasediff.nii.gz', '--te1', '0.004', '--mask', 'mask.nii', '--method', 'tkd', '--out', 'x.nii');
    assert.equal(noTe2.status, 2, noTe2.stderr);
    assert.match(noTe2.stderr, /--phase-difference needs its two echo times: --te1 S --te2 S/);
    const ms = cli('--phase-difference', 'phasediff.nii.gz', '--te1', '5.19', '--te2', '7.65', '--mask', 'mask.nii', '--method', 'tkd', '--out', 'x.nii');
    assert.equal(ms.status, 2, ms.stderr);
    assert.match(ms.stderr, /not milliseconds/);
    const both = cli('--phase-difference', 'phasediff.nii.gz', '--phase', 'phasediff.nii.gz', '--te', '0.004', '--mask', 'mask.nii', '--method', 'tkd', '--out', 'x.nii');
    assert.equal(both.status, 2, both.stderr);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
