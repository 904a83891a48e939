// WebGPU-ready graphs: rewrites, in the ONNX bytes, the volumetric operators ONNX Runtime Web 1.30.0's WebGPU
// execution providers refuse into operators they run, with the same result to float rounding.
//
// What refuses what (sources in node_modules/onnxruntime-web 1.30.0: docs/webgpu-operators.md and
// lib/wasm/jsep/webgpu/ops/*.ts; measured in Chromium on its SwiftShader WebGPU adapter, web/webgpu.test.js). Two
// WebGPU builds: ort.all.min.mjs / ort.min.mjs run the JSEP kernels (the TypeScript ones), ort.webgpu.min.mjs the C++
// WebGPU EP (ort-wasm-simd-threaded.asyncify.wasm). Both register the kernels, so sessions are created and the RUN
// fails:
//   - ConvTranspose over 3 spatial axes: JSEP conv-transpose.ts 'currently only support 2-dimensional conv'; C++ EP
//     'Only Conv2d or Conv1d are supported'. Docs table: "ConvTranspose3d is not supported".
//   - MaxPool / AveragePool over 3 spatial axes: JSEP pool.ts 'Pooling with kernelShape.length > 2 is not supported
//     for NHWC format' (the layout JSEP asks for); the C++ EP runs them.
//   - Conv over 3 spatial axes with pads that are not all equal: JSEP 3rd-party/conv3d_naive_webgpu.ts
//     'Unsupported padding parameter' (one pad for all six sides); the C++ EP runs them.
// What the rewrite uses instead, every one run by both builds (docs table rows; exact in the Chromium test): Conv over
// 3 axes with equal pads (JSEP conv.ts sends 5-D inputs to conv3d_naive_webgpu.ts; the docs' "conv3d is not
// supported" is out of date), Slice, Unsqueeze, Reshape and Shape ("no GPU kernel": views and shape arithmetic, which
// ORT places on the CPU with the int64 Div / Mul / Add / Concat / Gather that feed a Reshape or a Slice,
// fallback_cpu_capability.cc), Transpose (any rank: transpose.ts permFunctionBody), ReduceMax / ReduceMean (any rank
// and axes: reduce.ts).
// Two traps found in Chromium and avoided: a zero Pad before a Conv is folded back into unequal Conv pads by ORT's
// PadFusion (level 1), so no Pad node is ever emitted; and in JSEP a Slice with implicit axes and computed ends after
// a Conv (which the NHWC layout transform wraps in Transposes) gave wrong values, so every Slice names its axes.
//
//   ConvTranspose (3 axes, group 1, dilations 1, explicit pads, output_padding < stride, no output_shape):
//     the polyphase form. Along an axis with kernel k and stride s, output o' = q·s + r of the uncropped transposed
//     convolution is Σ_j x[q − j] · w[j·s + r], j < M = ⌈k/s⌉: a stride-1 convolution of x with the flipped
//     sub-kernel w[(M−1−m)·s + r] (zero where that index ≥ k). One Conv computes all s1·s2·s3 phases as output
//     channels (weights rearranged here, at load time: [Cout·S, Cin, M1, M2, M3], bias repeated per phase), then
//     depth-to-space (Unsqueeze, Reshape to [N, Cout, s1, s2, s3, Q1, Q2, Q3], Transpose to [N, Cout, Q1, s1, …],
//     Reshape to [N, Cout, Q1·s1, …] with the shape from Shape × [1, 0, s1, s2, s3]), and a Slice where pads,
//     output_padding or the Conv's one pad leave rows to crop. Stride 1 needs no depth-to-space.
//   MaxPool / AveragePool (3 axes, kernel = strides, no pads, dilations 1, ceil_mode 0, one output): Slice to a
//     multiple of the kernel (the pool's floor), Reshape to [N, C, D/k1, k1, H/k2, k2, W/k3, k3], ReduceMax or
//     ReduceMean over the window axes (3, 5, 7).
//   Conv (3 axes, pads not all equal): the Conv with one pad P ≥ every pad on all sides (P ≡ begin pad modulo the
//     stride, so the sampling grid stays), then a Slice to the original's outputs (equalPad).
// Anything else (groups, dilations, auto_pad SAME, output_shape, overlapping pools, a weight that is not an
// initializer, opset < 11) is left in place and listed in `unsupported` with the reason.
//
// The bytes are read and written at the protobuf wire level: every field the rewrite does not touch (other nodes,
// initializers, value_info, metadata, unknown fields) is copied as it is; only the rewritten ConvTranspose weights and
// biases are new data, and an initializer no node reads any more is dropped.

