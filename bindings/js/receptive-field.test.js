// The receptive field of ONNX graphs (derived from the graph, checked against radii worked out by hand) and the
// probe's context profile (checked against a network whose reach is known exactly).
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { graphReceptiveField, contextProfile, probeEdge } from './receptive-field.js';
import { readOnnxGraph } from './onnx-graph.js';
import { convStack, unet, convStackReference, randomArray } from '../../tests/js/networks.js';
import { onnx, tensor, valueInfo, attrInts, attrInt, node } from '../../tests/js/onnx-build.js';

/** A model of the given nodes and initializers, input 'input' [1, 1, X, Y, Z] → 'output'. */
function graph(nodes, inits = []) {
  return onnx.ModelProto.encode(
    onnx.ModelProto.create({
      irVersion: 8,
      opsetImport: [{ domain: '', version: 17 }],
      graph: onnx.GraphProto.create({
        name: 'rf',
        node: nodes,
        initializer: inits,
        input: [valueInfo('input', [1, 1, 'X', 'Y', 'Z'])],
        output: [valueInfo('output', [1, 1, 'X', 'Y', 'Z'])],
      }),
    }),
  ).finish();
}

const weight = (name, dims) => tensor(name, dims, new Float32Array(dims.reduce((a, b) => a * b, 1)).fill(0.1));

test('a stack of L 3³ convolutions reaches L voxels; 5³ kernels 2 per layer', () => {
  for (const layers of [1, 2, 3, 5]) {
    assert.deepEqual(graphReceptiveField(convStack({ layers })).radius, [layers, layers, layers]);
  }
  const k5 = graph(
    [node('Conv', ['input', 'w'], ['a'], [attrInts('kernel_shape', [5, 5, 5]), attrInts('pads', [2, 2, 2, 2, 2, 2])]),
      node('Conv', ['a', 'w'], ['output'], [attrInts('pads', [2, 2, 2, 2, 2, 2])])], // kernel from the weight's dims
    [weight('w', [1, 1, 5, 5, 5])],
  );
  assert.deepEqual(graphReceptiveField(k5).radius, [4, 4, 4]);
});

test('dilations, anisotropic kernels and asymmetric pads are followed per axis', () => {
  const g = graph(
    [node('Conv', ['input', 'w'], ['output'], [attrInts('kernel_shape', [3, 1, 5]), attrInts('dilations', [4, 1, 1]), attrInts('pads', [4, 0, 4, 4, 0, 0])])],
    [weight('w', [1, 1, 3, 1, 5])],
  );
  const rf = graphReceptiveField(g);
  // x: (3 − 1)·4 = 8 wide centred (4 below, 4 above); y: nothing; z: 5 wide, all 4 below (pads begin 4, end 0).
  assert.deepEqual(rf.below, [4, 0, 4]);
  assert.deepEqual(rf.above, [4, 0, 0]);
  assert.deepEqual(rf.radius, [4, 0, 4]);
});

test('the test U-Net reaches 29 voxels and the shipped demo network 51 (worked out by hand)', () => {
  // Test U-Net (tests/js/networks.js unet): windows as (start, width) at the jump j of each tensor.
  // conv 3³ (j 1): (−1, 2); pool: (−1, 3) j 2; conv: (−3, 7); pool: (−3, 9) j 4; conv: (−7, 17); pool: (−7, 21) j 8;
  // conv: (−15, 37); up 2³ s2 (start − j/2, width + j/2): (−19, 41) j 4; concat; conv: (−23, 49); up: (−25, 51) j 2;
  // conv: (−27, 55); up: (−28, 56) j 1; conv: (−29, 58); 1³ conv: the same → 29 below, 29 above.
  assert.deepEqual(graphReceptiveField(unet()).radius, [29, 29, 29]);
  // Demo U-Net (scripts/train_demo_net.md): two 3³ convs per level: ±2 (jump 1), ±4 (2), ±8 (4), ±16 (8) down,
  // ±8, ±4, ±2 up, plus the poolings and up-convolutions: ±51.
  const demo = graphReceptiveField(fs.readFileSync(new URL('../../web/models/demo-unet.onnx', import.meta.url)));
  assert.deepEqual(demo.radius, [51, 51, 51]);
  assert.equal(demo.global, false);
  assert.deepEqual(demo.unknownOps, []);
  assert.equal(demo.ops.Conv, 15);
  assert.equal(demo.ops.MaxPool, 3);
});

