// tessera-qsm: QSM from a scanner's phase or field map to a susceptibility map, with classical methods or tiled deep
// networks, in the browser and in node.
// The friendly API. Every call goes to a dedicated driver worker that holds the C++ core (wasm) and the
// ONNX Runtime worker pools, so the caller's thread (a page's main thread) never does heavy work: it reads no ONNX
// graph either (the driver reads a network's graph once per weights sha256, runtime/graphs.js).
import { createWorker, isNode } from './platform.js';
import { TesseraError, errorFromMessage } from './errors.js';
import { loadModel, sha256Hex } from './model-loader.js';
import { geometryOf, makeVolume } from './io/volume.js';
import { checkPreference } from './execution-provider.js';
import { NETWORK_KEYS, METHOD_KEYS, PIPELINE_KEYS, methodNamesOf, unknownKeysMessage } from './request.js';
import { commandRequest, pipelineArgs, commandLine, methodsMarkdown } from './methods-text.js';

/** The warning for a registry weights file run with other bytes (sha256 given), or '' when they are the registry's. */
function unverifiedNote(w, sha256) {
  if (!w.sha256 || sha256 === w.sha256) return '';
  return `weights not verified: sha256 ${sha256} of ${w.file} differs from the registry's ${w.sha256} (verifyWeights: false); the results are your export's, not the published network's`;
}
import { apiPhaseRescale } from './io/phase-units.js';
import { maskFromValues, maskValuesWarning } from './io/mask-values.js';
import { nonFiniteText } from './io/inputs.js';

export { TesseraError, loadModel, sha256Hex };
export { graphReceptiveField, contextProfile } from './receptive-field.js';
export { selectExecutionProvider, graphOperators, unsupportedOperators, platformProviders, EXECUTION_PROVIDERS } from './execution-provider.js';
export { makeVolume, geometryOf } from './io/volume.js';
export { loadInputs, checkEchoTimes, InputError, nonFiniteText } from './io/inputs.js';
export { PhaseRefusal, phrasePhaseRefusal } from './io/phase-units.js';
export { bytesText } from './bytes.js';
export { ALSO_OUTPUTS, alsoOutput } from './io/derivatives.js';
export { pipelineArgs, commandLine, methodsMarkdown } from './methods-text.js';
export { readCachedWeights, cacheWeights, listCachedWeights, clearWeightsCache, loadWeightsCached } from './model-loader.js';
export { readNifti, readNiftiAsync, readEchoes, readEchoesAsync, phaseToRadians, phaseDifferenceToRadians, readMask, maskFromValues, writeNifti, hzToPpm, radPerSecToPpm, thresholdMask, GAMMA_BAR_MHZ_PER_T } from './io/nifti.js';

/** A Volume ({dims, voxelMm, b0Dir, data, ...}, what the readers return) rather than a bare typed array. */
function isVolume(v) {
  return !!v && typeof v === 'object' && !ArrayBuffer.isView(v) && ArrayBuffer.isView(v.data) && Array.isArray(v.dims);
}

/** The request keys that hold volumes, the runs' big inputs; the first Volume among them gives the geometry. */
const VOLUME_KEYS = ['field', 'phase', 'totalField', 'phaseDifference', 'magnitude', 'mask'];

/**
 * Takes Volumes for field, phase, totalField, phaseDifference, magnitude and mask: their data go to the runtime and the
 * geometry comes from the main one (field, phase, totalField or phaseDifference) unless given. Volumes of other dims are refused by name.
 */
function unwrapVolumes(args) {
  const out = { ...args };
  let from = null;
  for (const k of VOLUME_KEYS) {
    const v = args[k];
    if (!isVolume(v)) continue;
    const dims = v.dims.slice(0, 3);
    if (from && dims.some((d, i) => d !== from.dims[i])) {
      throw new TesseraError(`${k} is ${dims.join('×')} but ${from.name} is ${from.dims.join('×')}: the volumes must have the same dims`, 'InvalidArgument');
    }
    from ??= { name: k, dims };
    out.geometry ??= geometryOf(v);
    out[k] = k !== 'mask' && !(v.data instanceof Float32Array) ? Float32Array.from(v.data) : v.data;
  }
  // An array left empty by an earlier run (its buffer transferred to the runtime) would be posted as nothing at all.
  for (const k of VOLUME_KEYS) {
    if (ArrayBuffer.isView(out[k]) && out[k].length === 0) {
      throw new TesseraError(`${k} holds no values: an array a run took (transferred to the runtime) is left empty; pass keepInputs: true to that run to use the array again, or give a copy`, 'InvalidArgument');
    }
  }
  return out;
}

/**
 * The maker of a run's output Volumes, (data, extra) → Volume, or null for data not computed (absent or empty): the
 * geometry the run read, with the affine of its first input Volume when that Volume has the geometry's dims and voxel
 * size (else diag(voxelMm)). pipeline(), invert(), swi() and r2star() build their results with it.
 * args: the request as given; out: the run's answer, whose geometry is the one the run read (the core's defaults
 * filled in).
 */
function outputVolumes(args, out) {
  const { dims, voxelMm, b0Dir } = out.geometry;
  const source = VOLUME_KEYS.map((k) => args[k]).find(isVolume);
  const same = (a, b) => !!a && !!b && [0, 1, 2].every((i) => Number(a[i]) === Number(b[i]));
  const affine = source && same(source.dims, dims) && same(source.voxelMm, voxelMm) ? source.affine : undefined;
  const g = { dims, voxelMm, b0Dir, affine };
  return (data, extra = {}) => (data?.length ? makeVolume({ ...g, data, ...extra }) : null);
}

/**
 * keepInputs checked: true copies a run's input volumes to the runtime, false (the default) transfers them.
 * TesseraError InvalidArgument when it is neither.
 */
function keepInputsOf(keepInputs) {
  if (keepInputs === undefined) return false;
  if (typeof keepInputs !== 'boolean') throw new TesseraError(`keepInputs must be true or false, got ${JSON.stringify(keepInputs)}`, 'InvalidArgument');
  return keepInputs;
}

