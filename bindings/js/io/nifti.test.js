// Tests for bindings/js/io/nifti.js. Every input file is built byte by byte here, independently of the
// writer under test. Run: node --no-experimental-fetch --test bindings/js/nifti.test.js

import { test } from 'node:test';
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import fs from 'node:fs';
import { execFileSync } from 'node:child_process';
import * as niftiReader from 'nifti-reader-js';
import {
  readNifti, readNiftiAsync, readMask, maskFromValues, maskValuesWarning, readEchoes, readEchoesAsync, thresholdMask, writeNifti, hzToPpm, radPerSecToPpm,
  phaseToRadians, GAMMA_BAR_MHZ_PER_T,
} from './nifti.js';
import { phrasePhaseRefusal, isPhaseUnitsRefusal, PhaseRefusal } from './phase-units.js';
import { headerCases, gzipCases, refusal as fuzzRefusal } from '../../../tests/js/nifti-fuzz.js';

// ---------------------------------------------------------------------------------------------------
// Hand-made files

const TYPES = {
  2: { bitpix: 8, set: 'setUint8', values: [0, 1, 2, 127, 128, 200, 254, 255, 3, 4, 5, 6] },
  256: { bitpix: 8, set: 'setInt8', values: [-128, -1, 0, 1, 127, 5, -5, 100, -100, 7, 8, 9] },
  4: { bitpix: 16, set: 'setInt16', values: [-32768, -1, 0, 1, 32767, 1000, -1000, 12345, 2, 3, 4, 5] },
  512: { bitpix: 16, set: 'setUint16', values: [0, 1, 65535, 32768, 40000, 7, 8, 9, 10, 11, 12, 13] },
  8: { bitpix: 32, set: 'setInt32', values: [-2147483648, 2147483647, 0, -1, 1, 16777217, 123456789, 5, 6, 7, 8, 9] },
  768: { bitpix: 32, set: 'setUint32', values: [0, 4294967295, 1, 16777217, 2147483648, 5, 6, 7, 8, 9, 10, 11] },
  16: { bitpix: 32, set: 'setFloat32', values: [0, -0.5, 1.5, 3.4e38, -1e-30, NaN, Infinity, 0.1, 2, 3, 4, 5] },
  64: { bitpix: 64, set: 'setFloat64', values: [1 / 3, -2.5, 1e300, 0, 1e-300, NaN, 7, 8, 9, 10, 11, 12] },
};

/** A single-file NIfTI-1 built field by field (nifti1.h offsets). */
function makeNifti1({
  dim = [3, 3, 2, 2, 1, 1, 1, 1], datatype = 16, values, le = true, pixdim = [1, 1, 1, 1, 0, 0, 0, 0],
  voxOffset = 352, slope = 0, inter = 0, xyztUnits = 2, qformCode = 0, quatern = [0, 0, 0, 0, 0, 0],
  sformCode = 0, srow = null, magic = 'n+1\0', extension = null, intentCode = 0, intentName = '', descrip = '',
  truncateBy = 0,
} = {}) {
  const t = TYPES[datatype] ?? { bitpix: 32, set: 'setFloat32' };
  const nvox = dim.slice(1, dim[0] + 1).reduce((a, b) => a * b, 1);
  values ??= t.values ?? new Array(nvox).fill(0);
  const bytes = new Uint8Array(voxOffset + (nvox * t.bitpix) / 8);
  const dv = new DataView(bytes.buffer);
  dv.setInt32(0, 348, le);
  dim.forEach((d, i) => dv.setInt16(40 + 2 * i, d, le));
  dv.setInt16(68, intentCode, le);
  dv.setInt16(70, datatype, le);
  dv.setInt16(72, t.bitpix, le);
  pixdim.forEach((p, i) => dv.setFloat32(76 + 4 * i, p, le));
  dv.setFloat32(108, voxOffset, le);
  dv.setFloat32(112, slope, le);
  dv.setFloat32(116, inter, le);
  bytes[123] = xyztUnits;
  for (let i = 0; i < descrip.length; i++) bytes[148 + i] = descrip.charCodeAt(i);
  dv.setInt16(252, qformCode, le);
  dv.setInt16(254, sformCode, le);
  quatern.forEach((q, i) => dv.setFloat32(256 + 4 * i, q, le));
  if (srow) srow.slice(0, 12).forEach((v, i) => dv.setFloat32(280 + 4 * i, v, le));
  for (let i = 0; i < intentName.length; i++) bytes[328 + i] = intentName.charCodeAt(i);
  for (let i = 0; i < 4; i++) bytes[344 + i] = magic.charCodeAt(i);
  if (extension) {
    bytes[348] = 1;
    dv.setInt32(352, extension.length + 8, le); // esize
    dv.setInt32(356, 6, le); // ecode: comment
    bytes.set(extension, 360);
  }
  const step = t.bitpix / 8;
  values.forEach((v, i) => dv[t.set](voxOffset + step * i, v, le));
  return truncateBy ? bytes.slice(0, bytes.length - truncateBy) : bytes;
}

/** A single-file NIfTI-2 built field by field (nifti2.h offsets). */
function makeNifti2({ dim = [3, 3, 2, 2, 1, 1, 1, 1], datatype = 64, values, le = true, pixdim = [1, 1, 1, 1, 0, 0, 0, 0], sformCode = 0, srow = null, qformCode = 0, quatern = [0, 0, 0, 0, 0, 0], slope = 0, inter = 0 } = {}) {
  const t = TYPES[datatype];
  values ??= t.values;
  const voxOffset = 544;
  const bytes = new Uint8Array(voxOffset + (values.length * t.bitpix) / 8);
  const dv = new DataView(bytes.buffer);
  dv.setInt32(0, 540, le);
  'n+2\0\r\n\x1a\n'.split('').forEach((c, i) => (bytes[4 + i] = c.charCodeAt(0)));
  dv.setInt16(12, datatype, le);
  dv.setInt16(14, t.bitpix, le);
  dim.forEach((d, i) => dv.setBigInt64(16 + 8 * i, BigInt(d), le));
  pixdim.forEach((p, i) => dv.setFloat64(104 + 8 * i, p, le));
  dv.setBigInt64(168, BigInt(voxOffset), le);
  dv.setFloat64(176, slope, le);
  dv.setFloat64(184, inter, le);
  dv.setInt32(344, qformCode, le);
  dv.setInt32(348, sformCode, le);
  quatern.forEach((q, i) => dv.setFloat64(352 + 8 * i, q, le));
  if (srow) srow.slice(0, 12).forEach((v, i) => dv.setFloat64(400 + 8 * i, v, le));
  dv.setInt32(500, 2, le); // xyzt_units mm
  const step = t.bitpix / 8;
  values.forEach((v, i) => dv[t.set](voxOffset + step * i, v, le));
  return bytes;
}

const f32 = (xs) => xs.map(Math.fround);
const close = (a, b, tol, msg) => a.forEach((x, i) => assert.ok(Math.abs(x - b[i]) <= tol, `${msg}: [${i}] ${x} vs ${b[i]}`));

/** Quaternion (b, c, d) for a rotation of `theta` about the unit axis `u`. */
const quat = (u, theta) => u.map((x) => x * Math.sin(theta / 2));

// ---------------------------------------------------------------------------------------------------
// Reading

test('reads every supported datatype (little-endian NIfTI-1), values converted to float32 exactly', () => {
  for (const [code, t] of Object.entries(TYPES)) {
    const vol = readNifti(makeNifti1({ datatype: Number(code) }));
    assert.equal(vol.datatype, Number(code));
    assert.deepEqual(vol.dims, [3, 2, 2]);
    assert.ok(vol.data instanceof Float32Array);
    assert.deepEqual(Array.from(vol.data), f32(t.values), `datatype ${code}`);
    assert.equal(vol.header.version, 1);
    assert.equal(vol.raw.byteLength, 352);
    assert.deepEqual(vol.affine, [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]);
    assert.equal(vol.affineSource, 'pixdim');
    assert.deepEqual(vol.b0Dir, [0, 0, 1]);
  }
});

