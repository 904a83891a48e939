// The dedicated driver worker: holds the Tessera wasm module (the C++ core plans, and its runs gather and scatter
// patches and compute between network calls, step by step on this thread) and the ONNX Runtime worker pools that run
// the networks. The page or the node
// main thread talks to it through index.js; nothing heavy ever runs on the caller's thread.
import { workerPort, hardwareConcurrency } from './platform.js';
import { loadTesseraModule } from './module.js';
import { WorkerPool } from './pool.js';
import { runSteps } from './driver.js';
import { TesseraError, errorToMessage, callModule } from './errors.js';
import { probeEdge, contextProfile } from './receptive-field.js';
import { calibrateNetwork } from './calibrate.js';
import { NETWORK_OPTIONS } from './request.js';

const port = workerPort();
let M = null;
let options = {};
const running = new Map(); // request id → AbortController
const livePools = new Set(); // pools of runs in progress (for status())

const call = callModule;

function toMask(mask, n) {
  if (mask === undefined || mask === null) return new Uint8Array(n).fill(1);
  if (mask.length !== n) {
    throw new TesseraError(`mask holds ${mask.length} values but the volume has ${n} voxels: field and mask must have the same dims`, 'InvalidArgument');
  }
  if (mask instanceof Uint8Array) return mask;
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = mask[i] ? 1 : 0;
  return out;
}

// Copies field (or, for phase networks, the wrapped phase of every echo), mask and an optional magnitude into
// a module Volume (views are taken right after each allocation and filled at once).
function makeVolume(geometry, field, mask, { echoes = 1, magnitude, what = 'field' } = {}) {
  const volume = call(() => new M.Volume(geometry, echoes));
  const n = volume.voxelCount();
  try {
    const fill = (data, name, view) => {
      if (!(data instanceof Float32Array)) throw new TesseraError(`${name} must be a Float32Array (x-fastest${echoes > 1 ? ', echo after echo' : ''})`, 'InvalidArgument');
      if (data.length !== n * echoes) {
        const dims = geometry.dims.join('×');
        if (what === 'phase' && data.length % n === 0) {
          throw new TesseraError(`${name} holds ${data.length / n} echo(es) of ${dims} but te gives ${echoes} echo time(s): give one TE per echo`, 'InvalidArgument');
        }
        const each = echoes > 1 ? ` (${echoes} echoes)` : '';
        throw new TesseraError(`${name} holds ${data.length} values but the volume ${dims}${each} has ${n * echoes}`, 'InvalidArgument');
      }
      view().set(data);
    };
    if (field !== undefined) fill(field, what, () => volume.fieldView());
    if (magnitude !== undefined && magnitude !== null) fill(magnitude, 'magnitude', () => volume.magnitudeView());
    volume.maskView().set(toMask(mask, n));
  } catch (e) {
    volume.delete();
    throw e;
  }
  return volume;
}

// Echoes of a phase-network request: one per TE.
function echoesOf(a) {
  return Array.isArray(a.te) ? Math.max(1, a.te.length) : 1;
}

function hardwareThreads() {
  return Math.max(1, options.hardwareThreads ?? hardwareConcurrency());
}

// tile "auto", {core: "auto"} or absent (the schema's default): the C++ auto-planner chooses core, workers and
// threads per worker, keeping the caller's workers / threadsPerWorker when they are given.
function isAuto(tile) {
  return tile === undefined || tile === null || tile === 'auto' || (typeof tile === 'object' && tile.core === 'auto');
}

function voxels(geometry) {
  const d = geometry?.dims;
  return Array.isArray(d) && d.length === 3 && d.every((x) => Number.isInteger(x) && x >= 1) ? d[0] * d[1] * d[2] : 0;
}

// The plan of a request, computed once in C++ (no volume is allocated: the mask crosses, and the field where a network
// reads it unmasked, so that a crop box holds every voxel the network sees), with the network's cost and where it came
// from (plan.cost).
function planOf(a, request) {
  const n = voxels(a.geometry);
  const mask = n ? toMask(a.mask, n) : undefined;
  const plan = call(() => (a.field !== undefined && a.field !== null ? M.planForField(a.geometry, mask, request, a.field) : M.plan(a.geometry, mask, request)));
  if (request.method === undefined) plan.cost = costOf(a); // a method runs no network: no network cost
  return plan;
}

const GB = (b) => (b >= 1e9 ? `${(b / 1e9).toFixed(2)} GB` : `${(b / 1e6).toFixed(1)} MB`);

