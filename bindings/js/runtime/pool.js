// WorkerPool: K workers, each with ONE ONNX Runtime Web InferenceSession (wasm backend, T threads), that run
// the tiles the C++ tiler produces. Same code on node worker_threads and browser module Workers.
//
// Data movement:
//  - input: run() makes ONE copy of the caller's Float32Array into a pool-owned buffer. The copy is required
//    twice over: the input is often a view on the C++ module's heap (a SharedArrayBuffer that the module may
//    reuse or grow as soon as run() returns to it), and a tile must survive the death of its worker to be
//    retried. Where SharedArrayBuffers can be posted (node; cross-origin-isolated pages) the pool-owned buffer
//    is a SharedArrayBuffer, handed to the worker (and to a retry) without any further copy; ORT builds its
//    input tensor on it directly. Elsewhere it is a plain ArrayBuffer sent by structured clone.
//  - output: the worker TRANSFERS the output buffer (postMessage transfer list): zero copy.
//  - model: copied once into a SharedArrayBuffer shared by all workers (else cloned per worker).
import { OrtWorkers, poolError, heapText } from './pool-workers.js';

const DEFAULT_WATCHDOG_MS = 10 * 60 * 1000;

function abortError(message) {
  return new DOMException(message, 'AbortError');
}

/**
 * A pool of ONNX Runtime Web workers running network calls (tiles) with least-pending dispatch,
 * fault recovery (one retry on a fresh worker), a per-tile watchdog, cancellation and heap recycling.
 * The workers themselves (start, ready, death, retirement, recycle(), grow()): pool-workers.js.
 */
export class WorkerPool extends OrtWorkers {
  /**
   * Create the pool (no worker starts until ready() or run()).
   * Preconditions: `model` holds ONNX bytes; workers >= 1; threadsPerWorker >= 1 (> 1 needs
   * SharedArrayBuffer: node, or a cross-origin-isolated page).
   * @param {object} o
   * @param {Uint8Array|ArrayBuffer} o.model ONNX bytes (copied; the caller keeps its buffer)
   * @param {number} [o.workers=1] K, number of workers (= max runs executing at once)
   * @param {number} [o.threadsPerWorker=1] T, env.wasm.numThreads in each worker
   * @param {number} [o.watchdogMs=600000] per-tile stall limit, from dispatch to result
   * @param {number} [o.recycleHeapBytes=Infinity] recycle a worker once its wasm heap passes this
   * @param {number} [o.heapGuardBytes=Infinity] the heap guard: a worker whose wasm heap would pass this (a growth
   *   refused inside the worker, or a heap reported at or above it) fails its tile at once with code 'MemoryCeiling'
   *   (no retry: a fresh worker would need the same) and is terminated; a tile that finishes at or above it keeps its
   *   result and the worker is recycled. The runtime passes the C++ core's WASM_WORKER_HEAP_GUARD_BYTES.
   * @param {number} [o.startTimeoutMs=max(watchdogMs, 120000)] limit for a worker to load ORT and create its session
   * @param {string|object} [o.ortWasmPaths] ort.env.wasm.wasmPaths in the workers (browser: where ORT's .wasm/.mjs live)
   * @param {string} [o.ortModuleUrl] module specifier/URL of onnxruntime-web for the workers (default: the worker's
   *   own `import('#ort')`, i.e. onnxruntime-web as node or the bundler resolves it; on a page serving the package
   *   unbundled, whose workers see no import map: the page's import map entry (createTessera passes it), else
   *   ort.wasm.min.mjs beside the package, ort-location.js)
   * @param {string|URL} [o.workerUrl] URL of a replacement ort-worker.js (default: ort-worker.js next to this file)
   * @param {string[]} [o.inputRoles] multi-input networks (iQSM family): the roles of the inputs in the reference
   *   order, the first being run()'s `input`; each worker binds them to the network's input names (input-binding.js)
   * @param {Object<string,string>} [o.inputNames] explicit role → network input name bindings (override the matching)
   * @param {string[]} [o.executionProviders=['wasm']] preferred ONNX Runtime execution providers ('webgpu', 'webnn',
   *   'wasm'), first first; the pool runs the first that the platform offers and the network's graph allows
   *   (execution-provider.js), wasm when none; a worker whose session fails on it falls back to wasm
   * @param {{node: boolean, webgpu: boolean, webnn: boolean}} [o.platform] what the platform offers (default: detected
   *   here, platformProviders())
   * @param {{bytes: Uint8Array, selection: object}} [o.prepared] what prepareModel (execution-provider.js) gives for
   *   model, o.executionProviders, o.platform and o.wasmRewriteOps, made by the caller (default: made here)
   * @param {string[]} [o.wasmRewriteOps] operators the workers run rewritten (webgpu-graph.js) when the pool runs on
   *   wasm: the registry's measured choice (['ConvTranspose'] for a wasmConvTransposeRewrite network), none by default
   * @param {string} [o.ortGpuModuleUrl] URL of an onnxruntime-web build with WebGPU/WebNN (ort.webgpu.min.mjs,
   *   ort.all.min.mjs) for the workers that use them (default: ort.all.min.mjs beside an ort.wasm*.mjs ortModuleUrl,
   *   else ortModuleUrl / the worker's own import)
   */
  constructor(o = {}) {
    const watchdogMs = o.watchdogMs ?? DEFAULT_WATCHDOG_MS;
    super({ ...o, startTimeoutMs: o.startTimeoutMs ?? Math.max(watchdogMs, 120000) });
    this._watchdogMs = watchdogMs;
    this._recycleHeapBytes = o.recycleHeapBytes ?? Infinity;
    this._queue = [];
    this._seq = 0;
    this._inFlightMsg = 0;
    this._maxInFlightMsg = 0;
  }

