// Tests of scripts/quantize.js (reduced-precision variants of a network) on bench/models/two-level-unet.onnx (a trained
// 3D U-Net, 11 Conv, divisor 4) and a small xQSM-shaped stand-in (BatchNormalization to fold). Small inputs only.
// Run: node --no-experimental-fetch --test --test-force-exit scripts/quantize.test.js
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  onnx, quantize, main, calibrationInputs, calibrate, rangeOf, activationTensors, loadOrt, floatsOf, foldBatchNorms, toHalf, fromHalf,
  selectConvs, MODES,
} from './quantize.js';
import { xqsmStandin } from './standins.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const UNET = path.join(root, 'bench/models/two-level-unet.onnx');
const DT = onnx.TensorProto.DataType;
const fp32 = new Uint8Array(fs.readFileSync(UNET));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-quantize-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

let ort, calib, probe, reference;
before(async () => {
  ort = await loadOrt(1);
  calib = await calibrationInputs({ count: 2, source: 'random', dims: [32, 32, 24], seed: 11 });
  [probe] = await calibrationInputs({ count: 1, source: 'random', dims: [32, 32, 32], seed: 99 }); // not a calibration field
  reference = await run(fp32);
});

/** The default int8-qdq variant (quantize(fp32, { mode: 'int8-qdq', calib })), made once for the tests that read it; each
 * caller gets its own copy of the bytes. */
let qdq = null;
async function defaultQdq() {
  qdq ??= quantize(fp32, { mode: 'int8-qdq', calib });
  const { bytes, report } = await qdq;
  return { bytes: bytes.slice(), report };
}

