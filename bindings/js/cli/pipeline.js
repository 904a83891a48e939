// `tessera-qsm pipeline`: a multi-echo scan's wrapped phase (or a total field map) to χ through the C++ core's stages (brain mask, echo fit,
// background removal) and a classical method or a registry network.
import fs from 'node:fs';
import path from 'node:path';
import { writeNifti, methodsMarkdown, commandLine } from '../index.js';
import { PIPELINE_OPTIONS } from '../request.js';
import { CliError, EXIT_OK, EXIT_USAGE, usageError } from './errors.js';
import { niftiName, checkWritable, removeStalePartials, writeAtomic } from './files.js';
import { schemaDefault } from './flags.js';
import { size, duration, versions, planForFile } from './format.js';
import { loadNetworkWeights, defined } from './network.js';
import { readInputs, readInputHeader } from './read-inputs.js';
import { headerPlan, refusalText, pipelineWhat } from './plan.js';
import { MAX_TE_SECONDS } from '../io/inputs.js';
import { wholeNumber, keyValues, fmt } from './values.js';
import { ALSO_OUTPUTS } from '../io/derivatives.js';

/**
 * --option NAME=VALUE (repeatable) → the pipeline request's fields ({background: 'pdf', vsharp: {maxRadius: 12}}).
 * NAME is one of the schema's stage options (request.js PIPELINE_OPTIONS; C++ checks the values); schema: tessera.schema().
 */
export function stageOptions(list, schema) {
  const known = schema.filter((x) => PIPELINE_OPTIONS.includes(x.name.split('.')[0])).map((x) => x.name);
  const out = {};
  for (const [name, value] of Object.entries(keyValues(list, '--option'))) {
    if (!known.includes(name)) throw usageError(`--option ${name} is not a pipeline option (options: ${known.join(', ')}; see \`tessera-qsm pipeline --help\`)`);
    const [group, key] = name.split('.');
    if (key === undefined) out[group] = value;
    else (out[group] ??= {})[key] = value;
  }
  return out;
}

/**
 * --also swi,r2star → ['swi', 'r2star']: the pipeline's optional outputs, checked against the schema's also choices.
 */
export function alsoOutputs(text, schema) {
  if (text === undefined) return [];
  const choices = schema.find((x) => x.name === 'also').choices;
  const list = [...new Set(String(text).split(',').map((s) => s.trim()).filter(Boolean))];
  for (const a of list) if (!choices.includes(a)) throw usageError(`--also takes ${choices.join(', ')} (comma-separated), got '${a}'`);
  return list;
}

/**
 * The optional outputs' files next to χ: <out without .nii[.gz]>_swi, _minIP, _R2starmap, _T2starmap (BIDS suffixes),
 * the same extension as out. [{key (pipeline()'s result), file, description}].
 */
export function alsoFiles(out, also) {
  const m = /^(.*?)(\.nii(?:\.gz)?)$/i.exec(out);
  const [base, ext] = [m[1], m[2]];
  return ALSO_OUTPUTS.filter((x) => also.includes(x.also))
    .map((x) => ({ key: x.key, file: `${base}_${x.suffix}${ext}`, description: `${x.label}, tessera-qsm pipeline` }));
}

/**
 * The intermediates' files for --keep-intermediates ({file, bytes} for writeAtomic): every stage's Volume that is there
 * (a failed run's stages that were not reached are null and left out). Creates dir.
 */
async function intermediateFiles(dir, out, like, geometry, echoes) {
  fs.mkdirSync(dir, { recursive: true });
  const files = [];
  const f32 = (v) => (v.data instanceof Float32Array ? v.data : Float32Array.from(v.data));
  const write = async (name, v, description, data = v && f32(v)) => {
    if (v) files.push({ file: path.join(dir, `${name}.nii.gz`), bytes: await writeNifti(data, like, { gzip: true, description }) });
  };
  await write('mask', out.mask, 'brain mask');
  await write('fit_mask', out.fitMask, 'echo fit reliable (residual <= limit)');
  await write('fit_residual', out.fitResidual, 'echo fit RMS phase residual rad');
  await write('offset', out.offset, 'receive phase offset rad');
  await write('total_field_hz', out.fieldHz, 'total field Hz');
  await write('total_field_ppm', out.totalField, 'total field ppm');
  await write('local_field_ppm', out.localField, 'local field ppm');
  await write('local_mask', out.localMask, 'local field mask');
  const n = geometry.dims[0] * geometry.dims[1] * geometry.dims[2];
  for (let e = 0; e < echoes && out.unwrappedPhase; e++) {
    await write(`unwrapped_phase_echo${e + 1}`, out.unwrappedPhase, `unwrapped phase echo ${e + 1} rad`, out.unwrappedPhase.data.subarray(e * n, (e + 1) * n));
  }
  return files;
}