  /**
   * Run one tile through the network on the least-loaded free worker (queued while all are busy).
   * Preconditions: input.length === product(dims); dims = [1, C, X, Y, Z] as the network expects. The input is
   * copied at once (the caller may reuse/free it — e.g. a view on the wasm heap — as soon as run() returns).
   * Resolves { output: Float32Array, dims: number[], seconds, worker, heapBytes }: `dims` are the network's
   * real output dims — the caller must check them (a wrong-shaped network is not an error here).
   * Rejects: DOMException 'AbortError' on cancel; Error code 'TileFailed' (naming the tile and each cause; oom: true and
   * the advice to run smaller patches when every attempt ran out of memory) after
   * a retry on a fresh worker also failed; 'TileStalled' ("tile N stalled: no result after X s (watchdog)");
   * 'MemoryCeiling' (the worker's heap would pass heapGuardBytes; .heapBytes, .requestedBytes, .guardBytes);
   * 'ModelLoadFailed'/'WorkerStartFailed' if workers cannot start; 'PoolTerminated' after terminate().
   * extras: the further inputs of a multi-input network, by role ({role, input, dims}); copied like input.
   * @param {{id: number|string, input: Float32Array, dims: number[], extras?: {role: string, input: Float32Array, dims: number[]}[], signal?: AbortSignal}} req
   */
  run({ id, input, dims, extras = [], signal } = {}) {
    if (this._terminated) return Promise.reject(this._terminatedError(`run(tile ${id})`));
    if (this._fatal) return Promise.reject(this._fatal);
    if (!(input instanceof Float32Array)) return Promise.reject(new TypeError(`tile ${id}: input must be a Float32Array`));
    if (!Array.isArray(dims) || dims.some((d) => !Number.isInteger(d) || d < 1))
      return Promise.reject(new TypeError(`tile ${id}: dims must be an array of positive integers`));
    const n = dims.reduce((a, b) => a * b, 1);
    if (n !== input.length)
      return Promise.reject(new RangeError(`tile ${id}: input has ${input.length} values but dims [${dims}] need ${n}`));
    for (const e of extras) {
      if (!(e?.input instanceof Float32Array) || !Array.isArray(e.dims) || e.dims.reduce((a, b) => a * b, 1) !== e.input.length)
        return Promise.reject(new TypeError(`tile ${id}: input '${e?.role}' must be a Float32Array matching its dims`));
    }
    if (signal?.aborted) return Promise.reject(abortError(`tile ${id} cancelled before it started`));

    // The one copy (see the header): pool-owned, shared with the worker where possible.
    const own = (x) => {
      if (!this._shared) return x.slice();
      const c = new Float32Array(new SharedArrayBuffer(x.byteLength));
      c.set(x);
      return c;
    };
    const data = own(input);
    const named = extras.map((e) => ({ role: e.role, data: own(e.input), dims: [...e.dims] }));
    return new Promise((resolve, reject) => {
      const job = { id, dims: [...dims], data, extras: named, resolve, reject, signal, attempts: 0, freshAfter: 0, causes: [], handle: null, seq: 0, timer: null, started: false, done: false };
      if (signal) {
        job.onAbort = () => this._abortJob(job, `tile ${id} cancelled`);
        signal.addEventListener('abort', job.onAbort, { once: true });
      }
      this._queue.push(job);
      this._pump();
    });
  }

