// The workers of a WorkerPool (pool.js): up to K ONNX Runtime Web workers (ort-worker.js), each with one session of
// the network on T threads. Their lifecycle: start (the model shared, ORT located and its wasm compiled once,
// ort-location.js; the execution provider chosen once, execution-provider.js), ready, death, retirement and
// recycling, and each worker's record (state, runs, heap). What runs on them, the tiles, is pool.js's.
// A subclass provides the tile side:
//   _onTileMessage(h, m): a worker's 'start' | 'heap' | 'result' | 'error' message
//   _workerDied(h, cause): a started worker died (its tile, if any, must be retried or failed)
//   _failQueued(err): a fatal start failure: every queued tile fails with err
//   _pump(): dispatch queued tiles to idle workers
import { createWorker, canShareMemory, isNode } from '../platform.js';
import { platformProviders, prepareModel, providerReport } from '../execution-provider.js';
import { ortModuleUrlOf, sharedOrtWasm, gpuBuildBeside } from './ort-location.js';

/** Entries of the shared table in which the workers mark the tiles they run (index 0: the most at once). */
const SLOT_CAPACITY = 256;

// This module's URL, for relative URLs in options. Never `new URL(expression, import.meta.url)`: webpack warns
// about each such expression (the literal form is what bundlers rewrite, and would copy as an asset).
const HERE = import.meta.url;

/** A sibling file of this module as a URL (node's workers). */
function sibling(file) {
  return new URL(file, HERE);
}

/** An Error with a code (and any extra fields) as the pool rejects with. */
export function poolError(message, code, extra = {}) {
  const e = new Error(message, extra.cause !== undefined ? { cause: extra.cause } : undefined);
  e.code = code;
  Object.assign(e, extra);
  return e;
}

export { bytesText as heapText } from '../bytes.js';

export class OrtWorkers {
  /**
   * The workers' settings, none started. Preconditions and options: WorkerPool's constructor (pool.js).
   * Precondition: o.startTimeoutMs is set (WorkerPool derives it from its watchdog).
   * @param {object} o
   */
  constructor(o) {
    const { model } = o;
    if (!(model instanceof Uint8Array) && !(model instanceof ArrayBuffer) && !(globalThis.SharedArrayBuffer && model instanceof SharedArrayBuffer))
      throw new TypeError('WorkerPool: model must be a Uint8Array or ArrayBuffer of ONNX bytes');
    const K = o.workers ?? 1;
    const T = o.threadsPerWorker ?? 1;
    if (!Number.isInteger(K) || K < 1) throw new RangeError(`WorkerPool: workers must be an integer >= 1 (got ${K})`);
    if (!Number.isInteger(T) || T < 1) throw new RangeError(`WorkerPool: threadsPerWorker must be an integer >= 1 (got ${T})`);
    this._K = K;
    this._T = T;
    this._heapGuardBytes = o.heapGuardBytes ?? Infinity;
    this._startTimeoutMs = o.startTimeoutMs;
    this._wasmPaths = o.ortWasmPaths;
    this._ortModuleUrl = o.ortModuleUrl;
    this._workerUrl = o.workerUrl ? new URL(o.workerUrl, HERE) : null;
    this._ortUrl = null; // Promise<string|undefined>: ortModuleUrlOf(ortModuleUrl), made on the first spawn
    this._wasmModule = null; // Promise<WebAssembly.Module|null>, made on the first spawn
    this._inputRoles = o.inputRoles;
    this._inputNames = o.inputNames;
    this._ortGpuModuleUrl = o.ortGpuModuleUrl;
    // The execution provider, chosen once from the graph (weights skipped); for WebGPU the graph rewritten for it
    // where that lets it run there, on wasm the operators o.wasmRewriteOps names (execution-provider.js prepareModel).
    const prepared = o.prepared ?? prepareModel({ model, preference: o.executionProviders ?? ['wasm'], platform: o.platform ?? platformProviders(), wasmRewriteOps: o.wasmRewriteOps });
    this._ep = prepared.selection;
    this.inputBinding = null; // role → input name, as the first ready worker bound them (multi-input networks)
    this._shared = canShareMemory();
    const bytes = prepared.bytes;
    if (this._shared) {
      this._model = new Uint8Array(new SharedArrayBuffer(bytes.byteLength));
      this._model.set(bytes);
      this._slots = new Int32Array(new SharedArrayBuffer(4 * (1 + SLOT_CAPACITY)));
    } else {
      this._model = bytes.slice();
      this._slots = null;
    }
    this._handles = []; // live workers that count towards K: state 'starting' | 'idle' | 'busy'
    this._closing = new Set(); // terminated, exit not yet observed
    this._serial = 0;
    this._terminated = false;
    this._fatal = null;
    this._readyWaiters = [];
    this._perWorker = new Map();
    // The pool's counters (stats()): the tiles' and the workers'.
    this._s = {
      runs: 0,
      retries: 0,
      recycles: 0,
      stalls: 0,
      crashes: 0,
      runErrors: 0,
      ooms: 0,
      ceilings: 0,
      cancelled: 0,
      workersCreated: 0,
      workersExited: 0,
      heapHighWater: 0,
    };
  }

