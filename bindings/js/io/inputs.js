// The one input loader of the CLI (cli.js) and the page's I/O worker (web/io-worker.js): NIfTI file bytes in,
// ready Volumes out, every input rule applied once.
//
//   loadInputs({ field | phase, mask?, magnitude? }, options) → { kind, field | phase, mask, magnitude, ... }
//   checkEchoTimes(te, echoes?)                                → te, or an InputError (TE in seconds)
//
// Refusals are InputErrors (code + the numbers and roles behind them, no user-facing option names) or the
// PhaseRefusals of phase-units.js; the message is a plain default: the CLI and the page phrase each code in
// their own words (cli.js cliMessage, io-worker.js pageMessage).

import { readNiftiAsync, readEchoesAsync, maskFromValues, maskValuesWarning, thresholdMask, hzToPpm, radPerSecToPpm } from './nifti.js';
import { phaseToRadians, phaseDifferenceToRadians } from './phase-units.js';
import { makeVolume, geometryOf } from './volume.js';

/** Longest plausible echo time, in seconds: a larger value is taken for milliseconds. */
export const MAX_TE_SECONDS = 1;

/**
 * An input refusal: code, and the facts behind it.
 *   NotNifti        a file is not a NIfTI volume Tessera reads          {role, reason (the reader's words)}
 *   DimsMismatch    mask or magnitude dims differ from the input's      {role, dims, echoes, inputRole, inputDims, inputEchoes}
 *   EchoesMismatch  the magnitude's echoes differ from the phase's      (same fields as DimsMismatch)
 *   TeInvalid       an echo time is not a finite number > 0             {te, index}
 *   TeMilliseconds  an echo time above MAX_TE_SECONDS                   {te, values (those above), seconds (te/1000 where > 1)}
 *   TeCount         not one echo time per echo                          {given, echoes}
 *   NeedB0          Hz or rad/s without the field strength              {units}
 *   NeedMask        no mask file and no magnitude to threshold
 *   MaskFromMagnitude the magnitude cannot be thresholded (no finite or no positive voxel)  {role, reason}
 *   NonFiniteInput  NaN/Inf inside the mask (phase, magnitude)          {role, count}
 */
export class InputError extends Error {
  /**
   * Precondition: code is one of the codes above; facts holds its fields.
   * @param {string} code
   * @param {Record<string, unknown>} facts
   */
  constructor(code, facts = {}) {
    super('');
    this.name = 'InputError';
    this.code = code;
    Object.assign(this, facts);
    this.message = defaultMessage(this);
  }
}

/**
 * Checks echo times in seconds, one per echo when `echoes` is given; returns them as a plain array.
 * Precondition: te is an array of numbers (or one number), each finite, > 0 and at most MAX_TE_SECONDS.
 * Precondition: echoes, when given, is the phase's echo count (te.length must equal it).
 * @param {number|number[]} te
 * @param {number} [echoes]
 * @returns {number[]}
 */
export function checkEchoTimes(te, echoes) {
  const list = typeof te === 'number' ? [te] : Array.from(te ?? []);
  list.forEach((t, index) => {
    if (typeof t !== 'number' || !Number.isFinite(t) || t <= 0) throw new InputError('TeInvalid', { te: list, index });
  });
  const values = list.filter((t) => t > MAX_TE_SECONDS);
  if (values.length) {
    throw new InputError('TeMilliseconds', { te: list, values, seconds: list.map((t) => (t > MAX_TE_SECONDS ? +(t / 1000).toPrecision(6) : t)) });
  }
  if (echoes !== undefined && list.length !== echoes) throw new InputError('TeCount', { given: list.length, echoes });
  return list;
}

