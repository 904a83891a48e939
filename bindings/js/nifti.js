// NIfTI-1 / NIfTI-2 input and output for Tessera, in node and in the browser.
//
//   readNifti(bytes)            → { header, dims, voxelMm, data: Float32Array, datatype, affine, b0Dir, raw, ... }
//   readNiftiAsync(bytes)       → same, decompressing .nii.gz with DecompressionStream where needed
//   readMask(bytes)             → readNifti(...) plus mask: Uint8Array
//   readEchoes(bytes)           → 3D or 4D (echoes along dim 4): readNifti's 3D result, data of every echo, echoes
//   readEchoesAsync(bytes)      → same, decompressing like readNiftiAsync
//   thresholdMask(mag, 0.1)     → Uint8Array mask from a magnitude image
//   writeNifti(data, like, {})  → Promise<Uint8Array> (NIfTI-1, float32, optionally gzipped)
//   hzToPpm / radPerSecToPpm    → field-map unit conversions
//   phaseToRadians(img, {})     → wrapped phase in radians from rad/deg/scanner units or a scale, refused with advice
//
// No node-only module is imported statically: node's zlib is loaded with a dynamic import under node
// only; in browsers .nii.gz is read with nifti-reader-js's synchronous gunzip (fflate) when that
// package resolves (bundler or import map), otherwise with DecompressionStream via readNiftiAsync,
// and written with CompressionStream.
//
// Voxel order everywhere is the NIfTI order: x fastest, then y, then z (index = x + nx*(y + ny*z)).

const isNode =
  typeof process === 'object' && process !== null && !!process.versions?.node && typeof window === 'undefined' &&
  typeof globalThis.WorkerGlobalScope === 'undefined';

/** node:zlib under node, null elsewhere. */
const nodeZlib = isNode ? await import('node:zlib') : null;

/** nifti-reader-js's synchronous decompress (fflate) in browsers when the package resolves, else null. */
const syncGunzip = isNode ? null : await import('nifti-reader-js').then((m) => m.decompress, () => null);

const HOST_LE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Gyromagnetic ratio of ¹H divided by 2π, in MHz/T (equivalently Hz per ppm per tesla). */
export const GAMMA_BAR_MHZ_PER_T = 42.577478;

/** NIfTI datatype codes this module reads, with their byte size and typed-array constructor. */
const DATATYPES = {
  2: { name: 'uint8', bytes: 1, Array: Uint8Array, get: 'getUint8' },
  4: { name: 'int16', bytes: 2, Array: Int16Array, get: 'getInt16' },
  8: { name: 'int32', bytes: 4, Array: Int32Array, get: 'getInt32' },
  16: { name: 'float32', bytes: 4, Array: Float32Array, get: 'getFloat32' },
  64: { name: 'float64', bytes: 8, Array: Float64Array, get: 'getFloat64' },
  256: { name: 'int8', bytes: 1, Array: Int8Array, get: 'getInt8' },
  512: { name: 'uint16', bytes: 2, Array: Uint16Array, get: 'getUint16' },
  768: { name: 'uint32', bytes: 4, Array: Uint32Array, get: 'getUint32' },
};

/** Names of the NIfTI datatypes this module does not read, for error messages. */
const UNSUPPORTED_DATATYPES = {
  0: 'unknown', 1: 'binary (1 bit)', 32: 'complex64', 128: 'rgb24', 1024: 'int64', 1280: 'uint64',
  1536: 'float128', 1792: 'complex128', 2048: 'complex256', 2304: 'rgba32',
};

const NIFTI1_MAGIC = 'n+1\0';
const NIFTI2_MAGIC = 'n+2\0\r\n\x1a\n';

// ---------------------------------------------------------------------------------------------------
// Reading

