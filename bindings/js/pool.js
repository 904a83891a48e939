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
import { createWorker, canShareMemory, isNode, nodeHost } from './platform.js';
import { platformProviders, prepareModel } from './execution-provider.js';

const DEFAULT_WATCHDOG_MS = 10 * 60 * 1000;
const SLOT_CAPACITY = 256;

const ORT_WASM = 'ort-wasm-simd-threaded.wasm';
const compiledCache = new Map(); // wasm URL → Promise<WebAssembly.Module|null>, shared by all pools here

/**
 * Where the ORT wasm binary that the workers' ORT build will load lives, or null when unknown (then each worker
 * compiles its own). Only the plain threaded build (ort.wasm*.mjs / node's default) is precompiled; without an
 * ortModuleUrl a browser worker imports ONNX Runtime as the bundler resolved it, whose wasm URL only it knows.
 */
async function ortWasmUrl(ortModuleUrl, wasmPaths) {
  if (typeof wasmPaths === 'object' && wasmPaths?.wasm) return String(wasmPaths.wasm?.href ?? wasmPaths.wasm);
  if (isNode && (ortModuleUrl === undefined || ortModuleUrl === 'onnxruntime-web')) return (await nodeHost()).ortDistFile(ORT_WASM);
  if (ortModuleUrl === undefined) return null;
  if (!/\/ort\.wasm(\.min)?\.mjs$|\/ort\.node\.min\.mjs$/.test(String(ortModuleUrl))) return null;
  if (typeof wasmPaths === 'string') return new URL(ORT_WASM, new URL(wasmPaths, HERE)).href;
  return new URL(ORT_WASM, new URL(ortModuleUrl, HERE)).href;
}

function compileOrtWasm(url) {
  if (!url) return Promise.resolve(null);
  let p = compiledCache.get(url);
  if (!p) {
    p = (async () => {
      if (isNode && url.startsWith('file:')) return WebAssembly.compile(await (await nodeHost()).readFileBytes(url));
      return WebAssembly.compileStreaming(fetch(url, { credentials: 'same-origin' }));
    })().catch(() => null); // workers then compile ORT's wasm themselves
    compiledCache.set(url, p);
  }
  return p;
}

// This module's URL, for relative URLs in options. Never `new URL(expression, import.meta.url)`: webpack warns
// about each such expression (the literal form is what bundlers rewrite, and would copy as an asset).
const HERE = import.meta.url;

/** A sibling file of this module as a URL (node's workers). */
function sibling(file) {
  return new URL(file, HERE);
}

/**
 * Where a worker finds onnxruntime-web when no ortModuleUrl is given: undefined (its own `import('#ort')`) under
 * node and in bundles; on a page that serves this package unbundled (the repository's pages and benchmarks, or
 * node_modules served as is), whose workers cannot resolve the bare name, the ort.wasm.min.mjs that answers beside
 * the package (the repository's node_modules, or npm's hoisted layout).
 */
async function defaultOrtModuleUrl() {
  if (isNode || HERE.startsWith('file:') || !HERE.endsWith('/bindings/js/pool.js')) return undefined;
  for (const rel of ['../../node_modules/onnxruntime-web/dist/ort.wasm.min.mjs', '../../../onnxruntime-web/dist/ort.wasm.min.mjs']) {
    const url = new URL(rel, HERE).href;
    try {
      if ((await fetch(url, { method: 'HEAD' })).ok) return url;
    } catch {
      // try the next layout
    }
  }
  return undefined;
}

/** onnxruntime-web's all-backends build beside an ort.wasm*.mjs URL (an unbundled page), else undefined. */
function gpuBuildBeside(ortModuleUrl) {
  const url = ortModuleUrl === undefined ? '' : String(ortModuleUrl);
  return /\/ort\.wasm(\.min)?\.mjs$/.test(url) ? url.replace(/ort\.wasm(\.min)?\.mjs$/, 'ort.all.min.mjs') : undefined;
}

function poolError(message, code, extra = {}) {
  const e = new Error(message, extra.cause !== undefined ? { cause: extra.cause } : undefined);
  e.code = code;
  Object.assign(e, extra);
  return e;
}

function abortError(message) {
  return new DOMException(message, 'AbortError');
}

