// File work off the page's main thread: NIfTI decoding (.nii/.nii.gz), magnitude thresholding and
// writing χ as .nii.gz. A tiny request/response protocol: {id, op, args} → {id, result} | {id, error}.
// The phase networks' inputs (op 'phase'): a wrapped phase, 3D or 4D with the echoes along the 4th dim,
// checked to be in radians (or converted from the units the user names), an optional magnitude and the mask.
import { readNiftiAsync, thresholdMask, writeNifti, hzToPpm } from '../bindings/js/nifti.js';

const TWO_PI = 2 * Math.PI;

const ops = {
  async read({ bytes, units, b0 }) {
    const img = await readNiftiAsync(bytes);
    if (units === 'hz') img.data = hzToPpm(img.data, b0);
    return img;
  },
  async mask({ bytes }) {
    // readMask's rule (1 where the scaled value is finite and nonzero), after an async decode: readMask
    // itself is synchronous and cannot gunzip in a worker without nifti-reader-js.
    const img = await readNiftiAsync(bytes);
    return { dims: img.dims, mask: maskOf(img.data) };
  },
  async threshold({ bytes, fraction }) {
    const img = await readNiftiAsync(bytes);
    return { dims: img.dims, mask: thresholdMask(img.data, fraction) };
  },
  async write({ data, like, gzip, description }) {
    return writeNifti(data, like, { gzip, description: description ?? 'Tessera QSM chi (ppm)' });
  },
  phase: readPhaseInputs,
};

function maskOf(data) {
  const mask = new Uint8Array(data.length);
  for (let i = 0; i < mask.length; i++) mask[i] = data[i] !== 0 && Number.isFinite(data[i]) ? 1 : 0;
  return mask;
}

// ------------------------------------------------------------------------------------------------
// 4D NIfTI: every volume (echo) of a file, one after the other (the data order of the file itself)

async function gunzipped(bytes) {
  const u8 = new Uint8Array(bytes);
  if (u8[0] !== 0x1f || u8[1] !== 0x8b) return u8;
  try {
    const s = new Blob([u8]).stream().pipeThrough(new DecompressionStream('gzip'));
    return new Uint8Array(await new Response(s).arrayBuffer());
  } catch (e) {
    throw new Error(`corrupt or truncated gzip data: ${e.message}`);
  }
}

/** The header fields needed to split a file into 3D volumes; null when not a NIfTI-1/2 header. */
function layout(u8) {
  if (u8.length < 348) return null;
  const dv = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
  for (const le of [true, false]) {
    const size = dv.getInt32(0, le);
    if (size === 348) {
      return {
        dim: (i) => dv.getInt16(40 + 2 * i, le),
        setDim: (v, i, x) => v.setInt16(40 + 2 * i, x, le),
        bitpix: dv.getInt16(72, le),
        voxOffset: Math.round(dv.getFloat32(108, le)),
      };
    }
    if (size === 540 && u8.length >= 540) {
      return {
        dim: (i) => Number(dv.getBigInt64(16 + 8 * i, le)),
        setDim: (v, i, x) => v.setBigInt64(16 + 8 * i, BigInt(x), le),
        bitpix: dv.getInt16(14, le),
        voxOffset: Number(dv.getBigInt64(168, le)),
      };
    }
  }
  return null;
}

/**
 * Every 3D volume of a NIfTI file: { img (readNifti result of the first volume, 3D header), volumes, data
 * (Float32Array, volume after volume, x fastest) }. 3D files give one volume.
 */