/**
 * Reads a single-file NIfTI-1 or NIfTI-2 volume (.nii, or .nii.gz detected by the gzip magic 1f 8b).
 * Precondition: `bytes` is an ArrayBuffer or a Uint8Array (a node Buffer is fine) holding the whole file.
 * Precondition: the volume is 3D, or 4D+ with a single volume (dim[4..7] all 1); otherwise an Error says so.
 * Precondition: the datatype is uint8, int8, int16, uint16, int32, uint32, float32 or float64.
 * Precondition: in a browser, a gzipped file needs nifti-reader-js resolvable; else use readNiftiAsync.
 *
 * Returns
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
 * Same as readNifti, but in browsers gunzips .nii.gz with DecompressionStream (no nifti-reader-js needed).
 * Precondition: as readNifti; in a browser with a gzipped file, DecompressionStream or nifti-reader-js exists.
 * @param {ArrayBuffer|Uint8Array} bytes
 */
export async function readNiftiAsync(bytes) {
  return decode(await unzipAsync(bytes, 'readNiftiAsync'));
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
 * Precondition: as readEchoes; in a browser with a gzipped file, DecompressionStream or nifti-reader-js exists.
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
 * Precondition: with gzip in a browser, CompressionStream exists.
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
  if (nodeZlib) return new Uint8Array(nodeZlib.gzipSync(out));
  if (typeof CompressionStream === 'function') return gzipStream(out);
  throw new Error('writeNifti: gzip output needs node or a browser with CompressionStream');
}

// ---------------------------------------------------------------------------------------------------
// Units

/**
 * Converts a field map from Hz to ppm of the ¹H Larmor frequency: ppm = Hz / (42.577478 · B0).
 * Precondition: `data` is a Float32Array (any numeric array-like works); b0Tesla is finite and > 0.
 * @param {Float32Array} data
 * @param {number} b0Tesla
 * @returns {Float32Array}
 */
export function hzToPpm(data, b0Tesla) {
  return divideBy(data, GAMMA_BAR_MHZ_PER_T * checkB0(b0Tesla, 'hzToPpm'), 'hzToPpm');
}

/**
 * Converts a field map from rad/s to ppm: Hz = (rad/s) / 2π, then ppm = Hz / (42.577478 · B0).
 * Precondition: `data` is a Float32Array (any numeric array-like works); b0Tesla is finite and > 0.
 * Precondition: `data` is an angular frequency (rad/s), not a phase (rad): divide a phase by 2π·ΔTE first.
 * @param {Float32Array} data
 * @param {number} b0Tesla
 * @returns {Float32Array}
 */
export function radPerSecToPpm(data, b0Tesla) {
  return divideBy(data, 2 * Math.PI * GAMMA_BAR_MHZ_PER_T * checkB0(b0Tesla, 'radPerSecToPpm'), 'radPerSecToPpm');
}

/** NIfTI integer datatype codes, by name: a phase stored so with no scl_slope is not in radians. */
const INTEGER_TYPES = { 2: 'uint8', 4: 'int16', 8: 'int32', 256: 'int8', 512: 'uint16', 768: 'uint32' };

const TWO_PI = 2 * Math.PI;
/** Radians of slack on ±π and [0, 2π] (float rounding of a stored ±π, 0.57°). */
const PHASE_TOL = 0.01;

