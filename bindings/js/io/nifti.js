// NIfTI-1 / NIfTI-2 input and output for Tessera, in node, browsers and browser bundles.
//
//   readNifti(bytes)            → Volume (volume.js) + { header, datatype, affineSource, b0DirSource, raw }
//   readNiftiAsync(bytes)       → same, gunzipping .nii.gz with DecompressionStream where there is one
//   readMask(bytes)             → readNifti(...) plus mask: Uint8Array
//   readEchoes(bytes)           → 3D or 4D (echoes along dim 4): readNifti's 3D result, data of every echo, echoes
//   readEchoesAsync(bytes)      → same, gunzipping like readNiftiAsync
//   thresholdMask(mag, 0.1)     → Uint8Array mask from a magnitude image
//   writeNifti(data, like, {})  → Promise<Uint8Array> (NIfTI-1, float32, optionally gzipped)
//   hzToPpm / radPerSecToPpm    → field-map unit conversions
//   phaseToRadians(img, {})     → (phase-units.js) wrapped phase in radians, or a structured refusal
//
// Headers and image bytes are read with nifti-reader-js (readHeader, readImage; its decompress, fflate, gunzips
// synchronously); this module adds what it lacks: the checks and refusals in words (datatype, truncation,
// .hdr/.img pairs, 5D+), scl_slope/scl_inter, the affine rule (sform, else qform, else pixdim) and the B0
// direction, 4D echoes, and writing. Nothing here imports a node built-in: .nii.gz is written with
// CompressionStream (node >= 18 and browsers), and read asynchronously with DecompressionStream.
//
// Voxel order everywhere is the NIfTI order: x fastest, then y, then z (index = x + nx*(y + ny*z)).

import { readHeader, readImage, decompress } from 'nifti-reader-js';
import { makeVolume } from './volume.js';
import { valueStats } from './phase-units.js';
import { maskFromValues, maskValuesWarning } from './mask-values.js';

export { maskFromValues, maskValuesWarning };

export { phaseToRadians, phaseDifferenceToRadians } from './phase-units.js';

const HOST_LE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * Gyromagnetic ratio of ¹H divided by 2π, in MHz/T (equivalently Hz per ppm per tesla), CODATA 2018. Defined in C++
 * (tessera/common/physics.h); kept here because this module loads without wasm; value-types.test.js holds them equal.
 */
export const GAMMA_BAR_MHZ_PER_T = 42.577478518;

/** NIfTI datatype codes this module reads, with their byte size and typed-array constructor. */
const DATATYPES = {
  2: { bytes: 1, Array: Uint8Array },
  4: { bytes: 2, Array: Int16Array },
  8: { bytes: 4, Array: Int32Array },
  16: { bytes: 4, Array: Float32Array },
  64: { bytes: 8, Array: Float64Array },
  256: { bytes: 1, Array: Int8Array },
  512: { bytes: 2, Array: Uint16Array },
  768: { bytes: 4, Array: Uint32Array },
};

/** Names of the NIfTI datatypes this module does not read, for error messages. */
const UNSUPPORTED_DATATYPES = {
  0: 'unknown', 1: 'binary (1 bit)', 32: 'complex64', 128: 'rgb24', 1024: 'int64', 1280: 'uint64',
  1536: 'float128', 1792: 'complex128', 2048: 'complex256', 2304: 'rgba32',
};

// ---------------------------------------------------------------------------------------------------
// Reading

/**
 * Reads a single-file NIfTI-1 or NIfTI-2 volume (.nii, or .nii.gz detected by the gzip magic 1f 8b).
 * Precondition: `bytes` is an ArrayBuffer or a Uint8Array (a node Buffer is fine) holding the whole file.
 * Precondition: the volume is 3D, or 4D+ with a single volume (dim[4..7] all 1); otherwise an Error says so.
 * Precondition: the datatype is uint8, int8, int16, uint16, int32, uint32, float32 or float64.
 *
 * Returns a Volume (volume.js: dims, voxelMm, affine, b0Dir, data, echoes = 1) with
 *   header    parsed header, nifti1.h field names (dim, pixdim, qform_code, srow_x, ...), plus version (1|2)
 *             and littleEndian
 *   dims      [nx, ny, nz]
 *   voxelMm   [vx, vy, vz] = |pixdim[1..3]| converted to mm from the xyzt_units spatial unit
 *             (metre ×1000, micron ×0.001, mm or unknown ×1)
 *   data      Float32Array (own copy), x fastest; value*scl_slope + scl_inter (in double, rounded once)
 *             when scl_slope is finite and != 0; int32/uint32/float64 values are rounded to float32
 *   datatype  the stored NIfTI datatype code (e.g. 4 for int16)
 *   affine    number[16], row-major 4x4 voxel index → world, in the file's spatial units: the sform when
 *             sform_code > 0, else the qform when qform_code > 0, else diag(pixdim[1..3]) (NIfTI method 1)
 *   affineSource 'sform' | 'qform' | 'pixdim'
 *   b0Dir     [bx, by, bz], unit vector: the scanner z axis (the B0 direction) expressed in the voxel axes.
 *             With U = the 3x3 part of the chosen transform with each column normalised to unit length
 *             (the voxel axes as world directions, voxel size removed), b0Dir = normalise(U⁻¹·[0,0,1]ᵀ),
 *             i.e. the third column of U⁻¹; for an orthonormal U (any rotation, with or without the qfac
 *             flip) that is exactly the third row of U. The transform used is the one in scanner
 *             coordinates when there is one: the sform if sform_code = 1 (NIFTI_XFORM_SCANNER_ANAT),
 *             else the qform if qform_code = 1, else the same transform as `affine`; with neither sform
 *             nor qform, or a singular one, b0Dir = [0, 0, 1]. The sign is immaterial to the dipole kernel.
 *   b0DirSource 'sform' | 'qform' | 'default'
 *   raw       ArrayBuffer: the first vox_offset bytes of the (decompressed) file, header plus extensions
 * @param {ArrayBuffer|Uint8Array} bytes
 */
