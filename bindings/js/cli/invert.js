// `tessera-qsm invert`: a local field map (or a wrapped phase) through a network, or a local field through a classical
// method, to χ written as NIfTI with its run report.
import path from 'node:path';
import { writeNifti } from '../index.js';
import { isFetchable } from '../model-loader.js';
import { CliError, EXIT_OK, EXIT_USAGE, usageError } from './errors.js';
import { niftiName, readSpec, checkSpec, checkWritable, removeStalePartials, writeAtomic } from './files.js';
import { requestFlags, schemaDefault } from './flags.js';
import { size, duration, versions, planForFile, boxText, boxName, splitText, isSplit, speedText, fidelityText, reachText, verifyText } from './format.js';
import { checkInputKind, loadNetworkWeights, runContext, uncosted, calibrateSpec, defined } from './network.js';
import { runOptions, headerPlan, refusalText } from './plan.js';
import { readInputs, readInputHeader } from './read-inputs.js';
import { wholeNumber, keyValues, fmt } from './values.js';

/** The CLI's own flags of the network runs that a classical method does not take. */
const NETWORK_FLAGS = ['model', 'spec', 'weights', 'verify', 'probe', 'context', 'measure-speed', 'phase', 'phase-units', 'phase-scale', 'input-name'];

/** The flags of invert that a classical method does not take: the network's, and the request flags but method and b0. */
function networkOnly(schema) {
  return [...NETWORK_FLAGS, ...requestFlags('invert', schema).filter(({ option }) => option.name !== 'method' && option.name !== 'b0').map(({ flag }) => flag)];
}

/** `invert --method M`: a classical dipole inversion in the C++ core (no network, no weights). */
async function cmdInvertMethod(o, ctx) {
  const t0 = performance.now();
  const startedAt = new Date().toISOString();
  const see = 'see `tessera-qsm invert --help`';
  const given = networkOnly(ctx.schema).filter((k) => o[k] !== undefined && o[k] !== false);
  if (given.length) throw usageError(`${given.map((k) => `--${k}`).join(', ')} ${given.length > 1 ? 'are' : 'is'} for the networks; --method ${o.method} takes --param NAME=VALUE; ${see}`);
  if (o.field === undefined) throw usageError(`--method inverts a local field map: give --field (from phase: \`tessera-qsm pipeline\`); ${see}`);
  if (o.mask === undefined) throw usageError(`--mask is required; ${see}`);
  if (o.out === undefined) throw usageError(`--out is required; ${see}`);
  if (!niftiName(o.out)) throw usageError(`--out must end with .nii or .nii.gz, got '${o.out}'`);
  const b0 = ctx.values.get('b0');
  const name = ctx.values.get('method');
  const units = (o.units ?? 'ppm').toLowerCase();
  if (!['ppm', 'hz', 'rad/s'].includes(units)) throw usageError(`--units must be ppm, hz or rad/s, got '${o.units}'`);
  if (units !== 'ppm' && b0 === undefined) throw usageError(`--units ${units} needs --b0 (the field strength in tesla) to convert to ppm`);
  const params = keyValues(o.param);
  const cores = wholeNumber(o.cores, 'cores', 1);
  checkWritable(o.out, 'out');
  if (o.report !== undefined) checkWritable(o.report, 'report');
  removeStalePartials(o.out);
  const { signal, progress } = ctx;
  // Planned from the field's header before any image is read: a run that cannot fit is refused at once.
  const head = await readInputHeader(o, 'field', { signal });
  const tessera = await ctx.start({ hardwareThreads: cores });
  const limits = await tessera.limits();
  const advice = 'or choose a method with less memory (tkd, tikhonov)';
  const methodParams = { method: name, [name]: Object.keys(params).length ? params : undefined };
  const headPlan = await headerPlan(tessera, head, methodParams, { mask: true, magnitude: o.magnitude !== undefined });
  if (!headPlan.feasible) {
    throw new CliError(`${refusalText(headPlan, `${name} on ${head.dims.join('×')}`, limits, advice)} (planned from the header of ${o.field}; nothing was read)`, EXIT_USAGE, 'BudgetExceeded');
  }
  const { like, field, magnitude, geometry, mask, notes } = await readInputs(o, { needMask: true, units, b0, convert: true }, signal);
  for (const note of notes) if (note.startsWith('warning: ')) process.stderr.write(`${note}\n`);
  // --units given: the field is in the stated units (converted to ppm), and its plausibility refusal does not apply.
  const fieldUnits = o.units !== undefined ? 'ppm' : undefined;
  const request = defined({ geometry, mask, field, magnitude, method: name, [name]: Object.keys(params).length ? params : undefined, fieldUnits });
  const plan = await tessera.plan(request);
  if (!plan.feasible) throw new CliError(refusalText(plan, `${name} on ${geometry.dims.join('×')}`, limits, advice), EXIT_USAGE, 'BudgetExceeded');
  progress.line(`${plan.title}: whole volume ${geometry.dims.join('×')}, at most ${plan.methodSteps} step${plan.methodSteps > 1 ? 's' : ''}, ${plan.threads} thread${plan.threads > 1 ? 's' : ''}, estimated peak ${size(plan.peakBytes)}`);
  const { chi, report } = await tessera.invert({ ...request, plan, signal, onProgress: (p) => progress.tiles(p, 'steps') });
  progress.close();
  signal.throwIfAborted();
  for (const w of report.warnings ?? []) process.stderr.write(`warning: ${w}\n`);
  const bytes = await writeNifti(chi.data, like, { gzip: /\.gz$/i.test(o.out), description: `chi ppm, tessera-qsm ${name}`.slice(0, 79) });
  const outputs = [{ file: o.out, bytes }];
  if (o.report !== undefined) {
    const full = { ...report, plan: planForFile(plan), command: ['tessera-qsm', ...ctx.args], cwd: process.cwd(), versions: versions(), startedAt, totalWallSeconds: (performance.now() - t0) / 1000, quantity: 'chi', method: name, params, inputs: { field: { path: o.field, dims: geometry.dims, voxelMm: geometry.voxelMm, b0Dir: geometry.b0Dir, units }, mask: { path: o.mask } }, output: o.out };
    outputs.push({ file: o.report, bytes: `${JSON.stringify(full, null, 2)}\n` });
  }
  await writeAtomic(outputs, signal);
  progress.line(`wrote ${o.out}: χ (ppm) by ${plan.title} (${report.stepsRun} step${report.stepsRun === 1 ? '' : 's'} run, ${duration(report.wallSeconds)})`);
  return EXIT_OK;
}


