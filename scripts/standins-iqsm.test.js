// Tests of the iQSM- / iQSM+-shaped stand-ins (scripts/standins.js: iqsmStandin, iqsmParamCount).
// Run: node --test --test-force-exit scripts/standins-iqsm.test.js
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as ort from 'onnxruntime-web';
import onnxProto from 'onnx-proto';
import { iqsmStandin, iqsmParamCount, iqsmDivisor, iqsmInputs, inspectModel, STANDINS } from './standins.js';
import { LOT_KERNEL, borderShell } from '../tests/js/phase-networks.js';

ort.env.wasm.numThreads = 1;
ort.env.logLevel = 'error';

const { onnx } = onnxProto;

/** Feeds for a phase network: a smooth wrapped phase, a ball mask, the border shell, te, b0 (, b0_dir). */
function feeds(names, dims, dir) {
  const [X, Y, Z] = dims;
  const V = X * Y * Z;
  const phase = new Float32Array(V), mask = new Float32Array(V);
  for (let x = 0; x < X; x++)
    for (let y = 0; y < Y; y++)
      for (let z = 0; z < Z; z++) {
        const i = (x * Y + y) * Z + z;
        const p = 0.4 * x + (0.3 * y * y) / Y - 0.2 * z;
        phase[i] = Math.atan2(Math.sin(p), Math.cos(p));
        mask[i] = ((x - X / 2) / X) ** 2 + ((y - Y / 2) / Y) ** 2 + ((z - Z / 2) / Z) ** 2 < 0.16 ? 1 : 0;
      }
  const v = [1, 1, ...dims];
  const f = {
    [names[0]]: new ort.Tensor('float32', phase, v),
    [names[1]]: new ort.Tensor('float32', mask, v),
    [names[2]]: new ort.Tensor('float32', Float32Array.of(0.02), [1]),
    [names[3]]: new ort.Tensor('float32', Float32Array.of(3), [1]),
    [names[names.length - 1]]: new ort.Tensor('float32', borderShell(dims), v),
  };
  if (dir) f[names[4]] = new ort.Tensor('float32', Float32Array.from(dir), [1, 1, 3]);
  return f;
}

async function runAll(bytes, names, dims, dirs = [null]) {
  const session = await ort.InferenceSession.create(bytes, { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
  try {
    assert.deepEqual([...session.inputNames], names);
    assert.deepEqual([...session.outputNames], ['chi']);
    const outs = [];
    for (const dir of dirs) outs.push((await session.run(feeds(names, dims, dir))).chi);
    return outs;
  } finally {
    await session.release();
  }
}

test('iQSM-shaped: the parameter formula matches the built graph (plain and plus, small and published)', () => {
  for (const plus of [false, true])
    for (const cfg of [{ base: 4, depth: 1 }, { base: 8, depth: 2 }, { base: 6, depth: 3 }, {}]) {
      const info = inspectModel(iqsmStandin({ ...cfg, plus }));
      const f = iqsmParamCount({ ...cfg, plus });
      assert.equal(info.trainable, f.trainable, `trainable, plus ${plus} ${JSON.stringify(cfg)}`);
      assert.equal(info.stored, f.stored, `stored, plus ${plus} ${JSON.stringify(cfg)}`);
    }
});

test('iQSM-shaped: published size 4.2–4.5 M parameters (~17 MB f32), divisor 16, registry entries', () => {
  const a = iqsmParamCount();
  const p = iqsmParamCount({ plus: true });
  assert.equal(a.trainable, 4305409);
  assert.equal(p.trainable, 4347780);
  for (const f of [a, p]) {
    assert.ok(f.trainable > 4.2e6 && f.trainable < 4.5e6, `trainable ${f.trainable}`);
    assert.ok(4 * f.stored > 17.0e6 && 4 * f.stored < 17.8e6, `stored ${f.stored}`);
  }
  assert.equal(iqsmDivisor, 16);
  assert.deepEqual(STANDINS.iqsm.inputs, ['phase', 'mask', 'te', 'b0', 'border']);
  assert.deepEqual(STANDINS['iqsm-plus'].inputs, ['phase', 'mask', 'te', 'b0', 'b0_dir', 'border']);
  assert.equal(STANDINS.iqsm.file, 'iqsm-standin.onnx');
  assert.equal(STANDINS['iqsm-plus'].file, 'iqsm-plus-standin.onnx');
  assert.equal(STANDINS.iqsm.divisor, 16);
  assert.equal(STANDINS['iqsm-plus'].divisor, 16);
  assert.deepEqual(STANDINS['iqsm-plus'].params(), p);
  assert.deepEqual(STANDINS.iqsm.params({ base: 4, depth: 1 }), iqsmParamCount({ base: 4, depth: 1 }));
  assert.deepEqual(iqsmInputs({ plus: true, names: { b0_dir: 'z_prjs' } }), ['phase', 'mask', 'te', 'b0', 'z_prjs', 'border']);
  assert.throws(() => iqsmInputs({ names: ['a', 'b'] }), /expected 5/);
});

test('iQSM-shaped: graph structure (LoT layer with the fixed Laplacian, U-Net ops, inputs, output)', () => {
  const depth = 4;
  const m = onnx.ModelProto.decode(iqsmStandin({ base: 4, depth }));
  const g = m.graph;
  const shape = (vi) => vi.type.tensorType.shape.dim.map((d) => (d.dimParam ? d.dimParam : Number(d.dimValue)));
  assert.deepEqual(g.input.map((i) => i.name), ['phase', 'mask', 'te', 'b0', 'border']);
  assert.deepEqual(g.input.map(shape), [[1, 1, 'X', 'Y', 'Z'], [1, 1, 'X', 'Y', 'Z'], [1], [1], [1, 1, 'X', 'Y', 'Z']]);
  assert.deepEqual(g.output.map((o) => o.name), ['chi']);
  assert.deepEqual(shape(g.output[0]), [1, 1, 'X', 'Y', 'Z']);
  // the fixed kernel is the same as the test network's
  const kx = g.initializer.find((t) => t.name.startsWith('lot_kx'));
  const raw = kx.rawData;
  assert.deepEqual(new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength)), LOT_KERNEL);
  const ky = g.initializer.find((t) => t.name.startsWith('lot_ky'));
  assert.deepEqual(Array.from(ky.dims, Number), [15, 1, 3, 3, 3]);
  const { ops } = inspectModel(iqsmStandin({ base: 4, depth }));
  const layers = 4 * depth + 2; // two per encoder level, two mid, two per decoder level
  assert.equal(ops.Conv, 4 + layers + 1); // LoT: sin and cos, each with Kx and with the 15 kernels; 1³ conv
  assert.equal(ops.BatchNormalization, layers + depth);
  assert.equal(ops.ConvTranspose, depth);
  assert.equal(ops.MaxPool, depth);
  assert.equal(ops.Concat, 1 + depth);
  assert.equal(ops.Sin, 1);
  assert.equal(ops.Cos, 1);
  assert.equal(Number(m.opsetImport[0].version), 17);
  // plus: one extra embedded layer; every layer gets a dynamic-weight conv (Tile'd kernel) and a scale/shift
  const plus = inspectModel(iqsmStandin({ base: 4, depth, plus: true })).ops;
  assert.equal(plus.Conv, 4 + 2 * (layers + 1) + 1);
  assert.equal(plus.Tile, layers + 1);
  assert.equal(plus.Split, layers + 1);
  assert.equal(plus.Erf, 1);
});