async function readVolumes(bytes, what) {
  const u8 = await gunzipped(bytes);
  const h = layout(u8);
  const nd = h ? h.dim(0) : 0;
  const extra = nd >= 4 && nd <= 7 ? [4, 5, 6, 7].filter((i) => i <= nd).map((i) => Math.max(1, h.dim(i))) : [];
  const volumes = extra.reduce((a, b) => a * b, 1);
  if (volumes <= 1) {
    const img = await readNiftiAsync(u8);
    return { img, volumes: 1, data: img.data };
  }
  if (extra.filter((d) => d > 1).length > 1) {
    throw new Error(`${what} holds ${volumes} volumes along several dimensions (dim = ${[1, 2, 3, ...extra.map((_, i) => i + 4)].map(h.dim).join('×')}): the echoes must lie along the 4th dimension only`);
  }
  const dims = [h.dim(1), h.dim(2), h.dim(3)];
  const nvox = dims[0] * dims[1] * dims[2];
  const bytesPer = h.bitpix / 8;
  const per = nvox * bytesPer;
  const one = (e) => {
    // A 3D file of volume e: the header with dim[0] = 3 and dim[4..7] = 1, then that volume's bytes.
    const out = new Uint8Array(h.voxOffset + (Number.isInteger(per) && per > 0 ? per : 0));
    out.set(u8.subarray(0, Math.min(h.voxOffset, u8.length)));
    const dv = new DataView(out.buffer);
    h.setDim(dv, 0, 3);
    for (let i = 4; i <= 7; i++) h.setDim(dv, i, 1);
    if (per > 0) out.set(u8.subarray(h.voxOffset + e * per, h.voxOffset + (e + 1) * per), h.voxOffset);
    return out;
  };
  if (Number.isInteger(per) && per > 0 && u8.length < h.voxOffset + volumes * per) {
    throw new Error(`${what}: truncated data: ${volumes} volumes of ${dims.join('×')} need ${volumes * per} bytes after vox_offset ${h.voxOffset}, the file has ${Math.max(0, u8.length - h.voxOffset)}`);
  }
  const data = new Float32Array(volumes * nvox);
  let img;
  for (let e = 0; e < volumes; e++) {
    const v = await readNiftiAsync(one(e)); // a bad datatype or header fails here with readNifti's words
    data.set(v.data, e * nvox);
    if (e === 0) img = v;
  }
  return { img, volumes, data };
}

// ------------------------------------------------------------------------------------------------
// Phase units

const fmt = (x) => (Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 1 ? x.toFixed(2) : x.toPrecision(3));
const UNIT_NAMES = { rad: 'radians (−π…π)', deg: 'degrees', scanner: 'scanner integers', unwrapped: 'radians, any range' };

function finiteRange(data) {
  let lo = Infinity, hi = -Infinity, nonFinite = 0, integers = true;
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    if (!Number.isFinite(v)) {
      nonFinite++;
      continue;
    }
    if (v < lo) lo = v;
    if (v > hi) hi = v;
    if (integers && v !== Math.round(v)) integers = false;
  }
  return { lo, hi, nonFinite, integers };
}

/** Into (−π, π] in place (finite values). */
function rewrap(data, scale = 1, offset = 0) {
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    if (!Number.isFinite(v)) continue;
    const r = v * scale + offset;
    data[i] = r - TWO_PI * Math.round(r / TWO_PI);
  }
}

/** What a phase outside ±π probably is, as advice naming the Phase units choice. */
function unitsAdvice({ lo, hi, integers }) {
  const span = hi - lo;
  if (lo >= -181 && hi <= 361 && span > 1.2 * TWO_PI) return 'It looks like degrees: choose Phase units “degrees”, or convert the file to radians (× π/180).';
  if (integers && span >= 500) {
    return 'It looks like raw scanner values (e.g. Siemens −4096…4095): choose Phase units “scanner integers” (the stored range is taken to span 2π), or convert the file to radians.';
  }
  if (span <= 1.05 * TWO_PI) return 'If it is in radians with an offset, choose Phase units “radians, any range” (the phase is re-wrapped); otherwise convert it to radians.';
  return 'If it is an unwrapped phase in radians, choose Phase units “radians, any range” (it is re-wrapped, which the network does not mind); if it is a field map (Hz or ppm), choose a field → χ network instead.';
}

/** Converts the phase to radians in (−π, π] per the chosen units; returns notes, or throws with advice. */
function toRadians(data, units) {
  const r = finiteRange(data);
  if (r.lo > r.hi) throw new Error('The phase holds no finite value.');
  const range = `${fmt(r.lo)} to ${fmt(r.hi)}`;
  const tol = 0.01;
  if (units === 'rad') {
    if (r.lo >= -Math.PI - tol && r.hi <= Math.PI + tol) return { range: r, notes: [] };
    if (r.lo >= -tol && r.hi <= TWO_PI + tol) {
      rewrap(data);
      return { range: r, notes: ['phase in [0, 2π] re-wrapped to (−π, π]'] };
    }
    throw Object.assign(new Error(`The phase ranges from ${range}, not about ±π: the phase networks need the wrapped phase in radians. ${unitsAdvice(r)}`), { code: 'PhaseUnits' });
  }
  if (units === 'deg') {
    if (!(r.lo >= -180.5 && r.hi <= 360.5)) {
      throw Object.assign(new Error(`The phase ranges from ${range}: that is not degrees (−180…180 or 0…360). ${unitsAdvice(r)}`), { code: 'PhaseUnits' });
    }
    rewrap(data, Math.PI / 180);
    return { range: r, notes: ['phase converted from degrees'] };
  }
  if (units === 'scanner') {
    if (!(r.hi - r.lo >= 2 * TWO_PI)) {
      throw Object.assign(new Error(`The phase ranges from ${range}: too narrow for scanner integers spanning 2π (is it already in radians? then choose “radians”).`), { code: 'PhaseUnits' });
    }
    // The stored range [lo, hi] spans 2π: hi − lo + 1 units per turn for integers (Siemens −4096…4095: π/4096).
    const turn = r.hi - r.lo + (r.integers ? 1 : 0);
    rewrap(data, TWO_PI / turn, -Math.PI - (TWO_PI * r.lo) / turn);
    return { range: r, notes: [`scanner values ${fmt(r.lo)}…${fmt(r.hi)} mapped to radians (2π per ${fmt(turn)} units)`] };
  }
  if (units === 'unwrapped') {
    if (r.lo >= -Math.PI - tol && r.hi <= Math.PI + tol) return { range: r, notes: [] };
    rewrap(data);
    return { range: r, notes: [`phase (${range} rad) re-wrapped to (−π, π]`] };
  }
  throw new Error(`unknown phase units '${units}' (${Object.keys(UNIT_NAMES).join(', ')})`);
}

