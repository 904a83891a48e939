// Where a network's ONNX graph is read: in the driver worker, once per weights sha256 (graphs.js), never on the
// caller's thread; and the pipeline's network stage is planned as invert() plans a network run (network-plan.js):
// the reach from the graph, a spec without bytesPerVoxel calibrated.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createTessera } from '../index.js';
import { graphReads } from '../onnx-graph.js';
import { graphOfBytes, graphContext, graphMacs, preparedModel, KEPT_GRAPHS } from './graphs.js';
import { rt } from './context.js';
import { startPools, stopPools } from './sessions.js';
import { convStack, unet } from '../../../tests/js/networks.js';

let t;
before(async () => {
  t = await createTessera({ workers: 1, threadsPerWorker: 1, hardwareThreads: 2 });
});
after(async () => {
  await t?.terminate();
});

/** The driver's count of graphs read (its internal counters message). */
const driverReads = async () => (await t._call('counters')).graphReads;

test('graphs.js: one read per sha256 whatever buffer holds the bytes; the facts are the graph\'s; an unreadable file says why', async () => {
  const layers = 3;
  const bytes = convStack({ layers, channels: 4, seed: 31 });
  const before = graphReads();
  const facts = await graphOfBytes(bytes);
  const again = await graphOfBytes(new Uint8Array(bytes)); // another buffer, the same bytes
  assert.equal(graphReads() - before, 1, 'one graph read for two buffers of the same bytes');
  assert.strictEqual(again, facts);
  // A stack of `layers` 3×3×3 convolutions looks `layers` voxels each way, and costs 27 · (C·1 + C·C·(L−2) + 1·C) MACs per voxel.
  assert.deepEqual(facts.receptiveField.value.radius, [layers, layers, layers]);
  assert.deepEqual(graphContext(facts), { radius: layers });
  assert.equal(graphMacs(facts), 27 * (4 + 16 + 4));
  assert.ok(facts.ops.value.some((o) => o.op === 'Conv' && o.rank === 3 && o.count === layers));
  const junk = await graphOfBytes(new Uint8Array([8, 1, 58, 3]));
  for (const k of ['receptiveField', 'cost', 'ops']) assert.match(junk[k].error, /truncated|not an ONNX model/, k);
  assert.equal(graphContext(junk), undefined);
  assert.equal(graphMacs(junk), undefined);
  // The execution provider's choice takes the kept operators: a pool asking for WebGPU reads no graph again.
  rt.options = { workerHeapGuardBytes: 2 ** 31 };
  const reads = graphReads();
  const pools = await startPools([bytes], { k: 1, threadsPerWorker: 1, executionProviders: ['webgpu', 'wasm'] });
  try {
    assert.equal(graphReads(), reads);
    assert.equal(pools[0].executionProvider.selected, 'wasm'); // node offers no WebGPU
  } finally {
    await stopPools(pools);
  }
  assert.ok(KEPT_GRAPHS >= 2);
  // A graph rewritten for the pools (the registry's ConvTranspose rewrite on wasm) is rewritten once for the same
  // weights and choice.
  const net = unet({ base: 2, seed: 36 });
  const choice = { preference: ['wasm'], platform: { node: true, webgpu: false, webnn: false }, wasmRewriteOps: ['ConvTranspose'] };
  const once = await preparedModel(net, choice);
  assert.ok(once.bytes !== net && once.selection.graphRewrite.every((r) => r.op === 'ConvTranspose') && once.selection.graphRewrite.length > 0);
  assert.strictEqual(await preparedModel(new Uint8Array(net), choice), once, 'the same bytes and choice: the kept rewrite');
  const plain = await preparedModel(net, { ...choice, wasmRewriteOps: undefined });
  assert.strictEqual(plain.bytes, net, 'nothing to rewrite: the model\'s own bytes');
  assert.strictEqual(await preparedModel(net, choice), once, 'a model not rewritten leaves the kept rewrite');
  await preparedModel(unet({ base: 2, seed: 37 }), choice);
  const remade = await preparedModel(net, choice);
  assert.notStrictEqual(remade, once, 'one rewrite kept: the last one made');
  assert.deepEqual(remade.bytes, once.bytes);
});