async function run(bytes, input = probe) {
  const s = await ort.InferenceSession.create(bytes, { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
  try {
    const out = await s.run({ [s.inputNames[0]]: new ort.Tensor('float32', input.data, input.dims) });
    return out[s.outputNames[0]].data;
  } finally {
    await s.release();
  }
}

function nrmse(x, ref) {
  let e = 0, ee = 0;
  for (let i = 0; i < ref.length; i++) (e += (x[i] - ref[i]) ** 2), (ee += ref[i] ** 2);
  return Math.sqrt(e / ee);
}

const decode = (bytes) => onnx.ModelProto.decode(bytes);
const initMap = (m) => new Map(m.graph.initializer.map((t) => [t.name, t]));
const producers = (m) => new Map(m.graph.node.flatMap((n) => n.output.map((o) => [o, n])));
const scalar = (t) => floatsOf(t)[0];

/** The op types ORT Web actually ran (its profile), in a child process: ORT Web prints the profile to stdout. */
function executedOps(file) {
  const script = `
    import * as ort from 'onnxruntime-web';
    import fs from 'node:fs';
    ort.env.wasm.numThreads = 1; ort.env.logLevel = 'error';
    const s = await ort.InferenceSession.create(new Uint8Array(fs.readFileSync(process.env.MODEL)), { executionProviders: ['wasm'], graphOptimizationLevel: 'all', enableProfiling: true });
    await s.run({ [s.inputNames[0]]: new ort.Tensor('float32', new Float32Array(8 * 8 * 8), [1, 1, 8, 8, 8]) });
    s.endProfiling();
    await new Promise((r) => setTimeout(r, 100));
    process.exit(0);`;
  const r = spawnSync(process.execPath, ['--no-experimental-fetch', '--input-type=module', '-e', script], { cwd: root, env: { ...process.env, MODEL: file }, encoding: 'utf8', maxBuffer: 1 << 26 });
  assert.equal(r.status, 0, r.stderr);
  const ops = {};
  for (const line of r.stdout.split('\n')) {
    if (!line.startsWith('{"cat" : "Node"')) continue;
    const e = JSON.parse(line.replace(/,$/, ''));
    if (e.name.endsWith('_kernel_time')) ops[e.args.op_name] = (ops[e.args.op_name] ?? 0) + 1;
  }
  return ops;
}

test('int8-qdq: int8 per-channel weights, int32 bias, Q/DQ around every quantized Conv; first and last Conv stay fp32', async () => {
  const { bytes, report } = await defaultQdq();
  const orig = decode(fp32), m = decode(bytes);
  const origConvs = orig.graph.node.filter((n) => n.opType === 'Conv');
  const convs = m.graph.node.filter((n) => n.opType === 'Conv');
  assert.equal(convs.length, origConvs.length);
  const inits = initMap(m), origInits = initMap(orig), prod = producers(m);
  let quantized = 0;
  for (const [k, c] of convs.entries()) {
    const o = origConvs[k];
    assert.equal(c.name, o.name);
    if (k === 0 || k === convs.length - 1) {
      assert.equal(c.input[1], o.input[1], `${c.name} keeps its f32 weight`);
      assert.equal(inits.get(c.input[1]).dataType, DT.FLOAT);
      continue;
    }
    quantized++;
    // Weight: DequantizeLinear(int8 initializer, per-channel scale = max|w_c| / 127, zero point 0, axis 0).
    const wdq = prod.get(c.input[1]);
    assert.equal(wdq.opType, 'DequantizeLinear');
    assert.equal(Number(wdq.attribute.find((x) => x.name === 'axis').i), 0);
    const wq = inits.get(wdq.input[0]), ws = floatsOf(inits.get(wdq.input[1]));
    assert.equal(wq.dataType, DT.INT8);
    const w = floatsOf(origInits.get(o.input[1]));
    assert.deepEqual(Array.from(wq.dims, Number), Array.from(origInits.get(o.input[1]).dims, Number));
    const cout = Number(wq.dims[0]), per = w.length / cout;
    const q = new Int8Array(new Uint8Array(wq.rawData).buffer);
    for (let ch = 0; ch < cout; ch++) {
      let amax = 0;
      for (let i = ch * per; i < (ch + 1) * per; i++) amax = Math.max(amax, Math.abs(w[i]));
      assert.ok(Math.abs(ws[ch] - amax / 127) <= 1e-6 * amax, `${c.name} channel ${ch}: scale ${ws[ch]} vs max|w|/127 ${amax / 127}`);
      for (let i = ch * per; i < (ch + 1) * per; i++) assert.ok(Math.abs(q[i] * ws[ch] - w[i]) <= ws[ch] / 2 + 1e-7, `${c.name} weight ${i}`);
    }
    // Bias: int32 at x_scale · w_scale.
    const bdq = prod.get(c.input[2]);
    assert.equal(bdq.opType, 'DequantizeLinear');
    assert.equal(inits.get(bdq.input[0]).dataType, DT.INT32);
    // Data input: DequantizeLinear ← QuantizeLinear (the same scale and zero point), uint8.
    const xdq = prod.get(c.input[0]);
    assert.equal(xdq.opType, 'DequantizeLinear');
    const xq = prod.get(xdq.input[0]);
    assert.equal(xq.opType, 'QuantizeLinear');
    assert.deepEqual(xq.input.slice(1), xdq.input.slice(1));
    assert.equal(inits.get(xdq.input[2]).dataType, DT.UINT8);
    const xs = scalar(inits.get(xdq.input[1]));
    const bs = floatsOf(inits.get(bdq.input[1]));
    for (let ch = 0; ch < cout; ch++) assert.ok(Math.abs(bs[ch] - xs * ws[ch]) <= 1e-6 * bs[ch]);
    // Output: read only by a QuantizeLinear (what ORT fuses into QLinearConv).
    const users = m.graph.node.filter((n) => n.input.includes(c.output[0]));
    assert.deepEqual(users.map((n) => n.opType), ['QuantizeLinear'], c.name);
    // The calibrated range is the range the scale covers: [min, max] of the calibration over 255 steps.
    const a = report.activations[report.activations[xq.input[0]].sharedWith ?? xq.input[0]]; // a MaxPool's output: its input's
    assert.ok(Math.abs(xs - (Math.max(a.max, 0) - Math.min(a.min, 0)) / 255) <= 1e-6 * xs);
  }
  assert.equal(quantized, 9);
  // The skip connections' Concats read f32 tensors (no speed to gain there, only error); MaxPools read 8-bit data.
  for (const n of m.graph.node.filter((x) => x.opType === 'Concat')) for (const i of n.input) assert.notEqual(prod.get(i)?.opType, 'DequantizeLinear', `${n.name} reads ${i}`);
  for (const n of m.graph.node.filter((x) => x.opType === 'MaxPool')) assert.equal(prod.get(n.input[0])?.opType, 'DequantizeLinear', n.name);
  assert.deepEqual(report.keptFp32.map((k) => k.name), [origConvs[0].name, origConvs.at(-1).name]);
  assert.equal(m.graph.node.filter((n) => n.opType === 'ConvTranspose').length, 2, 'ConvTranspose stays fp32');
  assert.ok(bytes.byteLength < fp32.byteLength / 2.5, `int8 weights: ${bytes.byteLength} bytes`);
});

test('int8-qdq: ORT Web fuses it into QLinearConv and runs it; within NRMSE 0.035 of fp32, and a wrong activation scale breaks that', async () => {
  const { bytes } = await defaultQdq();
  const file = path.join(tmp, 'qdq.onnx');
  fs.writeFileSync(file, bytes);
  const ops = executedOps(file);
  assert.equal(ops.QLinearConv, 9, JSON.stringify(ops));
  const out = await run(bytes);
  assert.equal(out.length, reference.length);
  assert.ok(out.every(Number.isFinite));
  const e = nrmse(out, reference);
  assert.ok(e < 0.035, `NRMSE ${e}`);
  // Scale every activation by 4 (coarser steps) or by 1/2 (the calibrated range clipped): the bound no longer holds.
  for (const f of [4, 0.5]) {
    const m = decode(bytes);
    let changed = 0;
    for (const t of m.graph.initializer) {
      if (!/_output_0_scale$/.test(t.name)) continue;
      const v = floatsOf(t);
      v[0] *= f;
      t.rawData = new Uint8Array(v.buffer);
      changed++;
    }
    assert.ok(changed >= 9);
    const bad = nrmse(await run(onnx.ModelProto.encode(m).finish()), reference);
    assert.ok(bad > 2 * 0.035, `activation scales × ${f}: NRMSE ${bad} (correct ${e})`);
  }
});

test('int8-qdq: --exclude none quantizes every Conv; --min-out-channels keeps narrow Convs fp32', async () => {
  const all = await quantize(fp32, { mode: 'int8-qdq', calib, exclude: ['none'] });
  assert.equal(all.report.quantized.length, 11);
  const out = await run(all.bytes);
  assert.ok(nrmse(out, reference) < 0.1, `NRMSE ${nrmse(out, reference)}`);
  const convs = decode(fp32).graph.node.filter((n) => n.opType === 'Conv');
  const cout = (n) => Number(initMap(decode(fp32)).get(n.input[1]).dims[0]);
  const wide = await quantize(fp32, { mode: 'int8-qdq', calib, minOutChannels: 32 });
  const expected = convs.slice(1, -1).filter((n) => cout(n) >= 32).map((n) => n.name);
  assert.ok(expected.length > 0 && expected.length < 9);
  assert.deepEqual(wide.report.quantized, expected);
  assert.ok(nrmse(await run(wide.bytes), reference) < 0.035);
});

test('int8-dynamic: DynamicQuantizeLinear → ConvInteger per Conv, runs, within NRMSE 0.03 of fp32', async () => {
  const { bytes, report } = await quantize(fp32, { mode: 'int8-dynamic' });
  const m = decode(bytes);
  const count = (op) => m.graph.node.filter((n) => n.opType === op).length;
  assert.equal(count('ConvInteger'), 9);
  assert.equal(count('DynamicQuantizeLinear'), 9);
  assert.equal(count('Conv'), 2);
  assert.equal(report.quantized.length, 9);
  const inits = initMap(m);
  for (const n of m.graph.node.filter((x) => x.opType === 'ConvInteger')) assert.equal(inits.get(n.input[1]).dataType, DT.INT8);
  const out = await run(bytes);
  const e = nrmse(out, reference);
  assert.ok(e < 0.03, `NRMSE ${e}`);
});

test('fp16: every float initializer float16 (round to nearest), f32 interface through Casts; ORT Web runs it within NRMSE 0.005', async () => {
  const { bytes } = await quantize(fp32, { mode: 'fp16' });
  const m = decode(bytes), orig = initMap(decode(fp32));
  for (const t of m.graph.initializer) {
    assert.equal(t.dataType, DT.FLOAT16, t.name);
    const w = floatsOf(orig.get(t.name));
    const h = new Uint16Array(new Uint8Array(t.rawData).buffer);
    for (let i = 0; i < w.length; i += 97) {
      const v = fromHalf(h[i]);
      assert.ok(Math.abs(v - w[i]) <= Math.max(Math.abs(w[i]) * 2 ** -11, 2 ** -25), `${t.name}[${i}]: ${v} for ${w[i]}`);
    }
  }
  assert.equal(m.graph.node[0].opType, 'Cast');
  assert.equal(m.graph.node.at(-1).opType, 'Cast');
  assert.equal(m.graph.input[0].type.tensorType.elemType, DT.FLOAT);
  const out = await run(bytes);
  const e = nrmse(out, reference);
  assert.ok(e < 0.005, `NRMSE ${e}`);
});

test('float16 conversion: IEEE values (normal, subnormal, ties to even, overflow)', () => {
  assert.equal(toHalf(1), 0x3c00);
  assert.equal(toHalf(-2), 0xc000);
  assert.equal(toHalf(65504), 0x7bff);
  assert.equal(toHalf(70000), 0x7c00);
  assert.equal(toHalf(2 ** -24), 0x0001);
  assert.equal(toHalf(2 ** -26), 0);
  assert.equal(toHalf(1 + 2 ** -11), 0x3c00); // a tie rounds to the even mantissa
  assert.equal(toHalf(1 + 3 * 2 ** -11), 0x3c02);
  assert.equal(fromHalf(0x3555), 0.333251953125);
  // Normal: relative error ≤ 2^-11; subnormal (below 2^-14): absolute error ≤ 2^-25.
  for (const v of [0.1, -3.75, 1e-5, 1234.5, 3e-7]) assert.ok(Math.abs(fromHalf(toHalf(v)) - v) <= Math.max(Math.abs(v) * 2 ** -11, 2 ** -25), `${v}`);
});

test('BatchNormalization after a Conv is folded into it (same output), and the folded stand-in quantizes and runs', async () => {
  const bytes = xqsmStandin({ base: 4, depth: 1, seed: 5 });
  const m = decode(bytes);
  const bns = m.graph.node.filter((n) => n.opType === 'BatchNormalization').length;
  const folded = foldBatchNorms(m);
  assert.ok(folded > 0 && folded <= bns, `${folded} of ${bns}`);
  assert.equal(m.graph.node.filter((n) => n.opType === 'BatchNormalization').length, bns - folded);
  const [x] = await calibrationInputs({ count: 1, source: 'random', dims: [16, 16, 16], seed: 3 });
  const ref = await run(bytes, x);
  const out = await run(onnx.ModelProto.encode(m).finish(), x);
  let maxd = 0, maxr = 0;
  for (let i = 0; i < ref.length; i++) (maxd = Math.max(maxd, Math.abs(out[i] - ref[i]))), (maxr = Math.max(maxr, Math.abs(ref[i])));
  assert.ok(maxd <= 1e-4 * maxr, `max |Δ| ${maxd} of ${maxr}`);
  const cal = await calibrationInputs({ count: 1, source: 'random', dims: [16, 16, 16], seed: 4 });
  const q = await quantize(bytes, { mode: 'int8-qdq', calib: cal });
  assert.equal(q.report.foldedBatchNorms, folded);
  const qo = await run(q.bytes, x);
  assert.ok(qo.every(Number.isFinite));
  assert.ok(nrmse(qo, ref) < 0.2, `NRMSE ${nrmse(qo, ref)}`);
});

test('calibration: sessions of a few outputs each give the same ranges as one session; percentiles lie inside them', async () => {
  const m = decode(fp32);
  const { tensors } = activationTensors(m, selectConvs(m).quantized);
  assert.ok(tensors.length > 10);
  const one = await calibrate(m, tensors, calib, { samples: true });
  const grouped = await calibrate(m, tensors, calib, { group: 4 });
  for (const t of tensors) {
    assert.equal(grouped.get(t).min, one.get(t).min, t);
    assert.equal(grouped.get(t).max, one.get(t).max, t);
    assert.ok(one.get(t).max > one.get(t).min, t);
    const [lo, hi] = rangeOf(one.get(t), 'percentile', 99.9);
    assert.ok(lo >= one.get(t).min && hi <= one.get(t).max && hi > lo, `${t}: [${lo}, ${hi}] in [${one.get(t).min}, ${one.get(t).max}]`);
  }
  assert.ok(tensors.some((t) => rangeOf(one.get(t), 'percentile', 99.9)[1] < one.get(t).max), 'percentiles clip somewhere');
  await assert.rejects(calibrate(m, tensors, calib, { group: 0 }), /--calib-group must be ≥ 1/);
});

test('calibration on the phantom: fields in ppm inside the mask, zero outside, in the network layout', async () => {
  const [c] = await calibrationInputs({ count: 1, source: 'phantom', dims: [32, 32, 24], seed: 7 });
  assert.deepEqual(c.dims, [1, 1, 32, 32, 24]);
  let nz = 0, amax = 0;
  for (const v of c.data) if (v !== 0) (nz++, (amax = Math.max(amax, Math.abs(v))));
  assert.ok(nz > c.data.length / 10 && nz < c.data.length, `${nz} nonzero of ${c.data.length}`);
  assert.ok(amax > 0.01 && amax < 2, `max |field| ${amax} ppm`);
});

test('bad input: missing file, not ONNX, unknown mode, missing --mode, unknown --exclude, nothing to quantize, no calibration', async () => {
  const out = path.join(tmp, 'out.onnx');
  await assert.rejects(main([path.join(tmp, 'nope.onnx'), out, '--mode', 'fp16']), /input model '.*nope\.onnx' does not exist/);
  const junk = path.join(tmp, 'junk.onnx');
  fs.writeFileSync(junk, 'this is not a protobuf');
  await assert.rejects(main([junk, out, '--mode', 'fp16']), /is not an ONNX model/);
  await assert.rejects(main([UNET, out, '--mode', 'int4']), /unknown mode 'int4' \(modes: int8-qdq, int8-dynamic, fp16\)/);
  await assert.rejects(main([UNET, out]), /--mode is required/);
  await assert.rejects(main([UNET]), /expected IN\.onnx and OUT\.onnx/);
  await assert.rejects(main([UNET, out, '--mode', 'int8-qdq', '--calib', '0']), /--calib must be a positive integer/);
  await assert.rejects(main([UNET, path.join(tmp, 'no/such/dir/out.onnx'), '--mode', 'fp16']), /output folder .* does not exist/);
  await assert.rejects(quantize(fp32, { mode: 'int8-qdq', calib, exclude: ['/no/such/Conv'] }), /--exclude '\/no\/such\/Conv' is not a Conv of the graph/);
  await assert.rejects(quantize(fp32, { mode: 'int8-dynamic', minOutChannels: 1000 }), /no Conv to quantize/);
  await assert.rejects(quantize(fp32, { mode: 'int8-qdq' }), /int8-qdq needs calibration inputs/);
  await assert.rejects(quantize(fp32, { mode: 'int8-qdq', calib, activations: 'int16' }), /--activations must be uint8 or int8/);
  assert.throws(() => selectConvs(decode(fp32), ['bogus']), /not a Conv of the graph/);
  assert.deepEqual(MODES, ['int8-qdq', 'int8-dynamic', 'fp16']);
  assert.ok(!fs.existsSync(out), 'no output written for bad input');
});

test('the command line: writes the variant, exit 2 with the message on stderr for an unknown mode', () => {
  const out = path.join(tmp, 'cli-fp16.onnx');
  const ok = spawnSync(process.execPath, ['--no-experimental-fetch', path.join(root, 'scripts/quantize.js'), UNET, out, '--mode', 'fp16'], { encoding: 'utf8' });
  assert.equal(ok.status, 0, ok.stderr);
  assert.match(ok.stdout, /fp16, \d+ bytes/);
  assert.ok(decode(new Uint8Array(fs.readFileSync(out))).graph.initializer.every((t) => t.dataType === DT.FLOAT16));
  const bad = spawnSync(process.execPath, ['--no-experimental-fetch', path.join(root, 'scripts/quantize.js'), UNET, out, '--mode', 'bf16'], { encoding: 'utf8' });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /unknown mode 'bf16'/);
});
