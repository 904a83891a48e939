// File work off the page's main thread: NIfTI decoding (.nii/.nii.gz), magnitude thresholding and
// writing χ as .nii.gz. A tiny request/response protocol: {id, op, args} → {id, result} | {id, error: {message, code}}.
// The inputs go through the package's one input loader (bindings/js/io/inputs.js loadInputs, shared with the CLI);
// its refusals are phrased here in the page's words (pageMessage).
//
// Ops (args → result):
//   read      {bytes, units: 'ppm'|'hz', b0}            → the field Volume in ppm (readNifti's fields: header, raw, ...)
//   mask      {bytes}                                   → {dims, mask: Uint8Array} (nonzero and finite = inside)
//   threshold {bytes, fraction}                         → {dims, mask: Uint8Array} (a magnitude thresholded)
//   write     {data, like, gzip, description}           → Uint8Array (writeNifti)
//   phase     {phase, magnitude?, mask?, maskSource: 'file'|'magnitude', fraction, units: 'rad'|'deg'|'scanner'|'unwrapped',
//              names: {phase, magnitude?}, te?: number[] (s)}
//             → {fixed, dims, voxelMm, b0Dir, b0DirSource, like, echoes, phase, range, nonFinite, magnitude, magEchoes, mask, notes}
//   totalField {field (a B0 map, 3D), magnitude? (3D), mask?, names}
//             → the pipeline op's result with the map as stored (its units the caller's) as phase, echoes 1
//   pipeline  {phases: [bytes, ...] (one 4D file, or one 3D file per echo), magnitude?, mask?, units, names,
//              difference? (one phase difference of two echoes: scanner integers read as such, with a warning)}
//             → {dims, voxelMm, b0Dir, like, echoes, phase, range, magnitude, mask (null: none given), fixed, notes}
//             (From phase: the mask is optional, the pipeline makes it from the magnitude; 3D files are stacked as echoes)
//   load      (new) the whole input of a run, field or phase, through loadInputs:
//             {field | phase, mask?, magnitude?, maskSource, fraction, units (field: 'ppm'|'hz'|'rad/s'), b0, te? (s),
//              phaseUnits, names: {field|phase, mask?, magnitude?}}
//             → {kind, geometry, echoes, input: like (no data), data (ppm or rad), mask: Uint8Array, magnitude, fixed, notes,
//                range?, nonFinite?}
// Changes from before: TE, when given (ops phase and load), is in seconds, one per echo, and above 1 s it is refused
// as milliseconds (the CLI's rule); a 3D magnitude with a multi-echo phase is accepted only to threshold the mask
// (with a mask file it is refused instead of silently ignored); a phase refusal's error carries the refusal's
// numbers (code, min, max, ...) besides the page's message.
import { readNiftiAsync, readEchoesAsync, thresholdMask, writeNifti, maskFromValues, loadInputs, InputError, phrasePhaseRefusal, PhaseRefusal, nonFiniteText } from '../bindings/js/index.js';

/** What the page keeps of a loaded phase (the package's load()): geometry, header, echoes, data, units' notes. */
function phaseResult(r) {
  const { data, ...like } = r.phase;
  return {
    fixed: r.fixed,
    dims: r.geometry.dims,
    voxelMm: r.geometry.voxelMm,
    b0Dir: r.geometry.b0Dir,
    like,
    echoes: r.echoes,
    phase: data,
    range: r.phaseInfo.range,
    units: r.phaseInfo.units,
    magnitude: r.magnitude?.data ?? null,
    mask: r.mask?.data ?? null,
    notes: r.notes, // the phase's units, the mask's values, NaN or infinite values set to 0 outside the mask
  };
}