test('the caller\'s thread reads no graph: plan(), invert() and receptiveField() leave it to the driver, which reads each weights once', async () => {
  const geometry = { dims: [24, 20, 16], voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  const { field, mask } = await t.phantom({ geometry });
  const weights = convStack({ layers: 2, seed: 32 });
  const spec = { divisor: 1, bytesPerVoxel: 1100 };
  const caller = graphReads();
  const driver = await driverReads();
  const plan = await t.plan({ geometry, mask, spec, weights, quality: 'fast' });
  assert.deepEqual([plan.context.radius, plan.context.measured], [2, false], 'the reach is the graph\'s');
  assert.equal(plan.estimateSource, 'graph');
  const run = await t.invert({ geometry, field, mask, spec, weights: new Uint8Array(weights), quality: 'fast', keepInputs: true });
  assert.equal(run.report.plan.context.radius, 2);
  const { id, ...planned } = plan;
  assert.deepEqual(run.report.plan, planned, 'invert() plans as plan() does');
  assert.deepEqual((await t.receptiveField({ weights, spec })).graph.radius, [2, 2, 2]);
  assert.equal(graphReads() - caller, 0, 'graphs read on the caller\'s thread');
  assert.equal((await driverReads()) - driver, 1, 'one read in the driver for three calls with the same bytes');
  await t.plan({ geometry, mask, spec, weights: convStack({ layers: 2, seed: 33 }), quality: 'fast' });
  assert.equal((await driverReads()) - driver, 2, 'other bytes: read once more');
  assert.equal(graphReads() - caller, 0);
});

test('plan() posts the weights\' bytes only while the runtime does not keep what it needs of them (their sha256 otherwise)', async () => {
  const geometry = { dims: [24, 20, 16], voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  const { mask } = await t.phantom({ geometry });
  const spec = { divisor: 1, bytesPerVoxel: 1100 };
  const posted = []; // per plan message: whether it carried weights' bytes
  const post = t._worker.postMessage.bind(t._worker);
  t._worker.postMessage = (m, transfer) => {
    if (m?.method === 'plan') posted.push(m.args.weights !== undefined);
    return post(m, transfer);
  };
  try {
    const first = convStack({ layers: 4, seed: 35 });
    const a = await t.plan({ geometry, mask, spec, weights: first, tile: { core: 8, halo: 4 } });
    assert.deepEqual(posted, [false, true], 'new weights: by sha256, refused, then with the bytes');
    const b = await t.plan({ geometry, mask, spec, weights: first, tile: { core: 8, halo: 4 } });
    assert.deepEqual(posted.slice(2), [false], 'kept: by sha256 alone');
    const { id: idA, ...planA } = a;
    const { id: idB, ...planB } = b;
    assert.deepEqual(planB, planA);
    assert.equal(planA.context.radius, 4);
    // More networks than the runtime keeps graphs of: the first one's graph is dropped, and its bytes go again.
    for (let seed = 0; seed < KEPT_GRAPHS; seed++) await t.plan({ geometry, mask, spec, weights: convStack({ layers: 1, seed: 100 + seed }), tile: { core: 8, halo: 1 } });
    posted.length = 0;
    const { id: idC, ...planC } = await t.plan({ geometry, mask, spec, weights: first, tile: { core: 8, halo: 4 } });
    assert.deepEqual(posted, [false, true]);
    assert.deepEqual(planC, planA);
  } finally {
    t._worker.postMessage = post;
  }
});

test('the pipeline\'s network stage is planned as invert() of its local field: the graph\'s reach, a spec without bytesPerVoxel calibrated', async () => {
  const geometry = { dims: [48, 48, 36], voxelMm: [3, 3, 3], b0Dir: [0, 0, 1] };
  const te = [0.004, 0.008, 0.012];
  const scan = await t.phantomScan({ geometry, te });
  const weights = unet({ base: 4, seed: 34 });
  const spec = { divisor: 8 }; // no bytesPerVoxel: calibrated from the weights
  const caller = graphReads();
  const out = await t.pipeline({ phase: scan.phase, magnitude: scan.magnitude, mask: scan.mask, geometry, te, b0: 3, spec, weights: [weights] });
  const staged = out.networkReport.plan;
  assert.equal(staged.cost.source, 'calibrated');
  assert.ok(staged.cost.bytesPerVoxel > 0 && staged.cost.points.length >= 3);
  const graph = await t.receptiveField({ weights });
  assert.deepEqual([staged.context.radius, staged.context.measured], [graph.graph.radiusMax, false]);
  assert.equal(staged.estimateSource, 'graph');
  // The same network on the same local field through invert() and plan(): the same plan, figure for figure.
  const local = { geometry, field: out.localField, mask: out.localMask, spec, weights: [weights] };
  const inverted = await t.invert({ ...local, keepInputs: true });
  assert.deepEqual(inverted.report.plan, staged);
  const { id, ...planned } = await t.plan(local);
  assert.deepEqual(planned, staged);
  assert.equal(graphReads() - caller, 0, 'graphs read on the caller\'s thread');
});