export function readNifti(bytes) {
  return decode(unzipSync(bytes, 'readNifti'));
}

/**
 * Same as readNifti, but gunzips .nii.gz with DecompressionStream where there is one (native zlib: faster than
 * readNifti's fflate, and off the JS thread in browsers).
 * Precondition: as readNifti.
 * @param {ArrayBuffer|Uint8Array} bytes
 */
export async function readNiftiAsync(bytes) {
  return decode(await unzipAsync(bytes, 'readNiftiAsync'));
}

/**
 * What a NIfTI file's header says, read before its image: for planning a run (and refusing one) from the files'
 * headers alone. bytes: the file's first bytes, decompressed (a .nii.gz's inflated prefix), at least the header.
 * multiEcho: a 4D file's 4th dim is its echoes (readEchoes), else the file must hold one 3D volume (readNifti).
 * Returns {dims, echoes, datatype, voxelMm, affine, affineSource, b0Dir, b0DirSource, version, voxOffset, imageBytes}
 * with readNifti's meanings; the same refusals as readNifti for the header (dims, datatype, vox_offset, voxel size).
 * @param {ArrayBuffer|Uint8Array} bytes
 */
export function readNiftiHeader(bytes, { multiEcho = true } = {}) {
  const u8 = toUint8(bytes, 'readNiftiHeader');
  if (isGzip(u8)) throw new Error('readNiftiHeader: the bytes are gzip-compressed: give the inflated prefix of the file');
  const d = describe(u8, multiEcho);
  return {
    dims: d.dims, echoes: d.echoes, datatype: d.h.datatype, voxelMm: d.voxelMm, affine: d.affine, affineSource: d.affineSource,
    b0Dir: d.b0Dir, b0DirSource: d.b0DirSource, version: d.h.version, voxOffset: d.voxOffset, imageBytes: d.need,
  };
}

/**
 * Reads a mask volume: readNifti's result plus `mask`, 1 where the (scaled) value is finite and != 0, else 0.
 * Precondition: as readNifti.
 * @param {ArrayBuffer|Uint8Array} bytes
 */
export function readMask(bytes) {
  const vol = readNifti(bytes);
  return { ...vol, mask: maskFromValues(vol.data) };
}

/**
 * Reads a NIfTI of one or more echoes: 3D, or 4D with the echoes along the 4th dimension.
 * Precondition: as readNifti, except that dim[4] may be > 1 (the echoes); dim[5..7] must be 1 (else an Error).
 * Precondition: the file holds all dim[4] volumes (else "truncated data").
 *
 * Returns readNifti's result for one 3D volume (dims, voxelMm, affine, b0Dir, ... of every echo), with
 *   data      Float32Array of nx·ny·nz·echoes values: echo after echo, each x fastest, scaled as readNifti
 *   echoes    dim[4] (1 for a 3D file)
 * With echoes > 1, header.dim and raw say 3D (dim[0] = 3, dim[4..7] = 1), so writeNifti(χ, result) writes
 * a 3D output with the input's geometry; with one volume the result is readNifti's, plus echoes: 1.
 * @param {ArrayBuffer|Uint8Array} bytes
 */
export function readEchoes(bytes) {
  return decode(unzipSync(bytes, 'readEchoes'), true);
}

/**
 * Same as readEchoes, but in browsers gunzips .nii.gz like readNiftiAsync.
 * Precondition: as readEchoes.
 * @param {ArrayBuffer|Uint8Array} bytes
 */
export async function readEchoesAsync(bytes) {
  return decode(await unzipAsync(bytes, 'readEchoesAsync'), true);
}

/**
 * Builds a brain/object mask by thresholding a magnitude image at a fraction of its robust maximum.
 * Precondition: `magnitude` is a Float32Array (any numeric array-like works) with at least one finite voxel.
 * Precondition: 0 <= fraction < 1; 0 < percentile <= 100.
 * Precondition: the robust maximum is > 0 (an all-zero or all-negative image throws).
 *
 * The robust maximum is the `percentile`-th percentile (default 99) of the finite voxel values, taken
 * as the value at sorted position floor(percentile/100 · (n − 1)) among the n finite values (no
 * interpolation), so a few hot voxels do not set the scale. mask[i] = 1 where magnitude[i] is finite
 * and magnitude[i] > fraction · robustMax, else 0. No morphology (hole filling, erosion, largest
 * component) is applied.
 * @param {Float32Array} magnitude
 * @param {number} [fraction=0.1]
 * @param {number} [percentile=99]
 * @returns {Uint8Array}
 */
export function thresholdMask(magnitude, fraction = 0.1, percentile = 99) {
  if (!magnitude || typeof magnitude.length !== 'number') throw new TypeError('thresholdMask: magnitude must be a Float32Array');
  if (typeof fraction !== 'number' || !Number.isFinite(fraction) || fraction < 0 || fraction >= 1) {
    throw new RangeError(`thresholdMask: fraction must be a number in [0, 1), got ${fraction}`);
  }
  if (typeof percentile !== 'number' || !(percentile > 0 && percentile <= 100)) {
    throw new RangeError(`thresholdMask: percentile must be in (0, 100], got ${percentile}`);
  }
  const n = magnitude.length;
  const finite = new Float32Array(n);
  let m = 0;
  for (let i = 0; i < n; i++) {
    const v = magnitude[i];
    if (Number.isFinite(v)) finite[m++] = v;
  }
  if (m === 0) throw new Error('thresholdMask: the magnitude image has no finite voxel');
  const k = Math.floor((percentile / 100) * (m - 1));
  const robustMax = quickselect(finite.subarray(0, m), k);
  if (!(robustMax > 0)) {
    throw new Error(`thresholdMask: robust maximum (${percentile}th percentile) is ${robustMax}, not > 0: is this a magnitude image?`);
  }
  const t = fraction * robustMax;
  const mask = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    const v = magnitude[i];
    mask[i] = Number.isFinite(v) && v > t ? 1 : 0;
  }
  return mask;
}

