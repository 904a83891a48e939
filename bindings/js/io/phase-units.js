// The phase-unit rules of every wrapped-phase input (the pipeline, iQSM, iQFM, iQSM+): a wrapped phase in radians, from radians,
// degrees, scanner integers or a scale, or a structured refusal that each caller phrases in its own words.
//
//   phaseToRadians(img, { units?, scale?, inPlace? }) → { phase, units, scale, rewrapped, range, nonFinite, notes }
//   phaseDifferenceToRadians(img, ...)                → the same for a two-echo phase difference (scanner integers read as such)
//   phrasePhaseRefusal(error, words?)                 → the refusal in words, with advice naming the caller's options
//   isPhaseUnitsRefusal(error)                        → whether the refusal is about units (a usage problem)
//
// Refusals are PhaseRefusal errors: { code, min, max, whole, ... } (numbers, no words), their message in this
// API's own words (units 'deg', scale, ...). The CLI and the page phrase them with phrasePhaseRefusal and their
// own word table (subject, verb, option names).

/** NIfTI integer datatype codes, by name: a phase stored so with no scl_slope is not in radians. */
const INTEGER_TYPES = { 2: 'uint8', 4: 'int16', 8: 'int32', 256: 'int8', 512: 'uint16', 768: 'uint32' };

const TWO_PI = 2 * Math.PI;
/** Radians of slack on ±π and [0, 2π] (float rounding of a stored ±π, 0.57°). */
const PHASE_TOL = 0.01;

/**
 * A phase refusal: code and the numbers behind it.
 *   PhaseNoFinite     no finite value
 *   PhaseIntegers     stored as integers (datatype) with no scl_slope, units not given      {datatype, min, max, whole}
 *   PhaseNotIntegers  units 'scanner' but non-integer values                                 {min, max, whole}
 *   PhaseTooNarrow    units 'scanner' but a stored span under 4π                             {min, max, whole}
 *   PhaseNotRadians   after the conversion outside [−π, π] and [0, 2π]                       {min, max, whole, units, scale, lo, hi}
 * (min, max: the stored finite range; whole: every finite value is an integer; lo, hi: the range after × scale.)
 */
export class PhaseRefusal extends Error {
  /**
   * Precondition: code is one of the codes above; facts holds its numbers.
   * @param {string} code
   * @param {{min?: number, max?: number, whole?: boolean, datatype?: string, units?: string, scale?: number, lo?: number, hi?: number}} facts
   */
  constructor(code, facts = {}) {
    super('');
    this.name = 'PhaseRefusal';
    this.code = code;
    Object.assign(this, facts);
    this.message = phrasePhaseRefusal(this);
  }
}

/**
 * Converts a wrapped phase (all echoes) to radians in [−π, π], or refuses it (PhaseRefusal).
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
 * Returns { phase: Float32Array (img.data with inPlace, else a new array), units: 'rad' | 'deg' | 'scanner' | 'rescaled' |
 * 'unwrapped' | 'scale', scale (radians per stored unit), rewrapped, range: [min, max] stored (finite),
 * nonFinite (count), notes: string[] (what was done, in words) }.
 * @param {{data: Float32Array, datatype?: number, header?: {scl_slope: number, scl_inter: number}}} img
 * @param {{units?: string, scale?: number, inPlace?: boolean}} [opts]
 */
