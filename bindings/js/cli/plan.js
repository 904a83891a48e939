// `tessera-qsm plan`, and the run options invert and plan share: the request flags (from the schema, checked by
// flags.js parse) combined into the request, with the command line's rules for which flags go together.
import { EXIT_OK, EXIT_USAGE, usageError } from './errors.js';
import { readSpec, checkSpec } from './files.js';
import { flagName, PHASE_OPTIONS } from './flags.js';
import { planTable, planForFile, size, GB } from './format.js';
import { checkInputKind, loadNetworkWeights, runContext, uncosted, calibrateSpec, defined } from './network.js';
import { readInputs, readInputHeader } from './read-inputs.js';
import { wholeNumber, inputNames, keyValues } from './values.js';
import { phaseNetworkWords } from '../request.js';

/** Flags that only make sense with --phase (the phase networks). */
const PHASE_ONLY = [...PHASE_OPTIONS.map(flagName), 'magnitude', 'phase-units', 'phase-scale'];

/**
 * The run options of invert and plan: the request's tile, planning and phase settings, checked together.
 * o: the parsed flags; values: the request flags' checked values by schema name (flags.js parse).
 */
export function runOptions(command, o, values) {
  const see = `see \`tessera-qsm ${command} --help\``;
  if (o.field === undefined && o.phase === undefined) {
    throw usageError(`--field (a local field map) or --phase (wrapped phase, for ${phaseNetworkWords()}) is required; ${see}`);
  }
  if (o.field !== undefined && o.phase !== undefined) {
    throw usageError(`--field and --phase exclude each other: field networks take a local field map, the phase networks (${phaseNetworkWords()}) a wrapped phase; ${see}`);
  }
  if ((o.model === undefined) === (o.spec === undefined)) {
    throw usageError(`give exactly one of --model ID or --spec net.json; ${see}`);
  }
  const [core, halo, stride, blend] = ['tile.core', 'tile.halo', 'tile.stride', 'tile.blend'].map((k) => values.get(k));
  const whole = !!values.get('whole');
  const cores = wholeNumber(o.cores, 'cores', 1);
  if (whole && (core !== undefined || halo !== undefined)) throw usageError('--whole runs the volume at once: it takes no --core or --halo');
  if ((stride !== undefined || blend !== undefined) && core === undefined) {
    throw usageError('--stride and --blend shape a tiling of a given --core (without --core the auto-planner chooses them)');
  }
  const b0 = values.get('b0');
  let phase;
  if (o.phase !== undefined) {
    if (o.spec !== undefined) {
      throw usageError(`--phase needs a phase network (--model ${phaseNetworkWords('or')}); --spec describes a field-to-χ network, which takes --field`);
    }
    if (o.units !== undefined) throw usageError('--units is for --field; the phase is in radians (see --phase-units and --phase-scale)');
    if (core !== undefined || halo !== undefined) {
      throw usageError(`the phase networks (${phaseNetworkWords()}) run on the whole volume (they cannot be tiled): they take no --core or --halo`);
    }
    const te = values.get('te');
    if (te === undefined && command === 'invert') {
      throw usageError('--phase needs --te: the echo time in seconds, one per echo (e.g. --te 0.02, or --te 0.01,0.02 for two echoes)');
    }
    const units = o['phase-units']?.toLowerCase();
    if (units !== undefined && !['rad', 'deg', 'scanner'].includes(units)) throw usageError(`--phase-units must be rad, deg or scanner, got '${o['phase-units']}'`);
    let scale;
    if (o['phase-scale'] !== undefined) {
      if (units !== undefined) throw usageError('give --phase-units or --phase-scale, not both');
      scale = Number(o['phase-scale']);
      if (o['phase-scale'].trim() === '' || !Number.isFinite(scale) || scale === 0) {
        throw usageError(`--phase-scale must be a nonzero number (radians per stored unit, e.g. 0.000767 = π/4096), got '${o['phase-scale']}'`);
      }
    }
    phase = { te, b0, erodeRadius: values.get('erodeRadius'), phaseSign: values.get('phaseSign'), units, scale };
  } else {
    const given = PHASE_ONLY.filter((k) => o[k] !== undefined);
    if (given.length) {
      throw usageError(`${given.map((k) => `--${k}`).join(', ')} ${given.length > 1 ? 'are' : 'is'} for --phase (the phase networks ${phaseNetworkWords()}), not --field`);
    }
  }
  // Without --core the C++ auto-planner chooses the core (and, unless given, the halo, stride, workers and threads).
  const fixed = core !== undefined ? defined({ core, halo, stride, blend }) : undefined;
  const tile = whole || phase ? undefined : fixed ?? (halo !== undefined ? { core: 'auto', halo } : 'auto');
  const quality = values.get('quality');
  if (quality !== undefined && (core !== undefined || whole || phase)) {
    throw usageError('--quality steers the auto-planner: it takes no --core, --whole or --phase (those fix the run)');
  }
  if ((o.verify || o.probe || o.context !== undefined || o['measure-speed']) && phase) {
    throw usageError('--verify, --probe, --context and --measure-speed are for the field networks (the phase networks run on the whole volume)');
  }
  const b0Align = values.get('b0Align');
  if (b0Align !== undefined && phase) throw usageError('--b0-align is for the field networks (iQSM+ takes the B0 direction itself; iQSM and iQFM warn)');
  const crop = values.get('crop');
  if (crop !== undefined && (phase || whole || core !== undefined)) throw usageError('--crop steers the auto-planner of the field networks: it takes no --whole, --core or --phase');
  const cropMargin = values.get('cropMargin');
  if (cropMargin !== undefined && (phase || whole || core !== undefined || crop === 'off')) {
    throw usageError('--crop-margin sizes the auto-planner\'s crop to the mask: it takes no --whole, --core, --phase or --crop off');
  }
  return {
    tile, whole, workers: values.get('workers'), threads: values.get('threadsPerWorker'), cores, b0, phase, quality, verify: !!o.verify, b0Align, crop,
    cropMargin, inputNames: inputNames(o['input-name']),
  };
}

