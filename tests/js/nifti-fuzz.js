// Seeded NIfTI fuzzing for the reader's tests (bindings/js/nifti.test.js, inputs.test.js, cli.test.js).
// Not a test file: it builds a few valid files byte by byte (independently of the writer under test), mutates
// them — field-targeted (dims, datatype, bitpix, vox_offset, scl, pixdim, qform/sform, extension sizes, magic),
// byte flips, truncations, insertions — and mutates gzip streams (deflate body, header flags, CRC/ISIZE
// trailer, truncation, trailing junk, a second member). Every mutation is reproducible from (seed, index).
//
//   headerCases(seed, count) → [{name, bytes}]   mutated .nii files (a few of them gzipped after mutation)
//   gzipCases(seed, count)   → [{name, bytes}]   mutated .nii.gz streams
//   refusal(e)               → null when e is a refusal the reader means (an Error with one of its messages),
//                              else a description of the crash
import zlib from 'node:zlib';
import { prng } from './onnx-build.js';

/** NIfTI-1 field offsets and types (nifti1.h). */
const N1 = {
  sizeof_hdr: [0, 'i32'], dim: [40, 'i16', 8], datatype: [70, 'i16'], bitpix: [72, 'i16'], pixdim: [76, 'f32', 8],
  vox_offset: [108, 'f32'], scl_slope: [112, 'f32'], scl_inter: [116, 'f32'], xyzt_units: [123, 'u8'],
  qform_code: [252, 'i16'], sform_code: [254, 'i16'], quatern: [256, 'f32', 6], srow: [280, 'f32', 12],
  magic: [344, 'u8', 4], extension: [348, 'u8'], esize: [352, 'i32'], ecode: [356, 'i32'],
};
/** NIfTI-2 field offsets and types (nifti2.h). */
const N2 = {
  sizeof_hdr: [0, 'i32'], magic: [4, 'u8', 8], datatype: [12, 'i16'], bitpix: [14, 'i16'], dim: [16, 'i64', 8],
  pixdim: [104, 'f64', 8], vox_offset: [168, 'i64'], scl_slope: [176, 'f64'], scl_inter: [184, 'f64'],
  qform_code: [344, 'i32'], sform_code: [348, 'i32'], quatern: [352, 'f64', 6], srow: [400, 'f64', 12],
  xyzt_units: [500, 'i32'], extension: [540, 'u8'], esize: [544, 'i32'], ecode: [548, 'i32'],
};
const SIZE = { u8: 1, i16: 2, i32: 4, f32: 4, i64: 8, f64: 8 };

function put(dv, off, type, v, le) {
  switch (type) {
    case 'u8': dv.setUint8(off, Number(v) & 255); break;
    case 'i16': dv.setInt16(off, Number(v), le); break;
    case 'i32': dv.setInt32(off, Number(v), le); break;
    case 'f32': dv.setFloat32(off, Number(v), le); break;
    case 'f64': dv.setFloat64(off, Number(v), le); break;
    case 'i64': dv.setBigInt64(off, BigInt.asIntN(64, typeof v === 'bigint' ? v : BigInt(Math.trunc(Number.isFinite(v) ? v : 0))), le); break;
    default: throw new Error(type);
  }
}

