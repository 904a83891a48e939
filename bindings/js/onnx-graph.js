// ONNX graphs read straight from the model bytes (protobuf wire format): nodes, their attributes, the initializers'
// names, dims and where their bytes lie, the graph's inputs and outputs. Weights are never decoded or copied, so a
// 400 MB file costs nothing to read. One reader for the receptive field (receptive-field.js), the execution provider
// rules (execution-provider.js) and the WebGPU rewrite (webgpu-graph.js).
//
// ONNX field numbers (onnx.proto3). ModelProto: graph 7, opset_import 8. GraphProto: node 1, initializer 5, input 11,
// output 12, value_info 13. NodeProto: input 1, output 2, name 3, op_type 4, attribute 5, domain 7. AttributeProto:
// name 1, f 2, i 3, s 4, floats 7, ints 8. TensorProto: dims 1, data_type 2, float_data 4, int64_data 7, name 8,
// raw_data 9, external_data 13, data_location 14. ValueInfoProto: name 1.

/** Bytes of raw_data decoded into a tensor's `raw`: small constants (scales, pads, axes), never weights. */
const SMALL_RAW_BYTES = 64;

/** A cursor over the protobuf message in bytes[start, end); every read past the end throws "not an ONNX model: …". */
export class Reader {
  constructor(bytes, start = 0, end = bytes.length) {
    this.b = bytes;
    this.p = start;
    this.end = end;
  }
  more() {
    return this.p < this.end;
  }
  varint() {
    let result = 0;
    let scale = 1;
    for (let shift = 0; shift < 70; shift += 7) {
      if (this.p >= this.end) throw new Error('not an ONNX model: truncated varint');
      const byte = this.b[this.p++];
      result += (byte & 0x7f) * scale;
      if (byte < 0x80) return result;
      scale *= 128;
    }
    throw new Error('not an ONNX model: varint too long');
  }
  /** A signed 64-bit varint as a Number (two's complement: a negative is ten bytes, read exactly with BigInt). */
  int64() {
    const start = this.p;
    const v = this.varint();
    if (v < 2 ** 53) return v;
    let big = 0n;
    for (let p = start, shift = 0n; p < this.p; p++, shift += 7n) big |= BigInt(this.b[p] & 0x7f) << shift;
    return Number(BigInt.asIntN(64, big));
  }
  tag() {
    const t = this.varint();
    return { field: Math.floor(t / 8), wire: t % 8 };
  }
  /** A length-delimited field as [start, end) of the buffer. */
  span() {
    const n = this.varint();
    const s = this.p;
    if (s + n > this.end) throw new Error('not an ONNX model: truncated field');
    this.p += n;
    return [s, s + n];
  }
  skip(wire) {
    if (wire === 0) this.varint();
    else if (wire === 1) this.p += 8;
    else if (wire === 2) this.span();
    else if (wire === 5) this.p += 4;
    else throw new Error(`not an ONNX model: unsupported wire type ${wire}`);
    if (this.p > this.end) throw new Error('not an ONNX model: truncated field');
  }
  string([s, e]) {
    return new TextDecoder().decode(this.b.subarray(s, e));
  }
  sub([s, e]) {
    return new Reader(this.b, s, e);
  }
  float32() {
    if (this.p + 4 > this.end) throw new Error('not an ONNX model: truncated field');
    const v = new DataView(this.b.buffer, this.b.byteOffset + this.p, 4).getFloat32(0, true);
    this.p += 4;
    return v;
  }
  /** Every field as {field, wire, start (of the tag), end, value: [start, end) of a length-delimited payload}. */
  fields() {
    const out = [];
    while (this.more()) {
      const start = this.p;
      const { field, wire } = this.tag();
      let value = null;
      if (wire === 2) value = this.span();
      else this.skip(wire);
      out.push({ field, wire, start, end: this.p, value });
    }
    return out;
  }
}

/** Reads one occurrence of a repeated int64 field (packed or not) into out. */
function readInts(r, wire, out) {
  if (wire === 2) {
    const s = r.sub(r.span());
    while (s.more()) out.push(s.int64());
  } else if (wire === 0) out.push(r.int64());
  else r.skip(wire);
}

/** Reads one occurrence of a repeated float field (packed or not) into out. */
function readFloats(r, wire, out) {
  if (wire === 2) {
    const s = r.sub(r.span());
    while (s.more()) out.push(s.float32());
  } else if (wire === 5) out.push(r.float32());
  else r.skip(wire);
}

/** AttributeProto at bytes[span]: {name, ints, floats, i, f, s, span (where it lies, to copy it unchanged)}. */
export function parseAttribute(b, span) {
  const a = { name: '', ints: [], floats: [], i: undefined, f: undefined, s: undefined, span };
  const r = new Reader(b, ...span);
  while (r.more()) {
    const { field, wire } = r.tag();
    if (field === 1 && wire === 2) a.name = r.string(r.span());
    else if (field === 2 && wire === 5) a.f = r.float32();
    else if (field === 3 && wire === 0) a.i = r.int64();
    else if (field === 4 && wire === 2) a.s = r.string(r.span());
    else if (field === 7) readFloats(r, wire, a.floats);
    else if (field === 8) readInts(r, wire, a.ints);
    else r.skip(wire);
  }
  return a;
}