import { Reader, parseNode, parseTensor, valueInfoName, modelFields, spatialRank } from './onnx-graph.js';

// ----------------------------------------------------------------------------- protobuf wire format (reading: onnx-graph.js)

/** A protobuf message being written: a list of byte chunks (large payloads are referenced, not copied, until finish). */
class Writer {
  constructor() {
    this.parts = [];
    this.length = 0;
  }
  raw(u8) {
    this.parts.push(u8);
    this.length += u8.length;
    return this;
  }
  varint(n) {
    if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`varint out of range: ${n}`);
    const out = [];
    while (n >= 0x80) {
      out.push((n % 128) | 0x80);
      n = Math.floor(n / 128);
    }
    out.push(n);
    return this.raw(Uint8Array.from(out));
  }
  tag(field, wire) {
    return this.varint(field * 8 + wire);
  }
  int(field, n) {
    return this.tag(field, 0).varint(n);
  }
  bytes(field, u8) {
    return this.tag(field, 2).varint(u8.length).raw(u8);
  }
  string(field, s) {
    return this.bytes(field, new TextEncoder().encode(s));
  }
  message(field, w) {
    this.tag(field, 2).varint(w.length);
    for (const p of w.parts) this.raw(p);
    return this;
  }
  finish() {
    const out = new Uint8Array(this.length);
    let o = 0;
    for (const p of this.parts) {
      out.set(p, o);
      o += p.length;
    }
    return out;
  }
}

// ONNX field numbers (onnx.proto3). ModelProto: graph 7, opset_import 8. OperatorSetIdProto: domain 1, version 2.
// GraphProto: node 1, initializer 5, input 11, output 12, value_info 13. NodeProto: input 1, output 2, name 3,
// op_type 4, attribute 5, domain 7. AttributeProto: name 1, f 2, i 3, s 4, ints 8, type 20. TensorProto: dims 1,
// data_type 2, float_data 4, int64_data 7, name 8, raw_data 9, external_data 13, data_location 14.
const ATTR_INT = 2;
const ATTR_INTS = 7;
const FLOAT = 1;
const INT64 = 7;
const ELEMENT_BYTES = { 1: 4, 10: 2, 11: 8, 16: 2 }; // float, float16, double, bfloat16

/** The element bytes of a constant tensor (raw_data, or float_data re-encoded), or null where neither holds them. */
function tensorBytes(b, t) {
  if (t.external || !ELEMENT_BYTES[t.dataType]) return null;
  const n = t.dims.reduce((a, d) => a * d, 1);
  if (t.data) return t.data[1] - t.data[0] === n * ELEMENT_BYTES[t.dataType] ? b.subarray(...t.data) : null;
  if (t.dataType === FLOAT && t.floats.length === n) return new Uint8Array(Float32Array.from(t.floats).buffer);
  return null;
}

// ------------------------------------------------------------------------------------------------ graph building

function encodeAttrInts(name, ints) {
  const w = new Writer().string(1, name).int(20, ATTR_INTS);
  for (const v of ints) w.int(8, v);
  return w;
}

function encodeAttrInt(name, i) {
  return new Writer().string(1, name).int(20, ATTR_INT).int(3, i);
}

/** An int64 initializer (raw_data, little-endian). */
function encodeInt64(name, values) {
  const raw = new Uint8Array(new BigInt64Array(values.map((v) => BigInt(v))).buffer);
  const w = new Writer().int(1, values.length).int(2, INT64).string(8, name);
  return w.bytes(9, raw);
}

/** An initializer of dataType with dims and element bytes. */
function encodeTensor(name, dataType, dims, bytes) {
  const w = new Writer();
  for (const d of dims) w.int(1, d);
  return w.int(2, dataType).string(8, name).bytes(9, bytes);
}

/** Node fields: inputs, outputs, name, op, attributes (Writers or raw attribute spans). */
function encodeNode(b, { inputs, outputs, name, op, attrs = [] }) {
  const w = new Writer();
  for (const i of inputs) w.string(1, i);
  for (const o of outputs) w.string(2, o);
  w.string(3, name).string(4, op);
  for (const a of attrs) {
    if (a instanceof Writer) w.message(5, a);
    else w.bytes(5, b.subarray(...a));
  }
  return w;
}

