// The small ONNX graph-building helpers (onnx-proto) shared by the test networks (tests/js/networks.js)
// and the calibration stand-ins (scripts/standins.js).
import onnxProto from 'onnx-proto';

export const { onnx } = onnxProto;
export const FLOAT = onnx.TensorProto.DataType.FLOAT;

/** Deterministic PRNG (mulberry32) returning floats in [0, 1). */
export function prng(seed) {
  let a = (seed >>> 0) || 0x9e3779b9;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** An f32 initializer; raw_data is little-endian f32 (every platform that runs this is little-endian). */
export function tensor(name, dims, data) {
  const f = data instanceof Float32Array ? data : Float32Array.from(data);
  return onnx.TensorProto.create({ name, dims, dataType: FLOAT, rawData: new Uint8Array(f.buffer, f.byteOffset, f.byteLength) });
}

/** An f32 graph input/output; string dims are dynamic (dim_param). */
export function valueInfo(name, dims) {
  return onnx.ValueInfoProto.create({
    name,
    type: {
      tensorType: {
        elemType: FLOAT,
        shape: { dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) },
      },
    },
  });
}

export function attrInts(name, ints) {
  return onnx.AttributeProto.create({ name, type: onnx.AttributeProto.AttributeType.INTS, ints });
}

export function attrInt(name, i) {
  return onnx.AttributeProto.create({ name, type: onnx.AttributeProto.AttributeType.INT, i });
}

export function attrFloat(name, f) {
  return onnx.AttributeProto.create({ name, type: onnx.AttributeProto.AttributeType.FLOAT, f });
}

export function node(opType, inputs, outputs, attributes = [], name = outputs[0]) {
  return onnx.NodeProto.create({ opType, input: inputs, output: outputs, attribute: attributes, name });
}

/**
 * The base of the graph builders (test networks, stand-ins): nodes and initializers in build order, unique
 * names from a counter, and the parameter-free ops. Subclasses add their layers with their own weights.
 */
export class GraphBuilder {
  constructor(seed) {
    this.nodes = [];
    this.inits = [];
    this.n = 0;
    this.seed = seed >>> 0;
  }
  /** A fresh name: prefix_counter. */
  name(prefix) {
    return `${prefix}_${this.n++}`;
  }
  /** One node of type `type` on `inputs`; returns its output's name (the op type in lower case + counter). */
  op(type, inputs, attrs = []) {
    const y = this.name(type.toLowerCase());
    this.nodes.push(node(type, inputs, [y], attrs));
    return y;
  }
  relu(x) {
    return this.op('Relu', [x]);
  }
  concat(a, b) {
    return this.op('Concat', [a, b], [attrInt('axis', 1)]);
  }
  maxpool(x) {
    return this.op('MaxPool', [x], [attrInts('kernel_shape', [2, 2, 2]), attrInts('strides', [2, 2, 2])]);
  }
}