/** NodeProto at bytes[span]: {inputs, outputs, name, op, domain, attrs: {name: attribute}}. */
export function parseNode(b, span) {
  const n = { inputs: [], outputs: [], name: '', op: '', domain: '', attrs: {} };
  const r = new Reader(b, ...span);
  while (r.more()) {
    const { field, wire } = r.tag();
    if (wire !== 2) r.skip(wire);
    else if (field === 1) n.inputs.push(r.string(r.span()));
    else if (field === 2) n.outputs.push(r.string(r.span()));
    else if (field === 3) n.name = r.string(r.span());
    else if (field === 4) n.op = r.string(r.span());
    else if (field === 7) n.domain = r.string(r.span());
    else if (field === 5) {
      const a = parseAttribute(b, r.span());
      n.attrs[a.name] = a;
    } else r.skip(wire);
  }
  return n;
}

/**
 * TensorProto at bytes[span]: {name, dims, dataType, floats (float_data), ints (int64_data), raw (raw_data's bytes
 * when at most SMALL_RAW_BYTES, else null), data ([start, end) of raw_data in bytes, or null), external (stored
 * outside the file)}.
 */
export function parseTensor(b, span) {
  const t = { name: '', dims: [], dataType: 0, floats: [], ints: [], raw: null, data: null, external: false };
  const r = new Reader(b, ...span);
  while (r.more()) {
    const { field, wire } = r.tag();
    if (field === 1) readInts(r, wire, t.dims);
    else if (field === 2 && wire === 0) t.dataType = r.varint();
    else if (field === 8 && wire === 2) t.name = r.string(r.span());
    else if (field === 4) readFloats(r, wire, t.floats);
    else if (field === 7) readInts(r, wire, t.ints);
    else if (field === 9 && wire === 2) {
      t.data = r.span();
      if (t.data[1] - t.data[0] <= SMALL_RAW_BYTES) t.raw = b.subarray(...t.data);
    } else if (field === 13) {
      t.external = true;
      r.skip(wire);
    } else if (field === 14 && wire === 0) t.external ||= r.varint() === 1;
    else r.skip(wire);
  }
  return t;
}

/** The name of the ValueInfoProto at bytes[span]. */
export function valueInfoName(b, span) {
  const r = new Reader(b, ...span);
  while (r.more()) {
    const { field, wire } = r.tag();
    if (field === 1 && wire === 2) return r.string(r.span());
    r.skip(wire);
  }
  return '';
}

/** The model's fields and its graph's field ({field, wire, start, end, value} as Reader.fields gives them). */
export function modelFields(b) {
  const fields = new Reader(b).fields();
  const graph = fields.find((f) => f.field === 7 && f.wire === 2);
  if (!graph) throw new Error('not an ONNX model: no graph in the file');
  return { fields, graph };
}

/** Graphs readOnnxGraph has read in this thread (the runtime's counters; tests check that the caller's thread reads none). */
let reads = 0;

/** How many graphs readOnnxGraph has read in this thread (this module instance). */
export function graphReads() {
  return reads;
}

/**
 * The graph of ONNX model bytes: {nodes, initializers: Map name → parseTensor's tensor, inputs (names that are not
 * initializers), outputs}. Throws an Error naming what is wrong when the bytes are not an ONNX model.
 * @param {Uint8Array|ArrayBuffer} bytes
 */
export function readOnnxGraph(bytes) {
  reads++;
  const b = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  const { graph } = modelFields(b);
  const nodes = [];
  const initializers = new Map();
  const inputs = [];
  const outputs = [];
  for (const f of new Reader(b, ...graph.value).fields()) {
    if (f.wire !== 2) continue;
    if (f.field === 1) nodes.push(parseNode(b, f.value));
    else if (f.field === 5) {
      const t = parseTensor(b, f.value);
      initializers.set(t.name, t);
    } else if (f.field === 11) inputs.push(valueInfoName(b, f.value));
    else if (f.field === 12) outputs.push(valueInfoName(b, f.value));
  }
  return { nodes, initializers, inputs: inputs.filter((n) => !initializers.has(n)), outputs };
}

/**
 * Spatial axes of a Conv / ConvTranspose / pool node: kernel_shape, else its constant weight's dims minus 2; null
 * when unknown. initializers: readOnnxGraph's map (or any map name → {dims}).
 */
export function spatialRank(n, initializers) {
  const k = n.attrs.kernel_shape?.ints;
  if (k?.length) return k.length;
  const w = initializers.get(n.inputs[1]);
  return (n.op === 'Conv' || n.op === 'ConvTranspose') && w && w.dims.length >= 3 ? w.dims.length - 2 : null;
}

/** The values of a small constant tensor (float or int64), or null. */
export function tensorValues(t) {
  if (!t) return null;
  if (t.floats.length) return t.floats;
  if (t.ints.length) return t.ints;
  if (t.raw) {
    const v = new DataView(t.raw.buffer, t.raw.byteOffset, t.raw.byteLength);
    if (t.dataType === 1) return Array.from({ length: t.raw.byteLength / 4 }, (_, i) => v.getFloat32(4 * i, true));
    if (t.dataType === 7) return Array.from({ length: t.raw.byteLength / 8 }, (_, i) => Number(v.getBigInt64(8 * i, true)));
  }
  return null;
}

/**
 * The scales of a Resize or Upsample node ([N, C, X, Y, Z] factors): Upsample's attribute (opset 7) or input 1 (opset
 * 9), Resize's input 2 (opset 11+) or 1 (opset 10); null when they are not constant (sizes given instead, or computed).
 * graph: readOnnxGraph's result.
 */
export function resizeScales(n, graph) {
  if (n.attrs.scales?.floats?.length) return n.attrs.scales.floats;
  return tensorValues(graph.initializers.get(n.inputs[n.op === 'Resize' && n.inputs.length > 2 ? 2 : 1]));
}
