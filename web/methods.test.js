// web/methods.js: which files the reproducing command names (the user's own where the run took them as they are, else
// files the page writes), and the multi-echo NIfTI the page writes for them (read back by the package's reader).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { commandFiles, stackNifti } from './methods.js';
import { writeNifti, readEchoes } from '../bindings/js/index.js';

const dims = [4, 3, 2];
const n = 24;
const geometry = { dims, voxelMm: [1, 1, 1] };
const file = (name) => ({ name });

test('commandFiles: a radians phase file taken as it is is named; other units, fixed voxels, several files, DICOM are written', () => {
  const input = { name: 'sub-01_phase.nii.gz', source: 'files', geometry, phase: new Float32Array(3 * n), echoes: 3, magnitude: new Float32Array(3 * n), mask: null, fixed: 0, phaseUnitsRead: 'rad' };
  const files = { pipeline: [file('sub-01_phase.nii.gz')], magnitude: file('sub-01_mag.nii.gz'), mask: null };
  assert.deepEqual(commandFiles(input, files), { files: { out: 'sub-01_phase_chi.nii.gz', phase: 'sub-01_phase.nii.gz', magnitude: 'sub-01_mag.nii.gz' }, offer: [] });
  for (const [inp, fl] of [
    [{ ...input, phaseUnitsRead: 'scanner' }, files],
    [{ ...input, phaseUnitsRead: 'rescaled' }, files],
    [{ ...input, fixed: 5 }, files],
    [input, { ...files, pipeline: [file('a.nii'), file('b.nii')] }],
    [{ ...input, source: 'dicom', name: 'GRE' }, files],
  ]) {
    const r = commandFiles(inp, fl);
    const phase = r.offer.find((o) => o.role === 'phase');
    assert.ok(phase, JSON.stringify(r.files));
    assert.equal(r.files.phase, phase.file);
    assert.match(phase.file, /_phase_rad\.nii$/);
    assert.equal(phase.echoes, 3);
  }
  // DICOM: the magnitude series too.
  const d = commandFiles({ ...input, source: 'dicom', name: 'GRE' }, { pipeline: [], magnitude: null, mask: null });
  assert.deepEqual(d.offer.map((o) => [o.role, o.file, o.echoes]), [['phase', 'GRE_phase_rad.nii', 3], ['magnitude', 'GRE_magnitude.nii', 3]]);
  // A mask file as it is is named; a mask edited in the page is the page's mask download.
  const mask = new Uint8Array(n).fill(1);
  assert.equal(commandFiles({ ...input, mask }, { ...files, mask: file('m.nii') }).files.mask, 'm.nii');
  const edited = commandFiles({ ...input, mask, maskEdit: { added: 1 } }, { ...files, mask: file('m.nii') });
  assert.equal(edited.files.mask, 'sub-01_phase_mask.nii.gz');
  assert.equal(edited.offer.at(-1).data, mask);
  // A field map: the total field, no phase.
  const fm = commandFiles({ ...input, from: 'fieldmap', echoes: 1, phase: new Float32Array(n) }, files);
  assert.equal(fm.files.phase, undefined);
  assert.equal(fm.files.totalField, 'sub-01_phase_fieldmap_Hz.nii');
  // A phase difference: always the page's file (the loader made radians of it).
  const pd = commandFiles({ ...input, from: 'phasediff', echoes: 1, phase: new Float32Array(n) }, files);
  assert.deepEqual([pd.files.phase, pd.offer[0].file, pd.offer[0].echoes], ['sub-01_phase_phasediff_rad.nii', 'sub-01_phase_phasediff_rad.nii', 1]);
});

test('stackNifti: echoes along dim 4, read back by readEchoes voxel for voxel', async () => {
  const data = Float32Array.from({ length: 3 * n }, (_, i) => Math.sin(i) * 3);
  const first = await writeNifti(data.subarray(0, n), geometry);
  const nii = readEchoes(stackNifti(first, data, 3));
  assert.deepEqual(nii.dims.slice(0, 3), dims);
  assert.equal(nii.echoes ?? nii.dims[3], 3);
  assert.deepEqual(Float32Array.from(nii.data), data);
});