/**
 * ΔTE (s) of --phase-difference: --te2 − --te1, or --delta-te; each a number of seconds (over 1: refused as ms).
 * Precondition: o holds the pipeline's flags as parsed.
 */
function deltaEchoTime(o) {
  const seconds = (flag) => {
    const v = Number(o[flag]);
    if (!Number.isFinite(v) || v <= 0) throw usageError(`--${flag} must be an echo time in seconds (> 0), got '${o[flag]}'`);
    if (v > MAX_TE_SECONDS) throw usageError(`--${flag} ${o[flag]} is implausible for an echo time in seconds: give seconds, not milliseconds (${o[flag]} ms = ${+(v / 1000).toPrecision(6)})`);
    return v;
  };
  if (o['delta-te'] !== undefined) {
    if (o.te1 !== undefined || o.te2 !== undefined) throw usageError('give --te1 and --te2, or --delta-te, not both');
    return seconds('delta-te');
  }
  if (o.te1 === undefined || o.te2 === undefined) {
    throw usageError('--phase-difference needs its two echo times: --te1 S --te2 S (seconds; EchoTime1 and EchoTime2 in a Siemens sidecar), or --delta-te S');
  }
  const [t1, t2] = [seconds('te1'), seconds('te2')];
  if (!(t2 > t1)) throw usageError(`--te2 (${o.te2}) must be later than --te1 (${o.te1}): the phase difference is φ(TE2) − φ(TE1)`);
  return t2 - t1;
}