// ---------------------------------------------------------------------------------------------------
// Writing

/**
 * Writes a float32 NIfTI-1 file (datatype 16, bitpix 32, vox_offset 352, no extensions).
 * Precondition: `data` is a Float32Array of nx·ny·nz values, x fastest, with [nx, ny, nz] = like.dims.
 * Precondition: `like` is a readNifti/readMask result, or { dims, voxelMm (mm, > 0), affine?: number[16] }.
 * Precondition: every dimension fits NIfTI-1 (<= 32767).
 * Precondition: with gzip, CompressionStream exists (node >= 18, current browsers).
 *
 * From a NIfTI-1 readNifti result the original 348 header bytes are copied (same byte order) and only
 * datatype, bitpix, scl_slope = 1, scl_inter = 0, cal_min/cal_max (finite data range), vox_offset = 352,
 * descrip (when `description` is given) and the extension flag (0) change: dims, pixdim, qform, sform,
 * xyzt_units, intent, slice timing and the rest are kept bit for bit. From a NIfTI-2 result the same
 * fields are carried over into a little-endian NIfTI-1 header (doubles rounded to float32). From a plain
 * { dims, voxelMm, affine } a fresh little-endian header is made: xyzt_units = mm; with an affine, sform
 * = affine and qform = its rotation (qfac from the sign of the determinant), both with code 1
 * (scanner anatomical), or qform_code 0 when the affine is sheared; without one, both codes 0.
 * @param {Float32Array} data
 * @param {object} like
 * @param {{gzip?: boolean, description?: string}} [opts]
 * @returns {Promise<Uint8Array>}
 */
export async function writeNifti(data, like, { gzip = false, description } = {}) {
  if (!(data instanceof Float32Array)) throw new TypeError('writeNifti: data must be a Float32Array');
  if (!like || typeof like !== 'object') throw new TypeError('writeNifti: like must be a readNifti result or { dims, voxelMm, affine? }');
  if (description !== undefined && typeof description !== 'string') throw new TypeError('writeNifti: description must be a string');
  const dims = checkDims(like.dims, 'writeNifti: like.dims');
  const nvox = dims[0] * dims[1] * dims[2];
  if (data.length !== nvox) {
    throw new RangeError(`writeNifti: data has ${data.length} values but like.dims ${dims.join('x')} needs ${nvox}`);
  }

  let hdr; // Uint8Array(352)
  let little = true;
  if (like.header && like.raw && like.header.version === 1) {
    hdr = new Uint8Array(352);
    hdr.set(new Uint8Array(like.raw, 0, 348));
    little = like.header.littleEndian;
  } else if (like.header && like.header.version === 2) {
    hdr = buildNifti1Header(like.header);
  } else {
    hdr = buildNifti1Header(freshFields(dims, like.voxelMm, like.affine));
  }

  const dv = new DataView(hdr.buffer);
  const [lo, hi] = finiteRange(data);
  dv.setInt16(70, 16, little); // datatype float32
  dv.setInt16(72, 32, little); // bitpix
  dv.setFloat32(108, 352, little); // vox_offset
  dv.setFloat32(112, 1, little); // scl_slope
  dv.setFloat32(116, 0, little); // scl_inter
  dv.setFloat32(124, hi, little); // cal_max
  dv.setFloat32(128, lo, little); // cal_min
  if (description !== undefined) writeString(hdr, 148, 80, description);
  hdr.fill(0, 348, 352); // extension flag: none

  const out = new Uint8Array(352 + 4 * nvox);
  out.set(hdr);
  if (little === HOST_LE) {
    new Float32Array(out.buffer, 352, nvox).set(data);
  } else {
    const odv = new DataView(out.buffer);
    for (let i = 0; i < nvox; i++) odv.setFloat32(352 + 4 * i, data[i], little);
  }
  if (!gzip) return out;
  if (typeof CompressionStream !== 'function') throw new Error('writeNifti: gzip output needs CompressionStream (node >= 18, current browsers)');
  return gzipStream(out);
}

// ---------------------------------------------------------------------------------------------------
// Units

/**
 * Converts a field map from Hz to ppm of the ¹H Larmor frequency: ppm = Hz / (γ̄ · B0), γ̄ = GAMMA_BAR_MHZ_PER_T.
 * Precondition: `data` is a Float32Array (any numeric array-like works); b0Tesla is finite and > 0.
 * @param {Float32Array} data
 * @param {number} b0Tesla
 * @returns {Float32Array}
 */
export function hzToPpm(data, b0Tesla) {
  return divideBy(data, GAMMA_BAR_MHZ_PER_T * checkB0(b0Tesla, 'hzToPpm'), 'hzToPpm');
}

/**
 * Converts a field map from rad/s to ppm: Hz = (rad/s) / 2π, then ppm = Hz / (γ̄ · B0), γ̄ = GAMMA_BAR_MHZ_PER_T.
 * Precondition: `data` is a Float32Array (any numeric array-like works); b0Tesla is finite and > 0.
 * Precondition: `data` is an angular frequency (rad/s), not a phase (rad): divide a phase by 2π·ΔTE first.
 * @param {Float32Array} data
 * @param {number} b0Tesla
 * @returns {Float32Array}
 */
export function radPerSecToPpm(data, b0Tesla) {
  return divideBy(data, 2 * Math.PI * GAMMA_BAR_MHZ_PER_T * checkB0(b0Tesla, 'radPerSecToPpm'), 'radPerSecToPpm');
}

// ---------------------------------------------------------------------------------------------------
// Internals