const ops = {
  async read({ bytes, units, b0 }) {
    const r = await load({ field: bytes }, { units: units ?? 'ppm', b0, needMask: false }, { field: 'The field map' });
    return r.field;
  },
  async mask({ bytes }) {
    const img = await readNiftiAsync(bytes);
    return { dims: img.dims, mask: maskFromValues(img.data) };
  },
  async threshold({ bytes, fraction }) {
    const img = await readNiftiAsync(bytes);
    return { dims: img.dims, mask: thresholdMask(img.data, fraction) };
  },
  async write({ data, like, gzip, description }) {
    return writeNifti(data, like, { gzip, description: description ?? 'Tessera QSM chi (ppm)' });
  },
  async phase({ phase, magnitude, mask, maskSource, fraction, units, names, te }) {
    const r = await load(
      { phase, magnitude, mask: maskSource === 'magnitude' ? undefined : mask },
      // “radians (−π…π)” is the page's default, not the user's word for it: the stored datatype is checked too.
      { phaseUnits: units === 'rad' ? undefined : units, maskFrom: maskSource, fraction, te },
      names,
    );
    return {
      ...phaseResult(r),
      b0DirSource: r.phase.b0DirSource,
      nonFinite: r.phaseInfo.nonFinite,
      // A 3D magnitude with several echoes makes the mask only (the echo weights would be TE² alone anyway).
      magEchoes: r.magnitudeEchoes,
    };
  },
  async pipeline({ phases, magnitude, mask, units, names, difference = false }) {
    const phase = phases.length === 1 ? phases[0] : await stackEchoes(phases, names);
    const r = await load({ phase, magnitude, mask }, { phaseUnits: units === 'rad' ? undefined : units, maskFrom: 'file', needMask: false, phaseDifference: difference }, names);
    return phaseResult(r);
  },
  async totalField({ field, magnitude, mask, names }) {
    // As stored (Hz): the pipeline converts the units and refuses implausible values in its words.
    const r = await load({ field, magnitude, mask }, { units: 'ppm', maskFrom: 'file', needMask: false }, names);
    const { data, ...like } = r.field;
    return {
      fixed: r.fixed, dims: r.geometry.dims, voxelMm: r.geometry.voxelMm, b0Dir: r.geometry.b0Dir, like, echoes: 1, phase: data,
      range: finiteRange(data), magnitude: r.magnitude?.data ?? null, mask: r.mask?.data ?? null, notes: r.notes,
    };
  },
  async load({ field, phase, mask, magnitude, maskSource, fraction, units, b0, te, phaseUnits, names = {} }) {
    const r = await load(
      { field, phase, magnitude, mask: maskSource === 'magnitude' ? undefined : mask },
      { units, b0, te, phaseUnits: phaseUnits === 'rad' ? undefined : phaseUnits, maskFrom: maskSource, fraction },
      names,
    );
    const { data, ...like } = r.input;
    return {
      kind: r.kind,
      geometry: r.geometry,
      echoes: r.echoes,
      input: like,
      data,
      mask: r.mask.data,
      magnitude: r.magnitude?.data ?? null,
      fixed: r.fixed,
      notes: r.notes,
      ...(r.phaseInfo && { range: r.phaseInfo.range, nonFinite: r.phaseInfo.nonFinite }),
    };
  },
};

/** [min, max] of the finite values. */
function finiteRange(data) {
  let lo = Infinity, hi = -Infinity;
  for (const v of data) if (Number.isFinite(v)) (lo = Math.min(lo, v)), (hi = Math.max(hi, v));
  return [lo, hi];
}

/**
 * Several 3D phase files (one per echo, in echo order) as one 4D NIfTI (float32, the first file's header with dim[0] = 4
 * and dim[4] = echoes), for the one loader. Each file must be 3D with the first one's dims.
 */
async function stackEchoes(files, names) {
  const vols = [];
  for (const [i, bytes] of files.entries()) {
    let v;
    try {
      v = await readEchoesAsync(bytes);
    } catch (e) {
      throw new Error(`Phase file ${i + 1}: ${e.message}`);
    }
    if (v.echoes !== 1) throw new Error(`Phase file ${i + 1} holds ${v.echoes} echoes: give one 4D file, or one 3D file per echo.`);
    if (vols.length && v.dims.join() !== vols[0].dims.join()) {
      throw new Error(`Phase file ${i + 1} is ${v.dims.join('×')} but file 1 is ${vols[0].dims.join('×')}: the echoes must have the same dimensions.`);
    }
    vols.push(v);
  }
  const n = vols[0].data.length;
  const first = await writeNifti(vols[0].data, vols[0]);
  const out = new Uint8Array(352 + 4 * n * vols.length);
  out.set(first.subarray(0, 352));
  const f32 = new Float32Array(out.buffer, 352, n * vols.length);
  vols.forEach((v, i) => f32.set(v.data, i * n));
  const dv = new DataView(out.buffer);
  const little = dv.getInt32(0, true) === 348;
  dv.setInt16(40, 4, little);
  dv.setInt16(48, vols.length, little);
  if (!little) for (let i = 0; i < n * vols.length; i++) dv.setFloat32(352 + 4 * i, f32[i], false);
  return out;
}

