// cohort/Snakefile with BIDS field maps (sub-<label>/fmap/) through `tessera-qsm pipeline` (config phase_pipeline):
// a total field <prefix>_fieldmap in Hz (its JSON "Units") with <prefix>_magnitude, and a phase difference
// <prefix>_phasediff in scanner integers (its JSON EchoTime1/EchoTime2) with <prefix>_magnitude1, each χ bit for bit
// against a direct CLI run of the same files (--total-field --units hz; --phase-difference --te1 --te2); a field map
// without Units, a phase difference without EchoTime2, no phase_pipeline, and keep_intermediates with a total field
// are refused by name before anything runs. Small phantom scans (32×32×24 at 6 mm): a few seconds per job.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { createTessera, writeNifti, GAMMA_BAR_MHZ_PER_T } from '../bindings/js/index.js';
import { discover, CohortError } from './lib/subjects.js';
import { defaultBackgroundTitle } from '../tests/js/background-titles.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const SNAKEFILE = path.join(ROOT, 'cohort', 'Snakefile');
const CLI = path.join(ROOT, 'bindings', 'js', 'cli.js');
const CORES = 2;
const TE = [0.004, 0.008];
const B0 = 3;
const geometry = { dims: [32, 32, 24], voxelMm: [6, 6, 6], b0Dir: [0, 0, 1] };
const like = { dims: geometry.dims, voxelMm: geometry.voxelMm };

let dir, bids;
const p = (...a) => path.join(dir, ...a);
const put = (file, bytes) => {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, bytes);
};
const gunzip = (file) => {
  const b = fs.readFileSync(file);
  return b[0] === 0x1f && b[1] === 0x8b ? zlib.gunzipSync(b) : b;
};
const exec = (cmd, args) => {
  const r = spawnSync(cmd, args, { encoding: 'utf8', cwd: dir, maxBuffer: 64 << 20 });
  return { code: r.status, log: `${r.stdout}${r.stderr}` };
};

let bg; // the default background removal's stage title
before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-cohort-fmap-'));
  bids = p('bids');
  const tessera = await createTessera({ workers: 1 });
  let scan;
  try {
    scan = await tessera.phantomScan({ geometry, te: TE, snr: 100, seed: 5 });
    bg = await defaultBackgroundTitle(tessera);
  } finally {
    await tessera.terminate();
  }
  const n = geometry.dims.reduce((a, b) => a * b);
  const hz = Float32Array.from(scan.totalField.subarray(0, n), (ppm) => ppm * GAMMA_BAR_MHZ_PER_T * B0);
  // As a Siemens scanner stores a phase difference: −4096…4095 for −π…π.
  const diff = Float32Array.from({ length: n }, (_, i) => {
    const d = scan.phase[n + i] - scan.phase[i];
    return Math.max(-4096, Math.min(4095, Math.round(((d - 2 * Math.PI * Math.round(d / (2 * Math.PI))) * 4096) / Math.PI)));
  });
  const mag = scan.magnitude.subarray(0, n);
  const f = (...a) => path.join(bids, ...a);
  put(f('sub-01', 'fmap', 'sub-01_fieldmap.nii.gz'), await writeNifti(hz, like, { gzip: true }));
  put(f('sub-01', 'fmap', 'sub-01_fieldmap.json'), JSON.stringify({ Units: 'Hz', MagneticFieldStrength: B0 }));
  put(f('sub-01', 'fmap', 'sub-01_magnitude.nii.gz'), await writeNifti(mag, like, { gzip: true }));
  put(f('sub-02', 'fmap', 'sub-02_phasediff.nii.gz'), await writeNifti(diff, like, { gzip: true }));
  put(f('sub-02', 'fmap', 'sub-02_phasediff.json'), JSON.stringify({ EchoTime1: TE[0], EchoTime2: TE[1], MagneticFieldStrength: B0 }));
  put(f('sub-02', 'fmap', 'sub-02_magnitude1.nii.gz'), await writeNifti(mag, like, { gzip: true }));
  put(f('dataset_description.json'), JSON.stringify({ Name: 'field maps', BIDSVersion: '1.9.0' }));
});

