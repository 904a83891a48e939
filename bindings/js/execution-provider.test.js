// Execution provider selection (node --no-experimental-fetch --test --test-force-exit bindings/js/execution-provider.test.js).
// No GPU here: the selection is tested on synthetic graphs and given platforms; the pool and the runtime are run in
// node, where WebGPU does not exist, with 1 thread per worker and at most 2 workers (2 shared cores).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  selectExecutionProvider,
  graphOperators,
  unsupportedOperators,
  platformProviders,
  checkPreference,
  prepareModel,
} from './execution-provider.js';
import { rewriteForWebGpu } from './webgpu-graph.js';
import { WorkerPool } from './runtime/pool.js';
import { createTessera, TesseraError } from './index.js';
import { convStack, convStackReference, unet, randomArray } from '../../tests/js/networks.js';
import { onnx, tensor, valueInfo, node, attrInts, attrInt } from '../../tests/js/onnx-build.js';
import { xqsmStandin } from '../../scripts/standins.js';
import { lpcnnStandin, nextqsmStandin } from '../../scripts/standins-loops.js';
import { readFileSync } from 'node:fs';

const GPU = { node: false, webgpu: true, webnn: false };
const NN = { node: false, webgpu: false, webnn: true };
const BARE = { node: false, webgpu: false, webnn: false };
const NODE = { node: true, webgpu: false, webnn: false };
const PREF = ['webgpu', 'wasm'];

/** A one-node network: op on a [1, 1, ...spatial] input with a k^rank kernel (Conv/ConvTranspose weights), attrs. */
function oneOp(op, rank, extra = []) {
  const k = Array(rank).fill(3);
  const spatial = ['X', 'Y', 'Z'].slice(0, rank);
  const inits = [];
  const inputs = ['input'];
  const attrs = [...extra];
  if (op === 'Conv' || op === 'ConvTranspose') {
    inits.push(tensor('w', [1, 1, ...k], new Float32Array(3 ** rank).fill(0.1)));
    inputs.push('w');
    attrs.push(attrInts('kernel_shape', k));
  } else if (op === 'MaxPool' || op === 'AveragePool') attrs.push(attrInts('kernel_shape', Array(rank).fill(2)));
  const graph = onnx.GraphProto.create({
    name: 'one',
    node: [node(op, inputs, ['output'], attrs)],
    initializer: inits,
    input: [valueInfo('input', [1, 1, ...spatial])],
    output: [valueInfo('output', [1, 1, ...spatial])],
  });
  return onnx.ModelProto.encode(onnx.ModelProto.create({ irVersion: 8, opsetImport: [{ domain: '', version: 17 }], graph })).finish();
}

/** A 3D conv followed by a Resize of the given mode (a volumetric network that resizes). */
function convResize(mode) {
  const conv = graphOperators(oneOp('Conv', 3));
  return [...conv, { op: 'Resize', rank: null, mode, count: 1 }];
}

test('graphOperators: the 3D U-Net lists 3D Conv, 3D MaxPool and 3D ConvTranspose with their counts', () => {
  const ops = graphOperators(unet());
  const find = (op) => ops.find((o) => o.op === op);
  assert.equal(find('ConvTranspose').rank, 3);
  assert.equal(find('ConvTranspose').count, 3); // three decoder levels
  assert.equal(find('MaxPool').rank, 3);
  assert.equal(find('MaxPool').count, 3);
  assert.equal(find('Conv').rank, 3);
  assert.equal(graphOperators(oneOp('Conv', 2))[0].rank, 2);
  assert.throws(() => graphOperators(new Uint8Array([1, 2, 3])), /truncated|not an ONNX model|wire type/);
});

