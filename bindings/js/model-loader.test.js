// loadModel tests (node --no-experimental-fetch --test --test-force-exit bindings/js/model-loader.test.js).
// Runs with and without node's global fetch: with --no-experimental-fetch the node:http path is used.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import {
  loadModel, sha256Hex, WEIGHTS_CACHE_NAME, weightsCacheKey, weightsCacheAvailable, readCachedWeights, cacheWeights,
  listCachedWeights, clearWeightsCache, loadWeightsCached,
} from './model-loader.js';
import { WorkerPool } from './runtime/pool.js';
import { convStack, convStackReference, randomArray } from '../../tests/js/networks.js';

const model = convStack({ layers: 2, channels: 2, seed: 4 });
const big = new Uint8Array(3 * 1024 * 1024 + 17).map((_, i) => (i * 2654435761) >>> 24);
const sha = (b) => createHash('sha256').update(b).digest('hex');
let dir;
let server;
let base;
const dropped = new Set(); // paths whose first download was cut

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-loader-'));
  fs.writeFileSync(path.join(dir, 'model.onnx'), model);
  fs.writeFileSync(path.join(dir, 'big.bin'), big);
  server = http.createServer(async (req, res) => {
    if (req.url === '/big.bin' || req.url === '/big-nolength.bin') {
      const headers = { 'content-type': 'application/octet-stream' };
      if (req.url === '/big.bin') headers['content-length'] = String(big.byteLength);
      res.writeHead(200, headers);
      const chunk = 256 * 1024;
      for (let o = 0; o < big.byteLength; o += chunk) {
        if (!res.write(big.subarray(o, o + chunk))) await new Promise((r) => res.once('drain', r));
        await new Promise((r) => setTimeout(r, 2));
      }
      res.end();
    } else if (req.url === '/model.onnx') {
      res.writeHead(200, { 'content-length': String(model.byteLength) });
      res.end(model);
    } else if (req.url === '/moved') {
      res.writeHead(302, { location: '/model.onnx' });
      res.end();
    } else if (req.url.startsWith('/drop-once/')) {
      // The first request of each path loses its connection after a third of the body; later ones are served whole.
      const first = !dropped.has(req.url);
      dropped.add(req.url);
      const chunked = req.url.includes('chunked');
      res.writeHead(200, chunked ? {} : { 'content-length': String(big.byteLength) });
      if (!first) return res.end(big);
      res.write(big.subarray(0, big.byteLength / 3));
      setTimeout(() => res.socket.destroy(), 20);
    } else if (req.url === '/cut-no-length.bin') {
      // No length, no chunking: the body ends where the server closes, so the client cannot tell it was cut.
      res.socket.end(Buffer.concat([Buffer.from('HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n'), Buffer.from(big.subarray(0, 1000))]));
    } else if (req.url === '/slow') {
      res.writeHead(200, { 'content-length': '1000000' });
      res.write(new Uint8Array(1000));
      // never finishes: for the abort test
    } else {
      res.writeHead(404);
      res.end('not found');
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${server.address().port}`;
});

after(() => {
  server?.closeAllConnections?.();
  server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('bytes, ArrayBuffer, Blob, File, path and file: URL all give the same bytes', async () => {
  const want = sha(model);
  const sources = [
    model,
    model.buffer.slice(model.byteOffset, model.byteOffset + model.byteLength),
    new Blob([model]),
    new File([model], 'model.onnx'),
    path.join(dir, 'model.onnx'),
    pathToFileURL(path.join(dir, 'model.onnx')),
    pathToFileURL(path.join(dir, 'model.onnx')).href,
  ];
  for (const s of sources) {
    const b = await loadModel(s, { expectedBytes: model.byteLength, sha256: want });
    assert.ok(b instanceof Uint8Array);
    assert.equal(sha(b), want);
  }
  assert.equal(await sha256Hex(model), want);
});

test('download from a local http server: streamed progress reaches total, bytes verified', async () => {
  const events = [];
  const b = await loadModel(`${base}/big.bin`, {
    expectedBytes: big.byteLength,
    sha256: sha(big),
    onProgress: (p) => events.push({ ...p }),
  });
  assert.equal(b.byteLength, big.byteLength);
  assert.ok(events.length >= 4, `only ${events.length} progress events`);
  for (let i = 1; i < events.length; i++) assert.ok(events[i].loaded >= events[i - 1].loaded);
  assert.ok(events.every((e) => e.total === big.byteLength));
  assert.deepEqual(events.at(-1), { loaded: big.byteLength, total: big.byteLength });
});

test('download without Content-Length: total known at the end (or from expectedBytes)', async () => {
  const events = [];
  const b = await loadModel(`${base}/big-nolength.bin`, { onProgress: (p) => events.push({ ...p }) });
  assert.equal(sha(b), sha(big));
  assert.deepEqual(events.at(-1), { loaded: big.byteLength, total: big.byteLength });
  const ev2 = [];
  await loadModel(`${base}/big-nolength.bin`, { expectedBytes: big.byteLength, onProgress: (p) => ev2.push({ ...p }) });
  assert.ok(ev2.every((e) => e.total === big.byteLength));
});

test('file progress reaches total', async () => {
  const events = [];
  await loadModel(path.join(dir, 'big.bin'), { onProgress: (p) => events.push({ ...p }) });
  assert.ok(events.length >= 3);
  assert.deepEqual(events.at(-1), { loaded: big.byteLength, total: big.byteLength });
});

test('sha256 mismatch: WeightsMismatch naming expected and got, and the fix', async () => {
  const wrong = '0'.repeat(64);
  for (const s of [model, path.join(dir, 'model.onnx'), `${base}/model.onnx`, new Blob([model])]) {
    await assert.rejects(loadModel(s, { sha256: wrong }), (e) => {
      assert.equal(e.code, 'WeightsMismatch');
      assert.equal(e.check, 'sha256');
      assert.equal(e.expected, wrong);
      assert.equal(e.got, sha(model));
      assert.ok(e.message.includes(wrong) && e.message.includes(sha(model)), e.message);
      assert.match(e.message, /download it again/);
      return true;
    });
  }
  // upper-case hex is accepted
  await loadModel(model, { sha256: sha(model).toUpperCase() });
});

test('size mismatch: WeightsMismatch naming expected and got bytes (checked before the download when known)', async () => {
  for (const s of [model, path.join(dir, 'model.onnx'), `${base}/model.onnx`, new Blob([model]), `${base}/big-nolength.bin`]) {
    await assert.rejects(loadModel(s, { expectedBytes: 12345 }), (e) => {
      assert.equal(e.code, 'WeightsMismatch');
      assert.equal(e.check, 'bytes');
      assert.equal(e.expected, 12345);
      assert.match(e.message, /expected 12345 bytes/);
      assert.match(e.message, new RegExp(`have ${e.got} bytes`));
      return true;
    });
  }
});

test('HTTP errors, redirects, missing files, bad sources, cancellation', async () => {
  await assert.rejects(loadModel(`${base}/nope.onnx`), (e) => e.code === 'DownloadFailed' && /HTTP 404/.test(e.message));
  const b = await loadModel(`${base}/moved`, { sha256: sha(model) });
  assert.equal(b.byteLength, model.byteLength);
  await assert.rejects(loadModel(path.join(dir, 'missing.onnx')), { code: 'ReadFailed' });
  await assert.rejects(loadModel(42), TypeError);
  const ac = new AbortController();
  const p = loadModel(`${base}/slow`, { signal: ac.signal });
  setTimeout(() => ac.abort(), 100);
  await assert.rejects(p, { name: 'AbortError' });
  const done = new AbortController();
  done.abort();
  await assert.rejects(loadModel(model, { signal: done.signal }), { name: 'AbortError' });
});

test('a download whose connection drops mid-body: DownloadFailed naming how far it got; a retry gets the whole file (fetch and node:http)', async () => {
  const saved = globalThis.fetch;
  try {
    for (const viaFetch of [true, false]) {
      if (!viaFetch) globalThis.fetch = undefined; // loadModel then uses node:http (as under --no-experimental-fetch)
      else if (typeof saved !== 'function') continue;
      for (const kind of ['length', 'chunked']) {
        const url = `${base}/drop-once/${kind}-${viaFetch ? 'fetch' : 'http'}.bin`;
        const events = [];
        const opts = { expectedBytes: big.byteLength, sha256: sha(big), onProgress: (p) => events.push(p.loaded) };
        await assert.rejects(loadModel(url, opts), (e) => {
          assert.equal(e.code, 'DownloadFailed');
          assert.equal(e.interrupted, true);
          assert.ok(e.loaded > 0 && e.loaded < big.byteLength, `${e.loaded} bytes`);
          assert.equal(e.total, kind === 'length' ? big.byteLength : undefined);
          const of = kind === 'length' ? ` of ${big.byteLength}` : '';
          assert.match(e.message, new RegExp(`^the download of ${url.replace(/[.?]/g, '\\$&')} was interrupted after ${e.loaded}${of} bytes \\(.+\\): the connection was lost; try again$`));
          return true;
        }, `${kind} via ${viaFetch ? 'fetch' : 'node:http'}`);
        assert.ok(events.length > 0, 'progress was reported before the cut');
        const again = await loadModel(url, opts);
        assert.equal(sha(again), sha(big));
      }
    }
  } finally {
    globalThis.fetch = saved;
  }
});

test('loaded weights run in the worker pool', async () => {
  const bytes = await loadModel(`${base}/model.onnx`, { expectedBytes: model.byteLength, sha256: sha(model) });
  const pool = new WorkerPool({ model: bytes, workers: 1 });
  try {
    const input = randomArray(6 * 7 * 8, 3);
    const r = await pool.run({ id: 0, input, dims: [1, 1, 6, 7, 8] });
    const ref = convStackReference(input, [6, 7, 8], { layers: 2, channels: 2, seed: 4 });
    let m = 0;
    for (let i = 0; i < ref.length; i++) m = Math.max(m, Math.abs(ref[i] - r.output[i]));
    assert.ok(m <= 1e-5);
  } finally {
    await pool.terminate();
  }
});

// ------------------------------------------------------------------------------------------------
// The weights cache, over an in-memory CacheStorage with the Cache API's semantics (the page test covers the
// browser's). Under --no-experimental-fetch node has no Response: a minimal one stands in for this file.

if (typeof globalThis.Response === 'undefined') {
  globalThis.Response = class {
    constructor(body) {
      this._body = body;
    }
    async arrayBuffer() {
      const b = this._body;
      return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
    }
  };
}

/** CacheStorage: open(name) → Cache (match/put/delete/keys over absolute URLs), delete(name). */
class MemoryCacheStorage {
  constructor() {
    this.stores = new Map();
    this.puts = 0;
  }
  async open(name) {
    if (!this.stores.has(name)) this.stores.set(name, new Map());
    const m = this.stores.get(name);
    const owner = this;
    return {
      async match(url) {
        const b = m.get(new URL(url).href);
        return b ? { arrayBuffer: async () => b.slice().buffer } : undefined;
      },
      async put(url, response) {
        owner.puts++;
        m.set(new URL(url).href, new Uint8Array(await response.arrayBuffer()));
      },
      async delete(url) {
        return m.delete(new URL(url).href);
      },
      async keys() {
        return [...m.keys()].map((url) => ({ url }));
      },
    };
  }
  async delete(name) {
    return this.stores.delete(name);
  }
}

const BASE = 'https://tessera.example/web/';
const filesOf = (...bytes) => bytes.map((b, i) => ({ file: `net${i}:v1.onnx`, sha256: sha(b), bytes: b.byteLength }));
/** A load(sources) like tessera.loadWeights: sources or the "official" bytes, each checked by loadModel. */
function loader(files, official) {
  const calls = [];
  const load = async (sources) => {
    calls.push(sources === undefined ? 'download' : 'cache');
    const list = sources ?? official;
    return Promise.all(list.map((s, i) => loadModel(s, { expectedBytes: files[i].bytes, sha256: files[i].sha256 })));
  };
  return { load, calls };
}

test('weights cache: keys name the file and its sha256 under the page, nothing without a cache', async () => {
  const key = weightsCacheKey('xqsm.onnx', 'AB'.repeat(32), { base: BASE });
  assert.equal(key, `${BASE}__tessera-weights/${encodeURIComponent(`xqsm.onnx:${'ab'.repeat(32)}`)}`);
  assert.throws(() => weightsCacheKey('x.onnx', 'ab', { base: '' }), /base URL/);
  const none = { caches: null, base: BASE };
  assert.equal(weightsCacheAvailable(none), false);
  assert.equal(weightsCacheAvailable({ caches: new MemoryCacheStorage() }), true);
  assert.equal(await readCachedWeights(filesOf(model), none), null);
  assert.equal(await cacheWeights(filesOf(model), [model], none), 0);
  assert.equal(await listCachedWeights(none), null);
  assert.equal(await clearWeightsCache(none), false);
  // Without a cache the loader downloads every time.
  const files = filesOf(model);
  const l = loader(files, [model]);
  for (let i = 0; i < 2; i++) assert.equal((await loadWeightsCached(files, l.load, none)).fromCache, false);
  assert.deepEqual(l.calls, ['download', 'download']);
});

test('weights cache: the first load downloads and stores, the next comes from the cache (verified), clear empties it', async () => {
  const caches = new MemoryCacheStorage();
  const o = { caches, base: BASE };
  const second = big.subarray(0, 5000);
  const files = filesOf(model, second);
  const l = loader(files, [model, second]);
  const first = await loadWeightsCached(files, l.load, o);
  assert.equal(first.fromCache, false);
  assert.deepEqual(first.bytes.map(sha), [sha(model), sha(second)]);
  assert.equal(caches.puts, 2);
  assert.deepEqual(await listCachedWeights(o), files.map(({ file, sha256 }) => ({ file, sha256 })));
  assert.ok(caches.stores.has(WEIGHTS_CACHE_NAME));
  const again = await loadWeightsCached(files, l.load, o);
  assert.equal(again.fromCache, true);
  assert.deepEqual(again.bytes.map(sha), [sha(model), sha(second)]);
  assert.deepEqual(l.calls, ['download', 'cache']);
  assert.equal(caches.puts, 2, 'cached bytes are not stored again');
  // Only every file cached counts; a registry entry with another sha256 is another key.
  assert.equal(await readCachedWeights([...files, { file: 'other.onnx', sha256: sha(big) }], o), null);
  assert.equal(await readCachedWeights([{ ...files[0], sha256: sha(big) }], o), null);
  assert.equal(await readCachedWeights([{ file: files[0].file, sha256: '' }], o), null, 'no sha256, no cache');
  assert.equal(await clearWeightsCache(o), true);
  assert.deepEqual(await listCachedWeights(o), []);
  assert.equal((await loadWeightsCached(files, l.load, o)).fromCache, false);
});

test('weights cache: a corrupt cached copy is dropped and downloaded again; other errors are not swallowed', async () => {
  const caches = new MemoryCacheStorage();
  const o = { caches, base: BASE };
  const files = filesOf(model);
  const corrupt = Uint8Array.from(model);
  corrupt[100] ^= 0xff;
  await cacheWeights(files, [corrupt], o);
  const l = loader(files, [model]);
  const r = await loadWeightsCached(files, l.load, o);
  assert.equal(r.fromCache, false);
  assert.equal(sha(r.bytes[0]), sha(model));
  assert.deepEqual(l.calls, ['cache', 'download']);
  assert.equal(sha((await readCachedWeights(files, o))[0]), sha(model), 'the good copy replaced the corrupt one');
  // A download that fails stores nothing and reports the failure.
  await clearWeightsCache(o);
  const failing = async () => {
    throw Object.assign(new Error('could not download x: HTTP 404'), { code: 'DownloadFailed' });
  };
  await assert.rejects(loadWeightsCached(files, failing, o), { code: 'DownloadFailed' });
  assert.deepEqual(await listCachedWeights(o), []);
  // Cancelling while the cached copy is checked rejects with the AbortError, the cache kept.
  await cacheWeights(files, [model], o);
  const abort = async () => {
    throw new DOMException('cancelled', 'AbortError');
  };
  await assert.rejects(loadWeightsCached(files, abort, o), { name: 'AbortError' });
  assert.equal((await listCachedWeights(o)).length, 1);
  await assert.rejects(cacheWeights(files, [], o), /1 files but 0 byte arrays/);
});

test('weights cache: an interrupted download stores nothing, the retry downloads and caches the verified file, the next load comes from the cache', async () => {
  const caches = new MemoryCacheStorage();
  const o = { caches, base: BASE };
  const files = [{ file: 'big:v1.onnx', sha256: sha(big), bytes: big.byteLength }];
  const url = `${base}/drop-once/cache.bin`;
  const calls = [];
  const load = async (sources) => {
    calls.push(sources === undefined ? 'download' : 'cache');
    return [await loadModel(sources?.[0] ?? url, { expectedBytes: files[0].bytes, sha256: files[0].sha256 })];
  };
  await assert.rejects(loadWeightsCached(files, load, o), { code: 'DownloadFailed', interrupted: true });
  assert.deepEqual(await listCachedWeights(o), [], 'the cut download left nothing in the cache');
  assert.equal(caches.puts, 0);
  const retry = await loadWeightsCached(files, load, o);
  assert.equal(retry.fromCache, false);
  assert.equal(sha(retry.bytes[0]), sha(big));
  assert.equal(sha((await readCachedWeights(files, o))[0]), sha(big), 'the cache holds the whole, verified file');
  const cached = await loadWeightsCached(files, load, o);
  assert.equal(cached.fromCache, true);
  assert.deepEqual(calls, ['download', 'download', 'cache']);
  // A body cut where the client cannot see it (no length, connection closed): the size and sha256 checks refuse it,
  // and the cache is not poisoned.
  const cut = { caches: new MemoryCacheStorage(), base: BASE };
  const cutLoad = async () => [await loadModel(`${base}/cut-no-length.bin`, { expectedBytes: files[0].bytes, sha256: files[0].sha256 })];
  await assert.rejects(loadWeightsCached(files, cutLoad, cut), (e) => {
    assert.ok(e.code === 'WeightsMismatch' || (e.code === 'DownloadFailed' && e.interrupted), `${e.code}: ${e.message}`);
    return true;
  });
  assert.deepEqual(await listCachedWeights(cut), []);
});
