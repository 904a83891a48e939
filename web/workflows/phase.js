// The wrapped phase → χ workflow (iQSM, iQFM, iQSM+): a wrapped phase (3D, or 4D with the echoes along the 4th
// dimension), optional magnitude and a mask in, with TE (seconds, one per echo), B0, mask erosion and phase sign;
// the whole volume in one network call per echo; χ (iQFM: the local field) out. It owns those inputs, the plan
// and invert requests, and its readouts. Same shape as field.js.
import { checkEchoTimes, InputError } from '../../bindings/js/index.js';
import { $, checkedValue, fmtBytes } from '../dom.js';
import { schemaOption } from '../schema.js';

const PI = Math.PI;
/** Example echo times (s) for n echoes, as typed. */
const example = (n) => [0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09].slice(0, Math.max(1, n)).join(', ');
const NUMBER = /^[+]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i;
/** The registry's input roles in words. */
const ROLE_WORDS = {
  phase: 'wrapped phase (rad, × phase sign)',
  mask: 'brain mask (eroded)',
  te: 'TE (s)',
  b0: 'B0 (T)',
  b0_dir: 'B0 direction (unit vector)',
  border: 'border shell',
};

/**
 * The phase networks' acquisition settings, checked: { te (s, one per echo; null while there is a problem with
 * them), b0 (T), erodeRadius, phaseSign, echoes, problem } — problem says what is wrong, in words (null when all is
 * well). TE is in seconds, as in the API and the CLI: a value above 1 s is refused as probably milliseconds (the
 * CLI's rule).
 * Preconditions: `form` holds the form's strings: te (echo times separated by commas, semicolons or spaces), b0,
 * erode, sign; `echoes` is the loaded phase's echo count, or null before a phase is loaded (any count then).
 */
export function checkAcquisition(form, echoes, options = { b0: schemaOption('b0'), erode: schemaOption('erodeRadius') }) {
  const text = String(form.te ?? '').trim();
  const parts = text ? text.split(/[\s,;]+/).filter(Boolean) : [];
  let problem = null;
  let te = null;
  if (!parts.length) {
    problem = `Type the echo time${echoes > 1 ? 's' : ''} TE in seconds${echoes > 1 ? `, one per echo (${echoes} echoes), comma-separated, e.g. ${example(echoes)}` : ', e.g. 0.02'}.`;
  } else {
    try {
      te = checkEchoTimes(parts.map((p) => (NUMBER.test(p) ? Number(p) : NaN)), echoes ?? undefined); // the package's rules
    } catch (e) {
      if (!(e instanceof InputError)) throw e;
      problem = acquisitionWords(e, parts);
    }
  }
  const b0 = Number(form.b0);
  const b = options.b0;
  if (!problem && !inRange(b0, b)) problem = `Give the field strength B0 in tesla${b ? `, in ${rangeText(b)} (e.g. ${b.defaultValue})` : ''}.`;
  const erode = Number(form.erode);
  const r = options.erode;
  if (!problem && !inRange(erode, r)) problem = `The mask erosion is a whole number of voxels${r ? ` from ${r.min} to ${r.max} (the reference uses ${r.defaultValue})` : ''}.`;
  return { te, b0, erodeRadius: erode, phaseSign: Number(form.sign) < 0 ? -1 : 1, echoes, problem };
}

/** An echo-time refusal of checkEchoTimes in the page's words (parts: what was typed). */
function acquisitionWords(e, parts) {
  if (e.code === 'TeInvalid') return `“${parts[e.index]}” is not an echo time: type TE in seconds, e.g. 0.02, or ${example(3)} for three echoes.`;
  if (e.code === 'TeMilliseconds') {
    return `TE ${e.values.join(', ')} s is implausible for an echo time (probably milliseconds): give TE in seconds, not milliseconds (20 ms = 0.02: type ${e.seconds.join(', ')}).`;
  }
  const given = `${e.given} echo time${e.given > 1 ? 's were' : ' was'} given`;
  return `The phase holds ${e.echoes} echo${e.echoes > 1 ? 'es' : ''} but ${given}: give one TE per echo, in seconds, comma-separated (e.g. ${example(e.echoes)}).`;
}

/** Whether v is a number the schema option o accepts (any finite number when o is not known yet: C++ checks it). */
function inRange(v, o) {
  if (!Number.isFinite(v)) return false;
  if (!o) return true;
  return (o.minExclusive ? v > o.min : v >= o.min) && v <= o.max && (!o.integer || Number.isInteger(v));
}

/** An option's range as the schema words it: (0, 30] or [0, 255]. */
const rangeText = (o) => `${o.minExclusive ? '(' : '['}${o.min}, ${o.max}]`;

/** Shows problem next to TE and B0; before an input is loaded only when a TE has been typed. */
export function showAcquisitionProblem(problem, input) {
  const show = !!problem && (!!input || $('te').value.trim() !== '');
  $('phaseMsg').hidden = !show;
  $('phaseMsg').textContent = show ? problem : '';
}