test('reads big-endian NIfTI-1 and NIfTI-1 from an ArrayBuffer / offset Uint8Array', () => {
  for (const code of [4, 512, 8, 16, 64]) {
    const vol = readNifti(makeNifti1({ datatype: code, le: false }));
    assert.equal(vol.header.littleEndian, false);
    assert.deepEqual(Array.from(vol.data), f32(TYPES[code].values), `BE datatype ${code}`);
  }
  const file = makeNifti1({ datatype: 4 });
  assert.deepEqual(Array.from(readNifti(file.buffer).data), f32(TYPES[4].values));
  const padded = new Uint8Array(file.length + 3);
  padded.set(file, 3); // unaligned view
  assert.deepEqual(Array.from(readNifti(padded.subarray(3)).data), f32(TYPES[4].values));
});

test('reads NIfTI-2 (little- and big-endian) with its sform', () => {
  const srow = [0, 0, -2, 10, 1.5, 0, 0, -20, 0, 1.25, 0, 30];
  for (const le of [true, false]) {
    const vol = readNifti(makeNifti2({ le, sformCode: 1, srow, pixdim: [1, 1.5, 1.25, 2, 0, 0, 0, 0] }));
    assert.equal(vol.header.version, 2);
    assert.deepEqual(vol.dims, [3, 2, 2]);
    assert.deepEqual(vol.voxelMm, [1.5, 1.25, 2]);
    assert.deepEqual(Array.from(vol.data), f32(TYPES[64].values));
    assert.deepEqual(vol.affine, [...srow, 0, 0, 0, 1]);
    assert.equal(vol.raw.byteLength, 544);
    // voxel axes: i → world y, j → world z, k → −world x; B0 (world z) is along +j
    assert.deepEqual(vol.b0Dir, [0, 1, 0]);
  }
});

test('scl_slope / scl_inter are applied when slope != 0, ignored when slope == 0', () => {
  const values = [0, 1, 2, 3, -4, 100, 6, 7, 8, 9, 10, 11];
  const scaled = readNifti(makeNifti1({ datatype: 4, values, slope: 0.5, inter: -10 }));
  assert.deepEqual(Array.from(scaled.data), f32(values.map((v) => v * 0.5 - 10)));
  const unscaled = readNifti(makeNifti1({ datatype: 4, values, slope: 0, inter: -10 }));
  assert.deepEqual(Array.from(unscaled.data), values);
  // int32 scaled from the exact integer, not from its float32 rounding
  const big = readNifti(makeNifti1({ datatype: 8, values: [16777217, ...new Array(11).fill(0)], slope: 1, inter: 0.5 }));
  assert.equal(big.data[0], Math.fround(16777217.5));
  const n2 = readNifti(makeNifti2({ slope: 2, inter: 1 }));
  assert.deepEqual(Array.from(n2.data), f32(TYPES[64].values.map((v) => v * 2 + 1)));
});

test('4D with one volume is read; more volumes (or 5D) are refused clearly', () => {
  const one = readNifti(makeNifti1({ dim: [4, 3, 2, 2, 1, 1, 1, 1] }));
  assert.deepEqual(one.dims, [3, 2, 2]);
  assert.throws(
    () => readNifti(makeNifti1({ dim: [4, 2, 2, 1, 12, 1, 1, 1], values: new Array(48).fill(1) })),
    { message: 'expected a 3D volume, got 4D with 12 volumes: pick one volume first' },
  );
  assert.throws(() => readNifti(makeNifti1({ dim: [5, 2, 2, 1, 1, 3, 1, 1], values: new Array(12).fill(1) })), /got 5D with 3 volumes/);
  // 2D images are 3D volumes with nz = 1
  assert.deepEqual(readNifti(makeNifti1({ dim: [2, 4, 3, 0, 0, 0, 0, 0] })).dims, [4, 3, 1]);
});

test('readEchoes: 4D echoes read echo after echo (NIfTI-1 both byte orders, NIfTI-2, gzip, scaled); the result is 3D for writeNifti', async () => {
  const srow = [0, -2, 0, 10, 1.5, 0, 0, -20, 0, 0, 3, 5];
  const values = [-5, 0, 1, 2, 100, -100, 7, 8, 9, 10, 11, 12]; // 2×2×1, 3 echoes
  for (const le of [true, false]) {
    const bytes = makeNifti1({ dim: [4, 2, 2, 1, 3, 1, 1, 1], datatype: 4, values, le, slope: 0.5, inter: 1, sformCode: 1, srow, pixdim: [1, 2, 1.5, 3, 0.8, 0, 0, 0] });
    for (const img of [readEchoes(bytes), readEchoes(zlib.gzipSync(bytes)), await readEchoesAsync(zlib.gzipSync(bytes))]) {
      assert.equal(img.echoes, 3);
      assert.deepEqual(img.dims, [2, 2, 1]);
      assert.deepEqual(img.voxelMm, [2, 1.5, 3]);
      assert.deepEqual(Array.from(img.data), values.map((v) => v * 0.5 + 1));
      assert.deepEqual(img.header.dim, [3, 2, 2, 1, 1, 1, 1, 1]);
      assert.equal(img.header.littleEndian, le);
      assert.deepEqual(img.affine, [...f32(srow), 0, 0, 0, 1]);
      // raw says 3D too: the output header writeNifti copies
      const rdv = new DataView(img.raw);
      assert.deepEqual([0, 3, 4].map((i) => rdv.getInt16(40 + 2 * i, le)), [3, 1, 1]);
      const out = readNifti(await writeNifti(img.data.slice(4, 8), img));
      assert.deepEqual(out.dims, [2, 2, 1]);
      assert.deepEqual(out.header.dim, [3, 2, 2, 1, 1, 1, 1, 1]);
      assert.deepEqual(out.affine, img.affine);
      assert.deepEqual(out.header.pixdim, img.header.pixdim);
      assert.deepEqual(Array.from(out.data), values.slice(4, 8).map((v) => v * 0.5 + 1));
    }
    // readNifti keeps refusing what it cannot return as one volume
    assert.throws(() => readNifti(bytes), { message: 'expected a 3D volume, got 4D with 3 volumes: pick one volume first' });
  }
  // NIfTI-2: 3×2×1, 2 echoes
  const n2 = readEchoes(makeNifti2({ dim: [4, 3, 2, 1, 2, 1, 1, 1] }));
  assert.equal(n2.echoes, 2);
  assert.deepEqual(n2.dims, [3, 2, 1]);
  assert.deepEqual(Array.from(n2.data), f32(TYPES[64].values));
  assert.deepEqual(n2.header.dim, [3, 3, 2, 1, 1, 1, 1, 1]);
  assert.equal(new DataView(n2.raw).getBigInt64(16, true), 3n);
  assert.equal(new DataView(n2.raw).getBigInt64(16 + 8 * 4, true), 1n);
  assert.deepEqual(readNifti(await writeNifti(n2.data.slice(0, 6), n2)).dims, [3, 2, 1]);
  // a 3D file, or a 4D file of one volume: readNifti's result, plus echoes: 1
  for (const dim of [[3, 3, 2, 2, 1, 1, 1, 1], [4, 3, 2, 2, 1, 1, 1, 1]]) {
    const bytes = makeNifti1({ dim });
    assert.deepEqual(readEchoes(bytes), { ...readNifti(bytes), echoes: 1 });
    assert.deepEqual(await readEchoesAsync(bytes), { ...readNifti(bytes), echoes: 1 });
  }
});

test('readEchoes refuses dims 5–7 above 1, truncated echoes, and what readNifti refuses', async () => {
  const ones = (n) => new Array(n).fill(1);
  const fiveD = makeNifti1({ dim: [5, 2, 2, 1, 1, 3, 1, 1], values: ones(12) });
  assert.throws(() => readEchoes(fiveD), { message: 'expected 3D, or 4D with the echoes along the 4th dim, got 5D (2×2×1×1×3): dim[5..7] must be 1' });
  await assert.rejects(readEchoesAsync(fiveD), /got 5D \(2×2×1×1×3\)/);
  assert.throws(() => readEchoes(makeNifti1({ dim: [5, 2, 2, 1, 2, 3, 1, 1], values: ones(24) })), /got 5D \(2×2×1×2×3\): dim\[5\.\.7\] must be 1/);
  assert.throws(() => readEchoes(makeNifti1({ dim: [7, 2, 1, 1, 2, 1, 1, 2], values: ones(8) })), /got 7D \(2×1×1×2×1×1×2\)/);
  assert.throws(
    () => readEchoes(makeNifti1({ dim: [4, 2, 2, 1, 3, 1, 1, 1], values: ones(12), truncateBy: 4 })),
    { message: 'truncated data: expected 48 bytes of image data (3 echoes of 2×2×1) after vox_offset 352, got 44' },
  );
  assert.throws(() => readEchoes(makeNifti1({ dim: [4, 2, 2, 1, 3, 1, 1, 1], datatype: 32, values: [] })), /unsupported datatype 32 \(complex64\)/);
  assert.throws(() => readEchoes(new Uint8Array(400)), /not a NIfTI file/);
  assert.throws(() => readEchoes('x.nii'), /readEchoes: expected an ArrayBuffer or Uint8Array/);
});

