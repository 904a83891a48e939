// Which ONNX Runtime Web execution provider (EP) runs a network: the caller's preference list, what the platform
// offers and what the network's graph needs. Pure functions: the pool asks them once per network, before any
// worker starts; the worker then creates its session with the chosen EP and falls back to wasm if that fails.
// For WebGPU the graph is first rewritten where that lets it run there (prepareModel, webgpu-graph.js); on wasm, the
// operators the registry names for the network (its ConvTranspose, where that ran 9-14 % faster per patch on wasm).
//
// What ONNX Runtime Web 1.30.0 cannot run, from its own files (node_modules/onnxruntime-web, found with the
// `search` tool first at https://app.unpkg.com/onnxruntime-web@1.24.3/files/docs/webgpu-operators.md) and measured
// in Chromium on a SwiftShader WebGPU adapter (web/webgpu.test.js). WebGPU comes in two builds: ort.all.min.mjs /
// ort.min.mjs (JSEP: the kernels of lib/wasm/jsep/webgpu/ops/*.ts; the pool's default GPU build) and
// ort.webgpu.min.mjs (the C++ WebGPU EP); the rules are what either refuses, so a network passes for both.
//  WebGPU (docs/webgpu-operators.md):
//   - ConvTranspose over 3 spatial axes: docs "ConvTranspose3d is not supported"; JSEP conv-transpose.ts throws
//     'currently only support 2-dimensional conv', the C++ EP 'Only Conv2d or Conv1d are supported'. The kernel is
//     registered for every rank, so the session is created and the RUN fails: this must be caught here, not by the
//     worker's fallback.
//   - MaxPool / AveragePool over 3 spatial axes: JSEP pool.ts throws 'Pooling with kernelShape.length > 2 is not
//     supported for NHWC format', and NHWC is the layout JSEP asks for (com.ms.internal.nhwc kernels in the docs
//     table); ceil_mode ≠ 0 throws in both JSEP pool kernels ('ceil_mode kernel execution ... is not yet implemented').
//   - Conv over 3 spatial axes with pads not all equal: JSEP 3rd-party/conv3d_naive_webgpu.ts throws 'Unsupported
//     padding parameter' (one pad for all six sides); with group ≠ 1 it ignores the groups (wrong values, measured)
//     and the C++ EP throws 'Conv3D does not support grouped convolution'.
//   - Resize in cubic mode on a volume: resize.ts 'Cubic mode only supports input dims 2 and 4'.
//   - Conv over 3 spatial axes otherwise: the docs table still says "conv3d is not supported", but conv.ts in 1.30.0
//     sends 5-D inputs to a naive 3D shader (3rd-party/conv3d_naive_webgpu): allowed here (exact in Chromium); its
//     speed is unmeasured (no GPU on the machines that built this).
//  WebNN (docs/webnn-operators.md): Conv and ConvTranspose "Only supports 3-D or 4-D input" (1D/2D), AveragePool /
//   MaxPool "Only supports 4-D input, 2-D 'kernel_shape'", Resize "Only supports 4-D input": a volumetric network's
//   convolutions would all go back to the CPU, so WebNN is skipped for them.
//  wasm runs every operator: it is always the last resort.
// ONNX Runtime Web reaches WebGPU / WebNN only in browsers (navigator.gpu / navigator.ml); node has neither.
import { readOnnxGraph, spatialRank } from './onnx-graph.js';
import { rewriteForWebGpu } from './webgpu-graph.js';

/** The execution providers Tessera can ask ONNX Runtime Web for, fastest first. */
export const EXECUTION_PROVIDERS = Object.freeze(['webgpu', 'webnn', 'wasm']);

const KERNELED = new Set(['Conv', 'ConvTranspose', 'MaxPool', 'AveragePool', 'LpPool']);