const product = (a) => a.reduce((x, y) => x * y, 1);
const INT64_MAX = 2n ** 63n - 1n;

// -------------------------------------------------------------------------------------------------------- rewrite

/** The ai.onnx opset a model imports, or null. */
function onnxOpset(b, fields) {
  let version = null;
  for (const f of fields) {
    if (f.field !== 8 || f.wire !== 2) continue;
    let domain = '';
    let v = null;
    const r = new Reader(b, ...f.value);
    while (r.more()) {
      const { field, wire } = r.tag();
      if (field === 1 && wire === 2) domain = r.string(r.span());
      else if (field === 2 && wire === 0) v = r.int64();
      else r.skip(wire);
    }
    if (domain === '' || domain === 'ai.onnx') version = v;
  }
  return version;
}

/** The rewrite of one graph: node emitters share the name space, the new initializers and the opset's node forms. */
class Rewrite {
  constructor(b, opset, names, prefix) {
    this.b = b;
    this.opset = opset;
    this.names = names; // every name in the graph: fresh ones avoid them
    this.prefix = prefix;
    this.nodes = []; // Writers of the nodes replacing the current one
    this.newInits = []; // Writers
  }
  fresh(what) {
    let name = `${this.prefix}/${what}`;
    for (let i = 1; this.names.has(name); i++) name = `${this.prefix}/${what}_${i}`;
    this.names.add(name);
    return name;
  }
  node(op, inputs, attrs = [], output = null) {
    const out = output ?? this.fresh(op);
    this.nodes.push(encodeNode(this.b, { inputs, outputs: [out], name: this.fresh(`${op}_node`), op, attrs }));
    return out;
  }
  int64(what, values) {
    const name = this.fresh(what);
    this.newInits.push(encodeInt64(name, values));
    return name;
  }
  tensor(what, dataType, dims, bytes) {
    const name = this.fresh(what);
    this.newInits.push(encodeTensor(name, dataType, dims, bytes));
    return name;
  }
  /** Unsqueeze at axes (attribute before opset 13, input since). */
  unsqueeze(x, axes) {
    return this.opset >= 13 ? this.node('Unsqueeze', [x, this.int64('axes', axes)]) : this.node('Unsqueeze', [x], [encodeAttrInts('axes', axes)]);
  }
  /** ReduceMax / ReduceMean over axes, keepdims 0 (axes an attribute before opset 18, an input since). */
  reduce(op, x, axes, output) {
    const keep = encodeAttrInt('keepdims', 0);
    return this.opset >= 18 ? this.node(op, [x, this.int64('axes', axes)], [keep], output) : this.node(op, [x], [encodeAttrInts('axes', axes), keep], output);
  }
}

const gcd = (x, y) => (y ? gcd(y, x % y) : x);

/**
 * The one pad P for all six sides that the JSEP WebGPU conv3d takes (conv3d_naive_webgpu.ts: 'Unsupported padding
 * parameter' otherwise), in place of a 3D Conv's pads [b1, b2, b3, e1, e2, e3] with strides s: P ≥ every pad and
 * P ≡ b (mod s) on every axis, so that the Conv's outputs from P are the ones from pads, shifted by (P − b)/s and
 * cropped by a Slice. null when no P qualifies. (A Pad node instead would not do: ORT's PadFusion, level 1, folds a
 * zero Pad back into the Conv's pads.)
 */
function equalPad(pads, s) {
  const lo = Math.max(...pads);
  const period = s.reduce((x, y) => (x * y) / gcd(x, y), 1);
  for (let P = lo; P < lo + period; P++) if (s.every((sa, a) => (P - pads[a]) % sa === 0)) return P;
  return null;
}

