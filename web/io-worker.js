// File work off the page's main thread: NIfTI decoding (.nii/.nii.gz), magnitude thresholding and
// writing χ as .nii.gz. A tiny request/response protocol: {id, op, args} → {id, result} | {id, error}.
// The phase networks' inputs (op 'phase'): a wrapped phase, 3D or 4D with the echoes along the 4th dim,
// checked to be in radians (or converted from the units the user names), an optional magnitude and the mask.
import { readNiftiAsync, readEchoesAsync, phaseToRadians, thresholdMask, writeNifti, hzToPpm } from '../bindings/js/nifti.js';

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

/** How phaseToRadians (nifti.js) names the page's Phase units choices in its refusals. */
const PHASE_WORDS = {
  subject: 'The phase',
  verb: 'choose',
  names: {
    rad: 'Phase units “radians”', deg: 'Phase units “degrees”', scanner: 'Phase units “scanner integers”',
    unwrapped: 'Phase units “radians, any range”', field: 'a field → χ network',
  },
};

/** A 3D or 4D (echoes along dim 4) NIfTI, its read errors prefixed with the file's name. */
async function readEchoesNamed(bytes, name) {
  try {
    return await readEchoesAsync(bytes);
  } catch (e) {
    throw new Error(`${name}: ${e.message}`);
  }
}

/**
 * The phase networks' inputs from NIfTI bytes: phase (3D/4D), optional magnitude (same echoes, or 3D for the
 * mask only), the mask (a mask file, or the first magnitude echo thresholded).
 */
async function readPhaseInputs({ phase, magnitude, mask, maskSource, fraction, units, names }) {
  const p = await readEchoesNamed(phase, names.phase);
  const dims = p.dims;
  const nvox = dims[0] * dims[1] * dims[2];
  // “radians (−π…π)” is the page's default, not the user's word for it: the stored datatype is checked too.
  const r = phaseToRadians(p, { units: units === 'rad' ? undefined : units, inPlace: true, ...PHASE_WORDS });
  const same = (d) => d.join() === dims.join();
  let mag = null;
  let magEchoes = 0;
  if (magnitude) {
    const m = await readEchoesNamed(magnitude, names.magnitude);
    if (!same(m.dims)) throw new Error(`The phase is ${dims.join('×')} but the magnitude ${names.magnitude} is ${m.dims.join('×')}: they must have the same dimensions.`);
    if (m.echoes !== p.echoes && m.echoes !== 1) {
      throw new Error(`The magnitude ${names.magnitude} has ${m.echoes} echoes but the phase has ${p.echoes}: give a magnitude with the phase's echoes (or a 3D one, for the mask only).`);
    }
    mag = m.data;
    magEchoes = m.echoes;
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
  const { data, echoes, ...like } = p;
  return {
    fixed,
    dims,
    voxelMm: p.voxelMm,
    b0Dir: p.b0Dir,
    b0DirSource: p.b0DirSource,
    like,
    echoes,
    phase: data,
    range: r.range,
    nonFinite: r.nonFinite,
    // A 3D magnitude with several echoes makes the mask only (the echo weights would be TE² alone anyway).
    magnitude: mag && magEchoes === echoes ? mag : null,
    magEchoes,
    mask: brain,
    notes: r.notes,
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
