#!/usr/bin/env node
// Stacks the echoes of a BIDS multi-echo series (one 3D NIfTI per echo, _echo-<n>) into the one 4D NIfTI
// (echoes along the 4th dim) that `tessera-qsm invert --phase` / `--magnitude` take. The stored values are copied
// byte for byte after the first echo's header (datatype, scl_slope/scl_inter, affine and extensions kept; only
// dim[0] = 4 and dim[4] = echoes change), so the phase-unit rules see exactly the scanner's values. The echoes
// must agree on dims, datatype, byte order, scaling and geometry; otherwise it is refused by name.
// The output is written as a temp file and renamed.
//
//   node cohort/lib/stack-echoes.js --out stacked.nii.gz echo1.nii.gz echo2.nii.gz ...
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const { readNifti } = await import(pathToFileURL(path.join(root, 'bindings/js/index.js')).href);

export class StackError extends Error {}

/** One echo's file: {file, u8 (decompressed bytes), h (header), affine}. */
export function read(file) {
  let bytes;
  try {
    bytes = fs.readFileSync(file);
  } catch (e) {
    throw new StackError(`could not read the echo ${file}: ${e.code === 'ENOENT' ? 'no such file' : e.message}`);
  }
  const raw = bytes[0] === 0x1f && bytes[1] === 0x8b ? zlib.gunzipSync(bytes) : bytes;
  const u8 = new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength).slice();
  let nii;
  try {
    nii = readNifti(u8);
  } catch (e) {
    throw new StackError(`the echo ${file} is not a 3D NIfTI volume: ${e.message}`);
  }
  return { file, u8, h: nii.header, affine: nii.affine };
}

/** The stacked 4D NIfTI bytes (uncompressed) of the echoes in order. */
export function stack(echoes) {
  const first = echoes[0];
  const h = first.h;
  const voxels = h.dim[1] * h.dim[2] * h.dim[3];
  const dataBytes = voxels * (h.bitpix / 8);
  for (const e of echoes.slice(1)) {
    const g = e.h;
    const differ = [];
    if ([1, 2, 3].some((i) => g.dim[i] !== h.dim[i])) differ.push(`dims ${g.dim.slice(1, 4).join('×')} vs ${h.dim.slice(1, 4).join('×')}`);
    if (g.datatype !== h.datatype) differ.push(`datatype ${g.datatype} vs ${h.datatype}`);
    if (g.littleEndian !== h.littleEndian) differ.push('byte order');
    if (!Object.is(g.scl_slope, h.scl_slope) || !Object.is(g.scl_inter, h.scl_inter)) differ.push(`scaling (scl_slope ${g.scl_slope}, scl_inter ${g.scl_inter} vs ${h.scl_slope}, ${h.scl_inter})`);
    if ([1, 2, 3].some((i) => Math.abs(g.pixdim[i] - h.pixdim[i]) > 1e-5 * Math.abs(h.pixdim[i]))) differ.push('voxel size');
    if (e.affine.some((v, k) => Math.abs(v - first.affine[k]) > 1e-4)) differ.push('affine');
    if (differ.length) throw new StackError(`the echoes ${first.file} and ${e.file} differ in ${differ.join(', ')}: they must be one acquisition`);
  }
  const offset = Math.round(h.vox_offset);
  const out = new Uint8Array(offset + echoes.length * dataBytes);
  out.set(first.u8.subarray(0, offset));
  const dv = new DataView(out.buffer);
  if (h.version === 1) {
    dv.setInt16(40, 4, h.littleEndian);
    dv.setInt16(48, echoes.length, h.littleEndian);
  } else {
    dv.setBigInt64(16, 4n, h.littleEndian);
    dv.setBigInt64(16 + 32, BigInt(echoes.length), h.littleEndian);
  }
  echoes.forEach((e, k) => {
    const o = Math.round(e.h.vox_offset);
    if (e.u8.length < o + dataBytes) throw new StackError(`the echo ${e.file} is truncated`);
    out.set(e.u8.subarray(o, o + dataBytes), offset + k * dataBytes);
  });
  return out;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const i = args.indexOf('--out');
  let code = 0;
  try {
    if (i < 0 || !args[i + 1]) throw new StackError('usage: stack-echoes.js --out OUT.nii[.gz] ECHO1.nii[.gz] ECHO2.nii[.gz] ...');
    const out = args[i + 1];
    const files = args.filter((_, k) => k !== i && k !== i + 1);
    if (!files.length) throw new StackError('no echo given');
    let bytes = stack(files.map(read));
    if (/\.gz$/.test(out)) bytes = zlib.gzipSync(bytes, { level: 6 });
    const tmp = path.join(path.dirname(path.resolve(out)), `.${path.basename(out)}.${process.pid}.partial`);
    fs.mkdirSync(path.dirname(path.resolve(out)), { recursive: true });
    try {
      fs.writeFileSync(tmp, bytes);
      fs.renameSync(tmp, out);
    } finally {
      fs.rmSync(tmp, { force: true });
    }
  } catch (e) {
    process.stderr.write(`error: ${e instanceof StackError ? e.message : e.stack}\n`);
    code = 1;
  }
  process.exit(code);
}