/** `tessera-qsm pipeline`: wrapped multi-echo phase → mask → total field → local field → χ, in the C++ core. */
export async function cmdPipeline(o, ctx) {
  const t0 = performance.now();
  const startedAt = new Date().toISOString();
  const see = 'see `tessera-qsm pipeline --help`';
  const fromTotal = o['total-field'] !== undefined;
  const fromDiff = o['phase-difference'] !== undefined;
  const inputs = [o.phase !== undefined && '--phase', fromTotal && '--total-field', fromDiff && '--phase-difference'].filter(Boolean);
  if (inputs.length > 1) throw usageError(`give one of --phase (with --te), --total-field (with --units) or --phase-difference (with --te1 and --te2), not ${inputs.join(' and ')}; ${see}`);
  if (!inputs.length) throw usageError(`--phase is required (the wrapped phase of every echo), or --total-field with --units (a B0 map), or --phase-difference with --te1 and --te2; ${see}`);
  if (!fromDiff) for (const f of ['te1', 'te2', 'delta-te']) if (o[f] !== undefined) throw usageError(`--${f} belongs to --phase-difference`);
  const deltaTe = fromDiff ? deltaEchoTime(o) : undefined;
  if (fromDiff && ctx.values.get('te') !== undefined) throw usageError('--te belongs to --phase: a phase difference takes --te1 and --te2 (or --delta-te)');
  if (fromDiff) o = { ...o, phase: o['phase-difference'] };
  const te = fromDiff ? [deltaTe] : ctx.values.get('te');
  const method = ctx.values.get('method');
  const fieldUnits = o.units?.toLowerCase();
  if (fromTotal) {
    if (fieldUnits === undefined) throw usageError("--total-field needs --units hz, rad/s or ppm (GE and Philips B0 maps are in Hz)");
    if (!['hz', 'rad/s', 'ppm'].includes(fieldUnits)) throw usageError(`--units must be hz, rad/s or ppm, got '${o.units}'`);
    if (te !== undefined) throw usageError('--te belongs to --phase: a total field map needs no echo times');
    for (const f of ['phase-units', 'phase-scale']) if (o[f] !== undefined) throw usageError(`--${f} belongs to --phase, not --total-field`);
  } else {
    if (o.units !== undefined) throw usageError('--units states the units of --total-field (the phase is read in radians: --phase-units)');
    if (te === undefined) throw usageError('--te is required: the echo times in seconds, one per echo (e.g. --te 0.004,0.008,0.012)');
  }
  if (o.out === undefined) throw usageError(`--out is required; ${see}`);
  if (!niftiName(o.out)) throw usageError(`--out must end with .nii or .nii.gz, got '${o.out}'`);
  if (o.method !== undefined && o.model !== undefined) throw usageError(`give one inversion: --method NAME (classical) or --model ID (a network), not both (neither: the pipeline's default method); ${see}`);
  if (o.param !== undefined && o.method === undefined) throw usageError('--param sets a classical method\'s parameter: it needs --method');
  if (o.weights !== undefined && o.model === undefined) throw usageError('--weights belongs to --model');
  if (o.mask === undefined && o.magnitude === undefined) throw usageError('give --mask, or --magnitude to make the mask from');
  const b0 = ctx.values.get('b0') ?? schemaDefault(ctx.schema, 'b0');
  const cores = wholeNumber(o.cores, 'cores', 1);
  const units = o['phase-units']?.toLowerCase();
  if (units !== undefined && !['rad', 'deg', 'scanner'].includes(units)) throw usageError(`--phase-units must be rad, deg or scanner, got '${o['phase-units']}'`);
  const scale = o['phase-scale'] === undefined ? undefined : Number(o['phase-scale']);
  const params = keyValues(o.param);
  const options = stageOptions(o.option, ctx.schema);
  if (options.also !== undefined) throw usageError('give the optional outputs with --also swi,r2star, not --option also');
  const also = alsoOutputs(o.also, ctx.schema);
  if (also.length && fromTotal) throw usageError('--also needs every echo\'s phase and magnitude (--phase, --magnitude), not --total-field');
  if (also.length && o.magnitude === undefined) throw usageError('--also needs --magnitude (every echo): SWI weights it and R2* fits it');
  const dir = o['keep-intermediates'];
  checkWritable(o.out, 'out');
  for (const f of alsoFiles(o.out, also)) {
    checkWritable(f.file, 'also');
    removeStalePartials(f.file);
  }
  if (o.report !== undefined) checkWritable(o.report, 'report');
  removeStalePartials(o.out);
  const { signal, progress } = ctx;
  const request0 = defined({
    te, b0, ...options, also: also.length ? also : undefined, method, [method ?? '-']: method && Object.keys(params).length ? params : undefined,
    model: o.model, totalFieldUnits: fromTotal ? fieldUnits : undefined,
  });
  delete request0['-'];
  // Planned from the input's header before any image is read: a run that cannot fit is refused at once.
  const head = await readInputHeader(fromTotal ? { ...o, field: o['total-field'] } : o, fromTotal ? 'field' : 'phase', { te: fromTotal ? undefined : te, signal });
  const tessera = await ctx.start({ hardwareThreads: cores });
  const limits = await tessera.limits();
  const headPlan = await headerPlan(tessera, head, { ...request0, pipeline: true }, { mask: o.mask !== undefined, magnitude: o.magnitude !== undefined });
  if (!headPlan.feasible) {
    const refusal = refusalText(headPlan, pipelineWhat(head.dims, head.echoes, fromTotal), limits, fromTotal ? '' : 'or give fewer echoes');
    throw new CliError(`${refusal} (planned from the header of ${fromTotal ? o['total-field'] : o.phase}; nothing was read)`, EXIT_USAGE, 'BudgetExceeded');
  }
  // A total field is read as it is (C++ converts its units, and refuses NaN inside the mask and implausible values).
  const { like, phase, field: totalField, magnitude, geometry, mask, echoes, notes } = fromTotal
    ? await readInputs({ ...o, field: o['total-field'] }, { needMask: false, units: 'ppm', convert: true }, signal)
    : await readInputs(o, { needMask: false, b0, phase: { te, units, scale, difference: fromDiff }, convert: true }, signal);
  for (const note of notes) {
    if (note.startsWith('warning: ')) process.stderr.write(`${note}\n`);
    else progress.line(note);
  }
  let weights;
  if (o.model !== undefined) {
    const entry = await tessera.model(o.model);
    ({ weights } = await loadNetworkWeights(o, entry, tessera, ctx));
  }
  const request = defined({
    ...request0, geometry, phase: fromDiff ? undefined : phase, phaseDifference: fromDiff ? phase : undefined, deltaTE: deltaTe,
    te: fromDiff ? undefined : te, totalField, magnitude, mask, weights,
  });
  const plan = await tessera.plan({ ...request, pipeline: true, phase: undefined, totalField: undefined, phaseDifference: undefined });
  if (!plan.feasible) throw new CliError(refusalText(plan, pipelineWhat(geometry.dims, echoes, fromTotal), limits, fromTotal ? '' : 'or give fewer echoes'), EXIT_USAGE, 'BudgetExceeded');
  const input = fromTotal ? `a total field in ${fieldUnits === 'hz' ? 'Hz' : fieldUnits}` : fromDiff ? `a phase difference (ΔTE ${fmt(deltaTe * 1000)} ms)` : `${echoes} echoes (TE ${te.map((t) => fmt(t * 1000)).join(', ')} ms)`;
  progress.line(`pipeline: ${geometry.dims.join('×')}, ${input}, B0 ${b0} T: ${plan.stages.join(' → ')}${o.model ? ` → ${o.model}` : ''}, estimated peak ${size(plan.peakBytes)}`);
  let out;
  try {
    out = await tessera.pipeline({ ...request, plan, signal, onProgress: (p) => progress.tiles(p, 'steps') });
  } catch (e) {
    progress.close();
    // A stage failed (the message names it): with --keep-intermediates the stages that finished are written first.
    if (dir !== undefined && e?.intermediates && !signal.aborted) {
      const kept = await intermediateFiles(dir, e.intermediates, like, geometry, echoes);
      if (kept.length) {
        await writeAtomic(kept, signal);
        e.message += `; the stages that finished are in ${dir} (${kept.map((f) => path.basename(f.file)).join(', ')})`;
      }
    }
    throw e;
  }
  progress.close();
  signal.throwIfAborted();
  for (const w of out.report.warnings ?? []) process.stderr.write(`warning: ${w}\n`);
  const gzip = /\.gz$/i.test(o.out);
  const outputs = [{ file: o.out, bytes: await writeNifti(out.chi.data, like, { gzip, description: `chi ppm, tessera-qsm pipeline ${method ?? (plan.method || o.model)}`.slice(0, 79) }) }];
  const extra = alsoFiles(o.out, also);
  for (const { key, file, description } of extra) {
    outputs.push({ file, bytes: await writeNifti(out[key].data, like, { gzip, description }) });
  }
  if (dir !== undefined) outputs.push(...(await intermediateFiles(dir, out, like, geometry, echoes)));
  if (o.report !== undefined && /\.md$/i.test(o.report)) {
    // The methods text: every step, its parameters and papers, and this command.
    outputs.push({ file: o.report, bytes: methodsMarkdown(out.report.methods, commandLine(['tessera-qsm', ...ctx.args])) });
  } else if (o.report !== undefined) {
    const full = { ...out.report, plan: planForFile(out.report.plan), networkReport: out.networkReport, command: ['tessera-qsm', ...ctx.args], cwd: process.cwd(), versions: versions(), startedAt, totalWallSeconds: (performance.now() - t0) / 1000, inputs: { phase: fromDiff ? null : o.phase ?? null, phaseDifference: o['phase-difference'] ?? null, te1: o.te1 === undefined ? null : Number(o.te1), te2: o.te2 === undefined ? null : Number(o.te2), deltaTE: deltaTe ?? null, totalField: o['total-field'] ?? null, totalFieldUnits: fromTotal ? fieldUnits : null, magnitude: o.magnitude ?? null, mask: o.mask ?? null, te, b0, echoes }, options, inversion: method || plan.method ? { method: method ?? plan.method, params } : { model: o.model }, output: o.out, intermediates: dir ?? null };
    outputs.push({ file: o.report, bytes: `${JSON.stringify(full, null, 2)}\n` });
  }
  await writeAtomic(outputs, signal);
  const wrote = extra.length ? `, ${extra.map((x) => path.basename(x.file)).join(', ')}` : '';
  progress.line(`wrote ${o.out}: χ (ppm)${wrote}${dir !== undefined ? ` and the intermediates in ${dir}` : ''} (${duration((performance.now() - t0) / 1000)})`);
  return EXIT_OK;
}