/** A valid single-file NIfTI (version 1 or 2) of float32/int16/uint8/float64 values, 3D or 4D, optional extension. */
function build({ version = 1, le = true, dims = [4, 3, 2], echoes = 1, datatype = 16, slope = 0, inter = 0, sform = true, qform = true, extension = 0 }) {
  const F = version === 1 ? N1 : N2;
  const bytesPer = { 2: 1, 4: 2, 16: 4, 64: 8 }[datatype];
  const hdr = version === 1 ? 348 : 540;
  const ext = extension ? 16 * Math.ceil((8 + extension) / 16) : 0;
  const voxOffset = hdr + 4 + ext;
  const nvox = dims[0] * dims[1] * dims[2] * echoes;
  const u8 = new Uint8Array(voxOffset + nvox * bytesPer);
  const dv = new DataView(u8.buffer);
  const f = (name, v, i = 0) => put(dv, F[name][0] + i * SIZE[F[name][1]], F[name][1], v, le);
  f('sizeof_hdr', hdr);
  if (version === 1) 'n+1\0'.split('').forEach((c, i) => f('magic', c.charCodeAt(0), i));
  else 'n+2\0\r\n\x1a\n'.split('').forEach((c, i) => f('magic', c.charCodeAt(0), i));
  [echoes > 1 ? 4 : 3, ...dims, echoes, 1, 1, 1].forEach((d, i) => f('dim', d, i));
  f('datatype', datatype);
  f('bitpix', 8 * bytesPer);
  [-1, 1.5, 1.25, 2, 0, 0, 0, 0].forEach((p, i) => f('pixdim', p, i));
  f('vox_offset', voxOffset);
  f('scl_slope', slope);
  f('scl_inter', inter);
  f('xyzt_units', 2);
  if (qform) {
    f('qform_code', 1);
    [0.1, -0.2, 0.3, 10, -20, 30].forEach((q, i) => f('quatern', q, i));
  }
  if (sform) {
    f('sform_code', 2);
    [1.5, 0.1, 0, -5, 0, 1.25, 0.2, 6, 0.05, 0, 2, 7].forEach((s, i) => f('srow', s, i));
  }
  if (ext) {
    f('extension', 1);
    f('esize', ext);
    f('ecode', 6);
    for (let i = 8; i < ext; i++) u8[hdr + 4 + i] = 0x41 + (i % 26);
  }
  const set = { 2: 'setUint8', 4: 'setInt16', 16: 'setFloat32', 64: 'setFloat64' }[datatype];
  for (let i = 0; i < nvox; i++) dv[set](voxOffset + i * bytesPer, (i % 17) - 5 + (datatype >= 16 ? 0.25 : 0), le);
  return { bytes: u8, version, le };
}

/** The valid files every mutation starts from. */
export function baseFiles() {
  return [
    build({ version: 1, le: true }),
    build({ version: 1, le: false, datatype: 4, echoes: 2, slope: 0.5, inter: 1 }),
    build({ version: 1, le: true, datatype: 2, sform: false, extension: 40 }),
    build({ version: 2, le: true, datatype: 64 }),
    build({ version: 2, le: false, datatype: 16, echoes: 3, qform: false }),
    build({ version: 1, le: true, dims: [5, 1, 3], qform: false, sform: false }),
  ];
}

// Values that break headers: zero, negatives, limits of each type, non-finite and huge floats.
const NASTY = [0, -1, 1, 2, 3, 4, 5, 7, 8, 9, 16, 255, 256, 347, 348, 349, 352, 540, 544, 1e4, 32767, -32768, 65535,
  2147483647, -2147483648, 4294967295, 2 ** 40, 2 ** 53, -(2 ** 53), NaN, Infinity, -Infinity, 1e38, -1e38, 3.4e38, 1e-38,
  1e300, -1e-300, 0.5, -0.5, 1e-7];
const NASTY64 = [2n ** 62n, -(2n ** 62n), 2n ** 53n + 1n, 2n ** 31n, 2n ** 32n + 2n, -(2n ** 63n)];