/**
 * The buffers of a run's input volumes (VOLUME_KEYS of the unwrapped request r) to transfer to the runtime rather than
 * copy: each typed array's own buffer when the array spans all of it (a view of part of a buffer is copied, so that the
 * rest of that buffer stays the caller's); none when keep (keepInputs: true). Weights are never transferred: a
 * network's bytes are loaded once and run many times.
 */
function inputTransfer(r, keep) {
  if (keep) return [];
  const out = new Set();
  for (const k of VOLUME_KEYS) {
    const v = r[k];
    if (!ArrayBuffer.isView(v) || Object.prototype.toString.call(v.buffer) !== '[object ArrayBuffer]') continue;
    if (v.byteLength > 0 && v.byteOffset === 0 && v.byteLength === v.buffer.byteLength) out.add(v.buffer);
  }
  return [...out];
}

/** An executionProviders option checked (TesseraError InvalidArgument naming the problem), or undefined. */
function providersOf(list) {
  if (list === undefined) return undefined;
  try {
    return checkPreference(list);
  } catch (e) {
    throw new TesseraError(e.message, 'InvalidArgument');
  }
}

/**
 * Start a Tessera runtime: a driver worker with the wasm core; ONNX Runtime workers start per run.
 * workers: most networks running at once (the C++ core lowers it to fit the 1.5 GB budget).
 * hardwareThreads: cores the auto-planner may use (default: the machine's).
 * threadsPerWorker: ONNX Runtime intra-op threads in each worker.
 * @param {import('./index.js').RuntimeOptions} [o]
 * @returns {Promise<Tessera>}
 */
export async function createTessera(o = {}) {
  const executionProviders = providersOf(o.executionProviders);
  const t = new Tessera(o);
  await t._call('init', {
    workers: o.workers,
    threadsPerWorker: o.threadsPerWorker,
    wasmBase: o.wasmBase === undefined ? undefined : String(o.wasmBase),
    ortWasmPaths: o.ortWasmPaths,
    ortModuleUrl: o.ortModuleUrl ?? importMapOrt(),
    watchdogMs: o.watchdogMs,
    recycleHeapBytes: o.recycleHeapBytes,
    workerHeapGuardBytes: o.workerHeapGuardBytes,
    warmIdleMs: o.warmIdleMs,
    hardwareThreads: o.hardwareThreads,
    ortWorkerUrl: o.ortWorkerUrl === undefined ? undefined : String(o.ortWorkerUrl),
    executionProviders,
    ortGpuModuleUrl: o.ortGpuModuleUrl === undefined ? undefined : String(o.ortGpuModuleUrl),
  });
  return t;
}

/**
 * The URL of onnxruntime-web when this page's import map names it (an unbundled page: its workers see no import
 * map, so the ONNX Runtime workers get the URL); undefined under node, in workers and in bundled apps (the bundler
 * resolved it). Read from the map itself: bundlers resolve `import.meta.resolve('…')` at build time.
 */
function importMapOrt() {
  if (isNode || typeof document === 'undefined') return undefined;
  let url;
  for (const s of document.querySelectorAll('script[type="importmap"]')) {
    try {
      const target = JSON.parse(s.textContent).imports?.['onnxruntime-web'];
      if (typeof target === 'string') url = new URL(target, document.baseURI).href;
    } catch {
      // not JSON: the browser ignores that map too
    }
  }
  return url;
}

/** A sibling file of this module as a URL (node's driver worker; not the literal form bundlers copy as an asset). */
function sibling(file) {
  const here = import.meta.url; // webpack: no `new URL(expression, import.meta.url)` warning (node only anyway)
  return new URL(file, here);
}

/**
 * The demo weights shipped in the package, by registry path: literal `new URL()`s, which bundlers copy into the
 * build (a computed path would make them copy the whole package folder).
 */
const BUNDLED_WEIGHTS = {
  'web/models/demo-unet.onnx': () => new URL('../../web/models/demo-unet.onnx', import.meta.url).href,
};

/** URL of a weights file the registry marks as bundled; TesseraError ModelLoadFailed when the package lacks it. */
function bundledWeightsUrl(path) {
  const url = BUNDLED_WEIGHTS[path];
  if (!url) {
    throw new TesseraError(`the registry names bundled weights '${path}' that this package does not ship: add it to BUNDLED_WEIGHTS in index.js and to package.json "files"`, 'ModelLoadFailed');
  }
  return url();
}

/** A plan as plan() returns it: read-only throughout (a view of the plan the runtime holds; the run obeys the held one). */
function frozen(view) {
  if (view && typeof view === 'object' && !ArrayBuffer.isView(view)) {
    for (const v of Object.values(view)) frozen(v);
    Object.freeze(view);
  }
  return view;
}

/** What crosses to the runtime of a plan handed back: its id (the runtime refuses anything else in words). */
function handedBack(plan) {
  return plan !== null && typeof plan === 'object' ? { id: plan.id } : plan;
}

/** The first weights file of a request (NeXtQSM takes two), or undefined. */
function firstWeights(weights) {
  const w = Array.isArray(weights) ? weights[0] : weights;
  return w && w.byteLength > 0 ? w : undefined;
}

