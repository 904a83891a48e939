// cohort/Snakefile with BIDS field maps (sub-<label>/fmap/) through `tessera-qsm pipeline` (config phase_pipeline):
// a total field <prefix>_fieldmap in Hz (its JSON "Units") with <prefix>_magnitude, and a phase difference
// <prefix>_phasediff in scanner integers (its JSON EchoTime1/EchoTime2) with <prefix>_magnitude1, each χ bit for bit
// against a direct CLI run of the same files (--total-field --units hz; --phase-difference --te1 --te2); a field map
// without Units, a phase difference without EchoTime2, no phase_pipeline, and keep_intermediates with a total field
// are refused by name before anything runs. Small phantom scans (32×32×24 at 6 mm): a few seconds per job.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
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
/** Runs a command in dir: a promise of {code, log} (several run at once). */
const exec = (cmd, args) =>
  new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    child.stdout.on('data', (d) => (log += d));
    child.stderr.on('data', (d) => (log += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, log }));
  });

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

test('BIDS field maps (a _fieldmap in Hz, a _phasediff with EchoTime1/2) run through the pipeline: χ bit-identical to direct CLI runs', { timeout: 180000 }, async () => {
  const fmap = (s, name) => path.join(bids, s, 'fmap', name);
  // The direct runs and the workflow, all at once (each its own process, its own output).
  fs.mkdirSync(p('ref'), { recursive: true });
  const ref = async (name, args) => {
    const out = p('ref', `${name}.nii.gz`);
    const r = await exec(process.execPath, [CLI, 'pipeline', ...args, '--b0', String(B0), '--method', 'tkd', '--cores', String(CORES), '--out', out, '--quiet']);
    assert.equal(r.code, 0, r.log);
    return gunzip(out);
  };
  const out = p('deriv');
  const [ref01, ref02, r] = await Promise.all([
    ref('sub-01', ['--total-field', fmap('sub-01', 'sub-01_fieldmap.nii.gz'), '--units', 'hz', '--magnitude', fmap('sub-01', 'sub-01_magnitude.nii.gz')]),
    ref('sub-02', ['--phase-difference', fmap('sub-02', 'sub-02_phasediff.nii.gz'), '--te1', String(TE[0]), '--te2', String(TE[1]), '--magnitude', fmap('sub-02', 'sub-02_magnitude1.nii.gz')]),
    exec('snakemake', ['-s', SNAKEFILE, '--cores', String(CORES), '--config', `bids=${bids}`, `output=${out}`, 'phase_pipeline=tkd', `cores_per_job=${CORES}`]),
  ]);
  const refs = { 'sub-01': ref01, 'sub-02': ref02 };
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

test('a TSV manifest row names a field map (fieldmap + units, phasediff + te1 + te2): read as the BIDS fmap/ route reads it; both, neither, a map without units or echo times, and columns of another input refused by name', async () => {
  const f = (s, name) => path.join('bids', s, 'fmap', name);
  const header = ['subject', 'field', 'fieldmap', 'phasediff', 'magnitude', 'mask', 'units', 'te', 'te1', 'te2', 'b0'];
  const tsv = (name, rows) => {
    const file = p(name);
    fs.writeFileSync(file, [header, ...rows.map((r) => header.map((h) => r[h] ?? 'n/a'))].map((r) => r.join('\t')).join('\n'));
    return file;
  };
  const fm = { subject: '01', fieldmap: f('sub-01', 'sub-01_fieldmap.nii.gz'), magnitude: f('sub-01', 'sub-01_magnitude.nii.gz'), units: 'hz', b0: '3' };
  const pd = { subject: '02', phasediff: f('sub-02', 'sub-02_phasediff.nii.gz'), magnitude: f('sub-02', 'sub-02_magnitude1.nii.gz'), te1: String(TE[0]), te2: String(TE[1]), b0: '3' };
  // What the manifest reads equals what the BIDS tree gives for the same maps (paths, units, echo times, B0).
  const viaBids = (await discover({ bids, phase_pipeline: 'tkd' })).records;
  const viaManifest = (await discover({ manifest: tsv('fmaps.tsv', [fm, pd]), phase_pipeline: 'tkd' })).records;
  const keys = ['path', 'kind', 'input', 'phase', 'magnitude', 'mask', 'totalFieldUnits', 'te', 'te1', 'te2', 'b0', 'pipeline', 'suffix'];
  const pick = (r) => Object.fromEntries(keys.map((k) => [k, r[k]]));
  assert.deepEqual(viaManifest.map(pick), viaBids.map(pick));
  // Without the columns, the sidecar beside the map (the BIDS one) gives units, echo times and B0.
  const bare = (await discover({ manifest: tsv('sidecars.tsv', [{ ...fm, units: undefined, b0: undefined }, { ...pd, te1: undefined, te2: undefined, b0: undefined }]), phase_pipeline: 'tkd' })).records;
  assert.deepEqual(bare.map(pick), viaBids.map(pick));
  const refused = async (rows, pattern, config = { phase_pipeline: 'tkd' }) => {
    await assert.rejects(discover({ manifest: tsv('bad-fmaps.tsv', rows), ...config }), (e) => {
      assert.ok(e instanceof CohortError, e.stack);
      assert.match(e.message, pattern);
      return true;
    });
  };
  const one = /give exactly one of field \(a local field map\), phase \(wrapped phase\), fieldmap \(a total field map, with its units\) or phasediff \(a phase difference, with te1 and te2\)/;
  await refused([{ ...fm, phasediff: pd.phasediff }], new RegExp(`line 2 \\(sub-01\\): ${one.source}; this row gives fieldmap and phasediff`));
  await refused([{ subject: '01', magnitude: fm.magnitude, units: 'hz', b0: '3' }], new RegExp(`line 2 \\(sub-01\\): ${one.source}; this row gives none`));
  // A map whose units are in neither the row nor a sidecar (a copy without its JSON).
  fs.copyFileSync(p(fm.fieldmap), p('lone_fieldmap.nii.gz'));
  await refused([{ ...fm, fieldmap: 'lone_fieldmap.nii.gz', units: undefined }], /line 2 \(sub-01\): the field map has no "Units" \(no units column, and no lone_fieldmap\.json beside it\): give the units column \(hz, rad\/s or ppm\)/);
  await refused([{ ...pd, te2: undefined, phasediff: 'lone_fieldmap.nii.gz' }], /line 2 \(sub-02\): the phase difference has no "EchoTime2" \(no te2 column, and no lone_fieldmap\.json beside it\): give the te1 and te2 columns \(seconds\)/);
  await refused([{ ...pd, te1: '0.008', te2: '0.004' }], /EchoTime2 \(0\.004\) must be later than EchoTime1 \(0\.008\) in the te2 column/);
  await refused([{ ...fm, te1: '0.004' }], /line 2 \(sub-01\): te1 is not for a total field map \(its columns: units, b0\)/);
  await refused([{ ...pd, units: 'hz' }], /line 2 \(sub-02\): units is not for a phase difference \(its columns: te1, te2, b0, phase_units\)/);
  await refused([{ subject: '03', field: fm.fieldmap, mask: fm.magnitude, te1: '0.004' }], /line 2 \(sub-03\): te1 is for a phasediff row/);
  await refused([{ ...fm, magnitude: undefined }], /line 2 \(sub-01\): no mask and no magnitude: the pipeline makes the brain mask from the magnitude/);
  await refused([fm], /line 2 \(sub-01\): a field map goes through the pipeline .*: set config phase_pipeline .*, or give the row a method/, {});
});