/**
 * Converts a wrapped phase (all echoes) to radians in [−π, π], or refuses it with what to do.
 * Precondition: `img` is a readEchoes/readNifti result, or { data } (then the stored datatype is not checked).
 * Precondition: at most one of units and scale; units is 'rad' | 'deg' | 'scanner' | 'unwrapped' or omitted.
 * Precondition: scale, when given, is finite and != 0 (radians per stored unit, after scl_slope/scl_inter).
 * Precondition: with inPlace, img.data is a Float32Array and is overwritten; otherwise it is left as it is.
 *
 * Units:
 *   omitted     radians, checked: a file stored as integers with no scl_slope is refused (scanner units,
 *               or a mask, are not radians)
 *   'rad'       radians, as the caller asserts (no datatype check)
 *   'deg'       degrees: × π/180
 *   'scanner'   integers whose stored range spans 2π: × 2π/2^⌈log2(max − min)⌉ (Siemens −4096…4095 → π/4096,
 *               0…4095 → 2π/4096); non-integers or a span under 4π are refused; any offset is re-wrapped
 *   'unwrapped' radians, any range (unwrapped, or wrapped with an offset): re-wrapped into (−π, π]
 *   scale       × scale
 * After rad/deg/scale the phase must lie in [−π, π] (kept) or [0, 2π] (re-wrapped to (−π, π], the same
 * angles), each with 0.01 rad of slack; anything else is refused, never passed on as radians. Non-finite
 * values pass through as they are (the caller decides what they mean).
 *
 * Refusals are Errors with code 'PhaseUnits' (wrong or unknown units, with advice: degrees? scanner
 * integers? unwrapped? a field map?) or 'InvalidPhase' (no finite value). Their words come from
 *   subject   what the phase is called, first in the message (default 'the phase')
 *   verb      how the caller's user picks an option (default 'use'; the CLI says 'give', the page 'choose')
 *   names     how each option is named to the user: { rad, deg, scanner, field, unwrapped?, scale? }
 *             (field: the way to a field-map network; unwrapped and scale: leave out an option the caller
 *             does not offer, and no advice names it; without names, this function's own option names)
 *
 * Returns { phase: Float32Array (img.data with inPlace, else a new array), units: 'rad' | 'deg' | 'scanner' |
 * 'unwrapped' | 'scale', scale (radians per stored unit), rewrapped, range: [min, max] stored (finite),
 * nonFinite (count), notes: string[] (what was done, in words) }.
 * @param {{data: Float32Array, datatype?: number, header?: {scl_slope: number, scl_inter: number}}} img
 * @param {{units?: string, scale?: number, inPlace?: boolean, subject?: string, verb?: string, names?: object}} [opts]
 */