export class Tessera {
  /** Use createTessera(). */
  constructor(o = {}) {
    this._next = 1;
    this._pending = new Map();
    this._dead = null;
    const name = 'tessera-driver';
    // Browsers: the literal form, so that bundlers bundle driver-worker.js and everything it imports.
    this._worker = o.driverUrl
      ? createWorker(o.driverUrl, { name })
      : isNode
        ? createWorker(sibling('runtime/driver-worker.js'), { name })
        : createWorker(new Worker(new URL('./runtime/driver-worker.js', import.meta.url), { type: 'module', name: 'tessera-driver' }));
    this._worker.onMessage((m) => {
      const p = this._pending.get(m.id);
      if (!p) return;
      if (m.progress) {
        p.onProgress?.(m.progress);
        return;
      }
      this._pending.delete(m.id);
      p.cleanup?.();
      if (m.error) p.reject(errorFromMessage(m.error));
      else p.resolve(m.result);
    });
    const die = (why) => {
      this._dead = new TesseraError(why, 'RuntimeTerminated');
      for (const p of this._pending.values()) {
        p.cleanup?.();
        p.reject(this._dead);
      }
      this._pending.clear();
    };
    this._worker.onError((e) => die(`the Tessera driver worker failed: ${e.message}`));
    this._worker.onExit(() => die('the Tessera runtime was terminated'));
  }

  _call(method, args, { onProgress, signal, transfer = [] } = {}) {
    if (this._dead) return Promise.reject(this._dead);
    if (signal?.aborted) return Promise.reject(new DOMException('the inversion was cancelled', 'AbortError'));
    const id = this._next++;
    return new Promise((resolve, reject) => {
      const entry = { resolve, reject, onProgress };
      if (signal) {
        const onAbort = () => this._worker.postMessage({ cancel: id });
        signal.addEventListener('abort', onAbort, { once: true });
        entry.cleanup = () => signal.removeEventListener('abort', onAbort);
      }
      this._pending.set(id, entry);
      try {
        this._worker.postMessage({ id, method, args }, transfer);
      } catch (e) {
        // A buffer that cannot be transferred (a wasm memory's, say) throws before anything moved: copy them all.
        if (!transfer.length) throw e;
        this._worker.postMessage({ id, method, args });
      }
    });
  }

  /** Every network Tessera knows (the C++ registry): id, kind, divisor, tile cost, weights, licence, citation. */
  registry() {
    return this._call('registry');
  }

  /** One registry entry. Unknown id: TesseraError InvalidArgument naming the known ids. */
  model(id) {
    return this._call('model', { id });
  }

  /**
   * The request schema, from C++: every option a run takes with its unit, default and range
   * ([{name, unit, default, min, max, minExclusive, integer, help}]). The CLI and the page show these.
   */
  schema() {
    return this._call('schema');
  }

  /** The memory limits the core enforces: {tileActivationBudget, maxPatchActivationBytes, heapCeilingBytes}. */
  limits() {
    return this._call('limits');
  }

  /**
   * The plan of a run, from the C++ planner: patch edge, bytes per tile, tiles in flight, tile counts,
   * estimated memory; or feasible=false with the planner's advice. An automatic plan may run the mask's bounding box
   * as one patch (plan.crop; request crop: 'off' never does); give the field too for a network that reads it unmasked,
   * so that the box holds every voxel where it is not zero (a run checks and refuses otherwise).
   * The plan is a handle: the runtime holds it (the last 16) and returns a read-only view with its id; hand it back to
   * invert() (or pipeline()) with the same request and volume and the run obeys the held plan.
   * geometry.dims are whole numbers >= 1; mask (optional) holds dims product values; field (optional) as many.
   */
  async plan(request) {
    await this._checkKeys(request ?? {}, 'plan');
    const r = unwrapVolumes(request ?? {});
    if (r.pipeline) {
      // A pipeline's plan (pipeline: true, with pipeline()'s options): its stages and memory. The phase and magnitude
      // stay here (the plan needs to know only whether a magnitude is given).
      const { phase, totalField, magnitude, signal, onProgress, plan, keepInputs, ...options } = r; // a plan copies its volumes (keepInputs: no matter)
      return frozen(await this._call('plan', { ...options, magnitude: magnitude ? true : undefined }));
    }
    if (r.method !== undefined && r.method !== null) {
      const { geometry, mask, method, magnitude } = r;
      return frozen(await this._call('plan', { geometry, mask, method, magnitude: magnitude ? true : undefined, ...(await this._methodOptions(r)) }));
    }
    // A network's: the driver reads the weights' graph (reach, work per voxel), calibrates a spec without bytesPerVoxel
    // and measures the speed when asked (measureSpeed: true), as for invert() (runtime/network-plan.js). The weights
    // go by their sha256 alone while the runtime keeps what it needs of them (a plan per settings change copies no
    // network); when it does not, it says so (WeightsNeeded) and they go again with their bytes.
    const { geometry, mask, field, fieldUnits, model, spec, weights, tile, whole, workers, threadsPerWorker, te, b0, erodeRadius, phaseSign, quality, context, verify, speed, measureSpeed, b0Align, crop, cropMargin, signal } = r;
    const args = { geometry, mask, field, fieldUnits, model, spec, weights, tile, whole, workers, threadsPerWorker, te, b0, erodeRadius, phaseSign, quality, context, verify, speed, measureSpeed, b0Align, crop, cropMargin };
    const files = (Array.isArray(weights) ? weights : [weights]).filter((w) => w?.byteLength > 0);
    // A speed to measure needs the bytes (the probe runs them); no WebCrypto here (an insecure context): the bytes go.
    const byBytes = !files.length || (measureSpeed && speed === undefined);
    const weightsSha = byBytes ? null : await Promise.all(files.map((w) => this._sha(w))).catch(() => null);
    if (weightsSha) {
      try {
        return frozen(await this._call('plan', { ...args, weights: undefined, weightsSha }, { signal }));
      } catch (e) {
        if (e?.code !== 'WeightsNeeded') throw e;
      }
    }
    return frozen(await this._call('plan', args, { signal }));
  }