function toUint8(bytes, who) {
  // A plain view: subclasses such as node's Buffer have a slice() that does not copy.
  if (bytes instanceof Uint8Array) {
    return bytes.constructor === Uint8Array ? bytes : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  if (bytes instanceof ArrayBuffer || (typeof SharedArrayBuffer !== 'undefined' && bytes instanceof SharedArrayBuffer)) {
    return new Uint8Array(bytes);
  }
  if (ArrayBuffer.isView(bytes)) return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  throw new TypeError(`${who}: expected an ArrayBuffer or Uint8Array, got ${bytes === null ? 'null' : typeof bytes}`);
}

/**
 * The gzip magic 1f 8b. (nifti-reader-js's isCompressed takes either byte alone as gzip, so a file that merely
 * starts with 0x1f would be sent to the inflater: both bytes are checked here.)
 */
function isGzip(u8) {
  return u8.length >= 2 && u8[0] === 0x1f && u8[1] === 0x8b;
}

/**
 * The file's bytes, gunzipped synchronously (nifti-reader-js's decompress: fflate) when gzipped, checked against the
 * gzip trailer as zlib checks it. fflate sizes its output by the trailer's ISIZE and returns that whole buffer: a
 * corrupt ISIZE would allocate up to 4 GB and a truncated or corrupt stream would come back zero-padded, so the
 * ISIZE is bounded by what deflate can produce from the stream before inflating, and the CRC32 of the output is
 * checked after (a single gzip member; readNiftiAsync also reads concatenated members).
 */
function unzipSync(bytes, who) {
  const u8 = toUint8(bytes, who);
  if (!isGzip(u8)) return u8;
  if (u8.length < 18) throw new Error(`corrupt or truncated gzip data: ${u8.length} bytes, a gzip stream has at least 18`);
  if (u8[2] !== 8) throw new Error(`corrupt or truncated gzip data: compression method ${u8[2]} is not deflate (8)`);
  if (u8[3] & 0xe0) throw new Error(`corrupt or truncated gzip data: reserved header flag bits are set (FLG = ${u8[3]})`);
  const trailer = new DataView(u8.buffer, u8.byteOffset + u8.length - 8, 8);
  const crc = trailer.getUint32(0, true);
  const isize = trailer.getUint32(4, true);
  if (isize > MAX_DEFLATE_RATIO * u8.length) {
    throw new Error(`corrupt or truncated gzip data: the gzip trailer says ${isize} bytes, more than ${u8.length} compressed bytes can hold`);
  }
  let out;
  try {
    out = new Uint8Array(decompress(u8));
  } catch (e) {
    throw new Error(`corrupt or truncated gzip data: ${e.message}`);
  }
  if (out.length % 2 ** 32 !== isize) {
    throw new Error(`corrupt or truncated gzip data: inflated ${out.length} bytes, gzip trailer says ${isize} (mod 2^32)`);
  }
  if (crc32(out) !== crc) throw new Error('corrupt or truncated gzip data: the CRC32 of the inflated bytes differs from the one in the gzip trailer');
  return out;
}

/** Deflate's largest expansion (258-byte matches coded in 2 bits): a longer ISIZE is a corrupt trailer. */
const MAX_DEFLATE_RATIO = 1032;

let crcTable = null;
/** CRC-32 (IEEE 802.3, the gzip trailer's) of `u8`. */
function crc32(u8) {
  if (!crcTable) {
    crcTable = new Int32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      crcTable[n] = c;
    }
  }
  let c = -1;
  for (let i = 0; i < u8.length; i++) c = crcTable[(c ^ u8[i]) & 255] ^ (c >>> 8);
  return (c ^ -1) >>> 0;
}

/** The file's bytes, gunzipped when gzipped: DecompressionStream where there is one, else as unzipSync. */
async function unzipAsync(bytes, who) {
  const u8 = toUint8(bytes, who);
  if (!isGzip(u8)) return u8;
  return typeof DecompressionStream === 'function' ? gunzipStream(u8) : unzipSync(u8, who);
}

/** Pushes `u8` through a TransformStream (CompressionStream/DecompressionStream) and collects the output. */
async function throughStream(ts, u8) {
  const writer = ts.writable.getWriter();
  const writing = (async () => {
    await writer.write(u8);
    await writer.close();
  })();
  writing.catch(() => {}); // a failure also surfaces on the reading side
  const reader = ts.readable.getReader();
  const chunks = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    total += value.byteLength;
  }
  await writing;
  const out = new Uint8Array(total);
  let o = 0;
  for (const c of chunks) {
    out.set(c, o);
    o += c.byteLength;
  }
  return out;
}

async function gunzipStream(u8) {
  try {
    return await throughStream(new DecompressionStream('gzip'), u8);
  } catch (e) {
    throw new Error(`corrupt or truncated gzip data: ${e.message}`);
  }
}

function gzipStream(u8) {
  return throughStream(new CompressionStream('gzip'), u8);
}

function notNifti(why) {
  return new Error(`not a NIfTI file: ${why}`);
}

function readString(u8, off, len) {
  let s = '';
  for (let i = 0; i < len && u8[off + i] !== 0; i++) s += String.fromCharCode(u8[off + i]);
  return s;
}

function writeString(u8, off, len, s) {
  u8.fill(0, off, off + len);
  for (let i = 0; i < Math.min(s.length, len - 1); i++) {
    const c = s.charCodeAt(i);
    u8[off + i] = c >= 0x20 && c < 0x7f ? c : 0x3f; // printable ASCII, else '?'
  }
}

/**
 * The header of decompressed bytes with nifti1.h/nifti2.h field names (plus version, littleEndian, sizeof_hdr),
 * and nifti-reader-js's header object (for readImage). The version, size and magic are checked here, for
 * refusals that say what the file is; the fields come from nifti-reader-js's readHeader, given the header
 * bytes alone (extensions stay raw bytes: its extension parser refuses sizes other tools write).
 */
