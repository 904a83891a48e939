// Tests of the physics-loop stand-ins (scripts/standins-loops.js: LPCNN, MoDL-QSM, NeXtQSM BF and VJP).
// Run: node --test --test-force-exit scripts/standins-loops.test.js   (needs the wasm module: scripts/build.sh wasm)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as ort from 'onnxruntime-web';
import {
  lpcnnStandin,
  lpcnnParamCount,
  modlStandin,
  modlParamCount,
  nextqsmStandin,
  nextqsmParamCount,
  nextqsmDivisor,
  LOOP_STANDINS,
} from './standins-loops.js';
import { inspectModel } from './standins.js';

ort.env.wasm.numThreads = 1;
ort.env.logLevel = 'error';

function smooth(n, seed = 1, amp = 0.1) {
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = amp * Math.sin(0.37 * i + seed) + 0.5 * amp * Math.cos(0.051 * i);
  return x;
}

/** The published-size stand-ins (LOOP_STANDINS' builders with no options), each built once for the file's tests. */
const published = new Map();
function publishedStandin(id) {
  if (!published.has(id)) published.set(id, LOOP_STANDINS[id].build());
  return published.get(id);
}

async function session(bytes) {
  return ort.InferenceSession.create(bytes, { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
}

/** Runs a one-input net on x with dims; returns the output tensor. */
async function run(bytes, x, dims) {
  const s = await session(bytes);
  try {
    return (await s.run({ input: new ort.Tensor('float32', x, dims) })).output;
  } finally {
    await s.release();
  }
}

test('the parameter formulas match the built graphs (small and published configurations)', () => {
  // The published configuration ({}) is LOOP_STANDINS' builder with no options, built once for the file.
  const cases = [
    [lpcnnStandin, lpcnnParamCount, [{ channels: 4, blocks: 1 }, { channels: 6, blocks: 3 }, {}], 'lpcnn'],
    [modlStandin, modlParamCount, [{ channels: 4, blocks: 2 }, {}], 'modl-qsm'],
    [(o) => nextqsmStandin({ ...o, vjp: false }), (o) => nextqsmParamCount({ ...o, vjp: false }), [{ levels: 3, base: 2 }, { levels: 4, base: 4, maxFilters: 8 }, {}], 'nextqsm-bf'],
    [(o) => nextqsmStandin({ ...o, vjp: true }), (o) => nextqsmParamCount({ ...o, vjp: true }), [{ levels: 3, base: 2 }, { levels: 5, base: 2, maxFilters: 8 }, {}], 'nextqsm-vjp'],
  ];
  for (const [build, count, cfgs, id] of cases)
    for (const cfg of cfgs) {
      const info = inspectModel(Object.keys(cfg).length ? build(cfg) : publishedStandin(id));
      const f = count(cfg);
      assert.equal(info.trainable, f.trainable, `trainable ${JSON.stringify(cfg)}`);
      assert.equal(info.stored, f.stored, `stored ${JSON.stringify(cfg)}`);
    }
  // the published sizes of the architectures (the files' byte counts are checked against the registry below)
  assert.equal(lpcnnParamCount().stored, 447360);
  assert.equal(modlParamCount().stored, 448258);
  assert.equal(nextqsmParamCount({ vjp: false }).stored, 28301553);
  assert.equal(nextqsmParamCount({ vjp: true }).stored, 10605809);
});

test('each stand-in file is within 1 % of the registry weights file it stands for', async (t) => {
  const { createTessera } = await import('../bindings/js/index.js');
  const tessera = await createTessera({ workers: 1, threadsPerWorker: 1 });
  t.after(() => tessera.terminate());
  for (const [id, s] of Object.entries(LOOP_STANDINS)) {
    const spec = await tessera.model(s.model);
    const real = spec.weights[s.weightsIndex];
    assert.ok(real.bytes > 0, `${id}: the registry records the size of ${real.file}`);
    const bytes = publishedStandin(id).byteLength;
    const rel = (bytes - real.bytes) / real.bytes;
    assert.ok(Math.abs(rel) < 0.01, `${id}: ${bytes} B against ${real.file}'s ${real.bytes} B (${(100 * rel).toFixed(3)} %)`);
    assert.equal(spec.inputChannels ?? s.channels, s.channels, `${id}: input channels`);
    assert.equal(s.divisor, id === 'nextqsm-vjp' ? 32 : spec.divisor, `${id}: divisor`);
  }
});

test('LPCNN-shaped: published size runs at a small patch, any size (no pooling), output [1,1,X,Y,Z]', async () => {
  const bytes = publishedStandin('lpcnn');
  for (const dims of [[1, 1, 16, 16, 16], [1, 1, 9, 14, 11]]) {
    const out = await run(bytes, smooth(dims.reduce((a, b) => a * b)), dims);
    assert.deepEqual(Array.from(out.dims, Number), dims);
    assert.ok(out.data.every(Number.isFinite));
    assert.ok(out.data.some((v) => v !== 0));
  }
  const { ops } = inspectModel(bytes);
  assert.equal(ops.Conv, 1 + 2 * 8 + 3);
  assert.equal(ops.BatchNormalization, 2 * 8);
  assert.equal(ops.MaxPool ?? 0, 0);
  assert.equal(ops.Add, 8); // the residual connections
});

test('MoDL-QSM-shaped: two channels in and out, both outputs depend on both inputs', async () => {
  const bytes = publishedStandin('modl-qsm');
  const e = 16;
  const dims = [1, 2, e, e, e];
  const n = e ** 3;
  const x = smooth(2 * n);
  const out = await run(bytes, x, dims);
  assert.deepEqual(Array.from(out.dims, Number), dims);
  assert.ok(out.data.every(Number.isFinite));
  // change only the second input plane: both output planes move
  const x2 = x.slice();
  for (let i = n; i < 2 * n; i++) x2[i] += 0.05;
  const out2 = await run(bytes, x2, dims);
  for (const plane of [0, 1]) {
    let d = 0;
    for (let i = plane * n; i < (plane + 1) * n; i++) d = Math.max(d, Math.abs(out.data[i] - out2.data[i]));
    assert.ok(d > 1e-4, `plane ${plane} moved by ${d}`);
  }
  const { ops } = inspectModel(bytes);
  assert.equal(ops.Conv, 1 + 2 * 8 + 3);
  assert.equal(ops.BatchNormalization, 2 * 8);
});

test('NeXtQSM-shaped BF and VJP: published sizes run at 64³, output [1,1,64,64,64]; strides and divisors', async () => {
  assert.equal(nextqsmDivisor(7), 64);
  assert.equal(nextqsmDivisor(6), 32);
  const dims = [1, 1, 64, 64, 64];
  for (const vjp of [false, true]) {
    const bytes = publishedStandin(vjp ? 'nextqsm-vjp' : 'nextqsm-bf');
    const out = await run(bytes, smooth(64 ** 3), dims);
    assert.deepEqual(Array.from(out.dims, Number), dims);
    assert.ok(out.data.every(Number.isFinite));
    assert.ok(out.data.some((v) => v !== 0));
    const { ops } = inspectModel(bytes);
    const levels = vjp ? 6 : 7;
    // forward: one conv per encoder level + the last; one transposed conv per decoder level; no batch norm
    assert.equal(ops.BatchNormalization ?? 0, 0);
    if (!vjp) {
      assert.equal(ops.Conv, levels + 1);
      assert.equal(ops.ConvTranspose, levels - 1);
    } else {
      // backward: each conv's input gradient is a transposed conv with its weight and vice versa
      assert.equal(ops.Conv, levels + 1 + (levels - 1));
      assert.equal(ops.ConvTranspose, levels - 1 + levels + 1);
      assert.equal(ops.Sign, 1);
      assert.equal(ops.Where, 2 * levels - 1); // every ReLU's derivative
      assert.equal(ops.Split, levels - 1);
    }
  }
});

test('NeXtQSM-shaped VJP: the graph is the gradient of Σ|UNet(x)| (directional finite differences)', async () => {
  const cfg = { levels: 3, base: 2, seed: 5 };
  const e = 8;
  const dims = [1, 1, e, e, e];
  const n = e ** 3;
  const x = smooth(n, 3, 1);
  const v = smooth(n, 11, 1);
  const fwd = await session(nextqsmStandin({ ...cfg, vjp: false }));
  const vjp = await session(nextqsmStandin({ ...cfg, vjp: true }));
  try {
    const F = async (a) => {
      const y = (await fwd.run({ input: new ort.Tensor('float32', a, dims) })).output.data;
      let s = 0;
      for (const q of y) s += Math.abs(q);
      return s;
    };
    const g = (await vjp.run({ input: new ort.Tensor('float32', x, dims) })).output.data;
    let gv = 0;
    for (let i = 0; i < n; i++) gv += g[i] * v[i];
    const eps = 1e-3;
    const xp = x.map((q, i) => q + eps * v[i]);
    const xm = x.map((q, i) => q - eps * v[i]);
    const fd = ((await F(xp)) - (await F(xm))) / (2 * eps);
    assert.ok(Math.abs(gv) > 1e-3, `directional derivative ${gv}`);
    assert.ok(Math.abs(fd - gv) < 0.02 * Math.abs(gv), `VJP·v ${gv} against finite differences ${fd}`);
  } finally {
    await fwd.release();
    await vjp.release();
  }
});

test('builders are deterministic per seed; the VJP net shares the BF-shaped forward weights of the same seed', () => {
  const a = lpcnnStandin({ channels: 4, blocks: 1, seed: 3 });
  assert.deepEqual(a, lpcnnStandin({ channels: 4, blocks: 1, seed: 3 }));
  assert.notDeepEqual(a, lpcnnStandin({ channels: 4, blocks: 1, seed: 4 }));
  const m = modlStandin({ channels: 4, blocks: 1, seed: 3 });
  assert.deepEqual(m, modlStandin({ channels: 4, blocks: 1, seed: 3 }));
  assert.notDeepEqual(m, modlStandin({ channels: 4, blocks: 1, seed: 4 }));
  const cfg = { levels: 3, base: 2, seed: 9 };
  assert.equal(inspectModel(nextqsmStandin({ ...cfg, vjp: true })).stored, inspectModel(nextqsmStandin(cfg)).stored);
});