  /**
   * A network's memory cost, measured: for a few small patch edges (multiples of the divisor from 16), a fresh ONNX
   * Runtime worker creates its session and runs one patch; its wasm heap is read after the session and after the
   * patch, and the C++ core fits the safe line heap = fixedBytes + bytesPerVoxel · edge³ (every measured heap under it,
   * raised for Emscripten's growth steps). Takes seconds. A spec without bytesPerVoxel is calibrated this way by
   * plan(), invert() and pipeline() when weights are given (kept by the runtime per weights sha256, network and threads).
   * weights: ONNX bytes; spec (its divisor) or model (a registry id: divisor, input channels and roles).
   * @returns {Promise<{fixedBytes: number, bytesPerVoxel: number, points: object[], seconds: number, fit: object,
   *   threads: number, divisor: number}>}
   */
  calibrate({ weights, spec, model, threadsPerWorker, signal, onProgress } = {}) {
    const w = firstWeights(weights);
    if (!w) return Promise.reject(new TesseraError('calibrate needs the network\'s weights (ONNX bytes)', 'InvalidArgument'));
    // Kept by the runtime per weights sha256, model or divisor, and threads; a call watching its progress or able to
    // cancel it measures again.
    return this._call('calibrate', { weights: w, spec, model, threadsPerWorker, fresh: !!(signal || onProgress) }, { signal, onProgress });
  }

  /**
   * This machine's speed of a network, for the planner's time estimate: a one-worker pool runs a few whole patches at
   * two edges (C++'s speed_probe_edges: sized to a run of runVoxels patch voxels, a plan's voxelsRun, so that the probe
   * costs a few % of that run; else near 32 and 64) on `threads` ONNX Runtime threads. Pass the result as a
   * request's `speed` (or ask plan()/invert() for `measureSpeed: true`); the plan's estimateSource is then "measured".
   * Kept per (weights sha256, threads) for this runtime's lifetime: a second call returns the first measurement.
   * The probe's worker is kept for the next run of the same weights and threads, which runs its tiles in it and so
   * starts no worker of its own (report.pool[0].warmStart); any other run, a calibration, release() or warmIdleMs
   * (createTessera, default 300000) without a run gives it back.
   * weights: ONNX bytes; model (registry id) or spec: the network's cost and normalisation.
   * @returns {Promise<{points: {edge: number, threads: number, seconds: number}[], startSeconds: number, threads: number, seconds: number, runs: {untimed: number, small: number[], large: number[]}, warmKey?: string, warmIdleSeconds?: number, keptWorkers?: number}>}
   */
  async measureSpeed({ weights, model, spec, threads = 1, repeats, runVoxels, signal, onProgress } = {}) {
    const w = Array.isArray(weights) ? weights[0] : weights;
    if (!w || !(w.byteLength > 0)) throw new TesseraError('measureSpeed needs the network\'s weights (ONNX bytes)', 'InvalidArgument');
    if (!Number.isInteger(threads) || threads < 1) throw new TesseraError(`measureSpeed: threads must be a whole number >= 1, got ${threads}`, 'InvalidArgument');
    // Kept by the runtime per weights sha256 and threads (runtime/probes.js).
    return this._call('measureSpeed', { weights: w, model, spec, threads, repeats, runVoxels }, { signal, onProgress });
  }

  /** Gives back the worker a speed probe kept for the next run (measureSpeed), if any. */
  release() {
    return this._call('release');
  }

