// Tests for bindings/js/io/inputs.js: the input loader the CLI and the page's I/O worker share.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { loadInputs, checkEchoTimes, InputError, MAX_TE_SECONDS } from './inputs.js';
import { writeNifti, GAMMA_BAR_MHZ_PER_T } from './nifti.js';
import { PhaseRefusal } from './phase-units.js';
import { baseFiles, headerCases, gzipCases } from '../../../tests/js/nifti-fuzz.js';

const DIMS = [4, 3, 2];
const N = 24;
const C = Math.cos(0.3);
const S = Math.sin(0.3);
const LIKE = { dims: DIMS, voxelMm: [1, 1, 2], affine: [1, 0, 0, 5, 0, C, -2 * S, 6, 0, S, 2 * C, 7, 0, 0, 0, 1] };

/** A float32 NIfTI of `values` (nx·ny·nz·echoes), 4D when echoes > 1. */
async function nii(values, { echoes = 1, dims = DIMS, gzip = false } = {}) {
  const n = dims[0] * dims[1] * dims[2];
  const first = await writeNifti(Float32Array.from(values.slice(0, n)), { ...LIKE, dims }, { gzip: false });
  if (echoes === 1 && !gzip) return first;
  const out = new Uint8Array(352 + 4 * n * echoes);
  out.set(first.subarray(0, 352));
  const dv = new DataView(out.buffer);
  dv.setInt16(40, 4, true);
  dv.setInt16(48, echoes, true);
  new Float32Array(out.buffer, 352).set(values);
  if (!gzip) return out;
  return new Uint8Array(await new Response(new Blob([out]).stream().pipeThrough(new CompressionStream('gzip'))).arrayBuffer());
}

const ramp = (n, f = (i) => i) => Array.from({ length: n }, (_, i) => f(i));
const inside = ramp(N, (i) => (i % 4 === 0 ? 0 : 1)); // x = 0 outside

/** The InputError (or PhaseRefusal) `promise` rejects with, checked for code and facts. */
async function refused(promise, code, facts = {}) {
  const e = await promise.then(() => assert.fail(`expected ${code}`), (err) => err);
  assert.equal(e.code, code, e.message);
  for (const [k, v] of Object.entries(facts)) assert.deepEqual(e[k], v, `${code}.${k}`);
  return e;
}

test('field: ppm as is, Hz and rad/s to ppm, mask from a file or a thresholded magnitude, geometry from the header', async () => {
  const field = ramp(N, (i) => (i - 12) * 0.01);
  const ppm = await loadInputs({ field: await nii(field, { gzip: true }), mask: await nii(inside) });
  assert.equal(ppm.kind, 'field');
  assert.equal(ppm.input, ppm.field);
  assert.deepEqual(Array.from(ppm.field.data), field.map(Math.fround));
  assert.deepEqual(ppm.geometry.dims, DIMS);
  assert.deepEqual(ppm.geometry.voxelMm, [1, 1, 2]);
  assert.ok(Math.abs(ppm.geometry.b0Dir[1] - S) < 1e-6 && Math.abs(ppm.geometry.b0Dir[2] - C) < 1e-6);
  assert.equal(ppm.field.header.version, 1); // the reader's header: writeNifti's `like`
  assert.ok(ppm.mask.data instanceof Uint8Array);
  assert.deepEqual(Array.from(ppm.mask.data), inside);
  assert.deepEqual([ppm.echoes, ppm.magnitude, ppm.fixed, ppm.notes], [1, null, 0, []]);

  const hz = await loadInputs({ field: await nii(field.map((v) => v * GAMMA_BAR_MHZ_PER_T * 3)), mask: await nii(inside) }, { units: 'hz', b0: 3 });
  hz.field.data.forEach((v, i) => assert.ok(Math.abs(v - field[i]) < 1e-6, `Hz voxel ${i}`));
  assert.deepEqual(hz.notes, ['field converted from Hz at 3 T']);
  const rads = await loadInputs({ field: await nii(field.map((v) => v * 2 * Math.PI * GAMMA_BAR_MHZ_PER_T * 7)), mask: await nii(inside) }, { units: 'rad/s', b0: 7 });
  rads.field.data.forEach((v, i) => assert.ok(Math.abs(v - field[i]) < 1e-6, `rad/s voxel ${i}`));

  // a magnitude thresholded at 0.5 of its robust max: voxels above 50 of 0..100
  const magnitude = ramp(N, (i) => (100 * i) / (N - 1));
  const thr = await loadInputs({ field: await nii(field), magnitude: await nii(magnitude) }, { maskFrom: 'magnitude', fraction: 0.5 });
  const p99 = Math.fround(magnitude[Math.floor(0.99 * (N - 1))]);
  assert.deepEqual(Array.from(thr.mask.data), magnitude.map((v) => (Math.fround(v) > 0.5 * p99 ? 1 : 0)));
  assert.deepEqual(thr.mask.dims, DIMS);

  // plan (convert: false, no mask needed): data as stored
  const plan = await loadInputs({ field: await nii(field) }, { units: 'hz', needMask: false, convert: false });
  assert.deepEqual([Array.from(plan.field.data), plan.mask], [field.map(Math.fround), null]);
});

