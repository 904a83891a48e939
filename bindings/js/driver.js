// Runs one inversion: the C++ driver thread plans and gathers/scatters tiles and decides how many are
// in flight; this loop hands each network request to a WorkerPool and answers it.
//
// Why the driver blocks on shared memory instead of exposing next-tile/complete-tile calls: every
// driver (tiled field -> chi, whole volume, physics loops that call their network several times per
// patch, native patching) then calls its network as an ordinary synchronous C++ function, and the
// C++ core alone enforces how many tiles are in flight (tile_concurrency). The JavaScript thread
// stays free: it only polls, copies patches and answers.
import { TesseraError, fromModuleError } from './errors.js';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function abortError(message = 'the inversion was cancelled') {
  return new DOMException(message, 'AbortError');
}

/**
 * Runs an inversion on a module's Volume, serving network requests from the pools.
 * M is a loaded Tessera module; volume is an M.Volume filled with field and mask.
 * request is {model|spec, whole?, tile?, workers}; pools[i] runs network i (NeXtQSM: BF, VJP).
 * threads bounds the tiles in flight (the C++ core may lower it to fit the memory budget).
 * @returns {Promise<{chi: Float32Array, report: object}>}
 */
export async function runInversion(M, { volume, request, pools, threads, onProgress, signal, pollMs = 2 }) {
  if (signal?.aborted) throw abortError();
  const started = performance.now();
  let job;
  try {
    job = M.startInversion(volume, request, threads);
  } catch (e) {
    throw fromModuleError(e);
  }
  if (job.networkCount() !== pools.length) {
    job.cancel();
    job.delete();
    throw new TesseraError(`this model needs ${job.networkCount()} network(s), ${pools.length} given`, 'InvalidArgument');
  }
  let aborted = false;
  const onAbort = () => {
    aborted = true;
    job.cancel();
    for (const p of pools) p.cancelAll();
  };
  signal?.addEventListener('abort', onAbort, { once: true });

  const pending = new Set();
  let lastDone = -1;
  let maxInFlight = 0;
  // Which grid tiles have started and which have a network call open (the bridge names each call's tile).
  const startedTiles = new Set();
  const open = new Map(); // request id → tile
  let tilesChanged = false;
  const closeRequest = (id) => {
    if (open.delete(id)) tilesChanged = true;
  };
  try {
    for (;;) {
      const s = job.poll();
      for (const r of s.requests) {
        // r.input (and r.extras' inputs) view the module heap: the pool copies them synchronously inside run().
        const id = r.id;
        if (r.tile >= 0) {
          startedTiles.add(r.tile);
          open.set(id, r.tile);
          tilesChanged = true;
        }
        const p = pools[r.network].run({ id, input: r.input, dims: r.dims, extras: r.extras }).then(
          (out) => {
            closeRequest(id);
            if (!aborted) job.respond(id, out.output);
          },
          (err) => {
            closeRequest(id);
            if (!aborted) job.fail(id, err?.message ?? String(err));
          },
        );
        pending.add(p);
        p.finally(() => pending.delete(p));
      }
      maxInFlight = Math.max(maxInFlight, s.inFlight);
      if ((s.done !== lastDone || tilesChanged) && s.total > 0) {
        lastDone = s.done;
        tilesChanged = false;
        if (onProgress) {
          const elapsed = (performance.now() - started) / 1000;
          const rate = s.done > 0 ? s.done / elapsed : 0;
          onProgress({
            done: s.done,
            total: s.total,
            inFlight: s.inFlight,
            tilesPerSecond: rate,
            etaSeconds: rate > 0 ? (s.total - s.done) / rate : null,
            elapsedSeconds: elapsed,
            // Grid indices (x fastest, then y, then z) of the tiles with a network call running, and of
            // every tile started so far (started and not running = done, or between two calls of a loop).
            runningTiles: [...new Set(open.values())],
            startedTiles: [...startedTiles],
          });
        }
      }
      if (s.state !== 'running') break;
      await sleep(s.requests.length ? 0 : pollMs);
    }
    if (aborted) throw abortError();
    let report;
    try {
      report = job.report();
    } catch (e) {
      throw aborted ? abortError() : fromModuleError(e);
    }
    const chi = job.resultView().slice(); // copy off the heap before anything can allocate
    report.wallSeconds = (performance.now() - started) / 1000;
    report.maxInFlightObserved = maxInFlight;
    return { chi, report };
  } finally {
    signal?.removeEventListener('abort', onAbort);
    if (!aborted && pending.size) await Promise.allSettled([...pending]);
    job.delete();
  }
}
