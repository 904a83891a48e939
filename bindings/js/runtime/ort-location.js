// Where the pool's workers find ONNX Runtime Web: the module they import (node, bundles, a page serving this package
// unbundled), the GPU build beside it, and the wasm binary that can be compiled once here and handed to every worker.
import { isNode, nodeHost } from '../platform.js';

const ORT_WASM = 'ort-wasm-simd-threaded.wasm';
const compiledCache = new Map(); // wasm URL → Promise<WebAssembly.Module|null>, shared by all pools of this realm

// This module's URL, for relative URLs. Never `new URL(expression, import.meta.url)`: webpack warns about each such
// expression (the literal form is what bundlers rewrite, and would copy as an asset).
const HERE = import.meta.url;

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

/**
 * Where a worker finds onnxruntime-web when no ortModuleUrl is given: undefined (its own `import('#ort')`) under
 * node and in bundles; on a page that serves this package unbundled (the repository's pages and benchmarks, or
 * node_modules served as is), whose workers cannot resolve the bare name, the ort.wasm.min.mjs that answers beside
 * the package (the repository's node_modules, or npm's hoisted layout).
 */
async function defaultOrtModuleUrl() {
  if (isNode || HERE.startsWith('file:') || !HERE.endsWith('/bindings/js/runtime/ort-location.js')) return undefined;
  for (const rel of ['../../../node_modules/onnxruntime-web/dist/ort.wasm.min.mjs', '../../../../onnxruntime-web/dist/ort.wasm.min.mjs']) {
    const url = new URL(rel, HERE).href;
    try {
      if ((await fetch(url, { method: 'HEAD' })).ok) return url;
    } catch {
      // try the next layout
    }
  }
  return undefined;
}

/**
 * The module URL the workers import ONNX Runtime from: the caller's ortModuleUrl, else defaultOrtModuleUrl().
 * @param {string|undefined} ortModuleUrl
 * @returns {Promise<string|undefined>}
 */
export function ortModuleUrlOf(ortModuleUrl) {
  return ortModuleUrl !== undefined ? Promise.resolve(ortModuleUrl) : defaultOrtModuleUrl();
}

/**
 * ORT's wasm compiled once for every worker of this realm that loads the same binary, or null where its URL is
 * unknown or it fails to compile (each worker then compiles its own).
 * @param {Promise<string|undefined>} ortModuleUrl what ortModuleUrlOf gave
 * @param {string|object} [wasmPaths] ort.env.wasm.wasmPaths of the workers
 * @returns {Promise<WebAssembly.Module|null>}
 */
export function sharedOrtWasm(ortModuleUrl, wasmPaths) {
  return ortModuleUrl.then((url) => ortWasmUrl(url, wasmPaths)).then(compileOrtWasm, () => null);
}

/** onnxruntime-web's all-backends build beside an ort.wasm*.mjs URL (an unbundled page), else undefined. */
export function gpuBuildBeside(ortModuleUrl) {
  const url = ortModuleUrl === undefined ? '' : String(ortModuleUrl);
  return /\/ort\.wasm(\.min)?\.mjs$/.test(url) ? url.replace(/ort\.wasm(\.min)?\.mjs$/, 'ort.all.min.mjs') : undefined;
}