  /**
   * Cancel everything: queued tiles are dropped, busy workers terminated (ORT cannot abort inside a run) and
   * replaced lazily (on the next run/ready); every pending run rejects with DOMException 'AbortError'.
   * Resolves when the terminated workers have exited.
   * @returns {Promise<void>}
   */
  cancelAll(reason = 'cancelled') {
    const exits = [];
    for (const job of this._queue.splice(0)) {
      this._s.cancelled++;
      this._settle(job, abortError(`tile ${job.id} ${reason}`));
    }
    for (const h of [...this._handles]) if (h.job) exits.push(this._abortJob(h.job, `tile ${h.job.id} ${reason}`));
    return Promise.all(exits).then(() => undefined);
  }

  /**
   * End the pool: every pending run rejects (code 'PoolTerminated'), every worker is terminated.
   * After it, run() and ready() reject. Resolves when all workers have exited.
   * @returns {Promise<void>}
   */
  async terminate() {
    if (!this._terminated) {
      this._terminated = true;
      const err = this._terminatedError('a pending tile');
      for (const job of [...this._queue]) this._settle(job, err);
      for (const h of [...this._handles]) {
        if (h.job) this._settle(h.job, err);
        this._retire(h, 'terminated');
      }
      for (const w of this._readyWaiters.splice(0)) w.reject(err);
    }
    await Promise.all([...this._closing].map((h) => h.w.terminate()));
  }

  /**
   * Counters: { workers, threadsPerWorker, liveWorkers, busy, queued, inFlight, maxInFlight, maxInFlightMessages,
   * runs, retries, recycles, stalls, crashes, runErrors, ooms, ceilings, cancelled, workersCreated, workersExited,
   * heapHighWater, perWorker: [{ worker, state, runs, heapBytes, heapHighWater, endedBy, sharedWasm }] }.
   * maxInFlight is measured inside the workers (shared slot table + Atomics) when memory can be shared, else from
   * the workers' start/end messages (maxInFlightMessages, always computed).
   */
  stats() {
    const shared = this._slots ? Atomics.load(this._slots, 0) : null;
    return {
      workers: this._K,
      threadsPerWorker: this._T,
      liveWorkers: this.liveWorkers,
      busy: this._handles.filter((h) => h.state === 'busy').length,
      queued: this._queue.length,
      inFlight: this._inFlightMsg,
      maxInFlight: shared ?? this._maxInFlightMsg,
      maxInFlightMessages: this._maxInFlightMsg,
      ...this._s,
      perWorker: [...this._perWorker.values()].map((p) => ({ ...p })),
    };
  }

  // ---------------------------------------------------------------- internals