test('truncated image data and truncated headers are refused with sizes', () => {
  assert.throws(() => readNifti(makeNifti1({ datatype: 4, truncateBy: 5 })), {
    message: 'truncated data: expected 24 bytes of image data after vox_offset 352, got 19',
  });
  assert.throws(() => readNifti(makeNifti1().slice(0, 200)), /truncated NIfTI-1 header: expected 348 bytes, got 200/);
  const gz = zlib.gzipSync(makeNifti1());
  assert.throws(() => readNifti(gz.subarray(0, gz.length - 30)), /corrupt or truncated gzip data/);
});

test('non-NIfTI input is refused clearly', () => {
  assert.throws(() => readNifti(new Uint8Array(0)), /not a NIfTI file/);
  assert.throws(() => readNifti(new TextEncoder().encode('hello world, this is not an image'.repeat(20))), /not a NIfTI file/);
  assert.throws(() => readNifti(new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, ...new Array(400).fill(0)])), /not a NIfTI file/);
  assert.throws(() => readNifti(makeNifti1({ magic: '\0\0\0\0' })), /not a NIfTI file: NIfTI-1 magic .*ANALYZE/);
  assert.throws(() => readNifti(makeNifti1({ magic: 'ni1\0' })), /header\/image pair/);
  assert.throws(() => readNifti('file.nii'), TypeError);
  assert.throws(() => readNifti(makeNifti1({ datatype: 32 })), /unsupported datatype 32 \(complex64\)/);
  assert.throws(() => readNifti(makeNifti1({ datatype: 128 })), /unsupported datatype 128 \(rgb24\)/);
  assert.throws(() => readNifti(makeNifti1({ pixdim: [1, 0, 1, 1, 0, 0, 0, 0] })), /invalid voxel size/);
});

test('extensions are kept in raw and skipped for data; voxel size honours xyzt_units', () => {
  const ext = new TextEncoder().encode('hello extension'.padEnd(24, '\0'));
  const file = makeNifti1({ datatype: 4, voxOffset: 352 + 8 + 24, extension: ext });
  const vol = readNifti(file);
  assert.equal(vol.raw.byteLength, 384);
  assert.deepEqual(new Uint8Array(vol.raw), file.subarray(0, 384));
  assert.deepEqual(Array.from(vol.data), TYPES[4].values);
  const metres = readNifti(makeNifti1({ xyztUnits: 1 + 8, pixdim: [1, 0.001, 0.0005, 0.002, 0, 0, 0, 0] }));
  close(metres.voxelMm, [1, 0.5, 2], 1e-6, 'metres→mm');
  const microns = readNifti(makeNifti1({ xyztUnits: 3, pixdim: [1, 500, 500, 1000, 0, 0, 0, 0] }));
  close(microns.voxelMm, [0.5, 0.5, 1], 1e-9, 'µm→mm');
});

test('affine: sform wins over qform; qform matches nifti-reader-js (qfac −1, oblique)', () => {
  const [b, c, d] = quat([0.48, 0.6, 0.64], 0.7); // unit axis
  const quatern = [b, c, d, -90.5, 12.25, 40];
  const pixdim = [-1, 0.9, 1.1, 2.2, 0, 0, 0, 0];
  const file = makeNifti1({ qformCode: 1, quatern, pixdim });
  const vol = readNifti(file);
  assert.equal(vol.affineSource, 'qform');
  const ref = niftiReader.readHeader(file.slice().buffer).getQformMat().flat();
  close(vol.affine, ref, 1e-12, 'qform vs nifti-reader-js');
  const srow = [2, 0, 0, 1, 0, 2, 0, 2, 0, 0, 2, 3];
  const both = readNifti(makeNifti1({ qformCode: 1, quatern, pixdim, sformCode: 2, srow }));
  assert.equal(both.affineSource, 'sform');
  assert.deepEqual(both.affine, [...srow, 0, 0, 0, 1]);
});

test('b0Dir: scanner z in voxel axes from qform, sform (anisotropic), scanner-space preference', () => {
  const th = 0.3;
  const want = [0, Math.sin(th), Math.cos(th)]; // rotation about x by θ: third row of R
  const [b, c, d] = quat([1, 0, 0], th);
  const q = readNifti(makeNifti1({ qformCode: 1, quatern: [b, c, d, 0, 0, 0], pixdim: [1, 0.5, 0.7, 2, 0, 0, 0, 0] }));
  assert.equal(q.b0DirSource, 'qform');
  close(q.b0Dir, want, 1e-6, 'qform b0Dir');
  // the same rotation written as an anisotropic sform: R · diag(0.5, 0.7, 2)
  const C = Math.cos(th);
  const S = Math.sin(th);
  const srow = [0.5, 0, 0, 0, 0, 0.7 * C, -2 * S, 0, 0, 0.7 * S, 2 * C, 0];
  const s = readNifti(makeNifti1({ sformCode: 1, srow }));
  assert.equal(s.b0DirSource, 'sform');
  close(s.b0Dir, want, 1e-6, 'sform b0Dir');
  assert.ok(Math.abs(Math.hypot(...s.b0Dir) - 1) < 1e-12);
  // sform in MNI space (code 4) but qform in scanner space (code 1): affine from sform, b0Dir from qform
  const mixed = readNifti(makeNifti1({ sformCode: 4, srow: [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0], qformCode: 1, quatern: [b, c, d, 0, 0, 0] }));
  assert.equal(mixed.affineSource, 'sform');
  assert.equal(mixed.b0DirSource, 'qform');
  close(mixed.b0Dir, want, 1e-6, 'mixed b0Dir');
  // qfac −1 flips the k axis: B0 then points along −k (sign immaterial for the dipole kernel)
  const flipped = readNifti(makeNifti1({ qformCode: 1, pixdim: [-1, 1, 1, 1, 0, 0, 0, 0] }));
  assert.deepEqual(flipped.b0Dir, [0, 0, -1]);
  // sagittal slab: k along world x, B0 lies along voxel axis j
  const sag = readNifti(makeNifti1({ sformCode: 1, srow: [0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0] }));
  assert.deepEqual(sag.b0Dir, [0, 1, 0]);
  // singular sform → default
  const sing = readNifti(makeNifti1({ sformCode: 1, srow: [1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0] }));
  assert.deepEqual(sing.b0Dir, [0, 0, 1]);
  assert.equal(sing.b0DirSource, 'default');
});