/** Why a 3D ConvTranspose cannot be rewritten, or null. */
function convTransposeRefusal(n, w, bytes, biasBytes) {
  const ints = (k) => n.attrs[k]?.ints ?? [];
  if (!w) return `its weight '${n.inputs[1]}' is not an initializer`;
  if (w.dims.length !== 5) return `its weight has ${w.dims.length} dims (5 expected)`;
  if (!tensorBytes(bytes, w)) return `its weight '${w.name}' holds no readable float data (external or typed storage)`;
  if (n.inputs[2] && !biasBytes) return `its bias '${n.inputs[2]}' is not a readable initializer`;
  if ((n.attrs.group?.i ?? 1) !== 1) return `group ${n.attrs.group.i} (only 1 is rewritten)`;
  if (ints('dilations').some((d) => d !== 1)) return `dilations ${ints('dilations').join(',')} (only 1 is rewritten)`;
  const auto = n.attrs.auto_pad?.s ?? 'NOTSET';
  if (auto !== 'NOTSET' && auto !== 'VALID') return `auto_pad ${auto} (explicit pads only)`;
  if (ints('output_shape').length) return 'an output_shape attribute (its pads depend on the input size)';
  const k = ints('kernel_shape');
  if (k.length && k.some((v, i) => v !== w.dims[2 + i])) return `kernel_shape ${k.join(',')} does not match its weight`;
  const s = ints('strides').length ? ints('strides') : [1, 1, 1];
  const op = ints('output_padding').length ? ints('output_padding') : [0, 0, 0];
  if (op.some((v, i) => v >= s[i] || v < 0)) return `output_padding ${op.join(',')} is not below the strides`;
  return null;
}

/** Rewrites a 3D ConvTranspose (see the header) into r.nodes / r.newInits. */
function rewriteConvTranspose(r, n, w, biasBytes) {
  const ints = (k, d) => (n.attrs[k]?.ints?.length ? n.attrs[k].ints : d);
  const [cin, cout, ...k] = w.dims;
  const s = ints('strides', [1, 1, 1]);
  const pads = ints('pads', [0, 0, 0, 0, 0, 0]);
  const op = ints('output_padding', [0, 0, 0]);
  const M = k.map((ka, a) => Math.ceil(ka / s[a]));
  const S = product(s);
  // Conv pads: t whole leading rows of the uncropped output are never computed; the end pad covers the output.
  const t = M.map((m, a) => Math.min(Math.floor(pads[a] / s[a]), m - 1));
  const padBegin = M.map((m, a) => m - 1 - t[a]);
  const padEnd = M.map((m, a) => Math.max(0, Math.ceil((k[a] - pads[3 + a] + op[a]) / s[a]) - 1));
  const cropBegin = pads.slice(0, 3).map((p, a) => p - t[a] * s[a]);
  const cropEnd = padEnd.map((pe, a) => (pe + 1) * s[a] - k[a] + pads[3 + a] - op[a]);

  // Weights [Cout·S, Cin, M1, M2, M3]: channel co·S + phase(r), tap m = flipped sub-kernel tap.
  const size = ELEMENT_BYTES[w.dataType];
  const src = tensorBytes(r.b, w);
  const dst = new Uint8Array(cout * S * cin * product(M) * size);
  const kStride = [k[1] * k[2], k[2], 1];
  let o = 0;
  for (let co = 0; co < cout; co++) {
    for (let r1 = 0; r1 < s[0]; r1++) for (let r2 = 0; r2 < s[1]; r2++) for (let r3 = 0; r3 < s[2]; r3++) {
      const rr = [r1, r2, r3];
      for (let ci = 0; ci < cin; ci++) {
        for (let m1 = 0; m1 < M[0]; m1++) for (let m2 = 0; m2 < M[1]; m2++) for (let m3 = 0; m3 < M[2]; m3++, o += size) {
          const tap = [m1, m2, m3].map((m, a) => (M[a] - 1 - m) * s[a] + rr[a]);
          if (tap.some((v, a) => v >= k[a])) continue; // zero: the buffer starts zeroed
          const from = ((ci * cout + co) * k[0] * k[1] * k[2] + tap[0] * kStride[0] + tap[1] * kStride[1] + tap[2]) * size;
          dst.set(src.subarray(from, from + size), o);
        }
      }
    }
  }
  // One pad for all sides (equalPad; stride 1): the rows it adds are cropped with the rest.
  const P = Math.max(...padBegin, ...padEnd);
  padBegin.forEach((p, a) => (cropBegin[a] += (P - p) * s[a]));
  padEnd.forEach((p, a) => (cropEnd[a] += (P - p) * s[a]));
  const inputs = [n.inputs[0], r.tensor('weight', w.dataType, [cout * S, cin, ...M], dst)];
  if (biasBytes) {
    const bias = new Uint8Array(cout * S * size);
    for (let co = 0; co < cout; co++) for (let p = 0; p < S; p++) bias.set(biasBytes.subarray(co * size, (co + 1) * size), (co * S + p) * size);
    inputs.push(r.tensor('bias', w.dataType, [cout * S], bias));
  }
  const crop = cropBegin.some((c) => c !== 0) || cropEnd.some((c) => c !== 0);
  const out = n.outputs[0];
  const convAttrs = [encodeAttrInts('kernel_shape', M), encodeAttrInts('pads', Array(6).fill(P)), encodeAttrInts('strides', [1, 1, 1]), encodeAttrInts('dilations', [1, 1, 1]), encodeAttrInt('group', 1)];
  let y = r.node('Conv', inputs, convAttrs, S === 1 && !crop ? out : null);
  const parts = [`Conv ${M.join('×')} (${cin}→${cout * S} channels, pads ${P})`];
  if (S > 1) {
    // Depth-to-space: [N, Cout·S, Q…] → [N, Cout, s1, s2, s3, Q1, Q2, Q3] → [N, Cout, Q1, s1, Q2, s2, Q3, s3] → merged.
    const z = y;
    const view = r.node('Reshape', [r.unsqueeze(z, [2, 3, 4]), r.int64('phases', [0, cout, ...s, 0, 0, 0])]);
    const interleaved = r.node('Transpose', [view], [encodeAttrInts('perm', [0, 1, 5, 2, 6, 3, 7, 4])]);
    const shape = r.node('Mul', [r.node('Shape', [z]), r.int64('scale', [1, 0, ...s])]);
    y = r.node('Reshape', [interleaved, shape], [], crop ? null : out);
    parts.push('depth-to-space (Reshape, Transpose)');
  }
  if (crop) {
    const ends = cropEnd.map((c) => (c > 0 ? -c : INT64_MAX));
    r.node('Slice', [y, r.int64('starts', cropBegin), r.int64('ends', ends), r.int64('axes', [2, 3, 4])], [], out);
    parts.push('Slice');
  }
  return parts.join(' + ');
}