function parseHeader(u8) {
  if (u8.length < 4) throw notNifti(`only ${u8.length} bytes`);
  const dv = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
  const size = [348, 540].find((s) => dv.getInt32(0, true) === s || dv.getInt32(0, false) === s);
  if (!size) throw notNifti('the first 4 bytes (sizeof_hdr) are not 348 (NIfTI-1) or 540 (NIfTI-2)');
  const version = size === 348 ? 1 : 2;
  if (u8.length < size) throw new Error(`truncated NIfTI-${version} header: expected ${size} bytes, got ${u8.length}`);
  if (version === 1) {
    const magic = readString(u8, 344, 4);
    if (magic === 'ni1') throw new Error('NIfTI-1 header/image pair (.hdr/.img) is not supported: convert to a single .nii file');
    if (magic !== 'n+1' || u8[347] !== 0) throw notNifti('NIfTI-1 magic "n+1" missing at byte 344 (ANALYZE 7.5 is not supported)');
  } else {
    const magic = String.fromCharCode(...u8.subarray(4, 12));
    if (magic !== 'n+2\0\r\n\x1a\n') {
      if (magic.startsWith('n+2\0')) throw new Error('corrupt NIfTI-2 signature (file transferred in text mode?)');
      if (magic.startsWith('ni2\0')) throw new Error('NIfTI-2 header/image pair (.hdr/.img) is not supported: convert to a single .nii file');
      throw notNifti('NIfTI-2 magic "n+2" missing at byte 4');
    }
  }
  const lib = readHeader(u8.slice(0, size).buffer);
  for (const [name, v] of [['dim', lib.dims], ['vox_offset', [lib.vox_offset]]]) {
    if (!v.every(Number.isSafeInteger)) throw new Error(`NIfTI-${version} header: ${name} [${v.join(', ')}] is out of range`);
  }
  // srow_*: nifti-reader-js keeps them in its affine only when it prefers the sform (NIfTI-2: always).
  const srow = version === 2 ? lib.affine.slice(0, 3).map((r) => [...r]) : [0, 1, 2].map((r) => [0, 1, 2, 3].map((c) => dv.getFloat32(280 + 16 * r + 4 * c, lib.littleEndian)));
  const h = {
    version, littleEndian: lib.littleEndian, sizeof_hdr: size, magic: `n+${version}`,
    dim_info: lib.dim_info, dim: lib.dims.slice(0, 8), intent_p1: lib.intent_p1, intent_p2: lib.intent_p2, intent_p3: lib.intent_p3,
    intent_code: lib.intent_code, datatype: lib.datatypeCode, bitpix: lib.numBitsPerVoxel, slice_start: lib.slice_start,
    pixdim: lib.pixDims.slice(0, 8), vox_offset: lib.vox_offset, scl_slope: lib.scl_slope, scl_inter: lib.scl_inter,
    slice_end: lib.slice_end, slice_code: lib.slice_code, xyzt_units: lib.xyzt_units, cal_max: lib.cal_max, cal_min: lib.cal_min,
    slice_duration: lib.slice_duration, toffset: lib.toffset, descrip: lib.description, aux_file: lib.aux_file,
    qform_code: lib.qform_code, sform_code: lib.sform_code, quatern_b: lib.quatern_b, quatern_c: lib.quatern_c,
    quatern_d: lib.quatern_d, qoffset_x: lib.qoffset_x, qoffset_y: lib.qoffset_y, qoffset_z: lib.qoffset_z,
    srow_x: srow[0], srow_y: srow[1], srow_z: srow[2], intent_name: lib.intent_name,
  };
  return { h, lib };
}

/**
 * What decompressed bytes' header says, before any image byte is read: its checked dims, echoes, datatype, voxel
 * size, affine and B0 direction, where the image starts and how many bytes it holds. The bytes need hold the header only.
 */