  /** sha256 of weights bytes (a Uint8Array, another view or an ArrayBuffer), once per buffer. */
  async _sha(bytes) {
    this._shas ??= new WeakMap();
    if (!this._shas.has(bytes)) {
      const view = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes.buffer ?? bytes, bytes.byteOffset ?? 0, bytes.byteLength);
      const sha = sha256Hex(view);
      this._shas.set(bytes, sha);
      sha.catch(() => this._shas.delete(bytes));
    }
    return this._shas.get(bytes);
  }

  /**
   * Download (or read) a registered network's weights, checking byte size and sha256 against the registry.
   * sources: one per weights file (NeXtQSM has two); default the official URLs.
   * verifyWeights: false reads them without those checks (a user's own export run under the registry's id): each file
   * whose sha256 differs from the registry's is said in console.warn; invert() with verifyWeights: false records them.
   * @returns {Promise<Uint8Array[]>}
   */
  async loadWeights(id, { sources, onProgress, signal, verifyWeights = true } = {}) {
    const m = await this.model(id);
    // Bundled weights (the demo network) live in the package.
    const where = (w) => (w.bundled ? bundledWeightsUrl(w.url) : w.url);
    const list = sources === undefined ? m.weights.map(where) : Array.isArray(sources) ? sources : [sources];
    if (list.length !== m.weights.length) {
      throw new TesseraError(`${m.name} needs ${m.weights.length} weights file(s) (${m.weights.map((w) => w.file).join(', ')}), got ${list.length}`, 'InvalidArgument');
    }
    const verify = verifyWeights !== false;
    const out = [];
    for (let i = 0; i < list.length; i++) {
      const w = m.weights[i];
      try {
        out.push(
          await loadModel(list[i], {
            expectedBytes: verify ? w.bytes || undefined : undefined,
            sha256: verify ? w.sha256 || undefined : undefined,
            signal,
            onProgress: onProgress && ((p) => onProgress({ ...p, file: w.file, index: i, files: list.length })),
          }),
        );
      } catch (e) {
        // Own exports of a registry network are refused unless asked for: say how to ask.
        if (e?.code === 'WeightsMismatch') e.message += ' To run your own export of this network under its id anyway, pass verifyWeights: false (CLI: --weights-unverified).';
        throw e;
      }
      if (!verify) {
        const note = unverifiedNote(w, await this._sha(out[i]));
        if (note) console.warn(`tessera: ${note}`);
      }
    }
    return out;
  }

  /**
   * What a registry network's run ran: per weights file {file, sha256 (of the bytes run), registrySha256, verified (they
   * agree)}, and the warning of verifyWeights: false for the files that differ. null for a spec (no registry to compare).
   */
  async _weightsRun(model, weights) {
    if (!model) return null;
    const m = await this.model(model);
    const list = Array.isArray(weights) ? weights : [weights];
    const files = [];
    for (let i = 0; i < m.weights.length; i++) {
      const w = m.weights[i];
      const b = list[i] instanceof Uint8Array ? list[i] : list[i] instanceof ArrayBuffer ? new Uint8Array(list[i]) : null;
      const sha256 = b ? await this._sha(b) : null;
      files.push({ file: w.file, sha256, registrySha256: w.sha256 || null, verified: !!sha256 && sha256 === w.sha256 });
    }
    const warning = m.weights.map((w, i) => (files[i].sha256 ? unverifiedNote(w, files[i].sha256) : '')).filter(Boolean).join('; ');
    return { files, warning };
  }

  /**
   * Invert a local field map (ppm) to susceptibility (ppm), or, with the phase networks (iqsm, iqfm, iqsm-plus),
   * wrapped phase to susceptibility (iQFM: to the local field).
   * field: Float32Array, x-fastest; mask: same length (nonzero = inside); geometry: {dims, voxelMm, b0Dir}.
   * field, phase, magnitude and mask may be Volumes (what readNifti / loadInputs return): the geometry then comes
   * from them. plan: the object plan() returned for this request and volume (the run obeys the plan the runtime holds;
   * a plan of another request, volume or runtime, or one no longer held, is refused in words; made here when absent).
   * model (registry id) or spec ({divisor, bytesPerVoxel, inputMean, inputStd, outputMean, outputStd}).
   * weights: ONNX bytes (an array for NeXtQSM). tile: {core, halo}; whole: run the volume at once.
   * Phase networks (whole volume): phase (rad, wrapped; several echoes one after the other), te (s; one per echo),
   * b0 (T, default 3), magnitude (optional, same size as phase: echo weights), erodeRadius (default 3),
   * phaseSign (default -1, the reference's), inputNames ({role: name} when the export's names are not recognised).
   * A classical method instead (method: 'tv', ..., its parameters under its name): field, mask, magnitude (MEDI, TFI).
   * χ comes back as a Volume with the input's geometry (outputVolumes: the input Volume's affine); for iQFM it is the
   * local field, also given as localField. The input volumes are transferred to the runtime (the caller's arrays are
   * left detached) unless keepInputs: true, which copies them (inputTransfer).
   * @returns {Promise<{chi: Volume, report: object, quantity: 'chi'|'local-field', localField?: Volume}>}
   */
  async invert(a) {
    await this._checkKeys(a ?? {}, 'invert');
    const { signal, onProgress, keepInputs, ...args } = a ?? {};
    const r = unwrapVolumes(args);
    const transfer = inputTransfer(r, keepInputsOf(keepInputs));
    const out = r.method !== undefined && r.method !== null ? await this._invertMethod(r, { signal, onProgress, transfer }) : await this._invertNetwork(r, { signal, onProgress, transfer });
    const vol = outputVolumes(args, out);
    const { geometry, ...result } = out;
    const chi = vol(out.chi);
    return { ...result, chi, ...(out.localField && { localField: out.localField === out.chi ? chi : vol(out.localField) }) };
  }

  /**
   * invert() of a network: its plan (handed back, measured, or made by the runtime) and run.
   * r: the request unwrapped (unwrapVolumes); transfer: the input buffers to move to the runtime.
   */
  async _invertNetwork(r, { signal, onProgress, transfer }) {
    const unwrapped = { ...r, executionProviders: providersOf(r.executionProviders) };
    const { plan, verifyWeights, ...rest } = unwrapped;
    if (verifyWeights !== undefined && typeof verifyWeights !== 'boolean') {
      throw new TesseraError(`verifyWeights must be true or false, got ${JSON.stringify(verifyWeights)}`, 'InvalidArgument');
    }
    const recorded = (p) => p.then((out) => this._recordWeights(out, rest, verifyWeights));
    // A plan handed back runs as held (its cost, reach and speed were settled when it was made); else the driver plans
    // the request as plan() does (runtime/network-plan.js).
    return recorded(this._call('invert', { ...rest, plan: handedBack(plan) }, { onProgress, signal, transfer }));
  }

  /**
   * A registry network's run report with the sha256 of the weights it ran (report.weights); with verifyWeights: false
   * the files whose bytes differ from the registry's are said in report.warning and report.warnings.
   */
  async _recordWeights(out, r, verifyWeights) {
    const run = r.model ? await this._weightsRun(r.model, r.weights) : null;
    if (!run || !out?.report) return out;
    out.report.weights = run.files;
    if (verifyWeights === false && run.warning) {
      out.report.warning = out.report.warning ? `${out.report.warning}; ${run.warning}` : run.warning;
      out.report.warnings = [...(out.report.warnings ?? []), run.warning];
    }
    return out;
  }

  /** The classical methods' names (the C++ schema's method choices), read once. */
  async _methodNames() {
    this._methods ??= this.schema().then(methodNamesOf);
    return this._methods;
  }

  /**
   * Refuses a request's unknown keys (TesseraError InvalidArgument naming them and the known ones), by its kind:
   * a pipeline's (pipeline: true, or what = 'pipeline'), a method's (method given) or a network's (request-surface.js, from C++).
   * what: the call, for the message.
   */
  async _checkKeys(request, what) {
    const method = request.method !== undefined && request.method !== null;
    const known = what === 'pipeline' || (what === 'plan' && request.pipeline)
      ? PIPELINE_KEYS
      : method ? METHOD_KEYS : NETWORK_KEYS;
    const message = unknownKeysMessage(request, known, method && what !== 'pipeline' && !request.pipeline ? `${what} (method ${request.method})` : what);
    if (message) throw new TesseraError(message, 'InvalidArgument');
  }

  /** The parameter objects of a method request ({tv: {...}}): every method's given, for C++ to check. */
  async _methodOptions(r) {
    const out = {};
    for (const m of await this._methodNames()) if (r[m] !== undefined) out[m] = r[m];
    return out;
  }

  /**
   * invert({method, field, mask, ...}): a classical dipole inversion in the C++ core (no network, no weights).
   * r: the request unwrapped (unwrapVolumes); transfer: the input buffers to move to the runtime.
   */
  async _invertMethod(r, { signal, onProgress, transfer }) {
    const { field, mask, magnitude, geometry, method, plan } = r;
    return this._call('invert', { field, mask, magnitude, geometry, method, plan: handedBack(plan), ...(await this._methodOptions(r)) }, { onProgress, signal, transfer });
  }

  /**
   * How far a network looks. graph: its theoretical receptive field from the ONNX graph ({radius: [x, y, z], radiusMax,
   * global, unknownOps, ops}). With probe: true also the measured one: the network is run twice on a phantom field
   * patch (whole, of an edge that holds the graph's reach and fits the memory limits) with one voxel raised and
   * lowered, and the response is summed by distance: probe = {within (fraction of the response within each radius;
   * pass it as a request's context), radius90, radius99, edge, epsilon, seconds}.
   * weights: ONNX bytes; model (registry id) or spec: the network's cost and normalisation (for the probe).
   * @returns {Promise<{graph: object, probe?: object}>}
   */
  receptiveField({ weights, model, spec, probe = false, epsilon, maxEdge, signal, onProgress } = {}) {
    const w = Array.isArray(weights) ? weights[0] : weights;
    if (!w || !(w.byteLength > 0)) return Promise.reject(new TesseraError('receptiveField needs the network\'s weights (ONNX bytes)', 'InvalidArgument'));
    // The driver reads the graph (once per weights sha256) and runs the probe.
    return this._call('receptiveField', { weights: w, model, spec, probe, epsilon, maxEdge }, { signal, onProgress });
  }

  /**
   * The numerical head phantom (C++): susceptibility truth, local field by the dipole forward model, brain mask.
   * geometry.dims >= 1; noise is the field noise sigma in ppm.
   * @returns {Promise<{chi: Float32Array, field: Float32Array, mask: Uint8Array}>}
   */
  phantom({ geometry, seed = 1, noise = 0 }) {
    return this._call('phantom', { geometry, seed, noise });
  }

  /**
   * QSM-CI's scores of a χ map against a reference inside an evaluation mask, in the C++ core (double accumulation,
   * the same result for any thread count): nrmse (demeaned, %), nrmseDetrended (after fitting chi = s·reference + i, %),
   * hfen (Laplacian of Gaussian σ 1.5 voxels, %; NaN when the reference has no high frequency in the mask), cc
   * (Pearson), xsim (SSIM with 5×5×5 windows, C1 1e-4, C2 1e-6), and voxels (the mask's count).
   * chi, reference and mask: Volumes of the same dims (readNifti, readMask), or x-fastest arrays with geometry ({dims}).
   * The mask holds a voxel, the reference is not constant in it, and chi and reference hold finite values only.
   * @returns {Promise<{nrmse: number, nrmseDetrended: number, hfen: number, cc: number, xsim: number, voxels: number}>}
   */
  async score(a) {
    const { chi, reference, mask } = a ?? {};
    let geometry = a?.geometry;
    const named = { chi, reference, mask };
    let from = null;
    for (const [k, v] of Object.entries(named)) {
      if (v === undefined || v === null) {
        if (k !== 'mask') throw new TesseraError(`score needs ${k}: a Volume or an x-fastest array`, 'InvalidArgument');
        continue;
      }
      if (!isVolume(v)) continue;
      const dims = v.dims.slice(0, 3);
      if (v.echoes > 1) throw new TesseraError(`score: ${k} holds ${v.echoes} volumes; give one 3D volume`, 'InvalidArgument');
      if (from && dims.some((d, i) => d !== from.dims[i])) {
        throw new TesseraError(`score: ${k} is ${dims.join('×')} but ${from.name} is ${from.dims.join('×')}: the volumes must have the same dims`, 'InvalidArgument');
      }
      from ??= { name: k, dims };
      geometry ??= geometryOf(v);
    }
    if (!Array.isArray(geometry?.dims) || geometry.dims.length !== 3) throw new TesseraError('score: give chi or reference as a Volume (readNifti), or give geometry ({dims: [nx, ny, nz]})', 'InvalidArgument');
    const data = (v) => (isVolume(v) ? (v.mask ?? v.data) : v);
    const f32 = (v) => (v instanceof Float32Array ? v : Float32Array.from(v));
    const n = geometry.dims[0] * geometry.dims[1] * geometry.dims[2];
    for (const [k, v] of Object.entries(named)) {
      if (v !== undefined && v !== null && data(v).length !== n) {
        throw new TesseraError(`score: ${k} holds ${data(v).length} values but the volume ${geometry.dims.join('×')} has ${n}`, 'InvalidArgument');
      }
    }
    return this._call('score', { geometry, chi: f32(data(chi)), reference: f32(data(reference)), mask: mask === undefined || mask === null ? undefined : data(mask) });
  }

  /**
   * A field resampled to its B0-aligned grid (rotated about the volume centre so that B0 lies along the third axis, the
   * same voxel size) and back, by the C++ core: what a run with b0Align does around a network that assumes B0 along the
   * third axis. interpolation 'spline' (cubic B-spline; default, the runs'), 'cubic' (Keys) or 'linear'; masked (default true):
   * resample field × mask.
   * field, mask and geometry as for invert (Volumes too); the mask holds at least one voxel.
   * @returns {Promise<{tiltDegrees: number, rotation: number[], geometry: object, field: Float32Array, mask: Uint8Array, back: Float32Array}>}
   */
  b0Resample(a) {
    let r;
    try {
      r = unwrapVolumes(a ?? {});
    } catch (e) {
      return Promise.reject(e);
    }
    const { field, mask, geometry, interpolation, masked } = r;
    return this._call('b0Resample', { field, mask, geometry, interpolation, masked });
  }

  /** TKD inversion (the schema's tkd.threshold by default): the classical reference, masked; χ only (a Volume). */
  async tkd({ field, mask, geometry, threshold, keepInputs }) {
    const { chi } = await this.invert({ field, mask, geometry, method: 'tkd', keepInputs, ...(threshold === undefined ? {} : { tkd: { threshold } }) });
    return chi;
  }

  /**
   * From a scanner's multi-echo phase to χ, in the C++ core: echo combination with phase unwrapping (unwrap:
   * 'region-growing' | 'laplacian'), a brain mask from the magnitude when no mask is given, Hz → ppm, background field
   * removal (background: 'vsharp' | 'pdf' | 'lbv' | 'ismv' | 'sharp' | 'resharp'), then a classical method (method: 'rts', ...) or a network (model / spec and
   * weights, as invert() takes them; network: further invert options). tessera.schema() lists every option.
   * phase: wrapped radians, every echo (a 4D Volume, or a Float32Array echo after echo with geometry); te: seconds,
   * one per echo; b0: tesla; magnitude (same size as phase), mask (optional).
   * Or from a total field map (a vendor B0 map): totalField (a 3D Volume, or a Float32Array with geometry) with
   * totalFieldUnits 'hz' | 'rad/s' | 'ppm' and no te: no echo fit runs, the field is converted to ppm at b0 and its
   * fit mask is the mask (given, or made from magnitude, then one volume); NaN inside the mask, or values implausible
   * for the units (a Hz map given as ppm), are refused. unwrappedPhase, offset and fitResidual are then null.
   * Or from a phase difference of two echoes (a Siemens field map): phaseDifference (one 3D wrapped phase, radians, or
   * the scanner's integers, read with a warning) with deltaTE = TE2 − TE1 (seconds) and no te: it is unwrapped as one
   * echo at TE = ΔTE with no receive offset (it cancels in the difference).
   * A phase (or phase difference) whose span is far from 2π is not radians: it is rescaled to (−π, π] and
   * report.warnings says so.
   * Every intermediate comes back as a Volume with the input's geometry: mask, unwrappedPhase (4D), offset, fieldHz,
   * totalField, fitResidual, fitMask, localField, localMask, chi (null without a method or network). report.warnings
   * lists what was assumed or left out (voxel size, a mask reaching outside the tissue, a stage leaving out much of
   * the mask). When a stage fails, the error names it and its intermediates hold the stages that finished (the rest null).
   * also: ['swi', 'r2star'] (or one of them) adds optional outputs from the same echoes, after the inversion, on the
   * step engine and in the plan's memory: swi, minIp, swiMagnitude, swiPhase, swiPhaseMask (as swi() with the
   * pipeline's brain mask and unwrapped phase; options swi: {...}) and r2star, t2star, s0, r2starResidual (as r2star();
   * r2star: {method}); null when not asked for. report.methods: {text, steps, references, request, command}: the
   * methods paragraph (every step, its parameters, its papers) and the command that reruns it (methodsText()).
   * The input volumes are transferred to the runtime unless keepInputs: true (as invert()).
   * @returns {Promise<object>}
   */
  async pipeline(a) {
    await this._checkKeys(a ?? {}, 'pipeline');
    const { signal, onProgress, keepInputs, ...args } = a ?? {};
    const keep = keepInputsOf(keepInputs);
    const r = unwrapVolumes(args);
    if (!r.geometry) throw new TesseraError('pipeline: give phase (or totalField, or phaseDifference) as a Volume (readNifti / readEchoes) or give geometry', 'InvalidArgument');
    const echoes = Array.isArray(r.te) && r.totalField == null ? r.te.length : 1;
    // A phase far from the 2π of radians (a header's scaling left in) is rescaled, a phase difference's scanner integers
    // read as such: each with a warning in the report.
    const assumed = [];
    // A mask of other values than 0 and 1 (−1 outside): read as inside where > 0, said in the report.
    if (r.mask && !(r.mask instanceof Uint8Array)) {
      const w = maskValuesWarning(r.mask);
      if (w) assumed.push(w);
    }
    const inside = r.mask ? (r.mask instanceof Uint8Array ? r.mask : maskFromValues(r.mask)) : null;
    for (const k of ['phase', 'phaseDifference']) {
      if (!(r[k] instanceof Float32Array)) continue;
      // NaN or Inf outside a given mask does not matter: set to 0 (a copy), said in the report; inside, the core refuses.
      if (inside) {
        const nvox = inside.length;
        let outside = 0;
        for (let j = 0; j < r[k].length; j++) if (!Number.isFinite(r[k][j]) && !inside[j % nvox]) outside++;
        if (outside) {
          r[k] = Float32Array.from(r[k], (v, j) => (Number.isFinite(v) || inside[j % nvox] ? v : 0));
          assumed.push(nonFiniteText(k, outside, 'outside'));
        }
      }
      const fixed = apiPhaseRescale(r[k], { difference: k === 'phaseDifference' });
      if (fixed) {
        r[k] = fixed.phase;
        assumed.push(...fixed.notes);
      }
    }
    // out: the run's outputs, or a failed run's finished stages, with the geometry the run read.
    const volumes = (out) => {
      const vol = outputVolumes(args, out);
      const v = {};
      for (const k of ['mask', 'offset', 'fieldHz', 'totalField', 'fitResidual', 'fitMask', 'localField', 'localMask', 'chi']) v[k] = vol(out[k]);
      // The optional outputs (also: ['swi', 'r2star']): null unless asked for.
      for (const k of ['swi', 'minIp', 'swiMagnitude', 'swiPhase', 'swiPhaseMask', 'r2star', 't2star', 's0', 'r2starResidual']) v[k] = vol(out[k]);
      v.unwrappedPhase = vol(out.unwrappedPhase, { echoes });
      return v;
    };
    let out;
    try {
      out = await this._call('pipeline', { ...r, plan: handedBack(r.plan) }, { signal, onProgress, transfer: inputTransfer(r, keep) });
    } catch (e) {
      // A stage failed (its name is in the message): the stages that finished come back as Volumes (null: not reached).
      if (e?.intermediates) e.intermediates = volumes(e.intermediates);
      throw e;
    }
    if (assumed.length) out.report.warnings = [...assumed, ...(out.report.warnings ?? [])];
    const result = { report: out.report, ...volumes(out) };
    if (out.networkReport) result.networkReport = out.networkReport;
    // The command that reruns this request (files as placeholders: methodsText(report, {files}) names them).
    const request = commandRequest(r);
    result.report.methods = { ...out.report.methods, request, command: commandLine(pipelineArgs(request)) };
    return result;
  }

  /**
   * The methods text of a pipeline() run as Markdown: a paragraph naming every step in order (brain mask, unwrapping,
   * echo fit, background removal, inversion, SWI and minIP, R2*) with its parameters and the paper of each method
   * ([n]), the numbered reference list, each step's parameters, and the `tessera-qsm pipeline` command that reproduces
   * the run. files: {phase, magnitude, mask, totalField, weights, out}: the paths the command names (the phase file
   * holding radians as pipeline() was given them); placeholders for those not given.
   * report: pipeline()'s report (its methods). Returns {markdown, command, args}.
   */
  methodsText(report, { files } = {}) {
    const m = report?.methods;
    if (!m?.steps) throw new TesseraError('methodsText: give the report of a pipeline() run (report.methods)', 'InvalidArgument');
    const args = pipelineArgs(m.request, files);
    const command = commandLine(args);
    return { markdown: methodsMarkdown(m, command), command, args };
  }

  /**
   * Susceptibility-weighted imaging from a scanner's multi-echo wrapped phase and magnitude, in the C++ core on the
   * step engine (progress and cancel between steps): a brain mask from the magnitude unless mask is given, every echo's
   * phase unwrapped (unwrap: 'region-growing' | 'laplacian', as pipeline()), the echoes' phase combined into one
   * frequency and high-passed (swi.highPassSigmaXY, default 4 voxels; swi.highPassSigmaZ, 0), Haacke's negative phase
   * mask of the phase's paramagnetic sign (swi.paramagneticPhase 'negative' (default, Haacke's) | 'positive') raised to
   * swi.maskPower (4), times the echoes' root-sum-of-squares magnitude; then the minimum-intensity projection over a
   * sliding slab of swi.minIpSlab mm (8) along the slice axis.
   * phase: wrapped radians, every echo (a 4D Volume, or a Float32Array echo after echo with geometry); magnitude as
   * many values; te: seconds, one per echo.
   * Volumes with the input's geometry: swi, minIp, magnitude (RSS), phase (the high-passed phase, rad), phaseMask,
   * mask, unwrappedPhase (4D).
   * @returns {Promise<object>}
   */
  async swi(a) {
    const { signal, onProgress, keepInputs, ...args } = a ?? {};
    const keep = keepInputsOf(keepInputs);
    const r = unwrapVolumes(args);
    if (!r.geometry) throw new TesseraError('swi: give phase as a Volume (readNifti / readEchoes) or give geometry', 'InvalidArgument');
    const out = await this._call('swi', r, { signal, onProgress, transfer: inputTransfer(r, keep) });
    const vol = outputVolumes(args, out);
    const result = { report: out.report };
    for (const k of ['swi', 'minIp', 'magnitude', 'phase', 'phaseMask', 'mask']) result[k] = vol(out[k]);
    result.unwrappedPhase = vol(out.unwrappedPhase, { echoes: Array.isArray(r.te) ? r.te.length : 1 });
    return result;
  }

  /**
   * R2* (s⁻¹) and T2* (s) maps from the multi-echo magnitude, in the C++ core on the step engine (a step per slice):
   * r2star.method 'arlo' (default; Pei 2015, needs ≥ 3 equally spaced echoes) or 'loglinear' (a least-squares line of
   * ln S on TE). T2* = 1/R2*, 1 s where R2* is below 1 s⁻¹; R2* in [0, 2000] s⁻¹. mask (optional): the voxels fitted
   * (default: every voxel whose first echo is > 0).
   * magnitude: every echo (a 4D Volume, or a Float32Array echo after echo with geometry); te: seconds, one per echo.
   * Volumes with the input's geometry: r2star, t2star, s0 (the fitted signal at TE 0), residual (RMS residual of the
   * fitted decay over the mean signal); method.
   * @returns {Promise<object>}
   */
  async r2star(a) {
    const { signal, onProgress, keepInputs, ...args } = a ?? {};
    const keep = keepInputsOf(keepInputs);
    const r = unwrapVolumes(args);
    if (!r.geometry) throw new TesseraError('r2star: give magnitude as a Volume (readNifti / readEchoes) or give geometry', 'InvalidArgument');
    const out = await this._call('r2star', r, { signal, onProgress, transfer: inputTransfer(r, keep) });
    const vol = outputVolumes(args, out);
    const result = { report: out.report, method: out.method };
    for (const k of ['r2star', 't2star', 's0', 'residual']) result[k] = vol(out[k]);
    return result;
  }

  /**
   * The phantom head scanned as multi-echo gradient echo (C++ make_acquisition): the brain's χ truth and mask, the head
   * mask, wrapped phase and magnitude of every echo (echo after echo), and the total, local and background fields (ppm).
   * te: seconds (default 4, 8, 12, 16, 20 ms); b0: tesla (3); snr: water's signal over the noise (0: none).
   * @returns {Promise<{chi: Float32Array, mask: Uint8Array, headMask: Uint8Array, phase: Float32Array, magnitude: Float32Array, totalField: Float32Array, localField: Float32Array, backgroundField: Float32Array, te: number[], b0: number}>}
   */
  phantomScan({ geometry, seed = 1, te, b0, snr = 0 }) {
    return this._call('phantomScan', { geometry, seed, te, b0, snr });
  }

  /** Runs in progress, live ONNX Runtime workers, and the wasm module's heap bytes. */
  status() {
    return this._call('status');
  }

  /** Ends the driver worker and every ONNX Runtime worker; later calls reject. */
  async terminate() {
    await this._worker.terminate();
  }
}
