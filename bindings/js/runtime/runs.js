// The runs: a network's inversion of a field or of wrapped phase (invert), a classical method's (method), and the
// pipeline from multi-echo phase to the local field (and χ). Each runs its held plan on the C++ step engine
// (driver.js), cancelled by its request id; a network's tiles run in ONNX Runtime worker pools (sessions.js) and
// report what they used against the plan.
import { runSteps } from './driver.js';
import { TesseraError } from '../errors.js';
import { phaseNetworkWords } from '../request.js';
import { heapText } from './pool-workers.js';
import { rt, call, postProgress, hardwareThreads } from './context.js';
import { takePlan } from './plans.js';
import { makeVolume, echoesOf, planOf, costOf, requestOf, pipelineRequestOf, toMask } from './requests.js';
import { startPools, stopPools, takeSession } from './sessions.js';
import { verifyRun } from './verify.js';
import { planNetwork, settledNetwork } from './network-plan.js';

/**
 * The plan a run obeys, {handle (delete it after the run), view}: the one handed back (a.plan), checked against this
 * request (C++ reads it once and names what differs); else made here.
 */
function runPlan(a, request) {
  if (a.plan === undefined || a.plan === null) return planOf(a, request);
  const taken = takePlan(a.plan);
  try {
    call(() => taken.handle.check(a.geometry, request));
  } catch (e) {
    taken.handle.delete();
    throw e;
  }
  return taken;
}

/** A MemoryCeiling error of a run, with what the plan allowed and what to do. */
function ceilingError(e, a, plan) {
  const advice = a.model
    ? `the registry's cost for ${a.model} is too low for these weights: calibrate them (tessera-qsm calibrate --model ${a.model} --weights FILE) and run smaller patches (a smaller core) meanwhile`
    : 'the network needs more memory than its spec declares: leave bytesPerVoxel out of the spec to have it calibrated (tessera-qsm calibrate --weights net.onnx), or run smaller patches (a smaller core)';
  return new TesseraError(`${e.message}; the plan allowed ${heapText(plan.bytesPerTile)} per tile: ${advice}`, 'MemoryCeiling');
}

/**
 * A classical method (method: 'tv', ...) on the step engine: no ONNX Runtime worker; the C++ run does one iteration per
 * step and the loop lets a cancel in between. Returns {chi, report, quantity: 'chi'}.
 */
async function invertMethod(a, id, request) {
  for (const k of ['weights', 'phase', 'te']) {
    if (a[k] !== undefined && a[k] !== null) {
      throw new TesseraError(`method ${a.method} inverts a local field: ${k} belongs to a network (model or spec) or to pipeline()`, 'InvalidArgument');
    }
  }
  const { handle, view: plan } = runPlan(a, request);
  let volume = null;
  const controller = new AbortController();
  try {
    if (!plan.feasible) throw new TesseraError(plan.message, plan.refusal); // over the heap, or an input missing
    volume = makeVolume(a.geometry, a.field, a.mask, { magnitude: a.magnitude });
    rt.running.set(id, controller);
    const onProgress = (p) => postProgress(id, { ...p, stage: a.method });
    const { chi, report } = await runSteps(rt.M, { volume, plan: handle, signal: controller.signal, onProgress });
    const moduleHeapBytes = rt.M.heapBytes();
    report.plan = plan;
    report.method = plan.method;
    report.memory = { moduleHeapBytes, estimatedPeakBytes: plan.peakBytes, moduleHeapVsPlan: moduleHeapBytes / plan.moduleHeapBytes };
    return { value: { chi, report, quantity: 'chi' }, transfer: [chi.buffer] };
  } finally {
    rt.running.delete(id);
    volume?.delete();
    handle.delete();
  }
}

/**
 * From multi-echo phase (or a total field map: totalField, totalFieldUnits; or a phase difference: phaseDifference, deltaTE) to the local field (and χ with a method): the C++ pipeline on the step engine, every
 * intermediate returned; with a network (model or spec) its inversion of the local field follows (invert(): planned
 * as an invert() request of that local field is, network-plan.js).
 */
