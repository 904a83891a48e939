// Runs one inversion under its plan, two ways:
//
// - runSteps (field -> chi networks, tiled or whole volume): the C++ FieldRun is a state machine. next() hands
//   out a gathered patch only while fewer than the plan's tiles are in flight, finish() scatters an output. This
//   loop takes every patch it is given, runs it on the WorkerPool and hands the output back as it comes: no C++
//   thread waits on JavaScript and nothing polls.
// - runInversion (physics loops, native patching, phase networks): their algorithms call the network in the
//   middle of C++ code, so a C++ driver thread runs them behind a Bridge and this loop polls for its network
//   requests and answers them.
//
// Either way the C++ core alone decides how many tiles are in flight; the pool has exactly that many workers.
// A tile stopped by the pool's heap guard (code MemoryCeiling) fails the run with that code and the core's message.
import { TesseraError, fromModuleError, callModule as call } from './errors.js';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The run's error: a tile stopped by the heap guard keeps its code (MemoryCeiling) with the core's message. */
function runError(e, ceiling) {
  const err = fromModuleError(e);
  return ceiling ? new TesseraError(err.message, 'MemoryCeiling') : err;
}

function abortError(message = 'the inversion was cancelled') {
  return new DOMException(message, 'AbortError');
}

// The progress event of both loops. tiles: grid indices (x fastest, then y, then z) of the tiles with a network
// call running, and of every tile started so far (started and not running = done, or between two calls of a loop).
function progressEvent(s, started, running, startedTiles) {
  const elapsed = (performance.now() - started) / 1000;
  const rate = s.done > 0 ? s.done / elapsed : 0;
  return {
    done: s.done,
    total: s.total,
    inFlight: s.inFlight,
    tilesPerSecond: rate,
    etaSeconds: rate > 0 ? (s.total - s.done) / rate : null,
    elapsedSeconds: elapsed,
    runningTiles: [...new Set(running)],
    startedTiles: [...startedTiles],
  };
}

/** Resolves after the event loop has had a turn (messages such as a cancel get in), without a timer's clamp. */
function breathe() {
  return new Promise((resolve) => {
    const { port1, port2 } = new MessageChannel();
    port1.onmessage = () => {
      port1.close();
      resolve();
    };
    port2.postMessage(0);
  });
}

/**
 * Runs a run step by step under its plan: a field -> chi network (patches on the pool) or a classical method (no
 * patch: run.step() does one iteration, and the event loop gets a turn between two).
 * M is a loaded Tessera module; volume an M.Volume holding field and mask; plan the plan object of request
 * (plan.steps is true); pool a WorkerPool of the network with plan.tilesInFlight workers (none for a method).
 * @returns {Promise<{chi: Float32Array, report: object}>}
 */
export async function runSteps(M, { volume, request, plan, pool, onProgress, signal }) {
  if (signal?.aborted) throw abortError();
  const started = performance.now();
  const run = call(() => M.startFieldRun(volume, request, plan));
  const running = new Map(); // job → grid tile
  const startedTiles = new Set();
  const pending = new Set();
  let aborted = false;
  let wake = null; // resolves the loop's wait when a patch comes back or the run is cancelled
  const poke = () => wake?.();
  const onAbort = () => {
    aborted = true;
    run.cancel();
    pool?.cancelAll();
    poke();
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  let maxInFlight = 0;
  let ceiling = null; // the first tile the heap guard stopped
  try {
    let lastDone = -1;
    for (;;) {
      let handed = false;
      for (let p; !aborted && (p = call(() => run.next())) !== null; ) {
        handed = true;
        const { job, tile } = p;
        running.set(job, tile);
        startedTiles.add(tile);
        // p.input views the module heap (valid until the next allocating call): the pool copies it inside run().
        // The pool's id names the call in messages and faults: 1, 2, … in the order tiles start.
        const task = pool.run({ id: job + 1, input: p.input, dims: p.dims }).then(
          (out) => !aborted && call(() => run.finish(job, out.output)),
          (err) => {
            if (err?.code === 'MemoryCeiling') ceiling ??= err;
            return !aborted && call(() => run.fail(job, err?.message ?? String(err)));
          },
        );
        const settled = task.catch(() => {}).finally(() => {
          running.delete(job);
          pending.delete(settled);
          poke();
        });
        pending.add(settled);
      }
      const computed = !aborted && call(() => run.step());
      const s = run.state();
      maxInFlight = Math.max(maxInFlight, s.inFlight);
      if (onProgress && s.total > 0 && (s.done !== lastDone || handed)) {
        lastDone = s.done;
        onProgress(progressEvent(s, started, running.values(), startedTiles));
      }
      if (aborted) throw abortError();
      if (s.finished) break;
      if (computed) {
        await breathe(); // a cancel, a status() or a patch coming back gets in between two steps
        continue;
      }
      await new Promise((resolve) => {
        wake = resolve;
        if (!pending.size) resolve(); // nothing out: the state changes only through next()
      });
      wake = null;
    }
    let report;
    try {
      report = run.report();
    } catch (e) {
      throw aborted ? abortError() : runError(e, ceiling);
    }
    const chi = run.result();
    report.wallSeconds = (performance.now() - started) / 1000;
    report.maxInFlightObserved = maxInFlight;
    return { chi, report };
  } finally {
    signal?.removeEventListener('abort', onAbort);
    if (pending.size) await Promise.allSettled([...pending]);
    run.delete();
  }
}

/**
 * Runs an inversion whose algorithm calls its network from C++ (physics loops, native patching, phase networks),
 * serving the driver thread's network requests from the pools.
 * M is a loaded Tessera module; volume an M.Volume filled with field (or phase) and mask; plan the plan object of
 * request; pools[i] runs network i (NeXtQSM: BF, VJP).
 * @returns {Promise<{chi: Float32Array, report: object}>}
 */
export async function runInversion(M, { volume, request, plan, pools, onProgress, signal, pollMs = 2 }) {
  if (signal?.aborted) throw abortError();
  const started = performance.now();
  const job = call(() => M.startInversion(volume, request, plan));
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
  let ceiling = null; // the first network call the heap guard stopped
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
            if (err?.code === 'MemoryCeiling') ceiling ??= err;
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
        if (onProgress) onProgress(progressEvent(s, started, open.values(), startedTiles));
      }
      if (s.state !== 'running') break;
      await sleep(s.requests.length ? 0 : pollMs);
    }
    if (aborted) throw abortError();
    let report;
    try {
      report = job.report();
    } catch (e) {
      throw aborted ? abortError() : runError(e, ceiling);
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
