// The ONNX Runtime worker pools of the driver: a run's pools, one per network file, started for it and given back at
// its end (a wasm heap never shrinks), and the session cache: a started pool kept for the run that follows, keyed by
// (weights sha256, threads per worker, execution providers). The speed probe (probes.js) keeps its one-worker pool
// there so that the run after it starts no worker of its own. The memory plan counts only a run's own workers, so
// the cache holds one pool at most: any pool started (a run, a calibration, a probe) or a key missed gives it back
// first, and so does warmIdleMs (createTessera, default 5 min) without a run.
import { WorkerPool } from './pool.js';
import { rt, heapGuardBytes } from './context.js';
import { preparedModel, weightsBytes } from './graphs.js';
import { platformProviders } from '../execution-provider.js';

const DEFAULT_IDLE_MS = 300000;

/** keyOf(sha256, threads, providers) → {sha, pool, timer}: one entry at most (see the header). */
const cache = new Map();

/**
 * The cache key of a session.
 * Precondition: sha is the weights' sha256 (index.js warmKey).
 * Precondition: executionProviders is the run's preference, undefined for the runtime's.
 */
function keyOf(sha, threads, executionProviders) {
  return JSON.stringify([sha, threads, executionProviders ?? rt.options.executionProviders ?? ['wasm']]);
}

/** How long a kept session waits for its run, in ms. */
export function sessionIdleMs() {
  return rt.options.warmIdleMs ?? DEFAULT_IDLE_MS;
}

/** Whether a session of the weights with this sha256 is kept (any threads, any providers). */
export function sessionHolds(sha) {
  return sha !== undefined && [...cache.values()].some((e) => e.sha === sha);
}

/** Workers the kept sessions hold (counted in status().liveWorkers too). */
export function keptWorkers() {
  let n = 0;
  for (const e of cache.values()) n += e.pool.liveWorkers;
  return n;
}

/**
 * Keeps a started pool of the weights with this sha256 for the run that follows (after giving back any other).
 * Precondition: the pool was started by startPools without executionProviders (the runtime's preference).
 */
export async function keepSession(sha, pool) {
  await dropSessions();
  const timer = setTimeout(() => dropSessions(), sessionIdleMs());
  timer.unref?.();
  cache.set(keyOf(sha, pool.stats().threadsPerWorker, undefined), { sha, pool, timer });
}

/** Gives back every kept session. */
export function dropSessions() {
  const pools = [...cache.values()].map((e) => {
    clearTimeout(e.timer);
    return e.pool;
  });
  cache.clear();
  return stopPools(pools);
}

/**
 * The kept pool of the weights with this sha256, these threads and providers, grown to k workers, when it can run
 * this run's pools (one network file, no explicit input names, and a heap the probe's patches grew no further than
 * the plan allows a tile, since a wasm heap never shrinks); else null after giving the cache back.
 */
export async function takeSession(sha, { weights, k, threadsPerWorker, inputNames, executionProviders, bytesPerTile }) {
  const key = keyOf(sha, threadsPerWorker, executionProviders);
  const e = sha === undefined ? undefined : cache.get(key);
  if (!e || weights.length !== 1 || inputNames || !(e.pool.stats().heapHighWater <= bytesPerTile)) {
    await dropSessions();
    return null;
  }
  clearTimeout(e.timer);
  cache.delete(key);
  e.pool.grow(k);
  rt.livePools.add(e.pool);
  return e.pool;
}

// The ONNX Runtime worker pools of a run: one per network file, k workers each (after the kept session, if any, is
// given back: the memory plan counts only the run's own workers). A provider other than wasm is chosen from the
// network's operators as graphs.js keeps them (the graph read once per weights sha256), and a rewrite of the graph is
// made once for the pools of the same weights (graphs.js preparedModel).
export async function startPools(weights, { k, threadsPerWorker, spec, inputNames, executionProviders }) {
  await dropSessions();
  const { options } = rt;
  const preference = executionProviders ?? options.executionProviders ?? ['wasm'];
  const wasmRewriteOps = spec?.wasmConvTransposeRewrite ? ['ConvTranspose'] : undefined; // the registry's measured choice
  const prepared = [];
  for (const model of weights) {
    const byGraph = wasmRewriteOps || preference.some((p) => p !== 'wasm');
    prepared.push(byGraph ? await preparedModel(weightsBytes(model), { preference, platform: platformProviders(), wasmRewriteOps }) : undefined);
  }
  const pools = weights.map(
    (model, i) =>
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
        wasmRewriteOps,
        inputNames,
        workerUrl: options.ortWorkerUrl, // createTessera's replacement ort-worker.js, if any
        executionProviders: preference, // chosen per network (execution-provider.js)
        prepared: prepared[i],
        ortGpuModuleUrl: options.ortGpuModuleUrl,
      }),
  );
  for (const p of pools) rt.livePools.add(p);
  return pools;
}

/** Gives back the never-shrinking ONNX Runtime heaps of these pools. */
export async function stopPools(pools) {
  await Promise.all(pools.map((p) => p.terminate().catch(() => {})));
  for (const p of pools) if (p.liveWorkers === 0) rt.livePools.delete(p); // any left over stay visible in status()
}
