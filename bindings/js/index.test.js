// The public runtime API end to end in node: C++ core (wasm) + driver worker + ONNX Runtime pools,
// on networks built in the test with onnx-proto.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createTessera, TesseraError } from './index.js';
import { loadTesseraModule, pendingCalls, forgetSpeeds } from './debug.js';
import { convStack, unet, twoChannel, wrongShape, memoryHog, prng } from '../../tests/js/networks.js';
import { faultWorkerUrl } from '../../tests/js/fault-ort-worker.js';
import fs from 'node:fs';

let tessera;
before(async () => {
  tessera = await createTessera({ workers: 2, threadsPerWorker: 1, watchdogMs: 20000 });
});
after(async () => {
  await tessera?.terminate();
});

function volume(dims, seed = 1) {
  const n = dims[0] * dims[1] * dims[2];
  const rnd = prng(seed);
  const field = new Float32Array(n);
  for (let i = 0; i < n; i++) field[i] = rnd() * 2 - 1;
  return { geometry: { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] }, field, n };
}

// A mask that stays `margin` voxels away from the volume's faces (a brain never touches the edge).
function interiorMask(dims, margin) {
  const [nx, ny, nz] = dims;
  const m = new Uint8Array(nx * ny * nz);
  for (let z = margin; z < nz - margin; z++)
    for (let y = margin; y < ny - margin; y++)
      for (let x = margin; x < nx - margin; x++) m[x + nx * (y + ny * z)] = 1;
  return m;
}

async function rejectsWith(promise, code, pattern) {
  await assert.rejects(promise, (e) => {
    assert.equal(e.code ?? e.name, code, `${e.code}: ${e.message}`);
    if (pattern) assert.match(e.message, pattern);
    return true;
  });
}

test('tiled equals whole volume (1e-6) for a conv stack when the halo covers its receptive field', async () => {
  const layers = 3; // receptive radius 3
  const weights = convStack({ layers, seed: 4 });
  const { geometry, field } = volume([34, 29, 23], 2);
  // Inside the mask, tiles and the whole volume see identical context; at the volume's faces zero
  // padding between layers differs, so the mask keeps `layers` voxels away from them.
  const mask = interiorMask(geometry.dims, layers);
  const whole = await tessera.invert({ keepInputs: true, field, mask, geometry, spec: { divisor: 1, bytesPerVoxel: 1100 }, weights, whole: true });
  const tiled = await tessera.invert({ keepInputs: true, field, mask, geometry, spec: { divisor: 1, bytesPerVoxel: 1100 }, weights, tile: { core: 10, halo: layers } });
  let maxDiff = 0;
  for (let i = 0; i < field.length; i++) maxDiff = Math.max(maxDiff, Math.abs(whole.chi.data[i] - tiled.chi.data[i]));
  assert.ok(maxDiff <= 1e-6, `max |tiled - whole| = ${maxDiff}`);
  const short = await tessera.invert({ keepInputs: true, field, mask, geometry, spec: { divisor: 1, bytesPerVoxel: 1100 }, weights, tile: { core: 10, halo: 1 } });
  let shortDiff = 0;
  for (let i = 0; i < field.length; i++) shortDiff = Math.max(shortDiff, Math.abs(whole.chi.data[i] - short.chi.data[i]));
  assert.ok(shortDiff > 1e-4, `a halo below the receptive field should show (${shortDiff})`);
  for (let i = 0; i < field.length; i++) if (!mask[i]) assert.equal(tiled.chi.data[i], 0);
});

test('a U-Net with pooling (divisor 8) and a transposed-conv decoder runs tiled and whole', async () => {
  const weights = unet({ base: 4 });
  // Two dims off the divisor's grid: the whole volume is padded to 32×32×24, the tiles (3×3×2) to 24³.
  const { geometry, field } = volume([32, 25, 19], 3);
  const mask = interiorMask(geometry.dims, 2);
  const plan = await tessera.plan({ geometry, mask, spec: { divisor: 8, bytesPerVoxel: 1100 }, tile: { core: 12, halo: 4 } });
  assert.equal(plan.patchEdge, 24);
  assert.equal(plan.tilesTotal, 3 * 3 * 2);
  const tiled = await tessera.invert({ keepInputs: true, field, mask, geometry, spec: { divisor: 8, bytesPerVoxel: 1100 }, weights, tile: { core: 12, halo: 4 } });
  assert.equal(tiled.report.tilesRun, plan.tilesActive);
  assert.equal(tiled.report.tilesRun + tiled.report.tilesSkipped, tiled.report.tilesTotal);
  const whole = await tessera.invert({ keepInputs: true, field, mask, geometry, spec: { divisor: 8, bytesPerVoxel: 1100 }, weights, whole: true });
  assert.equal(whole.report.patchEdge, 32);
  let nonzero = 0;
  for (let i = 0; i < field.length; i++) {
    assert.ok(Number.isFinite(tiled.chi.data[i]) && Number.isFinite(whole.chi.data[i]));
    if (mask[i] && tiled.chi.data[i] !== 0) nonzero++;
  }
  assert.ok(nonzero > 0.5 * mask.reduce((a, b) => a + b, 0));
});

test('the number of networks running at once never exceeds the plan, even with more workers asked', async () => {
  const { geometry, field } = volume([48, 40, 32], 5);
  const mask = interiorMask(geometry.dims, 1);
  // 16³ patches at 183 105 B/voxel = 0.75 GB each: the 1.5 GB budget allows 2 in flight.
  const spec = { divisor: 8, bytesPerVoxel: 183105 };
  const plan = await tessera.plan({ geometry, mask, spec, tile: { core: 8, halo: 4 }, workers: 6 });
  assert.equal(plan.tilesInFlight, 2);
  assert.ok(plan.activationBytes <= 1.5e9);
  const seen = [];
  const { report } = await tessera.invert({
    keepInputs: true,
    field, mask, geometry, spec, weights: convStack({ layers: 1 }), tile: { core: 8, halo: 4 }, workers: 6,
    onProgress: (p) => seen.push(p),
  });
  assert.ok(report.pool[0].maxInFlight <= 2, `pool ran ${report.pool[0].maxInFlight} at once`);
  assert.ok(report.maxInFlight <= 2 && report.maxInFlightObserved <= 2);
  assert.equal(report.concurrency, 2);
  // Progress: monotonic, ends at total, with rate and ETA.
  assert.ok(seen.length >= 2);
  for (let i = 1; i < seen.length; i++) assert.ok(seen[i].done >= seen[i - 1].done);
  assert.equal(seen.at(-1).done, seen.at(-1).total);
  assert.equal(seen.at(-1).total, report.tilesRun);
  assert.ok(seen.at(-1).tilesPerSecond > 0);
  // Progress names the tiles: never more running than the plan allows, all started by the end, ids in the grid.
  for (const p of seen) assert.ok(p.runningTiles.length <= 2 && p.runningTiles.every((t) => t >= 0 && t < report.tilesTotal));
  assert.ok(seen.some((p) => p.runningTiles.length > 0));
  assert.equal(new Set(seen.at(-1).startedTiles).size, report.tilesRun);
  assert.equal(seen.at(-1).runningTiles.length, 0);
  assert.equal(report.tileSeconds.length, report.tilesRun);
  assert.ok(report.memory.moduleHeapBytes > 0);
  assert.ok(report.memory.workerHeapHighWater.every((b) => b > 0));
});