test('NaN/Inf outside the mask are set to 0 and counted; inside, the phase and magnitude are refused (a field is left to the runtime)', async () => {
  const field = ramp(N, () => 0.01);
  field[0] = NaN; // outside
  field[4] = Infinity; // outside
  field[5] = NaN; // inside
  const r = await loadInputs({ field: await nii(field), mask: await nii(inside) });
  assert.equal(r.fixed, 2);
  assert.deepEqual([r.field.data[0], r.field.data[4], Number.isNaN(r.field.data[5])], [0, 0, true]);

  const phase = ramp(2 * N, () => 1);
  phase[N + 8] = NaN; // echo 2, outside
  const two = await loadInputs({ phase: await nii(phase, { echoes: 2 }), mask: await nii(inside) }, { te: [0.01, 0.02] });
  assert.deepEqual([two.fixed, two.phase.data[N + 8]], [1, 0]);
  phase[N + 9] = NaN; // echo 2, inside
  await refused(loadInputs({ phase: await nii(phase, { echoes: 2 }), mask: await nii(inside) }), 'NonFiniteInput', { role: 'phase', count: 1 });
  const mag = ramp(2 * N, () => 5);
  mag[1] = -Infinity;
  await refused(loadInputs({ phase: await nii(ramp(2 * N, () => 1), { echoes: 2 }), magnitude: await nii(mag, { echoes: 2 }), mask: await nii(inside) }), 'NonFiniteInput', { role: 'magnitude', count: 1 });
});

test('phase: echoes, TE in seconds one per echo, units converted in place, magnitude echoes; refusals carry codes and numbers', async () => {
  const deg = ramp(2 * N, (i) => (i % 7) * 50 - 150);
  const r = await loadInputs({ phase: await nii(deg, { echoes: 2, gzip: true }), mask: await nii(inside) }, { te: [0.004, 0.008], phaseUnits: 'deg' });
  assert.equal(r.kind, 'phase');
  assert.deepEqual([r.echoes, r.te, r.phase.echoes, r.phase.data.length], [2, [0.004, 0.008], 2, 2 * N]);
  r.phase.data.forEach((v, i) => assert.ok(Math.abs(v - (deg[i] * Math.PI) / 180) < 1e-6, `voxel ${i}`));
  assert.deepEqual([r.phaseInfo.units, r.phaseInfo.range], ['deg', [-150, 150]]);
  assert.deepEqual(r.notes, ['phase converted from degrees (× π/180)']);
  assert.deepEqual(r.phase.header.dim.slice(0, 5), [3, ...DIMS, 1]); // a 3D header for the output

  const rad = await nii(ramp(2 * N, () => 0.5), { echoes: 2 });
  const mask = await nii(inside);
  await refused(loadInputs({ phase: rad, mask }, { te: [0.01] }), 'TeCount', { given: 1, echoes: 2 });
  await refused(loadInputs({ phase: rad, mask }, { te: [10, 20] }), 'TeMilliseconds', { values: [10, 20], seconds: [0.01, 0.02] });
  // the phase-unit rules' refusals pass through, structured
  const e = await refused(loadInputs({ phase: await nii(ramp(N, (i) => i * 100)), mask }), 'PhaseNotRadians', { min: 0, max: 2300 });
  assert.ok(e instanceof PhaseRefusal);

  // magnitude: the phase's echoes; a 3D one only to threshold the mask (then no echo weights)
  const mag2 = await nii(ramp(2 * N, (i) => i + 1), { echoes: 2 });
  const weighted = await loadInputs({ phase: rad, magnitude: mag2, mask }, { te: [0.01, 0.02] });
  assert.deepEqual([weighted.magnitude.echoes, weighted.magnitudeEchoes], [2, 2]);
  const mag3d = await nii(ramp(N, (i) => i + 1));
  const maskOnly = await loadInputs({ phase: rad, magnitude: mag3d }, { maskFrom: 'magnitude' });
  assert.deepEqual([maskOnly.magnitude, maskOnly.magnitudeEchoes, maskOnly.mask.data.length], [null, 1, N]);
  await refused(loadInputs({ phase: rad, magnitude: mag3d, mask }), 'EchoesMismatch', { role: 'magnitude', echoes: 1, inputEchoes: 2 });
  await refused(loadInputs({ phase: rad, magnitude: await nii(ramp(12, () => 1), { dims: [4, 3, 1] }), mask }), 'DimsMismatch', {
    role: 'magnitude', dims: [4, 3, 1], inputRole: 'phase', inputDims: DIMS,
  });
});

