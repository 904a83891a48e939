// WorkerPool tests (node --no-experimental-fetch --test --test-force-exit bindings/js/runtime/pool.test.js).
// Every pool uses 1 thread per worker and at most 2 workers: the machine has 2 shared cores.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { WorkerPool } from './pool.js';
import { convStack, convStackReference, unet, twoChannel, wrongShape, memoryHog, randomArray } from '../../../tests/js/networks.js';
import { faultWorkerUrl } from '../../../tests/js/fault-ort-worker.js';

const CONV = { layers: 3, channels: 4, seed: 11 };
const convModel = convStack(CONV);
const pools = new Set();

// faults: injected by a stand-in pool worker (tests/js/fault-ort-worker.js); the shipped worker has no test hooks.
function makePool({ faults, ...opts }) {
  const p = new WorkerPool({ threadsPerWorker: 1, ...(faults && { workerUrl: faultWorkerUrl(faults) }), ...opts });
  pools.add(p);
  return p;
}

after(async () => {
  await Promise.all([...pools].map((p) => p.terminate()));
});

function maxAbsDiff(a, b) {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

function tile(id, [X, Y, Z], C = 1) {
  return { id, input: randomArray(C * X * Y * Z, 1000 + id), dims: [1, C, X, Y, Z] };
}

test('conv stack: outputs match the JS reference within 1e-5 (several shapes, 2 workers)', async () => {
  const pool = makePool({ model: convModel, workers: 2 });
  await pool.ready();
  const shapes = [[16, 16, 16], [9, 14, 11], [20, 7, 13], [5, 5, 5]];
  const tiles = shapes.map((s, i) => tile(i, s));
  const results = await Promise.all(tiles.map((t) => pool.run(t)));
  results.forEach((r, i) => {
    assert.deepEqual(r.dims, tiles[i].dims);
    const ref = convStackReference(tiles[i].input, shapes[i], CONV);
    assert.ok(maxAbsDiff(r.output, ref) <= 1e-5, `tile ${i}: max |diff| ${maxAbsDiff(r.output, ref)}`);
    // The output buffer was transferred whole from the worker (no view into something larger).
    assert.ok(r.output.buffer instanceof ArrayBuffer);
    assert.equal(r.output.byteOffset, 0);
    assert.equal(r.output.buffer.byteLength, r.output.byteLength);
    assert.ok(r.seconds >= 0 && r.heapBytes > 0);
  });
  await pool.terminate();
});

test('input on a SharedArrayBuffer (like the C++ heap) is copied at run(): the caller may overwrite it at once', async () => {
  const pool = makePool({ model: convModel, workers: 1 });
  const dims = [12, 10, 8];
  const n = 12 * 10 * 8;
  const heap = new SharedArrayBuffer(4 * (n + 64));
  const view = new Float32Array(heap, 4 * 32, n);
  const src = randomArray(n, 77);
  view.set(src);
  const p = pool.run({ id: 'sab', input: view, dims: [1, 1, ...dims] });
  view.fill(123); // the C++ module reuses its heap right after handing the tile over
  const r = await p;
  assert.ok(maxAbsDiff(r.output, convStackReference(src, dims, CONV)) <= 1e-5);
  await pool.terminate();
});

test('U-Net (3 max-pools, transposed-conv decoder, skip concat) runs on 32³ and 24×16×40', async () => {
  const pool = makePool({ model: unet(), workers: 1 });
  for (const s of [[32, 32, 32], [24, 16, 40]]) {
    const t = tile(s.join('x'), s);
    const r = await pool.run(t);
    assert.deepEqual(r.dims, t.dims);
    assert.equal(r.output.length, t.input.length);
    assert.ok(r.output.every(Number.isFinite));
    assert.ok(r.output.some((v) => v !== 0));
  }
  await pool.terminate();
});

test('2-channel network: output dims [1,2,X,Y,Z]', async () => {
  const pool = makePool({ model: twoChannel(), workers: 1 });
  const t = tile(1, [8, 6, 10], 2);
  const r = await pool.run(t);
  assert.deepEqual(r.dims, [1, 2, 8, 6, 10]);
  assert.equal(r.output.length, 2 * 8 * 6 * 10);
  // matches the reference too (same builder as the conv stack)
  const ref = convStackReference(t.input, [8, 6, 10], { layers: 2, channels: 4, inChannels: 2, outChannels: 2, seed: 5 });
  assert.ok(maxAbsDiff(r.output, ref) <= 1e-5);
  await pool.terminate();
});

test('wrong-shaped network: the real output dims are reported so the caller can refuse', async () => {
  const pool = makePool({ model: wrongShape(), workers: 1 });
  const t = tile(1, [9, 8, 16]);
  const r = await pool.run(t);
  assert.deepEqual(r.dims, [1, 1, 5, 4, 8]);
  assert.notDeepEqual(r.dims, t.dims);
  assert.equal(r.output.length, 5 * 4 * 8);
  await pool.terminate();
});

test('runs executing at once never exceed K (measured in the workers); least-pending dispatch spreads tiles', async () => {
  const K = 2;
  const pool = makePool({ model: unet(), workers: K });
  await pool.ready();
  const tiles = Array.from({ length: 8 }, (_, i) => tile(i, [24, 24, 24]));
  const results = await Promise.all(tiles.map((t) => pool.run(t)));
  const s = pool.stats();
  assert.ok(s.maxInFlight <= K, `maxInFlight ${s.maxInFlight} > K`);
  assert.ok(s.maxInFlightMessages <= K);
  assert.equal(s.maxInFlight, K, 'with 8 queued tiles both workers should have run at the same time');
  assert.equal(s.runs, 8);
  const perWorker = new Map();
  for (const r of results) perWorker.set(r.worker, (perWorker.get(r.worker) ?? 0) + 1);
  assert.equal(perWorker.size, K, `tiles went to ${[...perWorker.keys()]}`);
  assert.notEqual(results[0].worker, results[1].worker, 'the first two tiles go to the two free workers');
  for (const p of s.perWorker) assert.equal(p.runs, perWorker.get(p.worker));
  // Sequential tiles: the free worker with the fewest runs takes the next one (ties: the older worker).
  for (let i = 0; i < 4; i++) {
    const runs = pool.stats().perWorker.filter((p) => p.state === 'idle');
    const least = runs.reduce((a, b) => (b.runs < a.runs ? b : a));
    const r = await pool.run(tile(100 + i, [8, 8, 8]));
    assert.equal(r.worker, least.worker, `tile ${100 + i}: runs per worker ${JSON.stringify(runs.map((p) => [p.worker, p.runs]))}`);
  }
  await pool.terminate();
});

test('grow(): a ready one-worker pool takes a second worker, keeps the first (its session and runs) and runs two at once', async () => {
  const pool = makePool({ model: unet(), workers: 1 });
  await pool.ready();
  const first = await pool.run(tile(1, [16, 16, 16]));
  pool.grow(2);
  pool.grow(1); // never fewer
  await pool.ready();
  const s0 = pool.stats();
  assert.equal(s0.workers, 2);
  assert.equal(s0.workersCreated, 2, 'one worker added, none replaced');
  assert.ok(s0.perWorker.some((p) => p.worker === first.worker && p.runs === 1), 'the first worker kept its run');
  await Promise.all(Array.from({ length: 6 }, (_, i) => pool.run(tile(10 + i, [24, 24, 24]))));
  assert.equal(pool.stats().maxInFlight, 2);
  assert.throws(() => pool.grow(1.5), /whole number/);
  await pool.terminate();
});

test('heap high-water is reported > 0 per worker and grows with the tile', async () => {
  const pool = makePool({ model: unet(), workers: 2 });
  await pool.ready();
  let s = pool.stats();
  assert.equal(s.perWorker.length, 2);
  for (const p of s.perWorker) assert.ok(p.heapHighWater > 0, `worker ${p.worker}: ${p.heapHighWater}`);
  const before = Math.max(...s.perWorker.map((p) => p.heapHighWater));
  const r = await pool.run(tile(1, [48, 48, 48]));
  s = pool.stats();
  assert.ok(r.heapBytes > before, `heap ${r.heapBytes} after a 48³ U-Net run, ${before} after session creation`);
  assert.equal(s.heapHighWater, r.heapBytes);
  await pool.terminate();
});

test('cancelAll mid-run: AbortError for running and queued tiles, busy workers terminated (exit events), pool reusable', async () => {
  const pool = makePool({ model: convModel, workers: 2, faults: { stallOnTile: [1, 2] } });
  await pool.ready();
  const runs = [1, 2, 3, 4].map((id) => pool.run(tile(id, [8, 8, 8])));
  const settled = Promise.allSettled(runs);
  await new Promise((r) => setTimeout(r, 200)); // tiles 1 and 2 are executing (blocked), 3 and 4 queued
  assert.equal(pool.stats().busy, 2);
  await pool.cancelAll();
  const out = await settled;
  for (const o of out) {
    assert.equal(o.status, 'rejected');
    assert.ok(o.reason instanceof DOMException);
    assert.equal(o.reason.name, 'AbortError');
  }
  const s = pool.stats();
  assert.equal(s.liveWorkers, 0);
  assert.equal(s.workersExited, s.workersCreated, 'every worker thread fired its exit event');
  assert.equal(s.queued, 0);
  assert.equal(s.cancelled, 4);
  // replaced lazily: the next run starts fresh workers
  const r = await pool.run(tile(5, [8, 8, 8]));
  assert.ok(r.worker > 2);
  await pool.terminate();
});

test('per-run AbortSignal: a queued tile is dropped, a running one terminates its worker, others finish', async () => {
  const pool = makePool({ model: convModel, workers: 1, faults: { stallOnTile: 1 } });
  await pool.ready();
  const ac1 = new AbortController();
  const ac2 = new AbortController();
  const p1 = pool.run({ ...tile(1, [8, 8, 8]), signal: ac1.signal });
  const p2 = pool.run({ ...tile(2, [8, 8, 8]), signal: ac2.signal });
  const p3 = pool.run(tile(3, [8, 8, 8]));
  ac2.abort(); // queued
  await assert.rejects(p2, { name: 'AbortError' });
  await new Promise((r) => setTimeout(r, 100));
  ac1.abort(); // running (stalled)
  await assert.rejects(p1, { name: 'AbortError' });
  const r3 = await p3; // tile 3 runs on the replacement
  assert.ok(maxAbsDiff(r3.output, convStackReference(tile(3, [8, 8, 8]).input, [8, 8, 8], CONV)) <= 1e-5);
  assert.ok(r3.worker > 1);
  const already = new AbortController();
  already.abort();
  await assert.rejects(pool.run({ ...tile(4, [8, 8, 8]), signal: already.signal }), { name: 'AbortError' });
  await pool.terminate();
});

test('a worker killed mid-tile is replaced and the tile retried on a fresh worker: correct result', async () => {
  const pool = makePool({ model: convModel, workers: 2, faults: { crashOnTile: 3, crashTimes: 1 } });
  await pool.ready();
  const tiles = [1, 2, 3, 4].map((id) => tile(id, [10, 10, 10]));
  const results = await Promise.all(tiles.map((t) => pool.run(t)));
  results.forEach((r, i) => assert.ok(maxAbsDiff(r.output, convStackReference(tiles[i].input, [10, 10, 10], CONV)) <= 1e-5));
  assert.ok(results[2].worker > 2, `tile 3 retried on worker ${results[2].worker}, not a fresh one`);
  const s = pool.stats();
  assert.equal(s.crashes, 1);
  assert.equal(s.retries, 1);
  assert.equal(s.perWorker.filter((p) => p.endedBy === 'died').length, 1);
  await pool.terminate();
});

test('a worker that dies twice on the same tile: clear error naming the tile', async () => {
  const pool = makePool({ model: convModel, workers: 1, faults: { crashOnTile: 5 } });
  const ok = pool.run(tile(4, [6, 6, 6]));
  const bad = pool.run(tile(5, [6, 6, 6]));
  await assert.rejects(bad, (e) => {
    assert.equal(e.code, 'TileFailed');
    assert.equal(e.tile, 5);
    assert.match(e.message, /^tile 5 failed after 2 attempt\(s\): the worker exited \(code 1\) on worker \d+; then the worker exited \(code 1\) on worker \d+$/);
    return true;
  });
  await ok;
  // the pool still works afterwards
  const r = await pool.run(tile(6, [6, 6, 6]));
  assert.deepEqual(r.dims, [1, 1, 6, 6, 6]);
  assert.equal(pool.stats().crashes, 2);
  await pool.terminate();
});

test('ONNX Runtime errors: retried once, then a clear error; an out-of-memory error is recognised and recovered', async () => {
  const pool = makePool({ model: convModel, workers: 1, faults: { failOnTile: 7, oomOnTile: 8, crashTimes: Infinity } });
  await assert.rejects(pool.run(tile(7, [6, 6, 6])), (e) => {
    assert.equal(e.code, 'TileFailed');
    assert.match(e.message, /^tile 7 failed after 2 attempt\(s\): ONNX Runtime error \(Error: test fault: ONNX Runtime error on tile 7\)/);
    return true;
  });
  await assert.rejects(pool.run(tile(8, [6, 6, 6])), /tile 8 failed after 2 attempt\(s\): out of memory in ONNX Runtime \(RangeError/);
  const s = pool.stats();
  assert.equal(s.runErrors, 4);
  assert.equal(s.ooms, 2);
  await pool.terminate();

  const once = makePool({ model: convModel, workers: 1, faults: { oomOnTile: 8, crashTimes: 1 } });
  const t = tile(8, [6, 6, 6]);
  const r = await once.run(t);
  assert.ok(maxAbsDiff(r.output, convStackReference(t.input, [6, 6, 6], CONV)) <= 1e-5);
  assert.equal(once.stats().ooms, 1);
  assert.equal(once.stats().retries, 1);
  await once.terminate();
});

test('ONNX Runtime really out of memory (a network needing 4 GiB for a 64³ tile, the real worker): recognised, retried once, a clear error with advice; the pool runs on', async () => {
  // tests/js/networks.js memoryHog: a 256 MiB broadcast, then a 3.75 GiB concatenation: past the 4 GB wasm heap.
  const pool = makePool({ model: memoryHog(), workers: 1 });
  const small = tile(1, [8, 8, 8]);
  assert.deepEqual((await pool.run(small)).output, small.input, 'the network is the identity on a tile that fits');
  const t0 = performance.now();
  await assert.rejects(pool.run(tile(2, [64, 64, 64])), (e) => {
    assert.equal(e.code, 'TileFailed');
    assert.equal(e.oom, true);
    assert.equal(e.causes.length, 2);
    for (const c of e.causes) assert.match(c, /^out of memory in ONNX Runtime \(Error: .*bad_alloc.*\) on worker \d+$/);
    assert.match(e.message, /^tile 2 failed after 2 attempt\(s\): out of memory in ONNX Runtime .*: this patch needs more memory than an ONNX Runtime worker's wasm heap holds \(at most 4 GB\): run smaller patches/);
    return true;
  });
  const s = pool.stats();
  assert.deepEqual([s.ooms, s.runErrors, s.retries, s.crashes], [2, 2, 1, 0]);
  assert.equal(s.perWorker.filter((p) => p.endedBy === 'run error').length, 2, 'both workers that ran out of memory were replaced');
  assert.ok(s.heapHighWater < 2 ** 32, `heap high-water ${s.heapHighWater}`);
  const after = tile(3, [8, 8, 8]);
  assert.deepEqual((await pool.run(after)).output, after.input, 'a fresh worker runs the next tile');
  console.log(`# a real ONNX Runtime OOM, retried and refused in ${((performance.now() - t0) / 1000).toFixed(1)} s; heap high-water ${(s.heapHighWater / 2 ** 20).toFixed(0)} MiB`);
  await pool.terminate();
});

test('a stalled worker is turned into a watchdog error within the configured time', async () => {
  const watchdogMs = 800;
  const pool = makePool({ model: convModel, workers: 1, watchdogMs, faults: { stallOnTile: 9 } });
  await pool.ready();
  const t0 = performance.now();
  await assert.rejects(pool.run(tile(9, [6, 6, 6])), (e) => {
    assert.equal(e.code, 'TileStalled');
    assert.match(e.message, /^tile 9 stalled: no result after 0\.8 s \(watchdog\)/);
    return true;
  });
  const ms = performance.now() - t0;
  assert.ok(ms >= watchdogMs - 20 && ms < watchdogMs + 1000, `watchdog fired after ${ms} ms`);
  await new Promise((r) => setTimeout(r, 50));
  const s = pool.stats();
  assert.equal(s.stalls, 1);
  assert.equal(s.liveWorkers, 0, 'the stalled worker was terminated');
  const r = await pool.run(tile(10, [6, 6, 6])); // replacement works
  assert.deepEqual(r.dims, [1, 1, 6, 6, 6]);
  await pool.terminate();
});

test('corrupt model bytes: ready() and run() reject with "the network could not be loaded"', async () => {
  const bytes = convStack(CONV).slice(0, 200);
  const pool = makePool({ model: bytes, workers: 2 });
  await assert.rejects(pool.ready(), (e) => {
    assert.equal(e.code, 'ModelLoadFailed');
    assert.match(e.message, /^the network could not be loaded: /);
    return true;
  });
  await assert.rejects(pool.run(tile(1, [4, 4, 4])), { code: 'ModelLoadFailed' });
  await pool.terminate();
  assert.equal(pool.liveWorkers, 0);
  const garbage = makePool({ model: new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]), workers: 1 });
  await assert.rejects(garbage.run(tile(1, [4, 4, 4])), /the network could not be loaded: .*protobuf parsing failed/);
  await garbage.terminate();
  assert.throws(() => new WorkerPool({ model: 'not bytes' }), TypeError);
});

test('a worker that never finishes starting: start watchdog error, nothing hangs', async () => {
  // an "ORT module" whose import never settles
  const pool = makePool({ model: convModel, workers: 1, startTimeoutMs: 600, ortModuleUrl: 'data:text/javascript,await new Promise(() => {})' });
  const t0 = performance.now();
  await assert.rejects(pool.ready(), (e) => {
    assert.equal(e.code, 'WorkerStartFailed');
    assert.match(e.message, /^a worker could not start: no session after 0\.6 s \(start watchdog\)$/);
    return true;
  });
  assert.ok(performance.now() - t0 < 3000);
  await assert.rejects(pool.run(tile(1, [4, 4, 4])), { code: 'WorkerStartFailed' });
  await pool.terminate();
  assert.equal(pool.liveWorkers, 0);
  const missing = makePool({ model: convModel, workers: 1, ortModuleUrl: 'file:///nonexistent/ort.mjs' });
  await assert.rejects(missing.ready(), /^Error: a worker could not start: cannot import ONNX Runtime Web from 'file:\/\/\/nonexistent\/ort.mjs'/);
  await missing.terminate();
});

test('recycle(): frees and replaces workers; automatic recycling once the heap passes recycleHeapBytes', async () => {
  const pool = makePool({ model: convModel, workers: 2 });
  await pool.ready();
  await Promise.all([1, 2, 3].map((id) => pool.run(tile(id, [8, 8, 8]))));
  await pool.recycle();
  let s = pool.stats();
  assert.equal(s.liveWorkers, 0);
  assert.equal(s.recycles, 2);
  assert.equal(s.workersExited, 2);
  await pool.recycle({ respawn: true });
  s = pool.stats();
  assert.equal(s.liveWorkers, 2);
  assert.deepEqual(
    s.perWorker.filter((p) => p.state === 'idle').map((p) => p.worker),
    [3, 4],
  );
  await pool.terminate();

  const auto = makePool({ model: convModel, workers: 1, recycleHeapBytes: 1 });
  const t = [1, 2, 3].map((id) => tile(id, [8, 8, 8]));
  const rs = await Promise.all(t.map((x) => auto.run(x)));
  rs.forEach((r, i) => assert.ok(maxAbsDiff(r.output, convStackReference(t[i].input, [8, 8, 8], CONV)) <= 1e-5));
  assert.deepEqual(rs.map((r) => r.worker), [1, 2, 3], 'each tile ran on a new worker');
  assert.equal(auto.stats().recycles, 3);
  await auto.terminate();
});

test('terminate(): pending runs reject, later runs reject clearly, no worker left', async () => {
  const pool = makePool({ model: convModel, workers: 1, faults: { stallOnTile: 1 } });
  await pool.ready();
  const p = assert.rejects(pool.run(tile(1, [6, 6, 6])), { code: 'PoolTerminated' }); // running (stalled)
  const q = assert.rejects(pool.run(tile(2, [6, 6, 6])), { code: 'PoolTerminated' }); // queued
  await new Promise((r) => setTimeout(r, 50));
  await pool.terminate();
  await p;
  await q;
  await assert.rejects(pool.run(tile(3, [6, 6, 6])), /the pool has been terminated/);
  await assert.rejects(pool.ready(), { code: 'PoolTerminated' });
  assert.equal(pool.liveWorkers, 0);
  const s = pool.stats();
  assert.equal(s.workersExited, s.workersCreated);
});

test('bad requests are refused before any work', async () => {
  const pool = makePool({ model: convModel, workers: 1 });
  await assert.rejects(pool.run({ id: 1, input: new Float32Array(7), dims: [1, 1, 2, 2, 2] }), RangeError);
  await assert.rejects(pool.run({ id: 1, input: [1, 2], dims: [1, 1, 1, 1, 2] }), TypeError);
  assert.equal(pool.liveWorkers, 0);
  assert.throws(() => new WorkerPool({ model: convModel, workers: 0 }), RangeError);
  await pool.terminate();
});

test('heap guard: a worker reporting a heap past the guard mid-run fails its tile at once (MemoryCeiling), no retry', async () => {
  const guard = 3.5e9;
  const pool = makePool({ model: convModel, workers: 1, watchdogMs: 120000, heapGuardBytes: guard, faults: { heapOnTile: 1, heapBytes: 3.6e9 } });
  await pool.ready();
  const t0 = performance.now();
  await assert.rejects(pool.run(tile(1, [8, 8, 8])), (e) => {
    assert.equal(e.code, 'MemoryCeiling');
    assert.equal(e.tile, 1);
    assert.equal(e.heapBytes, 3.6e9);
    assert.equal(e.guardBytes, guard);
    assert.match(e.message, /^tile 1 stopped: ONNX Runtime worker 1 reached a heap of 3\.60 GB, past the 3\.50 GB heap guard below the 4 GiB wasm heap ceiling/);
    return true;
  });
  // Not the watchdog: the tile fails as soon as the heap is reported, while the worker is still stuck.
  assert.ok(performance.now() - t0 < 60000, `${performance.now() - t0} ms`);
  const s = pool.stats();
  assert.deepEqual([s.ceilings, s.retries, s.stalls], [1, 0, 0]);
  assert.equal(s.perWorker[0].endedBy, 'heap guard');
  // The pool goes on: the next tile runs on a fresh worker.
  const r = await pool.run(tile(2, [8, 8, 8]));
  assert.ok(maxAbsDiff(r.output, convStackReference(tile(2, [8, 8, 8]).input, [8, 8, 8], CONV)) <= 1e-5);
  assert.ok(r.worker > 1);
  await pool.terminate();
});

test('heap guard: a real growth past it is refused inside the worker; the tile fails with MemoryCeiling, a small one runs', async () => {
  // The guard just above the heap a session holds: a 48³ patch of the U-Net must grow the heap past it.
  const model = unet({ base: 8 });
  const probe = makePool({ model, workers: 1 });
  await probe.ready();
  const afterSession = probe.stats().perWorker[0].heapHighWater;
  await probe.terminate();
  const guard = afterSession + 65536;
  const pool = makePool({ model, workers: 1, watchdogMs: 120000, heapGuardBytes: guard });
  await assert.rejects(pool.run(tile(1, [48, 48, 48])), (e) => {
    assert.equal(e.code, 'MemoryCeiling');
    assert.ok(e.requestedBytes > guard && e.heapBytes <= guard, `${e.heapBytes} → ${e.requestedBytes} (guard ${guard})`);
    assert.match(e.message, /asked to grow its heap from .* to .*, past the .* heap guard/);
    return true;
  });
  // A patch that fits in the session's heap runs on a fresh worker under the same guard.
  const small = await pool.run(tile(2, [8, 8, 8]));
  assert.deepEqual(small.dims, [1, 1, 8, 8, 8]);
  assert.ok(small.worker > 1);
  const s = pool.stats();
  assert.deepEqual([s.ceilings, s.retries], [1, 0]);
  assert.ok(s.perWorker.every((w) => w.heapHighWater <= guard), 'no heap passed the guard');
  await pool.terminate();
});