export async function runPipeline(a, id) {
  if ((a.method !== undefined && a.method !== null) && (a.model !== undefined || a.spec !== undefined)) {
    throw new TesseraError('give a method or a network (model or spec) for the inversion, not both', 'InvalidArgument');
  }
  const fromTotal = a.totalField !== undefined && a.totalField !== null;
  if (fromTotal && a.phase !== undefined && a.phase !== null) {
    throw new TesseraError('give phase (with te) or a total field map (totalField with totalFieldUnits), not both', 'InvalidArgument');
  }
  if (fromTotal && (a.totalFieldUnits === undefined || a.totalFieldUnits === null)) {
    throw new TesseraError("totalField needs totalFieldUnits: 'hz', 'rad/s' or 'ppm' (GE and Philips B0 maps are in Hz)", 'InvalidArgument');
  }
  if (!fromTotal && a.totalFieldUnits !== undefined && a.totalFieldUnits !== null) {
    throw new TesseraError('totalFieldUnits states the units of totalField: give the total field map as totalField', 'InvalidArgument');
  }
  const fromDiff = a.phaseDifference !== undefined && a.phaseDifference !== null;
  if (fromDiff && ((a.phase !== undefined && a.phase !== null) || fromTotal)) {
    throw new TesseraError('give one of phase (with te), totalField (with totalFieldUnits) or phaseDifference (with deltaTE)', 'InvalidArgument');
  }
  if (fromDiff && typeof a.deltaTE !== 'number') {
    throw new TesseraError('phaseDifference needs deltaTE: TE2 − TE1 of its two echoes, in seconds (e.g. 0.00246)', 'InvalidArgument');
  }
  if (!fromDiff && a.deltaTE !== undefined && a.deltaTE !== null) {
    throw new TesseraError('deltaTE is the echo-time difference of a phase difference: give the phase difference as phaseDifference', 'InvalidArgument');
  }
  if (!fromTotal && !fromDiff && !Array.isArray(a.te) && typeof a.te !== 'number') throw new TesseraError('pipeline needs te: the echo times in seconds, one per echo (e.g. [0.004, 0.008]), or a total field map (totalField with totalFieldUnits)', 'InvalidArgument');
  const echoes = fromTotal || fromDiff ? 1 : echoesOf(a);
  const request = pipelineRequestOf(a);
  const { handle, view: plan } = runPlan({ geometry: a.geometry, mask: a.mask, plan: a.plan }, request);
  let volume = null;
  const controller = new AbortController();
  let out;
  try {
    if (!plan.feasible) throw new TesseraError(plan.message, 'BudgetExceeded');
    volume = fromTotal
      ? makeVolume(a.geometry, a.totalField, a.mask, { magnitude: a.magnitude, what: 'totalField' })
      : fromDiff
        ? makeVolume(a.geometry, a.phaseDifference, a.mask, { echoes, magnitude: a.magnitude, what: 'phaseDifference' })
        : makeVolume(a.geometry, a.phase, a.mask, { echoes, magnitude: a.magnitude, what: 'phase' });
    rt.running.set(id, controller);
    const onProgress = (p) => postProgress(id, { ...p, stage: 'pipeline' });
    out = await runSteps(rt.M, { volume, plan: handle, signal: controller.signal, onProgress, collect: (run) => call(() => run.intermediates()) });
  } finally {
    rt.running.delete(id);
    volume?.delete();
    handle.delete();
  }
  const { outputs, ...report } = out.report;
  report.plan = plan;
  report.memory = { moduleHeapBytes: rt.M.heapBytes(), estimatedPeakBytes: plan.peakBytes };
  // Every step in order with its parameters and papers (C++ methods_text); the network's from the registry.
  report.methods = call(() => rt.M.pipelineMethods(request, request.maskGiven, a.model ?? ''));
  const value = { ...outputs, report };
  if (a.model !== undefined || a.spec !== undefined) {
    // The network inverts the local field on the mask it is defined on.
    const network = await invert({ ...a.network, model: a.model, spec: a.spec, weights: a.weights, geometry: a.geometry, field: outputs.localField, mask: outputs.localMask }, id);
    value.chi = network.value.chi;
    value.networkReport = network.value.report;
  }
  const transfer = Object.values(value).filter((v) => ArrayBuffer.isView(v)).map((v) => v.buffer);
  return { value, transfer };
}

/** A plan handed back to a network run ({handle, view} of runPlan) with the request settled (its warmKey). */
async function heldPlan(a, id) {
  const settled = await settledNetwork(a, id);
  return { ...runPlan(settled, requestOf(settled)), settled };
}

/**
 * invert(): a network (model or spec) on a field or on wrapped phase, or a classical method (invertMethod), under the
 * request's plan (held: handed back from plan(); else made here as plan() makes it, network-plan.js). Returns
 * {value: {chi, report, quantity}, transfer}.
 */
