// One pool worker: one ONNX Runtime Web instance (wasm backend, or WebGPU / WebNN when asked) with ONE InferenceSession, running one
// tile at a time. Started by pool.js; the same file runs as a node worker_thread and a browser module Worker.
//
// Protocol (pool → worker):
//   {type:'init', model: Uint8Array, ortModuleUrl?, wasmPaths?, wasmModule?: WebAssembly.Module, numThreads,
//    inputName?, inputRoles?: string[], inputNames?: {role: name}, outputName?, slots?: SharedArrayBuffer, slotIndex,
//    executionProvider?: 'webgpu'|'webnn'|'wasm' (default wasm; chosen by execution-provider.js), ortGpuModuleUrl?}
//   {type:'run', seq, tile, input: Float32Array, dims: number[], extras?: [{role, data, dims}]}
// (Faults for tests are injected by a stand-in worker, tests/js/fault-ort-worker.js, never by this file.)
// (worker → pool):
//   {type:'ready', inputName, outputName, inputNames, outputNames, binding?, heapBytes, sharedWasm,
//    executionProvider (the EP the session runs on), fallback? (why not the one asked for: its session failed)}
//   {type:'init-error', phase: 'runtime'|'session', message, oom?}
//   {type:'start', seq, t}               (the run has begun in this worker)
//   {type:'heap', seq, heapBytes, requestedBytes?, ceiling?}  (during a run: the heap grew, or a growth was refused)
//   {type:'result', seq, output: Float32Array (transferred), dims, seconds, heapBytes, t}
//   {type:'error', seq, message, name, oom, ceiling, heapBytes, requestedBytes?, t}
//
// Heap measurement: ONNX Runtime Web 1.30.0 does not expose its emscripten Module object (wasm-factory.ts
// keeps it in a closure; only `getInstance()` inside the bundle sees it). Its threaded wasm build creates its
// memory in JS — `new WebAssembly.Memory({initial:256, maximum:65536, shared:true})` in
// dist/ort-wasm-simd-threaded.mjs — and grows it with `memory.grow()`. Before importing ORT, this worker
// wraps the WebAssembly.Memory constructor (and WebAssembly.instantiate*, for exported memories) to keep a
// reference to every Memory created in this worker's realm; heapBytes = the largest `memory.buffer.byteLength`
// read at the moment of reporting (read and dropped at once: no view is kept). Wasm memory never shrinks, so the
// value after each run is also that instance's high-water mark.
//
// Heap guard: every Memory's grow() is wrapped too. A growth that would take the heap past init's heapGuardBytes
// (budget.h WASM_WORKER_HEAP_GUARD_BYTES, below the 4 GiB ceiling where a run stalls) is refused: the pool is told at
// once ({type:'heap', ceiling: true}, posted from inside the run), and ONNX Runtime's allocation fails instead of
// creeping on towards the ceiling. Every other growth during a run is posted too, so the pool sees the heap mid-run.
//
// ONNX Runtime Web itself: `import('#ort')` (package.json imports: onnxruntime-web under node, its CPU-only
// onnxruntime-web/wasm build elsewhere), a literal specifier that node and bundlers resolve, so a bundled app
// carries ORT and its .wasm like any dependency; it runs after the probe is installed. An unbundled page's workers
// see no import map: there the pool passes ortModuleUrl (from the page's import map via createTessera, else the
// ort.wasm.min.mjs beside the package: ort-location.js).
import { workerPort, isNode } from '../platform.js';
import { bindInputs, fitDims } from '../input-binding.js';

const memories = new Set();

let precompiled = null; // a WebAssembly.Module of ORT's wasm compiled once by the pool (saves ~0.4–1 s per worker)
let sharedWasm = false;
let guardBytes = Infinity; // init's heapGuardBytes
let runningSeq = null; // the run in progress (heap messages name it)
let refused = null; // {heapBytes, requestedBytes} of the last growth the guard refused

/** Wraps a memory's grow(): growths past the guard are refused, the others posted to the pool during a run. */
function guardGrowth(mem) {
  const realGrow = mem.grow;
  Object.defineProperty(mem, 'grow', {
    configurable: true,
    value(pages) {
      const heapBytes = mem.buffer.byteLength;
      const requestedBytes = heapBytes + pages * 65536;
      if (requestedBytes > guardBytes) {
        refused = { heapBytes, requestedBytes };
        if (runningSeq !== null) port?.post({ type: 'heap', seq: runningSeq, heapBytes, requestedBytes, ceiling: true });
        throw new RangeError(`the heap guard refused to grow the heap from ${heapBytes} to ${requestedBytes} bytes (guard ${guardBytes} bytes)`);
      }
      const out = realGrow.call(mem, pages);
      if (runningSeq !== null) port?.post({ type: 'heap', seq: runningSeq, heapBytes: mem.buffer.byteLength });
      return out;
    },
  });
  return mem;
}