/** `tessera-qsm plan`: the plan of a run as a table (or JSON); exit 2 when the planner refuses it. */
export async function cmdPlan(o, ctx) {
  if (o.pipeline || ctx.values.get('method') !== undefined) return cmdPlanClassical(o, ctx);
  const run = runOptions('plan', o, ctx.values);
  const { signal } = ctx;
  const rawSpec = o.spec !== undefined ? await readSpec(o.spec, signal) : undefined;
  const { geometry, mask, echoes } = await readInputs(o, { needMask: false, phase: run.phase }, signal);
  const tessera = await ctx.start(defined({ workers: run.workers, threadsPerWorker: run.threads, hardwareThreads: run.cores }));
  const spec = checkSpec(rawSpec, ctx.schema, o.spec);
  const entry = o.model !== undefined ? await tessera.model(o.model) : undefined;
  const phaseNet = await checkInputKind(o, entry, run, tessera);
  const limits = await tessera.limits();
  // The echo times do not change the plan, only their number: without --te, one placeholder per echo.
  const phase = phaseNet
    ? { te: run.phase.te ?? new Array(echoes).fill(0.02), b0: run.b0, erodeRadius: run.phase.erodeRadius, phaseSign: run.phase.phaseSign }
    : {};
  // With --weights (or --probe) the planner knows the network's reach from its graph (or the probe; --context: a
  // probe's of earlier).
  let loaded = null;
  if (o.weights?.length || o.probe || o['measure-speed']) {
    if (o.spec !== undefined && !o.weights?.length) throw usageError('--probe and --measure-speed with --spec need --weights FILE (the ONNX network)');
    loaded = await loadNetworkWeights(o, entry, tessera, ctx);
    if (uncosted(rawSpec)) await calibrateSpec(tessera, loaded.weights, spec, ctx);
  }
  const weights = loaded?.weights;
  const context = await runContext(o, entry, spec, loaded, tessera, ctx);
  const request = {
    geometry, mask, model: o.model, spec, tile: run.tile, whole: run.whole, workers: run.workers, threadsPerWorker: run.threads, quality: run.quality,
    verify: run.verify || undefined, b0Align: run.b0Align, crop: run.crop, cropMargin: run.cropMargin, weights, context,
    measureSpeed: o['measure-speed'] || undefined, ...phase,
  };
  const plan = await tessera.plan(defined(request));
  if (o.json) ctx.out(`${JSON.stringify(planForFile(plan), null, 2)}\n`);
  else {
    const maskVoxels = mask ? mask.reduce((a, b) => a + b, 0) : undefined;
    ctx.out(planTable(plan, limits, { o, run, entry, spec, geometry, maskVoxels, echoes }));
  }
  return plan.feasible ? EXIT_OK : EXIT_USAGE;
}

/**
 * The plan of a classical run (a pipeline's, pipeline: true, or a method's) from its input's header alone (readHeader),
 * before any image is read. head: readHeader's result; request: the run's options (te, b0, method, its parameters,
 * stage options, totalFieldUnits, model); given: {mask, magnitude} the files given (only whether they are counts).
 */
export function headerPlan(tessera, head, request, given = {}) {
  const geometry = { dims: head.dims, voxelMm: head.voxelMm, b0Dir: head.b0Dir };
  const n = head.dims[0] * head.dims[1] * head.dims[2];
  // A mask file counts as given (the plan copies the mask: ones of the volume's size stand in for it, unread).
  const mask = given.mask ? new Uint8Array(n).fill(1) : undefined;
  return tessera.plan(defined({ ...request, geometry, mask, magnitude: given.magnitude ? true : undefined }));
}

/**
 * A refused classical plan in the command line's words: what the run needs of node's wasm32 heap, its safe limit and
 * the largest crop that fits. what: the run ("the pipeline on 320×320×200 with 6 echoes"); limits: tessera.limits();
 * advice: what else to do.
 */