export function phaseToRadians(img, { units, scale, inPlace = false, subject = 'the phase', verb = 'use', names } = {}) {
  const data = img?.data;
  if (!data || typeof data.length !== 'number') throw new TypeError('phaseToRadians: img.data must be a Float32Array');
  if (inPlace && !(data instanceof Float32Array)) throw new TypeError('phaseToRadians: inPlace needs img.data to be a Float32Array');
  if (units !== undefined && !['rad', 'deg', 'scanner', 'unwrapped'].includes(units)) {
    throw new RangeError(`phaseToRadians: unknown phase units '${units}' (rad, deg, scanner, unwrapped)`);
  }
  if (scale !== undefined && units !== undefined) throw new RangeError('phaseToRadians: give units or scale, not both');
  if (scale !== undefined && !(typeof scale === 'number' && Number.isFinite(scale) && scale !== 0)) {
    throw new RangeError(`phaseToRadians: scale must be a finite number != 0 (radians per stored unit), got ${scale}`);
  }
  const w = { subject, verb, names: names ? { ...REQUIRED_PHASE_NAMES, ...names } : DEFAULT_PHASE_NAMES };
  const n = w.names;
  const stored = valueStats(data);
  const range = `[${fmt(stored.lo)}, ${fmt(stored.hi)}]`;
  const refuse = (message, code = 'PhaseUnits') => Object.assign(new Error(message), { code });
  if (!(stored.lo <= stored.hi)) throw refuse(`${subject} holds no finite value.`, 'InvalidPhase');
  const used = units ?? (scale !== undefined ? 'scale' : 'rad');
  const notes = [];
  let factor = scale ?? 1;
  let wrapAny = used === 'unwrapped';
  if (used === 'deg') {
    factor = Math.PI / 180;
    notes.push('phase converted from degrees (× π/180)');
  } else if (used === 'scanner') {
    if (!stored.whole) throw refuse(`${subject} holds non-integer values (${range}): not scanner integers. ${phaseAdvice(stored, 'scanner', w)}`);
    if (!(stored.hi - stored.lo >= 2 * TWO_PI)) {
      throw refuse(`${subject} spans ${range}: too narrow for scanner integers spanning 2π (is it already in radians? then ${verb} ${n.rad}).`);
    }
    // The stored range of a wrapped phase spans (nearly) a power of two: -4096..4095 → 8192, 0..4095 → 4096.
    const span = 2 ** Math.ceil(Math.log2(stored.hi - stored.lo));
    factor = TWO_PI / span;
    wrapAny = true;
    notes.push(`phase from scanner integers in ${range}: a span of ${span} values = 2π, × ${fmt(factor)} rad${n.scale ? ` (${n.scale} to override)` : ''}`);
  } else if (used === 'scale') {
    notes.push(`phase × ${fmt(factor)} rad per stored unit`);
  } else if (units === undefined && INTEGER_TYPES[img.datatype] && !isScaled(img.header)) {
    throw refuse(
      `${subject} is stored as ${INTEGER_TYPES[img.datatype]} integers (${range}) with no scl_slope: that is not radians. ` +
        `${capitalise(verb)} ${n.scanner} (the stored range is taken to span 2π, e.g. Siemens -4096…4095 → × π/4096)` +
        `${n.scale ? `, ${n.scale} S (rad per stored unit)` : ''}, or ${n.unwrapped ?? n.rad} if these really are radians.`,
    );
  }
  const lo = Math.min(stored.lo * factor, stored.hi * factor);
  const hi = Math.max(stored.lo * factor, stored.hi * factor);
  const inPi = lo >= -Math.PI - PHASE_TOL && hi <= Math.PI + PHASE_TOL;
  const inTwoPi = lo >= -PHASE_TOL && hi <= TWO_PI + PHASE_TOL;
  if (!inPi && !inTwoPi && !wrapAny) {
    const conversion = used === 'rad' ? '' : `, which ${used === 'scale' ? `${n.scale ?? 'scale'} ${fmt(factor)}` : n[used]} maps to [${fmt(lo)}, ${fmt(hi)}] rad`;
    throw refuse(
      `${subject} spans ${range}${conversion}, outside [-π, π]: the phase networks need the wrapped phase in radians. ${phaseAdvice(stored, used, w)}`,
    );
  }
  const phase = inPlace ? data : new Float32Array(data.length);
  const rewrapped = !inPi;
  if (rewrapped) {
    for (let i = 0; i < data.length; i++) phase[i] = wrapToPi(data[i] * factor);
    notes.push(`phase in [${fmt(lo)}, ${fmt(hi)}] rad${inTwoPi ? ' (0…2π)' : ''} re-wrapped to (-π, π]`);
  } else if (factor !== 1) {
    for (let i = 0; i < data.length; i++) phase[i] = data[i] * factor;
  } else if (!inPlace) phase.set(data);
  return { phase, units: used, scale: factor, rewrapped, range: [stored.lo, stored.hi], nonFinite: stored.nonFinite, notes };
}

/** phaseToRadians' option names that every caller has (its own names replace them). */
const REQUIRED_PHASE_NAMES = { rad: "units 'rad'", deg: "units 'deg'", scanner: "units 'scanner'", field: 'a field-to-χ network' };
/** phaseToRadians' option names when the caller gives none: its own API's. */
const DEFAULT_PHASE_NAMES = { ...REQUIRED_PHASE_NAMES, unwrapped: "units 'unwrapped'", scale: 'scale' };

