// The driver's session cache (sessions.js) on real one-worker pools of a small conv stack: kept by (weights sha256,
// threads, providers), taken only by a run with the same key and room for the probe's heap, one at most, given back
// on a miss, when another pool starts, and after warmIdleMs.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { rt } from './context.js';
import { startPools, stopPools, keepSession, takeSession, dropSessions, sessionHolds, keptWorkers } from './sessions.js';
import { convStack } from '../../../tests/js/networks.js';

const model = convStack({ layers: 2, channels: 2, seed: 21 });
const SHA = 'a'.repeat(64);
rt.options = { workerHeapGuardBytes: 2 ** 31, warmIdleMs: 60000 }; // the runtime's options (init); no module needed

after(() => dropSessions());

/** A ready one-worker pool as the speed probe starts it, kept under SHA. */
async function kept() {
  const [pool] = await startPools([model], { k: 1, threadsPerWorker: 1 });
  await pool.ready();
  await keepSession(SHA, pool);
  return pool;
}

const run = { weights: [model], k: 2, threadsPerWorker: 1, bytesPerTile: 2 ** 40 };

test('a run with the same key takes the kept pool, grown to its k; the cache is then empty', async () => {
  const pool = await kept();
  assert.equal(sessionHolds(SHA), true);
  assert.equal(sessionHolds('b'.repeat(64)), false);
  assert.equal(keptWorkers(), 1);
  const taken = await takeSession(SHA, run);
  assert.strictEqual(taken, pool);
  assert.equal(taken.stats().workers, 2);
  assert.equal(rt.livePools.has(taken), true);
  assert.equal(sessionHolds(SHA), false);
  assert.equal(keptWorkers(), 0);
  await stopPools([taken]);
  assert.equal(rt.livePools.has(taken), false);
});

test('another threads count, other providers, another sha, two network files, input names or too small a tile: null, the pool given back', async () => {
  const misses = [
    [SHA, { ...run, threadsPerWorker: 2 }],
    [SHA, { ...run, executionProviders: ['webgpu', 'wasm'] }],
    ['b'.repeat(64), run],
    [undefined, run],
    [SHA, { ...run, weights: [model, model] }],
    [SHA, { ...run, inputNames: { field: 'x' } }],
    [SHA, { ...run, bytesPerTile: 1 }],
  ];
  for (const [sha, r] of misses) {
    const pool = await kept();
    assert.equal(await takeSession(sha, r), null, JSON.stringify({ sha, ...r, weights: r.weights.length }));
    assert.equal(keptWorkers(), 0);
    assert.equal(pool.liveWorkers, 0, 'its worker exited');
  }
});

test('one session at most: keeping, or starting any pool, gives the kept one back', async () => {
  const first = await kept();
  const second = await kept();
  assert.equal(first.liveWorkers, 0);
  assert.equal(keptWorkers(), 1);
  const [other] = await startPools([model], { k: 1, threadsPerWorker: 1 });
  assert.equal(second.liveWorkers, 0);
  assert.equal(keptWorkers(), 0);
  await stopPools([other]);
});

test('warmIdleMs without a run gives the session back', async () => {
  rt.options = { ...rt.options, warmIdleMs: 200 };
  try {
    const pool = await kept();
    for (let i = 0; i < 50 && keptWorkers() > 0; i++) await sleep(100);
    assert.equal(keptWorkers(), 0);
    assert.equal(sessionHolds(SHA), false);
    await sleep(50);
    assert.equal(pool.liveWorkers, 0);
  } finally {
    rt.options = { ...rt.options, warmIdleMs: 60000 };
  }
});
