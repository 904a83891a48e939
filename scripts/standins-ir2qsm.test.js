// Tests of the IR2QSM-shaped stand-in (scripts/standins-ir2qsm.js).
// Run: node --test --test-force-exit scripts/standins-ir2qsm.test.js   (needs the wasm module: scripts/build.sh wasm)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as ort from 'onnxruntime-web';
import { ir2qsmStandin, ir2qsmParamCount, ir2qsmDivisor, IR2QSM_STANDINS } from './standins-ir2qsm.js';
import { inspectModel } from './standins.js';

ort.env.wasm.numThreads = 1;
ort.env.logLevel = 'error';

test('IR2QSM-shaped: the parameter formula matches the built graph (small and published configurations)', () => {
  for (const cfg of [{ base: 2, depth: 2, iterations: 1 }, { base: 4, depth: 3, iterations: 2 }, { base: 2, depth: 4, iterations: 3 }, {}]) {
    const info = inspectModel(ir2qsmStandin(cfg));
    const f = ir2qsmParamCount(cfg);
    assert.equal(info.trainable, f.trainable, `trainable ${JSON.stringify(cfg)}`);
    assert.equal(info.stored, f.stored, `stored ${JSON.stringify(cfg)}`);
  }
  assert.equal(ir2qsmParamCount().stored, 10059929);
  assert.equal(ir2qsmDivisor(4), 8);
});

test('IR2QSM-shaped: the file is within 1 % of the registry weights file, and the divisor is the registry one', async (t) => {
  const { createTessera } = await import('../bindings/js/index.js');
  const tessera = await createTessera({ workers: 1, threadsPerWorker: 1 });
  t.after(() => tessera.terminate());
  const s = IR2QSM_STANDINS.ir2qsm;
  const spec = await tessera.model(s.model);
  const real = spec.weights[s.weightsIndex];
  assert.ok(real.bytes > 0);
  const bytes = s.build().byteLength;
  const rel = (bytes - real.bytes) / real.bytes;
  assert.ok(Math.abs(rel) < 0.01, `${bytes} B against ${real.file}'s ${real.bytes} B (${(100 * rel).toFixed(3)} %)`);
  assert.equal(s.divisor, spec.divisor);
});

test('IR2QSM-shaped: the recurrent structure (per-iteration U-Nets, SRU gates, four outputs fused)', () => {
  const depth = 4, iterations = 4;
  const { ops } = inspectModel(ir2qsmStandin({ base: 2, depth, iterations }));
  assert.equal(ops.MaxPool, iterations * (depth - 1));
  assert.equal(ops.ConvTranspose, iterations * (depth - 1));
  assert.equal(ops.Sigmoid, iterations);
  // conv blocks per iteration: pre 2, encoder 2 per level (+1 after the first iteration), SRU 2, decoder 2 per level,
  // post 1, plus the 1³ output conv; then the fusing 1³ conv
  const blocks = iterations * (2 + 2 * (depth - 1) + 2 + 2 * (depth - 1) + 1) + (iterations - 1) * (depth - 1);
  assert.equal(ops.Conv, blocks + iterations + 1);
  assert.equal(ops.BatchNormalization, blocks + iterations * (depth - 1));
  // concatenations: decoder skips every iteration, encoder inputs after the first, the four outputs
  assert.equal(ops.Concat, iterations * (depth - 1) + (iterations - 1) * (depth - 1) + 1);
});

test('IR2QSM-shaped: published size runs at 16³ and a non-cubic patch: [1,1,X,Y,Z], finite, follows its input', async () => {
  const bytes = ir2qsmStandin();
  const session = await ort.InferenceSession.create(bytes, { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
  try {
    for (const dims of [[1, 1, 16, 16, 16], [1, 1, 8, 24, 16]]) {
      const n = dims.reduce((a, b) => a * b);
      const x = new Float32Array(n);
      for (let i = 0; i < n; i++) x[i] = 0.1 * Math.sin(0.37 * i + 1);
      const run = async (v) => (await session.run({ input: new ort.Tensor('float32', v, dims) })).output;
      const out = await run(x);
      assert.deepEqual(Array.from(out.dims, Number), dims);
      assert.ok(out.data.every(Number.isFinite));
      // a changed input moves the output (the net reads its input through every path, the residuals included)
      const moved = await run(x.map((v, i) => (i % 7 === 0 ? v + 0.05 : v)));
      let d = 0;
      for (let i = 0; i < n; i++) d = Math.max(d, Math.abs(moved.data[i] - out.data[i]));
      assert.ok(d > 1e-3, `the output moved by ${d}`);
    }
  } finally {
    await session.release();
  }
});

test('IR2QSM-shaped: deterministic per seed', () => {
  const a = ir2qsmStandin({ base: 2, depth: 2, iterations: 2, seed: 3 });
  assert.deepEqual(a, ir2qsmStandin({ base: 2, depth: 2, iterations: 2, seed: 3 }));
  assert.notDeepEqual(a, ir2qsmStandin({ base: 2, depth: 2, iterations: 2, seed: 4 }));
});