test('a 2-channel network runs inside the MoDL-QSM physics loop, whole and tiled (off-design warning)', async () => {
  const { geometry, field } = volume([24, 20, 16], 6);
  const mask = interiorMask(geometry.dims, 2);
  const weights = twoChannel();
  const whole = await tessera.invert({ keepInputs: true, field, mask, geometry, model: 'modl-qsm', weights, whole: true });
  assert.equal(whole.report.warning, '');
  const tiled = await tessera.invert({ keepInputs: true, field, mask, geometry, model: 'modl-qsm', weights, tile: { core: 12, halo: 4 } });
  assert.match(tiled.report.warning, /off-design/);
  for (let i = 0; i < field.length; i++) {
    assert.ok(Number.isFinite(whole.chi.data[i]));
    if (!mask[i]) assert.equal(whole.chi.data[i], 0);
  }
});

test('a network with the wrong output shape is refused with a clear error', async () => {
  const { geometry, field } = volume([20, 20, 20], 7);
  await rejectsWith(
    tessera.invert({ keepInputs: true, field, geometry, spec: { divisor: 8, bytesPerVoxel: 1100 }, weights: wrongShape(), tile: { core: 8, halo: 4 } }),
    'RunnerFailed',
    /returned \d+ values, expected 4096 \(\[1, 1, 16×16×16\]\)/,
  );
});

test('corrupt model bytes: a clear error, and the runtime stays usable', async () => {
  const { geometry, field } = volume([16, 16, 16], 8);
  const junk = new Uint8Array(1000).map((_, i) => (i * 37) & 255);
  await rejectsWith(
    tessera.invert({ keepInputs: true, field, geometry, spec: { divisor: 1, bytesPerVoxel: 1100 }, weights: junk, tile: { core: 8, halo: 2 } }),
    'ModelLoadFailed',
    /the network could not be loaded/,
  );
  const ok = await tessera.invert({ keepInputs: true, field, geometry, spec: { divisor: 1, bytesPerVoxel: 1100 }, weights: convStack({ layers: 1 }), whole: true });
  assert.equal(ok.chi.data.length, field.length);
});

test('a worker killed mid-tile is recovered and the result is unchanged', async () => {
  const weights = convStack({ layers: 2, seed: 9 });
  const { geometry, field } = volume([30, 30, 20], 9);
  const args = { field, geometry, spec: { divisor: 1, bytesPerVoxel: 1100 }, weights, tile: { core: 10, halo: 2 }, keepInputs: true };
  const clean = await tessera.invert(args);
  // The fault comes from a stand-in pool worker (the shipped one has no test hooks).
  const faulty = await createTessera({ workers: 2, threadsPerWorker: 1, ortWorkerUrl: faultWorkerUrl({ crashOnTile: 3, crashTimes: 1 }) });
  try {
    const hit = await faulty.invert(args);
    assert.deepEqual(hit.chi.data, clean.chi.data);
    assert.equal(hit.report.pool[0].retries, 1);
    assert.equal((await faulty.status()).liveWorkers, 0);
  } finally {
    await faulty.terminate();
  }
});

test('a stalled worker becomes a watchdog error, never a hang', async () => {
  const t = await createTessera({ workers: 2, watchdogMs: 1500, ortWorkerUrl: faultWorkerUrl({ stallOnTile: 2 }) });
  try {
    const { geometry, field } = volume([24, 24, 12], 10);
    const t0 = Date.now();
    await rejectsWith(
      t.invert({ keepInputs: true, field, geometry, spec: { divisor: 1, bytesPerVoxel: 1100 }, weights: convStack({ layers: 1 }), tile: { core: 8, halo: 1 } }),
      'RunnerFailed',
      /stalled: no result after 1\.5 s \(watchdog\)/,
    );
    assert.ok(Date.now() - t0 < 15000);
    assert.equal((await t.status()).liveWorkers, 0);
  } finally {
    await t.terminate();
  }
});