test('fuzz: 300 hand-built NIfTI-1/2 headers (byte orders, datatypes, scaling, qform/sform codes) read back their known values', () => {
  // The fields come from nifti-reader-js now, so the oracle is the builder's own inputs; the qform matrix
  // (computed here, not by the library's affine) is checked against nifti-reader-js's getQformMat.
  let seed = 12345;
  const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
  const pick = (xs) => xs[Math.floor(rand() * xs.length)];
  const codes = Object.keys(TYPES).map(Number);
  const intRange = { 2: [0, 255], 256: [-128, 127], 4: [-32768, 32767], 512: [0, 65535], 8: [-1e6, 1e6], 768: [0, 1e6] };
  for (let trial = 0; trial < 300; trial++) {
    const version = pick([1, 2]);
    const le = rand() < 0.5;
    const datatype = pick(codes);
    const d3 = [1 + Math.floor(rand() * 4), 1 + Math.floor(rand() * 3), 1 + Math.floor(rand() * 3)];
    const dim = [pick([3, 4]), ...d3, 1, 1, 1, 1];
    const nvox = d3[0] * d3[1] * d3[2];
    const [a, b] = intRange[datatype] ?? [-1000, 1000];
    const values = Array.from({ length: nvox }, () => (intRange[datatype] ? Math.round(a + rand() * (b - a)) : (rand() - 0.5) * 1e3));
    const vox = [0.3 + rand() * 3, 0.3 + rand() * 3, 0.3 + rand() * 3];
    const pixdim = [pick([1, -1]), ...vox, 0, 0, 0, 0];
    const slope = pick([0, 1, 0.25 + rand()]);
    const inter = slope ? pick([0, rand() * 10 - 5]) : 0;
    const qformCode = pick([0, 1, 2]);
    const [qb, qc, qd] = quat([rand() - 0.5, rand() - 0.5, rand() - 0.5].map((x, _, u) => x / Math.hypot(...u)), rand() * 6);
    const quatern = [qb, qc, qd, rand() * 100 - 50, rand() * 100 - 50, rand() * 100 - 50];
    const sformCode = pick([0, 1, 4]);
    const srow = Array.from({ length: 12 }, () => rand() * 4 - 2);
    const opts = { dim, datatype, values, le, pixdim, slope, inter, qformCode, quatern, sformCode, srow };
    const file = version === 1 ? makeNifti1(opts) : makeNifti2(opts);
    const vol = readNifti(file);
    const stored = version === 1 ? Math.fround : (x) => x; // NIfTI-1 header floats are float32
    const msg = `trial ${trial} (NIfTI-${version} ${le ? 'LE' : 'BE'} datatype ${datatype})`;
    assert.deepEqual(vol.dims, d3, msg);
    assert.equal(vol.echoes, 1);
    close(vol.voxelMm, vox.map(stored), 1e-12, `${msg} voxelMm`);
    const s = stored(slope);
    const i0 = stored(inter);
    const scaled = s !== 0 && !(s === 1 && i0 === 0);
    const want = datatype === 16 ? f32(values) : values;
    assert.deepEqual(Array.from(vol.data), want.map((v) => Math.fround(scaled ? v * s + i0 : v)), `${msg} data`);
    assert.deepEqual([vol.header.version, vol.header.littleEndian, vol.header.qform_code, vol.header.sform_code], [version, le, qformCode, sformCode], msg);
    assert.deepEqual([...vol.header.srow_x, ...vol.header.srow_y, ...vol.header.srow_z], srow.map(stored), `${msg} srow`);
    if (sformCode > 0) {
      assert.equal(vol.affineSource, 'sform');
      assert.deepEqual(vol.affine, [...srow.map(stored), 0, 0, 0, 1], `${msg} sform`);
    } else if (qformCode > 0) {
      assert.equal(vol.affineSource, 'qform');
      close(vol.affine, niftiReader.readHeader(file.slice().buffer).getQformMat().flat(), 1e-9, `${msg} qform`);
    } else {
      assert.deepEqual(vol.affine, [stored(vox[0]), 0, 0, 0, 0, stored(vox[1]), 0, 0, 0, 0, stored(vox[2]), 0, 0, 0, 0, 1], `${msg} pixdim`);
    }
    assert.ok(Math.abs(Math.hypot(...vol.b0Dir) - 1) < 1e-9, `${msg} b0Dir unit`);
    assert.deepEqual(new Uint8Array(vol.raw), file.subarray(0, version === 1 ? 352 : 544), `${msg} raw`);
  }
});

test('fuzz: 1,500 mutated headers and 1,000 mutated gzip streams (seeded) through readNifti / readEchoes, sync and async: 0 crashes, 0 hangs, consistent reads', { timeout: 120000 }, async () => {
  // tests/js/nifti-fuzz.js: field-targeted mutations (dims, datatype, bitpix, vox_offset, scl, pixdim, qform/sform,
  // extension sizes, magic), byte flips, truncations, insertions; gzip: deflate flips, header flags, CRC32/ISIZE,
  // truncation, junk, a second member. A crash is anything but the reader's own refusals (fuzz.refusal).
  const cases = [...headerCases(20250613, 1500), ...gzipCases(613, 1000)];
  const readers = [['readNifti', readNifti], ['readEchoes', readEchoes], ['readNiftiAsync', readNiftiAsync], ['readEchoesAsync', readEchoesAsync]];
  const crashes = [];
  const counts = { read: 0, refused: 0 };
  let slowest = { ms: 0 };
  for (const c of cases) {
    const got = {};
    for (const [name, read] of readers) {
      const t0 = performance.now();
      try {
        const v = await read(c.bytes);
        const n = v.dims[0] * v.dims[1] * v.dims[2] * v.echoes;
        const sane = v.data instanceof Float32Array && v.data.length === n && v.voxelMm.every((x) => Number.isFinite(x) && x > 0) &&
          v.affine.length === 16 && v.affine.every(Number.isFinite) && Math.abs(Math.hypot(...v.b0Dir) - 1) < 1e-9 && (name.startsWith('readEchoes') || v.echoes === 1);
        if (!sane) crashes.push(`${name} on ${c.name}: an inconsistent volume (dims ${v.dims}, echoes ${v.echoes}, ${v.data.length} values)`);
        got[name] = v;
        counts.read++;
      } catch (e) {
        const why = fuzzRefusal(e);
        if (why) crashes.push(`${name} on ${c.name}: ${why}`);
        got[name] = e;
        counts.refused++;
      }
      const ms = performance.now() - t0;
      if (ms > slowest.ms) slowest = { ms, name, c: c.name };
    }
    // A 3D read is a one-echo read; the sync reader (fflate) accepts nothing the async one (zlib) refuses, and both
    // give the same voxels (zlib also reads concatenated gzip members, which the sync reader refuses).
    const same = (a, b) => Buffer.from(a.data.buffer, a.data.byteOffset, a.data.byteLength).equals(Buffer.from(b.data.buffer, b.data.byteOffset, b.data.byteLength));
    for (const [a, b] of [['readNifti', 'readEchoes'], ['readNiftiAsync', 'readEchoesAsync'], ['readNifti', 'readNiftiAsync'], ['readEchoes', 'readEchoesAsync']]) {
      if (got[a] instanceof Error) continue;
      if (got[b] instanceof Error) crashes.push(`${a} read ${c.name} but ${b} refused it: ${got[b].message}`);
      else if (!same(got[a], got[b])) crashes.push(`${a} and ${b} read different voxels from ${c.name}`);
    }
  }
  assert.deepEqual(crashes.slice(0, 20), [], `${crashes.length} crash(es)`);
  assert.ok(slowest.ms < 2000, `the slowest read took ${slowest.ms.toFixed(0)} ms (${slowest.name} on ${slowest.c})`);
  // Both outcomes were reached: the mutations are neither all harmless nor all fatal.
  assert.ok(counts.read > 1000 && counts.refused > 3000, JSON.stringify(counts));
  console.log(`# ${cases.length} mutated files × 4 readers: ${counts.read} reads, ${counts.refused} refusals, 0 crashes; slowest call ${slowest.ms.toFixed(1)} ms`);
});

test('gzip: a corrupt trailer is refused before fflate sizes its output by it; a zero-padded or corrupted inflate is caught by the CRC32', async () => {
  const file = makeNifti1({ dim: [3, 4, 3, 2, 1, 1, 1, 1], values: Array.from({ length: 24 }, (_, i) => i - 7.5) });
  const z = new Uint8Array(zlib.gzipSync(file));
  const isize = (u8, v) => {
    const o = u8.slice();
    new DataView(o.buffer).setUint32(o.length - 4, v, true);
    return o;
  };
  // ISIZE 0xff000000: fflate would allocate ~4 GB and read the file back zero-padded.
  for (const read of [readNifti, readEchoes]) {
    assert.throws(() => read(isize(z, 0xff000000)), /^Error: corrupt or truncated gzip data: the gzip trailer says 4278190080 bytes, more than \d+ compressed bytes can hold$/);
    // a plausible but wrong ISIZE (the file plus 64 bytes): fflate hands back the file zero-padded to it
    assert.throws(() => read(isize(z, file.length + 64)), /^Error: corrupt or truncated gzip data: the CRC32 of the inflated bytes differs from the one in the gzip trailer$/);
  }
  await assert.rejects(readNiftiAsync(isize(z, 0xff000000)), /^Error: corrupt or truncated gzip data/);
  const badCrc = z.slice();
  badCrc[badCrc.length - 8] ^= 1;
  assert.throws(() => readNifti(badCrc), /^Error: corrupt or truncated gzip data: the CRC32 of the inflated bytes differs from the one in the gzip trailer$/);
  await assert.rejects(readNiftiAsync(badCrc), /^Error: corrupt or truncated gzip data/);
  const method = z.slice();
  method[2] = 7;
  assert.throws(() => readNifti(method), /compression method 7 is not deflate \(8\)/);
  // the intact stream still reads, both ways
  assert.deepEqual(Array.from(readNifti(z).data), Array.from({ length: 24 }, (_, i) => i - 7.5));
  assert.deepEqual(Array.from((await readNiftiAsync(z)).data), Array.from({ length: 24 }, (_, i) => i - 7.5));
});

