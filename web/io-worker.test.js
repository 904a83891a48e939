// web/io-worker.js under node: its message protocol and the page's words for the input loader's refusals.
// The worker's `self` is a stand-in that records what the worker posts; the page itself (Chromium) is
// tested in page.test.js.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { writeNifti } from '../bindings/js/io/nifti.js';

let handler;
const posted = new Map();
const waiting = new Map();

before(async () => {
  globalThis.self = {
    addEventListener: (type, fn) => type === 'message' && (handler = fn),
    postMessage: (msg) => {
      posted.set(msg.id, msg);
      waiting.get(msg.id)?.(msg);
    },
  };
  await import('./io-worker.js');
});

let nextId = 1;
/** Sends one request to the worker and resolves to its reply {id, result} | {id, error}. */
function call(op, args) {
  const id = nextId++;
  return new Promise((resolve) => {
    waiting.set(id, resolve);
    handler({ data: { id, op, args } });
  });
}

const DIMS = [4, 3, 2];
const N = 24;
const like = { dims: DIMS, voxelMm: [1, 1, 1] };
const nii = async (values, dims = DIMS) => (await writeNifti(Float32Array.from(values), { ...like, dims })).buffer;
const fill = (n, f) => Array.from({ length: n }, (_, i) => f(i));

test('ops read / mask / threshold / write / phase / load answer in the protocol the page uses', async () => {
  const read = await call('read', { bytes: await nii(fill(N, (i) => i * 127.732434)), units: 'hz', b0: 3 });
  assert.deepEqual(read.result.dims, DIMS);
  assert.ok(Math.abs(read.result.data[2] - 2) < 1e-6, 'Hz → ppm at 3 T');
  assert.equal(read.result.header.version, 1);
  const mask = await call('mask', { bytes: await nii(fill(N, (i) => i % 2)) });
  assert.deepEqual(Array.from(mask.result.mask), fill(N, (i) => i % 2));
  const written = await call('write', { data: new Float32Array(N), like, gzip: true });
  assert.deepEqual([written.result[0], written.result[1]], [0x1f, 0x8b]);

  const phase = await call('phase', {
    phase: await nii(fill(N, (i) => (i % 5) * 60 - 120)), mask: await nii(fill(N, () => 1)), maskSource: 'file', fraction: 0.1, units: 'deg', names: { phase: 'p.nii' },
  });
  assert.deepEqual([phase.result.echoes, phase.result.dims, phase.result.range, phase.result.fixed], [1, DIMS, [-120, 120], 0]);
  assert.ok(Math.abs(phase.result.phase[1] - (-60 * Math.PI) / 180) < 1e-6);
  assert.deepEqual(phase.result.notes, ['phase converted from degrees (× π/180)']);
  assert.equal(phase.result.like.data, undefined);

  const load = await call('load', { field: await nii(fill(N, () => 0.1)), magnitude: await nii(fill(N, (i) => i)), maskSource: 'magnitude', fraction: 0.5 });
  assert.equal(load.result.kind, 'field');
  assert.deepEqual(load.result.geometry.dims, DIMS);
  assert.equal(load.result.mask.length, N);
  assert.equal(load.result.input.data, undefined);
  assert.match((await call('nope', {})).error.message, /unknown op 'nope'/);
});

test('refusals in the page\'s words, with the code and numbers of the refusal', async () => {
  const phase = await nii(fill(N, () => 0.5));
  const err = async (op, args) => (await call(op, args)).error;
  const small = await nii(fill(12, () => 1), [4, 3, 1]);
  let e = await err('phase', { phase, mask: small, maskSource: 'file', units: 'rad', names: { phase: 'p.nii' } });
  assert.deepEqual([e.message, e.code, e.dims], ['The phase is 4×3×2 but the mask is 4×3×1: they must have the same dimensions.', 'DimsMismatch', [4, 3, 1]]);
  e = await err('phase', { phase, magnitude: small, maskSource: 'magnitude', units: 'rad', names: { phase: 'p.nii', magnitude: 'm.nii' } });
  assert.equal(e.message, 'The phase is 4×3×2 but the magnitude m.nii is 4×3×1: they must have the same dimensions.');
  e = await err('phase', { phase, maskSource: 'magnitude', units: 'rad', names: { phase: 'p.nii' } });
  assert.equal(e.message, 'Choose a magnitude image to threshold for the mask, or a mask file.');
  e = await err('phase', { phase: await nii(fill(N, (i) => i * 15 - 180)), mask: phase, maskSource: 'file', units: 'rad', names: { phase: 'p.nii' } });
  assert.match(e.message, /^The phase spans \[-180, 165\], outside \[-π, π\]: .*It looks like degrees: choose Phase units “degrees”/);
  assert.deepEqual([e.code, e.min, e.max], ['PhaseNotRadians', -180, 165]);
  e = await err('phase', { phase: new Uint8Array(10).buffer, mask: phase, maskSource: 'file', units: 'rad', names: { phase: 'p.nii' } });
  assert.match(e.message, /^p\.nii: not a NIfTI file/);
  const nan = fill(N, () => 0.5);
  nan[3] = NaN;
  e = await err('phase', { phase: await nii(nan), mask: phase, maskSource: 'file', units: 'rad', names: { phase: 'p.nii' } });
  assert.deepEqual([e.message, e.code], ['The phase holds 1 NaN or infinite value inside the mask: fix the file or the mask.', 'NonFiniteInput']);
  e = await err('phase', { phase, mask: phase, maskSource: 'file', units: 'rad', names: { phase: 'p.nii' }, te: [20] });
  assert.equal(e.message, 'TE 20 s is implausible for an echo time: type TE in seconds, not milliseconds (20 ms = 0.02: 0.02).');
  e = await err('phase', { phase, mask: phase, maskSource: 'file', units: 'rad', names: { phase: 'p.nii' }, te: [0.01, 0.02] });
  assert.equal(e.message, 'The phase holds 1 echo but 2 echo times were given: give one TE per echo, in seconds.');
  e = await err('load', { field: phase, mask: small, maskSource: 'file' });
  assert.equal(e.message, 'The field map is 4×3×2 but the mask is 4×3×1: they must have the same dimensions.');
  e = await err('load', { field: phase, magnitude: small, maskSource: 'magnitude' });
  assert.equal(e.message, 'The field map is 4×3×2 but the magnitude image is 4×3×1: they must have the same dimensions.');
  e = await err('load', { field: phase, mask: phase, maskSource: 'file', units: 'hz' });
  assert.equal(e.message, 'Give the field strength B0 in tesla to convert Hz to ppm.');
});