export async function invert(a, id) {
  if (a.method !== undefined && a.method !== null) return invertMethod(a, id, requestOf(a));
  const weights = Array.isArray(a.weights) ? a.weights : [a.weights];
  const spec = a.model ? call(() => rt.M.model(a.model)) : null;
  const phase = !!spec?.inputs.includes('phase'); // the registry says what a network takes
  if (phase && a.field !== undefined) {
    throw new TesseraError(`${spec.name} reconstructs from wrapped phase: give phase (rad), te (s) and b0 (T), not a field map`, 'InvalidArgument');
  }
  if (!phase && (a.phase !== undefined || a.magnitude !== undefined)) {
    throw new TesseraError(`phase and magnitude are inputs of the phase networks (${phaseNetworkWords()}); give this model a field`, 'InvalidArgument');
  }
  // One plan per run: the caller's (from plan(), handed back) or made here as plan() makes it; the run obeys exactly it.
  // settled: the request with its weights' sha256 (warmKey) and what it was planned with.
  const { handle, view: plan, settled } = a.plan !== undefined && a.plan !== null ? await heldPlan(a, id) : await planNetwork(a, id);
  const moduleHeapBefore = rt.M.heapBytes(); // the module heap never shrinks: what this run added is judged
  let volume;
  try {
    if (!plan.feasible) throw new TesseraError(plan.message, 'BudgetExceeded');
    if (weights.length !== plan.networks || weights.some((w) => !w || !w.byteLength)) {
      throw new TesseraError(`this model needs ${plan.networks} network file(s) (weights), got ${weights.filter(Boolean).length}`, 'InvalidArgument');
    }
    volume = phase
      ? makeVolume(a.geometry, a.phase, a.mask, { echoes: echoesOf(a), magnitude: a.magnitude, what: 'phase' })
      : makeVolume(a.geometry, a.field, a.mask);
    call(() => handle.checkVolume(volume)); // the volume the plan was made for, before any worker starts
  } catch (e) {
    volume?.delete();
    handle.delete();
    throw e;
  }
  // B0 off the third axis for a network that assumes it along it (plan.b0Align.resampled): the run goes through the
  // B0-aligned grid the plan was made on (C++ resamples the field there, and χ back below).
  let aligned = null;
  let runVolume = volume;
  let runHandle = handle; // the plan's run on runVolume
  if (plan.b0Align?.resampled) {
    try {
      aligned = call(() => rt.M.alignB0(volume, handle));
      runVolume = aligned.volume();
      runHandle = aligned.plan();
    } catch (e) {
      aligned?.delete();
      volume.delete();
      handle.delete();
      throw e;
    }
  }
  // Registered once the volume exists: a refusal before this point leaves no run behind.
  const controller = new AbortController();
  rt.running.set(id, controller);
  let pools = [];
  let warmStart = false; // the run's first worker is a kept session's (the speed probe's), already started
  try {
    const threadsPerWorker = plan.threadsPerWorker; // every plan states its threads (C++ fills the schema's default)
    const k = Math.max(1, plan.tilesInFlight);
    const adopted = await takeSession(settled.warmKey, { weights, k, threadsPerWorker, inputNames: a.inputNames, executionProviders: a.executionProviders, bytesPerTile: plan.bytesPerTile });
    pools = adopted ? [adopted] : await startPools(weights, { k, threadsPerWorker, spec, inputNames: a.inputNames, executionProviders: a.executionProviders });
    await Promise.all(pools.map((p) => p.ready()));
    warmStart = !!adopted;
    if (controller.signal.aborted) throw new DOMException('the inversion was cancelled', 'AbortError');
    // Every progress event says which execution provider runs each network.
    const executionProvider = pools.map((p) => p.executionProvider.provider);
    const onProgress = (p) => postProgress(id, { ...p, executionProvider });
    let out;
    try {
      out = await runSteps(rt.M, { volume: runVolume, plan: runHandle, pools, signal: controller.signal, onProgress });
    } catch (e) {
      throw e?.code === 'MemoryCeiling' ? ceilingError(e, a, plan) : e;
    }
    const { report } = out;
    const runChi = out.chi; // on the grid the run went through (the B0-aligned one when resampled)
    const stats = pools.map((p) => p.stats());
    report.plan = plan;
    const workerHeapHighWater = stats.flatMap((s) => s.perWorker.map((w) => w.heapHighWater));
    const moduleHeapBytes = rt.M.heapBytes();
    // The real run against the plan (C++: ratios, 1 = exact, above 1 the plan was too low; the figure to declare).
    const check = call(() => rt.M.memoryCheck(handle, Math.max(0, ...workerHeapHighWater), moduleHeapBytes, moduleHeapBefore, a.model ?? 'the spec'));
    report.memory = {
      moduleHeapBytes,
      workerHeapHighWater,
      estimatedPeakBytes: plan.peakBytes,
      workerHeapVsPlan: check.workerHeapVsPlan,
      moduleHeapVsPlan: check.moduleHeapVsPlan,
      measuredBytesPerVoxel: check.measuredBytesPerVoxel,
      cost: plan.cost ?? costOf(settled),
      ...(check.warning && { warning: check.warning }),
    };
    report.pool = stats.map((s, i) => ({
      warmStart,
      maxInFlight: s.maxInFlight,
      runs: s.runs,
      retries: s.retries,
      recycles: s.recycles,
      inputBinding: pools[i].inputBinding ?? undefined,
    }));
    // Per network file: the EP that ran, the preference, and why each preferred EP was skipped or fell back.
    report.executionProvider = pools.map((p) => p.executionProvider);
    if (a.verify) {
      await stopPools(pools); // the tiles' heaps go back before the check's box runs
      report.verify = await verifyRun({ a, volume: runVolume, handle: runHandle, plan, chi: runChi, spec, threadsPerWorker, signal: controller.signal, onProgress });
    }
    const chi = aligned ? call(() => aligned.restore(runChi)) : runChi;
    report.b0Align = plan.b0Align ?? null;
    // The run went through the aligned grid, where B0 is along z: the B0 warning is the plan's.
    const b0Warning = plan.b0Align?.warning;
    if (b0Warning && !report.warning?.includes(b0Warning)) report.warning = report.warning ? `${report.warning}; ${b0Warning}` : b0Warning;
    // What the output is: chi, or for iQFM the local field (both ppm).
    const quantity = spec?.quantity ?? 'chi';
    const value = { chi, report, quantity };
    if (quantity === 'local-field') value.localField = chi;
    return { value, transfer: [chi.buffer] };
  } finally {
    rt.running.delete(id);
    if (aligned) {
      runVolume.delete();
      runHandle.delete();
      aligned.delete();
    }
    volume.delete();
    handle.delete();
    await stopPools(pools); // at the end of every run
  }
}