test('a header whose sform or qform (code > 0) holds NaN or Inf is refused by name, not turned into a NaN affine', () => {
  const srow = [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0];
  assert.throws(() => readNifti(makeNifti1({ sformCode: 2, srow: srow.map((v, i) => (i === 7 ? NaN : v)) })),
    /^Error: invalid NIfTI header: sform_code is 2 but srow_x\/y\/z hold a non-finite value \(1, 0, 0, 0, 0, 1, 0, NaN, .*\): fix the sform or set sform_code to 0$/);
  assert.throws(() => readNifti(makeNifti1({ qformCode: 1, quatern: [0, Infinity, 0, 0, 0, 0] })),
    /^Error: invalid NIfTI header: qform_code is 1 but quatern_b\/c\/d or qoffset_x\/y\/z hold a non-finite value/);
  // unused transforms (code 0) may hold anything
  const v = readNifti(makeNifti1({ sformCode: 0, srow: srow.map(() => NaN), qformCode: 0, quatern: [NaN, 0, 0, 0, 0, 0] }));
  assert.equal(v.affineSource, 'pixdim');
});

test('nifti.js, phase-units.js and volume.js import no node built-in and await nothing at top level (browser bundles, Vite worker IIFEs)', () => {
  for (const name of ['nifti.js', 'phase-units.js', 'volume.js', 'inputs.js']) {
    const src = fs.readFileSync(new URL(`./${name}`, import.meta.url), 'utf8');
    assert.doesNotMatch(src, /['"]node:|from ['"](fs|zlib|path|os|url|worker_threads)['"]/, name);
    assert.doesNotMatch(src, /^(?:(?:export\s+)?(?:const|let|var)\s[^\n]*)?\bawait\b/m, `${name}: top-level await`); // column 0: module scope
  }
});

// ---------------------------------------------------------------------------------------------------
// Masks

test('readMask: 1 where finite and > 0 (a mask of -1 outside is not inside); values other than 0/1 are said', () => {
  const values = [0, 1, -1, NaN, Infinity, -Infinity, 0.5, -0, 2, 0, 3, 1e-20];
  const m = readMask(makeNifti1({ values }));
  assert.deepEqual(Array.from(m.mask), [0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 1, 1]);
  assert.match(maskValuesWarning(values), /^the mask holds 8 value\(s\) other than 0 and 1 .*read as inside where > 0, outside where 0, negative or not finite$/);
  assert.equal(maskValuesWarning([0, 1, 1, 0]), '');
  // -1 outside, 1 inside: only the ones are inside.
  assert.deepEqual(Array.from(maskFromValues([-1, 1, -1, 1])), [0, 1, 0, 1]);
  assert.deepEqual(m.dims, [3, 2, 2]);
  const u8 = readMask(makeNifti1({ datatype: 2, values: [0, 1, 0, 1, 1, 1, 0, 0, 255, 0, 0, 1] }));
  assert.deepEqual(Array.from(u8.mask), [0, 1, 0, 1, 1, 1, 0, 0, 1, 0, 0, 1]);
});

test('thresholdMask on a synthetic magnitude: sphere recovered despite hot voxels, noise and NaN', () => {
  const n = 32;
  const mag = new Float32Array(n * n * n);
  const truth = new Uint8Array(mag.length);
  let seed = 7;
  const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
  for (let z = 0; z < n; z++) for (let y = 0; y < n; y++) for (let x = 0; x < n; x++) {
    const i = x + n * (y + n * z);
    const inside = (x - 15.5) ** 2 + (y - 15.5) ** 2 + (z - 15.5) ** 2 < 10 ** 2;
    truth[i] = inside ? 1 : 0;
    mag[i] = inside ? 80 + 40 * rand() : 5 * rand(); // tissue 80..120, background noise 0..5
  }
  for (let k = 0; k < 20; k++) mag[(k * 7919) % mag.length] = 1e7; // hot voxels (< 1 %)
  mag[0] = NaN;
  const mask = thresholdMask(mag); // robust max ≈ 119 → threshold ≈ 12
  for (let i = 0; i < mag.length; i++) {
    const expect = Number.isFinite(mag[i]) && (truth[i] || mag[i] > 1e6) ? 1 : 0;
    assert.equal(mask[i], expect, `voxel ${i}`);
  }
  // plain max would have been 1e7 and would have lost the sphere; 50 % threshold still keeps it
  assert.deepEqual(thresholdMask(mag, 0.5), mask);
  // percentile selection matches a sort
  const small = new Float32Array([5, 1, 4, 2, 3, 9, 8, 7, 6, 10]);
  assert.deepEqual(Array.from(thresholdMask(small, 0.5, 50)), [1, 0, 1, 0, 1, 1, 1, 1, 1, 1]); // p50 = 5 → > 2.5
  // quickselect agrees with a sort on random data with many ties
  for (let trial = 0; trial < 20; trial++) {
    const a = new Float32Array(1 + Math.floor(rand() * 3000)).map(() => 1 + Math.floor(rand() * 50));
    const sorted = Float32Array.from(a).sort();
    const p = 1 + Math.floor(rand() * 99);
    const t = 0.3 * sorted[Math.floor((p / 100) * (a.length - 1))];
    assert.deepEqual(thresholdMask(a, 0.3, p), Uint8Array.from(a, (v) => (v > t ? 1 : 0)), `trial ${trial}`);
  }
  assert.throws(() => thresholdMask(new Float32Array(10)), /robust maximum .* not > 0/);
  assert.throws(() => thresholdMask(mag, 1), RangeError);
  assert.throws(() => thresholdMask(mag, -0.1), RangeError);
  assert.throws(() => thresholdMask(new Float32Array([NaN, NaN])), /no finite voxel/);
});

// ---------------------------------------------------------------------------------------------------
// Writing

/** Header bytes that writeNifti may change (NIfTI-1 offsets), everything else must be identical. */
const PATCHED = new Set([
  ...range(70, 74), ...range(108, 120), ...range(124, 132), ...range(348, 352),
]);
function range(a, b) {
  return Array.from({ length: b - a }, (_, i) => a + i);
}

