// Runs one inversion under its plan, step by step, whatever it runs: the C++ run (FieldRun) is a state machine.
// next() hands out a patch (a tile of a field → χ network, a network call of a physics loop or a phase network) only
// while fewer than the plan allows are out; finish() takes its output, and the C++ algorithm goes on; step() does one
// iteration of a classical method. This loop runs every patch it is given on the pool of its network, hands the output
// back as it comes, and lets the event loop in between two steps: no C++ thread waits on JavaScript, nothing polls.
// The C++ scheduler alone decides how many patches are out; the pools have exactly that many workers.
// A patch stopped by the pool's heap guard (code MemoryCeiling) fails the run with that code and the core's message.
import { TesseraError, fromModuleError, callModule as call } from '../errors.js';

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
 * Runs a run step by step under its plan: a network's patches on the pools (pools[i] runs network i: NeXtQSM's BF
 * and VJP), or a classical method (no patch: run.step() does one iteration, the event loop gets a turn between two).
 * M is a loaded Tessera module; volume an M.Volume holding field (or every echo's phase), mask and magnitude; plan an
 * M.Plan made for that volume (its request is held with it); pools WorkerPools of the plan's tilesInFlight workers
 * each (none for a method).
 * @returns {Promise<{chi: Float32Array, report: object}>}
 */
export async function runSteps(M, { volume, plan, pools = [], onProgress, signal, collect, start }) {
  if (signal?.aborted) throw abortError();
  const started = performance.now();
  // start: a run made by the caller (a ContrastRun, inputs filled and started), stepped and deleted here alike.
  const run = start ? start() : call(() => M.startFieldRun(volume, plan));
  const running = new Map(); // job → grid tile
  const startedTiles = new Set();
  const pending = new Set();
  let aborted = false;
  let wake = null; // resolves the loop's wait when a patch comes back or the run is cancelled
  const poke = () => wake?.();
  const onAbort = () => {
    aborted = true;
    run.cancel();
    for (const p of pools) p.cancelAll();
    poke();
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  let maxInFlight = 0;
  let calls = 0;
  let ceiling = null; // the first tile the heap guard stopped
  try {
    let lastDone = -1;
    for (;;) {
      let handed = false;
      for (let p; !aborted && (p = call(() => run.next())) !== null; ) {
        handed = true;
        const { job, tile, network } = p;
        running.set(job, tile);
        startedTiles.add(tile);
        // p.input (and the extras') view the module heap (valid until the next allocating call): the pool copies them
        // inside run(). The pool's id names the call in messages and faults: 1, 2, … in the order patches start.
        const pool = pools[network];
        if (!pool) throw new TesseraError(`this run calls network ${network + 1} but ${pools.length} network file(s) were given`, 'InvalidArgument');
        const extras = p.extras.length ? p.extras : undefined;
        const task = pool.run({ id: ++calls, input: p.input, dims: p.dims, extras }).then(
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
    if (collect) report.outputs = collect(run); // a pipeline's intermediates, read before the run is deleted
    report.wallSeconds = (performance.now() - started) / 1000;
    report.maxInFlightObserved = maxInFlight;
    return { chi, report };
  } catch (e) {
    // A failed pipeline keeps the stages that finished: the error carries them (collect reads them before the delete).
    if (collect && !aborted && e && typeof e === 'object' && e.name !== 'AbortError') {
      try {
        e.intermediates = collect(run);
      } catch {
        // nothing finished to keep
      }
    }
    throw e;
  } finally {
    signal?.removeEventListener('abort', onAbort);
    if (pending.size) await Promise.allSettled([...pending]);
    run.delete();
  }
}