export function phaseToRadians(img, { units, scale, inPlace = false } = {}) {
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
  const { lo: min, hi: max, whole, nonFinite } = valueStats(data);
  if (!(min <= max)) throw new PhaseRefusal('PhaseNoFinite');
  const stored = { min, max, whole };
  const used = units ?? (scale !== undefined ? 'scale' : 'rad');
  const notes = [];
  let factor = scale ?? 1;
  let wrapAny = used === 'unwrapped';
  if (used === 'deg') {
    factor = Math.PI / 180;
    notes.push('phase converted from degrees (× π/180)');
  } else if (used === 'scanner') {
    if (!whole) throw new PhaseRefusal('PhaseNotIntegers', stored);
    if (!(max - min >= 2 * TWO_PI)) throw new PhaseRefusal('PhaseTooNarrow', stored);
    // The stored range of a wrapped phase spans (nearly) a power of two: -4096..4095 → 8192, 0..4095 → 4096.
    const span = 2 ** Math.ceil(Math.log2(max - min));
    factor = TWO_PI / span;
    wrapAny = true;
    notes.push(`phase from scanner integers in [${fmt(min)}, ${fmt(max)}]: a span of ${span} values = 2π, × ${fmt(factor)} rad`);
  } else if (used === 'scale') {
    notes.push(`phase × ${fmt(factor)} rad per stored unit`);
  } else if (units === undefined && INTEGER_TYPES[img.datatype] && !isScaled(img.header)) {
    throw new PhaseRefusal('PhaseIntegers', { ...stored, datatype: INTEGER_TYPES[img.datatype] });
  }
  // A phase in no stated units whose stored span is far from 2π is not radians (a header's scl_slope left it scaled,
  // or another scanner scale): rescaled from its stored range to (−π, π], as MriResearchTools' readphase does.
  if (used === 'rad' && units === undefined && !whole && isRescaled(max - min)) {
    const phase = inPlace ? data : new Float32Array(data.length);
    const k = TWO_PI / (max - min);
    for (let i = 0; i < data.length; i++) phase[i] = Number.isFinite(data[i]) ? wrapToPi((data[i] - min) * k - Math.PI) : data[i];
    notes.push(
      `warning: the phase spans [${fmt(min)}, ${fmt(max)}], ${max - min < Math.PI ? 'far less than' : 'far more than'} the 2π of a wrapped phase in radians: ` +
        `rescaled from that range to (-π, π] (as MriResearchTools' readphase does); give its units (radians, degrees, scanner) or a scale if this is wrong`,
    );
    return { phase, units: 'rescaled', scale: k, rewrapped: true, range: [min, max], nonFinite, notes };
  }
  const lo = Math.min(min * factor, max * factor);
  const hi = Math.max(min * factor, max * factor);
  const inPi = lo >= -Math.PI - PHASE_TOL && hi <= Math.PI + PHASE_TOL;
  const inTwoPi = lo >= -PHASE_TOL && hi <= TWO_PI + PHASE_TOL;
  if (!inPi && !inTwoPi && !wrapAny) throw new PhaseRefusal('PhaseNotRadians', { ...stored, units: used, scale: factor, lo, hi });
  const phase = inPlace ? data : new Float32Array(data.length);
  const rewrapped = !inPi;
  if (rewrapped) {
    for (let i = 0; i < data.length; i++) phase[i] = wrapToPi(data[i] * factor);
    notes.push(`phase in [${fmt(lo)}, ${fmt(hi)}] rad${inTwoPi ? ' (0…2π)' : ''} re-wrapped to (-π, π]`);
  } else if (factor !== 1) {
    for (let i = 0; i < data.length; i++) phase[i] = data[i] * factor;
  } else if (!inPlace) phase.set(data);
  return { phase, units: used, scale: factor, rewrapped, range: [min, max], nonFinite, notes };
}

/**
 * A phase difference of two echoes (a Siemens field map: φ(TE2) − φ(TE1), one 3D volume) to radians in [−π, π].
 * Precondition: as phaseToRadians.
 * With no units or scale given, integers spanning at least 4π are scanner integers (Siemens writes the difference as
 * −4096…4094): read as units 'scanner' (the stored span taken as 2π) with a warning in notes; anything else as
 * phaseToRadians reads a phase (a scaled one rescaled with a warning, radians kept, the rest refused).
 * Returns phaseToRadians' result.
 * @param {{data: Float32Array, datatype?: number, header?: {scl_slope: number, scl_inter: number}}} img
 * @param {{units?: string, scale?: number, inPlace?: boolean}} [opts]
 */
export function phaseDifferenceToRadians(img, { units, scale, inPlace = false } = {}) {
  if (units === undefined && scale === undefined && img?.data) {
    const { lo, hi, whole } = valueStats(img.data);
    if (lo <= hi && whole && hi - lo >= 2 * TWO_PI) {
      const r = phaseToRadians(img, { units: 'scanner', inPlace });
      r.notes = r.notes.map((n) => `warning: the phase difference is stored as integers; ${n} (scanner integers, as Siemens writes its field map); give its units if this is wrong`);
      return r;
    }
  }
  return phaseToRadians(img, { units, scale, inPlace });
}

/**
 * The API's reading of a phase given as numbers (no file, no stated units): a phase whose span is far from the 2π of
 * radians (phaseToRadians' rescale) and, for a phase difference, scanner integers, come back converted with a warning;
 * anything else comes back null (left as given: the core refuses a phase that is not wrapped radians in its words).
 * Precondition: data is a Float32Array (not changed); difference: it is a two-echo phase difference.
 * Returns null or { phase: Float32Array (new), notes: string[] (each a warning, without the 'warning: ' prefix) }.
 * @param {Float32Array} data
 * @param {{difference?: boolean}} [opts]
 */
export function apiPhaseRescale(data, { difference = false } = {}) {
  const { lo, hi, whole } = valueStats(data);
  if (!(lo <= hi)) return null;
  const scanner = difference && whole && hi - lo >= 2 * TWO_PI;
  if (!scanner && (whole || !isRescaled(hi - lo))) return null;
  const r = (difference ? phaseDifferenceToRadians : phaseToRadians)({ data });
  const notes = r.notes.filter((n) => n.startsWith('warning: ')).map((n) => n.slice('warning: '.length));
  return notes.length ? { phase: r.phase, notes } : null;
}