test('refusals: dims, B0, mask, not NIfTI (with the role), the caller\'s mistakes', async () => {
  const field = await nii(ramp(N, () => 0));
  await refused(loadInputs({ field, mask: await nii(ramp(12, () => 1), { dims: [4, 3, 1] }) }), 'DimsMismatch', {
    role: 'mask', dims: [4, 3, 1], inputRole: 'field', inputDims: DIMS, message: 'the mask is 4×3×1 but the field is 4×3×2: they must have the same dims',
  });
  await refused(loadInputs({ field, mask: field }, { units: 'hz' }), 'NeedB0', { units: 'hz' });
  await refused(loadInputs({ field }), 'NeedMask');
  await refused(loadInputs({ field }, { maskFrom: 'magnitude' }), 'NeedMask');
  const bad = await refused(loadInputs({ field, mask: new Uint8Array(400) }), 'NotNifti', { role: 'mask' });
  assert.match(bad.reason, /not a NIfTI file/);
  assert.ok(bad instanceof InputError);
  await assert.rejects(loadInputs({ field, phase: field, mask: field }), /exactly one of files\.field .* or files\.phase/);
  await assert.rejects(loadInputs({ mask: field }), TypeError);
  await assert.rejects(loadInputs({ field, mask: field }, { units: 'gauss' }), /units must be ppm, hz or rad\/s/);
  await assert.rejects(loadInputs({ field: 'f.nii', mask: field }), TypeError);
});

test('fuzz: 600 mutated files (seeded) as field, mask, magnitude and phase: every refusal an InputError or PhaseRefusal with a message, 0 crashes', { timeout: 60000 }, async () => {
  const cases = [...headerCases(4242, 450), ...gzipCases(4343, 150)];
  const [good] = baseFiles(); // a valid 4×3×2 float32 file (nonzero voxels: a mask too)
  const crashes = [];
  const outcomes = {};
  for (let k = 0; k < cases.length; k++) {
    const c = cases[k];
    const role = ['field', 'mask', 'magnitude', 'phase'][k % 4];
    const files = role === 'field' ? { field: c.bytes, mask: good.bytes }
      : role === 'mask' ? { field: good.bytes, mask: c.bytes }
        : role === 'magnitude' ? { field: good.bytes, magnitude: c.bytes }
          : { phase: c.bytes, mask: good.bytes };
    const options = role === 'phase' ? { te: [0.01, 0.02], phaseUnits: undefined } : role === 'magnitude' ? { maskFrom: 'magnitude' } : {};
    const t0 = performance.now();
    try {
      const r = await loadInputs(files, options);
      outcomes.read = (outcomes.read ?? 0) + 1;
      if (!(r.input.data.length === r.geometry.dims.reduce((a, b) => a * b, 1) * r.echoes)) crashes.push(`${role} ${c.name}: an inconsistent input`);
    } catch (e) {
      const clear = (e instanceof InputError || e instanceof PhaseRefusal) && typeof e.code === 'string' && e.message.length > 10;
      if (!clear) crashes.push(`${role} ${c.name}: ${e?.name}: ${e?.message}`);
      outcomes[e?.code] = (outcomes[e?.code] ?? 0) + 1;
    }
    const ms = performance.now() - t0;
    if (ms > 2000) crashes.push(`${role} ${c.name}: took ${ms.toFixed(0)} ms`);
  }
  assert.deepEqual(crashes.slice(0, 20), [], `${crashes.length} crash(es)`);
  assert.ok(outcomes.NotNifti > 100 && outcomes.read > 50, JSON.stringify(outcomes));
  console.log(`# loadInputs on ${cases.length} mutated files: ${JSON.stringify(outcomes)}`);
});

