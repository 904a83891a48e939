// The command line's inputs: the NIfTI files of a run through the shared input loader (inputs.js), and its refusals
// in the command line's words.
import { loadInputs, checkEchoTimes, InputError } from '../io/inputs.js';
import { phrasePhaseRefusal, isPhaseUnitsRefusal, PhaseRefusal } from '../io/phase-units.js';
import { CliError, EXIT_ERROR, EXIT_USAGE, usageError } from './errors.js';
import { readBytes, readHeader } from './files.js';

/** How phrasePhaseRefusal names the command line's options in its refusals. */
const PHASE_WORDS = {
  verb: 'give',
  names: { rad: '--phase-units rad', deg: '--phase-units deg', scanner: '--phase-units scanner', scale: '--phase-scale', field: '--field with a field-to-χ network' },
};

/** The file given for an input role. */
const fileOf = (o, role) => ({ field: o.field, phase: o.phase, mask: o.mask, magnitude: o.magnitude })[role];

/**
 * An input refusal (inputs.js InputError, phase-units.js PhaseRefusal) in the command line's words, as a CliError:
 * phase units and TE are usage errors (exit 2), the files' contents errors (exit 1).
 */
function cliError(e, o) {
  if (e instanceof PhaseRefusal) {
    const message = phrasePhaseRefusal(e, { subject: `the phase ${o.phase}`, ...PHASE_WORDS });
    return new CliError(message, isPhaseUnitsRefusal(e) ? EXIT_USAGE : EXIT_ERROR, 'InvalidArgument');
  }
  if (!(e instanceof InputError)) return e;
  const x = (d) => d.join('×');
  const echoes = (n) => `${n} echo(es)`;
  switch (e.code) {
    case 'NotNifti':
      return new CliError(`the ${e.role} ${fileOf(o, e.role)} is not a NIfTI volume Tessera reads: ${e.reason}`, EXIT_ERROR, 'InvalidNifti');
    case 'DimsMismatch':
    case 'EchoesMismatch': {
      const [file, input] = [fileOf(o, e.role), fileOf(o, e.inputRole)];
      const message =
        e.role === 'magnitude'
          ? `the magnitude ${file} is ${x(e.dims)} with ${echoes(e.echoes)} but the phase ${input} is ${x(e.inputDims)} with ${e.inputEchoes}: magnitude and phase must have the same dims and echoes`
          : `the ${e.role} ${file} has dims ${x(e.dims)} but the ${e.inputRole} ${input} has ${x(e.inputDims)}: ${e.inputRole} and ${e.role} must have the same dims`;
      return new CliError(message, EXIT_ERROR, 'InvalidArgument');
    }
    case 'TeCount':
      return usageError(
        `--te gives ${e.given} echo time(s) but the phase ${o.phase} holds ${echoes(e.echoes)} ` +
          `(${e.echoes > 1 ? `4D, ${e.echoes} volumes along the 4th dim` : '3D'}): give one TE per echo, in seconds`,
      );
    case 'NeedB0':
      return usageError(`--units ${e.units} needs --b0 (the field strength in tesla) to convert to ppm`);
    case 'NeedMask':
      return usageError('--mask is required; see `tessera-qsm invert --help`');
    case 'NonFiniteInput':
      return new CliError(`the ${e.role} ${fileOf(o, e.role)} holds ${e.count} NaN or infinite value${e.count > 1 ? 's' : ''} inside the mask: fix the file or the mask`, EXIT_ERROR, 'NonFiniteInput');
    default:
      return new CliError(e.message, EXIT_USAGE, 'InvalidArgument');
  }
}

/**
 * The input and mask from the command line through the shared input loader (inputs.js loadInputs): geometry from
 * the input's (3D) header; with `convert`, a field in ppm, or a phase (all echoes) in radians with its magnitude.
 */
export async function readInputs(o, { needMask, units, b0, phase: phaseOpts, convert = false }, signal) {
  const files = {};
  for (const role of ['field', 'phase', 'magnitude', 'mask']) {
    if (fileOf(o, role) !== undefined) files[role] = await readBytes(fileOf(o, role), role, signal);
  }
  let r;
  try {
    r = await loadInputs(files, {
      units, b0, te: phaseOpts?.te, phaseUnits: phaseOpts?.units, phaseScale: phaseOpts?.scale, phaseDifference: phaseOpts?.difference, maskFrom: 'file', needMask, convert,
    });
  } catch (e) {
    throw cliError(e, o);
  }
  signal.throwIfAborted();
  if (r.phaseInfo?.units === 'scanner') r.phaseInfo.notes[0] += ' (--phase-scale to override)';
  return {
    like: r.input, // the 3D image whose header and affine the output keeps
    field: r.field?.data,
    phase: r.phase?.data,
    magnitude: r.magnitude?.data,
    echoes: r.echoes,
    phaseInfo: r.phaseInfo,
    geometry: r.geometry,
    mask: r.mask?.data,
    notes: r.notes, // what was converted or assumed (phase units, a mask's values); "warning: ..." for the assumptions
  };
}

/**
 * The header of the input of a role (field, phase; cli/files.js readHeader) alone, before any image is read: its dims,
 * echoes and geometry, what a run is planned from. te (for the phase): one echo time per echo, checked as the full
 * read checks it.
 */
export async function readInputHeader(o, role, { te, signal } = {}) {
  const head = await readHeader(fileOf(o, role), role, { multiEcho: role === 'phase', signal });
  if (te !== undefined) {
    try {
      checkEchoTimes(te, head.echoes);
    } catch (e) {
      throw cliError(e, o);
    }
  }
  return head;
}
