// loadModel: fetch/read ONNX weights from a URL, a file path (node), a Blob/File or bytes, with streamed
// progress, and verify byte size and sha256 (WebCrypto) before the bytes are used.
import { isNode, nodeHost } from './platform.js';

function loaderError(message, code, extra = {}) {
  const e = new Error(message);
  e.code = code;
  Object.assign(e, extra);
  return e;
}

function abortError(what) {
  return new DOMException(`loading ${what} was cancelled`, 'AbortError');
}

function describe(source) {
  if (typeof source === 'string') return source;
  if (source instanceof URL) return source.href;
  if (globalThis.File && source instanceof File) return `file '${source.name}'`;
  if (globalThis.Blob && source instanceof Blob) return 'a Blob';
  return 'the given bytes';
}

/** Whether a weights source string is fetched (a URL) rather than read as a file path. */
export function isFetchable(s) {
  return /^(https?:|blob:|data:)/i.test(s);
}

/** Collects chunks into one Uint8Array (preallocated when the total is known), reporting progress. */
class Sink {
  constructor(total, onProgress) {
    this.total = total;
    this.onProgress = onProgress;
    this.loaded = 0;
    this.buf = total ? new Uint8Array(total) : null;
    this.chunks = [];
  }
  push(chunk) {
    const c = chunk instanceof Uint8Array ? chunk : new Uint8Array(chunk);
    if (this.buf && this.loaded + c.byteLength <= this.buf.byteLength) this.buf.set(c, this.loaded);
    else {
      if (this.buf) {
        this.chunks.push(this.buf.subarray(0, this.loaded));
        this.buf = null;
      }
      this.chunks.push(c.slice());
    }
    this.loaded += c.byteLength;
    this.onProgress?.({ loaded: this.loaded, total: this.total });
  }
  finish() {
    let out;
    if (this.buf) out = this.loaded === this.buf.byteLength ? this.buf : this.buf.slice(0, this.loaded);
    else {
      out = new Uint8Array(this.loaded);
      let o = 0;
      for (const c of this.chunks) {
        out.set(c, o);
        o += c.byteLength;
      }
    }
    if (this.total === undefined || this.total !== this.loaded) {
      this.total = this.loaded;
      this.onProgress?.({ loaded: this.loaded, total: this.total });
    }
    return out;
  }
}

async function drainReader(reader, sink, signal, what) {
  for (;;) {
    if (signal?.aborted) {
      reader.cancel?.().catch?.(() => {});
      throw abortError(what);
    }
    const { done, value } = await reader.read();
    if (done) break;
    sink.push(value);
  }
}

function checkEarlySize(total, expectedBytes, what) {
  if (expectedBytes !== undefined && total !== undefined && total !== expectedBytes) throw sizeMismatch(expectedBytes, total, what);
}

/** A download cut off mid-body (connection reset or closed early): how far it got, and the fix. */
function interrupted(what, loaded, total, cause) {
  const of = total !== undefined ? ` of ${total}` : '';
  return loaderError(
    `the download of ${what} was interrupted after ${loaded}${of} bytes (${cause}): the connection was lost; try again`,
    'DownloadFailed',
    { interrupted: true, loaded, total },
  );
}

function sizeMismatch(expected, got, what) {
  return loaderError(
    `WeightsMismatch: the network weights from ${what} have ${got} bytes, expected ${expected} bytes. ` +
      'The download is incomplete or the file is a different version: delete any cached copy and download ' +
      "the file again from the registry's URL (or update the registry's size and sha256 if the weights were changed on purpose).",
    'WeightsMismatch',
    { expected, got, check: 'bytes' },
  );
}

async function viaFetch(url, opts, what) {
  const res = await fetch(url, { signal: opts.signal });
  if (!res.ok) throw loaderError(`could not download ${what}: HTTP ${res.status} ${res.statusText}`, 'DownloadFailed', { status: res.status });
  const len = res.headers.get('content-length');
  const total = len !== null && !res.headers.get('content-encoding') ? Number(len) : opts.expectedBytes;
  checkEarlySize(len !== null ? Number(len) : undefined, opts.expectedBytes, what);
  const sink = new Sink(total, opts.onProgress);
  if (!res.body) {
    sink.push(new Uint8Array(await res.arrayBuffer()));
    return sink.finish();
  }
  try {
    await drainReader(res.body.getReader(), sink, opts.signal, what);
  } catch (e) {
    if (e?.name === 'AbortError' || opts.signal?.aborted) throw e;
    throw interrupted(what, sink.loaded, len !== null ? Number(len) : undefined, e?.message ?? String(e));
  }
  if (len !== null && !res.headers.get('content-encoding') && sink.loaded !== Number(len)) {
    throw interrupted(what, sink.loaded, Number(len), 'the body ended early');
  }
  return sink.finish();
}