export function heapRefusal(plan, what, limits, advice) {
  return `${what} needs ${size(plan.moduleHeapBytes)} of the module heap, over the ${GB(limits.computeHeapLimitBytes)} that ` +
    `node's 32-bit WebAssembly heap can safely hold (its ceiling is ${GB(limits.heapCeilingBytes)} whatever the machine's memory): ` +
    `the largest crop that fits is about ${plan.largestDims.join('×')} (${plan.largestVoxels} voxels); crop the volume to the ` +
    `head (e.g. to the mask's bounding box)${advice ? `, ${advice}` : ''}`;
}

/**
 * A refused classical plan's words: over the heap, heapRefusal's (node's heap, the largest crop); else the planner's
 * own (e.g. MEDI without a magnitude).
 */
export function refusalText(plan, what, limits, advice) {
  return plan.moduleHeapBytes > limits.computeHeapLimitBytes && plan.largestDims ? heapRefusal(plan, what, limits, advice) : plan.message;
}

/** A pipeline's run in words: "the pipeline on 320×320×200 with 6 echoes" (or "from a total field"). */
export function pipelineWhat(dims, echoes, fromTotal) {
  return `the pipeline on ${dims.join('×')} ${fromTotal ? 'from a total field' : `with ${echoes} echo${echoes > 1 ? 'es' : ''}`}`;
}

/** The lines `plan --method` and `plan --pipeline` print: the module heap planned, the limit and whether it fits. */
function classicalPlanText(plan, what, limits, advice) {
  const lines = [
    `${what}`,
    `  stages          ${plan.stages ? plan.stages.join(' → ') : plan.title}`,
    `  module heap     ${size(plan.moduleHeapBytes)} planned (inputs ${size(plan.inputBytes)}, workspace ${size(plan.workspaceBytes)}, with the heap's growth slack)`,
    `  limit           ${GB(limits.computeHeapLimitBytes)} (node's 32-bit WebAssembly heap, ceiling ${GB(limits.heapCeilingBytes)})`,
    `  fits            ${plan.feasible ? 'yes' : 'no'}`,
  ];
  if (!plan.feasible) lines.push(`  refused         ${refusalText(plan, what, limits, advice)}`);
  return `${lines.join('\n')}\n`;
}

/**
 * `tessera-qsm plan --method M --field F` and `tessera-qsm plan --pipeline --phase P --te ... (--method M | --model ID)`
 * (or `--total-field F --units U`): a classical run's module-heap plan from the input's header alone (nothing else is
 * read), printed with its limit and whether it fits (--json: the plan); exit 2 when it does not fit.
 */
export async function cmdPlanClassical(o, ctx) {
  const see = 'see `tessera-qsm plan --help`';
  const { values, signal } = ctx;
  const method = values.get('method');
  const params = keyValues(o.param);
  const given = { mask: o.mask !== undefined, magnitude: o.magnitude !== undefined };
  let head;
  let request;
  let what;
  let advice;
  if (o.pipeline) {
    const fromTotal = o['total-field'] !== undefined;
    if (fromTotal === (o.phase !== undefined)) throw usageError(`plan --pipeline needs --phase (with --te) or --total-field (with --units); ${see}`);
    if ((method === undefined) === (o.model === undefined)) throw usageError(`plan --pipeline needs one inversion: --method NAME or --model ID; ${see}`);
    if (!given.mask && !given.magnitude) throw usageError('plan --pipeline needs --mask, or --magnitude to make the mask from (as pipeline does)');
    const te = values.get('te');
    const units = o.units?.toLowerCase();
    if (fromTotal && !['hz', 'rad/s', 'ppm'].includes(units)) throw usageError(`--total-field needs --units hz, rad/s or ppm; ${see}`);
    if (!fromTotal && te === undefined) throw usageError('--te is required: the echo times in seconds, one per echo');
    head = await readInputHeader(fromTotal ? { ...o, field: o['total-field'] } : o, fromTotal ? 'field' : 'phase', { te: fromTotal ? undefined : te, signal });
    const { stageOptions } = await import('./pipeline.js');
    request = {
      pipeline: true, te, b0: values.get('b0'), ...stageOptions(o.option, ctx.schema), method, [method ?? '-']: method && Object.keys(params).length ? params : undefined,
      model: o.model, totalFieldUnits: fromTotal ? units : undefined,
    };
    delete request['-'];
    what = pipelineWhat(head.dims, head.echoes, fromTotal);
    advice = fromTotal ? '' : 'or give fewer echoes';
  } else {
    if (o.field === undefined) throw usageError(`plan --method inverts a local field map: give --field; ${see}`);
    head = await readInputHeader(o, 'field', { signal });
    request = { method, [method]: Object.keys(params).length ? params : undefined };
    what = `${method} on ${head.dims.join('×')}`;
    advice = 'or choose a method with less memory (tkd, tikhonov)';
  }
  const tessera = await ctx.start({ hardwareThreads: wholeNumber(o.cores, 'cores', 1) });
  const plan = await headerPlan(tessera, head, request, given);
  const limits = await tessera.limits();
  if (o.json) ctx.out(`${JSON.stringify(planForFile(plan), null, 2)}\n`);
  else ctx.out(classicalPlanText(plan, what, limits, advice));
  return plan.feasible ? EXIT_OK : EXIT_USAGE;
}
