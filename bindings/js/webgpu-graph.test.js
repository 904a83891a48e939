// The WebGPU graph rewrite (node --no-experimental-fetch --test --test-force-exit bindings/js/webgpu-graph.test.js):
// every registry network's stand-in and the demo network's file, and randomized one-operator graphs, run original and
// rewritten in ONNX Runtime Web's wasm EP (node) on the same random inputs. No WebGPU here: web/webgpu.test.js runs the
// rewritten graphs on WebGPU in Chromium.
// Equality bound: max |rewritten − original| ≤ 2⁻¹⁶ · max(1, max |original|), i.e. 128 float32 ulps of the output's
// scale: the rewrite only reorders sums (a transposed convolution's ⌈k/s⌉³·Cin products per output, a mean's k³
// values), each reordering moves a result by a few ulps of its terms, and a network carries that through its layers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as ort from 'onnxruntime-web';
import { rewriteForWebGpu } from './webgpu-graph.js';
import { graphOperators, unsupportedOperators, prepareModel } from './execution-provider.js';
import { ALL_STANDINS, smallStandin } from '../../scripts/standins-small.js';
import { onnx, tensor, valueInfo, node, attrInts, attrInt, prng } from '../../tests/js/onnx-build.js';

ort.env.wasm.numThreads = 1;
ort.env.logLevel = 'error';

const BOUND = 2 ** -16;
const GPU = { node: false, webgpu: true, webnn: false };
const DEMO = new Uint8Array(readFileSync(new URL('../../web/models/demo-unet.onnx', import.meta.url)));

// The stand-ins, small (the operators and kernel ranks are the real exports': scripts/standins-small.js).
const NETWORKS = [
  ...Object.entries(ALL_STANDINS).map(([id, s]) => ({ id, bytes: smallStandin(id), divisor: s.divisor })),
  { id: 'demo-unet (web/models/demo-unet.onnx)', bytes: DEMO, divisor: 8 },
];

/** Graph inputs from the model's declared shapes: dim_params take `spatial` in order; [1]-shaped inputs in [0.5, 1.5]. */
function randomFeeds(bytes, spatial, seed) {
  const r = prng(seed);
  const m = onnx.ModelProto.decode(bytes);
  const inits = new Set(m.graph.initializer.map((t) => t.name));
  const feeds = {};
  for (const vi of m.graph.input) {
    if (inits.has(vi.name)) continue;
    let k = 0;
    const dims = vi.type.tensorType.shape.dim.map((d) => (d.dimParam ? spatial[k++] : Number(d.dimValue)));
    const n = dims.reduce((a, b) => a * b, 1);
    const small = n === 1;
    feeds[vi.name] = new ort.Tensor('float32', Float32Array.from({ length: n }, () => (small ? 0.5 + r() : 2 * r() - 1)), dims);
  }
  return feeds;
}