function installMemoryProbe() {
  const WA = globalThis.WebAssembly;
  if (!WA || WA.Memory.__tesseraProbe) return;
  const RealMemory = WA.Memory;
  const RealModule = WA.Module;
  const Probe = new Proxy(RealMemory, {
    construct(target, args, newTarget) {
      const mem = Reflect.construct(target, args, newTarget === Probe ? target : newTarget);
      memories.add(guardGrowth(mem));
      return mem;
    },
    get(target, prop, receiver) {
      if (prop === '__tesseraProbe') return true;
      return Reflect.get(target, prop, receiver);
    },
  });
  WA.Memory = Probe;
  const noteExports = (result) => {
    const inst = result?.instance ?? result;
    for (const v of Object.values(inst?.exports ?? {})) if (v instanceof RealMemory && !memories.has(v)) memories.add(guardGrowth(v));
    return result;
  };
  // Instantiate ORT's wasm from the pool's precompiled module when it links; otherwise as ORT asked.
  const usePrecompiled = async (imports) => {
    const mod = precompiled;
    precompiled = null;
    try {
      const instance = await realInstantiate.call(WA, mod, imports);
      sharedWasm = true;
      return noteExports({ module: mod, instance });
    } catch {
      return null; // e.g. a different ORT build (LinkError): fall back
    }
  };
  const realInstantiate = WA.instantiate;
  WA.instantiate = async function (src, imports) {
    if (precompiled && !(src instanceof RealModule)) {
      const r = await usePrecompiled(imports);
      if (r) return r;
    }
    return noteExports(await realInstantiate.call(WA, src, imports));
  };
  const realStreaming = WA.instantiateStreaming;
  if (typeof realStreaming === 'function') {
    WA.instantiateStreaming = async function (src, imports) {
      if (precompiled) {
        const r = await usePrecompiled(imports);
        if (r) {
          Promise.resolve(src).then((res) => res?.body?.cancel?.(), () => {});
          return r;
        }
      }
      return noteExports(await realStreaming.call(WA, src, imports));
    };
  }
}

/** Current (= high-water: wasm memories never shrink) bytes of this worker's ORT wasm heap. */
function heapBytes() {
  let max = 0;
  for (const m of memories) {
    const n = m.buffer.byteLength;
    if (n > max) max = n;
  }
  return max;
}

const OOM_RE = /out of memory|\boom\b|bad_alloc|allocation failed|cannot enlarge memory|could not allocate|failed to allocate|memory access out of bounds/i;

function isOom(e) {
  return e instanceof RangeError || OOM_RE.test(String(e?.message ?? e));
}

// In a bundle, ONNX Runtime's own pthread workers (ORT ≥ 2 threads) run this very chunk: ORT starts them from its
// import.meta.url, which the bundler made this file's URL, and names them 'em-pthread'. There only ORT runs: its
// module, once evaluated, takes the pthread role by itself.
const ortPthread = !isNode && typeof self === 'object' && !!self.name?.startsWith('em-pthread');
if (ortPthread) import('#ort');
else installMemoryProbe();
const port = ortPthread ? null : workerPort();
let ort = null;
let session = null;
let inputName = null;
let outputName = null;
let binding = null; // multi-input networks: role → input name
let executionProvider = null; // {provider: the EP the session runs on, fallback?: why not the one asked for}
const declared = new Map(); // input name → declared shape (session.inputMetadata), where ORT gives it
let slots = null;
let slotIndex = 0;
const now = () => performance.timeOrigin + performance.now();

/** Mark this worker as running in the shared slot table and raise the shared max-in-flight (slot 0). */
function markRunning(on) {
  if (!slots) return;
  Atomics.store(slots, 1 + slotIndex, on ? 1 : 0);
  if (!on) return;
  let n = 0;
  for (let i = 1; i < slots.length; i++) n += Atomics.load(slots, i);
  for (;;) {
    const cur = Atomics.load(slots, 0);
    if (n <= cur || Atomics.compareExchange(slots, 0, cur, n) === cur) break;
  }
}

/** ONNX Runtime Web: from url when given, else as node or the bundler resolved the package. */
async function importOrt(url) {
  if (url) {
    try {
      return await import(/* @vite-ignore */ /* webpackIgnore: true */ url);
    } catch (e) {
      throw new Error(`cannot import ONNX Runtime Web from '${url}': ${e?.message ?? e}`);
    }
  }
  try {
    return await import('#ort');
  } catch (e) {
    throw new Error(
      `cannot import ONNX Runtime Web ('onnxruntime-web'): ${e?.message ?? e}. Without a bundler, name ` +
        "'onnxruntime-web' in the page's import map (workers see none, so createTessera passes its URL on) or pass " +
        'createTessera({ ortModuleUrl }) the URL of ort.wasm.min.mjs',
    );
  }
}

/** One InferenceSession of the model on execution provider `ep` ('webgpu' | 'webnn' | 'wasm'). */
async function createSession(msg, ep) {
  ort.env.wasm.numThreads = msg.numThreads;
  if (msg.wasmPaths) ort.env.wasm.wasmPaths = msg.wasmPaths;
  ort.env.logLevel = 'error';
  return ort.InferenceSession.create(msg.model, { executionProviders: [ep], graphOptimizationLevel: 'all' });
}