/** node without global fetch (e.g. --no-experimental-fetch): node's http/https (node-host.js), streamed. */
async function viaNodeHttp(url, opts, what, redirects = 5) {
  const u = new URL(url);
  const host = await nodeHost();
  const mod = u.protocol === 'https:' ? host.https : host.http;
  return new Promise((resolve, reject) => {
    if (opts.signal?.aborted) return reject(abortError(what));
    const req = mod.get(u, (res) => {
      if (res.statusCode >= 300 && res.statusCode < 400 && res.headers.location && redirects > 0) {
        res.resume();
        viaNodeHttp(new URL(res.headers.location, u).href, opts, what, redirects - 1).then(resolve, reject);
        return;
      }
      if (res.statusCode !== 200) {
        res.resume();
        return reject(loaderError(`could not download ${what}: HTTP ${res.statusCode} ${res.statusMessage}`, 'DownloadFailed', { status: res.statusCode }));
      }
      const len = res.headers['content-length'];
      try {
        checkEarlySize(len !== undefined ? Number(len) : undefined, opts.expectedBytes, what);
      } catch (e) {
        req.destroy();
        return reject(e);
      }
      const sink = new Sink(len !== undefined ? Number(len) : opts.expectedBytes, opts.onProgress);
      const total = len !== undefined ? Number(len) : undefined;
      res.on('data', (c) => sink.push(c));
      res.on('end', () => {
        if (total !== undefined && sink.loaded !== total) reject(interrupted(what, sink.loaded, total, 'the body ended early'));
        else resolve(sink.finish());
      });
      res.on('error', (e) => reject(opts.signal?.aborted ? abortError(what) : interrupted(what, sink.loaded, total, e.message)));
    });
    req.on('error', (e) => reject(opts.signal?.aborted ? abortError(what) : loaderError(`could not download ${what}: ${e.message}`, 'DownloadFailed')));
    opts.signal?.addEventListener('abort', () => req.destroy(), { once: true });
  });
}

async function viaFile(path, opts, what) {
  const { fs } = await nodeHost();
  const st = await fs.promises.stat(path).catch((e) => {
    throw loaderError(`could not read ${what}: ${e.message}`, 'ReadFailed');
  });
  checkEarlySize(st.size, opts.expectedBytes, what);
  const sink = new Sink(st.size, opts.onProgress);
  const stream = fs.createReadStream(path, { highWaterMark: 1 << 20, signal: opts.signal });
  try {
    for await (const chunk of stream) sink.push(chunk);
  } catch (e) {
    if (opts.signal?.aborted) throw abortError(what);
    throw loaderError(`could not read ${what}: ${e.message}`, 'ReadFailed');
  }
  return sink.finish();
}

/** Lower-case hex sha256 of bytes, with WebCrypto (node >= 20 and browsers; pages need a secure context). */
export async function sha256Hex(bytes) {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) throw loaderError('sha256 needs WebCrypto (crypto.subtle): use https or localhost', 'NoWebCrypto');
  // WebCrypto refuses views on SharedArrayBuffers: hash a private copy then.
  const plain = globalThis.SharedArrayBuffer && bytes.buffer instanceof SharedArrayBuffer ? bytes.slice() : bytes;
  const digest = await subtle.digest('SHA-256', plain);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * Load ONNX weights and verify them.
 * Preconditions: `source` is an http(s)/blob:/data: URL (string or URL), a file path or file: URL (node only),
 * a Blob/File, an ArrayBuffer or a Uint8Array (returned as is, not copied). `sha256` is 64 hex digits.
 * Progress: onProgress({loaded, total}) per chunk and once at the end with loaded === total (total is the
 * Content-Length / file size, else expectedBytes, else undefined until the end).
 * Errors: code 'WeightsMismatch' (size or sha256 differs: expected vs got and the fix; `expected`, `got`,
 * `check` = 'bytes'|'sha256' on the error), 'DownloadFailed' (with `interrupted: true`, `loaded`, `total` when the
 * connection was lost mid-body), 'ReadFailed'; DOMException 'AbortError' on cancel.
 * @param {string|URL|Blob|ArrayBuffer|Uint8Array} source
 * @param {{expectedBytes?: number, sha256?: string, onProgress?: (p:{loaded:number,total:number|undefined}) => void, signal?: AbortSignal}} [opts]
 * @returns {Promise<Uint8Array>}
 */
