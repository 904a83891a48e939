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
} from './execution-provider.js';
import { WorkerPool } from './pool.js';
import { createTessera, TesseraError } from './index.js';
import { convStack, convStackReference, unet, randomArray } from '../../tests/js/networks.js';
import { onnx, tensor, valueInfo, node, attrInts } from '../../tests/js/onnx-build.js';
import { xqsmStandin } from '../../scripts/standins.js';
import { lpcnnStandin } from '../../scripts/standins-loops.js';
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

test('runtime in node with executionProviders [webgpu, wasm]: the run completes on wasm; report and progress say why', async () => {
  tessera = await createTessera({ workers: 1, threadsPerWorker: 1, executionProviders: PREF });
  const dims = [12, 12, 12];
  const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  const field = randomArray(dims[0] * dims[1] * dims[2], 5);
  const weights = convStack(CONV);
  const progress = [];
  const { chi, report } = await tessera.invert({ field, geometry, spec: { divisor: 1 }, weights, tile: { core: 6, halo: CONV.layers }, onProgress: (p) => progress.push(p) });
  assert.equal(chi.length, field.length);
  assert.equal(report.executionProvider.length, 1);
  const ep = report.executionProvider[0];
  assert.equal(ep.provider, 'wasm');
  assert.deepEqual(ep.requested, PREF);
  assert.deepEqual(ep.skipped, [{ provider: 'webgpu', reason: 'node has no WebGPU (navigator.gpu)' }]);
  assert.ok(progress.length > 0);
  assert.ok(progress.every((p) => p.executionProvider?.[0] === 'wasm'));
  // Per request: wasm only, nothing skipped.
  const wasmOnly = await tessera.invert({ field, geometry, spec: { divisor: 1 }, weights, whole: true, executionProviders: ['wasm'] });
  assert.deepEqual(wasmOnly.report.executionProvider[0].skipped, []);
  // A bad preference is refused by name, before anything runs.
  await assert.rejects(
    tessera.invert({ field, geometry, spec: { divisor: 1 }, weights, whole: true, executionProviders: ['gpu'] }),
    (e) => e instanceof TesseraError && e.code === 'InvalidArgument' && /unknown execution provider "gpu"/.test(e.message),
  );
  await assert.rejects(createTessera({ executionProviders: 'webgpu' }), (e) => e instanceof TesseraError && /non-empty array/.test(e.message));
});