/**
 * The memory cost a request plans with and where it came from: {source: 'registry' | 'declared' | 'calibrated' |
 * 'assumed', fixedBytes, bytesPerVoxel, ...}. a.calibration: what index.js measured for a spec without bytesPerVoxel.
 */
function costOf(a) {
  if (a.model) {
    const m = call(() => M.model(a.model));
    return { source: 'registry', fixedBytes: m.fixedBytes, bytesPerVoxel: m.bytesPerVoxel, provisional: m.costProvisional, note: m.costSource };
  }
  const spec = a.spec ?? {};
  if (a.calibration) {
    const c = a.calibration;
    return {
      source: 'calibrated', fixedBytes: c.fixedBytes, bytesPerVoxel: c.bytesPerVoxel, seconds: c.seconds, threads: c.threads,
      points: c.points, note: c.fit?.note,
    };
  }
  if (spec.bytesPerVoxel !== undefined) return { source: 'declared', fixedBytes: spec.fixedBytes ?? 0, bytesPerVoxel: spec.bytesPerVoxel };
  const schema = call(() => M.schema());
  const option = (name) => schema.find((o) => o.name === name)?.defaultValue;
  return {
    source: 'assumed',
    fixedBytes: spec.fixedBytes ?? option('spec.fixedBytes'),
    bytesPerVoxel: option('spec.bytesPerVoxel'),
    note: 'the spec declares no bytesPerVoxel and no weights were given to calibrate the network: the schema default is assumed',
  };
}

/** The heap guard of the ONNX Runtime workers: the C++ core's, or createTessera's workerHeapGuardBytes (tests). */
function heapGuardBytes() {
  return options.workerHeapGuardBytes ?? call(() => M.limits()).workerHeapGuardBytes;
}

/** A MemoryCeiling error of a run, with what the plan allowed and what to do. */
function ceilingError(e, a, plan) {
  const advice = a.model
    ? `the registry's cost for ${a.model} is too low for these weights: calibrate them (tessera-qsm calibrate --model ${a.model} --weights FILE) and run smaller patches (a smaller core) meanwhile`
    : 'the network needs more memory than its spec declares: leave bytesPerVoxel out of the spec to have it calibrated (tessera-qsm calibrate --weights net.onnx), or run smaller patches (a smaller core)';
  return new TesseraError(`${e.message}; the plan allowed ${GB(plan.bytesPerTile)} per tile: ${advice}`, 'MemoryCeiling');
}

/** The classical methods' names (the schema's method choices), read once from C++. */
let methodNames = null;
function methodsOf() {
  methodNames ??= call(() => M.schema()).find((o) => o.name === 'method').choices;
  return methodNames;
}

/** A method request: its name, every methods' parameter objects given (C++ refuses another method's), the threads. */
function methodRequestOf(a) {
  const r = { method: a.method, hardwareThreads: hardwareThreads(), magnitudeEchoes: a.magnitude ? 1 : 0 };
  for (const m of methodsOf()) if (a[m] !== undefined) r[m] = a[m];
  return r;
}

/**
 * The request a network run sends to C++: the schema's network options as given (request.js NETWORK_OPTIONS; C++
 * checks them), the network, its reach and speed, and the threads this runtime may use.
 */
function requestOf(a) {
  if (a.method !== undefined && a.method !== null) return methodRequestOf(a);
  const auto = isAuto(a.tile);
  const r = Object.fromEntries(NETWORK_OPTIONS.map((k) => [k, a[k]]));
  return {
    ...r,
    model: a.model,
    whole: !!a.whole,
    workers: auto ? a.workers : a.workers ?? options.workers ?? 1,
    threadsPerWorker: auto ? a.threadsPerWorker : undefined,
    hardwareThreads: hardwareThreads(),
    context: a.context,
    // With the probe's worker still kept for this run (takeWarm), no worker start-up is waited for.
    speed: a.speed && warm && a.warmKey === warm.key ? { ...a.speed, startSeconds: 0 } : a.speed,
    verify: !!a.verify,
  };
}