/** `tessera-qsm invert`: see its --help. */
export async function cmdInvert(o, ctx) {
  if (o.method !== undefined) return cmdInvertMethod(o, ctx);
  if (o.param !== undefined) throw usageError('--param sets a classical method\'s parameter: it needs --method; see `tessera-qsm invert --help`');
  const t0 = performance.now();
  const startedAt = new Date().toISOString();
  const run = runOptions('invert', o, ctx.values);
  const { threads } = run;
  if (o.out === undefined) throw usageError('--out is required; see `tessera-qsm invert --help`');
  if (!niftiName(o.out)) throw usageError(`--out must end with .nii or .nii.gz, got '${o.out}'`);
  if (o.mask === undefined) throw usageError('--mask is required; see `tessera-qsm invert --help`');
  const { b0 } = run;
  const byDefault = (name) => schemaDefault(ctx.schema, name);
  let units;
  if (o.phase === undefined) {
    units = (o.units ?? 'ppm').toLowerCase();
    if (!['ppm', 'hz', 'rad/s'].includes(units)) throw usageError(`--units must be ppm, hz or rad/s, got '${o.units}'`);
    if (units !== 'ppm' && b0 === undefined) throw usageError(`--units ${units} needs --b0 (the field strength in tesla) to convert to ppm`);
  }
  const weightSources = o.weights ?? [];
  if (o.spec !== undefined && weightSources.length !== 1) {
    throw usageError(`--spec needs exactly one --weights FILE (the ONNX network), got ${weightSources.length}`);
  }
  checkWritable(o.out, 'out');
  if (o.report !== undefined) checkWritable(o.report, 'report');
  if (o.report !== undefined && path.resolve(o.report) === path.resolve(o.out)) throw usageError('--report and --out name the same file');
  removeStalePartials(o.out);
  if (o.report !== undefined) removeStalePartials(o.report);
  const { signal, progress } = ctx;

  const rawSpec = o.spec !== undefined ? await readSpec(o.spec, signal) : undefined;
  const inputs = await readInputs(o, { needMask: true, units, b0, phase: run.phase, convert: true }, signal);
  const { like, field, phase, magnitude, echoes, phaseInfo, geometry, mask } = inputs;
  const tessera = await ctx.start({ workers: run.workers, threadsPerWorker: threads, hardwareThreads: run.cores });
  const spec = checkSpec(rawSpec, ctx.schema, o.spec);
  const entry = o.model !== undefined ? await tessera.model(o.model) : undefined;
  const phaseNet = await checkInputKind(o, entry, run, tessera);
  if (entry && weightSources.length > 0 && weightSources.length !== entry.weights.length) {
    throw usageError(
      `${entry.name} needs ${entry.weights.length} --weights (${entry.weights.map((w) => w.file).join(', ')}), got ${weightSources.length}`,
    );
  }
  const phaseSettings = phaseNet ? { te: run.phase.te, b0, erodeRadius: run.phase.erodeRadius, phaseSign: run.phase.phaseSign } : {};
  const request = defined({
    geometry, mask, field: phaseNet ? undefined : field, fieldUnits: !phaseNet && o.units !== undefined ? 'ppm' : undefined, model: o.model, spec, tile: run.tile, whole: run.whole, workers: run.workers, threadsPerWorker: threads,
    quality: run.quality, verify: run.verify || undefined, b0Align: run.b0Align, crop: run.crop, cropMargin: run.cropMargin, ...phaseSettings,
  });
  // The run is planned once, and runs that plan. A registry network's weights still to download are its own files (size
  // and sha256 checked), whose reach the registry records: the plan comes first, so that a refused run downloads
  // nothing. Otherwise (local files; a spec, whose reach comes from its graph; --probe and --measure-speed, which run
  // the network) the weights are read first and the plan takes them; a spec without bytesPerVoxel is calibrated first.
  const local = weightSources.length > 0 && !weightSources.some(isFetchable);
  const weightsFirst = local || !entry || !!o.probe || !!o['measure-speed'] || !!o['weights-unverified'];
  let loaded = weightsFirst ? await loadNetworkWeights(o, entry, tessera, ctx) : null;
  if (loaded && uncosted(rawSpec)) await calibrateSpec(tessera, loaded.weights, spec, ctx);
  // The run's plan: with the reach the weights' graph gives (or the probe measures, or --context gives).
  const context = await runContext(o, entry, spec, loaded, tessera, ctx);
  const plan = await tessera.plan(defined({ ...request, weights: loaded?.weights, context, measureSpeed: o['measure-speed'] || undefined }));
  if (!plan.feasible) throw new CliError(plan.message, EXIT_USAGE, 'BudgetExceeded');
  signal.throwIfAborted();
  loaded ??= await loadNetworkWeights(o, entry, tessera, ctx);
  const { weights, weightsInfo } = loaded;

  const localField = entry?.quantity === 'local-field';
  const what = localField ? 'local field (ppm)' : 'χ (ppm)';
  for (const note of phaseInfo?.notes ?? []) progress.line(note);
  const mode = plan.wholeVolume
    ? (plan.crop ? `the mask's bounding box (${boxText(plan.crop)})` : 'whole volume')
    : isSplit(plan) ? `${boxName(plan.crop, geometry.dims)} (${boxText(plan.crop)}) in ${splitText(plan.crop.split)}` : `${plan.tilesActive} of ${plan.tilesTotal} tiles`;
  const phaseText = phaseNet
    ? `, ${echoes} echo${echoes > 1 ? 'es' : ''} (TE ${run.phase.te.map((t) => fmt(t * 1000)).join(', ')} ms), B0 ${b0 ?? byDefault('b0')} T${b0 === undefined ? ' (default; --b0 to change)' : ''}`
    : '';
  progress.line(
    `${o.model ?? `spec ${o.spec}`}: ${mode}${phaseText}, patch ${plan.patchDims?.join('×') ?? plan.patchEdge}, ` +
      `${plan.tilesInFlight} in flight, estimated peak ${size(plan.peakBytes)}`,
  );
  if (plan.explanation) progress.line(`plan: ${plan.explanation}${speedText(plan)}`);
  if (plan.b0Align?.resampled) progress.line(`B0: ${plan.b0Align.summary}`);
  if (plan.predictedFidelity && !plan.wholeVolume) progress.line(`predicted fidelity: ${fidelityText(plan)}; network reach: ${reachText(plan.context)}`);
  if (localField) progress.line(`${o.model}: the output is the local field (ppm), not χ`);
  if (plan.fidelityWarning) progress.line(`warning: ${plan.fidelityWarning}`);
  if (plan.warning) progress.line(`warning: ${plan.warning}`);
  const data = phaseNet ? defined({ phase, magnitude, inputNames: run.inputNames }) : defined({ field, inputNames: run.inputNames });
  // Counted before the run: the run takes the input volumes (transferred to the runtime, not copied).
  const voxelsInside = mask.reduce((a, b) => a + b, 0);
  let result;
  try {
    const onProgress = (p) => (p.stage === 'verify' ? null : progress.tiles(p));
    if (run.verify) progress.line('self-check: after the tiles, the largest box that runs whole is run and compared');
    result = await tessera.invert({ ...request, ...data, weights, plan, signal, onProgress, ...(loaded.unverified && { verifyWeights: false }) });
  } catch (e) {
    // The runtime names the API option; say the flag.
    if (e?.code === 'ModelLoadFailed' && /inputNames/.test(e.message ?? '')) e.message += ' (on the command line: --input-name ROLE=NAME, repeatable)';
    throw e;
  }
  const { chi, report } = result;
  progress.close();
  signal.throwIfAborted();
  if (report.verify) progress.line(`self-check: ${verifyText(report.verify)}`);
  // A heap over its plan is said even with --quiet: the next, larger run may stall.
  if (report.memory?.warning) process.stderr.write(`warning: ${report.memory.warning}\n`);

  const quantity = result.quantity ?? (localField ? 'local-field' : 'chi');
  const description = `${quantity === 'local-field' ? 'local field' : 'chi'} ppm, tessera-qsm ${o.model ?? 'spec'}`.slice(0, 79);
  const bytes = await writeNifti(chi.data, like, { gzip: /\.gz$/i.test(o.out), description });
  signal.throwIfAborted();
  const outputs = [{ file: o.out, bytes }];
  if (o.report !== undefined) {
    const input = phaseNet
      ? {
          phase: {
            path: o.phase, dims: geometry.dims, echoes, voxelMm: geometry.voxelMm, b0Dir: geometry.b0Dir, b0DirSource: like.b0DirSource,
            te: run.phase.te, b0Tesla: b0 ?? byDefault('b0'), units: phaseInfo.units, radPerUnit: phaseInfo.scale, rewrapped: phaseInfo.rewrapped,
            storedRange: phaseInfo.range, phaseSign: run.phase.phaseSign ?? byDefault('phaseSign'), erodeRadius: run.phase.erodeRadius ?? byDefault('erodeRadius'),
          },
          ...(o.magnitude !== undefined && { magnitude: { path: o.magnitude } }),
        }
      : { field: { path: o.field, dims: geometry.dims, voxelMm: geometry.voxelMm, b0Dir: geometry.b0Dir, b0DirSource: like.b0DirSource, units, b0Tesla: b0 ?? null } };
    const full = {
      ...report,
      plan: planForFile(plan),
      command: ['tessera-qsm', ...ctx.args],
      cwd: process.cwd(),
      versions: versions(),
      startedAt,
      totalWallSeconds: (performance.now() - t0) / 1000,
      quantity,
      inputs: { ...input, mask: { path: o.mask, voxelsInside }, ...(run.inputNames && { inputNames: run.inputNames }) },
      network: entry ? { model: entry.id, name: entry.name, kind: entry.kind } : { spec, specFile: o.spec },
      weights: weightsInfo,
      options: {
        tile: run.tile ?? null, whole: run.whole, workers: run.workers ?? null, threads: threads ?? null, cores: run.cores ?? null,
        quality: run.quality ?? null, verify: run.verify, probe: !!o.probe, contextFile: o.context ?? null, b0Align: run.b0Align ?? null,
      },
      output: o.out,
    };
    outputs.push({ file: o.report, bytes: `${JSON.stringify(full, null, 2)}\n` });
  }
  await writeAtomic(outputs, signal);
  if (phaseNet) progress.line(`wrote ${o.out}: ${what} (${echoes} echo${echoes > 1 ? 'es' : ''}, ${duration(report.wallSeconds)})`);
  else progress.line(`wrote ${o.out} (${report.tilesRun} tiles run, ${report.tilesSkipped} skipped, ${duration(report.wallSeconds)})`);
  return EXIT_OK;
}