function mutateField(file, r) {
  const F = file.version === 1 ? N1 : N2;
  const names = Object.keys(F);
  const name = names[Math.floor(r() * names.length)];
  const [off, type, count = 1] = F[name];
  const i = Math.floor(r() * count);
  const at = off + i * SIZE[type];
  const bytes = file.bytes.slice();
  if (at + SIZE[type] > bytes.length) return { bytes, what: `${name}: beyond the file` };
  const dv = new DataView(bytes.buffer);
  const cur = { u8: () => dv.getUint8(at), i16: () => dv.getInt16(at, file.le), i32: () => dv.getInt32(at, file.le), f32: () => dv.getFloat32(at, file.le),
    f64: () => dv.getFloat64(at, file.le), i64: () => Number(dv.getBigInt64(at, file.le)) }[type]();
  const pick = r();
  let v;
  if (type === 'i64' && pick < 0.25) v = NASTY64[Math.floor(r() * NASTY64.length)];
  else if (pick < 0.7) v = NASTY[Math.floor(r() * NASTY.length)];
  else if (pick < 0.85) v = cur + (r() < 0.5 ? 1 : -1) * (1 + Math.floor(r() * 3));
  else v = (r() - 0.5) * 2 ** (1 + Math.floor(r() * 40));
  if (type !== 'f32' && type !== 'f64' && typeof v === 'number') v = Number.isFinite(v) ? Math.trunc(v) : 0;
  if (type === 'i16') v = ((v % 65536) + 65536) % 65536 - (((v % 65536) + 65536) % 65536 >= 32768 ? 65536 : 0);
  if (type === 'i32') v = v | 0;
  put(dv, at, type, v, file.le);
  return { bytes, what: `${name}[${i}] = ${String(v)}` };
}

function flipBytes(bytes, r, span) {
  const out = bytes.slice();
  const n = 1 + Math.floor(r() * 6);
  for (let k = 0; k < n; k++) out[Math.floor(r() * Math.min(span, out.length))] ^= 1 + Math.floor(r() * 255);
  return { bytes: out, what: `${n} byte(s) flipped` };
}

function truncate(bytes, r) {
  const n = Math.floor(r() * bytes.length);
  return { bytes: bytes.slice(0, n), what: `cut to ${n} bytes` };
}

function insert(bytes, r) {
  const at = Math.floor(r() * bytes.length);
  const junk = Uint8Array.from({ length: 1 + Math.floor(r() * 64) }, () => Math.floor(r() * 256));
  const out = new Uint8Array(bytes.length + junk.length);
  out.set(bytes.subarray(0, at));
  out.set(junk, at);
  out.set(bytes.subarray(at), at + junk.length);
  return { bytes: out, what: `${junk.length} byte(s) inserted at ${at}` };
}

const gzip = (u8) => new Uint8Array(zlib.gzipSync(u8));

/**
 * `count` mutated files from the base files: mostly field-targeted (1–3 fields at once), the rest byte flips in
 * the header, truncations and insertions; every tenth is gzipped after the mutation (the reader gunzips first).
 */
export function headerCases(seed, count) {
  const r = prng(seed);
  const bases = baseFiles();
  const out = [];
  for (let k = 0; k < count; k++) {
    const base = bases[k % bases.length];
    const kind = r();
    let m;
    if (kind < 0.6) {
      const n = 1 + Math.floor(r() * 3);
      let cur = base;
      const whats = [];
      for (let j = 0; j < n; j++) {
        m = mutateField(cur, r);
        whats.push(m.what);
        cur = { ...base, bytes: m.bytes };
      }
      m = { bytes: cur.bytes, what: whats.join(', ') };
    } else if (kind < 0.78) m = flipBytes(base.bytes, r, base.version === 1 ? 352 : 544);
    else if (kind < 0.92) m = truncate(base.bytes, r);
    else m = insert(base.bytes, r);
    const zipped = k % 10 === 9;
    out.push({ name: `header #${k} (base ${k % bases.length}, NIfTI-${base.version} ${base.le ? 'LE' : 'BE'}${zipped ? ', gzipped' : ''}): ${m.what}`, bytes: zipped ? gzip(m.bytes) : m.bytes });
  }
  return out;
}

/**
 * `count` mutated gzip streams of the base files: flips in the deflate body or the 10-byte header (flags such as
 * FEXTRA/FNAME/FHCRC with nothing behind them, the method byte), a wrong CRC32 or ISIZE, truncation (in the
 * header, body or trailer), trailing junk, a second gzip member, and a valid stream of a mutated header.
 */