/**
 * The operators of an ONNX network that decide where it can run: [{op, rank (spatial axes, null when unknown),
 * mode (Resize), ceilMode (pools), unequalPads (3D Conv whose pads are not all equal, only when true), group (3D Conv,
 * only when ≠ 1), count}], one entry per distinct combination. Reads the graph, never the weights.
 * Precondition: bytes hold an ONNX model (else an Error naming what is wrong).
 * @param {Uint8Array|ArrayBuffer|object} bytesOrGraph ONNX bytes, or a graph readOnnxGraph returned
 */
export function graphOperators(bytesOrGraph) {
  const graph = bytesOrGraph?.nodes ? bytesOrGraph : readOnnxGraph(bytesOrGraph);
  const seen = new Map();
  for (const n of graph.nodes) {
    const e = { op: n.domain && n.domain !== 'ai.onnx' ? `${n.domain}.${n.op}` : n.op, rank: null };
    if (KERNELED.has(n.op)) e.rank = spatialRank(n, graph.initializers);
    if (n.op === 'Resize' || n.op === 'Upsample') e.mode = n.attrs.mode?.s ?? 'nearest';
    if (n.op === 'MaxPool' || n.op === 'AveragePool') e.ceilMode = Number(n.attrs.ceil_mode?.i ?? 0);
    if (n.op === 'Conv' && e.rank === 3) {
      const pads = n.attrs.pads?.ints ?? [];
      if (pads.some((p) => p !== pads[0])) e.unequalPads = true;
      if (Number(n.attrs.group?.i ?? 1) !== 1) e.group = Number(n.attrs.group.i);
    }
    const key = JSON.stringify(e);
    const have = seen.get(key);
    if (have) have.count++;
    else seen.set(key, { ...e, count: 1 });
  }
  return [...seen.values()];
}

/** Whether a network works on volumes (a conv or pool over 3 spatial axes). */
function volumetric(ops) {
  return ops.some((o) => o.rank === 3);
}

const plural = (o) => `${o.count} node${o.count === 1 ? '' : 's'}`;

/**
 * Why an execution provider cannot run these operators (ONNX Runtime Web 1.30.0, see the header): one line per
 * blocking operator; empty when it can. Precondition: provider is one of EXECUTION_PROVIDERS.
 * @param {string} provider
 * @param {ReturnType<typeof graphOperators>} ops
 * @returns {string[]}
 */
export function unsupportedOperators(provider, ops) {
  const why = [];
  const vol = volumetric(ops);
  // WebNN's rules look at the operator and its rank only: entries that differ in pads or groups are counted together
  const byRank = new Map();
  for (const o of ops) {
    const k = `${o.op}/${o.rank}/${o.mode}/${o.ceilMode}`;
    const have = byRank.get(k);
    if (have) have.count += o.count;
    else byRank.set(k, { ...o });
  }
  for (const o of provider === 'webnn' ? byRank.values() : ops) {
    if (provider === 'webgpu') {
      if (o.op === 'ConvTranspose' && o.rank === 3) why.push(`3D ConvTranspose (${plural(o)}): not supported by ONNX Runtime Web 1.30.0's WebGPU EP`);
      else if ((o.op === 'MaxPool' || o.op === 'AveragePool') && o.rank === 3) why.push(`3D ${o.op} (${plural(o)}): not supported in the NHWC layout of ONNX Runtime Web 1.30.0's WebGPU EP`);
      else if (o.op === 'Conv' && o.rank === 3 && o.unequalPads) why.push(`3D Conv with unequal pads (${plural(o)}): ONNX Runtime Web 1.30.0's JSEP WebGPU conv3d takes one pad for all sides`);
      else if (o.op === 'Conv' && o.rank === 3 && o.group) why.push(`grouped 3D Conv (${plural(o)}): not supported by ONNX Runtime Web 1.30.0's WebGPU EP`);
      else if ((o.op === 'MaxPool' || o.op === 'AveragePool') && o.ceilMode) why.push(`${o.op} with ceil_mode (${plural(o)}): not implemented by ONNX Runtime Web 1.30.0's WebGPU EP`);
      else if ((o.op === 'Resize' || o.op === 'Upsample') && o.mode === 'cubic' && vol) why.push(`cubic ${o.op} of a volume (${plural(o)}): ONNX Runtime Web 1.30.0's WebGPU EP supports it on 2-D and 4-D inputs only`);
    } else if (provider === 'webnn') {
      if ((o.op === 'Conv' || o.op === 'ConvTranspose') && o.rank === 3) why.push(`3D ${o.op} (${plural(o)}): ONNX Runtime Web 1.30.0's WebNN EP supports 1D/2D convolutions only`);
      else if ((o.op === 'MaxPool' || o.op === 'AveragePool' || o.op === 'LpPool') && o.rank === 3) why.push(`3D ${o.op} (${plural(o)}): ONNX Runtime Web 1.30.0's WebNN EP supports 2D pooling only`);
      else if ((o.op === 'Resize' || o.op === 'Upsample') && vol) why.push(`${o.op} of a volume (${plural(o)}): ONNX Runtime Web 1.30.0's WebNN EP resizes 4-D inputs only`);
    }
  }
  return why;
}