/** What a phase outside ±π probably is (from its stored range), as advice naming the caller's options; never `used` again. */
function phaseAdvice({ lo, hi, whole }, used, { verb, names: n }) {
  const span = hi - lo;
  if (used !== 'deg' && lo >= -181 && hi <= 361 && span > 1.2 * TWO_PI) {
    return `It looks like degrees: ${verb} ${n.deg}, or convert the file to radians (× π/180).`;
  }
  if (used !== 'scanner' && whole && span >= 500) {
    return (
      `It looks like raw scanner integers (e.g. Siemens -4096…4095): ${verb} ${n.scanner} (the stored range is taken to span 2π)` +
      `${n.scale ? `, or ${n.scale} S (rad per stored unit, π/4096 = 0.000767)` : ''}, or convert the file to radians.`
    );
  }
  if (used === 'scale') return `Check the conversion (${n.scale ?? 'scale'}: rad per stored unit).`;
  const rewrap = n.unwrapped ? `${verb} ${n.unwrapped} (the phase is re-wrapped, which the network does not mind)` : 'wrap it into [-π, π] first';
  const scaleToo = n.scale ? `, or ${verb} ${n.scale} S (rad per stored unit)` : '';
  if (span <= 1.05 * TWO_PI) return `If it is in radians with an offset, ${rewrap}; otherwise convert it to radians${scaleToo}.`;
  return `If it is an unwrapped phase in radians, ${rewrap}; if it is a field map (Hz or ppm), ${verb} ${n.field} instead${scaleToo}.`;
}

/** Into (−π, π] (π stays π); non-finite values unchanged. */
function wrapToPi(r) {
  return Number.isFinite(r) ? r - TWO_PI * Math.ceil((r - Math.PI) / TWO_PI) : r;
}

/** Whether readNifti applied scl_slope/scl_inter (a slope that is finite, != 0, and not the identity). */
function isScaled(h) {
  return !!h && Number.isFinite(h.scl_slope) && h.scl_slope !== 0 && !(h.scl_slope === 1 && !(h.scl_inter || 0));
}

const capitalise = (s) => s.charAt(0).toUpperCase() + s.slice(1);
/** A number in words: six significant digits at most, no trailing zeros. */
const fmt = (v) => String(+v.toPrecision(6));

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

function isGzip(u8) {
  return u8.length >= 2 && u8[0] === 0x1f && u8[1] === 0x8b;
}

/** The file's bytes, gunzipped synchronously when gzipped. */
function unzipSync(bytes, who) {
  const u8 = toUint8(bytes, who);
  return isGzip(u8) ? gunzipSync(u8) : u8;
}

/** The file's bytes, gunzipped when gzipped: node zlib; browsers DecompressionStream (off the main thread's JS), else nifti-reader-js. */
async function unzipAsync(bytes, who) {
  const u8 = toUint8(bytes, who);
  if (!isGzip(u8)) return u8;
  return !nodeZlib && typeof DecompressionStream === 'function' ? gunzipStream(u8) : gunzipSync(u8);
}

function gunzipSync(u8) {
  if (!nodeZlib && !syncGunzip) {
    throw new Error('readNifti: cannot gunzip synchronously here (nifti-reader-js does not resolve): use readNiftiAsync');
  }
  let out;
  try {
    if (nodeZlib) {
      const b = nodeZlib.gunzipSync(u8);
      return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
    }
    out = new Uint8Array(syncGunzip(u8.slice().buffer));
  } catch (e) {
    throw new Error(`corrupt or truncated gzip data: ${e.message}`);
  }
  // fflate may return a short result for a cut stream without complaint: check the gzip trailer's ISIZE
  const isize = u8.length >= 18 ? new DataView(u8.buffer, u8.byteOffset + u8.length - 4, 4).getUint32(0, true) : -1;
  if (out.length % 2 ** 32 !== isize) {
    throw new Error(`corrupt or truncated gzip data: inflated ${out.length} bytes, gzip trailer says ${isize} (mod 2^32)`);
  }
  return out;
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

/** For the tests: the stream-based (browser) gzip paths, usable under node too. */
export const _streams = { gzip: gzipStream, gunzip: gunzipStream };

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

function int64(dv, off, le) {
  const v = dv.getBigInt64(off, le);
  if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < -BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new Error(`NIfTI-2 header: 64-bit field at byte ${off} is out of range (${v})`);
  }
  return Number(v);
}