/**
 * Reads and checks the inputs of a run.
 * Precondition: files holds exactly one of field (a local field map, 3D) or phase (wrapped phase, 3D or 4D with
 * the echoes along dim 4), and optionally mask (nonzero = inside) and magnitude; each an ArrayBuffer or
 * Uint8Array of a .nii or .nii.gz file.
 * Precondition: options.units (field) is 'ppm' (default), 'hz' or 'rad/s'; hz and rad/s need options.b0 (T, > 0).
 * Precondition: options.te (phase), when given, echo times in seconds (checkEchoTimes, one per echo).
 * Precondition: options.phaseUnits / options.phaseScale as phaseToRadians' units / scale (at most one).
 * Precondition: options.phaseDifference: files.phase is one phase difference of two echoes (3D; te, when given, its one
 * ΔTE): read by phaseDifferenceToRadians (scanner integers taken as such, with a warning).
 * Precondition: options.maskFrom is 'file' (default when files.mask is given) or 'magnitude' (threshold the
 * magnitude, its first echo, at options.fraction of its robust maximum, default 0.1).
 * Precondition: options.needMask (default true): without a mask the run cannot start (NeedMask).
 * Precondition: options.convert (default true); false reads geometry, echoes and mask only (a plan): no unit
 * conversion, no phase-unit check, input data as stored.
 *
 * The rules, once: field Hz → ppm (÷ γ̄·B0, GAMMA_BAR_MHZ_PER_T) or rad/s → ppm; the phase to radians (phase-units.js, in
 * place); mask and magnitude dims equal the input's; the magnitude has the phase's echoes, or is 3D when it only
 * makes the mask; TE in seconds, one per echo; NaN/Inf outside the mask set to 0 (counted in `fixed`, said in a
 * warning note: nonFiniteText), inside the mask refused for phase and magnitude (a field's are left to the runtime,
 * which names the first one's position).
 *
 * Returns { kind: 'field'|'phase', field?: Volume (ppm), phase?: Volume (rad, echoes), input (that Volume, with its
 * reader's header and raw: writeNifti's `like`), geometry ({dims, voxelMm, b0Dir}), echoes, te?, mask: Volume
 * (Uint8Array data) | null, magnitude: Volume (the phase's echoes) | null, magnitudeEchoes (0 without one),
 * phaseInfo? ({units, scale, rewrapped, range, nonFinite, notes}), fixed, notes: string[] }.
 * @param {{field?: ArrayBuffer|Uint8Array, phase?: ArrayBuffer|Uint8Array, mask?: ArrayBuffer|Uint8Array, magnitude?: ArrayBuffer|Uint8Array}} files
 * @param {{units?: string, b0?: number, te?: number[], phaseUnits?: string, phaseScale?: number, maskFrom?: 'file'|'magnitude',
 *          fraction?: number, needMask?: boolean, convert?: boolean}} [options]
 */
export async function loadInputs(files, options = {}) {
  const { units = 'ppm', b0, te, phaseUnits, phaseScale, fraction = 0.1, needMask = true, convert = true, phaseDifference = false } = options;
  if (!files || (files.field === undefined) === (files.phase === undefined)) {
    throw new TypeError('loadInputs: give exactly one of files.field (a field map) or files.phase (a wrapped phase)');
  }
  const kind = files.field !== undefined ? 'field' : 'phase';
  const maskFrom = options.maskFrom ?? (files.mask !== undefined ? 'file' : files.magnitude !== undefined && kind === 'field' ? 'magnitude' : 'file');
  if (kind === 'field' && !['ppm', 'hz', 'rad/s'].includes(units)) throw new RangeError(`loadInputs: units must be ppm, hz or rad/s, got '${units}'`);
  if (convert && kind === 'field' && units !== 'ppm' && !(typeof b0 === 'number' && b0 > 0)) throw new InputError('NeedB0', { units });
  const times = kind === 'phase' && te !== undefined ? checkEchoTimes(te) : undefined;
  const notes = [];

  // The input: the Volume whose geometry (and header) everything else follows.
  const input = await read(kind, files[kind], kind === 'phase');
  const echoes = input.echoes;
  if (times) checkEchoTimes(times, echoes);
  let phaseInfo;
  if (convert && kind === 'field' && units !== 'ppm') {
    input.data = units === 'hz' ? hzToPpm(input.data, b0) : radPerSecToPpm(input.data, b0);
    notes.push(`field converted from ${units === 'hz' ? 'Hz' : 'rad/s'} at ${b0} T`);
  }
  if (convert && kind === 'phase') {
    const toRadians = phaseDifference ? phaseDifferenceToRadians : phaseToRadians;
    const { phase, ...info } = toRadians(input, { units: phaseUnits, scale: phaseScale, inPlace: true });
    phaseInfo = info;
    notes.push(...info.notes);
  }

  let magnitude = null;
  let magnitudeEchoes = 0;
  if (files.magnitude !== undefined) {
    const m = await read('magnitude', files.magnitude, kind === 'phase');
    if (!sameDims(m, input) || (m.echoes !== echoes && !(m.echoes === 1 && maskFrom === 'magnitude'))) {
      throw new InputError(sameDims(m, input) ? 'EchoesMismatch' : 'DimsMismatch', mismatch('magnitude', m, kind, input));
    }
    magnitudeEchoes = m.echoes;
    magnitude = m;
  }

  let mask = null;
  if (maskFrom === 'magnitude') {
    if (!magnitude) throw new InputError('NeedMask', {});
    const nvox = magnitude.dims[0] * magnitude.dims[1] * magnitude.dims[2];
    let data;
    try {
      data = thresholdMask(magnitude.data.subarray(0, nvox), fraction);
    } catch (e) {
      // its data cannot be thresholded (no finite or no positive voxel); a bad fraction is the caller's mistake
      if (e instanceof TypeError || e instanceof RangeError) throw e;
      throw new InputError('MaskFromMagnitude', { role: 'magnitude', reason: e.message.replace(/^thresholdMask: /, '') });
    }
    mask = makeVolume({ ...geometryOf(magnitude), affine: magnitude.affine, data });
  } else if (files.mask !== undefined) {
    const m = await read('mask', files.mask, false);
    if (!sameDims(m, input)) throw new InputError('DimsMismatch', mismatch('mask', m, kind, input));
    mask = makeVolume({ ...geometryOf(m), affine: m.affine, data: maskFromValues(m.data) });
    const warning = maskValuesWarning(m.data);
    if (warning) notes.push(`warning: ${warning}`);
  } else if (needMask) throw new InputError('NeedMask', {});
  // A magnitude with other echoes than the phase's (a 3D one) only made the mask.
  if (magnitude && magnitude.echoes !== echoes) magnitude = null;

  // NaN/Inf outside the mask do not matter (made 0); inside, the phase's and magnitude's are refused here.
  let fixed = 0;
  if (convert && mask) {
    const inside = mask.data;
    const nvox = inside.length;
    for (const [role, vol] of [[kind, input], ['magnitude', kind === 'phase' ? magnitude : null]]) {
      if (!vol) continue;
      const data = vol.data;
      let count = 0;
      let outside = 0;
      for (let j = 0; j < data.length; j++) {
        if (Number.isFinite(data[j])) continue;
        if (inside[j % nvox]) count++;
        else {
          data[j] = 0;
          outside++;
        }
      }
      if (count && role !== 'field') throw new InputError('NonFiniteInput', { role, count });
      fixed += outside;
      if (outside) notes.push(`warning: ${nonFiniteText(role, outside, 'outside')}`);
    }
  }

  return {
    kind,
    [kind]: input,
    input,
    geometry: geometryOf(input),
    echoes,
    ...(times && { te: times }),
    mask,
    magnitude,
    magnitudeEchoes,
    ...(phaseInfo && { phaseInfo }),
    fixed,
    notes,
  };
}

