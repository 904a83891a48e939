// Tiny adapter so the worker pool runs unchanged on node worker_threads and browser Web Workers.
//
// Main side:   createWorker(url | Worker, { name }) → { postMessage, onMessage, onError, onExit, terminate }
// Worker side: workerPort() → { post, onMessage }
// Both:        isNode, canShareMemory(), hardwareConcurrency(), nodeHost()
//
// Bundlers (Vite, webpack, esbuild) read this file for browser builds, so it imports nothing from node:
// node's built-ins are taken with process.getBuiltinModule (node >= 20.16; synchronous, and not an import a
// bundler follows), and node-only code lives in node-host.js behind the package's `#node-host` subpath import
// (condition `node`; browsers get browser-host.js). No top-level await either: Vite bundles workers as IIFEs.

/** True under node (main thread or worker_threads), false in browsers (page or Web Worker). */
export const isNode =
  typeof process === 'object' && process !== null && !!process.versions?.node && typeof window === 'undefined' &&
  typeof globalThis.WorkerGlobalScope === 'undefined';

const builtin = (name) => {
  if (typeof process.getBuiltinModule !== 'function') {
    throw new Error(`Tessera needs node >= 20.16 (process.getBuiltinModule); this is node ${process.versions.node}`);
  }
  return process.getBuiltinModule(name);
};
const threads = isNode ? builtin('node:worker_threads') : null;
const os = isNode ? builtin('node:os') : null;

let host = null;
/**
 * The node-only helpers (node-host.js: the CommonJS wasm module, files, http, ONNX Runtime's files), loaded once.
 * Precondition: isNode (browsers resolve `#node-host` to browser-host.js, whose helpers throw).
 * @returns {Promise<typeof import('./node-host.js')>}
 */
export function nodeHost() {
  host ??= import('#node-host');
  return host;
}

/**
 * True when SharedArrayBuffers can be created and posted to workers (node; browsers only when the page
 * is cross-origin isolated — the same condition ONNX Runtime Web needs for multi-threading).
 */
export function canShareMemory() {
  if (typeof SharedArrayBuffer === 'undefined') return false;
  return isNode || globalThis.crossOriginIsolated === true;
}

/** Logical cores available to this page/process (>= 1). */
export function hardwareConcurrency() {
  if (isNode) return Math.max(1, os.availableParallelism?.() ?? os.cpus().length);
  return Math.max(1, globalThis.navigator?.hardwareConcurrency ?? 1);
}

/**
 * The node options a worker thread gets: the process's, less --input-type, which names how to read the main script
 * (`node --input-type=module -e ...`) and makes a worker started from a file fail. Precondition: isNode.
 */
function workerExecArgv() {
  const out = [];
  for (let i = 0; i < process.execArgv.length; i++) {
    const a = process.execArgv[i];
    if (a === '--input-type') i++;
    else if (!a.startsWith('--input-type=')) out.push(a);
  }
  return out;
}

/**
 * Start a module worker, or wrap one the caller started. Precondition: `target` is a URL (or href) of an ES module,
 * or (browsers) a Worker: bundlers only understand workers written at the call site as
 * `new Worker(new URL('./x.js', import.meta.url), { type: 'module' })`, so browser code starts its own and hands it here.
 * The returned handle normalises the events: onMessage(data), onError(Error), onExit(code) — onExit
 * fires exactly once, on node when the thread has really exited, in browsers when terminate() is called
 * (browsers have no exit event).
 * @param {URL|string|Worker} target
 * @param {{name?: string}} [opts]
 */
export function createWorker(target, { name } = {}) {
  const listeners = { message: [], error: [], exit: [] };
  const emit = (type, v) => {
    for (const cb of listeners[type]) cb(v);
  };
  let exited = false;
  let exitResolve;
  const exitPromise = new Promise((r) => (exitResolve = r));
  const fireExit = (code) => {
    if (exited) return;
    exited = true;
    emit('exit', code);
    exitResolve(code);
  };
  let w;
  if (isNode) {
    w = new threads.Worker(target instanceof URL ? target : new URL(target), { name, workerData: { tessera: true }, execArgv: workerExecArgv() });
    w.on('message', (d) => emit('message', d));
    w.on('error', (e) => emit('error', e instanceof Error ? e : new Error(String(e))));
    w.on('messageerror', (e) => emit('error', new Error(`message could not be deserialised: ${e?.message ?? e}`)));
    w.on('exit', (code) => fireExit(code));
  } else {
    w = typeof Worker === 'function' && target instanceof Worker ? target : new Worker(target, { type: 'module', name });
    w.addEventListener('message', (e) => emit('message', e.data));
    w.addEventListener('error', (e) => {
      e.preventDefault?.();
      emit('error', new Error(e.message || 'the worker failed (error event)'));
    });
    w.addEventListener('messageerror', () => emit('error', new Error('message could not be deserialised')));
  }
  return {
    postMessage(msg, transfer = []) {
      w.postMessage(msg, transfer);
    },
    onMessage(cb) {
      listeners.message.push(cb);
    },
    onError(cb) {
      listeners.error.push(cb);
    },
    onExit(cb) {
      listeners.exit.push(cb);
    },
    get exited() {
      return exited;
    },
    /** Terminate the thread; resolves once it has exited. */
    terminate() {
      if (!exited) {
        if (isNode) {
          w.terminate().catch(() => {});
        } else {
          w.terminate();
          queueMicrotask(() => fireExit(null));
        }
      }
      return exitPromise;
    },
  };
}

/**
 * Worker side: the channel to the thread that started this worker.
 * @returns {{post(msg: any, transfer?: Transferable[]): void, onMessage(cb: (data: any) => void): void}}
 */
export function workerPort() {
  if (isNode) {
    const port = threads.parentPort;
    if (!port) throw new Error('workerPort() called outside a worker thread');
    return { post: (m, t = []) => port.postMessage(m, t), onMessage: (cb) => port.on('message', cb) };
  }
  return {
    post: (m, t = []) => self.postMessage(m, t),
    onMessage: (cb) => self.addEventListener('message', (e) => cb(e.data)),
  };
}