/** Parses the header of decompressed bytes into a plain object with nifti1.h/nifti2.h field names. */
function parseHeader(u8) {
  if (u8.length < 4) throw notNifti(`only ${u8.length} bytes`);
  const dv = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
  let version;
  let le;
  const sLE = dv.getInt32(0, true);
  const sBE = dv.getInt32(0, false);
  if (sLE === 348) [version, le] = [1, true];
  else if (sBE === 348) [version, le] = [1, false];
  else if (sLE === 540) [version, le] = [2, true];
  else if (sBE === 540) [version, le] = [2, false];
  else throw notNifti(`the first 4 bytes (sizeof_hdr) are not 348 (NIfTI-1) or 540 (NIfTI-2)`);
  const size = version === 1 ? 348 : 540;
  if (u8.length < size) throw new Error(`truncated NIfTI-${version} header: expected ${size} bytes, got ${u8.length}`);

  const h = { version, littleEndian: le, sizeof_hdr: size };
  if (version === 1) {
    const magic = readString(u8, 344, 4);
    if (magic === 'ni1') throw new Error('NIfTI-1 header/image pair (.hdr/.img) is not supported: convert to a single .nii file');
    if (magic + '\0' !== NIFTI1_MAGIC) {
      throw notNifti(`NIfTI-1 magic "n+1" missing at byte 344 (ANALYZE 7.5 is not supported)`);
    }
    h.magic = magic;
    h.dim_info = u8[39];
    h.dim = Array.from({ length: 8 }, (_, i) => dv.getInt16(40 + 2 * i, le));
    h.intent_p1 = dv.getFloat32(56, le);
    h.intent_p2 = dv.getFloat32(60, le);
    h.intent_p3 = dv.getFloat32(64, le);
    h.intent_code = dv.getInt16(68, le);
    h.datatype = dv.getInt16(70, le);
    h.bitpix = dv.getInt16(72, le);
    h.slice_start = dv.getInt16(74, le);
    h.pixdim = Array.from({ length: 8 }, (_, i) => dv.getFloat32(76 + 4 * i, le));
    h.vox_offset = dv.getFloat32(108, le);
    h.scl_slope = dv.getFloat32(112, le);
    h.scl_inter = dv.getFloat32(116, le);
    h.slice_end = dv.getInt16(120, le);
    h.slice_code = u8[122];
    h.xyzt_units = u8[123];
    h.cal_max = dv.getFloat32(124, le);
    h.cal_min = dv.getFloat32(128, le);
    h.slice_duration = dv.getFloat32(132, le);
    h.toffset = dv.getFloat32(136, le);
    h.descrip = readString(u8, 148, 80);
    h.aux_file = readString(u8, 228, 24);
    h.qform_code = dv.getInt16(252, le);
    h.sform_code = dv.getInt16(254, le);
    [h.quatern_b, h.quatern_c, h.quatern_d, h.qoffset_x, h.qoffset_y, h.qoffset_z] = Array.from(
      { length: 6 }, (_, i) => dv.getFloat32(256 + 4 * i, le));
    h.srow_x = Array.from({ length: 4 }, (_, i) => dv.getFloat32(280 + 4 * i, le));
    h.srow_y = Array.from({ length: 4 }, (_, i) => dv.getFloat32(296 + 4 * i, le));
    h.srow_z = Array.from({ length: 4 }, (_, i) => dv.getFloat32(312 + 4 * i, le));
    h.intent_name = readString(u8, 328, 16);
  } else {
    const magic = String.fromCharCode(...u8.subarray(4, 12));
    if (magic !== NIFTI2_MAGIC) {
      if (magic.startsWith('n+2\0')) throw new Error('corrupt NIfTI-2 signature (file transferred in text mode?)');
      if (magic.startsWith('ni2\0')) throw new Error('NIfTI-2 header/image pair (.hdr/.img) is not supported: convert to a single .nii file');
      throw notNifti('NIfTI-2 magic "n+2" missing at byte 4');
    }
    h.magic = 'n+2';
    h.datatype = dv.getInt16(12, le);
    h.bitpix = dv.getInt16(14, le);
    h.dim = Array.from({ length: 8 }, (_, i) => int64(dv, 16 + 8 * i, le));
    h.intent_p1 = dv.getFloat64(80, le);
    h.intent_p2 = dv.getFloat64(88, le);
    h.intent_p3 = dv.getFloat64(96, le);
    h.pixdim = Array.from({ length: 8 }, (_, i) => dv.getFloat64(104 + 8 * i, le));
    h.vox_offset = int64(dv, 168, le);
    h.scl_slope = dv.getFloat64(176, le);
    h.scl_inter = dv.getFloat64(184, le);
    h.cal_max = dv.getFloat64(192, le);
    h.cal_min = dv.getFloat64(200, le);
    h.slice_duration = dv.getFloat64(208, le);
    h.toffset = dv.getFloat64(216, le);
    h.slice_start = int64(dv, 224, le);
    h.slice_end = int64(dv, 232, le);
    h.descrip = readString(u8, 240, 80);
    h.aux_file = readString(u8, 320, 24);
    h.qform_code = dv.getInt32(344, le);
    h.sform_code = dv.getInt32(348, le);
    [h.quatern_b, h.quatern_c, h.quatern_d, h.qoffset_x, h.qoffset_y, h.qoffset_z] = Array.from(
      { length: 6 }, (_, i) => dv.getFloat64(352 + 8 * i, le));
    h.srow_x = Array.from({ length: 4 }, (_, i) => dv.getFloat64(400 + 8 * i, le));
    h.srow_y = Array.from({ length: 4 }, (_, i) => dv.getFloat64(432 + 8 * i, le));
    h.srow_z = Array.from({ length: 4 }, (_, i) => dv.getFloat64(464 + 8 * i, le));
    h.slice_code = dv.getInt32(496, le);
    h.xyzt_units = dv.getInt32(500, le);
    h.intent_code = dv.getInt32(504, le);
    h.intent_name = readString(u8, 508, 16);
    h.dim_info = u8[524];
  }
  return h;
}