test('writeNifti → readNifti keeps header bytes, dims, pixdim, sform, qform and data exactly', async () => {
  const [b, c, d] = quat([0.48, 0.6, 0.64], -1.1);
  const srow = [-0.8, 0.1, 0.02, 91.5, 0.1, 0.9, -0.3, -120.25, 0.01, 0.3, 2.1, -70];
  const src = makeNifti1({
    datatype: 4, qformCode: 1, quatern: [b, c, d, 91.5, -120.25, -70], pixdim: [-1, 0.8, 0.9, 2.1, 3.5, 0, 0, 0],
    sformCode: 2, srow, xyztUnits: 2 + 8, intentCode: 1001, intentName: 'qsm', descrip: 'source',
  });
  const vol = readNifti(src);
  const chi = new Float32Array(12).map((_, i) => Math.fround(Math.sin(i) * 1e-3));
  for (const gzip of [false, true]) {
    const out = await writeNifti(chi, vol, { gzip, description: 'chi (ppm) from tessera' });
    assert.ok(out instanceof Uint8Array);
    assert.equal(out[0] === 0x1f && out[1] === 0x8b, gzip, 'gzip magic iff asked');
    const back = readNifti(out);
    const plain = gzip ? new Uint8Array(zlib.gunzipSync(out)) : out;
    assert.equal(plain.length, 352 + 4 * 12);
    for (let i = 0; i < 348; i++) if (!PATCHED.has(i) && !(i >= 148 && i < 228)) assert.equal(plain[i], src[i], `header byte ${i}`);
    assert.deepEqual(Array.from(back.data), Array.from(chi));
    assert.deepEqual(back.dims, vol.dims);
    assert.deepEqual(back.header.pixdim, vol.header.pixdim);
    assert.deepEqual(back.affine, vol.affine);
    assert.deepEqual(back.b0Dir, vol.b0Dir);
    for (const k of ['qform_code', 'sform_code', 'quatern_b', 'quatern_c', 'quatern_d', 'qoffset_x', 'qoffset_y', 'qoffset_z', 'srow_x', 'srow_y', 'srow_z', 'xyzt_units', 'intent_code', 'intent_name']) {
      assert.deepEqual(back.header[k], vol.header[k], k);
    }
    assert.equal(back.datatype, 16);
    assert.equal(back.header.bitpix, 32);
    assert.equal(back.header.vox_offset, 352);
    assert.equal(back.header.scl_slope, 1);
    assert.equal(back.header.scl_inter, 0);
    assert.equal(back.header.descrip, 'chi (ppm) from tessera');
    assert.equal(back.header.cal_min, Math.min(...chi));
    assert.equal(back.header.cal_max, Math.max(...chi));
  }
});

test('writeNifti keeps big-endian order, drops extensions, converts NIfTI-2 to NIfTI-1', async () => {
  const be = readNifti(makeNifti1({ datatype: 4, le: false, qformCode: 1, quatern: [0.1, 0.2, 0.3, 1, 2, 3] }));
  const data = new Float32Array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, NaN]);
  const outBE = await writeNifti(data, be);
  assert.equal(new DataView(outBE.buffer).getInt32(0, false), 348);
  const backBE = readNifti(outBE);
  assert.deepEqual(Array.from(backBE.data), Array.from(data));
  assert.deepEqual(backBE.affine, be.affine);
  assert.equal(backBE.header.cal_max, 11); // NaN ignored

  const ext = readNifti(makeNifti1({ voxOffset: 400, extension: new Uint8Array(32).fill(65) }));
  const outExt = await writeNifti(new Float32Array(12).fill(2), ext);
  assert.equal(outExt.length, 352 + 48);
  assert.deepEqual(Array.from(outExt.subarray(348, 352)), [0, 0, 0, 0]);
  assert.equal(readNifti(outExt).raw.byteLength, 352);

  const srow = [0, 0, -2, 10, 1.5, 0, 0, -20, 0, 1.25, 0, 30];
  const n2 = readNifti(makeNifti2({ sformCode: 1, srow, pixdim: [1, 1.5, 1.25, 2, 0, 0, 0, 0] }));
  const back2 = readNifti(await writeNifti(n2.data, n2));
  assert.equal(back2.header.version, 1);
  assert.deepEqual(back2.affine, n2.affine);
  assert.deepEqual(back2.voxelMm, n2.voxelMm);
  assert.deepEqual(back2.b0Dir, n2.b0Dir);
  assert.deepEqual(Array.from(back2.data), Array.from(n2.data));
});

test('writeNifti from { dims, voxelMm, affine }: sform and a matching qform; none without affine', async () => {
  const th = 0.4;
  const C = Math.fround(Math.cos(th));
  const S = Math.fround(Math.sin(th));
  // rotation about x with a left-handed flip of k (det < 0), voxel 1 x 1 x 2 mm
  const affine = [1, 0, 0, -10, 0, C, 2 * S, 20, 0, S, -2 * C, 30, 0, 0, 0, 1];
  const data = new Float32Array(2 * 3 * 4).map((_, i) => i - 5);
  const back = readNifti(await writeNifti(data, { dims: [2, 3, 4], voxelMm: [1, 1, 2], affine }));
  assert.deepEqual(back.dims, [2, 3, 4]);
  assert.deepEqual(back.voxelMm, [1, 1, 2]);
  assert.deepEqual(back.affine, affine.map(Math.fround));
  assert.equal(back.header.sform_code, 1);
  assert.equal(back.header.qform_code, 1);
  assert.equal(back.header.pixdim[0], -1);
  const qOnly = readNifti(await writeNifti(data, { dims: [2, 3, 4], voxelMm: [1, 1, 2], affine }).then((u8) => {
    new DataView(u8.buffer).setInt16(254, 0, true); // hide the sform: the qform alone must agree
    return u8;
  }));
  assert.equal(qOnly.affineSource, 'qform');
  close(qOnly.affine, back.affine, 1e-5, 'qform vs sform');
  assert.deepEqual(Array.from(back.data), Array.from(data));

  // qform derived from the affine agrees with it for 180° turns, axis permutations and flips
  // (every branch of nifti_mat44_to_quatern)
  const rots = [
    [1, 0, 0, 0, 1, 0, 0, 0, 1], [-1, 0, 0, 0, -1, 0, 0, 0, 1], [-1, 0, 0, 0, 1, 0, 0, 0, -1], [1, 0, 0, 0, -1, 0, 0, 0, -1],
    [0, 0, 1, 1, 0, 0, 0, 1, 0], [0, 1, 0, 0, 0, 1, 1, 0, 0], [0, 0, -1, -1, 0, 0, 0, 1, 0], [-1, 0, 0, 0, 1, 0, 0, 0, 1],
    [0, 1, 0, 1, 0, 0, 0, 0, 1], [0, 0, 1, 0, 1, 0, 1, 0, 0],
  ];
  for (const r of rots) {
    const vox = [0.5, 0.75, 2];
    const aff = [0, 1, 2].flatMap((i) => [...[0, 1, 2].map((j) => r[3 * i + j] * vox[j]), 10 * i - 7]).concat([0, 0, 0, 1]);
    const u8 = await writeNifti(data, { dims: [2, 3, 4], voxelMm: vox, affine: aff });
    new DataView(u8.buffer).setInt16(254, 0, true);
    const q = readNifti(u8);
    close(q.affine, aff, 1e-6, `qform for rotation ${r}`);
  }

  const bare = readNifti(await writeNifti(data, { dims: [2, 3, 4], voxelMm: [0.5, 0.5, 1] }));
  assert.equal(bare.header.sform_code, 0);
  assert.equal(bare.header.qform_code, 0);
  assert.deepEqual(bare.affine, [0.5, 0, 0, 0, 0, 0.5, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]);
  assert.deepEqual(bare.b0Dir, [0, 0, 1]);
  assert.equal(bare.header.xyzt_units, 2);

  await assert.rejects(writeNifti(new Float32Array(5), bare), /data has 5 values but like.dims 2x3x4 needs 24/);
  await assert.rejects(writeNifti(new Float64Array(24), bare), TypeError);
  await assert.rejects(writeNifti(data, { dims: [2, 3, 4], voxelMm: [1, 0, 1] }), /voxelMm/);
  await assert.rejects(writeNifti(new Float32Array(40000), { dims: [40000, 1, 1], voxelMm: [1, 1, 1] }), /32767/);
});

test('.nii.gz round trip, and the browser stream gzip paths (CompressionStream / DecompressionStream)', async () => {
  const src = makeNifti1({ datatype: 64 });
  const gz = zlib.gzipSync(src);
  const vol = readNifti(gz);
  assert.deepEqual(Array.from(vol.data), f32(TYPES[64].values));
  assert.deepEqual(Array.from((await readNiftiAsync(gz)).data), f32(TYPES[64].values));
  const written = await writeNifti(vol.data, vol, { gzip: true });
  assert.deepEqual(Array.from(readNifti(written).data), Array.from(vol.data));

  // writeNifti gzips through CompressionStream, readNiftiAsync gunzips through DecompressionStream (node ≥ 18 has both)
  assert.equal(typeof CompressionStream, 'function');
  assert.equal(written[0], 0x1f);
  assert.deepEqual(Array.from(readNifti(new Uint8Array(zlib.gunzipSync(written))).data), Array.from(vol.data));
  await assert.rejects(readNiftiAsync(gz.subarray(0, gz.length - 20)), /corrupt or truncated gzip data/);
});

// ---------------------------------------------------------------------------------------------------
// Units

