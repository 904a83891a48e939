// The dedicated driver worker: holds the Tessera wasm module (whose C++ driver threads plan, gather
// and scatter tiles) and the ONNX Runtime worker pools that run the networks. The page or the node
// main thread talks to it through index.js; nothing heavy ever runs on the caller's thread.
import { workerPort, hardwareConcurrency } from './platform.js';
import { loadTesseraModule } from './module.js';
import { WorkerPool } from './pool.js';
import { runInversion, runSteps } from './driver.js';
import { TesseraError, errorToMessage, callModule } from './errors.js';

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

// The plan of a request, computed once in C++ (no volume is allocated: only the mask crosses).
function planOf(a, request) {
  const n = voxels(a.geometry);
  return call(() => M.plan(a.geometry, n ? toMask(a.mask, n) : undefined, request));
}

function requestOf(a) {
  const auto = isAuto(a.tile);
  return {
    model: a.model,
    spec: a.spec,
    whole: !!a.whole,
    tile: a.tile,
    workers: auto ? a.workers : a.workers ?? options.workers ?? 1,
    threadsPerWorker: auto ? a.threadsPerWorker : undefined,
    hardwareThreads: hardwareThreads(),
    te: a.te,
    b0: a.b0,
    erodeRadius: a.erodeRadius,
    phaseSign: a.phaseSign,
  };
}

const methods = {
  async init(a) {
    options = a ?? {};
    const workers = Math.max(1, options.workers ?? 1, hardwareThreads());
    // Driver thread + one thread per tile in flight (the auto-planner may use every core) + a spare.
    M = await loadTesseraModule({ pthreadPoolSize: workers + 2, wasmBase: options.wasmBase });
    return { heapBytes: M.heapBytes() };
  },
  registry: () => call(() => M.registry()),
  // Runs in progress, live ONNX Runtime workers and the module's heap.
  status: () => ({
    running: running.size,
    liveWorkers: [...livePools].reduce((n, p) => n + p.liveWorkers, 0),
    moduleHeapBytes: M.heapBytes(),
  }),
  model: (a) => call(() => M.model(a.id)),
  limits: () => call(() => M.limits()),
  schema: () => call(() => M.schema()),
  patchFit: (a) => call(() => M.patchFit(a.tile, a.cost)),
  // The numerical head phantom: {chi, field, mask} (ppm), deterministic from the seed.
  phantom(a) {
    const p = call(() => M.phantom(a.geometry, { seed: a.seed ?? 1, noise: a.noise ?? 0 }));
    return { value: p, transfer: [p.chi.buffer, p.field.buffer, p.mask.buffer] };
  },
  // TKD (truncated k-space division): the classical reference inversion.
  tkd(a) {
    const volume = makeVolume(a.geometry, a.field, a.mask);
    try {
      const chi = call(() => M.tkd(volume, a.threshold ?? 0.19));
      return { value: chi, transfer: [chi.buffer] };
    } finally {
      volume.delete();
    }
  },
  plan: (a) => planOf(a, requestOf(a)),
  async invert(a, id) {
    const request = requestOf(a);
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
    if (typeof plan !== 'object' || plan === null || typeof plan.steps !== 'boolean' || typeof plan.networks !== 'number') {
      throw new TesseraError('plan must be the object plan() returned for this request', 'InvalidArgument');
    }
    if (!plan.feasible) throw new TesseraError(plan.message, 'BudgetExceeded');
    if (weights.length !== plan.networks || weights.some((w) => !w || !w.byteLength)) {
      throw new TesseraError(`this model needs ${plan.networks} network file(s) (weights), got ${weights.filter(Boolean).length}`, 'InvalidArgument');
    }
    const volume = phase
      ? makeVolume(a.geometry, a.phase, a.mask, { echoes: echoesOf(a), magnitude: a.magnitude, what: 'phase' })
      : makeVolume(a.geometry, a.field, a.mask);
    // Registered once the volume exists: a refusal before this point leaves no run behind.
    const controller = new AbortController();
    running.set(id, controller);
    let pools = [];
    try {
      const threadsPerWorker = plan.threadsPerWorker || a.threadsPerWorker || options.threadsPerWorker || 1;
      const k = Math.max(1, plan.tilesInFlight);
      pools = weights.map(
        (model) =>
          new WorkerPool({
            model,
            workers: k,
            threadsPerWorker,
            watchdogMs: options.watchdogMs,
            recycleHeapBytes: options.recycleHeapBytes,
            ortWasmPaths: options.ortWasmPaths,
            ortModuleUrl: options.ortModuleUrl,
            inputRoles: spec?.inputs?.length > 1 ? spec.inputs : undefined, // multi-input networks only
            inputNames: a.inputNames,
            workerUrl: options.ortWorkerUrl, // a replacement ort-worker.js (tests inject faults with one)
          }),
      );
      for (const p of pools) livePools.add(p);
      await Promise.all(pools.map((p) => p.ready()));
      if (controller.signal.aborted) throw new DOMException('the inversion was cancelled', 'AbortError');
      const onProgress = (p) => port.post({ id, progress: p });
      const { chi, report } = plan.steps
        ? await runSteps(M, { volume, request, plan, pool: pools[0], signal: controller.signal, onProgress })
        : await runInversion(M, { volume, request, plan, pools, signal: controller.signal, onProgress });
      const stats = pools.map((p) => p.stats());
      report.plan = plan;
      const workerHeapHighWater = stats.flatMap((s) => s.perWorker.map((w) => w.heapHighWater));
      const moduleHeapBytes = M.heapBytes();
      report.memory = {
        moduleHeapBytes,
        workerHeapHighWater,
        estimatedPeakBytes: plan.peakBytes,
        // The real run against the planner's estimate (1 = exact; above 1 the estimate was too low).
        workerHeapVsPlan: Math.max(0, ...workerHeapHighWater) / plan.bytesPerTile,
        moduleHeapVsPlan: moduleHeapBytes / plan.moduleHeapBytes,
      };
      report.pool = stats.map((s, i) => ({
        maxInFlight: s.maxInFlight,
        runs: s.runs,
        retries: s.retries,
        recycles: s.recycles,
        inputBinding: pools[i].inputBinding ?? undefined,
      }));
      // What the output is: chi, or for iQFM the local field (both ppm).
      const quantity = spec?.quantity ?? 'chi';
      const value = { chi, report, quantity };
      if (quantity === 'local-field') value.localField = chi;
      return { value, transfer: [chi.buffer] };
    } finally {
      running.delete(id);
      volume.delete();
      // Give back the never-shrinking ONNX Runtime heaps at the end of every run.
      await Promise.all(pools.map((p) => p.terminate().catch(() => {})));
      for (const p of pools) if (p.liveWorkers === 0) livePools.delete(p); // any left over stay visible in status()
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