test('ONNX Runtime out of memory for real inside a worker: a TesseraError naming it, no hang, the runtime runs the next request', async () => {
  // memoryHog: the identity, needing 4 GiB of activations for a 64³ patch (past the wasm heap's 4 GB ceiling).
  const weights = memoryHog();
  const big = volume([64, 64, 64], 14);
  await rejectsWith(
    tessera.invert({ keepInputs: true, field: big.field, geometry: big.geometry, spec: { divisor: 1, bytesPerVoxel: 1100 }, weights, whole: true }),
    'RunnerFailed',
    /^whole volume 64×64×64: tile 1 failed after 2 attempt\(s\): out of memory in ONNX Runtime \(.*bad_alloc.*: this patch needs more memory than an ONNX Runtime worker's wasm heap holds \(at most 4 GB\): run smaller patches/,
  );
  const st = await tessera.status();
  assert.deepEqual([st.running, st.liveWorkers], [0, 0], 'no run and no ONNX Runtime worker left behind');
  const small = volume([10, 9, 8], 15);
  const { chi, report } = await tessera.invert({ keepInputs: true, field: small.field, geometry: small.geometry, spec: { divisor: 1, bytesPerVoxel: 1100 }, weights, tile: { core: 5, halo: 0 } });
  assert.deepEqual(chi.data, small.field, 'the same network, in patches that fit, is the identity');
  assert.equal(report.tilesRun, 8);
});

test('cancel mid-run rejects with AbortError and leaves no worker behind', async () => {
  const { geometry, field } = volume([48, 48, 32], 11);
  const controller = new AbortController();
  let progressed = 0;
  const run = tessera.invert({
    keepInputs: true,
    field, geometry, spec: { divisor: 8, bytesPerVoxel: 1100 }, weights: unet({ base: 4 }), tile: { core: 8, halo: 4 }, signal: controller.signal,
    onProgress: (p) => {
      progressed = p.done;
      if (p.done >= 3) controller.abort();
    },
  });
  await assert.rejects(run, (e) => e.name === 'AbortError');
  assert.ok(progressed >= 3);
  const status = await tessera.status();
  assert.equal(status.running, 0);
  assert.equal(status.liveWorkers, 0);
  // The runtime runs again afterwards.
  const again = await tessera.invert({ keepInputs: true, field, geometry, spec: { divisor: 1, bytesPerVoxel: 1100 }, weights: convStack({ layers: 1 }), whole: true });
  assert.equal(again.chi.data.length, field.length);
});

/** Same bits (χ bit-identical, -0 and NaN included). */
function sameBits(a, b) {
  return a.length === b.length && Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}

/** Threads of this process: node's worker threads (the driver, its ONNX Runtime workers, the wasm pthreads) are among them. */
const osThreads = () => fs.readdirSync('/proc/self/task').length;
// The OS threads once they settle: a terminated worker's thread can outlive terminate() by a moment under load (a soak
// run once counted one thread over), while a leaked worker's thread stays. Waits up to 5 s for at most `limit`.
const settledThreads = async (limit) => {
  for (const end = Date.now() + 5000; osThreads() > limit && Date.now() < end;) await new Promise((r) => setTimeout(r, 50));
  return osThreads();
};

test('cancel at 100 seeded points from before the first tile to after the last: AbortError or the whole result, no worker left, then χ bit-identical to a fresh runtime', { timeout: 300000 }, async () => {
  const weights = convStack({ layers: 1, channels: 2, seed: 5 });
  const { geometry, field } = volume([24, 20, 16], 16);
  const args = { field, geometry, spec: { divisor: 1, bytesPerVoxel: 1100 }, weights, tile: { core: 8, halo: 1 }, workers: 1, keepInputs: true }; // 18 tiles
  const ref = await tessera.invert(args);
  const t0 = performance.now();
  await tessera.invert(args);
  const T = performance.now() - t0; // one run, start-up included
  const threads = osThreads();
  const rnd = prng(20250613);
  const seen = { atCall: 0, beforeFirstTile: 0, midRun: 0, afterLastTile: 0, resolved: 0 };
  for (let i = 0; i < 100; i++) {
    // Half the cancels at a seeded time in [0, 1.3 T) (start-up, tiles, the result's way back), half at a seeded tile
    // count (from onProgress, 0..18), a few at the call itself.
    const byTile = i % 2 === 1;
    const atMs = i % 20 === 0 ? 0 : rnd() * 1.3 * T;
    const atTile = Math.floor(rnd() * 19);
    const controller = new AbortController();
    let done = 0;
    let doneAtAbort = null;
    const abort = () => {
      doneAtAbort ??= done;
      controller.abort();
    };
    let timer = null;
    const run = tessera.invert({
      keepInputs: true,
      ...args,
      signal: controller.signal,
      onProgress: (p) => {
        done = p.done;
        if (byTile && p.done >= atTile) abort();
      },
    });
    if (!byTile && atMs === 0) abort();
    else if (!byTile) timer = setTimeout(abort, atMs);
    const out = await run.then((r) => r, (e) => e);
    clearTimeout(timer);
    const where = `cancel ${i} (${byTile ? `at tile ${atTile}` : `at ${atMs.toFixed(0)} ms`})`;
    if (out instanceof Error || out instanceof DOMException) {
      assert.equal(out.name, 'AbortError', `${where}: ${out.message}`);
      assert.ok(doneAtAbort !== null, `${where}: rejected without a cancel`);
      if (!byTile && atMs === 0) seen.atCall++;
      else if (doneAtAbort === 0) seen.beforeFirstTile++;
      else if (doneAtAbort < ref.report.tilesRun) seen.midRun++;
      else seen.afterLastTile++;
    } else {
      assert.ok(sameBits(out.chi.data, ref.chi.data), `${where}: a run that was not cancelled in time gives the whole χ`);
      seen.resolved++;
    }
    const st = await tessera.status();
    assert.deepEqual([st.running, st.liveWorkers], [0, 0], `${where}: a run or a worker left (${JSON.stringify(st)})`);
  }
  // The cancels hit every phase of a run.
  for (const k of ['atCall', 'beforeFirstTile', 'midRun', 'resolved']) assert.ok(seen[k] > 0, `no cancel ${k}: ${JSON.stringify(seen)}`);
  const after = await settledThreads(threads);
  assert.ok(after <= threads, `${after} threads after the cancels, ${threads} before: a worker thread was left`);
  const last = await tessera.invert(args);
  assert.ok(sameBits(last.chi.data, ref.chi.data), 'the run after 100 cancels');
  const fresh = await createTessera({ workers: 2, threadsPerWorker: 1 });
  try {
    assert.ok(sameBits((await fresh.invert(args)).chi.data, ref.chi.data), 'a fresh runtime gives the same χ');
  } finally {
    await fresh.terminate();
  }
  console.log(`# 100 cancels (one run ${T.toFixed(0)} ms): ${JSON.stringify(seen)}`);
});

test('soak: 50 mixed runs in one runtime (3 networks, 4 sizes, cancels): bounded heaps, no leaked worker, thread or listener, every χ bit-identical to a fresh runtime', { timeout: 400000 }, async () => {
  const RECYCLE = 24 * 2 ** 20; // workers whose wasm heap passes 24 MiB after a tile are replaced
  const [demo] = await tessera.loadWeights('demo-unet');
  const kinds = [
    { name: 'conv stack, 20×18×14, core 8', ...volume([20, 18, 14], 31), spec: { divisor: 1, bytesPerVoxel: 1100 }, weights: convStack({ layers: 2, seed: 6 }), tile: { core: 8, halo: 2 } },
    { name: 'U-Net, 32×24×24, core 8', ...volume([32, 24, 24], 32), spec: { divisor: 8, bytesPerVoxel: 1100 }, weights: unet({ base: 4 }), tile: { core: 8, halo: 4 } },
    { name: 'demo-unet (registry), 32×32×24 whole', ...volume([32, 32, 24], 33), model: 'demo-unet', weights: demo, whole: true },
    { name: 'conv stack, 16³ whole', ...volume([16, 16, 16], 34), spec: { divisor: 1, bytesPerVoxel: 1100 }, weights: convStack({ layers: 1, seed: 7 }), whole: true },
  ].map(({ n, ...k }) => ({ ...k, args: { field: k.field, geometry: k.geometry, spec: k.spec, model: k.model, weights: k.weights, tile: k.tile, whole: k.whole, workers: 1, keepInputs: true } }));
  // References: each request first on a fresh runtime that replaces every worker after each tile, so a worker's
  // heap there is that of one tile on a fresh worker.
  for (const k of kinds) {
    const fresh = await createTessera({ workers: 1, threadsPerWorker: 1, recycleHeapBytes: 1 });
    try {
      const r = await fresh.invert(k.args);
      k.ref = r.chi.data;
      k.oneTileHeap = Math.max(...r.report.memory.workerHeapHighWater);
    } finally {
      await fresh.terminate();
    }
  }
  const soak = await createTessera({ workers: 1, threadsPerWorker: 1, recycleHeapBytes: RECYCLE });
  try {
    const rnd = prng(50);
    let listeners = 0; // 'abort' listeners the runtime added to our signals and did not remove
    const counted = (signal) => {
      const add = signal.addEventListener.bind(signal);
      const remove = signal.removeEventListener.bind(signal);
      signal.addEventListener = (type, fn, o) => (type === 'abort' && listeners++, add(type, fn, o));
      signal.removeEventListener = (type, fn, o) => (type === 'abort' && listeners--, remove(type, fn, o));
      return signal;
    };
    const heaps = [];
    let threads = null;
    let recycles = 0;
    const tally = { completed: 0, cancelled: 0, late: 0 };
    for (let i = 0; i < 50; i++) {
      const k = kinds[Math.floor(rnd() * kinds.length)];
      const cancelAt = rnd() < 0.25 ? Math.floor(rnd() * 4) : -1; // a quarter cancelled at a seeded tile count
      const controller = new AbortController();
      const out = await soak.invert({
        keepInputs: true,
        ...k.args, signal: counted(controller.signal),
        onProgress: (p) => cancelAt >= 0 && p.done >= cancelAt && controller.abort(),
      }).then((r) => r, (e) => e);
      const where = `run ${i} (${k.name}${cancelAt >= 0 ? `, cancelled at tile ${cancelAt}` : ''})`;
      if (out instanceof Error || out instanceof DOMException) {
        assert.equal(out.name, 'AbortError', `${where}: ${out.message}`);
        assert.ok(cancelAt >= 0, `${where} failed: ${out.message}`);
        tally.cancelled++;
      } else {
        assert.ok(sameBits(out.chi.data, k.ref), `${where}: χ differs from the fresh runtime's`);
        const oneTile = Math.max(RECYCLE, k.oneTileHeap);
        for (const h of out.report.memory.workerHeapHighWater) assert.ok(h <= oneTile, `${where}: a worker heap of ${h} B, over max(recycling threshold, one tile's heap) = ${oneTile} B`);
        recycles += out.report.pool.reduce((a, p) => a + p.recycles, 0);
        tally[cancelAt >= 0 ? 'late' : 'completed']++;
      }
      const st = await soak.status();
      assert.deepEqual([st.running, st.liveWorkers, pendingCalls(soak), listeners], [0, 0, 0, 0], `${where}: runs, ONNX Runtime workers, pending calls and abort listeners left`);
      heaps.push(st.moduleHeapBytes);
      if (i === 9) threads = osThreads();
    }
    assert.ok(tally.cancelled > 0 && tally.completed > 0, JSON.stringify(tally));
    assert.ok(recycles > 0, 'the recycling threshold replaced workers during the soak');
    // The C++ module's heap (never shrinking, never recycled) is flat after the first runs: nothing leaks there.
    assert.equal(heaps.at(-1), Math.max(...heaps.slice(0, 10)), `module heap after each run: ${heaps.map((b) => (b / 2 ** 20).toFixed(0)).join(' ')} MiB`);
    const after = await settledThreads(threads);
    assert.ok(after <= threads, `${after} threads after 50 runs, ${threads} after 10`);
    console.log(`# soak: ${JSON.stringify(tally)}, ${recycles} worker(s) recycled, module heap ${(heaps.at(-1) / 2 ** 20).toFixed(0)} MiB flat, ${osThreads()} threads`);
  } finally {
    await soak.terminate();
  }
});

test('bad input is refused with clear errors', async () => {
  const { geometry, field } = volume([20, 20, 20], 12);
  const weights = convStack({ layers: 1 });
  await rejectsWith(tessera.invert({ keepInputs: true, field, mask: new Uint8Array(10), geometry, spec: { bytesPerVoxel: 1100 }, weights }), 'InvalidArgument', /same dims/);
  const bad = field.slice();
  bad[5] = NaN;
  await rejectsWith(tessera.invert({ keepInputs: true, field: bad, geometry, spec: { bytesPerVoxel: 1100 }, weights, whole: true }), 'NonFiniteInput', /1 non-finite voxel/);
  await rejectsWith(tessera.invert({ keepInputs: true, field, geometry, model: 'nope', weights }), 'InvalidArgument', /unknown model 'nope'/);
  await rejectsWith(tessera.invert({ keepInputs: true, field, geometry, model: 'iqsm', weights }), 'InvalidArgument', /wrapped phase/);
  await rejectsWith(tessera.invert({ keepInputs: true, field, geometry, model: 'nextqsm', weights }), 'InvalidArgument', /needs 2 network file/);
  // The native default patch in wasm: refused up front with the planner's advice.
  const big = volume([200, 200, 150], 13);
  await rejectsWith(
    tessera.invert({ keepInputs: true, field: big.field, geometry: big.geometry, spec: { divisor: 8, bytesPerVoxel: 1100 }, weights, tile: { core: 128, halo: 8 } }),
    'BudgetExceeded',
    /144³.*largest core that fits is 112/,
  );
  const plan = await tessera.plan({ geometry: big.geometry, spec: { divisor: 8, bytesPerVoxel: 1100 }, tile: { core: 128, halo: 8 } });
  assert.equal(plan.feasible, false);
  assert.match(plan.message, /largest core that fits is 112/);
});

test('registry weights are checked for size and sha256', async () => {
  const models = await tessera.registry();
  assert.ok(models.find((m) => m.id === 'xqsm' && m.weights[0].sha256.length === 64));
  await rejectsWith(tessera.loadWeights('xqsm', { sources: new Uint8Array(100) }), 'WeightsMismatch', /expected 20901826/);
  assert.ok(new TesseraError('x', 'Y') instanceof Error);
});

test('the C++ phantom and TKD reach JavaScript (TKD correlates with the truth)', async () => {
  const geometry = { dims: [64, 76, 60], voxelMm: [2.5, 2.5, 2.5], b0Dir: [0, 0, 1] };
  const p = await tessera.phantom({ geometry, seed: 1 });
  const again = await tessera.phantom({ geometry, seed: 1 });
  assert.deepEqual(p.chi, again.chi);
  const chi = await tessera.tkd({ keepInputs: true, field: p.field, mask: p.mask, geometry });
  assert.deepEqual(chi.dims, geometry.dims);
  let n = 0, sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  for (let i = 0; i < chi.data.length; i++) {
    if (!p.mask[i]) continue;
    const x = chi.data[i], y = p.chi[i];
    n++; sx += x; sy += y; sxx += x * x; syy += y * y; sxy += x * y;
  }
  const r = (n * sxy - sx * sy) / Math.sqrt((n * sxx - sx * sx) * (n * syy - sy * sy));
  assert.ok(n > 10000, `mask has ${n} voxels`);
  assert.ok(r >= 0.85, `TKD r = ${r}`);
});

test('tile "auto": the C++ auto-planner chooses core, workers and threads, explains, and the run follows it', async () => {
  const { geometry, field } = volume([64, 56, 40], 14);
  const mask = interiorMask(geometry.dims, 4);
  // By default (quality faithful) the whole volume, which fits here, is exact and no slower than a faithful tiling.
  const faithful = await tessera.plan({ geometry, mask, spec: { divisor: 8, bytesPerVoxel: 1100 }, tile: 'auto' });
  assert.equal(faithful.wholeVolume, true);
  assert.match(faithful.explanation, /^the whole volume \(64×56×40/);
  // The speed-only planner (quality fast) tiles at the network's halo.
  const plan = await tessera.plan({ geometry, mask, spec: { divisor: 8, bytesPerVoxel: 1100 }, tile: 'auto', quality: 'fast' });
  assert.ok(plan.feasible, plan.message);
  assert.match(plan.explanation, /core \d+, halo 4 .* estimated \d+ s/);
  assert.ok(plan.workers >= 1 && plan.threadsPerWorker >= 1);
  assert.ok(plan.estimatedSeconds > 0);
  const { report } = await tessera.invert({ keepInputs: true, field, mask, geometry, spec: { divisor: 8, bytesPerVoxel: 1100 }, weights: unet({ base: 4 }), tile: 'auto', quality: 'fast' });
  assert.equal(report.plan.tile.core, plan.tile.core);
  assert.equal(report.tilesRun, plan.tilesActive);
  // A fixed halo and worker count are kept.
  const fixed = await tessera.plan({ geometry, mask, spec: { divisor: 8, bytesPerVoxel: 1100 }, tile: { core: 'auto', halo: 8 }, workers: 1, quality: 'fast' });
  assert.equal(fixed.tile.halo, 8);
  assert.equal(fixed.workers, 1);
});

test('one plan per run: plan() is handed back and obeyed (the held plan, whatever the fields of the object handed back); a plan for another mask is refused', async () => {
  const { geometry, field } = volume([40, 36, 28], 11);
  const mask = interiorMask(geometry.dims, 2);
  const spec = { divisor: 4, bytesPerVoxel: 1100 };
  const weights = convStack({ layers: 2 });
  const plan = await tessera.plan({ geometry, mask, spec, tile: { core: 12, halo: 3 }, workers: 2 });
  assert.equal(plan.grid.tiles.length, plan.tilesTotal);
  assert.equal(plan.grid.tiles.filter((t) => !t.skipped).length, plan.tilesActive);
  // Handed back: the run goes through exactly the plan's tiles, and gives the same χ as planning inside invert.
  const handed = await tessera.invert({ keepInputs: true, field, mask, geometry, spec, weights, tile: { core: 12, halo: 3 }, workers: 2, plan });
  const own = await tessera.invert({ keepInputs: true, field, mask, geometry, spec, weights, tile: { core: 12, halo: 3 }, workers: 2 });
  assert.equal(handed.report.tilesRun, plan.tilesActive);
  assert.deepEqual(handed.report.plan.grid, plan.grid);
  assert.deepEqual(handed.chi.data, own.chi.data);
  // A plan with fewer tiles in flight is obeyed.
  const onePlan = await tessera.plan({ geometry, mask, spec, tile: { core: 12, halo: 3 }, workers: 1 });
  assert.equal(onePlan.tilesInFlight, 1);
  const one = await tessera.invert({ keepInputs: true, field, mask, geometry, spec, weights, tile: { core: 12, halo: 3 }, workers: 1, plan: onePlan });
  assert.equal(one.report.maxInFlight, 1);
  assert.deepEqual(one.chi.data, own.chi.data);
  // The held plan runs, not the fields of the object handed back: a copy asking for more tiles in flight runs the plan's.
  const copied = await tessera.invert({ keepInputs: true, field, mask, geometry, spec, weights, plan: { ...onePlan, tilesInFlight: 99 } });
  assert.equal(copied.report.maxInFlight, 1);
  // Made for another mask: refused before anything runs.
  const other = interiorMask(geometry.dims, 12);
  await rejectsWith(tessera.invert({ keepInputs: true, field, mask: other, geometry, spec, weights, plan }), 'InvalidArgument', /made for another mask: .*call plan\(\) with this mask/);
  await rejectsWith(tessera.invert({ keepInputs: true, field, mask, geometry, spec, weights, plan: { feasible: true } }), 'InvalidArgument', /plan\(\) returned/);
  assert.equal((await tessera.status()).running, 0);
});

test('invert() returns χ as a Volume with the input\'s geometry and affine, a network\'s and a method\'s alike; the input volumes are transferred to the runtime unless keepInputs: true', async () => {
  const { makeVolume } = await import('./index.js');
  const dims = [10, 9, 8];
  const { field } = volume(dims, 15);
  const geometry = { dims, voxelMm: [2, 1.5, 2.5], b0Dir: [0, 0, 1] };
  const affine = [0, -1.5, 0, 30, 2, 0, 0, -20, 0, 0, 2.5, 10, 0, 0, 0, 1]; // axes swapped, an origin: not diag(voxelMm)
  const expected = field.slice();
  const ones = () => new Uint8Array(field.length).fill(1);
  // memoryHog is the identity (small patches fit): χ is the field.
  const net = { spec: { divisor: 1, bytesPerVoxel: 1100 }, weights: memoryHog(), tile: { core: 5, halo: 0 } };
  const fieldVol = makeVolume({ ...geometry, affine, data: field.slice() });
  const maskVol = makeVolume({ ...geometry, affine, data: ones() });
  const a = await tessera.invert({ field: fieldVol, mask: maskVol, ...net });
  assert.deepEqual([a.chi.dims, a.chi.voxelMm, a.chi.b0Dir, a.chi.affine, a.chi.echoes], [dims, geometry.voxelMm, geometry.b0Dir, affine, 1]);
  assert.deepEqual(a.chi.data, expected);
  assert.equal(a.quantity, 'chi');
  assert.deepEqual([fieldVol.data.byteLength, maskVol.data.byteLength], [0, 0], 'the Volumes\' buffers went to the runtime (detached here)');
  // Arrays with a geometry: the affine is diag(voxelMm); keepInputs: true copies them, and they stay the caller's.
  const f = field.slice();
  const m = ones();
  const b = await tessera.invert({ field: f, mask: m, geometry, ...net, keepInputs: true });
  assert.deepEqual(b.chi.affine, [2, 0, 0, 0, 0, 1.5, 0, 0, 0, 0, 2.5, 0, 0, 0, 0, 1]);
  assert.deepEqual(b.chi.data, expected);
  assert.deepEqual([f, m], [expected, ones()]);
  // A classical method's run alike.
  const tf = field.slice();
  const tm = ones();
  const c = await tessera.invert({ field: makeVolume({ ...geometry, affine, data: tf }), mask: tm, method: 'tkd' });
  assert.deepEqual([c.chi.dims, c.chi.voxelMm, c.chi.affine, c.chi.data.length], [dims, geometry.voxelMm, affine, field.length]);
  assert.deepEqual([tf.byteLength, tm.byteLength], [0, 0]);
  const kf = field.slice();
  const kept = await tessera.invert({ field: kf, mask: ones(), geometry, method: 'tkd', keepInputs: true });
  assert.deepEqual(kf, expected);
  assert.deepEqual(kept.chi.data, c.chi.data, 'the same χ, copied or transferred');
  // A view of part of a buffer is copied: the rest of that buffer, and the view, stay the caller's.
  const whole = new Float32Array(field.length * 2);
  whole.set(field);
  const part = whole.subarray(0, field.length);
  const viewed = await tessera.invert({ field: part, mask: ones(), geometry, method: 'tkd' });
  assert.deepEqual(part, expected);
  assert.deepEqual(viewed.chi.data, c.chi.data);
  await rejectsWith(tessera.invert({ field: field.slice(), geometry, method: 'tkd', keepInputs: 'yes' }), 'InvalidArgument', /keepInputs must be true or false, got "yes"/);
  // An array a run took is refused by name when given again (posting it would carry nothing).
  for (const run of [{ method: 'tkd' }, net]) {
    await rejectsWith(tessera.invert({ field: tf, mask: ones(), geometry, ...run }), 'InvalidArgument', /^field holds no values: an array a run took .* pass keepInputs: true to that run/);
  }
  await rejectsWith(tessera.invert({ field: fieldVol, mask: ones(), ...net }), 'InvalidArgument', /^field holds no values/);
  await rejectsWith(tessera.plan({ field: field.slice(), mask: tm, geometry, method: 'tkd' }), 'InvalidArgument', /^mask holds no values/);
});

test('Volumes in, geometry from them; the request schema comes from C++', async () => {
  const { makeVolume } = await import('./index.js');
  const { geometry, field } = volume([24, 20, 16], 4);
  const maskData = interiorMask(geometry.dims, 2);
  const spec = { divisor: 1, bytesPerVoxel: 1100 };
  const weights = convStack({ layers: 1 });
  const fieldVol = makeVolume({ dims: geometry.dims, voxelMm: [1, 1, 1], data: field });
  const maskVol = makeVolume({ dims: geometry.dims, voxelMm: [1, 1, 1], data: maskData });
  const byArrays = await tessera.invert({ keepInputs: true, field, mask: maskData, geometry, spec, weights, tile: { core: 8, halo: 2 } });
  const byVolumes = await tessera.invert({ keepInputs: true, field: fieldVol, mask: maskVol, spec, weights, tile: { core: 8, halo: 2 } });
  assert.deepEqual(byVolumes.chi.data, byArrays.chi.data);
  const small = makeVolume({ dims: [24, 20, 15], voxelMm: [1, 1, 1], data: new Uint8Array(24 * 20 * 15) });
  await rejectsWith(tessera.invert({ keepInputs: true, field: fieldVol, mask: small, spec, weights }), 'InvalidArgument', /24×20×15 but field is 24×20×16/);

  const schema = await tessera.schema();
  const b0 = schema.find((o) => o.name === 'b0');
  assert.deepEqual([b0.default, b0.unit, b0.min, b0.max, b0.minExclusive], [3, 'T', 0, 30, true]);
  assert.equal(schema.find((o) => o.name === 'tile').default, 'auto');
  // The schema's ranges are the ones the core enforces.
  await rejectsWith(tessera.plan({ geometry, spec: { divisor: 0 } }), 'InvalidArgument', /spec.divisor must be a whole number in \[1, 1024\]/);
  // No tile given: the auto-planner (the schema's default) chooses.
  const auto = await tessera.plan({ geometry, mask: maskData, spec });
  assert.ok(auto.explanation.length > 0, 'an automatic plan explains its choice');
});

test('native patching (AutoQSM, QSMGAN) runs in steps from the pool: their patching, blend and output transform', async () => {
  const { centralCrop } = await import('../../tests/js/networks.js');
  const { geometry, field } = volume([56, 50, 40], 21);
  const small = field.map((v) => v * 0.05);
  const mask = interiorMask(geometry.dims, 3);
  const plan = await tessera.plan({ geometry, mask, model: 'autoqsm' });
  const seen = [];
  // AutoQSM with the central crop: its linear blend weights sum to 1, so χ = field inside the mask.
  const a = await tessera.invert({ keepInputs: true, field: small, mask, geometry, model: 'autoqsm', weights: centralCrop({ out: 32 }), plan, onProgress: (p) => seen.push(p) });
  assert.equal(a.report.tilesRun, 8, '2×2×2 AutoQSM patches (stride 24)');
  assert.equal(seen.at(-1).done, 8);
  let worst = 0;
  for (let i = 0; i < small.length; i++) worst = Math.max(worst, Math.abs(a.chi.data[i] - (mask[i] ? small[i] : 0)));
  assert.ok(worst < 1e-7, `AutoQSM identity off by ${worst}`);
  // QSMGAN: the network sees -100·field; χ = atanh(clip(output))/10, no overlap.
  const scale = -0.004;
  const q = await tessera.invert({ keepInputs: true, field: small, mask, geometry, model: 'qsmgan', weights: centralCrop({ out: 48, scale }) });
  worst = 0;
  for (let i = 0; i < small.length; i++) {
    const out = Math.fround(Math.fround(-100 * small[i]) * Math.fround(scale));
    const expected = mask[i] ? Math.atanh(Math.min(0.999999, Math.max(-0.999999, out))) / 10 : 0;
    worst = Math.max(worst, Math.abs(q.chi.data[i] - expected));
  }
  assert.ok(worst < 1e-6, `QSMGAN transform off by ${worst}`);
  assert.equal((await tessera.status()).running, 0);
});

test('a run whose worker heap exceeds its plan says so: report.memory.warning with the measured bytes per voxel to declare', async () => {
  const { geometry, field } = volume([32, 32, 32], 21);
  // Declared far too low: 1 B/voxel, nothing per worker. The run itself is fine; its report must not be.
  const spec = { divisor: 8, bytesPerVoxel: 1, fixedBytes: 0 };
  const { report } = await tessera.invert({ keepInputs: true, field, geometry, spec, weights: unet({ base: 4 }), whole: true });
  const m = report.memory;
  const heap = Math.max(...m.workerHeapHighWater);
  assert.equal(m.cost.source, 'declared');
  assert.ok(m.workerHeapVsPlan > 1, `${m.workerHeapVsPlan}`);
  assert.equal(m.workerHeapVsPlan, heap / report.plan.bytesPerTile);
  // (heap − fixed) / patch voxels, rounded up to 10 B.
  assert.equal(m.measuredBytesPerVoxel, Math.ceil(heap / 32 ** 3 / 10) * 10);
  assert.match(m.warning, new RegExp(`an ONNX Runtime worker heap reached .*, ${m.workerHeapVsPlan.toFixed(2)}× the .* planned per tile`));
  assert.match(m.warning, new RegExp(`declare "bytesPerVoxel": ${m.measuredBytesPerVoxel} in the spec \\(--spec bytesPerVoxel ${m.measuredBytesPerVoxel}\\)`));
  // Declared at the figure the warning gave: the same run is within its plan and says nothing.
  const { report: again } = await tessera.invert({ keepInputs: true, field, geometry, spec: { ...spec, bytesPerVoxel: m.measuredBytesPerVoxel }, weights: unet({ base: 4 }), whole: true });
  assert.ok(again.memory.workerHeapVsPlan <= 1, `${again.memory.workerHeapVsPlan}`);
  assert.doesNotMatch(again.memory.warning ?? '', /worker heap/);
});

test('a worker heap passing the guard fails the run clearly (MemoryCeiling, the plan and what to do), never a stall', async () => {
  // A real small guard: just above what a worker holds after its session (see pool.test.js for the stand-in worker).
  const t = await createTessera({ workers: 1, watchdogMs: 120000, workerHeapGuardBytes: 17 * 2 ** 20 });
  try {
    const { geometry, field } = volume([48, 48, 48], 22);
    const t0 = Date.now();
    await rejectsWith(
      t.invert({ keepInputs: true, field, geometry, spec: { divisor: 8, bytesPerVoxel: 1 }, weights: unet({ base: 8 }), whole: true }),
      'MemoryCeiling',
      /^whole volume 48×48×48: tile 1 stopped: ONNX Runtime worker \d+ asked to grow its heap from .* past the 17\.8 MB heap guard below the 4 GiB wasm heap ceiling .*; the plan allowed 0\.1 MB per tile: the network needs more memory than its spec declares: leave bytesPerVoxel out of the spec to have it calibrated/,
    );
    assert.ok(Date.now() - t0 < 60000, `${Date.now() - t0} ms`);
    assert.equal((await t.status()).liveWorkers, 0);
  } finally {
    await t.terminate();
  }
});

test('measureSpeed: a probe of the network on this machine feeds the plan, which says so; kept per weights and threads', async () => {
  const weights = unet({ base: 4, seed: 11 });
  const spec = { divisor: 8, bytesPerVoxel: 1100 };
  const progress = [];
  const speed = await tessera.measureSpeed({ weights, spec, onProgress: (p) => progress.push(p) });
  assert.deepEqual(speed.points.map((p) => p.edge), [32, 64]);
  for (const p of speed.points) {
    assert.equal(p.threads, 1);
    assert.ok(Number.isFinite(p.seconds) && p.seconds > 0, `${p.edge}: ${p.seconds} s`);
  }
  assert.ok(speed.startSeconds > 0, `start ${speed.startSeconds} s`);
  assert.equal(progress.at(-1).done, progress.at(-1).total);
  // Each point is its edge's fastest timed run; the pairs (C++'s leastRounds at the least) were timed again
  // while they added up to less than C++'s leastSeconds, up to its rounds (and up to three more while the larger
  // looked no slower).
  const { small, large } = speed.runs;
  assert.equal(small.length, large.length);
  assert.deepEqual(speed.points.map((p) => p.seconds), [Math.min(...small), Math.min(...large)]);
  assert.ok(speed.runs.untimed > 0);
  const rule = (await loadTesseraModule({ pthreadPoolSize: 1 })).speedProbeEdges(0, 8, 400);
  const sum = (k) => small.slice(0, k).concat(large.slice(0, k)).reduce((x, y) => x + y, 0);
  assert.equal(rule.leastRounds, 2);
  assert.ok(small.length >= rule.leastRounds && small.length <= rule.rounds + 3, `${small.length} pairs`);
  const grew = (k) => Math.min(...large.slice(0, k)) > Math.min(...small.slice(0, k));
  if (small.length > 2 && grew(small.length - 1)) assert.ok(sum(small.length - 1) < rule.leastSeconds, `a pair after ${sum(small.length - 1)} s`);
  if (small.length < rule.rounds) assert.ok(sum(small.length) >= rule.leastSeconds, `stopped at ${sum(small.length)} s`);
  // A fixed number of repeats is kept (another runtime: measurements are kept per weights and threads).
  const fixed = await createTessera({ workers: 1 });
  try {
    const once = await fixed.measureSpeed({ weights, spec, repeats: 1 });
    assert.ok(once.runs.small.length === 1 || !(once.runs.large[0] > once.runs.small[0]), `${once.runs.small.length} runs with repeats 1`);
    // A probe sized to a run times as many pairs at the least: one pair on a busy moment would set the estimate alone.
    const sized = await fixed.measureSpeed({ weights, spec, threads: 2, runVoxels: 64 ** 3 * 40 });
    assert.ok(sized.runs.small.length >= rule.leastRounds && sized.runs.large.length === sized.runs.small.length, JSON.stringify(sized.runs));
  } finally {
    await fixed.terminate();
  }
  // Kept for the runtime's lifetime: the same weights and threads are not measured again.
  assert.deepStrictEqual(await tessera.measureSpeed({ weights, spec }), speed); // the first measurement's timings: none measured again

  const { geometry, field } = volume([48, 40, 32], 5);
  const base = { geometry, spec, quality: 'fast', keepInputs: true };
  const plain = await tessera.plan(base);
  assert.equal(plain.estimateSource, 'default');
  // With the weights, a custom network's first estimate is its graph's work per voxel (graph-cost.js) at the engine's
  // rate; the same plan at the default speed is another figure.
  const byGraph = await tessera.plan({ ...base, weights });
  assert.equal(byGraph.estimateSource, 'graph');
  assert.ok(byGraph.estimatedSeconds > 0 && byGraph.estimatedSeconds !== plain.estimatedSeconds, `graph ${byGraph.estimatedSeconds} s, default ${plain.estimatedSeconds} s`);
  // measureSpeed: true probes on the request's threads per worker (else the plan's): here 1, the measurement above.
  const measured = await tessera.plan({ ...base, weights, measureSpeed: true, threadsPerWorker: 1 });
  assert.equal(measured.estimateSource, 'measured');
  // The kept measurement, not a new one: the same plan (another held plan, another id).
  const { id: keptId, ...kept } = await tessera.plan({ ...base, weights, speed, threadsPerWorker: 1 });
  const { id: measuredId, ...measuredFigures } = measured;
  assert.notEqual(keptId, measuredId);
  assert.deepEqual(kept, measuredFigures);
  // A made-up speed ten times the measured times gives a longer estimate for the same request.
  const slower = { points: speed.points.map((p) => ({ ...p, seconds: p.seconds * 10 })), startSeconds: speed.startSeconds };
  assert.ok((await tessera.plan({ ...base, speed: slower })).estimatedSeconds > measured.estimatedSeconds);
  // invert() asks for it too and runs the plan it made with the measured speed.
  const run = await tessera.invert({ ...base, field, weights, measureSpeed: true });
  assert.equal(run.report.plan.estimateSource, 'measured');
  assert.equal((await tessera.status()).liveWorkers, 0, 'no worker left after the run');

  await rejectsWith(tessera.plan({ ...base, measureSpeed: true }), 'InvalidArgument', /needs the network's weights/);
  await rejectsWith(tessera.plan({ ...base, speed: { points: [{ edge: 32, threads: 1, seconds: 0.1 }] } }), 'InvalidArgument', /at least two sizes/);
  await rejectsWith(tessera.plan({ ...base, speed: { edge: 32 } }), 'InvalidArgument', /speed must be \{points/);
  await rejectsWith(tessera.measureSpeed({ weights, spec, threads: 0 }), 'InvalidArgument', /threads must be a whole number/);
});

test('measureSpeed keeps its worker for the next run of the same weights: the run starts none, the estimate counts no start', async () => {
  const t = await createTessera({ workers: 1, threadsPerWorker: 1, hardwareThreads: 1 });
  try {
    const weights = unet({ base: 4, seed: 12 });
    const other = unet({ base: 4, seed: 13 });
    const spec = { divisor: 8, bytesPerVoxel: 1100 };
    const { geometry, field } = volume([72, 64, 64], 6);
    // The probe's timings play no part here (only the worker it keeps and its start-up figure): one timed pair each.
    const auto = { geometry, spec, quality: 'fast' };
    const base = { geometry, spec, whole: true, keepInputs: true };
    const speed = await t.measureSpeed({ weights, spec, threads: 1, repeats: 1 });
    assert.equal(speed.keptWorkers, 1);
    assert.deepEqual(await t.status().then((s) => [s.warmWorkers, s.liveWorkers]), [1, 1]);
    // The estimate while the worker is kept leaves its start-up out; given back, it counts it again.
    const kept = await t.plan({ ...auto, weights, speed });
    await t.release();
    assert.deepEqual(await t.status().then((s) => [s.warmWorkers, s.liveWorkers]), [0, 0]);
    const cold = await t.plan({ ...auto, weights, speed });
    assert.ok(Math.abs(cold.estimatedSeconds - kept.estimatedSeconds - speed.startSeconds) < 1e-6 * cold.estimatedSeconds + 1e-9,
      `cold ${cold.estimatedSeconds} s = kept ${kept.estimatedSeconds} s + start ${speed.startSeconds} s`);

    // A run of the same weights takes the worker (same threads); its χ is the one a fresh pool gives.
    await t.measureSpeed({ weights, spec, threads: 2, repeats: 1 }).then(() => t.release()); // another key: measured, then given back
    await forgetSpeeds(t); // measure again so that a worker is kept
    await t.measureSpeed({ weights, spec, threads: 1, repeats: 1 });
    const warmRun = await t.invert({ ...base, field, weights, threadsPerWorker: 1 });
    assert.equal(warmRun.report.pool[0].warmStart, true);
    assert.deepEqual(await t.status().then((s) => [s.warmWorkers, s.liveWorkers]), [0, 0]);
    const coldRun = await t.invert({ ...base, field, weights, threadsPerWorker: 1 });
    assert.equal(coldRun.report.pool[0].warmStart, false);
    assert.deepEqual(warmRun.chi.data, coldRun.chi.data);
    assert.ok(warmRun.report.memory.workerHeapVsPlan <= 1, `heap ${warmRun.report.memory.workerHeapVsPlan} of the plan`);

    // A run of other weights gives the kept worker back and starts its own.
    await forgetSpeeds(t);
    await t.measureSpeed({ weights, spec, threads: 1, repeats: 1 });
    const otherRun = await t.invert({ ...base, field, weights: other, threadsPerWorker: 1 });
    assert.equal(otherRun.report.pool[0].warmStart, false);
    assert.deepEqual(await t.status().then((s) => [s.warmWorkers, s.liveWorkers]), [0, 0]);
  } finally {
    await t.terminate();
  }
});