test('hzToPpm and radPerSecToPpm', () => {
  assert.equal(GAMMA_BAR_MHZ_PER_T, 42.577478518); // CODATA 2018
  close(Array.from(hzToPpm(new Float32Array([42.577478518]), 1)), [1], 1e-7, '1 T');
  close(Array.from(hzToPpm(new Float32Array([127.732434, -127.732434, 0, 12.7732434]), 3)), [1, -1, 0, 0.1], 1e-7, '3 T');
  close(Array.from(hzToPpm([298.042346], 7)), [1], 1e-7, '7 T');
  const w = 2 * Math.PI * 42.577478518 * 3;
  close(Array.from(radPerSecToPpm(new Float32Array([w, -w / 2]), 3)), [1, -0.5], 1e-6, 'rad/s at 3 T');
  const out = hzToPpm(new Float32Array([1, 2]), 1.5);
  assert.ok(out instanceof Float32Array);
  for (const bad of [0, -3, NaN, Infinity, '3', undefined]) {
    assert.throws(() => hzToPpm(new Float32Array(1), bad), /B0 must be a finite field strength in tesla > 0/);
    assert.throws(() => radPerSecToPpm(new Float32Array(1), bad), /B0 must be a finite field strength in tesla > 0/);
  }
});

/** a ≡ b (mod 2π), for phases compared after a re-wrap. */
const sameAngle = (a, b, tol, msg) => a.forEach((x, i) => {
  const d = x - b[i];
  assert.ok(Math.abs(d - 2 * Math.PI * Math.round(d / (2 * Math.PI))) <= tol, `${msg}: [${i}] ${x} vs ${b[i]}`);
});
const inWrap = (xs) => xs.every((x) => x > -Math.PI - 1e-6 && x <= Math.PI + 1e-6);

test('phaseToRadians: radians kept, [0, 2π] re-wrapped, degrees, scanner integers (power of two), scale, any range', () => {
  const rad = { data: new Float32Array([-3, -1, 0, 2.5, 3.14]) };
  const r = phaseToRadians(rad);
  assert.deepEqual(Array.from(r.phase), Array.from(rad.data));
  assert.notEqual(r.phase, rad.data);
  assert.deepEqual({ units: r.units, scale: r.scale, rewrapped: r.rewrapped, range: r.range, nonFinite: r.nonFinite, notes: r.notes },
    { units: 'rad', scale: 1, rewrapped: false, range: [-3, Math.fround(3.14)], nonFinite: 0, notes: [] });
  assert.equal(phaseToRadians(rad, { units: 'rad' }).units, 'rad');

  const twoPi = phaseToRadians({ data: new Float32Array([0, 1, 3, 4, 6.28]) });
  assert.equal(twoPi.rewrapped, true);
  close(Array.from(twoPi.phase), [0, 1, 3, 4 - 2 * Math.PI, 6.28 - 2 * Math.PI], 1e-6, '[0, 2π]');
  assert.deepEqual(twoPi.notes, ['phase in [0, 6.28] rad (0…2π) re-wrapped to (-π, π]']);

  const deg = phaseToRadians({ data: new Float32Array([-180, -90, 0, 45, 179.5]) }, { units: 'deg' });
  close(Array.from(deg.phase), [-180, -90, 0, 45, 179.5].map((v) => (v * Math.PI) / 180), 1e-6, 'degrees');
  assert.deepEqual([deg.units, deg.rewrapped, deg.notes], ['deg', false, ['phase converted from degrees (× π/180)']]);
  const deg360 = phaseToRadians({ data: new Float32Array([0, 90, 270, 359]) }, { units: 'deg' });
  sameAngle(Array.from(deg360.phase), [0, 90, 270, 359].map((v) => (v * Math.PI) / 180), 1e-6, '0…360°');
  assert.ok(deg360.rewrapped && inWrap(Array.from(deg360.phase)));

  // Siemens -4096..4095: a span of 8192 = 2π, no re-wrap needed
  const siemens = new Float32Array([-4096, -2048, 0, 1, 4095]);
  const sc = phaseToRadians({ data: siemens }, { units: 'scanner' });
  assert.equal(sc.scale, Math.PI / 4096);
  close(Array.from(sc.phase), Array.from(siemens, (v) => (v * Math.PI) / 4096), 1e-7, 'Siemens');
  assert.deepEqual([sc.units, sc.rewrapped], ['scanner', false]);
  assert.deepEqual(sc.notes, ["phase from scanner integers in [-4096, 4095]: a span of 8192 values = 2π, × 0.00076699 rad"]);
  // 0..4095: 4096 = 2π, re-wrapped; an offset range (1000..5000, span 4000 → 4096) too: the same angles
  for (const [vals, span] of [[[0, 1024, 2048, 4095], 4096], [[1000, 3000, 5000], 4096], [[-20, 0, 30], 64]]) {
    const s = phaseToRadians({ data: new Float32Array(vals) }, { units: 'scanner' });
    assert.equal(s.scale, (2 * Math.PI) / span);
    sameAngle(Array.from(s.phase), vals.map((v) => (v * 2 * Math.PI) / span), 1e-6, `scanner ${vals}`);
    assert.ok(inWrap(Array.from(s.phase)));
  }

  const scaled = phaseToRadians({ data: siemens }, { scale: Math.PI / 4096 });
  assert.deepEqual(Array.from(scaled.phase), Array.from(sc.phase));
  assert.deepEqual([scaled.units, scaled.notes], ['scale', ['phase × 0.00076699 rad per stored unit']]);

  const any = phaseToRadians({ data: new Float32Array([-10, -4, 0, 7, 20]) }, { units: 'unwrapped' });
  sameAngle(Array.from(any.phase), [-10, -4, 0, 7, 20], 1e-6, 'any range');
  assert.ok(any.rewrapped && inWrap(Array.from(any.phase)));
  assert.deepEqual(any.notes, ['phase in [-10, 20] rad re-wrapped to (-π, π]']);
  const kept = phaseToRadians({ data: new Float32Array([-1, 1]) }, { units: 'unwrapped' });
  assert.deepEqual([Array.from(kept.phase), kept.rewrapped], [[-1, 1], false]);

  // in place; non-finite values pass through and are counted
  const data = new Float32Array([0, NaN, 180, Infinity]);
  const ip = phaseToRadians({ data }, { units: 'deg', inPlace: true });
  assert.equal(ip.phase, data);
  assert.deepEqual([Number.isNaN(data[1]), data[3], ip.nonFinite, ip.range], [true, Infinity, 2, [0, 180]]);
  close([data[0], data[2]], [0, Math.PI], 1e-6, 'in place');
});