/** Whether a refusal is about the phase's units (the caller's choice can fix it), not its values. */
export function isPhaseUnitsRefusal(e) {
  return e instanceof PhaseRefusal && e.code !== 'PhaseNoFinite';
}

/** This API's own words: phaseToRadians' option names. */
export const API_PHASE_WORDS = {
  subject: 'the phase',
  verb: 'use',
  names: { rad: "units 'rad'", deg: "units 'deg'", scanner: "units 'scanner'", unwrapped: "units 'unwrapped'", scale: 'scale', field: 'a field-to-χ network' },
};

/**
 * A phase refusal in words, with advice naming the caller's options.
 * Precondition: `e` is a PhaseRefusal (or an object with its code and numbers).
 * Precondition: words = { subject (what the phase is called, first in the message), verb (how the user picks an
 * option: 'use', 'give', 'choose'), names: { rad, deg, scanner, field, unwrapped?, scale? } } (unwrapped, scale:
 * leave out an option the caller does not offer, and no advice names it); default API_PHASE_WORDS.
 * @param {{code: string, min?: number, max?: number, whole?: boolean, datatype?: string, units?: string, scale?: number, lo?: number, hi?: number}} e
 * @param {{subject: string, verb: string, names: Record<string, string>}} [words]
 * @returns {string}
 */
export function phrasePhaseRefusal(e, words = API_PHASE_WORDS) {
  const { subject, verb, names: n } = words;
  const range = e.code === 'PhaseNoFinite' ? '' : `[${fmt(e.min)}, ${fmt(e.max)}]`;
  switch (e.code) {
    case 'PhaseNoFinite':
      return `${subject} holds no finite value.`;
    case 'PhaseIntegers':
      return (
        `${subject} is stored as ${e.datatype} integers (${range}) with no scl_slope: that is not radians. ` +
        `${capitalise(verb)} ${n.scanner} (the stored range is taken to span 2π, e.g. Siemens -4096…4095 → × π/4096)` +
        `${n.scale ? `, ${n.scale} S (rad per stored unit)` : ''}, or ${n.unwrapped ?? n.rad} if these really are radians.`
      );
    case 'PhaseNotIntegers':
      return `${subject} holds non-integer values (${range}): not scanner integers. ${phaseAdvice(e, 'scanner', words)}`;
    case 'PhaseTooNarrow':
      return `${subject} spans ${range}: too narrow for scanner integers spanning 2π (is it already in radians? then ${verb} ${n.rad}).`;
    case 'PhaseNotRadians': {
      const via = e.units === 'scale' ? `${n.scale ?? 'scale'} ${fmt(e.scale)}` : n[e.units];
      const conversion = e.units === 'rad' ? '' : `, which ${via} maps to [${fmt(e.lo)}, ${fmt(e.hi)}] rad`;
      return `${subject} spans ${range}${conversion}, outside [-π, π]: a wrapped phase must be in radians. ${phaseAdvice(e, e.units, words)}`;
    }
    default:
      return `${subject} was refused (${e.code}).`;
  }
}

/** What a phase outside ±π probably is (from its stored range), as advice naming the caller's options; never `used` again. */
function phaseAdvice({ min: lo, max: hi, whole }, used, { verb, names: n }) {
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

/**
 * Whether a stored phase span (no units given) is far from the 2π of a wrapped phase in radians: under π (a scaled
 * phase), or between 1.05 · 2π and 4π (a wrapped phase on another scale; wider spans are degrees, scanner integers or
 * an unwrapped phase, refused with advice instead).
 */
function isRescaled(span) {
  return (span > 0 && span < Math.PI) || (span > 1.05 * TWO_PI && span < 2 * TWO_PI);
}

/** Into (−π, π] (π stays π); non-finite values unchanged. */
function wrapToPi(r) {
  return Number.isFinite(r) ? r - TWO_PI * Math.ceil((r - Math.PI) / TWO_PI) : r;
}

/** Whether readNifti applied scl_slope/scl_inter (a slope that is finite, != 0, and not the identity). */
function isScaled(h) {
  return !!h && Number.isFinite(h.scl_slope) && h.scl_slope !== 0 && !(h.scl_slope === 1 && !(h.scl_inter || 0));
}

/** Smallest and largest finite value (lo > hi when none), whether each finite value is whole, how many are not finite. */
export function valueStats(data) {
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

const capitalise = (s) => s.charAt(0).toUpperCase() + s.slice(1);
/** A number in words: six significant digits at most, no trailing zeros. */
const fmt = (v) => String(+v.toPrecision(6));