/** Rewrites a 3D Conv with unequal pads: the Conv with equalPad's P on every side, then a Slice to the original's outputs. */
function rewriteConv(r, n, w, pads) {
  const ints = (k, d) => (n.attrs[k]?.ints?.length ? n.attrs[k].ints : d);
  const s = ints('strides', [1, 1, 1]);
  const dil = ints('dilations', [1, 1, 1]);
  const extent = (n.attrs.kernel_shape?.ints ?? w.dims.slice(2)).map((k, a) => (k - 1) * dil[a] + 1);
  const P = equalPad(pads, s);
  const attrs = Object.values(n.attrs).filter((a) => a.name !== 'pads').map((a) => a.span);
  attrs.push(encodeAttrInts('pads', Array(6).fill(P)));
  const y = r.fresh('Conv');
  r.nodes.push(encodeNode(r.b, { inputs: n.inputs, outputs: [y], name: n.name || r.fresh('Conv_node'), op: 'Conv', attrs }));
  const starts = s.map((sa, a) => (P - pads[a]) / sa);
  let ends;
  if (s.every((sa) => sa === 1)) ends = r.int64('ends', pads.slice(3).map((e) => (e === P ? INT64_MAX : e - P)));
  else {
    // The original's output length along an axis, ⌊(L + b + e − extent)/s⌋ + 1, depends on L: ends from Shape.
    const spatial = r.node('Slice', [r.node('Shape', [n.inputs[0]]), r.int64('from', [2]), r.int64('to', [5])]);
    const offset = s.map((sa, a) => pads[a] + pads[3 + a] - extent[a] + sa + starts[a] * sa);
    ends = r.node('Div', [r.node('Add', [spatial, r.int64('offset', offset)]), r.int64('strides', s)]);
  }
  r.node('Slice', [y, r.int64('starts', starts), ends, r.int64('axes', [2, 3, 4])], [], n.outputs[0]);
  return `Conv (pads ${P}) + Slice`;
}