/**
 * NaN or infinite values of an input in words, the same for the API, the CLI and the page: inside the mask a refusal
 * with its fix, outside it the assumption made (set to 0).
 * Precondition: role names the input ('phase', 'magnitude', 'field', ...); count > 0.
 * @param {string} role
 * @param {number} count
 * @param {'inside'|'outside'} where
 */
export function nonFiniteText(role, count, where) {
  return where === 'inside'
    ? `the ${role} holds ${count} NaN or infinite value${count > 1 ? 's' : ''} inside the mask: fix the file or the mask`
    : `the ${role} holds ${count} NaN or infinite value(s) outside the mask: set to 0 there (no stage reads them)`;
}

/** A file's Volume (3D, or with `echoes` 3D/4D), its reader's refusal as an InputError NotNifti naming the role. */
async function read(role, bytes, echoes) {
  try {
    return await (echoes ? readEchoesAsync(bytes) : readNiftiAsync(bytes));
  } catch (e) {
    if (e instanceof TypeError) throw e;
    throw new InputError('NotNifti', { role, reason: e?.message ?? String(e) });
  }
}

const sameDims = (a, b) => a.dims.every((d, i) => d === b.dims[i]);

function mismatch(role, vol, inputRole, input) {
  return { role, dims: vol.dims, echoes: vol.echoes, inputRole, inputDims: input.dims, inputEchoes: input.echoes };
}

/** The plain default words of an InputError (the CLI and the page phrase their own). */
function defaultMessage(e) {
  const x = (d) => d.join('×');
  switch (e.code) {
    case 'NotNifti':
      return `the ${e.role} is not a NIfTI volume Tessera reads: ${e.reason}`;
    case 'DimsMismatch':
      return `the ${e.role} is ${x(e.dims)} but the ${e.inputRole} is ${x(e.inputDims)}: they must have the same dims`;
    case 'EchoesMismatch':
      return `the ${e.role} has ${e.echoes} echoes but the ${e.inputRole} has ${e.inputEchoes}: give the ${e.role} the ${e.inputRole}'s echoes (or a 3D one, for the mask only)`;
    case 'TeInvalid':
      return `echo time ${e.te[e.index]} is not a number of seconds > 0`;
    case 'TeMilliseconds':
      return `echo time(s) ${e.values.join(', ')} s are implausible: give TE in seconds, not milliseconds (${e.seconds.join(', ')})`;
    case 'TeCount':
      return `${e.given} echo time(s) given but the phase holds ${e.echoes} echo(es): give one TE per echo, in seconds`;
    case 'NeedB0':
      return `a field in ${e.units} needs the field strength B0 (T) to convert to ppm`;
    case 'NeedMask':
      return 'a mask is needed: a mask file, or a magnitude image to threshold';
    case 'MaskFromMagnitude':
      return `the magnitude cannot be thresholded into a mask: ${e.reason}`;
    case 'NonFiniteInput':
      return nonFiniteText(e.role, e.count, 'inside');
    default:
      return `input refused (${e.code})`;
  }
}