test('3D U-Net with ConvTranspose: WebGPU is skipped with the reason, wasm runs it', () => {
  const sel = selectExecutionProvider({ preference: PREF, platform: GPU, ops: graphOperators(unet()) });
  assert.equal(sel.provider, 'wasm');
  assert.deepEqual(sel.requested, PREF);
  assert.equal(sel.skipped.length, 1);
  assert.equal(sel.skipped[0].provider, 'webgpu');
  assert.match(sel.skipped[0].reason, /3D ConvTranspose \(3 nodes\): not supported by ONNX Runtime Web 1\.30\.0's WebGPU EP/);
  assert.match(sel.skipped[0].reason, /3D MaxPool \(3 nodes\)/);
});

test('conv-only 3D network: WebGPU when the platform offers it, wasm (with why) when it does not', () => {
  const ops = graphOperators(convStack({ layers: 3, channels: 4 }));
  assert.deepEqual(selectExecutionProvider({ preference: PREF, platform: GPU, ops }), { provider: 'webgpu', requested: PREF, skipped: [] });
  const bare = selectExecutionProvider({ preference: PREF, platform: BARE, ops });
  assert.equal(bare.provider, 'wasm');
  assert.deepEqual(bare.skipped, [{ provider: 'webgpu', reason: 'this browser context exposes no WebGPU (navigator.gpu)' }]);
  const inNode = selectExecutionProvider({ preference: PREF, platform: NODE, ops });
  assert.equal(inNode.provider, 'wasm');
  assert.deepEqual(inNode.skipped, [{ provider: 'webgpu', reason: 'node has no WebGPU (navigator.gpu)' }]);
});

test('WebNN: skipped for 3D convolutions and pools, chosen for a 2D network; preference order is obeyed', () => {
  const vol = selectExecutionProvider({ preference: ['webnn', 'webgpu', 'wasm'], platform: { ...NN, webgpu: true }, ops: graphOperators(convStack()) });
  assert.equal(vol.provider, 'webgpu');
  assert.equal(vol.skipped[0].provider, 'webnn');
  assert.match(vol.skipped[0].reason, /3D Conv .*1D\/2D convolutions only/);
  assert.equal(selectExecutionProvider({ preference: ['webnn', 'wasm'], platform: NN, ops: graphOperators(oneOp('Conv', 2)) }).provider, 'webnn');
  assert.match(unsupportedOperators('webnn', graphOperators(oneOp('MaxPool', 3))).join(), /3D MaxPool .*2D pooling only/);
  // wasm first: wasm, nothing skipped, whatever the platform offers.
  assert.deepEqual(selectExecutionProvider({ preference: ['wasm', 'webgpu'], platform: GPU, ops: [] }), { provider: 'wasm', requested: ['wasm', 'webgpu'], skipped: [] });
  // wasm not listed: still the last resort.
  assert.equal(selectExecutionProvider({ preference: ['webgpu'], platform: NODE, ops: [] }).provider, 'wasm');
});

test('registry graphs: the demo U-Net file and the xQSM stand-in skip WebGPU; the LPCNN stand-in (conv only) gets it', () => {
  const pick = (bytes) => selectExecutionProvider({ preference: PREF, platform: GPU, ops: graphOperators(bytes) });
  const demo = pick(readFileSync(new URL('../../web/models/demo-unet.onnx', import.meta.url)));
  assert.equal(demo.provider, 'wasm');
  assert.match(demo.skipped[0].reason, /3D ConvTranspose/);
  const xqsm = pick(xqsmStandin({ base: 4 }));
  assert.equal(xqsm.provider, 'wasm');
  assert.match(xqsm.skipped[0].reason, /3D AveragePool .*3D ConvTranspose/);
  assert.equal(pick(lpcnnStandin({ channels: 2, blocks: 1 })).provider, 'webgpu');
});

test('WebGPU rules beyond ConvTranspose: 3D pools, ceil_mode pools, cubic resize of a volume; 2D ConvTranspose passes', () => {
  assert.match(unsupportedOperators('webgpu', graphOperators(oneOp('AveragePool', 3))).join(), /3D AveragePool \(1 node\)/);
  assert.deepEqual(unsupportedOperators('webgpu', graphOperators(oneOp('MaxPool', 2))), []);
  const ceil = onnx.AttributeProto.create({ name: 'ceil_mode', type: onnx.AttributeProto.AttributeType.INT, i: 1 });
  assert.match(unsupportedOperators('webgpu', graphOperators(oneOp('MaxPool', 2, [ceil]))).join(), /MaxPool with ceil_mode/);
  assert.deepEqual(unsupportedOperators('webgpu', graphOperators(oneOp('ConvTranspose', 2))), []);
  assert.match(unsupportedOperators('webgpu', graphOperators(oneOp('ConvTranspose', 3))).join(), /3D ConvTranspose/);
  assert.match(unsupportedOperators('webgpu', convResize('cubic')).join(), /cubic Resize of a volume/);
  assert.deepEqual(unsupportedOperators('webgpu', convResize('linear')), []);
  assert.equal(unsupportedOperators('wasm', graphOperators(unet())).length, 0);
});

test('WebGPU rules for 3D Conv: unequal pads (JSEP conv3d) and groups are refused, equal pads pass', () => {
  const pads = (p) => graphOperators(oneOp('Conv', 3, [attrInts('pads', p)]));
  assert.deepEqual(pads([1, 1, 1, 1, 1, 1]), [{ op: 'Conv', rank: 3, count: 1 }]);
  assert.deepEqual(unsupportedOperators('webgpu', pads([1, 1, 1, 1, 1, 1])), []);
  assert.match(unsupportedOperators('webgpu', pads([0, 0, 0, 1, 1, 1])).join(), /3D Conv with unequal pads \(1 node\): .*one pad for all sides/);
  assert.match(unsupportedOperators('webgpu', pads([1, 1, 0, 1, 1, 0])).join(), /unequal pads/);
  assert.deepEqual(unsupportedOperators('webgpu', graphOperators(oneOp('Conv', 2, [attrInts('pads', [0, 0, 1, 1])]))), []);
  assert.match(unsupportedOperators('webgpu', graphOperators(oneOp('Conv', 3, [attrInt('group', 2)]))).join(), /grouped 3D Conv \(1 node\)/);
  // the NeXtQSM stand-ins' strided convolutions ('SAME' on even sizes: pads 0 before, 1 after)
  const next = graphOperators(nextqsmStandin({ levels: 3, base: 2, maxFilters: 4 }));
  assert.match(unsupportedOperators('webgpu', next).join(), /3D Conv with unequal pads \(2 nodes\)/);
  // WebNN refuses every 3D Conv alike: one line, all of them counted (equal-pad and unequal-pad entries together)
  const conv = unsupportedOperators('webnn', next).filter((l) => /^3D Conv /.test(l));
  const total = next.filter((o) => o.op === 'Conv').reduce((a, o) => a + o.count, 0);
  assert.deepEqual(conv.map((l) => /\((\d+) nodes\)/.exec(l)[1]), [String(total)]);
});

test('prepareModel: a U-Net is rewritten for WebGPU where the platform offers it; otherwise the bytes are the same', () => {
  const demo = new Uint8Array(readFileSync(new URL('../../web/models/demo-unet.onnx', import.meta.url)));
  const gpu = prepareModel({ model: demo, preference: PREF, platform: GPU });
  assert.equal(gpu.selection.provider, 'webgpu');
  assert.deepEqual(gpu.selection.skipped, []);
  const rw = rewriteForWebGpu(demo);
  assert.deepEqual(gpu.selection.graphRewrite, rw.rewritten);
  assert.deepEqual(gpu.bytes, rw.bytes);
  assert.deepEqual(unsupportedOperators('webgpu', graphOperators(gpu.bytes)), []);
  for (const [preference, platform] of [[PREF, NODE], [PREF, BARE], [['wasm', 'webgpu'], GPU], [['webnn', 'wasm'], NN]]) {
    const p = prepareModel({ model: demo, preference, platform });
    assert.equal(p.bytes, demo, JSON.stringify({ preference, platform }));
    assert.equal(p.selection.provider, 'wasm');
    assert.equal(p.selection.graphRewrite, undefined);
  }
  // an ArrayBuffer model works the same
  assert.equal(prepareModel({ model: demo.slice().buffer, preference: PREF, platform: GPU }).selection.provider, 'webgpu');
  // a conv-only network needs no rewrite: WebGPU, the same bytes
  const lp = lpcnnStandin({ channels: 2, blocks: 1 });
  assert.equal(prepareModel({ model: lp, preference: PREF, platform: GPU }).bytes, lp);
  // unreadable bytes: no operator rule, the workers' sessions will say what is wrong
  const junk = new Uint8Array([1, 2, 3]);
  assert.deepEqual(prepareModel({ model: junk, preference: PREF, platform: GPU }), { bytes: junk, selection: { provider: 'webgpu', requested: PREF, skipped: [] } });
  assert.throws(() => prepareModel({ model: demo, preference: 'webgpu', platform: GPU }), /non-empty array/);
});

test('prepareModel: on wasm, wasmRewriteOps (the registry\'s measured choice) rewrites those operators alone', () => {
  const demo = new Uint8Array(readFileSync(new URL('../../web/models/demo-unet.onnx', import.meta.url)));
  const ops = ['ConvTranspose'];
  const rw = rewriteForWebGpu(demo, { ops });
  for (const [preference, platform] of [[['wasm'], NODE], [PREF, NODE], [['webnn', 'wasm'], NN]]) {
    const p = prepareModel({ model: demo, preference, platform, wasmRewriteOps: ops });
    assert.equal(p.selection.provider, 'wasm');
    assert.deepEqual(p.selection.graphRewrite, rw.rewritten);
    assert.deepEqual(p.selection.graphRewrite.map((r) => r.op), ['ConvTranspose', 'ConvTranspose', 'ConvTranspose']);
    assert.deepEqual(p.bytes, rw.bytes);
  }
  // WebGPU keeps its own (whole) rewrite; none asked: the bytes as they are
  assert.deepEqual(prepareModel({ model: demo, preference: PREF, platform: GPU, wasmRewriteOps: ops }).bytes, rewriteForWebGpu(demo).bytes);
  assert.equal(prepareModel({ model: demo, preference: ['wasm'], platform: NODE, wasmRewriteOps: [] }).bytes, demo);
  // nothing to rewrite, or unreadable bytes: the bytes as they are, no graphRewrite
  const lp = lpcnnStandin({ channels: 2, blocks: 1 });
  assert.deepEqual(prepareModel({ model: lp, preference: ['wasm'], platform: NODE, wasmRewriteOps: ops }), { bytes: lp, selection: { provider: 'wasm', requested: ['wasm'], skipped: [] } });
  const junk = new Uint8Array([1, 2, 3]);
  assert.equal(prepareModel({ model: junk, preference: ['wasm'], platform: NODE, wasmRewriteOps: ops }).bytes, junk);
  assert.throws(() => prepareModel({ model: demo, preference: ['wasm'], platform: NODE, wasmRewriteOps: ['Resize'] }), /ops are among/);
});

test('prepareModel: a graph the rewrite cannot fully clear keeps its bytes and the reasons', () => {
  // a 3D ConvTranspose (rewritable) before a cubic Resize of the volume (not): WebGPU stays refused
  const graph = onnx.GraphProto.create({
    name: 'blocked',
    node: [
      node('ConvTranspose', ['input', 'w'], ['up'], [attrInts('kernel_shape', [2, 2, 2]), attrInts('strides', [2, 2, 2])]),
      node('Resize', ['up', '', 'scales'], ['output'], [onnx.AttributeProto.create({ name: 'mode', type: onnx.AttributeProto.AttributeType.STRING, s: new TextEncoder().encode('cubic') })]),
    ],
    initializer: [tensor('w', [1, 1, 2, 2, 2], new Float32Array(8).fill(0.5)), tensor('scales', [5], [1, 1, 0.5, 0.5, 0.5])],
    input: [valueInfo('input', [1, 1, 'X', 'Y', 'Z'])],
    output: [valueInfo('output', [1, 1, 'X', 'Y', 'Z'])],
  });
  const bytes = onnx.ModelProto.encode(onnx.ModelProto.create({ irVersion: 8, opsetImport: [{ domain: '', version: 17 }], graph })).finish();
  const p = prepareModel({ model: bytes, preference: PREF, platform: GPU });
  assert.equal(p.bytes, bytes);
  assert.equal(p.selection.provider, 'wasm');
  assert.match(p.selection.skipped[0].reason, /3D ConvTranspose .*cubic Resize of a volume/);
  assert.equal(p.selection.graphRewrite, undefined);
});

test('an unknown graph (ops null) applies no operator rule; a bad preference is refused by name', () => {
  assert.equal(selectExecutionProvider({ preference: PREF, platform: GPU, ops: null }).provider, 'webgpu');
  assert.throws(() => checkPreference(['cuda', 'wasm']), /unknown execution provider "cuda" \(known: 'webgpu', 'webnn', 'wasm'\)/);
  assert.throws(() => checkPreference([]), /non-empty array/);
  assert.throws(() => checkPreference('webgpu'), /non-empty array/);
  assert.throws(() => checkPreference(['wasm', 'wasm']), /twice/);
});

test('platformProviders: navigator.gpu / navigator.ml in a browser realm; never in node', () => {
  assert.deepEqual(platformProviders(), { node: true, webgpu: false, webnn: false });
  assert.deepEqual(platformProviders({ navigator: { gpu: {} } }), { node: false, webgpu: true, webnn: false });
  assert.deepEqual(platformProviders({ navigator: { ml: {} }, window: {} }), { node: false, webgpu: false, webnn: true });
  assert.deepEqual(platformProviders({ navigator: {} }), BARE);
  assert.deepEqual(platformProviders({ process: { versions: { node: '22' } }, navigator: { gpu: {} } }), NODE);
});

// ---------------------------------------------------------------------------------------------- pool and runtime

const pools = new Set();
let tessera = null;
after(async () => {
  await Promise.all([...pools].map((p) => p.terminate()));
  await tessera?.terminate();
});

const CONV = { layers: 2, channels: 4, seed: 21 };

function maxAbsDiff(a, b) {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

test('pool in node with [webgpu, wasm]: selection says node has no WebGPU, the workers run wasm', async () => {
  const pool = new WorkerPool({ model: convStack(CONV), workers: 1, threadsPerWorker: 1, executionProviders: PREF });
  pools.add(pool);
  assert.equal(pool.executionProvider.provider, null); // no worker ready yet
  await pool.ready();
  const ep = pool.executionProvider;
  assert.equal(ep.selected, 'wasm');
  assert.equal(ep.provider, 'wasm');
  assert.deepEqual(ep.skipped, [{ provider: 'webgpu', reason: 'node has no WebGPU (navigator.gpu)' }]);
  assert.equal(ep.fallback, undefined);
  assert.deepEqual(pool.stats().perWorker.map((w) => w.executionProvider), ['wasm']);
});

test('a forced EP whose session fails falls back to wasm, says why, and computes the right output', async () => {
  // The platform is told WebGPU exists: the worker asks node's ONNX Runtime Web for it, which has no such backend.
  const model = convStack(CONV);
  const pool = new WorkerPool({ model, workers: 1, threadsPerWorker: 1, executionProviders: PREF, platform: GPU });
  pools.add(pool);
  await pool.ready();
  const ep = pool.executionProvider;
  assert.equal(ep.selected, 'webgpu');
  assert.equal(ep.provider, 'wasm');
  assert.deepEqual(ep.skipped, []);
  assert.match(ep.fallback, /^the webgpu session could not be created \(.+\); ran on wasm/);
  const dims = [9, 8, 7];
  const input = randomArray(dims[0] * dims[1] * dims[2], 77);
  const r = await pool.run({ id: 0, input, dims: [1, 1, ...dims] });
  assert.ok(maxAbsDiff(r.output, convStackReference(input, dims, CONV)) < 1e-5);
});

test('pool with WebGPU offered and a 3D U-Net: the rewritten graph is what the workers load; its output is the original\'s', async () => {
  // node has no WebGPU: the workers' webgpu session fails and they run the rewritten graph on wasm, which is the check
  const model = unet({ base: 4, seed: 8 });
  const dims = [16, 8, 24];
  const input = randomArray(dims[0] * dims[1] * dims[2], 31);
  const gpu = new WorkerPool({ model, workers: 1, threadsPerWorker: 1, executionProviders: PREF, platform: GPU });
  const plain = new WorkerPool({ model, workers: 1, threadsPerWorker: 1, executionProviders: ['wasm'] });
  pools.add(gpu);
  pools.add(plain);
  await Promise.all([gpu.ready(), plain.ready()]);
  const ep = gpu.executionProvider;
  assert.equal(ep.selected, 'webgpu');
  assert.deepEqual(ep.skipped, []);
  assert.deepEqual(ep.graphRewrite.map((r) => r.op), ['MaxPool', 'MaxPool', 'MaxPool', 'ConvTranspose', 'ConvTranspose', 'ConvTranspose']);
  assert.equal(ep.provider, 'wasm');
  assert.match(ep.fallback, /^the webgpu session could not be created/);
  assert.equal(plain.executionProvider.graphRewrite, undefined);
  const [a, b] = await Promise.all([gpu.run({ id: 0, input, dims: [1, 1, ...dims] }), plain.run({ id: 0, input, dims: [1, 1, ...dims] })]);
  const scale = b.output.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
  assert.ok(scale > 0);
  assert.ok(maxAbsDiff(a.output, b.output) <= 2 ** -16 * Math.max(1, scale)); // webgpu-graph.test.js's bound
});

test('the registry marks wasmConvTransposeRewrite only on networks whose graph has a 3D ConvTranspose the rewrite takes', async () => {
  const t = await createTessera({ workers: 1 });
  let marked;
  try {
    marked = (await t.registry()).filter((m) => m.wasmConvTransposeRewrite).map((m) => m.id);
  } finally {
    await t.terminate();
  }
  assert.ok(marked.length > 0);
  const graphs = { 'demo-unet': () => new Uint8Array(readFileSync(new URL('../../web/models/demo-unet.onnx', import.meta.url))), xqsm: () => xqsmStandin() };
  for (const id of marked) {
    assert.ok(graphs[id], `${id}: no graph here to check its mark against`);
    const rw = rewriteForWebGpu(graphs[id](), { ops: ['ConvTranspose'] });
    assert.ok(rw.rewritten.length > 0, `${id}: no ConvTranspose rewritten`);
    assert.deepEqual(rw.unsupported, [], id);
  }
});

test('runtime: a registry network marked wasmConvTransposeRewrite runs its ConvTranspose rewritten; its weights as a custom spec run as exported; χ agrees within the rewrite\'s bound', async () => {
  const t = await createTessera({ workers: 1, threadsPerWorker: 1 });
  try {
    const demo = (await t.registry()).find((m) => m.id === 'demo-unet');
    assert.equal(demo.wasmConvTransposeRewrite, true);
    const weights = new Uint8Array(readFileSync(new URL('../../web/models/demo-unet.onnx', import.meta.url)));
    const geometry = { dims: [32, 24, 24], voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
    const { field, mask } = await t.phantom({ geometry, seed: 4 });
    const request = { field, mask, geometry, weights, whole: true, keepInputs: true };
    const registry = await t.invert({ ...request, model: 'demo-unet' });
    const custom = await t.invert({ ...request, spec: { divisor: demo.divisor, bytesPerVoxel: demo.bytesPerVoxel, fixedBytes: demo.fixedBytes } });
    assert.deepEqual(registry.report.executionProvider[0].graphRewrite.map((r) => r.op), ['ConvTranspose', 'ConvTranspose', 'ConvTranspose']);
    assert.equal(custom.report.executionProvider[0].graphRewrite, undefined);
    const scale = custom.chi.data.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    assert.ok(scale > 0);
    const d = maxAbsDiff(registry.chi.data, custom.chi.data); // its kernel-2 stride-2 ConvTranspose: the same sums, bit for bit
    assert.ok(d <= 2 ** -16 * Math.max(1, scale), `max |Δ| ${d}`); // webgpu-graph.test.js's bound
  } finally {
    await t.terminate();
  }
});

test('runtime in node with executionProviders [webgpu, wasm]: the run completes on wasm; report and progress say why', async () => {
  tessera = await createTessera({ workers: 1, threadsPerWorker: 1, executionProviders: PREF });
  const dims = [12, 12, 12];
  const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  const field = randomArray(dims[0] * dims[1] * dims[2], 5);
  const weights = convStack(CONV);
  const progress = [];
  const { chi, report } = await tessera.invert({ keepInputs: true, field, geometry, spec: { divisor: 1 }, weights, tile: { core: 6, halo: CONV.layers }, onProgress: (p) => progress.push(p) });
  assert.equal(chi.data.length, field.length);
  assert.equal(report.executionProvider.length, 1);
  const ep = report.executionProvider[0];
  assert.equal(ep.provider, 'wasm');
  assert.deepEqual(ep.requested, PREF);
  assert.deepEqual(ep.skipped, [{ provider: 'webgpu', reason: 'node has no WebGPU (navigator.gpu)' }]);
  assert.ok(progress.length > 0);
  assert.ok(progress.every((p) => p.executionProvider?.[0] === 'wasm'));
  // Per request: wasm only, nothing skipped.
  const wasmOnly = await tessera.invert({ keepInputs: true, field, geometry, spec: { divisor: 1 }, weights, whole: true, executionProviders: ['wasm'] });
  assert.deepEqual(wasmOnly.report.executionProvider[0].skipped, []);
  // A bad preference is refused by name, before anything runs.
  await assert.rejects(
    tessera.invert({ keepInputs: true, field, geometry, spec: { divisor: 1 }, weights, whole: true, executionProviders: ['gpu'] }),
    (e) => e instanceof TesseraError && e.code === 'InvalidArgument' && /unknown execution provider "gpu"/.test(e.message),
  );
  await assert.rejects(createTessera({ executionProviders: 'webgpu' }), (e) => e instanceof TesseraError && /non-empty array/.test(e.message));
});