/** Why a 3D pool cannot be rewritten, or null. */
function poolRefusal(n) {
  const ints = (k) => n.attrs[k]?.ints ?? [];
  const k = ints('kernel_shape');
  const s = ints('strides').length ? ints('strides') : k.map(() => 1);
  if (k.some((v, i) => v !== s[i])) return `kernel ${k.join(',')} with strides ${s.join(',')} (only kernel = strides is rewritten)`;
  if (ints('pads').some((p) => p !== 0)) return `pads ${ints('pads').join(',')} (only unpadded pools are rewritten)`;
  if (ints('dilations').some((d) => d !== 1)) return `dilations ${ints('dilations').join(',')}`;
  const auto = n.attrs.auto_pad?.s ?? 'NOTSET';
  if (auto !== 'NOTSET' && auto !== 'VALID') return `auto_pad ${auto}`;
  if ((n.attrs.ceil_mode?.i ?? 0) !== 0) return 'ceil_mode 1';
  if (n.outputs.length > 1 && n.outputs[1]) return 'its Indices output';
  if ((n.attrs.storage_order?.i ?? 0) !== 0) return 'storage_order 1';
  return null;
}

/** Rewrites a 3D MaxPool / AveragePool with kernel = strides (see the header). */
function rewritePool(r, n) {
  const k = n.attrs.kernel_shape.ints;
  const kk = [1, 1, ...k];
  const x = n.inputs[0];
  const half = r.node('Div', [r.node('Shape', [x]), r.int64('kernel', kk)]);
  // Explicit axes: in ort.all.min.mjs (JSEP), a Slice with implicit axes and computed ends after a Conv (which
  // the NHWC layout transform wraps in Transposes) gave wrong values (measured in web/webgpu.test.js's Chromium).
  const ends = r.node('Slice', [r.node('Mul', [half, r.int64('kernel', kk)]), r.int64('from', [2]), r.int64('to', [5])]);
  const whole = r.node('Slice', [x, r.int64('starts', [0, 0, 0]), ends, r.int64('axes', [2, 3, 4])]);
  const shape8 = r.node('Gather', [r.node('Concat', [half, r.int64('window', k)], [encodeAttrInt('axis', 0)]), r.int64('order', [0, 1, 2, 5, 3, 6, 4, 7])], [encodeAttrInt('axis', 0)]);
  const windows = r.node('Reshape', [whole, shape8]);
  const op = n.op === 'MaxPool' ? 'ReduceMax' : 'ReduceMean';
  r.reduce(op, windows, [3, 5, 7], n.outputs[0]);
  return `Slice + Reshape [N, C, D/${k[0]}, ${k[0]}, H/${k[1]}, ${k[1]}, W/${k[2]}, ${k[2]}] + ${op}`;
}

const REWRITTEN_OPS = new Set(['ConvTranspose', 'MaxPool', 'AveragePool', 'Conv']);

/**
 * Rewrites the operators ONNX Runtime Web 1.30.0's WebGPU EPs refuse on volumes (3D ConvTranspose, 3D MaxPool /
 * AveragePool, 3D Conv with unequal pads) into ones they run, with the same result to float rounding (header).
 * Returns {bytes (the input itself when nothing is rewritten), rewritten: [{op, node, as}] (one per node, as: what
 * replaced it), unsupported: [{op, node, reason}] (3D ConvTranspose / pools left in place, and why)}.
 * ops: the operator types to rewrite (default all four; others are left in place, unlisted), e.g. ['ConvTranspose'],
 * the part that also runs faster on the wasm backend (9-14 % per patch for the demo and the xQSM stand-in).
 * Precondition: modelBytes hold an ONNX model (else an Error naming what is wrong).
 * Precondition: ops names only ConvTranspose, MaxPool, AveragePool or Conv (else a TypeError naming them).
 * @param {Uint8Array|ArrayBuffer} modelBytes
 * @param {{ops?: string[]}} [options]
 */