test('checkEchoTimes: seconds, one per echo, above 1 s taken for milliseconds', () => {
  assert.equal(MAX_TE_SECONDS, 1);
  assert.deepEqual(checkEchoTimes(0.02), [0.02]);
  assert.deepEqual(checkEchoTimes([0.01, 0.02], 2), [0.01, 0.02]);
  assert.deepEqual(checkEchoTimes(new Float64Array([1])), [1]);
  const thrown = (fn) => {
    try {
      fn();
    } catch (e) {
      return e;
    }
    return assert.fail('expected a refusal');
  };
  const ms = thrown(() => checkEchoTimes([0.01, 20, 30.5]));
  assert.deepEqual([ms.code, ms.values, ms.seconds], ['TeMilliseconds', [20, 30.5], [0.01, 0.02, 0.0305]]);
  assert.match(ms.message, /give TE in seconds, not milliseconds/);
  const count = thrown(() => checkEchoTimes([0.01], 3));
  assert.deepEqual([count.code, count.given, count.echoes], ['TeCount', 1, 3]);
  for (const bad of [[0], [-0.01], [NaN], ['0.02'], [0.01, Infinity]]) {
    const e = thrown(() => checkEchoTimes(bad));
    assert.equal(e.code, 'TeInvalid', String(bad));
    assert.equal(e.te[e.index], bad[e.index]);
  }
});

// Real scanner exports (ROMEO.jl's small test set, ../shared/data/romeo-small/README.md): Phase.nii reads as a phase
// spanning 0.0073 rad (its scl_slope is NaN), phase_with_nan.nii spans ±4.7 with NaN voxels. Neither is radians: each
// is rescaled from its stored range to (-π, π] with a warning that says so, and the rescaled phase spans 2π.
test('a real phase whose span is far from 2π is rescaled to (-π, π] with a warning', async (t) => {
  const dir = new URL('../../../../shared/data/romeo-small/', import.meta.url);
  if (!fs.existsSync(dir)) return t.skip('../shared/data/romeo-small is not here');
  for (const [file, stored] of [['Phase.nii', (s) => s < 0.01], ['phase_with_nan.nii', (s) => s > 9 && s < 10]]) {
    const bytes = fs.readFileSync(new URL(file, dir));
    const mask = undefined;
    const r = await loadInputs({ phase: bytes, mask }, { needMask: false });
    const [lo, hi] = r.phaseInfo.range;
    assert.ok(stored(hi - lo), `${file}: stored span ${hi - lo}`);
    assert.equal(r.phaseInfo.units, 'rescaled', file);
    const warning = r.notes.find((n) => n.startsWith('warning: the phase spans'));
    assert.match(warning, /rescaled from that range to \(-π, π\]/, file);
    let min = Infinity;
    let max = -Infinity;
    for (const v of r.phase.data) if (Number.isFinite(v)) (min = Math.min(min, v)), (max = Math.max(max, v));
    assert.ok(min >= -Math.PI - 1e-5 && max <= Math.PI + 1e-5 && max - min > 0.99 * 2 * Math.PI, `${file}: [${min}, ${max}]`);
  }
});