test('resizes, pads and strided convolutions', () => {
  // stride-2 3³ conv (±1 at jump 1, then jump 2), linear ×2 resize (±1 at jump 2 → ±2), 3³ conv at jump 1 (±1).
  const scales = tensor('scales', [5], [1, 1, 2, 2, 2]);
  const g = graph(
    [
      node('Conv', ['input', 'w'], ['a'], [attrInts('kernel_shape', [3, 3, 3]), attrInts('strides', [2, 2, 2]), attrInts('pads', [1, 1, 1, 1, 1, 1])]),
      node('Resize', ['a', '', 'scales'], ['b'], [onnx.AttributeProto.create({ name: 'mode', type: onnx.AttributeProto.AttributeType.STRING, s: new TextEncoder().encode('linear') })]),
      node('Conv', ['b', 'w'], ['output'], [attrInts('kernel_shape', [3, 3, 3]), attrInts('pads', [1, 1, 1, 1, 1, 1])]),
    ],
    [weight('w', [1, 1, 3, 3, 3]), scales],
  );
  assert.deepEqual(graphReceptiveField(g).radius, [4, 4, 4]);
  const padded = graph([node('Pad', ['input', 'pads'], ['a']), node('Conv', ['a', 'w'], ['output'], [attrInts('kernel_shape', [3, 3, 3])])], [
    tensor('pads', [10], [0, 0, 1, 1, 1, 0, 0, 1, 1, 1]), weight('w', [1, 1, 3, 3, 3]),
  ]);
  // Pad of 1 then a valid 3³ conv is the 'same' conv.
  assert.deepEqual(graphReceptiveField(padded).radius, [1, 1, 1]);
});

test('global operations make the field global; unknown operations are named', () => {
  const inorm = graph([node('InstanceNormalization', ['input', 's', 'b'], ['output'])], [tensor('s', [1], [1]), tensor('b', [1], [0])]);
  const rf = graphReceptiveField(inorm);
  assert.equal(rf.global, true);
  assert.equal(rf.radiusMax, Infinity);
  const gap = graph([node('GlobalAveragePool', ['input'], ['g']), node('Add', ['input', 'g'], ['output'])]);
  assert.equal(graphReceptiveField(gap).global, true);
  const odd = graph([node('SpaceToDepth', ['input'], ['output'], [attrInt('blocksize', 2)])]);
  assert.deepEqual(graphReceptiveField(odd).unknownOps, ['SpaceToDepth']);
  assert.throws(() => graphReceptiveField(new Uint8Array([1, 2, 3])), /truncated|not an ONNX model/);
});

test('readOnnxGraph skips weights: a large initializer is never decoded', () => {
  const big = tensor('w', [8, 1, 3, 3, 3], randomArray(8 * 27, 1));
  const g = readOnnxGraph(graph([node('Conv', ['input', 'w'], ['output'], [attrInts('kernel_shape', [3, 3, 3])])], [big]));
  assert.deepEqual(g.inputs, ['input']);
  assert.deepEqual(g.outputs, ['output']);
  assert.deepEqual(g.initializers.get('w').dims, [8, 1, 3, 3, 3]);
  assert.equal(g.initializers.get('w').raw, null);
  assert.equal(g.nodes[0].op, 'Conv');
});

test('the probe of a conv stack: all of the response within the cube the graph allows, none at the centre alone', () => {
  const layers = 3;
  const dims = [17, 17, 17];
  const n = 17 ** 3;
  const base = randomArray(n, 4, 0.1);
  const c = 8;
  const at = (c * 17 + c) * 17 + c; // network layout, z fastest
  const plus = base.slice();
  const minus = base.slice();
  plus[at] += 0.05;
  minus[at] -= 0.05;
  const p = contextProfile(convStackReference(plus, dims, { layers }), convStackReference(minus, dims, { layers }), dims, [c, c, c]);
  // The response lies in the cube ±3: Euclidean distance up to 3√3 ≈ 5.2.
  assert.ok(p.within[5] > 0.999, `within[5] = ${p.within[5]}`);
  assert.equal(p.within[p.within.length - 1], 1);
  assert.ok(p.within[2] < 1 - 1e-3, `within[2] = ${p.within[2]}: the corners of the cube lie beyond 2.5`);
  assert.ok(p.within[0] > 0 && p.within[0] < 0.5);
  for (let i = 1; i < p.within.length; i++) assert.ok(p.within[i] >= p.within[i - 1]);
  assert.ok(p.radius99 >= 3 && p.radius99 <= 5, `radius99 ${p.radius99}`);
  assert.ok(p.outsideFraction < 1e-9);
  assert.throws(() => contextProfile(base, base, dims, [c, c, c]), /does not respond/);
});