export async function loadModel(source, opts = {}) {
  const what = describe(source);
  const { expectedBytes, sha256, signal } = opts;
  if (signal?.aborted) throw abortError(what);
  let bytes;
  if (source instanceof Uint8Array) {
    bytes = source;
    opts.onProgress?.({ loaded: bytes.byteLength, total: bytes.byteLength });
  } else if (source instanceof ArrayBuffer) {
    bytes = new Uint8Array(source);
    opts.onProgress?.({ loaded: bytes.byteLength, total: bytes.byteLength });
  } else if (globalThis.Blob && source instanceof Blob) {
    checkEarlySize(source.size, expectedBytes, what);
    const sink = new Sink(source.size, opts.onProgress);
    await drainReader(source.stream().getReader(), sink, signal, what);
    bytes = sink.finish();
  } else if (typeof source === 'string' || source instanceof URL) {
    const href = source instanceof URL ? source.href : source;
    if (isNode && !isFetchable(href)) {
      const path = href.startsWith('file:') ? (await nodeHost()).fileURLToPath(href) : href;
      bytes = await viaFile(path, opts, what);
    } else if (typeof globalThis.fetch === 'function') {
      bytes = await viaFetch(href, opts, what).catch((e) => {
        if (signal?.aborted) throw abortError(what);
        if (e.code) throw e;
        throw loaderError(`could not download ${what}: ${e.message}`, 'DownloadFailed', { cause: e });
      });
    } else if (isNode && /^https?:/i.test(href)) {
      bytes = await viaNodeHttp(href, opts, what);
    } else {
      throw loaderError(`cannot load ${what}: no fetch() in this environment`, 'DownloadFailed');
    }
  } else {
    throw new TypeError('loadModel: source must be a URL, a file path, a Blob/File, an ArrayBuffer or a Uint8Array');
  }
  if (signal?.aborted) throw abortError(what);
  if (expectedBytes !== undefined && bytes.byteLength !== expectedBytes) throw sizeMismatch(expectedBytes, bytes.byteLength, what);
  if (sha256 !== undefined) {
    const want = String(sha256).toLowerCase();
    const got = await sha256Hex(bytes);
    if (got !== want)
      throw loaderError(
        `WeightsMismatch: the sha256 of the network weights from ${what} is ${got}, expected ${want}. ` +
          'The file is corrupt or a different version: delete any cached copy and download it again from the ' +
          "registry's URL (or update the registry's sha256 if the weights were changed on purpose).",
        'WeightsMismatch',
        { expected: want, got, check: 'sha256' },
      );
  }
  return bytes;
}

// ------------------------------------------------------------------------------------------------
// The weights cache: verified weights kept across page loads in the Cache API (browsers), one entry per
// weights file keyed by its name and sha256, so a changed registry entry never serves stale bytes. Every
// function takes `{ caches, base }`: caches, a CacheStorage (default: the global one; absent in node and in
// insecure contexts, where nothing is cached); base, the URL the keys are made under (default: the page's).

/** The CacheStorage name of the weights cache. */
export const WEIGHTS_CACHE_NAME = 'tessera-weights-v1';
const KEY_FOLDER = '__tessera-weights/';

function cacheStorage(o) {
  return o.caches === undefined ? globalThis.caches : o.caches;
}

/**
 * The cache key (a URL) of one weights file.
 * Preconditions: `file` is the registry's file name; `sha256` is its 64-hex-digit sha256.
 * `base` is an absolute http(s) URL (default: the page's location).
 */
export function weightsCacheKey(file, sha256, { base = globalThis.location?.href } = {}) {
  if (!base) throw new TypeError('weightsCacheKey: give a base URL (there is no page location here)');
  return new URL(`${KEY_FOLDER}${encodeURIComponent(`${file}:${String(sha256).toLowerCase()}`)}`, base).href;
}