export const phaseWorkflow = {
  kind: 'phase',
  /** Whole volume only: no tile setting applies (only the threads per worker). */
  tiled: false,
  mainName: 'wrapped phase',
  /** The file input of the main file (its choice goes to page.files.phase). */
  fileInput: 'phaseFile',
  b0Slot: 'b0PhaseSlot',
  /** B0 is a parameter of the network, not of the input: changing it re-plans. */
  b0Reloads: false,
  noInputText:
    'No phase loaded: choose a wrapped-phase NIfTI (3D, or 4D with the echoes along the 4th dimension), its mask (or a magnitude image to threshold), and type the echo time(s).',
  needInputText: 'Load a wrapped phase and its mask',
  infeasibleText: 'The volume does not fit: see the advice',
  errorWords: {
    BudgetExceeded: 'The volume does not fit in memory',
    NonFiniteInput: 'The phase or magnitude holds invalid values',
  },
  barLabels: ['Activations vs budget', 'Whole volume vs single-patch limit'],

  /** Wires this workflow's own inputs: units reload the phase; TE and erosion re-check and re-plan; the sign re-checks. */
  wire({ reload, paramsChanged, syncParams }) {
    $('phaseUnits').addEventListener('change', reload);
    for (const id of ['te', 'erode']) $(id).addEventListener('input', paramsChanged);
    $('phaseSign').addEventListener('change', syncParams);
  },

  /** What the network description adds for a phase network (line(key, value)): its inputs, output and how it runs. */
  describeNetwork(m, line) {
    line('Inputs', m.inputs.map((r) => ROLE_WORDS[r] ?? r).join(', '));
    line('Output', m.quantity === 'local-field' ? 'local field (ppm) — the tissue field, not χ' : 'χ (ppm)');
    line('Runs', `on the whole volume at once (not tileable), padded to a multiple of ${m.divisor}${m.cropMargin ? `; cropped to the eroded mask’s bounding box + ${m.cropMargin} voxels first` : ''}; one network call per echo, echoes combined with (magnitude·TE)² weights`);
  },

  /** The magnitude is optional and weights the echoes: always offered; thresholded for the mask on request. */
  magnitudeLabel(maskSource) {
    return { text: `Magnitude (optional, weights the echoes${maskSource === 'magnitude' ? '; thresholded for the mask' : ''})`, shown: true };
  },

  /** A dropped magnitude makes the mask only when no mask file was chosen. */
  magnitudeMakesMask(files) {
    return !files.mask;
  },

  /**
   * The acquisition settings from the page, checked (checkAcquisition).
   * Preconditions: `input` is the loaded phase input or null (then any echo count is accepted).
   */
  params(input) {
    return checkAcquisition({ te: $('te').value, b0: $('b0').value, erode: $('erode').value, sign: $('phaseSign').value }, input?.echoes ?? null);
  },

  /** What keeps the run from starting (TE, B0, erosion), or null. */
  problem(input) {
    return this.params(input).problem;
  },

  /** Shows the problem next to the inputs; before a phase is loaded only a TE that is wrong in itself. */
  syncParams(input) {
    showAcquisitionProblem(this.problem(input), input);
  },

  /**
   * Reads the wrapped phase (3D/4D), optional magnitude and the mask in the I/O worker (phase units checked
   * there); returns the input, or a string saying which file is still missing.
   * Preconditions: files.phase is set; io is the I/O worker client.
   */
  async load(io, files) {
    const maskSource = checkedValue('maskSource');
    if (maskSource === 'file' && !files.mask) return `Phase ${files.phase.name} chosen: now choose its mask (or threshold a magnitude image).`;
    if (maskSource === 'magnitude' && !files.magnitude) return `Phase ${files.phase.name} chosen: now choose a magnitude image to threshold.`;
    const bytes = {
      phase: await files.phase.arrayBuffer(),
      magnitude: files.magnitude ? await files.magnitude.arrayBuffer() : undefined,
      mask: maskSource === 'file' ? await files.mask.arrayBuffer() : undefined,
    };
    const fraction = Number($('maskFraction').value);
    const names = { phase: files.phase.name, magnitude: files.magnitude?.name };
    const r = await io('phase', { ...bytes, maskSource, fraction, units: $('phaseUnits').value, names }, Object.values(bytes).filter(Boolean));
    const mag = files.magnitude?.name;
    const notes = [...r.notes];
    if (r.echoes > 1) notes.push(r.magnitude ? `echoes combined with (magnitude·TE)² weights from ${mag}` : mag ? `${mag} is 3D: mask only, echoes combined with TE² weights` : 'no magnitude: echoes combined with TE² weights');
    if (maskSource === 'magnitude') notes.push(`mask from ${mag}${r.magEchoes > 1 ? ' (echo 1)' : ''} at ${$('maskFraction').value} of its robust max`);
    return this.input({
      source: 'files',
      name: files.phase.name,
      geometry: { dims: r.dims, voxelMm: r.voxelMm, b0Dir: r.b0Dir },
      phase: r.phase,
      echoes: r.echoes,
      magnitude: r.magnitude ?? undefined,
      mask: r.mask,
      like: r.like,
      phaseRange: r.range,
      note: notes.join('; '),
    });
  },

  /** Completes an input: kind, display (the first echo's phase), range [-π, π] and summary. */
  input(input) {
    const n = input.mask.length;
    input.kind = 'phase';
    input.display = input.phase.subarray(0, n);
    input.range = [-PI, PI];
    let maskVoxels = 0;
    let sum = 0;
    for (let i = 0; i < n; i++) {
      if (!input.mask[i]) continue;
      maskVoxels++;
      sum += input.display[i];
    }
    input.maskVoxels = maskVoxels;
    input.summary = {
      kind: 'phase', source: input.source, dims: input.geometry.dims, voxelMm: input.geometry.voxelMm, maskVoxels, sumInMask: sum,
      echoes: input.echoes, phaseRange: input.phaseRange, magnitude: !!input.magnitude,
    };
    return input;
  },

  /** The echo count (B0 off the third axis for a network that assumes it along it: the plan's warning, from C++). */
  describe(input) {
    return { counts: `${input.echoes} echo${input.echoes > 1 ? 'es' : ''}, `, notes: [] };
  },

  /**
   * The plan request: the whole volume (cropped by iQSM+), one network call per echo. A TE that is missing or
   * does not match the echoes is the page's own message (Run stays disabled); the plan still shows the volume.
   */
  planRequest(net, input, geometry, runtime) {
    const p = this.params(input);
    const echoes = input?.echoes ?? p.te?.length ?? 1;
    return {
      geometry,
      mask: input?.mask,
      model: net.id,
      te: p.te ?? Array(echoes).fill(0.02),
      // Until B0 and the erosion are right the plan shows the volume at the schema's defaults (C++'s, when absent).
      b0: inRange(p.b0, schemaOption('b0')) ? p.b0 : undefined,
      erodeRadius: inRange(p.erodeRadius, schemaOption('erodeRadius')) ? p.erodeRadius : undefined,
      workers: runtime.workers,
      threadsPerWorker: runtime.threadsPerWorker,
    };
  },

  /**
   * The invert request: phase, magnitude and the acquisition settings, the weights and the run's controls.
   * Preconditions: `p` is params(input) without a problem.
   */
  invertRequest(req, input, p, weights, run) {
    return {
      model: req.model,
      geometry: req.geometry,
      mask: input.mask,
      phase: input.phase,
      magnitude: input.magnitude,
      te: p.te,
      b0: p.b0,
      erodeRadius: p.erodeRadius,
      phaseSign: p.phaseSign,
      workers: req.workers,
      threadsPerWorker: req.threadsPerWorker,
      weights,
      ...run,
    };
  },

  planRows(plan, net, hasInput, row) {
    if (!plan.feasible) {
      if (plan.patchDims) row('Patch', `${plan.patchDims.join('×')} voxels — ${fmtBytes(plan.bytesPerTile)} per network call`);
      return;
    }
    const m = net.model;
    const how = m?.cropMargin ? `cropped to the eroded mask’s box + ${m.cropMargin} voxels, ` : '';
    row('Patch', `${plan.patchDims?.join('×')} voxels (whole volume, ${how}padded to a multiple of ${m?.divisor ?? 16})${hasInput ? '' : ' — for a 128×128×96 example: load a phase for its own plan'}`);
    row('Memory per network call', fmtBytes(plan.bytesPerTile));
    row('Network calls', `${plan.tilesTotal} (one per echo), ${plan.tilesInFlight} at a time`);
  },

  progressText(p, pct, eta) {
    return `${p.done}/${p.total} echo${p.total > 1 ? 'es' : ''} (${pct}%) · ETA ${eta} · whole volume`;
  },

  startText(plan) {
    return `0/${plan.tilesTotal} echo${plan.tilesTotal > 1 ? 'es' : ''} · starting the network on the whole volume…`;
  },

  doneText(report, wall) {
    return `${report.tilesRun}/${report.tilesRun} echo${report.tilesRun > 1 ? 'es' : ''} (100%) · ${wall}`;
  },

  reportRows(r, result, row, perCall) {
    if (perCall) row('Per network call', perCall);
    const p = result.params;
    const te = p.te.map((t) => +t.toPrecision(6)).join(', ');
    row(
      'Network',
      `${result.name}: TE ${te} s, B0 ${p.b0} T, mask eroded by ${p.erodeRadius} voxel${p.erodeRadius === 1 ? '' : 's'}, phase sign ${p.phaseSign < 0 ? '−1' : '+1'}${result.input.magnitude ? ', magnitude-weighted echoes' : ''}`,
    );
    row('Network calls', `${r.tilesRun} (one per echo) on the whole volume, ${r.plan?.patchDims?.join('×') ?? r.patchEdge} voxels, ${fmtBytes(r.bytesPerTile)} each`);
  },

  fieldCaption(input) {
    return `Wrapped phase (rad${input.echoes > 1 ? ', echo 1' : ''})`;
  },
};