async function init(msg) {
  try {
    if (msg.slots) {
      slots = new Int32Array(msg.slots);
      slotIndex = msg.slotIndex;
    }
    const ep = msg.executionProvider ?? 'wasm';
    precompiled = ep === 'wasm' ? msg.wasmModule ?? null : null;
    guardBytes = msg.heapGuardBytes ?? Infinity;
    // A non-wasm EP first, from a build of ONNX Runtime Web that has it; if that fails, wasm, and say why.
    let fallback;
    if (ep !== 'wasm') {
      try {
        ort = await importOrt(msg.ortGpuModuleUrl ?? msg.ortModuleUrl);
        session = await createSession(msg, ep);
      } catch (e) {
        session = null;
        fallback = `the ${ep} session could not be created (${String(e?.message ?? e).split('\n')[0]}); ran on wasm`;
        if (!msg.ortGpuModuleUrl && !isNode)
          fallback += ": pass createTessera({ ortGpuModuleUrl }) the URL of onnxruntime-web's ort.webgpu.min.mjs (or ort.all.min.mjs) where ONNX Runtime is bundled as its wasm-only build";
      }
    }
    if (!session) {
      if (!ort) {
        try {
          ort = await importOrt(msg.ortModuleUrl);
        } catch (e) {
          port.post({ type: 'init-error', phase: 'runtime', message: e.message });
          return;
        }
      }
      session = await createSession(msg, 'wasm');
    }
    executionProvider = { provider: fallback ? 'wasm' : ep, fallback };
    outputName = msg.outputName ?? session.outputNames[0];
    if (msg.inputRoles?.length) {
      ({ binding } = bindInputs(msg.inputRoles, session.inputNames, msg.inputNames));
      inputName = binding[msg.inputRoles[0]];
      const meta = session.inputMetadata ?? [];
      session.inputNames.forEach((n, i) => {
        if (meta[i]?.isTensor && Array.isArray(meta[i].shape)) declared.set(n, meta[i].shape);
      });
    } else {
      inputName = msg.inputName ?? session.inputNames[0];
    }
    if (!session.inputNames.includes(inputName))
      throw new Error(`the network has no input '${inputName}' (inputs: ${session.inputNames.join(', ')})`);
    if (!session.outputNames.includes(outputName))
      throw new Error(`the network has no output '${outputName}' (outputs: ${session.outputNames.join(', ')})`);
    port.post({
      type: 'ready',
      inputName,
      outputName,
      inputNames: [...session.inputNames],
      outputNames: [...session.outputNames],
      binding: binding ?? undefined,
      heapBytes: heapBytes(),
      sharedWasm,
      executionProvider: executionProvider.provider,
      fallback: executionProvider.fallback,
    });
  } catch (e) {
    port.post({ type: 'init-error', phase: 'session', message: String(e?.message ?? e), oom: isOom(e) || !!refused, ceiling: !!refused, heapBytes: heapBytes() });
  }
}

async function run(msg) {
  const { seq, dims } = msg;
  refused = null;
  runningSeq = seq;
  markRunning(true);
  port.post({ type: 'start', seq, t: now() });
  try {
    const t0 = performance.now();
    const feeds = { [inputName]: new ort.Tensor('float32', msg.input, dims) };
    for (const e of msg.extras ?? []) {
      const name = binding?.[e.role];
      if (!name) throw new Error(`the network has no input bound to '${e.role}' (inputs: ${session.inputNames.join(', ')})`);
      feeds[name] = new ort.Tensor('float32', e.data, fitDims(e.dims, declared.get(name)));
    }
    const results = await session.run(feeds, [outputName]);
    const seconds = (performance.now() - t0) / 1000;
    const out = results[outputName];
    let data = out.data;
    if (!(data instanceof Float32Array)) throw new Error(`the network's output is ${out.type}, expected float32`);
    if (data.byteOffset !== 0 || data.byteLength !== data.buffer.byteLength || !(data.buffer instanceof ArrayBuffer))
      data = data.slice(); // own, whole, transferable buffer
    for (const k of Object.keys(results)) results[k].dispose?.();
    markRunning(false);
    runningSeq = null;
    port.post(
      { type: 'result', seq, output: data, dims: Array.from(out.dims, Number), seconds, heapBytes: heapBytes(), t: now() },
      [data.buffer],
    );
  } catch (e) {
    markRunning(false);
    runningSeq = null;
    port.post({
      type: 'error',
      seq,
      message: String(e?.message ?? e),
      name: e?.name ?? 'Error',
      oom: isOom(e) || !!refused,
      ceiling: !!refused,
      heapBytes: heapBytes(),
      requestedBytes: refused?.requestedBytes,
      t: now(),
    });
  }
}

port?.onMessage((msg) => {
  if (msg?.type === 'init') init(msg);
  else if (msg?.type === 'run') run(msg);
});