/** Every output of the model on feeds: {name: ort.Tensor}. */
async function run(bytes, feeds) {
  const s = await ort.InferenceSession.create(bytes, { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
  try {
    return await s.run(feeds);
  } finally {
    await s.release();
  }
}

/** Runs both models on the same feeds; asserts equal dims and max |Δ| within BOUND of the output scale. */
async function assertSameOutputs(original, rewritten, feeds, what) {
  const [a, b] = [await run(original, feeds), await run(rewritten, feeds)];
  assert.deepEqual(Object.keys(b), Object.keys(a), `${what}: outputs`);
  for (const name of Object.keys(a)) {
    assert.deepEqual(b[name].dims, a[name].dims, `${what}: dims of ${name}`);
    let diff = 0;
    let scale = 0;
    for (let i = 0; i < a[name].data.length; i++) {
      diff = Math.max(diff, Math.abs(a[name].data[i] - b[name].data[i]));
      scale = Math.max(scale, Math.abs(a[name].data[i]));
    }
    assert.ok(Number.isFinite(scale) && (scale > 0 || rewritten === original), `${what}: output ${name} is all zero or not finite`);
    assert.ok(diff <= BOUND * Math.max(1, scale), `${what}: max |Δ| ${diff} over the bound ${BOUND * Math.max(1, scale)} (max |y| ${scale})`);
  }
}

const volumetric = (ops) => ops.filter((o) => o.rank === 3 && (o.op === 'ConvTranspose' || o.op === 'MaxPool' || o.op === 'AveragePool'));

for (const net of NETWORKS) {
  test(`${net.id}: the rewrite leaves no 3D ConvTranspose / pool, WebGPU accepts it, outputs equal the original's`, async () => {
    const before = graphOperators(net.bytes);
    const rw = rewriteForWebGpu(net.bytes);
    assert.deepEqual(rw.unsupported, []);
    const after = graphOperators(rw.bytes);
    assert.deepEqual(volumetric(after), []);
    assert.equal(after.some((o) => o.unequalPads), false);
    assert.deepEqual(unsupportedOperators('webgpu', after), []);
    const blocked = unsupportedOperators('webgpu', before).length > 0;
    assert.equal(rw.rewritten.length > 0, blocked, 'rewritten exactly when WebGPU refuses the original');
    const ep = prepareModel({ model: net.bytes, preference: ['webgpu', 'wasm'], platform: GPU });
    assert.equal(ep.selection.provider, 'webgpu');
    assert.deepEqual(ep.selection.graphRewrite, blocked ? rw.rewritten : undefined);
    const d = Math.max(net.divisor, 8);
    const spatial = d >= 32 ? [d, d, d] : [2 * d, d, 3 * d];
    await assertSameOutputs(net.bytes, rw.bytes, randomFeeds(net.bytes, spatial, 11), net.id);
  });
}

test('the demo network: its ConvTranspose weights are replaced (the originals dropped), everything else is kept', () => {
  const rw = rewriteForWebGpu(DEMO);
  assert.deepEqual(rw.rewritten.map((r) => r.op), ['MaxPool', 'MaxPool', 'MaxPool', 'ConvTranspose', 'ConvTranspose', 'ConvTranspose']);
  assert.match(rw.rewritten[3].as, /^Conv 1×1×1 \(128→512 channels, pads 0\) \+ depth-to-space/);
  const [a, b] = [onnx.ModelProto.decode(DEMO), onnx.ModelProto.decode(rw.bytes)];
  for (const k of ['irVersion', 'producerName', 'producerVersion']) assert.equal(String(b[k]), String(a[k]));
  assert.deepEqual(b.opsetImport, a.opsetImport);
  assert.equal(b.graph.name, a.graph.name);
  assert.deepEqual(b.graph.input, a.graph.input);
  assert.deepEqual(b.graph.output, a.graph.output);
  const names = new Set(b.graph.initializer.map((t) => t.name));
  for (const t of a.graph.initializer) assert.equal(names.has(t.name), !/^up\d\./.test(t.name), t.name);
  const kept = a.graph.node.filter((n) => n.opType !== 'ConvTranspose' && n.opType !== 'MaxPool');
  const out = new Map(b.graph.node.map((n) => [n.name, n]));
  for (const n of kept) assert.deepEqual(out.get(n.name), n, n.name);
});

test('ops: the demo with only its ConvTranspose rewritten keeps its pools, unlisted, and its outputs; an unknown op is refused', async () => {
  const rw = rewriteForWebGpu(DEMO, { ops: ['ConvTranspose'] });
  assert.deepEqual(rw.rewritten.map((r) => r.op), ['ConvTranspose', 'ConvTranspose', 'ConvTranspose']);
  assert.deepEqual(rw.unsupported, []);
  assert.deepEqual(volumetric(graphOperators(rw.bytes)).map((o) => o.op), ['MaxPool']);
  const types = onnx.ModelProto.decode(rw.bytes).graph.node.map((n) => n.opType);
  assert.equal(types.filter((t) => t === 'MaxPool').length, 3);
  assert.equal(types.includes('ConvTranspose'), false);
  await assertSameOutputs(DEMO, rw.bytes, randomFeeds(DEMO, [16, 8, 24], 5), 'demo, ConvTranspose only');
  assert.equal(rewriteForWebGpu(DEMO, { ops: [] }).bytes, DEMO);
  assert.throws(() => rewriteForWebGpu(DEMO, { ops: ['Resize'] }), /ops are among ConvTranspose, MaxPool, AveragePool, Conv; got Resize/);
  assert.throws(() => rewriteForWebGpu(DEMO, { ops: 'ConvTranspose' }), /got string \(not an array\)/);
  assert.throws(() => rewriteForWebGpu(DEMO, { ops: 5 }), /got number \(not an array\)/);
});

test('a weight read by a Conv and a ConvTranspose (the NeXtQSM VJP stand-in) stays; nothing is rewritten twice', () => {
  const bytes = smallStandin('nextqsm-vjp');
  const rw = rewriteForWebGpu(bytes);
  const [a, b] = [onnx.ModelProto.decode(bytes), onnx.ModelProto.decode(rw.bytes)];
  const names = new Set(b.graph.initializer.map((t) => t.name));
  const readElsewhere = new Set(a.graph.node.filter((n) => n.opType !== 'ConvTranspose').flatMap((n) => n.input));
  let shared = 0;
  for (const t of a.graph.initializer) {
    assert.equal(names.has(t.name), readElsewhere.has(t.name), t.name);
    if (readElsewhere.has(t.name) && a.graph.node.some((n) => n.opType === 'ConvTranspose' && n.input[1] === t.name)) shared++;
  }
  assert.ok(shared > 0, 'the VJP stand-in shares ConvTranspose weights with Convs');
  assert.equal(rewriteForWebGpu(rw.bytes).rewritten.length, 0);
  assert.equal(rewriteForWebGpu(rw.bytes).bytes, rw.bytes);
});

// ----------------------------------------------------------------------------------------- one-operator graphs

/** A one-node model: op on x [1, cin, X, Y, Z] with initializers, opset. */
function oneNode(op, attrs, inits, cin, opset = 17, inputs = null) {
  const graph = onnx.GraphProto.create({
    name: 'one',
    node: [node(op, inputs ?? ['x', ...inits.map((t) => t.name)], ['y'], attrs)],
    initializer: inits,
    input: [valueInfo('x', [1, cin, 'X', 'Y', 'Z'])],
    output: [valueInfo('y', [1, 'C', 'A', 'B', 'D'])],
  });
  return onnx.ModelProto.encode(onnx.ModelProto.create({ irVersion: 8, opsetImport: [{ domain: '', version: opset }], graph })).finish();
}

const rnd = prng(2024);
const pick = (a, b) => a + Math.floor(rnd() * (b - a + 1));
const values = (n) => Float32Array.from({ length: n }, () => 2 * rnd() - 1);
const spatialFor = () => [pick(2, 9), pick(2, 9), pick(2, 9)];

/** Rewrites bytes, checks it removed every 3D ConvTranspose / pool and unequal pad, compares outputs on x of dims. */
async function checkOne(bytes, cin, spatial, what) {
  const rw = rewriteForWebGpu(bytes);
  assert.equal(rw.rewritten.length, 1, `${what}: ${JSON.stringify(rw.unsupported)}`);
  const ops = graphOperators(rw.bytes);
  assert.deepEqual(volumetric(ops), [], what);
  assert.deepEqual(unsupportedOperators('webgpu', ops), [], what);
  const r = prng(spatial.reduce((a, b) => a * 16 + b, cin));
  const n = cin * spatial.reduce((a, b) => a * b, 1);
  const x = new ort.Tensor('float32', Float32Array.from({ length: n }, () => 2 * r() - 1), [1, cin, ...spatial]);
  await assertSameOutputs(bytes, rw.bytes, { x }, what);
}

test('ConvTranspose 3D, 40 random cases: kernel 1–4, strides 1–3, pads, output_padding, channels, bias, odd/even sizes', async () => {
  let cases = 0;
  while (cases < 40) {
    const cin = pick(1, 3);
    const cout = pick(1, 3);
    const k = [pick(1, 4), pick(1, 4), pick(1, 4)];
    const s = [pick(1, 3), pick(1, 3), pick(1, 3)];
    const pads = [0, 1, 2, 3, 4, 5].map((i) => pick(0, k[i % 3] - 1));
    const op = s.map((v) => pick(0, v - 1));
    const spatial = spatialFor();
    // the output must exist: (L − 1)·s + k − pads + output_padding > 0 on every axis
    if (spatial.some((L, a) => (L - 1) * s[a] + k[a] - pads[a] - pads[3 + a] + op[a] <= 0)) continue;
    const inits = [tensor('w', [cin, cout, ...k], values(cin * cout * k[0] * k[1] * k[2]))];
    if (rnd() < 0.5) inits.push(tensor('b', [cout], values(cout)));
    const attrs = [attrInts('kernel_shape', k), attrInts('strides', s), attrInts('pads', pads), attrInts('output_padding', op)];
    await checkOne(oneNode('ConvTranspose', attrs, inits, cin), cin, spatial, `ConvTranspose ${JSON.stringify({ cin, cout, k, s, pads, op, spatial })}`);
    cases++;
  }
});

test('MaxPool / AveragePool 3D, kernel = strides 1–3 per axis, odd and even sizes (the floor of the original)', async () => {
  for (let i = 0; i < 24; i++) {
    const op = i % 2 ? 'MaxPool' : 'AveragePool';
    const k = [pick(1, 3), pick(1, 3), pick(1, 3)];
    const spatial = k.map((ka) => ka * pick(1, 4) + pick(0, ka - 1));
    const cin = pick(1, 3);
    await checkOne(oneNode(op, [attrInts('kernel_shape', k), attrInts('strides', k)], [], cin), cin, spatial, `${op} ${JSON.stringify({ k, spatial, cin })}`);
  }
});

test('Conv 3D with unequal pads (strides 1–3, dilations 1–2): one equal pad and a Slice', async () => {
  let cases = 0;
  while (cases < 24) {
    const k = [pick(1, 3), pick(1, 3), pick(1, 3)];
    const s = [pick(1, 3), pick(1, 3), pick(1, 3)];
    const dil = [pick(1, 2), pick(1, 2), pick(1, 2)];
    const pads = [0, 1, 2, 3, 4, 5].map(() => pick(0, 2));
    const spatial = spatialFor();
    if (pads.every((p) => p === pads[0]) || spatial.some((L, a) => L + pads[a] + pads[3 + a] < (k[a] - 1) * dil[a] + 1)) continue;
    const cin = pick(1, 2);
    const attrs = [attrInts('kernel_shape', k), attrInts('strides', s), attrInts('dilations', dil), attrInts('pads', pads)];
    const bytes = oneNode('Conv', attrs, [tensor('w', [2, cin, ...k], values(2 * cin * k[0] * k[1] * k[2]))], cin);
    assert.match(unsupportedOperators('webgpu', graphOperators(bytes)).join(), /3D Conv with unequal pads \(1 node\)/);
    const rw = rewriteForWebGpu(bytes);
    if (rw.unsupported.length) {
      // no equal pad reaches the same stride grid on every axis: refused by name, the node kept
      assert.match(rw.unsupported[0].reason, /no equal pad lands on the same stride grid/);
      continue;
    }
    await checkOne(bytes, cin, spatial, `Conv ${JSON.stringify({ k, s, dil, pads, spatial })}`);
    cases++;
  }
});

test('opsets 11, 13 and 18: the node forms of each (Unsqueeze / ReduceMax / ReduceMean axes) give the same outputs', async () => {
  for (const opset of [11, 13, 18]) {
    const w = tensor('w', [2, 3, 2, 2, 2], values(48));
    await checkOne(oneNode('ConvTranspose', [attrInts('kernel_shape', [2, 2, 2]), attrInts('strides', [2, 2, 2])], [w], 2, opset), 2, [3, 4, 5], `ConvTranspose opset ${opset}`);
    await checkOne(oneNode('AveragePool', [attrInts('kernel_shape', [2, 2, 2]), attrInts('strides', [2, 2, 2])], [], 2, opset), 2, [4, 5, 6], `AveragePool opset ${opset}`);
    await checkOne(oneNode('MaxPool', [attrInts('kernel_shape', [2, 2, 2]), attrInts('strides', [2, 2, 2])], [], 2, opset), 2, [4, 5, 6], `MaxPool opset ${opset}`);
  }
});

test('weights stored as float_data (not raw_data) are read and rearranged the same way', async () => {
  const wf = onnx.TensorProto.create({ name: 'w', dims: [2, 2, 3, 3, 3], dataType: onnx.TensorProto.DataType.FLOAT, floatData: Array.from(values(108)) });
  const bytes = oneNode('ConvTranspose', [attrInts('kernel_shape', [3, 3, 3]), attrInts('strides', [2, 2, 2]), attrInts('pads', [0, 0, 0, 1, 1, 1])], [wf], 2);
  await checkOne(bytes, 2, [4, 3, 5], 'ConvTranspose with float_data weights');
});

test('what the rewrite does not cover is left in place and listed with its reason', () => {
  const w = (cin, cout, k = 2) => tensor('w', [cin, cout, k, k, k], values(cin * cout * k ** 3));
  const k2 = attrInts('kernel_shape', [2, 2, 2]);
  const s2 = attrInts('strides', [2, 2, 2]);
  const cases = [
    [oneNode('ConvTranspose', [k2, s2, attrInt('group', 2)], [w(2, 1)], 2), /group 2 \(only 1 is rewritten\)/],
    [oneNode('ConvTranspose', [k2, s2, attrInts('dilations', [2, 2, 2])], [w(1, 1)], 1), /dilations 2,2,2/],
    [oneNode('ConvTranspose', [k2, s2, attrInts('output_shape', [8, 8, 8])], [w(1, 1)], 1), /output_shape/],
    [oneNode('ConvTranspose', [k2, s2, onnx.AttributeProto.create({ name: 'auto_pad', type: onnx.AttributeProto.AttributeType.STRING, s: new TextEncoder().encode('SAME_UPPER') })], [w(1, 1)], 1), /auto_pad SAME_UPPER/],
    [oneNode('ConvTranspose', [k2, s2], [], 1, 17, ['x', 'x2']), /weight 'x2' is not an initializer/],
    [oneNode('MaxPool', [attrInts('kernel_shape', [3, 3, 3]), s2], [], 1), /kernel 3,3,3 with strides 2,2,2/],
    [oneNode('AveragePool', [k2, s2, attrInts('pads', [1, 1, 1, 1, 1, 1])], [], 1), /pads 1,1,1,1,1,1/],
    [oneNode('MaxPool', [k2, s2, attrInt('ceil_mode', 1)], [], 1), /ceil_mode 1/],
    [oneNode('Conv', [attrInts('kernel_shape', [3, 3, 3]), attrInt('group', 2)], [tensor('w', [2, 1, 3, 3, 3], values(54))], 2), /group 2: JSEP's conv3d ignores groups/],
    [oneNode('MaxPool', [k2, s2], [], 1, 10), /opset 10 \(the rewrite needs 11 or later\)/],
  ];
  for (const [bytes, reason] of cases) {
    const rw = rewriteForWebGpu(bytes);
    assert.equal(rw.rewritten.length, 0);
    assert.equal(rw.bytes, bytes, 'nothing rewritten: the same bytes');
    assert.equal(rw.unsupported.length, 1);
    assert.match(rw.unsupported[0].reason, reason);
    assert.equal(rw.unsupported[0].node, 'y');
    // and WebGPU stays refused for it
    assert.ok(unsupportedOperators('webgpu', graphOperators(bytes)).length > 0, String(reason));
    assert.equal(prepareModel({ model: bytes, preference: ['webgpu', 'wasm'], platform: GPU }).selection.provider, 'wasm');
  }
  // 2D operators and equal-pad 3D convolutions are not touched
  const conv2d = onnx.ModelProto.encode(onnx.ModelProto.create({ irVersion: 8, opsetImport: [{ domain: '', version: 17 }], graph: onnx.GraphProto.create({ name: 'g', node: [node('ConvTranspose', ['x', 'w'], ['y'], [attrInts('strides', [2, 2])])], initializer: [tensor('w', [1, 1, 2, 2], values(4))], input: [valueInfo('x', [1, 1, 'X', 'Y'])], output: [valueInfo('y', [1, 1, 'A', 'B'])] }) })).finish();
  assert.deepEqual(rewriteForWebGpu(conv2d), { bytes: conv2d, rewritten: [], unsupported: [] });
  const equal = oneNode('Conv', [attrInts('pads', [1, 1, 1, 1, 1, 1])], [tensor('w', [1, 1, 3, 3, 3], values(27))], 1);
  assert.deepEqual(rewriteForWebGpu(equal), { bytes: equal, rewritten: [], unsupported: [] });
});

test('bytes that are not an ONNX model are refused by name', () => {
  assert.throws(() => rewriteForWebGpu(new Uint8Array([0x08, 0x07])), /not an ONNX model: no graph in the file/);
  assert.throws(() => rewriteForWebGpu(new Uint8Array([0x3a, 0x40, 0x01])), /not an ONNX model: truncated/);
});