// The ONNX Runtime worker pools of a run: one per network file, k workers each (after the warm pool, if any, is given
// back: the memory plan counts only the run's own workers).
async function startPools(weights, { k, threadsPerWorker, spec, inputNames, executionProviders }) {
  await dropWarm();
  const pools = weights.map(
    (model) =>
      new WorkerPool({
        model,
        workers: k,
        threadsPerWorker,
        watchdogMs: options.watchdogMs,
        recycleHeapBytes: options.recycleHeapBytes,
        heapGuardBytes: heapGuardBytes(),
        ortWasmPaths: options.ortWasmPaths,
        ortModuleUrl: options.ortModuleUrl,
        inputRoles: spec?.inputs?.length > 1 ? spec.inputs : undefined, // multi-input networks only
        inputNames,
        workerUrl: options.ortWorkerUrl, // a replacement ort-worker.js (tests inject faults with one)
        executionProviders: executionProviders ?? options.executionProviders, // chosen per network (execution-provider.js)
        ortGpuModuleUrl: options.ortGpuModuleUrl,
      }),
  );
  for (const p of pools) livePools.add(p);
  return pools;
}

// The one-worker pool of the last speed probe (measureSpeed), kept for the run that follows so that the probe runs
// in the worker that will run the tiles (no second start-up): {key, pool, timer}. A run of the same weights (key: sha256
// and threads, from index.js) with the same threads and execution providers takes it; any other run, calibration or
// probe gives it back first, and so does warmIdleMs (default 5 min) without a run.
let warm = null;

function parkWarm(key, pool, eps) {
  const timer = setTimeout(() => dropWarm(), options.warmIdleMs ?? 300000);
  timer.unref?.();
  warm = { key, pool, timer, eps };
}

function dropWarm() {
  if (!warm) return Promise.resolve();
  clearTimeout(warm.timer);
  const { pool } = warm;
  warm = null;
  return stopPools([pool]);
}

// The warm pool, grown to k workers, when it can run these pools (one network file, the same key, threads and
// execution providers, and a heap the probe's patches grew no further than the plan allows a tile, since a wasm heap
// never shrinks); else null after giving it back.
async function takeWarm(key, { weights, k, threadsPerWorker, inputNames, executionProviders, bytesPerTile }) {
  const w = warm;
  const eps = (x) => JSON.stringify(x ?? options.executionProviders ?? ['wasm']);
  const s = w?.pool.stats();
  const fits = w && key && w.key === key && weights.length === 1 && !inputNames && s.threadsPerWorker === threadsPerWorker &&
    eps(w.eps) === eps(executionProviders) && s.heapHighWater <= bytesPerTile;
  if (!fits) {
    await dropWarm();
    return null;
  }
  clearTimeout(w.timer);
  warm = null;
  w.pool.grow(k);
  return w.pool;
}

async function stopPools(pools) {
  // Give back the never-shrinking ONNX Runtime heaps.
  await Promise.all(pools.map((p) => p.terminate().catch(() => {})));
  for (const p of pools) if (p.liveWorkers === 0) livePools.delete(p); // any left over stay visible in status()
}

/**
 * The self-check of a run (plan.verify): the plan's box cut from the volume and run whole on a fresh one-worker pool,
 * compared with the tiled χ away from the box's inner faces; plus the data-consistency residual of χ.
 * @returns {Promise<object>} report.verify
 */