/**
 * SWI from wrapped phase (kind 'swi': mask, echo fit, SWI, minIP) or R2* from the magnitude (kind 'r2star'): a C++
 * ContrastRun on the step engine, progress and cancel between steps like the other runs. Returns its outputs (typed
 * arrays) and the report.
 */
export async function runContrast(kind, a, id) {
  const { geometry, magnitude, phase, mask, ...options } = a;
  if (!geometry) throw new TesseraError(`${kind}: give the volumes as Volumes (readNifti / readEchoes) or give geometry`, 'InvalidArgument');
  const maskGiven = mask !== undefined && mask !== null;
  // The run plans its memory as it is made, and refuses (BudgetExceeded) one that does not fit before any input is copied.
  const run = call(() => rt.M.contrastRun(geometry, kind, { ...options, hardwareThreads: hardwareThreads() }, maskGiven));
  let plan;
  try {
    plan = call(() => run.plan());
    const echoes = run.echoes();
    const n = geometry.dims[0] * geometry.dims[1] * geometry.dims[2];
    const fill = (data, name, view) => {
      if (!(data instanceof Float32Array)) throw new TesseraError(`${kind}: ${name} must be a Float32Array (x-fastest, echo after echo)`, 'InvalidArgument');
      if (data.length !== n * echoes) {
        const held = data.length % n === 0 ? `${data.length / n} echo(es)` : `${data.length} values`;
        throw new TesseraError(`${kind}: ${name} holds ${held} of ${geometry.dims.join('×')} but te gives ${echoes} echo time(s): give one TE per echo`, 'InvalidArgument');
      }
      view().set(data);
    };
    if (magnitude === undefined || magnitude === null) throw new TesseraError(`${kind} needs the magnitude of every echo`, 'InvalidArgument');
    fill(magnitude, 'magnitude', () => run.magnitudeView());
    if (kind === 'swi') {
      if (phase === undefined || phase === null) throw new TesseraError('swi needs the wrapped phase of every echo (radians)', 'InvalidArgument');
      fill(phase, 'phase', () => run.phaseView());
    }
    if (maskGiven) run.maskView().set(toMask(mask, n));
    call(() => run.start());
  } catch (e) {
    run.delete();
    throw e;
  }
  const controller = new AbortController();
  rt.running.set(id, controller);
  let out;
  try {
    const onProgress = (p) => postProgress(id, { ...p, stage: kind });
    out = await runSteps(rt.M, { start: () => run, signal: controller.signal, onProgress, collect: (r) => call(() => r.outputs()) });
  } finally {
    rt.running.delete(id);
  }
  const { outputs, ...report } = out.report;
  report.plan = plan;
  const moduleHeapBytes = rt.M.heapBytes();
  report.memory = { moduleHeapBytes, estimatedPeakBytes: plan.moduleHeapBytes, moduleHeapVsPlan: moduleHeapBytes / plan.moduleHeapBytes };
  const value = { ...outputs, report };
  const transfer = Object.values(value).filter((v) => ArrayBuffer.isView(v)).map((v) => v.buffer);
  return { value, transfer };
}
