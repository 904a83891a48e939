// The shared ONNX graph reader: graphs built with onnx-proto (an independent protobuf encoder) read back field by field.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readOnnxGraph, parseTensor, modelFields, spatialRank, Reader } from './onnx-graph.js';
import { onnx, tensor, valueInfo, attrInts, attrInt, attrFloat, node } from '../../tests/js/onnx-build.js';

function model(nodes, inits = [], inputs = ['input']) {
  const bytes = onnx.ModelProto.encode(
    onnx.ModelProto.create({
      irVersion: 8,
      opsetImport: [{ domain: '', version: 17 }],
      graph: onnx.GraphProto.create({
        name: 'g',
        node: nodes,
        initializer: inits,
        input: inputs.map((n) => valueInfo(n, [1, 1, 'X', 'Y', 'Z'])),
        output: [valueInfo('output', [1, 1, 'X', 'Y', 'Z'])],
      }),
    }),
  ).finish();
  return Uint8Array.from(bytes); // a plain array of its own (encode may return a Buffer on a shared pool)
}

test('nodes, attributes, inputs and outputs read back as onnx-proto wrote them', () => {
  const bytes = model(
    [
      node('Conv', ['input', 'w', 'b'], ['c'], [attrInts('kernel_shape', [3, 1, 5]), attrInts('pads', [1, 0, -2, 1, 0, 2]), attrInt('group', 4)], 'conv0'),
      node('LeakyRelu', ['c'], ['output'], [attrFloat('alpha', 0.25)]),
    ],
    [tensor('w', [8, 2, 3, 1, 5], new Float32Array(240)), tensor('b', [8], new Float32Array(8))],
    ['input', 'w'],
  );
  const g = readOnnxGraph(bytes);
  assert.deepEqual(g.inputs, ['input']); // 'w' is an initializer
  assert.deepEqual(g.outputs, ['output']);
  const [conv, relu] = g.nodes;
  assert.deepEqual([conv.op, conv.name, conv.inputs, conv.outputs], ['Conv', 'conv0', ['input', 'w', 'b'], ['c']]);
  assert.deepEqual(conv.attrs.kernel_shape.ints, [3, 1, 5]);
  assert.deepEqual(conv.attrs.pads.ints, [1, 0, -2, 1, 0, 2]); // negative int64 in two's complement
  assert.equal(conv.attrs.group.i, 4);
  assert.equal(relu.attrs.alpha.f, 0.25);
  assert.equal(spatialRank(conv, g.initializers), 3);
  assert.equal(spatialRank({ ...conv, attrs: {} }, g.initializers), 3); // from the weight's dims
  assert.equal(spatialRank(relu, g.initializers), null);
});

test('tensors: small raw_data decoded, large left in place (data says where), float_data and int64_data read', () => {
  const bytes = model(
    [node('Identity', ['input'], ['output'])],
    [
      tensor('small', [4], [1, 2, 3, 4]),
      tensor('big', [100], new Float32Array(100).fill(7)),
      onnx.TensorProto.create({ name: 'fd', dims: [3], dataType: 1, floatData: [0.5, -1, 2] }),
      onnx.TensorProto.create({ name: 'id', dims: [2], dataType: 7, int64Data: [-3, 9] }),
    ],
  );
  const { initializers } = readOnnxGraph(bytes);
  const small = initializers.get('small');
  assert.deepEqual([...new Float32Array(small.raw.slice().buffer)], [1, 2, 3, 4]);
  assert.equal(small.data[1] - small.data[0], 16);
  const big = initializers.get('big');
  assert.equal(big.raw, null);
  assert.deepEqual([...new Float32Array(bytes.slice(...big.data).buffer)], Array(100).fill(7));
  assert.deepEqual(initializers.get('fd').floats, [0.5, -1, 2]);
  assert.deepEqual(initializers.get('id').ints, [-3, 9]);
  assert.equal(big.external, false);
});

test('the model\'s fields: the graph found; a file without one, or cut short, is refused by name', () => {
  const bytes = model([node('Identity', ['input'], ['output'])]);
  const { fields, graph } = modelFields(bytes);
  assert.equal(graph.field, 7);
  assert.ok(fields.some((f) => f.field === 8)); // opset_import
  const t = parseTensor(bytes, [0, 0]);
  assert.equal(t.name, '');
  assert.throws(() => readOnnxGraph(new Uint8Array([0x08, 0x01])), /^Error: not an ONNX model: no graph in the file$/);
  assert.throws(() => readOnnxGraph(bytes.subarray(0, bytes.length - 3)), /^Error: not an ONNX model: truncated/);
  assert.throws(() => new Reader(new Uint8Array([0x0b])).fields(), /^Error: not an ONNX model: unsupported wire type 3$/);
});