  /**
   * Start the missing workers (up to K) and wait until each has its session.
   * Rejects with code 'ModelLoadFailed' ("the network could not be loaded: ...") when ORT refuses the model,
   * 'WorkerStartFailed' when a worker dies while starting, 'PoolTerminated' after terminate().
   * @returns {Promise<void>}
   */
  ready() {
    if (this._terminated) return Promise.reject(this._terminatedError('ready'));
    if (this._fatal) return Promise.reject(this._fatal);
    this._spawnUpToK();
    const starting = this._handles.filter((h) => h.state === 'starting');
    if (starting.length === 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this._readyWaiters.push({ resolve, reject });
      this._checkReady();
    });
  }

  /**
   * Give back the workers' never-shrinking wasm heaps: idle workers are terminated now, busy ones as soon as
   * their tile is done; replacements start lazily (next run/ready) unless `respawn` is true.
   * Resolves when the idle ones have exited (and, with respawn, the replacements are ready).
   * @param {{respawn?: boolean}} [opts]
   * @returns {Promise<void>}
   */
  async recycle({ respawn = false } = {}) {
    const exits = [];
    for (const h of [...this._handles]) {
      if (h.state === 'busy') h.recycleAfter = true;
      else if (h.state === 'idle') {
        this._s.recycles++;
        exits.push(this._retire(h, 'recycled'));
      }
    }
    await Promise.all(exits);
    if (respawn) await this.ready();
  }

  /**
   * Let the pool hold up to k workers (a pool handed from a speed probe to the run that follows); ready() starts them.
   * Preconditions: k is a whole number; a k at or under the current number of workers changes nothing.
   * @param {number} k
   */
  grow(k) {
    if (!Number.isInteger(k)) throw new RangeError(`WorkerPool: grow needs a whole number of workers (got ${k})`);
    this._K = Math.max(this._K, k);
  }

  /** Which ONNX Runtime execution provider runs the network (execution-provider.js providerReport). */
  get executionProvider() {
    return providerReport(this._ep, [...this._perWorker.values()]);
  }

  /** Number of worker threads started and not yet exited (including ones being terminated). */
  get liveWorkers() {
    return this._handles.length + this._closing.size;
  }

  _terminatedError(what) {
    return poolError(`WorkerPool: ${what} — the pool has been terminated`, 'PoolTerminated');
  }

  _spawnUpToK() {
    while (!this._terminated && !this._fatal && this._handles.length < this._K) this._spawn();
  }

  _spawn() {
    const serial = ++this._serial;
    const name = `tessera-ort-${serial}`;
    // Browsers: the literal form, so that bundlers bundle ort-worker.js (and ONNX Runtime Web with it).
    const w = this._workerUrl
      ? createWorker(this._workerUrl, { name })
      : isNode
        ? createWorker(sibling('ort-worker.js'), { name })
        : createWorker(new Worker(new URL('./ort-worker.js', import.meta.url), { type: 'module', name: 'tessera-ort' }));
    const h = { serial, w, state: 'starting', job: null, runs: 0, recycleAfter: false, slotIndex: serial % SLOT_CAPACITY };
    this._handles.push(h);
    this._s.workersCreated++;
    this._perWorker.set(serial, { worker: serial, state: 'starting', runs: 0, heapBytes: 0, heapHighWater: 0, endedBy: null, sharedWasm: false, executionProvider: null, fallback: undefined });
    h.startTimer = setTimeout(() => {
      if (h.state !== 'starting') return;
      const secs = this._startTimeoutMs / 1000;
      this._fail(poolError(`a worker could not start: no session after ${secs} s (start watchdog)`, 'WorkerStartFailed'), h);
    }, this._startTimeoutMs);
    w.onMessage((m) => this._onMessage(h, m));
    w.onError((e) => this._onDeath(h, `the worker failed: ${e.message}`));
    w.onExit((code) => {
      if (this._closing.delete(h)) {
        this._s.workersExited++;
        return;
      }
      this._s.workersExited++;
      this._onDeath(h, `the worker exited (code ${code})`);
    });
    if (this._slots) Atomics.store(this._slots, 1 + h.slotIndex, 0);
    if (!this._wasmModule) {
      this._ortUrl = ortModuleUrlOf(this._ortModuleUrl);
      this._wasmModule = this._ep.provider === 'wasm' ? sharedOrtWasm(this._ortUrl, this._wasmPaths) : Promise.resolve(null);
    }
    Promise.all([this._wasmModule, this._ortUrl]).then(([wasmModule, ortModuleUrl]) => {
      if (h.state !== 'starting') return; // terminated meanwhile
      w.postMessage({
        type: 'init',
        model: this._model,
        ortModuleUrl,
        wasmPaths: this._wasmPaths,
        wasmModule: wasmModule ?? undefined,
        numThreads: this._T,
        heapGuardBytes: Number.isFinite(this._heapGuardBytes) ? this._heapGuardBytes : undefined,
        executionProvider: this._ep.provider,
        ortGpuModuleUrl: this._ep.provider === 'wasm' ? undefined : this._ortGpuModuleUrl ?? gpuBuildBeside(ortModuleUrl),
        inputRoles: this._inputRoles,
        inputNames: this._inputNames,
        slots: this._slots?.buffer,
        slotIndex: h.slotIndex,
      });
    });
    return h;
  }

  _noteHeap(h, bytes) {
    const p = this._perWorker.get(h.serial);
    if (!p || typeof bytes !== 'number') return;
    p.heapBytes = bytes;
    if (bytes > p.heapHighWater) p.heapHighWater = bytes;
    if (bytes > this._s.heapHighWater) this._s.heapHighWater = bytes;
  }

  _setState(h, state) {
    if (state !== 'starting') clearTimeout(h.startTimer);
    h.state = state;
    const p = this._perWorker.get(h.serial);
    if (p) p.state = state;
  }

  _onMessage(h, m) {
    if (h.state === 'closing' || h.state === 'dead') return;
    if (m?.type === 'ready') {
      this._noteHeap(h, m.heapBytes);
      if (m.binding) this.inputBinding = m.binding;
      Object.assign(this._perWorker.get(h.serial), { sharedWasm: !!m.sharedWasm, executionProvider: m.executionProvider ?? 'wasm', fallback: m.fallback });
      this._setState(h, 'idle');
      this._checkReady();
      this._pump();
    } else if (m?.type === 'init-error') {
      const oom = m.oom ? ' (out of memory)' : '';
      if (m.phase === 'runtime') this._fail(poolError(`a worker could not start: ${m.message}`, 'WorkerStartFailed'), h);
      else this._fail(poolError(`the network could not be loaded: ${m.message}${oom}`, 'ModelLoadFailed'), h);
    } else this._onTileMessage(h, m);
  }

  _onDeath(h, cause) {
    if (h.state === 'closing' || h.state === 'dead') return;
    this._s.crashes++;
    if (h.state === 'starting') {
      this._fail(poolError(`a worker could not start: ${cause}`, 'WorkerStartFailed'), h);
      return;
    }
    this._workerDied(h, cause);
  }

  /** Fatal start failure: reject the waiters and every queued tile with `err`; the pool refuses new runs. */
  _fail(err, h) {
    if (!this._fatal) this._fatal = err;
    for (const w of this._readyWaiters.splice(0)) w.reject(this._fatal);
    this._failQueued(this._fatal);
    if (h) this._retire(h, 'init failed');
  }

  _checkReady() {
    if (this._readyWaiters.length === 0) return;
    if (this._fatal) {
      for (const w of this._readyWaiters.splice(0)) w.reject(this._fatal);
      return;
    }
    if (this._handles.some((h) => h.state === 'starting')) return;
    for (const w of this._readyWaiters.splice(0)) w.resolve();
  }

  /** Terminate a worker and forget it (it no longer counts towards K). Resolves on its exit. */
  _retire(h, why) {
    if (h.state === 'closing' || h.state === 'dead') return h.w.terminate();
    const i = this._handles.indexOf(h);
    if (i >= 0) this._handles.splice(i, 1);
    this._setState(h, 'closing');
    const p = this._perWorker.get(h.serial);
    if (p) p.endedBy = why;
    if (this._slots) Atomics.store(this._slots, 1 + h.slotIndex, 0);
    if (h.w.exited) {
      this._setState(h, 'dead');
      return Promise.resolve();
    }
    this._closing.add(h);
    const done = h.w.terminate().then(() => {
      this._closing.delete(h);
      this._setState(h, 'dead');
    });
    this._checkReady();
    return done;
  }
}