/** loadInputs, its refusals in the page's words. */
async function load(files, options, names = {}) {
  try {
    return await loadInputs(files, options);
  } catch (e) {
    throw pageError(e, names);
  }
}

/** How phrasePhaseRefusal names the page's Phase units choices. */
const PHASE_WORDS = {
  subject: 'The phase',
  verb: 'choose',
  names: {
    rad: 'Phase units “radians”', deg: 'Phase units “degrees”', scanner: 'Phase units “scanner integers”',
    unwrapped: 'Phase units “radians, any range”', field: 'a field → χ network',
  },
};

/** A sentence's first letter in capitals. */
const capital = (s) => s.charAt(0).toUpperCase() + s.slice(1);

/** What the page calls each input in its messages. */
const ROLE_WORDS = { field: 'field map', phase: 'phase', mask: 'mask', magnitude: 'magnitude' };

/** An input refusal (InputError, PhaseRefusal) as an Error in the page's words, keeping its code and numbers. */
function pageError(e, names) {
  if (!(e instanceof InputError) && !(e instanceof PhaseRefusal)) return e;
  const x = (d) => d.join('×');
  const role = (r) => ROLE_WORDS[r] ?? r;
  let message;
  switch (e.code) {
    case 'NotNifti':
      message = `${names[e.role] ?? `The ${role(e.role)}`}: ${e.reason}`;
      break;
    case 'DimsMismatch':
      message = e.role === 'magnitude' && e.inputRole === 'phase'
        ? `The phase is ${x(e.inputDims)} but the magnitude ${names.magnitude ?? ''} is ${x(e.dims)}: they must have the same dimensions.`.replace('  ', ' ')
        : `The ${role(e.inputRole)} is ${x(e.inputDims)} but the ${e.role === 'magnitude' ? 'magnitude image' : role(e.role)} is ${x(e.dims)}: they must have the same dimensions.`;
      break;
    case 'EchoesMismatch':
      message = `The magnitude ${names.magnitude ?? ''} has ${e.echoes} echoes but the phase has ${e.inputEchoes}: give a magnitude with the phase's echoes (or a 3D one, for the mask only).`.replace('  ', ' ');
      break;
    case 'TeInvalid':
      message = `“${e.te[e.index]}” is not an echo time: type TE in seconds, e.g. 0.02.`;
      break;
    case 'TeMilliseconds':
      message = `TE ${e.values.join(', ')} s is implausible for an echo time: type TE in seconds, not milliseconds (20 ms = 0.02: ${e.seconds.join(', ')}).`;
      break;
    case 'TeCount':
      message = `The phase holds ${e.echoes} echo${e.echoes > 1 ? 'es' : ''} but ${e.given} echo time${e.given > 1 ? 's were' : ' was'} given: give one TE per echo, in seconds.`;
      break;
    case 'NeedB0':
      message = 'Give the field strength B0 in tesla to convert Hz to ppm.';
      break;
    case 'NeedMask':
      message = 'Choose a magnitude image to threshold for the mask, or a mask file.';
      break;
    case 'NonFiniteInput':
      message = `${capital(nonFiniteText(role(e.role), e.count, 'inside'))}.`;
      break;
    default:
      message = e instanceof PhaseRefusal ? phrasePhaseRefusal(e, PHASE_WORDS) : e.message;
  }
  const facts = Object.fromEntries(Object.entries(e).filter(([k]) => k !== 'message' && k !== 'name'));
  return Object.assign(new Error(message), facts);
}

self.addEventListener('message', async (e) => {
  const { id, op, args } = e.data;
  try {
    if (!ops[op]) throw new Error(`io-worker: unknown op '${op}'`);
    const result = await ops[op](args);
    const transfer = new Set();
    if (result instanceof Uint8Array) transfer.add(result.buffer);
    else if (result && typeof result === 'object') for (const v of Object.values(result)) if (ArrayBuffer.isView(v)) transfer.add(v.buffer);
    self.postMessage({ id, result }, [...transfer]);
  } catch (err) {
    const { message = String(err), code, name, stack, ...facts } = err ?? {};
    self.postMessage({ id, error: { ...facts, message: err?.message ?? String(err), code: err?.code } });
  }
});