after(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('BIDS field maps (a _fieldmap in Hz, a _phasediff with EchoTime1/2) run through the pipeline: χ bit-identical to direct CLI runs', { timeout: 180000 }, () => {
  const fmap = (s, name) => path.join(bids, s, 'fmap', name);
  const ref = (name, args) => {
    fs.mkdirSync(p('ref'), { recursive: true });
    const out = p('ref', `${name}.nii.gz`);
    const r = exec(process.execPath, [CLI, 'pipeline', ...args, '--b0', String(B0), '--method', 'tkd', '--cores', String(CORES), '--out', out, '--quiet']);
    assert.equal(r.code, 0, r.log);
    return gunzip(out);
  };
  const refs = {
    'sub-01': ref('sub-01', ['--total-field', fmap('sub-01', 'sub-01_fieldmap.nii.gz'), '--units', 'hz', '--magnitude', fmap('sub-01', 'sub-01_magnitude.nii.gz')]),
    'sub-02': ref('sub-02', ['--phase-difference', fmap('sub-02', 'sub-02_phasediff.nii.gz'), '--te1', String(TE[0]), '--te2', String(TE[1]), '--magnitude', fmap('sub-02', 'sub-02_magnitude1.nii.gz')]),
  };
  const out = p('deriv');
  const r = exec('snakemake', ['-s', SNAKEFILE, '--cores', String(CORES), '--config', `bids=${bids}`, `output=${out}`, 'phase_pipeline=tkd', `cores_per_job=${CORES}`]);
  assert.equal(r.code, 0, r.log);
  for (const s of ['sub-01', 'sub-02']) {
    const got = gunzip(path.join(out, s, 'fmap', `${s}_Chimap.nii.gz`));
    assert.ok(got.subarray(352).equals(refs[s].subarray(352)), `${s}: χ differs from the direct CLI run`);
    const report = JSON.parse(fs.readFileSync(path.join(out, s, 'fmap', `${s}_Chimap.json`), 'utf8'));
    if (s === 'sub-01') assert.equal(report.inputs.totalFieldUnits, 'hz');
    else assert.equal(report.inputs.deltaTE, TE[1] - TE[0]);
  }
  const plan = JSON.parse(fs.readFileSync(path.join(out, '.tessera', 'sub-01', 'fmap', 'sub-01_pipeline-plan.json'), 'utf8'));
  assert.deepEqual(plan.pipeline.stages, ['brain mask', bg, 'TKD'], 'a total field plans no echo fit');
});

test('BIDS field maps: no Units, no EchoTime2, no phase_pipeline and keep_intermediates with a total field are refused by name', async () => {
  const bad = p('bad');
  const copy = (name) => fs.cpSync(bids, path.join(bad, name), { recursive: true });
  const refused = async (config, pattern) => {
    await assert.rejects(discover(config), (e) => {
      assert.ok(e instanceof CohortError, e.stack);
      assert.match(e.message, pattern);
      return true;
    });
  };
  copy('units');
  put(path.join(bad, 'units', 'sub-01', 'fmap', 'sub-01_fieldmap.json'), JSON.stringify({ MagneticFieldStrength: B0 }));
  await refused({ bids: path.join(bad, 'units'), phase_pipeline: 'tkd' }, /sub-01\/fmap\/sub-01: the field map has no "Units" in .*sub-01_fieldmap\.json: add "Units": "Hz"/);
  copy('te2');
  put(path.join(bad, 'te2', 'sub-02', 'fmap', 'sub-02_phasediff.json'), JSON.stringify({ EchoTime1: 0.004, MagneticFieldStrength: B0 }));
  await refused({ bids: path.join(bad, 'te2'), phase_pipeline: 'tkd' }, /sub-02\/fmap\/sub-02: the phase difference has no "EchoTime2" .*: add "EchoTime1" and "EchoTime2" \(seconds\)/);
  await refused({ bids }, /a field map goes through the pipeline .*: set config phase_pipeline/);
  await refused({ bids, phase_pipeline: 'tkd', keep_intermediates: true }, /keep_intermediates keeps the echo fit's stages, and a total field map has none/);
});