function describe(u8, multiEcho) {
  const { h, lib } = parseHeader(u8);
  const nd = h.dim[0];
  if (!(nd >= 1 && nd <= 7)) throw new Error(`invalid NIfTI header: dim[0] = ${nd}, expected 1..7`);
  const dimAt = (i) => (i <= nd ? h.dim[i] : 1);
  const dims = [dimAt(1), dimAt(2), dimAt(3)];
  for (let i = 0; i < 3; i++) {
    if (!(dims[i] >= 1)) throw new Error(`invalid NIfTI header: dim[${i + 1}] = ${dims[i]}`);
  }
  const extra = [4, 5, 6, 7].map(dimAt).map((d) => (d >= 1 ? d : 1));
  const nvol = extra.reduce((a, b) => a * b, 1);
  const nExtra = 4 + extra.reduce((last, d, i) => (d > 1 ? i : last), 0); // highest dimension > 1
  if (multiEcho && nExtra > 4) {
    throw new Error(`expected 3D, or 4D with the echoes along the 4th dim, got ${nExtra}D (${[...dims, ...extra.slice(0, nExtra - 3)].join('×')}): dim[5..7] must be 1`);
  }
  if (!multiEcho && nvol > 1) throw new Error(`expected a 3D volume, got ${nExtra}D with ${nvol} volumes: pick one volume first`);
  const echoes = multiEcho ? extra[0] : 1;

  const dt = DATATYPES[h.datatype];
  if (!dt) {
    const name = UNSUPPORTED_DATATYPES[h.datatype];
    throw new Error(`unsupported datatype ${h.datatype}${name ? ` (${name})` : ''}: expected uint8, int8, int16, uint16, int32, uint32, float32 or float64`);
  }

  const voxOffset = Math.round(h.vox_offset);
  if (!(voxOffset >= h.sizeof_hdr)) throw new Error(`invalid NIfTI header: vox_offset ${h.vox_offset} < header size ${h.sizeof_hdr}`);
  const nvox = dims[0] * dims[1] * dims[2] * echoes; // every echo
  const need = nvox * dt.bytes;
  if (!Number.isSafeInteger(need)) {
    throw new Error(`invalid NIfTI header: dim [${h.dim.join(', ')}] describes about ${nvox.toPrecision(3)} voxels, more than any file holds`);
  }
  const unit = { 1: 1000, 2: 1, 3: 0.001 }[h.xyzt_units & 7] ?? 1;
  const voxelMm = [1, 2, 3].map((i) => Math.abs(h.pixdim[i]) * unit);
  if (!voxelMm.every((v) => Number.isFinite(v) && v > 0)) {
    throw new Error(`invalid voxel size: pixdim[1..3] = ${h.pixdim.slice(1, 4).join(', ')}`);
  }

  const sform = h.sform_code > 0 ? sformMatrix(h) : null;
  const qform = h.qform_code > 0 ? qformMatrix(h) : null;
  // A transform the header says to use (code > 0) must be numbers: a corrupt one is refused, never replaced.
  if (sform && !sform.every(Number.isFinite)) {
    throw new Error(`invalid NIfTI header: sform_code is ${h.sform_code} but srow_x/y/z hold a non-finite value (${[...h.srow_x, ...h.srow_y, ...h.srow_z].join(', ')}): fix the sform or set sform_code to 0`);
  }
  if (qform && !qform.every(Number.isFinite)) {
    throw new Error(`invalid NIfTI header: qform_code is ${h.qform_code} but quatern_b/c/d or qoffset_x/y/z hold a non-finite value: fix the qform or set qform_code to 0`);
  }
  let affine;
  let affineSource;
  if (sform) [affine, affineSource] = [sform, 'sform'];
  else if (qform) [affine, affineSource] = [qform, 'qform'];
  else {
    affine = [h.pixdim[1], 0, 0, 0, 0, h.pixdim[2], 0, 0, 0, 0, h.pixdim[3], 0, 0, 0, 0, 1];
    affineSource = 'pixdim';
  }

  let b0From = null;
  let b0DirSource = 'default';
  if (h.sform_code === 1) [b0From, b0DirSource] = [sform, 'sform'];
  else if (h.qform_code === 1) [b0From, b0DirSource] = [qform, 'qform'];
  else if (affineSource !== 'pixdim') [b0From, b0DirSource] = [affine, affineSource];
  let b0Dir = b0From ? b0DirFromAffine(b0From) : null;
  if (!b0Dir) [b0Dir, b0DirSource] = [[0, 0, 1], 'default'];

  return { h, lib, nd, dims, echoes, dt, voxOffset, nvox, need, voxelMm, affine, affineSource, b0Dir, b0DirSource };
}

/** Decodes decompressed bytes: one 3D volume, or with `multiEcho` the dim[4] volumes (echoes) one after the other. */
function decode(u8, multiEcho = false) {
  const { h, lib, nd, dims, echoes, dt, voxOffset, nvox, need, voxelMm, affine, affineSource, b0Dir, b0DirSource } = describe(u8, multiEcho);
  const have = Math.max(0, u8.length - voxOffset);
  if (have < need) {
    const of = echoes > 1 ? ` (${echoes} echoes of ${dims.join('×')})` : '';
    throw new Error(`truncated data: expected ${need} bytes of image data${of} after vox_offset ${voxOffset}, got ${have}`);
  }

  // The stored values (readImage: a copy, so aligned), byte-swapped to host order if needed. readImage takes
  // dim[1..5] and bitpix as they are: given the checked ones, it reads exactly the volumes asked for.
  Object.assign(lib, { dims: [nd, ...dims, echoes, 1, 1, 1], numBitsPerVoxel: 8 * dt.bytes, vox_offset: voxOffset });
  const whole = u8.byteOffset === 0 && u8.byteLength === u8.buffer.byteLength && u8.buffer instanceof ArrayBuffer;
  const copy = new Uint8Array(readImage(lib, whole ? u8.buffer : u8.slice().buffer));
  if (h.littleEndian !== HOST_LE && dt.bytes > 1) {
    for (let o = 0; o < need; o += dt.bytes) copy.subarray(o, o + dt.bytes).reverse();
  }
  const stored = new dt.Array(copy.buffer, 0, nvox);
  const slope = h.scl_slope;
  const inter = Number.isFinite(h.scl_inter) ? h.scl_inter : 0;
  const scaled = Number.isFinite(slope) && slope !== 0 && !(slope === 1 && inter === 0);
  let data;
  if (scaled) {
    data = new Float32Array(nvox);
    for (let i = 0; i < nvox; i++) data[i] = stored[i] * slope + inter; // in double, rounded once
  } else {
    data = stored instanceof Float32Array ? stored : Float32Array.from(stored);
  }

  const raw = u8.slice(0, voxOffset);
  if (echoes > 1) {
    // One 3D volume's header: the geometry of every echo, and what writeNifti copies for the output.
    h.dim = h.dim.map((d, i) => (i === 0 ? 3 : i >= 4 ? 1 : d));
    const rdv = new DataView(raw.buffer);
    for (const i of [0, 4, 5, 6, 7]) {
      if (h.version === 1) rdv.setInt16(40 + 2 * i, h.dim[i], h.littleEndian);
      else rdv.setBigInt64(16 + 8 * i, BigInt(h.dim[i]), h.littleEndian);
    }
  }
  return makeVolume({
    header: h, datatype: h.datatype, affineSource, b0DirSource, raw: raw.buffer,
    dims, voxelMm, affine, b0Dir, data, echoes,
  });
}

function sformMatrix(h) {
  return [...h.srow_x, ...h.srow_y, ...h.srow_z, 0, 0, 0, 1];
}

