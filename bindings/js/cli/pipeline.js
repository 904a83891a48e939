// `tessera-qsm pipeline`: a multi-echo scan's wrapped phase (or a total field map) to χ through the C++ core's stages (brain mask, echo fit,
// background removal) and a classical method or a registry network.
import fs from 'node:fs';
import path from 'node:path';
import { writeNifti } from '../index.js';
import { PIPELINE_OPTIONS } from '../request.js';
import { CliError, EXIT_OK, EXIT_USAGE, usageError } from './errors.js';
import { niftiName, checkWritable, removeStalePartials, writeAtomic } from './files.js';
import { schemaDefault } from './flags.js';
import { size, duration, versions, planForFile } from './format.js';
import { loadNetworkWeights, defined } from './network.js';
import { readInputs, readInputHeader } from './read-inputs.js';
import { headerPlan, refusalText, pipelineWhat } from './plan.js';
import { wholeNumber, keyValues, fmt } from './values.js';

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

/** `tessera-qsm pipeline`: wrapped multi-echo phase → mask → total field → local field → χ, in the C++ core. */
export async function cmdPipeline(o, ctx) {
  const t0 = performance.now();
  const startedAt = new Date().toISOString();
  const see = 'see `tessera-qsm pipeline --help`';
  const fromTotal = o['total-field'] !== undefined;
  if (fromTotal && o.phase !== undefined) throw usageError(`give --phase (with --te) or --total-field (with --units), not both; ${see}`);
  if (!fromTotal && o.phase === undefined) throw usageError(`--phase is required (the wrapped phase of every echo), or --total-field with --units (a B0 map); ${see}`);
  const te = ctx.values.get('te');
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
  if ((o.method === undefined) === (o.model === undefined)) throw usageError(`give one inversion: --method NAME (classical) or --model ID (a network); ${see}`);
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
  const dir = o['keep-intermediates'];
  checkWritable(o.out, 'out');
  if (o.report !== undefined) checkWritable(o.report, 'report');
  removeStalePartials(o.out);
  const { signal, progress } = ctx;
  const request0 = defined({
    te, b0, ...options, method, [method ?? '-']: method && Object.keys(params).length ? params : undefined, model: o.model, totalFieldUnits: fromTotal ? fieldUnits : undefined,
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
    : await readInputs(o, { needMask: false, b0, phase: { te, units, scale }, convert: true }, signal);
  for (const note of notes) {
    if (note.startsWith('warning: ')) process.stderr.write(`${note}\n`);
    else progress.line(note);
  }
  let weights;
  if (o.model !== undefined) {
    const entry = await tessera.model(o.model);
    ({ weights } = await loadNetworkWeights(o, entry, tessera, ctx));
  }
  const request = defined({ ...request0, geometry, phase, totalField, magnitude, mask, weights });
  const plan = await tessera.plan({ ...request, pipeline: true, phase: undefined, totalField: undefined });
  if (!plan.feasible) throw new CliError(refusalText(plan, pipelineWhat(geometry.dims, echoes, fromTotal), limits, fromTotal ? '' : 'or give fewer echoes'), EXIT_USAGE, 'BudgetExceeded');
  const input = fromTotal ? `a total field in ${fieldUnits === 'hz' ? 'Hz' : fieldUnits}` : `${echoes} echoes (TE ${te.map((t) => fmt(t * 1000)).join(', ')} ms)`;
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
  const outputs = [{ file: o.out, bytes: await writeNifti(out.chi.data, like, { gzip, description: `chi ppm, tessera-qsm pipeline ${method ?? o.model}`.slice(0, 79) }) }];
  if (dir !== undefined) outputs.push(...(await intermediateFiles(dir, out, like, geometry, echoes)));
  if (o.report !== undefined) {
    const full = { ...out.report, plan: planForFile(out.report.plan), networkReport: out.networkReport, command: ['tessera-qsm', ...ctx.args], cwd: process.cwd(), versions: versions(), startedAt, totalWallSeconds: (performance.now() - t0) / 1000, inputs: { phase: o.phase ?? null, totalField: o['total-field'] ?? null, totalFieldUnits: fromTotal ? fieldUnits : null, magnitude: o.magnitude ?? null, mask: o.mask ?? null, te, b0, echoes }, options, inversion: method ? { method, params } : { model: o.model }, output: o.out, intermediates: dir ?? null };
    outputs.push({ file: o.report, bytes: `${JSON.stringify(full, null, 2)}\n` });
  }
  await writeAtomic(outputs, signal);
  progress.line(`wrote ${o.out}: χ (ppm)${dir !== undefined ? ` and the intermediates in ${dir}` : ''} (${duration((performance.now() - t0) / 1000)})`);
  return EXIT_OK;
}