export function gzipCases(seed, count) {
  const r = prng(seed);
  const bases = baseFiles();
  const out = [];
  for (let k = 0; k < count; k++) {
    const base = bases[k % bases.length];
    const z = gzip(base.bytes);
    const kind = Math.floor(r() * 8);
    let m;
    const body = (u) => {
      const o = u.slice();
      const n = 1 + Math.floor(r() * 4);
      for (let j = 0; j < n; j++) o[10 + Math.floor(r() * (o.length - 18))] ^= 1 + Math.floor(r() * 255);
      return { bytes: o, what: `${n} deflate byte(s) flipped` };
    };
    if (kind === 0) m = body(z);
    else if (kind === 1) {
      const o = z.slice();
      const at = Math.floor(r() * 10);
      o[at] = at === 3 ? 1 << Math.floor(r() * 8) : Math.floor(r() * 256);
      m = { bytes: o, what: `gzip header byte ${at} = ${o[at]}` };
    } else if (kind === 2) {
      const o = z.slice();
      const at = o.length - 8 + Math.floor(r() * 8);
      o[at] ^= 1 + Math.floor(r() * 255);
      m = { bytes: o, what: `trailer byte ${at - o.length + 8} (${at < o.length - 4 ? 'CRC32' : 'ISIZE'}) changed` };
    } else if (kind === 3) {
      const n = r() < 0.2 ? Math.floor(r() * 12) : Math.floor(r() * z.length);
      m = { bytes: z.slice(0, n), what: `cut to ${n} of ${z.length} bytes` };
    } else if (kind === 4) {
      const junk = Uint8Array.from({ length: 1 + Math.floor(r() * 32) }, () => Math.floor(r() * 256));
      const o = new Uint8Array(z.length + junk.length);
      o.set(z);
      o.set(junk, z.length);
      m = { bytes: o, what: `${junk.length} junk byte(s) after the stream` };
    } else if (kind === 5) {
      const second = gzip(base.bytes.subarray(0, 1 + Math.floor(r() * 64)));
      const o = new Uint8Array(z.length + second.length);
      o.set(z);
      o.set(second, z.length);
      m = { bytes: o, what: 'a second gzip member' };
    } else if (kind === 6) {
      const inner = mutateField(base, r);
      m = { bytes: gzip(inner.bytes), what: `valid gzip of ${inner.what}` };
    } else {
      m = truncate(gzip(base.bytes.subarray(0, Math.floor(r() * base.bytes.length))), r);
      m.what = `gzip of a cut file, then ${m.what}`;
    }
    out.push({ name: `gzip #${k} (base ${k % bases.length}): ${m.what}`, bytes: m.bytes });
  }
  return out;
}

// The reader's own refusals (bindings/js/io/nifti.js and volume.js): anything else thrown is a crash.
const REFUSALS = [
  /^not a NIfTI file: /,
  /^truncated NIfTI-[12] header: expected \d+ bytes, got \d+$/,
  /^truncated data: expected \d+ bytes of image data/,
  /^NIfTI-1 header\/image pair \(\.hdr\/\.img\) is not supported/,
  /^NIfTI-2 header\/image pair \(\.hdr\/\.img\) is not supported/,
  /^corrupt NIfTI-2 signature/,
  /^NIfTI-[12] header: \w+ \[[^\]]*\] is out of range$/,
  /^invalid NIfTI header: /,
  /^expected a 3D volume, got \d+D with \d+ volumes/,
  /^expected 3D, or 4D with the echoes along the 4th dim, got \d+D/,
  /^unsupported datatype -?\d+/,
  /^invalid voxel size: pixdim\[1\.\.3\] = /,
  /^corrupt or truncated gzip data: /,
];

/** null when `e` is one of the reader's refusals (a plain Error with a message it means), else what is wrong. */
export function refusal(e) {
  if (!(e instanceof Error)) return `threw a non-Error: ${String(e)}`;
  if (e.constructor !== Error) return `${e.name}: ${e.message}`;
  if (!REFUSALS.some((re) => re.test(e.message))) return `an unexpected message: ${e.message}`;
  return null;
}