/**
 * A pool of ONNX Runtime Web workers running network calls (tiles) with least-pending dispatch,
 * fault recovery (one retry on a fresh worker), a per-tile watchdog, cancellation and heap recycling.
 */
export class WorkerPool {
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
   *   ort.wasm.min.mjs beside the package, see defaultOrtModuleUrl)
   * @param {string|URL} [o.workerUrl] URL of a replacement ort-worker.js (default: ort-worker.js next to this file)
   * @param {boolean} [o.shareCompiledWasm=true] compile ORT's wasm once here and hand the WebAssembly.Module to
   *   every worker (falls back to per-worker compilation when the ORT build is not the plain threaded one)
   * @param {string} [o.inputName] network input (default: the first)
   * @param {string[]} [o.inputRoles] multi-input networks (iQSM family): the roles of the inputs in the reference
   *   order, the first being run()'s `input`; each worker binds them to the network's input names (input-binding.js)
   * @param {Object<string,string>} [o.inputNames] explicit role → network input name bindings (override the matching)
   * @param {string} [o.outputName] network output (default: the first)
   * @param {string[]} [o.executionProviders=['wasm']] preferred ONNX Runtime execution providers ('webgpu', 'webnn',
   *   'wasm'), first first; the pool runs the first that the platform offers and the network's graph allows
   *   (execution-provider.js), wasm when none; a worker whose session fails on it falls back to wasm
   * @param {{node: boolean, webgpu: boolean, webnn: boolean}} [o.platform] what the platform offers (default: detected
   *   here, platformProviders())
   * @param {string} [o.ortGpuModuleUrl] URL of an onnxruntime-web build with WebGPU/WebNN (ort.webgpu.min.mjs,
   *   ort.all.min.mjs) for the workers that use them (default: ort.all.min.mjs beside an ort.wasm*.mjs ortModuleUrl,
   *   else ortModuleUrl / the worker's own import)
   */
  constructor(o = {}) {
    const { model } = o;
    if (!(model instanceof Uint8Array) && !(model instanceof ArrayBuffer) && !(globalThis.SharedArrayBuffer && model instanceof SharedArrayBuffer))
      throw new TypeError('WorkerPool: model must be a Uint8Array or ArrayBuffer of ONNX bytes');
    const K = o.workers ?? 1;
    const T = o.threadsPerWorker ?? 1;
    if (!Number.isInteger(K) || K < 1) throw new RangeError(`WorkerPool: workers must be an integer >= 1 (got ${K})`);
    if (!Number.isInteger(T) || T < 1) throw new RangeError(`WorkerPool: threadsPerWorker must be an integer >= 1 (got ${T})`);
    this._K = K;
    this._T = T;
    this._watchdogMs = o.watchdogMs ?? DEFAULT_WATCHDOG_MS;
    this._recycleHeapBytes = o.recycleHeapBytes ?? Infinity;
    this._heapGuardBytes = o.heapGuardBytes ?? Infinity;
    this._startTimeoutMs = o.startTimeoutMs ?? Math.max(this._watchdogMs, 120000);
    this._wasmPaths = o.ortWasmPaths;
    this._ortModuleUrl = o.ortModuleUrl;
    this._workerUrl = o.workerUrl ? new URL(o.workerUrl, HERE) : null;
    this._shareWasm = o.shareCompiledWasm ?? true;
    this._ortUrl = null; // Promise<string|undefined>: ortModuleUrl or defaultOrtModuleUrl(), made on the first spawn
    this._wasmModule = null; // Promise<WebAssembly.Module|null>, made on the first spawn
    this._inputName = o.inputName;
    this._inputRoles = o.inputRoles;
    this._inputNames = o.inputNames;
    this._outputName = o.outputName;
    this._ortGpuModuleUrl = o.ortGpuModuleUrl;
    // The execution provider, chosen once from the graph (weights skipped); for WebGPU the graph rewritten for it
    // where that lets it run there (execution-provider.js prepareModel).
    const prepared = prepareModel({ model, preference: o.executionProviders ?? ['wasm'], platform: o.platform ?? platformProviders() });
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
    this._queue = [];
    this._serial = 0;
    this._seq = 0;
    this._terminated = false;
    this._fatal = null;
    this._readyWaiters = [];
    this._inFlightMsg = 0;
    this._maxInFlightMsg = 0;
    this._perWorker = new Map();
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
   * Which ONNX Runtime execution provider runs the network: {requested (the preference), selected (what the graph
   * and the platform allowed), provider (what the workers' sessions run on; 'a+b' if they differ; null before any
   * is ready), skipped: [{provider, reason}] (passed over before selection), fallback (why a worker's session
   * fell back to wasm, else undefined)}.
   */
  get executionProvider() {
    const workers = [...this._perWorker.values()].filter((p) => p.executionProvider);
    const ran = [...new Set(workers.map((p) => p.executionProvider))];
    return {
      requested: [...this._ep.requested],
      selected: this._ep.provider,
      provider: ran.length ? ran.join('+') : null,
      skipped: this._ep.skipped.map((s) => ({ ...s })),
      fallback: workers.find((p) => p.fallback)?.fallback,
      ...(this._ep.graphRewrite && { graphRewrite: this._ep.graphRewrite.map((r) => ({ ...r })) }),
    };
  }

  /** Number of worker threads started and not yet exited (including ones being terminated). */
  get liveWorkers() {
    return this._handles.length + this._closing.size;
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
      this._ortUrl = this._ortModuleUrl !== undefined ? Promise.resolve(this._ortModuleUrl) : defaultOrtModuleUrl();
      this._wasmModule = this._shareWasm && this._ep.provider === 'wasm'
        ? this._ortUrl.then((url) => ortWasmUrl(url, this._wasmPaths)).then(compileOrtWasm, () => null)
        : Promise.resolve(null);
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
        inputName: this._inputName,
        inputRoles: this._inputRoles,
        inputNames: this._inputNames,
        outputName: this._outputName,
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
    switch (m?.type) {
      case 'ready':
        this._noteHeap(h, m.heapBytes);
        if (m.binding) this.inputBinding = m.binding;
        Object.assign(this._perWorker.get(h.serial), { sharedWasm: !!m.sharedWasm, executionProvider: m.executionProvider ?? 'wasm', fallback: m.fallback });
        this._setState(h, 'idle');
        this._checkReady();
        this._pump();
        break;
      case 'init-error': {
        const oom = m.oom ? ' (out of memory)' : '';
        if (m.phase === 'runtime') this._fail(poolError(`a worker could not start: ${m.message}`, 'WorkerStartFailed'), h);
        else this._fail(poolError(`the network could not be loaded: ${m.message}${oom}`, 'ModelLoadFailed'), h);
        break;
      }
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

  _onDeath(h, cause) {
    if (h.state === 'closing' || h.state === 'dead') return;
    this._s.crashes++;
    if (h.state === 'starting') {
      this._fail(poolError(`a worker could not start: ${cause}`, 'WorkerStartFailed'), h);
      return;
    }
    const job = h.job;
    if (job) this._detach(h, job);
    this._retire(h, 'died');
    if (job) this._fault(job, `${cause} on worker ${h.serial}`);
    else this._pump();
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
    const GB = (b) => (b >= 1e9 ? `${(b / 1e9).toFixed(2)} GB` : `${(b / 1e6).toFixed(1)} MB`);
    const what = m.requestedBytes > m.heapBytes ? `asked to grow its heap from ${GB(m.heapBytes)} to ${GB(m.requestedBytes)}` : `reached a heap of ${GB(m.heapBytes)}`;
    this._detach(h, job);
    this._retire(h, 'heap guard');
    this._settle(
      job,
      poolError(
        `tile ${job.id} stopped: ONNX Runtime worker ${h.serial} ${what}, past the ${GB(this._heapGuardBytes)} heap guard below the ` +
          '4 GiB wasm heap ceiling (near it a run stalls instead of failing)',
        'MemoryCeiling',
        { tile: job.id, heapBytes: m.heapBytes, requestedBytes: m.requestedBytes, guardBytes: this._heapGuardBytes },
      ),
    );
    this._pump();
  }

  /** Fatal start failure: reject the waiters and every queued tile with `err`; the pool refuses new runs. */
  _fail(err, h) {
    if (!this._fatal) this._fatal = err;
    for (const w of this._readyWaiters.splice(0)) w.reject(this._fatal);
    for (const job of [...this._queue]) this._settle(job, this._fatal);
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
