// The dedicated driver worker: holds the Tessera wasm module (the C++ core plans, and its runs gather and scatter
// patches and compute between network calls, step by step on this thread) and the ONNX Runtime worker pools that run
// the networks. The page or the node main thread talks to it through index.js; nothing heavy ever runs on the
// caller's thread. This file routes the messages; the work is in runtime/: the requests (requests.js), a network
// request's planning (network-plan.js) and its graph, read here once per weights sha256 (graphs.js), the plans it
// holds (plans.js), the runs (runs.js), the pools and the session cache (sessions.js), the self-check (verify.js),
// calibration (calibration.js) and the probes (probes.js).
import { workerPort } from '../platform.js';
import { loadTesseraModule } from '../module.js';
import { TesseraError, errorToMessage } from '../errors.js';
import { rt, call, hardwareThreads } from './context.js';
import { toMask, voxels, planOf, requestOf, pipelineRequestOf } from './requests.js';
import { holdPlan } from './plans.js';
import { invert, runPipeline, runContrast } from './runs.js';
import { calibrated } from './calibration.js';
import { probeContext, measureSpeed, forgetSpeeds } from './probes.js';
import { dropSessions, keptWorkers } from './sessions.js';
import { planNetwork } from './network-plan.js';
import { firstWeights, graphOfBytes } from './graphs.js';
import { graphReads } from '../onnx-graph.js';

rt.port = workerPort();

// A run that answers with its output volumes' geometry, the request's as C++ read it (its defaults filled), so that
// index.js's Volumes restate no default; a failed pipeline's finished stages (error.intermediates) carry it too.
const withGeometry = (run) => async (a, id) => {
  const geometry = () => call(() => rt.M.volumeGeometry(a.geometry));
  try {
    const out = await run(a, id);
    out.value.geometry = geometry();
    return out;
  } catch (e) {
    if (e?.intermediates && !e.intermediates.geometry) e.intermediates.geometry = geometry();
    throw e;
  }
};

const methods = {
  async init(a) {
    rt.options = a ?? {};
    // The C++ loops and FFTs of the classical methods and the physics loops run on this thread and up to
    // hardwareThreads - 1 more; nothing else in the module starts a thread.
    rt.M = await loadTesseraModule({ pthreadPoolSize: Math.max(1, hardwareThreads() - 1), wasmBase: rt.options.wasmBase });
    // Their stacks, allocated now at the heap's bottom and kept (the plans count hardwareThreads - 1 of them).
    rt.M.reserveThreadStacks(hardwareThreads() - 1);
    return { heapBytes: rt.M.heapBytes() };
  },
  registry: () => call(() => rt.M.registry()),
  // Runs in progress, live ONNX Runtime workers and the module's heap.
  status: () => ({
    running: rt.running.size,
    liveWorkers: [...rt.livePools].reduce((n, p) => n + p.liveWorkers, 0),
    warmWorkers: keptWorkers(), // kept by measureSpeed for the next run (counted in liveWorkers)
    moduleHeapBytes: rt.M.heapBytes(),
    moduleHeapBreakBytes: rt.M.heapBreakBytes?.(), // what the allocator took (its high-water); the heap adds growth slack
  }),
  release: () => dropSessions().then(() => undefined),
  model: (a) => call(() => rt.M.model(a.id)),
  limits: () => call(() => rt.M.limits()),
  schema: () => call(() => rt.M.schema()),
  // The numerical head phantom: {chi, field, mask} (ppm), deterministic from the seed.
  phantom(a) {
    const p = call(() => rt.M.phantom(a.geometry, { seed: a.seed ?? 1, noise: a.noise ?? 0 }));
    return { value: p, transfer: [p.chi.buffer, p.field.buffer, p.mask.buffer] };
  },
  // QSM-CI's scores of a χ map against a reference inside a mask, on the module's threads (the same bits for any count).
  score(a) {
    const n = voxels(a.geometry);
    return call(() => rt.M.score(a.geometry, a.chi, a.reference, n ? toMask(a.mask, n) : a.mask, hardwareThreads()));
  },
  // plan(): the request read once and planned in C++ (a network's settled first, as invert() settles it); the plan is
  // held, its view returned with its id.
  async plan(a, id) {
    const network = !a.pipeline && (a.method === undefined || a.method === null);
    const { handle, view } = network ? await planNetwork(a, id) : planOf(a, a.pipeline ? pipelineRequestOf(a) : requestOf(a));
    return holdPlan(handle, view);
  },
  // The runtime's own counters (requests C++ has read, ONNX graphs read in this worker): internal, read through
  // tessera-qsm/debug (debug.js counters).
  counters: () => ({ requestParses: rt.M.requestParses(), graphReads: graphReads() }),
  // Forgets the kept speed measurements (internal, through tessera-qsm/debug: tests measure again to have a worker kept).
  forgetSpeeds,
  pipeline: withGeometry(runPipeline),
  // SWI and minIP from wrapped phase, R2* and T2* from the magnitude (C++ ContrastRun on the step engine).
  swi: withGeometry((a, id) => runContrast('swi', a, id)),
  r2star: withGeometry((a, id) => runContrast('r2star', a, id)),
  // The phantom head scanned: multi-echo phase and magnitude with the truths (χ, local, background and total fields).
  phantomScan(a) {
    const p = call(() => rt.M.phantomScan(a.geometry, { seed: a.seed ?? 1, te: a.te, b0: a.b0, snr: a.snr ?? 0 }));
    return { value: p, transfer: Object.values(p).filter((v) => ArrayBuffer.isView(v)).map((v) => v.buffer) };
  },
  // calibrate(): kept per weights sha256 and network (a.fresh: measured again), its points posted as progress.
  calibrate: (a, id) => calibrated(a, id, { progress: true }),
  // A field resampled to its B0-aligned grid and back (what a run with b0Align does around its network).
  b0Resample(a) {
    const n = voxels(a.geometry);
    const r = call(() => rt.M.b0Resample(a.geometry, a.field, n ? toMask(a.mask, n) : a.mask, { interpolation: a.interpolation, masked: a.masked }));
    return { value: r, transfer: [r.field.buffer, r.mask.buffer, r.back.buffer] };
  },
  invert: withGeometry(invert),
  // receptiveField(): the graph's theoretical receptive field (read once per weights sha256); with a.probe the measured one too.
  async receptiveField(a, id) {
    const w = firstWeights(a.weights);
    if (!w) throw new TesseraError('receptiveField needs the network\'s weights (ONNX bytes)', 'InvalidArgument');
    const { receptiveField } = await graphOfBytes(w);
    if (receptiveField.error) throw new TesseraError(`cannot read the network's graph: ${receptiveField.error}`, 'ModelLoadFailed');
    if (!a.probe) return { graph: receptiveField.value };
    return probeContext({ ...a, weights: w, graph: receptiveField.value }, id);
  },
  measureSpeed,
};

rt.port.onMessage(async (msg) => {
  if (msg.cancel !== undefined) {
    rt.running.get(msg.cancel)?.abort();
    return;
  }
  const { id, method, args } = msg;
  try {
    if (method !== 'init' && !rt.M) throw new TesseraError('the runtime is not initialised', 'Internal');
    const f = methods[method];
    if (!f) throw new TesseraError(`unknown method ${method}`, 'Internal');
    const out = await f(args, id);
    if (out && out.transfer) rt.port.post({ id, result: out.value }, out.transfer);
    else rt.port.post({ id, result: out });
  } catch (e) {
    rt.port.post({ id, error: errorToMessage(e) });
  }
});