async function verifyRun({ a, volume, request, plan, chi, spec, signal, onProgress }) {
  const v = plan.verify;
  const started = performance.now();
  if (!v) return { possible: false, message: 'the plan was made without verify: plan again with verify: true' };
  if (!v.possible) {
    const out = { possible: false, message: v.message };
    if (plan.wholeVolume) Object.assign(out, { exact: true, r: 1, nrmse: 0, maxAbs: 0 });
    return out;
  }
  const check = call(() => M.startVerification(volume, request, plan));
  let pools = [];
  try {
    const box = check.box();
    const boxRequest = { ...request, whole: true, tile: undefined };
    pools = await startPools([Array.isArray(a.weights) ? a.weights[0] : a.weights], { k: 1, threadsPerWorker: plan.threadsPerWorker || options.threadsPerWorker || 1, spec });
    await pools[0].ready();
    const progress = onProgress && ((p) => onProgress({ ...p, stage: 'verify' }));
    let boxChi;
    try {
      ({ chi: boxChi } = await runSteps(M, { volume: box, request: boxRequest, plan: v.plan, pools, signal, onProgress: progress }));
    } finally {
      box.delete();
    }
    const agreement = call(() => check.compare(chi, boxChi));
    const dataConsistency = call(() => check.dataConsistency(chi));
    const boxHeap = Math.max(0, ...pools[0].stats().perWorker.map((w) => w.heapHighWater));
    return {
      possible: true,
      exact: false,
      box: { lo: v.lo, hi: v.hi },
      ...agreement,
      predicted: plan.predictedFidelity,
      dataConsistency,
      workerHeapVsPlan: boxHeap / v.plan.bytesPerTile,
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    check.delete();
    await stopPools(pools);
  }
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
  const plan = a.plan ?? planOf(a, request);
  if (typeof plan !== 'object' || plan === null || plan.method === undefined) throw new TesseraError('plan must be the object plan() returned for this method request', 'InvalidArgument');
  if (!plan.feasible) throw new TesseraError(plan.message, 'BudgetExceeded');
  const volume = makeVolume(a.geometry, a.field, a.mask, { magnitude: a.magnitude });
  const controller = new AbortController();
  running.set(id, controller);
  try {
    const onProgress = (p) => port.post({ id, progress: { ...p, stage: a.method } });
    const { chi, report } = await runSteps(M, { volume, request, plan, signal: controller.signal, onProgress });
    const moduleHeapBytes = M.heapBytes();
    report.plan = plan;
    report.method = plan.method;
    report.memory = { moduleHeapBytes, estimatedPeakBytes: plan.peakBytes, moduleHeapVsPlan: moduleHeapBytes / plan.moduleHeapBytes };
    return { value: { chi, report, quantity: 'chi' }, transfer: [chi.buffer] };
  } finally {
    running.delete(id);
    volume.delete();
  }
}

/** The request a pipeline sends to C++: its options pass through as given (C++ reads and checks them), the volumes stay. */
function pipelineRequestOf(a) {
  const { phase, magnitude, mask, geometry, weights, model, spec, network, plan, ...options } = a;
  return { ...options, pipeline: true, maskGiven: mask !== undefined && mask !== null, magnitudeEchoes: magnitude ? 1 : 0, hardwareThreads: hardwareThreads() };
}

/**
 * From multi-echo phase to the local field (and χ with a method): the C++ pipeline on the step engine, every
 * intermediate returned; with a network (model or spec) its inversion of the local field follows (invert()).
 */
async function runPipeline(a, id) {
  if ((a.method !== undefined && a.method !== null) && (a.model !== undefined || a.spec !== undefined)) {
    throw new TesseraError('give a method or a network (model or spec) for the inversion, not both', 'InvalidArgument');
  }
  if (!Array.isArray(a.te) && typeof a.te !== 'number') throw new TesseraError('pipeline needs te: the echo times in seconds, one per echo (e.g. [0.004, 0.008])', 'InvalidArgument');
  const echoes = Array.isArray(a.te) ? Math.max(1, a.te.length) : 1;
  const request = pipelineRequestOf(a);
  const plan = planOf({ geometry: a.geometry, mask: a.mask }, request);
  if (!plan.feasible) throw new TesseraError(plan.message, 'BudgetExceeded');
  const volume = makeVolume(a.geometry, a.phase, a.mask, { echoes, magnitude: a.magnitude, what: 'phase' });
  const controller = new AbortController();
  running.set(id, controller);
  let out;
  try {
    const onProgress = (p) => port.post({ id, progress: { ...p, stage: 'pipeline' } });
    out = await runSteps(M, { volume, request, plan, signal: controller.signal, onProgress, collect: (run) => call(() => run.outputs()) });
  } finally {
    running.delete(id);
    volume.delete();
  }
  const { outputs, ...report } = out.report;
  report.plan = plan;
  report.memory = { moduleHeapBytes: M.heapBytes(), estimatedPeakBytes: plan.peakBytes };
  const value = { ...outputs, report };
  if (a.model !== undefined || a.spec !== undefined) {
    // The network inverts the local field on the mask it is defined on.
    const network = await methods.invert({ ...a.network, model: a.model, spec: a.spec, weights: a.weights, geometry: a.geometry, field: outputs.localField, mask: outputs.localMask }, id);
    value.chi = network.value.chi;
    value.networkReport = network.value.report;
  }
  const transfer = Object.values(value).filter((v) => ArrayBuffer.isView(v)).map((v) => v.buffer);
  return { value, transfer };
}

const methods = {
  async init(a) {
    options = a ?? {};
    // The C++ loops and FFTs of the classical methods and the physics loops run on this thread and up to
    // hardwareThreads - 1 more; nothing else in the module starts a thread.
    M = await loadTesseraModule({ pthreadPoolSize: Math.max(1, hardwareThreads() - 1), wasmBase: options.wasmBase });
    return { heapBytes: M.heapBytes() };
  },
  registry: () => call(() => M.registry()),
  // Runs in progress, live ONNX Runtime workers and the module's heap.
  status: () => ({
    running: running.size,
    liveWorkers: [...livePools].reduce((n, p) => n + p.liveWorkers, 0),
    warmWorkers: warm ? warm.pool.liveWorkers : 0, // kept by measureSpeed for the next run (counted in liveWorkers)
    moduleHeapBytes: M.heapBytes(),
  }),
  release: () => dropWarm().then(() => undefined),
  model: (a) => call(() => M.model(a.id)),
  limits: () => call(() => M.limits()),
  schema: () => call(() => M.schema()),
  patchFit: (a) => call(() => M.patchFit(a.tile, a.cost)),
  // The numerical head phantom: {chi, field, mask} (ppm), deterministic from the seed.
  phantom(a) {
    const p = call(() => M.phantom(a.geometry, { seed: a.seed ?? 1, noise: a.noise ?? 0 }));
    return { value: p, transfer: [p.chi.buffer, p.field.buffer, p.mask.buffer] };
  },
  plan: (a) => planOf(a, a.pipeline ? pipelineRequestOf(a) : requestOf(a)),
  pipeline: (a, id) => runPipeline(a, id),
  // The phantom head scanned: multi-echo phase and magnitude with the truths (χ, local, background and total fields).
  phantomScan(a) {
    const p = call(() => M.phantomScan(a.geometry, { seed: a.seed ?? 1, te: a.te, b0: a.b0, snr: a.snr ?? 0 }));
    return { value: p, transfer: Object.values(p).filter((v) => ArrayBuffer.isView(v)).map((v) => v.buffer) };
  },
  // The network's memory cost measured in fresh ONNX Runtime workers (calibrate.js; the fit in C++).
  async calibrate(a, id) {
    const entry = a.model ? call(() => M.model(a.model)) : null;
    const divisor = entry?.divisor ?? a.spec?.divisor ?? 1;
    call(() => M.patchFit({ core: 1, halo: 0 }, { divisor, bytesPerVoxel: 1 })); // the schema checks the divisor
    if (!(a.weights?.byteLength > 0)) throw new TesseraError('calibrate needs the network\'s weights (ONNX bytes)', 'InvalidArgument');
    const controller = new AbortController();
    running.set(id, controller);
    try {
      await dropWarm(); // its fresh workers measure the heap: no other worker holds memory meanwhile
      const threads = a.threadsPerWorker ?? options.threadsPerWorker ?? 1;
      const module = {
        calibrationEdges: (d, n) => call(() => M.calibrationEdges(d, n)),
        calibrationSlopeMeasured: (p) => call(() => M.calibrationSlopeMeasured(p)),
        fitCalibration: (p) => call(() => M.fitCalibration(p)),
      };
      let done = 0;
      const result = await calibrateNetwork({
        M: module,
        model: a.weights,
        divisor,
        threads,
        channels: entry?.inputChannels ?? 1,
        inputRoles: entry?.inputs?.length > 1 ? entry.inputs : undefined,
        poolOptions: { ortWasmPaths: options.ortWasmPaths, ortModuleUrl: options.ortModuleUrl, workerUrl: options.ortWorkerUrl, heapGuardBytes: heapGuardBytes() },
        signal: controller.signal,
        onPoint: (p) => port.post({ id, progress: { stage: 'calibrate', done: ++done, edge: p.edge, heapBytes: p.heapBytes } }),
      });
      if (controller.signal.aborted) throw new DOMException('the calibration was cancelled', 'AbortError');
      return result;
    } catch (e) {
      if (controller.signal.aborted || e?.name === 'AbortError') throw new DOMException('the calibration was cancelled', 'AbortError');
      throw new TesseraError(`calibration failed: ${e?.message ?? e}`, e?.code ?? 'RunnerFailed');
    } finally {
      running.delete(id);
    }
  },

  // A field resampled to its B0-aligned grid and back (what a run with b0Align does around its network).
  b0Resample(a) {
    const n = voxels(a.geometry);
    const r = call(() => M.b0Resample(a.geometry, a.field, n ? toMask(a.mask, n) : a.mask, { interpolation: a.interpolation, masked: a.masked }));
    return { value: r, transfer: [r.field.buffer, r.mask.buffer, r.back.buffer] };
  },
  async invert(a, id) {
    const request = requestOf(a);
    if (request.method !== undefined) return invertMethod(a, id, request);
    const weights = Array.isArray(a.weights) ? a.weights : [a.weights];
    const spec = a.model ? call(() => M.model(a.model)) : null;
    const phase = !!spec?.inputs.includes('phase'); // the registry says what a network takes
    if (phase && a.field !== undefined) {
      throw new TesseraError(`${spec.name} reconstructs from wrapped phase: give phase (rad), te (s) and b0 (T), not a field map`, 'InvalidArgument');
    }
    if (!phase && (a.phase !== undefined || a.magnitude !== undefined)) {
      throw new TesseraError('phase and magnitude are inputs of the phase networks (iqsm, iqfm, iqsm-plus); give this model a field', 'InvalidArgument');
    }
    // One plan per run: the caller's (from plan(), handed back) or made here; the run obeys exactly it.
    const plan = a.plan ?? planOf(a, request);
    if (typeof plan !== 'object' || plan === null || typeof plan.networks !== 'number') {
      throw new TesseraError('plan must be the object plan() returned for this request', 'InvalidArgument');
    }
    if (!plan.feasible) throw new TesseraError(plan.message, 'BudgetExceeded');
    if (weights.length !== plan.networks || weights.some((w) => !w || !w.byteLength)) {
      throw new TesseraError(`this model needs ${plan.networks} network file(s) (weights), got ${weights.filter(Boolean).length}`, 'InvalidArgument');
    }
    const moduleHeapBefore = M.heapBytes(); // the module heap never shrinks: what this run added is judged
    const volume = phase
      ? makeVolume(a.geometry, a.phase, a.mask, { echoes: echoesOf(a), magnitude: a.magnitude, what: 'phase' })
      : makeVolume(a.geometry, a.field, a.mask);
    // B0 off the third axis for a network that assumes it along it (plan.b0Align.resampled): the run goes through the
    // B0-aligned grid the plan was made on (C++ resamples the field there, and χ back below).
    let aligned = null;
    let runVolume = volume;
    if (plan.b0Align?.resampled) {
      try {
        aligned = call(() => M.alignB0(volume, request));
        runVolume = aligned.volume();
      } catch (e) {
        aligned?.delete();
        volume.delete();
        throw e;
      }
    }
    // Registered once the volume exists: a refusal before this point leaves no run behind.
    const controller = new AbortController();
    running.set(id, controller);
    let pools = [];
    let warmStart = false; // the run's first worker is the speed probe's (measureSpeed), already started
    try {
      const threadsPerWorker = plan.threadsPerWorker || a.threadsPerWorker || options.threadsPerWorker || 1;
      const k = Math.max(1, plan.tilesInFlight);
      const adopted = await takeWarm(a.warmKey, { weights, k, threadsPerWorker, inputNames: a.inputNames, executionProviders: a.executionProviders, bytesPerTile: plan.bytesPerTile });
      if (adopted) livePools.add(adopted);
      pools = adopted ? [adopted] : await startPools(weights, { k, threadsPerWorker, spec, inputNames: a.inputNames, executionProviders: a.executionProviders });
      await Promise.all(pools.map((p) => p.ready()));
      warmStart = !!adopted;
      if (controller.signal.aborted) throw new DOMException('the inversion was cancelled', 'AbortError');
      // Every progress event says which execution provider runs each network.
      const executionProvider = pools.map((p) => p.executionProvider.provider);
      const onProgress = (p) => port.post({ id, progress: { ...p, executionProvider } });
      let out;
      try {
        out = await runSteps(M, { volume: runVolume, request, plan, pools, signal: controller.signal, onProgress });
      } catch (e) {
        throw e?.code === 'MemoryCeiling' ? ceilingError(e, a, plan) : e;
      }
      const { report } = out;
      const runChi = out.chi; // on the grid the run went through (the B0-aligned one when resampled)
      const stats = pools.map((p) => p.stats());
      report.plan = plan;
      const workerHeapHighWater = stats.flatMap((s) => s.perWorker.map((w) => w.heapHighWater));
      const moduleHeapBytes = M.heapBytes();
      // The real run against the plan (C++: ratios, 1 = exact, above 1 the plan was too low; the figure to declare).
      const check = call(() => M.memoryCheck(request, plan, Math.max(0, ...workerHeapHighWater), moduleHeapBytes, moduleHeapBefore, a.model ?? 'the spec'));
      report.memory = {
        moduleHeapBytes,
        workerHeapHighWater,
        estimatedPeakBytes: plan.peakBytes,
        workerHeapVsPlan: check.workerHeapVsPlan,
        moduleHeapVsPlan: check.moduleHeapVsPlan,
        measuredBytesPerVoxel: check.measuredBytesPerVoxel,
        cost: plan.cost ?? costOf(a),
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
        report.verify = await verifyRun({ a, volume: runVolume, request, plan, chi: runChi, spec, signal: controller.signal, onProgress });
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
      running.delete(id);
      if (aligned) {
        runVolume.delete();
        aligned.delete();
      }
      volume.delete();
      await stopPools(pools); // at the end of every run
    }
  },
  // The measured context of a network (receptiveField({probe: true})): two whole runs of a phantom field patch with
  // the centre voxel raised and lowered by epsilon ppm; the response by distance.
  async probe(a, id) {
    const spec = a.model ? call(() => M.model(a.model)) : null;
    if (spec && !spec.tileable) throw new TesseraError(`${spec.name} is not a field → χ network: it has no receptive field to probe`, 'InvalidArgument');
    const cost = spec ? { divisor: spec.divisor, bytesPerVoxel: spec.bytesPerVoxel, fixedBytes: spec.fixedBytes } : a.spec;
    if (!cost) throw new TesseraError('give a registry model id (model) or a custom network spec (spec) to probe', 'InvalidArgument');
    const divisor = cost.divisor ?? 1;
    const reach = a.graph.global ? 64 : Math.max(1, a.graph.radiusMax);
    // The largest cube the single-patch limit allows (C++ does the arithmetic and fills an undeclared cost from the schema), and at most maxEdge (default 160).
    const fit = call(() => M.patchFit({ core: 1, halo: 0 }, { divisor, bytesPerVoxel: cost.bytesPerVoxel, fixedBytes: cost.fixedBytes }));
    const edge = probeEdge(reach, divisor, Math.min(fit.largestEdge, a.maxEdge ?? 160));
    const epsilon = a.epsilon ?? 0.1;
    const geometry = { dims: [edge, edge, edge], voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
    const base = call(() => M.phantom(geometry, { seed: 1, noise: 0 })).field;
    const mask = new Uint8Array(base.length).fill(1);
    const c = edge >> 1;
    const centre = c + edge * (c + edge * c);
    const request = { ...requestOf({ model: a.model, spec: a.spec, whole: true }), tile: undefined };
    const plan = planOf({ geometry, mask }, request);
    if (!plan.feasible) throw new TesseraError(`the probe patch (${edge}³) does not fit: ${plan.message}`, 'BudgetExceeded');
    const controller = new AbortController();
    running.set(id, controller);
    const started = performance.now();
    let pools = [];
    try {
      pools = await startPools([a.weights], { k: 1, threadsPerWorker: options.threadsPerWorker || 1, spec });
      await pools[0].ready();
      const out = [];
      for (const sign of [1, -1]) {
        if (controller.signal.aborted) throw new DOMException('the probe was cancelled', 'AbortError');
        const field = base.slice();
        field[centre] += sign * epsilon;
        const volume = makeVolume(geometry, field, mask);
        try {
          const { chi } = await runSteps(M, { volume, request, plan, pools, signal: controller.signal });
          out.push(chi);
        } finally {
          volume.delete();
        }
        port.post({ id, progress: { done: out.length, total: 2, stage: 'probe' } });
      }
      // χ is x-fastest: the network layout of the reversed dims.
      const profile = contextProfile(out[0], out[1], [edge, edge, edge], [c, c, c]);
      return { graph: a.graph, probe: { ...profile, edge, epsilon, seconds: (performance.now() - started) / 1000 } };
    } finally {
      running.delete(id);
      await stopPools(pools);
    }
  },
  // This machine's speed of a network (measureSpeed()): a one-worker pool runs whole phantom patches at two edges
  // (multiples of the divisor near 32 and 64), after one untimed warm-up patch; each edge's fastest of `repeats` runs
  // is its point. The fit of the points to the planner's model is C++'s (a request's speed).
  async measureSpeed(a, id) {
    const spec = a.model ? call(() => M.model(a.model)) : null;
    if (spec && !spec.tileable) throw new TesseraError(`${spec.name} is not tiled: its speed is not measured by patches`, 'InvalidArgument');
    const cost = spec ? { divisor: spec.divisor, bytesPerVoxel: spec.bytesPerVoxel, fixedBytes: spec.fixedBytes } : a.spec;
    if (!cost) throw new TesseraError('give a registry model id (model) or a custom network spec (spec) to measure its speed', 'InvalidArgument');
    const divisor = cost.divisor ?? 1;
    const fit = call(() => M.patchFit({ core: 1, halo: 0 }, { divisor, bytesPerVoxel: cost.bytesPerVoxel, fixedBytes: cost.fixedBytes }));
    const up = (e) => Math.ceil(e / divisor) * divisor;
    const small = up(32);
    const large = Math.min(Math.max(up(64), small + divisor), Math.floor(fit.largestEdge / divisor) * divisor);
    if (!(large > small)) throw new TesseraError(`the speed probe needs patches of ${small}³ and larger, but the single-patch limit allows ${fit.largestEdge}³`, 'BudgetExceeded');
    const threads = a.threads ?? 1;
    const repeats = Math.max(1, a.repeats ?? 2);
    const controller = new AbortController();
    running.set(id, controller);
    const started = performance.now();
    let pools = [];
    const runPatch = async (edge) => {
      if (controller.signal.aborted) throw new DOMException('the speed probe was cancelled', 'AbortError');
      const geometry = { dims: [edge, edge, edge], voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
      const field = call(() => M.phantom(geometry, { seed: 1, noise: 0 })).field;
      const mask = new Uint8Array(field.length).fill(1);
      const request = { ...requestOf({ model: a.model, spec: a.spec, whole: true }), tile: undefined };
      const plan = planOf({ geometry, mask }, request);
      if (!plan.feasible) throw new TesseraError(`the speed probe's ${edge}³ patch does not fit: ${plan.message}`, 'BudgetExceeded');
      const volume = makeVolume(geometry, field, mask);
      try {
        const t0 = performance.now();
        await runSteps(M, { volume, request, plan, pools, signal: controller.signal });
        return (performance.now() - t0) / 1000;
      } finally {
        volume.delete();
      }
    };
    try {
      pools = await startPools([a.weights], { k: 1, threadsPerWorker: threads, spec });
      await pools[0].ready();
      const ready = (performance.now() - started) / 1000;
      const first = await runPatch(small); // the first run of a session is slower: part of a worker's start
      const edges = [small, large];
      const best = [Infinity, Infinity];
      let done = 0;
      let total = 2 * repeats;
      const round = async (n) => {
        for (let e = 0; e < 2; e++) {
          for (let i = 0; i < n; i++) {
            best[e] = Math.min(best[e], await runPatch(edges[e]));
            port.post({ id, progress: { done: ++done, total, stage: 'speed' } });
          }
        }
      };
      await round(repeats);
      // A busy moment can make the larger patch look no slower (a small network's patches take milliseconds): up to
      // three more runs of each edge before the fit refuses the points as too noisy.
      for (let extra = 0; extra < 3 && !(best[1] > best[0]); extra++) {
        total += 2;
        await round(1);
      }
      const points = edges.map((edge, e) => ({ edge, threads, seconds: best[e] }));
      const startSeconds = ready + Math.max(0, first - points[0].seconds);
      // Kept for the run that follows (takeWarm), which then starts no worker of its own.
      const seconds = (performance.now() - started) / 1000;
      if (!a.warmKey || controller.signal.aborted) return { points, startSeconds, threads, seconds };
      const [pool] = pools;
      parkWarm(a.warmKey, pool, undefined);
      pools = []; // not stopped below
      return { points, startSeconds, threads, seconds, warmKey: a.warmKey, warmIdleSeconds: (options.warmIdleMs ?? 300000) / 1000, keptWorkers: pool.liveWorkers };
    } finally {
      running.delete(id);
      await stopPools(pools);
    }
  },
};

port.onMessage(async (msg) => {
  if (msg.cancel !== undefined) {
    running.get(msg.cancel)?.abort();
    return;
  }
  const { id, method, args } = msg;
  try {
    if (method !== 'init' && !M) throw new TesseraError('the runtime is not initialised', 'Internal');
    const f = methods[method];
    if (!f) throw new TesseraError(`unknown method ${method}`, 'Internal');
    const out = await f(args, id);
    if (out && out.transfer) port.post({ id, result: out.value }, out.transfer);
    else port.post({ id, result: out });
  } catch (e) {
    port.post({ id, error: errorToMessage(e) });
  }
});