/** True when a weights cache is available (a CacheStorage was given or exists globally). */
export function weightsCacheAvailable(o = {}) {
  return !!cacheStorage(o);
}

/**
 * The cached bytes of every file in `files`, or null when any is missing (or there is no cache).
 * Preconditions: `files` is a registry entry's weights list ([{file, sha256}]); entries without a sha256 are
 * never cached, so such a list gives null. The bytes are as stored: verify them (loadModel with sha256).
 */
export async function readCachedWeights(files, o = {}) {
  const storage = cacheStorage(o);
  if (!storage || !files.length || files.some((w) => !w.sha256)) return null;
  const cache = await storage.open(WEIGHTS_CACHE_NAME);
  const out = [];
  for (const w of files) {
    const r = await cache.match(weightsCacheKey(w.file, w.sha256, o));
    if (!r) return null;
    out.push(new Uint8Array(await r.arrayBuffer()));
  }
  return out;
}

/**
 * Stores verified weights; returns how many files were stored (0 without a cache).
 * Preconditions: `files` ([{file, sha256}]) and `bytes` (Uint8Array per file) have the same length, and the
 * bytes were verified against those sha256s; files without a sha256 are skipped.
 */
export async function cacheWeights(files, bytes, o = {}) {
  if (files.length !== bytes.length) throw new TypeError(`cacheWeights: ${files.length} files but ${bytes.length} byte arrays`);
  const storage = cacheStorage(o);
  if (!storage) return 0;
  const cache = await storage.open(WEIGHTS_CACHE_NAME);
  let stored = 0;
  for (let i = 0; i < files.length; i++) {
    if (!files[i].sha256) continue;
    const body = new Response(bytes[i], { headers: { 'Content-Type': 'application/octet-stream' } });
    await cache.put(weightsCacheKey(files[i].file, files[i].sha256, o), body);
    stored++;
  }
  return stored;
}

/**
 * What the cache holds: [{file, sha256}] in storage order, or null when there is no cache.
 * Preconditions: none.
 */
export async function listCachedWeights(o = {}) {
  const storage = cacheStorage(o);
  if (!storage) return null;
  const cache = await storage.open(WEIGHTS_CACHE_NAME);
  const out = [];
  for (const req of await cache.keys()) {
    const url = typeof req === 'string' ? req : req.url;
    const i = url.lastIndexOf(KEY_FOLDER);
    if (i < 0) continue;
    const name = decodeURIComponent(url.slice(i + KEY_FOLDER.length));
    const colon = name.lastIndexOf(':');
    out.push({ file: name.slice(0, colon), sha256: name.slice(colon + 1) });
  }
  return out;
}

/**
 * Empties the weights cache; true when there was one to empty.
 * Preconditions: none.
 */
export async function clearWeightsCache(o = {}) {
  const storage = cacheStorage(o);
  if (!storage) return false;
  return storage.delete(WEIGHTS_CACHE_NAME);
}

/**
 * A registry network's weights through the cache: the cached copies when every file is there and they pass
 * `load`'s checks, else `load()` from the official source, stored in the cache once verified. A cached copy
 * that fails the checks (corrupt storage) is dropped and downloaded again. Returns { bytes, fromCache }.
 * Preconditions: `files` is the registry entry's weights list ([{file, sha256, bytes?}]); `load(sources)`
 * returns the verified bytes per file (Promise<Uint8Array[]>), from `sources` (one per file) or, when sources
 * is undefined, from the registry's URLs — e.g. (s) => tessera.loadWeights(id, { sources: s, signal }).
 */
export async function loadWeightsCached(files, load, o = {}) {
  let cached = null;
  try {
    cached = await readCachedWeights(files, o);
  } catch (e) {
    console.warn('the weights cache could not be read:', e?.message ?? e);
  }
  if (cached) {
    try {
      return { bytes: await load(cached), fromCache: true };
    } catch (e) {
      if (e?.code !== 'WeightsMismatch') throw e;
      const cache = await cacheStorage(o).open(WEIGHTS_CACHE_NAME);
      for (const w of files) await cache.delete(weightsCacheKey(w.file, w.sha256, o));
    }
  }
  const bytes = await load(undefined);
  try {
    await cacheWeights(files, bytes, o);
  } catch (e) {
    console.warn('weights not cached:', e?.message ?? e); // e.g. storage quota: the run goes on uncached
  }
  return { bytes, fromCache: false };
}