/** nifti_quatern_to_mat44 from nifti1_io.c, row-major. */
function qformMatrix(h) {
  let b = h.quatern_b;
  let c = h.quatern_c;
  let d = h.quatern_d;
  let a = 1 - (b * b + c * c + d * d);
  if (a < 1e-7) {
    a = 1 / Math.sqrt(b * b + c * c + d * d);
    b *= a;
    c *= a;
    d *= a;
    a = 0;
  } else {
    a = Math.sqrt(a);
  }
  const xd = h.pixdim[1] > 0 ? h.pixdim[1] : 1;
  const yd = h.pixdim[2] > 0 ? h.pixdim[2] : 1;
  let zd = h.pixdim[3] > 0 ? h.pixdim[3] : 1;
  if (h.pixdim[0] < 0) zd = -zd;
  return [
    (a * a + b * b - c * c - d * d) * xd, 2 * (b * c - a * d) * yd, 2 * (b * d + a * c) * zd, h.qoffset_x,
    2 * (b * c + a * d) * xd, (a * a + c * c - b * b - d * d) * yd, 2 * (c * d - a * b) * zd, h.qoffset_y,
    2 * (b * d - a * c) * xd, 2 * (c * d + a * b) * yd, (a * a + d * d - c * c - b * b) * zd, h.qoffset_z,
    0, 0, 0, 1,
  ];
}

/** normalise(U⁻¹·e_z) with U = the 3x3 part of `m` (row-major 4x4), columns normalised; null if singular. */
function b0DirFromAffine(m) {
  const U = [0, 0, 0, 0, 0, 0, 0, 0, 0];
  for (let j = 0; j < 3; j++) {
    const n = Math.hypot(m[j], m[4 + j], m[8 + j]);
    if (!(n > 0) || !Number.isFinite(n)) return null;
    for (let i = 0; i < 3; i++) U[3 * i + j] = m[4 * i + j] / n;
  }
  // third column of U⁻¹ = (row0 × row1) / det(U)
  const v = [U[1] * U[5] - U[2] * U[4], U[2] * U[3] - U[0] * U[5], U[0] * U[4] - U[1] * U[3]];
  const det = U[6] * v[0] + U[7] * v[1] + U[8] * v[2];
  if (!(Math.abs(det) > 1e-6)) return null;
  const n = Math.hypot(v[0], v[1], v[2]) * Math.sign(det);
  return v.map((x) => x / n + 0); // + 0 turns -0 into 0
}

function checkDims(dims, what) {
  if (!Array.isArray(dims) && !ArrayBuffer.isView(dims)) throw new TypeError(`${what} must be [nx, ny, nz]`);
  const d = Array.from(/** @type {ArrayLike<number>} */ (dims));
  if (d.length !== 3 || !d.every((v) => Number.isInteger(v) && v >= 1)) {
    throw new RangeError(`${what} must be three positive integers, got [${d.join(', ')}]`);
  }
  if (d.some((v) => v > 32767)) throw new RangeError(`${what} [${d.join(', ')}] exceeds the NIfTI-1 limit of 32767`);
  return d;
}

/** Header fields for a fresh file from { dims, voxelMm, affine? } (shape of parseHeader's result). */
function freshFields(dims, voxelMm, affine) {
  if (!voxelMm || voxelMm.length !== 3 || ![...voxelMm].every((v) => typeof v === 'number' && Number.isFinite(v) && v > 0)) {
    throw new RangeError(`writeNifti: like.voxelMm must be three finite numbers > 0, got ${voxelMm}`);
  }
  const h = {
    dim_info: 0, dim: [3, ...dims, 1, 1, 1, 1], intent_p1: 0, intent_p2: 0, intent_p3: 0, intent_code: 0,
    slice_start: 0, pixdim: [1, ...voxelMm, 0, 0, 0, 0], slice_end: 0, slice_code: 0, xyzt_units: 2,
    cal_max: 0, cal_min: 0, slice_duration: 0, toffset: 0, descrip: '', aux_file: '',
    qform_code: 0, sform_code: 0, quatern_b: 0, quatern_c: 0, quatern_d: 0, qoffset_x: 0, qoffset_y: 0, qoffset_z: 0,
    srow_x: [0, 0, 0, 0], srow_y: [0, 0, 0, 0], srow_z: [0, 0, 0, 0], intent_name: '',
  };
  if (affine == null) return h;
  if (affine.length !== 16 || ![...affine].every(Number.isFinite)) {
    throw new RangeError('writeNifti: like.affine must be 16 finite numbers (row-major 4x4)');
  }
  const m = [...affine];
  h.srow_x = m.slice(0, 4);
  h.srow_y = m.slice(4, 8);
  h.srow_z = m.slice(8, 12);
  h.sform_code = 1;
  const q = mat44ToQuatern(m);
  if (q) {
    Object.assign(h, q.fields);
    h.pixdim[0] = q.qfac;
    h.qform_code = 1;
  }
  return h;
}