test('phaseToRadians: the stored datatype; each refusal, with advice in the caller\'s words', () => {
  // Integers with no scl_slope are not radians, unless the caller says 'rad'; a slope makes them values.
  const ints = readEchoes(makeNifti1({ dim: [3, 2, 2, 1, 1, 1, 1, 1], datatype: 4, values: [-3, 0, 1, 3] }));
  assert.throws(() => phaseToRadians(ints), {
    code: 'PhaseIntegers', datatype: 'int16', min: -3, max: 3,
    message: "the phase is stored as int16 integers ([-3, 3]) with no scl_slope: that is not radians. Use units 'scanner' (the stored range is taken to span 2π, e.g. Siemens -4096…4095 → × π/4096), scale S (rad per stored unit), or units 'unwrapped' if these really are radians.",
  });
  assert.deepEqual(Array.from(phaseToRadians(ints, { units: 'rad' }).phase), [-3, 0, 1, 3]);
  const slope = readEchoes(makeNifti1({ dim: [3, 2, 2, 1, 1, 1, 1, 1], datatype: 4, values: [-3000, 0, 1, 3000], slope: 0.001 }));
  close(Array.from(phaseToRadians(slope).phase), [-3, 0, 0.001, 3], 1e-6, 'scaled int16');

  const cli = { subject: 'the phase p.nii', verb: 'give', names: { rad: '--phase-units rad', deg: '--phase-units deg', scanner: '--phase-units scanner', scale: '--phase-scale', field: '--field' } };
  const page = { subject: 'The phase', verb: 'choose', names: { rad: '“radians”', deg: '“degrees”', scanner: '“scanner integers”', unwrapped: '“any range”', field: 'a field → χ network' } };
  // The refusal carries numbers (code, stored range); the words come from phrasePhaseRefusal with the caller's table.
  const refused = (vals, { subject, verb, names, ...conversion }, message, code = 'PhaseNotRadians') => assert.throws(
    () => phaseToRadians({ data: new Float32Array(vals) }, conversion),
    (e) => {
      assert.ok(e instanceof PhaseRefusal && isPhaseUnitsRefusal(e));
      assert.deepEqual([e.code, e.min, e.max], [code, Math.min(...f32(vals)), Math.max(...f32(vals))]);
      assert.equal(phrasePhaseRefusal(e, subject ? { subject, verb, names } : undefined), message);
      if (!subject) assert.equal(e.message, message); // the API's own words
      return true;
    },
  );
  const head = (who, span, via = '') => `${who} spans ${span}${via}, outside [-π, π]: a wrapped phase must be in radians. `;
  // degrees?
  refused([-180, 179.99], cli, head('the phase p.nii', '[-180, 179.99]') + 'It looks like degrees: give --phase-units deg, or convert the file to radians (× π/180).');
  refused([-180, 179.99], page, head('The phase', '[-180, 179.99]') + 'It looks like degrees: choose “degrees”, or convert the file to radians (× π/180).');
  // scanner integers? (the page offers no scale: its advice does not name one)
  refused([-4096, 4095], cli, head('the phase p.nii', '[-4096, 4095]') +
    'It looks like raw scanner integers (e.g. Siemens -4096…4095): give --phase-units scanner (the stored range is taken to span 2π), or --phase-scale S (rad per stored unit, π/4096 = 0.000767), or convert the file to radians.');
  refused([-4096, 4095], page, head('The phase', '[-4096, 4095]') +
    'It looks like raw scanner integers (e.g. Siemens -4096…4095): choose “scanner integers” (the stored range is taken to span 2π), or convert the file to radians.');
  // radians with an offset? (the CLI has no any-range option)
  refused([-1, 5.5], page, head('The phase', '[-1, 5.5]') + 'If it is in radians with an offset, choose “any range” (the phase is re-wrapped, which the network does not mind); otherwise convert it to radians.');
  refused([-1, 5.5], cli, head('the phase p.nii', '[-1, 5.5]') + 'If it is in radians with an offset, wrap it into [-π, π] first; otherwise convert it to radians, or give --phase-scale S (rad per stored unit).');
  // unwrapped, or a field map?
  refused([-400.5, 900], page, head('The phase', '[-400.5, 900]') +
    'If it is an unwrapped phase in radians, choose “any range” (the phase is re-wrapped, which the network does not mind); if it is a field map (Hz or ppm), choose a field → χ network instead.');
  // an explicit conversion that does not land in [-π, π] or [0, 2π]
  refused([-4096, 4095], { ...cli, units: 'deg' }, head('the phase p.nii', '[-4096, 4095]', ', which --phase-units deg maps to [-71.4887, 71.4712] rad') +
    'It looks like raw scanner integers (e.g. Siemens -4096…4095): give --phase-units scanner (the stored range is taken to span 2π), or --phase-scale S (rad per stored unit, π/4096 = 0.000767), or convert the file to radians.');
  refused([-170.5, 350], { ...page, units: 'deg' }, head('The phase', '[-170.5, 350]', ', which “degrees” maps to [-2.97579, 6.10865] rad') +
    'If it is an unwrapped phase in radians, choose “any range” (the phase is re-wrapped, which the network does not mind); if it is a field map (Hz or ppm), choose a field → χ network instead.');
  refused([0, 1000.5], { ...cli, scale: 0.1 }, head('the phase p.nii', '[0, 1000.5]', ', which --phase-scale 0.1 maps to [0, 100.05] rad') + 'Check the conversion (--phase-scale: rad per stored unit).');
  // scanner units that cannot be
  refused([-30.5, 40], { ...cli, units: 'scanner' }, 'the phase p.nii holds non-integer values ([-30.5, 40]): not scanner integers. It looks like degrees: give --phase-units deg, or convert the file to radians (× π/180).', 'PhaseNotIntegers');
  refused([-3, 3], { ...page, units: 'scanner' }, 'The phase spans [-3, 3]: too narrow for scanner integers spanning 2π (is it already in radians? then choose “radians”).', 'PhaseTooNarrow');
  // default words
  refused([-180, 90], {}, head('the phase', '[-180, 90]') + "It looks like degrees: use units 'deg', or convert the file to radians (× π/180).");
  // nothing finite
  assert.throws(() => phaseToRadians({ data: new Float32Array([NaN, Infinity]) }), (e) => {
    assert.deepEqual([e.code, isPhaseUnitsRefusal(e), e.message], ['PhaseNoFinite', false, 'the phase holds no finite value.']);
    assert.equal(phrasePhaseRefusal(e, page), 'The phase holds no finite value.');
    return true;
  });
  // the numbers behind a refusal, for callers that phrase it their own way
  assert.throws(() => phaseToRadians({ data: new Float32Array([-4096, 0, 4095]) }, { units: 'deg' }), {
    code: 'PhaseNotRadians', min: -4096, max: 4095, whole: true, units: 'deg', scale: Math.PI / 180, lo: (-4096 * Math.PI) / 180, hi: (4095 * Math.PI) / 180,
  });
  // the caller's mistakes
  assert.throws(() => phaseToRadians({ data: new Float32Array(1) }, { units: 'grad' }), { name: 'RangeError', message: "phaseToRadians: unknown phase units 'grad' (rad, deg, scanner, unwrapped)" });
  assert.throws(() => phaseToRadians({ data: new Float32Array(1) }, { units: 'deg', scale: 2 }), /give units or scale, not both/);
  for (const bad of [0, NaN, Infinity, '2']) assert.throws(() => phaseToRadians({ data: new Float32Array(1) }, { scale: bad }), /scale must be a finite number != 0/);
  assert.throws(() => phaseToRadians(new Float32Array(1)), /img\.data must be a Float32Array/);
  assert.throws(() => phaseToRadians({ data: [1] }, { inPlace: true }), /inPlace needs img\.data to be a Float32Array/);
});

// ---------------------------------------------------------------------------------------------------
// Browser code path

test('browser code path (no node:zlib): gzip written with CompressionStream, read with nifti-reader-js', () => {
  // A child node process with `window` defined makes nifti.js take its browser branches.
  const url = new URL('./nifti.js', import.meta.url).href;
  const script = `
    globalThis.window = globalThis;
    const m = await import(${JSON.stringify(url)});
    const data = new Float32Array([1, 2, 3, 4, 5, 6, 7, 8.5]);
    const gz = await m.writeNifti(data, { dims: [2, 2, 2], voxelMm: [1, 1, 1] }, { gzip: true });
    const back = m.readNifti(gz);
    const backAsync = await m.readNiftiAsync(gz);
    let err = '';
    try { m.readNifti(gz.subarray(0, gz.length - 40)); } catch (e) { err = e.message; }
    console.log(JSON.stringify({ magic: [gz[0], gz[1]], data: Array.from(back.data), dataAsync: Array.from(backAsync.data), err }));
  `;
  const out = JSON.parse(execFileSync(process.execPath, ['--no-experimental-fetch', '--input-type=module', '-e', script], { encoding: 'utf8' }));
  assert.deepEqual(out.magic, [0x1f, 0x8b]);
  assert.deepEqual(out.data, [1, 2, 3, 4, 5, 6, 7, 8.5]);
  assert.deepEqual(out.dataAsync, out.data);
  assert.match(out.err, /corrupt or truncated gzip data/);
});

test('a node Buffer (whose slice() does not copy) reads like a plain Uint8Array', async () => {
  const { writeNifti: write, readNifti: read } = await import('./nifti.js');
  const data = new Float32Array(4 * 3 * 2).map((_, i) => i + 0.5);
  const bytes = await write(data, { dims: [4, 3, 2], voxelMm: [1, 1, 2] });
  const padded = Buffer.concat([Buffer.alloc(7), Buffer.from(bytes)]).subarray(7); // offset inside a pool
  const a = read(bytes), b = read(padded);
  assert.deepEqual(b.data, a.data);
  assert.equal(b.raw.byteLength, a.raw.byteLength);
});