/**
 * What this JS realm offers ONNX Runtime Web: {node, webgpu, webnn}. WebGPU needs navigator.gpu and WebNN
 * navigator.ml (browsers, pages and workers alike); node has neither.
 * @param {object} [g=globalThis]
 */
export function platformProviders(g = globalThis) {
  const node = typeof g.process === 'object' && !!g.process?.versions?.node && typeof g.window === 'undefined' && typeof g.WorkerGlobalScope === 'undefined';
  const nav = g.navigator;
  return { node, webgpu: !node && !!nav?.gpu, webnn: !node && !!nav?.ml };
}

/**
 * Checks an execution provider preference list; returns it as a fresh array. Throws a TypeError naming the
 * problem and the known providers.
 * @param {unknown} list
 * @returns {string[]}
 */
export function checkPreference(list) {
  const known = EXECUTION_PROVIDERS.join("', '");
  if (!Array.isArray(list) || list.length === 0) throw new TypeError(`executionProviders must be a non-empty array of '${known}' (got ${JSON.stringify(list)})`);
  for (const p of list) {
    if (!EXECUTION_PROVIDERS.includes(p)) throw new TypeError(`executionProviders: unknown execution provider ${JSON.stringify(p)} (known: '${known}')`);
  }
  if (new Set(list).size !== list.length) throw new TypeError(`executionProviders names a provider twice: ${JSON.stringify(list)}`);
  return [...list];
}

/**
 * The execution provider that runs a network: the first in `preference` the platform offers and the graph allows;
 * wasm when none does (wasm is always the last resort, listed or not). Pure.
 * Returns {provider, requested, skipped: [{provider, reason}]}: every preferred provider before the chosen one,
 * with why it was passed over.
 * Precondition: preference passes checkPreference.
 * Precondition: platform is {node, webgpu, webnn} as platformProviders returns it.
 * Precondition: ops is graphOperators(network) (null when the graph is unknown: no operator rules apply).
 * @param {{preference: string[], platform: {node: boolean, webgpu: boolean, webnn: boolean}, ops: object[]|null}} a
 */
export function selectExecutionProvider({ preference, platform, ops }) {
  const requested = checkPreference(preference);
  const skipped = [];
  for (const p of requested) {
    if (p === 'wasm') return { provider: 'wasm', requested, skipped };
    if (!platform[p]) {
      const api = p === 'webgpu' ? 'WebGPU (navigator.gpu)' : 'WebNN (navigator.ml)';
      const where = platform.node ? 'node has no ' : 'this browser context exposes no ';
      skipped.push({ provider: p, reason: `${where}${api}` });
      continue;
    }
    const blocked = ops ? unsupportedOperators(p, ops) : [];
    if (blocked.length) {
      skipped.push({ provider: p, reason: `the network has operators it cannot run: ${blocked.join('; ')}` });
      continue;
    }
    return { provider: p, requested, skipped };
  }
  return { provider: 'wasm', requested, skipped };
}