/** Decodes decompressed bytes: one 3D volume, or with `multiEcho` the dim[4] volumes (echoes) one after the other. */
function decode(u8, multiEcho = false) {
  const h = parseHeader(u8);
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
  const have = Math.max(0, u8.length - voxOffset);
  if (have < need) {
    const of = echoes > 1 ? ` (${echoes} echoes of ${dims.join('×')})` : '';
    throw new Error(`truncated data: expected ${need} bytes of image data${of} after vox_offset ${voxOffset}, got ${have}`);
  }

  // the stored values in their own typed array (a copy, aligned, byte-swapped to host order if needed)
  const copy = u8.slice(voxOffset, voxOffset + need);
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

  const unit = { 1: 1000, 2: 1, 3: 0.001 }[h.xyzt_units & 7] ?? 1;
  const voxelMm = [1, 2, 3].map((i) => Math.abs(h.pixdim[i]) * unit);
  if (!voxelMm.every((v) => Number.isFinite(v) && v > 0)) {
    throw new Error(`invalid voxel size: pixdim[1..3] = ${h.pixdim.slice(1, 4).join(', ')}`);
  }

  const sform = h.sform_code > 0 ? sformMatrix(h) : null;
  const qform = h.qform_code > 0 ? qformMatrix(h) : null;
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
  const img = { header: h, dims, voxelMm, data, datatype: h.datatype, affine, affineSource, b0Dir, b0DirSource, raw: raw.buffer };
  return multiEcho ? { ...img, echoes } : img;
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

/** Smallest and largest finite value (lo > hi when none), whether each finite value is whole, how many are not finite. */
function valueStats(data) {
  let lo = Infinity;
  let hi = -Infinity;
  let whole = true;
  let nonFinite = 0;
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    if (!Number.isFinite(v)) {
      nonFinite++;
      continue;
    }
    if (v < lo) lo = v;
    if (v > hi) hi = v;
    if (whole && v !== Math.round(v)) whole = false;
  }
  return { lo, hi, whole, nonFinite };
}

function maskFromValues(data) {
  const mask = new Uint8Array(data.length);
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    mask[i] = v !== 0 && Number.isFinite(v) ? 1 : 0;
  }
  return mask;
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