test('probeEdge: the whole response fits, a multiple of the divisor, capped', () => {
  assert.equal(probeEdge(51, 8), 104);
  assert.equal(probeEdge(3, 1), 7);
  assert.equal(probeEdge(51, 8, 90), 88);
  assert.equal(probeEdge(500, 16, 20), 16);
});

// Through the runtime: the probe runs the network (ONNX Runtime worker, C++ gather/scatter) and the planner takes its
// profile; the weights' graph reaches the plan by itself.
test('receptiveField through the runtime: the graph, the probe, and the plans that use them', async (t) => {
  const { createTessera } = await import('./index.js');
  const tessera = await createTessera({ workers: 1, threadsPerWorker: 1 });
  t.after(() => tessera.terminate());
  const weights = convStack({ layers: 3, seed: 4 });
  const spec = { divisor: 1, bytesPerVoxel: 200 };
  const plain = await tessera.receptiveField({ weights, spec });
  assert.deepEqual(plain.graph.radius, [3, 3, 3]);
  assert.equal(plain.probe, undefined);
  const progress = [];
  const rf = await tessera.receptiveField({ weights, spec, probe: true, onProgress: (p) => progress.push(p) });
  assert.equal(rf.probe.edge, 7); // 2·3 + 1, divisor 1
  assert.equal(rf.probe.within.length, 4); // radii 0..3 lie whole inside a 7³ patch
  assert.equal(rf.probe.within[3], 1);
  assert.ok(rf.probe.within[0] > 0 && rf.probe.within[0] < 1);
  assert.deepEqual(progress.map((p) => p.done), [1, 2]);
  // The probe's profile is taken as measured; the weights' graph as the theoretical radius.
  const geometry = { dims: [40, 36, 32], voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  const measured = await tessera.plan({ geometry, spec, context: rf.probe, tile: { core: 16, halo: 2 } });
  assert.equal(measured.context.measured, true);
  assert.ok(measured.predictedFidelity.nrmse > 0);
  const fromGraph = await tessera.plan({ geometry, spec, weights, tile: { core: 16, halo: 2 } });
  assert.equal(fromGraph.context.radius, 3);
  assert.equal(fromGraph.context.measured, false);
  const declared = await tessera.plan({ geometry, spec: { ...spec, receptiveRadius: 9 }, weights, tile: { core: 16, halo: 2 } });
  assert.equal(declared.context.radius, 9, 'a declared radius wins over the graph');
  const unknown = await tessera.plan({ geometry, spec: { divisor: 1, bytesPerVoxel: 200000 } }); // the whole volume does not fit
  assert.equal(unknown.context.assumed, true);
  assert.match(unknown.explanation, /receptive field is unknown: assumed 64 voxels/);
  // The registry's radii are the graphs': the shipped demo network's, and the stand-ins' for xQSM and QSMnet (their
  // architecture, scripts/standins.js; the channel counts do not change the reach).
  const { xqsmStandin, qsmnetStandin } = await import('../../scripts/standins.js');
  const byId = Object.fromEntries((await tessera.registry()).map((m) => [m.id, m]));
  assert.equal(byId['demo-unet'].receptiveRadius, graphReceptiveField(fs.readFileSync(new URL('../../web/models/demo-unet.onnx', import.meta.url))).radiusMax);
  assert.equal(byId.xqsm.receptiveRadius, graphReceptiveField(xqsmStandin({ base: 4 })).radiusMax);
  assert.equal(byId.qsmnet.receptiveRadius, graphReceptiveField(qsmnetStandin({ base: 2 })).radiusMax);
  assert.equal(byId['qsmnet-plus'].receptiveRadius, byId.qsmnet.receptiveRadius);
  await assert.rejects(tessera.receptiveField({ spec }), /needs the network's weights/);
  await assert.rejects(tessera.receptiveField({ weights: new Uint8Array([8, 1, 58, 3]), spec }), (e) => e.code === 'ModelLoadFailed');
  await assert.rejects(tessera.plan({ geometry, spec, context: { within: [0.5, 0.2, 1] } }), /non-decreasing/);
});