  /** A worker's message about its tile ('start' | 'heap' | 'result' | 'error'); others are ignored. */
  _onTileMessage(h, m) {
    switch (m?.type) {
      case 'start': {
        const job = h.job;
        if (job && job.seq === m.seq && !job.started) {
          job.started = true;
          this._inFlightMsg++;
          if (this._inFlightMsg > this._maxInFlightMsg) this._maxInFlightMsg = this._inFlightMsg;
        }
        break;
      }
      case 'heap': {
        // Mid-run: the heap grew, or the worker refused a growth past the guard.
        const job = h.job;
        if (!job || job.seq !== m.seq) return;
        this._noteHeap(h, m.heapBytes);
        if (m.ceiling || m.heapBytes >= this._heapGuardBytes) this._ceiling(h, job, m);
        break;
      }
      case 'result': {
        const job = h.job;
        if (!job || job.seq !== m.seq) return;
        this._noteHeap(h, m.heapBytes);
        h.runs++;
        this._perWorker.get(h.serial).runs = h.runs;
        this._s.runs++;
        this._detach(h, job);
        this._setState(h, 'idle');
        this._settle(job, null, { output: m.output, dims: m.dims, seconds: m.seconds, worker: h.serial, heapBytes: m.heapBytes });
        if (h.recycleAfter || m.heapBytes > this._recycleHeapBytes || m.heapBytes >= this._heapGuardBytes) {
          this._s.recycles++;
          this._retire(h, 'recycled');
        }
        this._pump();
        break;
      }
      case 'error': {
        const job = h.job;
        if (!job || job.seq !== m.seq) return;
        this._noteHeap(h, m.heapBytes);
        this._s.runErrors++;
        if (m.oom) this._s.ooms++;
        if (m.ceiling || m.heapBytes >= this._heapGuardBytes) {
          this._ceiling(h, job, m);
          break;
        }
        const cause = m.oom ? `out of memory in ONNX Runtime (${m.name}: ${m.message})` : `ONNX Runtime error (${m.name}: ${m.message})`;
        this._detach(h, job);
        // The ORT instance may be unusable after an error (an OOM certainly is): replace the worker.
        this._retire(h, 'run error');
        if (m.oom) job.ooms = (job.ooms ?? 0) + 1;
        this._fault(job, `${cause} on worker ${h.serial}`);
        break;
      }
      default:
        break;
    }
  }

  /** A started worker died: its tile, if any, is retried on a fresh worker (or fails). */
  _workerDied(h, cause) {
    const job = h.job;
    if (job) this._detach(h, job);
    this._retire(h, 'died');
    if (job) this._fault(job, `${cause} on worker ${h.serial}`);
    else this._pump();
  }

  /** A fatal start failure: every queued tile fails with it. */
  _failQueued(err) {
    for (const job of [...this._queue]) this._settle(job, err);
  }

  /** Unlink a job from its worker: stop the watchdog, close the in-flight interval. */
  _detach(h, job) {
    clearTimeout(job.timer);
    job.timer = null;
    if (job.started) this._inFlightMsg--;
    job.started = false;
    job.handle = null;
    h.job = null;
  }

  /** A tile failed on a worker: retry it once on another (fresh) worker, else reject naming tile and causes. */
  _fault(job, cause) {
    job.causes.push(cause);
    if (job.done) return;
    if (job.attempts < 2 && !this._terminated && !this._fatal) {
      this._s.retries++;
      // Retry on a FRESH worker: one started after this failure (its replacement is spawned by _pump).
      job.freshAfter = this._serial;
      this._queue.unshift(job);
      this._pump();
      return;
    }
    // Out of memory every time: a fresh worker does not help, a smaller patch does.
    const oom = job.ooms === job.causes.length;
    const advice = oom
      ? ': this patch needs more memory than an ONNX Runtime worker\'s wasm heap holds (at most 4 GB): run smaller patches ' +
        '(a smaller core, or tiles instead of the whole volume) or declare the network\'s real cost (spec.bytesPerVoxel) so the planner sizes them'
      : '';
    this._settle(
      job,
      poolError(`tile ${job.id} failed after ${job.attempts} attempt(s): ${job.causes.join('; then ')}${advice}`, 'TileFailed', {
        tile: job.id,
        causes: [...job.causes],
        oom,
      }),
    );
    this._pump();
  }

