// Tests for bindings/js/io/volume.js: the checked Volume and its geometry.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { makeVolume, geometryOf } from './volume.js';

const base = () => ({ dims: [2, 3, 4], voxelMm: [1, 1.5, 2], data: new Float32Array(24) });

test('makeVolume: defaults (affine diag(voxelMm), b0Dir +z, one echo), extra fields kept, affine as 4 rows', () => {
  const v = makeVolume({ ...base(), header: { version: 1 }, raw: new ArrayBuffer(4) });
  assert.deepEqual(v.affine, [1, 0, 0, 0, 0, 1.5, 0, 0, 0, 0, 2, 0, 0, 0, 0, 1]);
  assert.deepEqual(v.b0Dir, [0, 0, 1]);
  assert.equal(v.echoes, 1);
  assert.deepEqual(v.header, { version: 1 });
  assert.equal(v.raw.byteLength, 4);
  assert.equal('description' in v, false);
  const rows = [[0, 0, -2, 10], [1.5, 0, 0, -20], [0, 1.25, 0, 30], [0, 0, 0, 1]];
  const w = makeVolume({ ...base(), affine: rows, b0Dir: new Float64Array([0, 1, 0]), description: 'chi' });
  assert.deepEqual(w.affine, rows.flat());
  assert.deepEqual(w.b0Dir, [0, 1, 0]);
  assert.equal(w.description, 'chi');
  const echoes = makeVolume({ ...base(), data: new Uint8Array(72), echoes: 3 });
  assert.equal(echoes.data.length, 72);
  assert.deepEqual(geometryOf(echoes), { dims: [2, 3, 4], voxelMm: [1, 1.5, 2], b0Dir: [0, 0, 1] });
  // geometryOf copies: changing it leaves the volume alone
  geometryOf(echoes).dims[0] = 99;
  assert.equal(echoes.dims[0], 2);
});

test('makeVolume names what is wrong', () => {
  const bad = (patch, re) => assert.throws(() => makeVolume({ ...base(), ...patch }), re);
  bad({ dims: [2, 3] }, /dims must be three whole numbers >= 1, got \[2, 3\]/);
  bad({ dims: [2, 0, 4] }, /dims must be three whole numbers >= 1/);
  bad({ dims: 'abc' }, /dims must be three whole numbers/);
  bad({ voxelMm: [1, -1, 1] }, /voxelMm must be three finite numbers > 0 \(mm\), got \[1, -1, 1\]/);
  bad({ data: new Float32Array(23) }, /data holds 23 values but dims 2×3×4 need 24/);
  bad({ data: new Float32Array(24), echoes: 2 }, /data holds 24 values but dims 2×3×4 × 2 echoes need 48/);
  bad({ data: [0, 1] }, /data must be a typed array/);
  bad({ echoes: 0 }, /echoes must be a whole number >= 1, got 0/);
  bad({ b0Dir: [0, 0, 0] }, /b0Dir is \[0, 0, 0\]/);
  bad({ b0Dir: [0, NaN, 1] }, /b0Dir must be three finite numbers/);
  bad({ affine: [1, 0, 0] }, /affine must be 16 finite numbers \(row-major 4×4\) or 4 rows of 4/);
  bad({ affine: [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1], [0, 0, 0, 1]] }, /affine must be 16 finite numbers/);
  bad({ description: 3 }, /description must be a string/);
  assert.throws(() => makeVolume(null), /expected \{ dims, voxelMm, data/);
  assert.throws(() => geometryOf(undefined), /expected a Volume/);
});