/**
 * The phase networks' inputs from NIfTI bytes: phase (3D/4D), optional magnitude (same echoes, or 3D for the
 * mask only), the mask (a mask file, or the first magnitude echo thresholded).
 */
async function readPhaseInputs({ phase, magnitude, mask, maskSource, fraction, units, names }) {
  const p = await readVolumes(phase, names.phase);
  const dims = p.img.dims;
  const nvox = dims[0] * dims[1] * dims[2];
  const { range, notes } = toRadians(p.data, units);
  const same = (d) => d.join() === dims.join();
  let mag = null;
  let magEchoes = 0;
  if (magnitude) {
    const m = await readVolumes(magnitude, names.magnitude);
    if (!same(m.img.dims)) throw new Error(`The phase is ${dims.join('×')} but the magnitude ${names.magnitude} is ${m.img.dims.join('×')}: they must have the same dimensions.`);
    if (m.volumes !== p.volumes && m.volumes !== 1) {
      throw new Error(`The magnitude ${names.magnitude} has ${m.volumes} echoes but the phase has ${p.volumes}: give a magnitude with the phase's echoes (or a 3D one, for the mask only).`);
    }
    mag = m.data;
    magEchoes = m.volumes;
  }
  let brain;
  if (maskSource === 'magnitude') {
    if (!mag) throw new Error('Choose a magnitude image to threshold for the mask, or a mask file.');
    brain = thresholdMask(mag.subarray(0, nvox), fraction); // the first echo: the most signal
  } else {
    const m = await readNiftiAsync(mask);
    if (!same(m.dims)) throw new Error(`The phase is ${dims.join('×')} but the mask is ${m.dims.join('×')}: they must have the same dimensions.`);
    brain = maskOf(m.data);
  }
  // Invalid values outside the mask do not matter (made 0); inside they would spoil the network's input.
  let fixed = 0;
  const inside = { phase: 0, magnitude: 0 };
  for (const [name, vol] of [['phase', p.data], ['magnitude', mag]]) {
    if (!vol) continue;
    for (let j = 0; j < vol.length; j++) {
      if (Number.isFinite(vol[j])) continue;
      if (brain[j % nvox]) inside[name]++;
      else {
        vol[j] = 0;
        fixed++;
      }
    }
  }
  for (const [name, n] of Object.entries(inside)) {
    if (n) throw Object.assign(new Error(`The ${name} holds ${n} invalid (NaN or infinite) value${n > 1 ? 's' : ''} inside the mask: fix the file or the mask.`), { code: 'NonFiniteInput' });
  }
  const { data, ...like } = p.img;
  return {
    fixed,
    dims,
    voxelMm: p.img.voxelMm,
    b0Dir: p.img.b0Dir,
    b0DirSource: p.img.b0DirSource,
    like,
    echoes: p.volumes,
    phase: p.data,
    range: [range.lo, range.hi],
    nonFinite: range.nonFinite,
    // A 3D magnitude with several echoes makes the mask only (the echo weights would be TE² alone anyway).
    magnitude: mag && magEchoes === p.volumes ? mag : null,
    magEchoes,
    mask: brain,
    notes,
  };
}

self.addEventListener('message', async (e) => {
  const { id, op, args } = e.data;
  try {
    const result = await ops[op](args);
    const transfer = new Set();
    if (result instanceof Uint8Array) transfer.add(result.buffer);
    else if (result && typeof result === 'object') for (const v of Object.values(result)) if (ArrayBuffer.isView(v)) transfer.add(v.buffer);
    self.postMessage({ id, result }, [...transfer]);
  } catch (err) {
    self.postMessage({ id, error: { message: err?.message ?? String(err), code: err?.code } });
  }
});