  /**
   * A worker's heap reached the guard while running `job` (m: its heap or error message): the tile fails at once with
   * code 'MemoryCeiling' (no retry: a fresh worker would need the same heap) and the worker is terminated.
   */
  _ceiling(h, job, m) {
    this._s.ceilings++;
    const what = m.requestedBytes > m.heapBytes ? `asked to grow its heap from ${heapText(m.heapBytes)} to ${heapText(m.requestedBytes)}` : `reached a heap of ${heapText(m.heapBytes)}`;
    this._detach(h, job);
    this._retire(h, 'heap guard');
    this._settle(
      job,
      poolError(
        `tile ${job.id} stopped: ONNX Runtime worker ${h.serial} ${what}, past the ${heapText(this._heapGuardBytes)} heap guard below the ` +
          '4 GiB wasm heap ceiling (near it a run stalls instead of failing)',
        'MemoryCeiling',
        { tile: job.id, heapBytes: m.heapBytes, requestedBytes: m.requestedBytes, guardBytes: this._heapGuardBytes },
      ),
    );
    this._pump();
  }

  _abortJob(job, message) {
    if (job.done) return Promise.resolve();
    this._s.cancelled++;
    let exit = Promise.resolve();
    const qi = this._queue.indexOf(job);
    if (qi >= 0) this._queue.splice(qi, 1);
    const h = job.handle;
    if (h) {
      this._detach(h, job);
      exit = this._retire(h, 'cancelled');
    }
    this._settle(job, abortError(message));
    this._pump();
    return exit;
  }

  _onStall(job) {
    const h = job.handle;
    if (!h || job.done) return;
    this._s.stalls++;
    this._detach(h, job);
    this._retire(h, 'stalled');
    const s = this._watchdogMs / 1000;
    this._settle(
      job,
      poolError(`tile ${job.id} stalled: no result after ${s} s (watchdog); worker ${h.serial} was terminated`, 'TileStalled', {
        tile: job.id,
      }),
    );
    this._pump();
  }

  _settle(job, err, value) {
    if (job.done) return;
    job.done = true;
    if (job.handle) this._detach(job.handle, job);
    const qi = this._queue.indexOf(job);
    if (qi >= 0) this._queue.splice(qi, 1);
    if (job.signal && job.onAbort) job.signal.removeEventListener('abort', job.onAbort);
    job.data = null; // drop the pool-owned inputs
    job.extras = null;
    if (err) job.reject(err);
    else job.resolve(value);
  }

  /** Least-pending dispatch: each free worker takes the next queued tile; ties go to the worker with fewest runs. */
  _pump() {
    if (this._terminated) return;
    for (let i = 0; i < this._queue.length; ) {
      const job = this._queue[i];
      let best = null;
      for (const h of this._handles) {
        if (h.state !== 'idle' || h.serial <= job.freshAfter) continue;
        if (!best || h.runs < best.runs) best = h;
      }
      if (!best) {
        if (!this._handles.some((h) => h.state === 'idle')) break;
        i++; // a retry waiting for a fresh worker: let the tiles behind it use the idle ones
        continue;
      }
      this._queue.splice(i, 1);
      this._dispatch(best, job);
    }
    if (this._queue.length > 0) this._spawnUpToK();
  }

  _dispatch(h, job) {
    this._setState(h, 'busy');
    h.job = job;
    job.handle = h;
    job.attempts++;
    job.seq = ++this._seq;
    job.started = false;
    job.timer = setTimeout(() => this._onStall(job), this._watchdogMs);
    h.w.postMessage({ type: 'run', seq: job.seq, tile: job.id, input: job.data, dims: job.dims, extras: job.extras });
  }
}