test('iQSM-shaped: published size runs in ORT at 32³: [1,1,32,32,32], finite; iQSM+ output depends on b0_dir', async () => {
  const dims = [32, 32, 32];
  const [a] = await runAll(iqsmStandin(), STANDINS.iqsm.inputs, dims);
  assert.deepEqual(Array.from(a.dims, Number), [1, 1, ...dims]);
  assert.ok(a.data.every(Number.isFinite));
  assert.ok(a.data.some((v) => v !== 0));
  const [p1, p2] = await runAll(iqsmStandin({ plus: true }), STANDINS['iqsm-plus'].inputs, dims, [[0, 0, 1], [0.6, 0, 0.8]]);
  for (const p of [p1, p2]) {
    assert.deepEqual(Array.from(p.dims, Number), [1, 1, ...dims]);
    assert.ok(p.data.every(Number.isFinite));
  }
  let d = 0, mx = 0;
  for (let i = 0; i < p1.data.length; i++) {
    d = Math.max(d, Math.abs(p1.data[i] - p2.data[i]));
    mx = Math.max(mx, Math.abs(p1.data[i]));
  }
  assert.ok(d > 1e-3 * mx, `b0_dir changed the output by ${d} (max ${mx})`);
});

test('iQSM-shaped: non-cubic dims and renamed inputs (small configuration)', async () => {
  const names = ['wphs', 'masks', 'TEs', 'B0', 'z_prjs', 'border_shell'];
  const bytes = iqsmStandin({ plus: true, base: 4, names });
  const [out] = await runAll(bytes, names, [16, 32, 48], [[0, 0, 1]]);
  assert.deepEqual(Array.from(out.dims, Number), [1, 1, 16, 32, 48]);
  assert.ok(out.data.every(Number.isFinite));
  const byRole = iqsmStandin({ base: 4, depth: 2, names: { phase: 'input.1', border: 'border_shell' } });
  const [o2] = await runAll(byRole, ['input.1', 'mask', 'te', 'b0', 'border_shell'], [8, 16, 12]);
  assert.deepEqual(Array.from(o2.dims, Number), [1, 1, 8, 16, 12]);
});

test('iQSM-shaped: deterministic per seed', () => {
  const a = iqsmStandin({ base: 4, depth: 1, plus: true, seed: 3 });
  assert.deepEqual(a, iqsmStandin({ base: 4, depth: 1, plus: true, seed: 3 }));
  assert.notDeepEqual(a, iqsmStandin({ base: 4, depth: 1, plus: true, seed: 4 }));
});