/**
 * The model bytes a pool's workers load and the provider they run on: selectExecutionProvider on the graph, and where
 * that passes WebGPU over for operators only, the graph rewritten for it (rewriteForWebGpu) when the rewritten graph
 * lets WebGPU run; on wasm, the operators wasmRewriteOps names rewritten (rewriteForWebGpu's ops: the registry's
 * measured choice: 9-14 % faster per patch for the demo, xQSM). Returns {bytes (the model, or its rewrite), selection:
 * selectExecutionProvider's result, plus graphRewrite: [{op, node, as}] when the bytes are the rewrite}. An unreadable
 * graph applies no operator rule (the workers' sessions then say what is wrong with the file).
 * Precondition: platform is {node, webgpu, webnn} as platformProviders returns it (a bad preference: checkPreference's
 * TypeError).
 * Precondition: ops, when given, is graphOperators(model) (null: the graph is unreadable); read here when absent.
 * @param {{model: Uint8Array|ArrayBuffer, preference: string[], platform: {node: boolean, webgpu: boolean, webnn: boolean}, wasmRewriteOps?: string[], ops?: object[]|null}} a
 */
export function prepareModel({ model, preference, platform, wasmRewriteOps, ops: known }) {
  const bytes = model instanceof Uint8Array ? model : new Uint8Array(model);
  const opsOf = (b) => {
    try {
      return graphOperators(b);
    } catch {
      return null;
    }
  };
  const ops = checkPreference(preference).some((p) => p !== 'wasm') ? (known !== undefined ? known : opsOf(bytes)) : null;
  const selection = selectExecutionProvider({ preference, platform, ops });
  const onWasm = () => {
    if (selection.provider !== 'wasm' || !wasmRewriteOps?.length) return { bytes, selection };
    let rewrite = null;
    try {
      rewrite = rewriteForWebGpu(bytes, { ops: wasmRewriteOps });
    } catch (e) {
      if (e instanceof TypeError) throw e; // ops it does not rewrite
      // an unreadable graph: loaded as it is (the workers' sessions then say what is wrong with the file)
    }
    if (!rewrite?.rewritten.length) return { bytes, selection };
    return { bytes: rewrite.bytes, selection: { ...selection, graphRewrite: rewrite.rewritten } };
  };
  const gpu = selection.skipped.find((s) => s.provider === 'webgpu');
  if (!ops || !platform.webgpu || !gpu || unsupportedOperators('webgpu', ops).length === 0) return onWasm();
  const rewrite = rewriteForWebGpu(bytes);
  if (!rewrite.rewritten.length) return onWasm();
  const after = selectExecutionProvider({ preference, platform, ops: graphOperators(rewrite.bytes) });
  if (after.provider !== 'webgpu') return onWasm();
  return { bytes: rewrite.bytes, selection: { ...after, graphRewrite: rewrite.rewritten } };
}

/**
 * Which execution provider runs a network, as a pool reports it: {requested (the preference), selected (what the
 * graph and the platform allowed), provider (what the workers' sessions run on; 'a+b' if they differ; null before any
 * is ready), skipped: [{provider, reason}] (passed over before selection), fallback (why a worker's session fell back
 * to wasm, else undefined), graphRewrite (when the workers load a rewrite of the graph: for WebGPU, or on wasm the
 * registry's choice)}.
 * Precondition: selection is prepareModel's selection.
 * Precondition: workers are the pool's worker records ({executionProvider: null before ready, fallback}).
 * @param {object} selection
 * @param {{executionProvider: string|null, fallback?: string}[]} workers
 */
export function providerReport(selection, workers) {
  const ready = workers.filter((p) => p.executionProvider);
  const ran = [...new Set(ready.map((p) => p.executionProvider))];
  return {
    requested: [...selection.requested],
    selected: selection.provider,
    provider: ran.length ? ran.join('+') : null,
    skipped: selection.skipped.map((s) => ({ ...s })),
    fallback: ready.find((p) => p.fallback)?.fallback,
    ...(selection.graphRewrite && { graphRewrite: selection.graphRewrite.map((r) => ({ ...r })) }),
  };
}