export function rewriteForWebGpu(modelBytes, { ops = [...REWRITTEN_OPS] } = {}) {
  const unknown = Array.isArray(ops) ? ops.filter((op) => !REWRITTEN_OPS.has(op)) : [`${typeof ops} (not an array)`];
  if (unknown.length) throw new TypeError(`rewriteForWebGpu: ops are among ${[...REWRITTEN_OPS].join(', ')}; got ${unknown.join(', ')}`);
  const chosen = new Set(ops);
  const b = modelBytes instanceof Uint8Array ? modelBytes : new Uint8Array(modelBytes);
  const { fields, graph: graphField } = modelFields(b);
  const opset = onnxOpset(b, fields);
  const records = new Reader(b, ...graphField.value).fields();

  const names = new Set();
  const inits = new Map();
  const nodes = new Map(); // record → parsed node
  const interfaceNames = new Set(); // graph inputs and outputs: never dropped
  const reads = new Map(); // tensor name → number of node inputs reading it
  for (const rec of records) {
    if (rec.wire !== 2) continue;
    if (rec.field === 1) {
      const n = parseNode(b, rec.value);
      nodes.set(rec, n);
      for (const t of [...n.inputs, ...n.outputs]) names.add(t);
      for (const t of n.inputs) reads.set(t, (reads.get(t) ?? 0) + 1);
      names.add(n.name);
    } else if (rec.field === 5) {
      const t = parseTensor(b, rec.value);
      inits.set(t.name, t);
      names.add(t.name);
    } else if (rec.field === 11 || rec.field === 12 || rec.field === 13) {
      const name = valueInfoName(b, rec.value);
      names.add(name);
      if (rec.field !== 13) interfaceNames.add(name);
    }
  }

  const rewritten = [];
  const unsupported = [];
  const replaced = new Map(); // record → Rewrite
  for (const [rec, n] of nodes) {
    if (!chosen.has(n.op) || (n.domain && n.domain !== 'ai.onnx') || spatialRank(n, inits) !== 3) continue;
    const label = n.name || n.outputs[0];
    const pads = n.attrs.pads?.ints ?? [];
    const group = n.attrs.group?.i ?? 1;
    if (n.op === 'Conv' && group === 1 && !(pads.length === 6 && pads.some((p) => p !== pads[0]) && (n.attrs.auto_pad?.s ?? 'NOTSET') === 'NOTSET')) continue;
    let reason = opset === null ? 'the model imports no ai.onnx opset' : opset < 11 ? `opset ${opset} (the rewrite needs 11 or later)` : null;
    if (!reason && n.op === 'Conv') {
      if (group !== 1) reason = `group ${group}: JSEP's conv3d ignores groups (wrong values), the C++ EP refuses them`;
      else if (n.outputs.length !== 1) reason = `${n.outputs.length} outputs`;
      else if (equalPad(pads, n.attrs.strides?.ints?.length ? n.attrs.strides.ints : [1, 1, 1]) === null) reason = `pads ${pads.join(',')}: no equal pad lands on the same stride grid`;
    }
    const w = inits.get(n.inputs[1]);
    const bias = n.op === 'ConvTranspose' && n.inputs[2] ? inits.get(n.inputs[2]) : null;
    const biasBytes = bias && bias.dataType === w?.dataType && bias.dims.length === 1 ? tensorBytes(b, bias) : null;
    if (!reason && n.op === 'ConvTranspose') reason = convTransposeRefusal(n, w, b, biasBytes);
    if (!reason && (n.op === 'MaxPool' || n.op === 'AveragePool')) reason = poolRefusal(n);
    if (reason) {
      unsupported.push({ op: n.op, node: label, reason });
      continue;
    }
    const r = new Rewrite(b, opset, names, `webgpu/${label}`);
    let as;
    if (n.op === 'ConvTranspose') {
      as = rewriteConvTranspose(r, n, w, biasBytes);
      for (const t of n.inputs.slice(1)) if (t) reads.set(t, reads.get(t) - 1); // its weight and bias: replaced
    } else if (n.op === 'Conv') {
      as = rewriteConv(r, n, w, pads);
    } else as = rewritePool(r, n);
    replaced.set(rec, r);
    rewritten.push({ op: n.op, node: label, as });
  }
  if (!replaced.size) return { bytes: b, rewritten, unsupported };

  // The graph again: replaced nodes give way to theirs, initializers no node reads any more are dropped.
  const graph = new Writer();
  const added = [];
  for (const rec of records) {
    const r = replaced.get(rec);
    if (r) {
      for (const w of r.nodes) graph.message(1, w);
      added.push(...r.newInits);
      continue;
    }
    if (rec.field === 5 && rec.wire === 2) {
      const t = inits.get(parseTensor(b, rec.value).name);
      if (!reads.get(t.name) && !interfaceNames.has(t.name)) continue;
    }
    graph.raw(b.subarray(rec.start, rec.end));
  }
  for (const w of added) graph.message(5, w);
  const model = new Writer();
  for (const f of fields) {
    if (f === graphField) model.message(7, graph);
    else model.raw(b.subarray(f.start, f.end));
  }
  return { bytes: model.finish(), rewritten, unsupported };
}