/** nifti_mat44_to_quatern for an affine with orthogonal columns; null if sheared or singular. */
function mat44ToQuatern(m) {
  const col = (j) => [m[j], m[4 + j], m[8 + j]];
  const cols = [col(0), col(1), col(2)].map((c) => {
    const n = Math.hypot(...c);
    return n > 0 ? c.map((x) => x / n) : null;
  });
  if (cols.includes(null)) return null;
  const dot = (u, v) => u[0] * v[0] + u[1] * v[1] + u[2] * v[2];
  if (Math.abs(dot(cols[0], cols[1])) > 1e-4 || Math.abs(dot(cols[0], cols[2])) > 1e-4 || Math.abs(dot(cols[1], cols[2])) > 1e-4) {
    return null;
  }
  const [c0, c1, c2] = cols;
  const det = c0[0] * (c1[1] * c2[2] - c2[1] * c1[2]) - c1[0] * (c0[1] * c2[2] - c2[1] * c0[2]) + c2[0] * (c0[1] * c1[2] - c1[1] * c0[2]);
  const qfac = det > 0 ? 1 : -1;
  if (qfac < 0) for (let i = 0; i < 3; i++) c2[i] = -c2[i];
  const [r11, r21, r31] = c0;
  const [r12, r22, r32] = c1;
  const [r13, r23, r33] = c2;
  let a = r11 + r22 + r33 + 1;
  let b;
  let c;
  let d;
  if (a > 0.5) {
    a = 0.5 * Math.sqrt(a);
    b = (0.25 * (r32 - r23)) / a;
    c = (0.25 * (r13 - r31)) / a;
    d = (0.25 * (r21 - r12)) / a;
  } else {
    const xd = 1 + r11 - (r22 + r33);
    const yd = 1 + r22 - (r11 + r33);
    const zd = 1 + r33 - (r11 + r22);
    if (xd > 1) {
      b = 0.5 * Math.sqrt(xd);
      c = (0.25 * (r12 + r21)) / b;
      d = (0.25 * (r13 + r31)) / b;
      a = (0.25 * (r32 - r23)) / b;
    } else if (yd > 1) {
      c = 0.5 * Math.sqrt(yd);
      b = (0.25 * (r12 + r21)) / c;
      d = (0.25 * (r23 + r32)) / c;
      a = (0.25 * (r13 - r31)) / c;
    } else {
      d = 0.5 * Math.sqrt(zd);
      b = (0.25 * (r13 + r31)) / d;
      c = (0.25 * (r23 + r32)) / d;
      a = (0.25 * (r21 - r12)) / d;
    }
    if (a < 0) [b, c, d] = [-b, -c, -d];
  }
  return {
    qfac,
    fields: { quatern_b: b, quatern_c: c, quatern_d: d, qoffset_x: m[3], qoffset_y: m[7], qoffset_z: m[11] },
  };
}

/** A little-endian 352-byte NIfTI-1 header from parseHeader-shaped fields (datatype etc. patched later). */
function buildNifti1Header(h) {
  const dim = h.dim.map((d) => d);
  if (dim.some((d) => !Number.isInteger(d) || d < -32768 || d > 32767)) {
    throw new RangeError(`writeNifti: dim [${dim.join(', ')}] does not fit NIfTI-1 (int16)`);
  }
  const u8 = new Uint8Array(352);
  const dv = new DataView(u8.buffer);
  dv.setInt32(0, 348, true);
  u8[39] = h.dim_info & 0xff;
  dim.forEach((d, i) => dv.setInt16(40 + 2 * i, d, true));
  dv.setFloat32(56, h.intent_p1, true);
  dv.setFloat32(60, h.intent_p2, true);
  dv.setFloat32(64, h.intent_p3, true);
  dv.setInt16(68, h.intent_code, true);
  dv.setInt16(74, clampInt16(h.slice_start), true);
  h.pixdim.forEach((p, i) => dv.setFloat32(76 + 4 * i, p, true));
  dv.setInt16(120, clampInt16(h.slice_end), true);
  u8[122] = h.slice_code & 0xff;
  u8[123] = h.xyzt_units & 0xff;
  dv.setFloat32(132, h.slice_duration, true);
  dv.setFloat32(136, h.toffset, true);
  writeString(u8, 148, 80, h.descrip ?? '');
  writeString(u8, 228, 24, h.aux_file ?? '');
  dv.setInt16(252, h.qform_code, true);
  dv.setInt16(254, h.sform_code, true);
  [h.quatern_b, h.quatern_c, h.quatern_d, h.qoffset_x, h.qoffset_y, h.qoffset_z].forEach((v, i) => dv.setFloat32(256 + 4 * i, v, true));
  h.srow_x.forEach((v, i) => dv.setFloat32(280 + 4 * i, v, true));
  h.srow_y.forEach((v, i) => dv.setFloat32(296 + 4 * i, v, true));
  h.srow_z.forEach((v, i) => dv.setFloat32(312 + 4 * i, v, true));
  writeString(u8, 328, 16, h.intent_name ?? '');
  writeString(u8, 344, 4, 'n+1');
  return u8;
}

function clampInt16(v) {
  return Math.max(-32768, Math.min(32767, v | 0));
}

/** Smallest and largest finite value ([0, 0] when none). */
function finiteRange(data) {
  const { lo, hi } = valueStats(data);
  return lo <= hi ? [lo, hi] : [0, 0];
}


/** k-th smallest element of `a` (reorders `a` in place), Hoare-style quickselect with median-of-three. */
function quickselect(a, k) {
  let lo = 0;
  let hi = a.length - 1;
  while (hi > lo) {
    const mid = (lo + hi) >>> 1;
    // median of three as pivot
    if (a[mid] < a[lo]) swap(a, mid, lo);
    if (a[hi] < a[lo]) swap(a, hi, lo);
    if (a[hi] < a[mid]) swap(a, hi, mid);
    const pivot = a[mid];
    let i = lo;
    let j = hi;
    while (i <= j) {
      while (a[i] < pivot) i++;
      while (a[j] > pivot) j--;
      if (i <= j) {
        swap(a, i, j);
        i++;
        j--;
      }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else return a[k];
  }
  return a[k];
}

function swap(a, i, j) {
  const t = a[i];
  a[i] = a[j];
  a[j] = t;
}

function checkB0(b0, who) {
  if (typeof b0 !== 'number' || !Number.isFinite(b0) || b0 <= 0) {
    throw new RangeError(`${who}: B0 must be a finite field strength in tesla > 0, got ${b0}`);
  }
  return b0;
}

function divideBy(data, f, who) {
  if (!data || typeof data.length !== 'number' || typeof data === 'string') {
    throw new TypeError(`${who}: data must be a Float32Array`);
  }
  const out = new Float32Array(data.length);
  for (let i = 0; i < data.length; i++) out[i] = data[i] / f;
  return out;
}
