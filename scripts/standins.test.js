// Tests of the architecture-faithful stand-ins (scripts/standins.js): small configurations only (fast).
// Run: node --no-experimental-fetch --test --test-force-exit scripts/standins.test.js
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as ort from 'onnxruntime-web';
import onnxProto from 'onnx-proto';
import {
  xqsmStandin,
  xqsmParamCount,
  xqsmDivisor,
  qsmnetStandin,
  qsmnetParamCount,
  qsmnetDivisor,
  inspectModel,
  STANDINS,
} from './standins.js';

ort.env.wasm.numThreads = 1;
ort.env.logLevel = 'error';

async function runNet(bytes, dims, seed = 1) {
  const session = await ort.InferenceSession.create(bytes, { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
  try {
    const n = dims.reduce((a, b) => a * b, 1);
    const x = new Float32Array(n);
    for (let i = 0; i < n; i++) x[i] = 0.1 * Math.sin(0.37 * i + seed);
    const r = await session.run({ input: new ort.Tensor('float32', x, dims) });
    return { x, out: r.output };
  } finally {
    await session.release();
  }
}

test('xQSM-shaped: the parameter formula matches the built graph for small configurations', () => {
  for (const cfg of [{ base: 4, depth: 1 }, { base: 8, depth: 2 }, { base: 8, depth: 3 }, { base: 12, depth: 2 }]) {
    const info = inspectModel(xqsmStandin(cfg));
    const f = xqsmParamCount(cfg);
    assert.equal(info.trainable, f.trainable, `trainable, ${JSON.stringify(cfg)}`);
    assert.equal(info.stored, f.stored, `stored, ${JSON.stringify(cfg)}`);
  }
});

test('xQSM-shaped: published size is ~5.22 M parameters (20.9 MB in f32)', () => {
  const f = xqsmParamCount();
  assert.ok(Math.abs(f.trainable - 5.22e6) / 5.22e6 < 0.005, `trainable ${f.trainable}`);
  assert.ok(Math.abs(4 * f.stored - 20901826) / 20901826 < 0.005, `stored ${f.stored}`);
  assert.equal(xqsmDivisor(2), 8);
  assert.equal(STANDINS.xqsm.divisor, 8);
});

test('xQSM-shaped: the operators of the real export, octave structure counts', () => {
  const depth = 2;
  const { ops } = inspectModel(xqsmStandin({ base: 8, depth }));
  // octave convs: input pair (first + one), 2 per encoder level, 2 bottleneck, 2 per decoder level, last
  const mids = 1 + 2 * depth + 2 + 2 * depth; // full octave convs (4 convs, 1 ConvT, 4 BN each)
  assert.equal(ops.Conv, 4 * mids + 2 + depth /* OctUp H→L */ + 2 /* last */ + 1 /* 1×1×1 */);
  assert.equal(ops.ConvTranspose, mids + 3 * depth + 1);
  assert.equal(ops.BatchNormalization, 4 * mids + 2 + 2 * depth + 2);
  assert.equal(ops.MaxPool, 2 * depth);
  assert.equal(ops.Concat, 2 * depth);
  assert.equal(ops.AveragePool, mids + 1);
  assert.equal(ops.Add, 2 * mids + 2 * depth + 1 + 1 /* global residual */);
  assert.ok(ops.Relu > 0);
});

test('xQSM-shaped: output [1,1,X,Y,Z] for cubic and non-cubic inputs, finite, global residual', async () => {
  const bytes = xqsmStandin({ base: 8, depth: 2, seed: 5 });
  for (const dims of [[1, 1, 16, 16, 16], [1, 1, 8, 24, 16]]) {
    const { x, out } = await runNet(bytes, dims);
    assert.deepEqual(Array.from(out.dims, Number), dims);
    assert.ok(out.data.every(Number.isFinite));
    // The residual dominates a tiny input: the output correlates with it.
    let xy = 0, xx = 0, yy = 0;
    for (let i = 0; i < x.length; i++) {
      xy += x[i] * out.data[i];
      xx += x[i] * x[i];
      yy += out.data[i] * out.data[i];
    }
    assert.ok(xy / Math.sqrt(xx * yy) > 0.3, `correlation ${xy / Math.sqrt(xx * yy)}`);
  }
});

test('QSMnet-shaped: the parameter formula matches the built graph for small configurations', () => {
  for (const cfg of [{ base: 2, levels: 2, kernel: 3 }, { base: 4, levels: 4 }, { base: 3, levels: 3, kernel: 5 }]) {
    const info = inspectModel(qsmnetStandin(cfg));
    const f = qsmnetParamCount(cfg);
    assert.equal(info.trainable, f.trainable, `trainable, ${JSON.stringify(cfg)}`);
    assert.equal(info.stored, f.stored, `stored, ${JSON.stringify(cfg)}`);
  }
});

test('QSMnet-shaped: published size is ~99.4 M parameters; 5³ convs, LeakyReLU(0.1), divisor 16', () => {
  const f = qsmnetParamCount();
  assert.ok(Math.abs(f.trainable - 99.4e6) / 99.4e6 < 0.002, `trainable ${f.trainable}`);
  assert.ok(Math.abs(4 * f.stored - 397801854) / 397801854 < 0.002, `stored ${f.stored}`);
  assert.equal(qsmnetDivisor(4), 16);
  const m = onnxProto.onnx.ModelProto.decode(qsmnetStandin({ base: 2, levels: 4 }));
  const convs = m.graph.node.filter((n) => n.opType === 'Conv');
  assert.equal(convs.length, 4 * 4 + 2 + 1);
  const k = (n) => Array.from(n.attribute.find((a) => a.name === 'kernel_shape').ints, Number);
  assert.deepEqual(k(convs[0]), [5, 5, 5]);
  assert.deepEqual(k(convs[convs.length - 1]), [1, 1, 1]);
  const leaky = m.graph.node.filter((n) => n.opType === 'LeakyRelu');
  assert.equal(leaky.length, 4 * 4 + 2);
  assert.ok(Math.abs(leaky[0].attribute.find((a) => a.name === 'alpha').f - 0.1) < 1e-6);
  assert.equal(m.graph.node.filter((n) => n.opType === 'ConvTranspose').length, 4);
  assert.equal(Number(m.opsetImport[0].version), 17);
});

test('QSMnet-shaped: output [1,1,X,Y,Z] for cubic and non-cubic inputs, finite', async () => {
  const bytes = qsmnetStandin({ base: 4, levels: 4, seed: 9 });
  for (const dims of [[1, 1, 16, 16, 16], [1, 1, 32, 16, 48]]) {
    const { out } = await runNet(bytes, dims);
    assert.deepEqual(Array.from(out.dims, Number), dims);
    assert.ok(out.data.every(Number.isFinite));
    assert.ok(out.data.some((v) => v !== 0));
  }
});

test('builders are deterministic per seed', () => {
  const a = xqsmStandin({ base: 4, depth: 1, seed: 3 });
  assert.deepEqual(a, xqsmStandin({ base: 4, depth: 1, seed: 3 }));
  assert.notDeepEqual(a, xqsmStandin({ base: 4, depth: 1, seed: 4 }));
  const q = qsmnetStandin({ base: 2, levels: 2, seed: 3 });
  assert.deepEqual(q, qsmnetStandin({ base: 2, levels: 2, seed: 3 }));
  assert.notDeepEqual(q, qsmnetStandin({ base: 2, levels: 2, seed: 4 }));
});
