#!/usr/bin/env node
// Opt-in reduced-precision variants of a network (issue #12, "Precision"): never a default; bench/precision.js measures
// their speed in ONNX Runtime Web and the fidelity of their whole-volume χ against the fp32 one.
//
//   node --no-experimental-fetch scripts/quantize.js IN.onnx OUT.onnx --mode int8-qdq|int8-dynamic|fp16
//        [--calib N] [--calib-source phantom|random] [--calib-dims 96,96,80] [--calib-seed 1001] [--calib-group G]
//        [--activations uint8|int8] [--method minmax|percentile] [--percentile 99.999] [--exclude first,last]
//        [--min-out-channels C] [--model ID] [--threads 2] [--report FILE.json]
//
// Modes (graphs read and written with onnx-proto, like scripts/standins.js):
//   int8-qdq      static QDQ, the format ORT's graph optimiser fuses into QLinearConv: every Conv whose weight is an
//                 initializer gets its weight stored as int8, per output channel, symmetric (scale max|w|/127, zero
//                 point 0) behind a DequantizeLinear, its bias as int32 at scale x_scale·w_scale (zero point 0), and
//                 QuantizeLinear → DequantizeLinear pairs on its data input and its output (per tensor, uint8 or int8,
//                 asymmetric). A Conv's output is read dequantized by all its consumers (ORT fuses Conv → Q only when
//                 the Q is the one consumer); a Conv's input only by the quantized Convs (and MaxPools) that read it:
//                 a skip connection's Concat or a ConvTranspose keeps the f32 tensor. A MaxPool whose output is
//                 quantized takes its input's scale and zero point (its values are a subset of its input's: exact, and
//                 ORT runs it on 8-bit data). ConvTranspose stays fp32 (ORT's CPU EP has no quantized 3D transposed
//                 convolution). A BatchNormalization right after a Conv is folded into it first.
//                 Activation ranges come from calibration: the fp32 network runs in ONNX Runtime Web with those
//                 tensors added as graph outputs, on N phantom fields (the repository's numerical head phantom through
//                 the wasm module: dist/wasm must be built; seeds 1001… by default) or N smooth random fields
//                 (--calib-source random); --method minmax (default) or percentile (the ±percentile of a sample).
//                 --calib-group G: at most G tensors per calibration session (all of a run's outputs are alive at
//                 once: a wide network on a large field needs this to stay within the 4 GB wasm heap).
//   int8-dynamic  every such Conv becomes DynamicQuantizeLinear (uint8, the range of each input tensor, measured at run
//                 time) → ConvInteger (int8 weights, one zero point, per-channel scale applied after) → Cast → Mul
//                 (x_scale·w_scale) → Add bias. No calibration; but a tensor's scale then depends on the patch it is in.
//   fp16          every float initializer and Constant becomes float16, Casts at the graph's inputs and outputs (the
//                 graph's interface stays float32).
// Which Convs (int8 modes): --exclude (default first,last) keeps Convs fp32 by node name, or 'first' / 'last' (the
// first and last Conv in graph order: they quantize the field itself and χ itself, and cost little: the first has one
// input channel, the last is 1×1×1); 'none' quantizes every Conv. --min-out-channels C keeps Convs with fewer than C
// output channels fp32 (in ORT Web, QLinearConv is slower than the f32 Conv on 16-channel 3D layers).
// --model ID: the registry network whose input normalisation ((field − inputMean) / inputStd) the calibration fields
// get, as Tessera would feed them (default: none, the field in ppm as the demo U-Net takes it).
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import onnxProto from 'onnx-proto';
import { prng } from '../tests/js/onnx-build.js';

export const { onnx } = onnxProto;
const DT = onnx.TensorProto.DataType;

export const MODES = ['int8-qdq', 'int8-dynamic', 'fp16'];

// ----------------------------------------------------------------------------------------------------- model I/O

/** The model in path, decoded; clear errors for a missing file and for bytes that are not an ONNX model. */
export function readModel(file) {
  if (!fs.existsSync(file)) throw new Error(`quantize: input model '${file}' does not exist`);
  return decodeModel(new Uint8Array(fs.readFileSync(file)), file);
}

/** Decoded ModelProto; throws naming `what` when the bytes are not an ONNX model with a graph. */
export function decodeModel(bytes, what = 'the model') {
  let m;
  try {
    m = onnx.ModelProto.decode(bytes);
  } catch (e) {
    throw new Error(`quantize: ${what} is not an ONNX model (${e.message})`);
  }
  if (!m.graph || m.graph.node.length === 0) throw new Error(`quantize: ${what} is not an ONNX model (no graph nodes)`);
  return m;
}

const opset = (m) => Number((m.opsetImport.find((o) => !o.domain) ?? { version: 0 }).version);

/** An f32 view of a float TensorProto's values (raw_data or float_data). */
export function floatsOf(t) {
  if (t.dataType !== DT.FLOAT) throw new Error(`quantize: tensor '${t.name}' is not float32 (data type ${t.dataType})`);
  if (t.rawData && t.rawData.length) {
    const c = new Uint8Array(t.rawData); // an aligned copy (a decoded Buffer's slice() would be an unaligned view)
    return new Float32Array(c.buffer, c.byteOffset, c.byteLength / 4);
  }
  return Float32Array.from(t.floatData);
}

function rawTensor(name, dims, dataType, typed) {
  return onnx.TensorProto.create({ name, dims, dataType, rawData: new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength) });
}
const f32Tensor = (name, dims, data) => rawTensor(name, dims, DT.FLOAT, data instanceof Float32Array ? data : Float32Array.from(data));
const attr = (name, v) =>
  Array.isArray(v)
    ? onnx.AttributeProto.create({ name, type: onnx.AttributeProto.AttributeType.INTS, ints: v })
    : onnx.AttributeProto.create({ name, type: onnx.AttributeProto.AttributeType.INT, i: v });
const mkNode = (opType, input, output, attribute = [], name = output[0]) => onnx.NodeProto.create({ opType, input, output, attribute, name });
/** The prefix of the tensors made for node n: its name, or its output's (ONNX allows empty node names). */
const prefixOf = (n) => n.name || n.output[0];
const floatOutput = (name) => onnx.ValueInfoProto.create({ name, type: { tensorType: { elemType: DT.FLOAT } } });

// ------------------------------------------------------------------------------------------------- graph queries

/** The Convs the mode would quantize (weight an f32 initializer) and the ones --exclude keeps in fp32. */
export function selectConvs(m, exclude = ['first', 'last'], minOutChannels = 1) {
  const inits = new Map(m.graph.initializer.map((t) => [t.name, t]));
  const convs = m.graph.node.filter((n) => n.opType === 'Conv');
  const names = new Set(convs.map((n) => n.name));
  for (const e of exclude) {
    if (!['first', 'last', 'none'].includes(e) && !names.has(e))
      throw new Error(`quantize: --exclude '${e}' is not a Conv of the graph (Convs: ${[...names].slice(0, 8).join(', ')}${names.size > 8 ? ', …' : ''})`);
  }
  const keep = new Set(exclude.filter((e) => names.has(e)));
  if (exclude.includes('first') && convs.length) keep.add(convs[0].name);
  if (exclude.includes('last') && convs.length) keep.add(convs[convs.length - 1].name);
  const quantized = [], kept = [];
  for (const n of convs) {
    const w = inits.get(n.input[1]);
    const ok = w && w.dataType === DT.FLOAT && (n.input.length < 3 || !n.input[2] || inits.get(n.input[2])?.dataType === DT.FLOAT);
    const narrow = ok && Number(w.dims[0]) < minOutChannels;
    if (ok && !keep.has(n.name) && !narrow) quantized.push(n);
    else kept.push({ name: n.name, why: !ok ? 'weight or bias is not an f32 initializer' : keep.has(n.name) ? 'excluded' : `${Number(w.dims[0])} output channels < ${minOutChannels}` });
  }
  return { quantized, kept };
}

/**
 * Folds every BatchNormalization (inference form) that is the only consumer of a Conv's output into that Conv's weight
 * and bias (exact up to f32 rounding), as quantization tools do first: a Q/DQ pair between them would keep ORT from
 * fusing them, and the folded weights are the ones to quantize. Returns how many were folded.
 */
export function foldBatchNorms(m) {
  const g = m.graph;
  const inits = new Map(g.initializer.map((t) => [t.name, t]));
  const consumers = new Map();
  for (const n of g.node) for (const i of n.input) consumers.set(i, [...(consumers.get(i) ?? []), n]);
  const outputs = new Set(g.output.map((o) => o.name));
  const drop = new Set(), rename = new Map();
  let folded = 0;
  for (const c of g.node) {
    if (c.opType !== 'Conv') continue;
    const users = consumers.get(c.output[0]) ?? [];
    const bn = users[0];
    if (users.length !== 1 || bn.opType !== 'BatchNormalization' || outputs.has(c.output[0]) || bn.output.length !== 1 || outputs.has(bn.output[0])) continue;
    const w = inits.get(c.input[1]);
    const p = bn.input.slice(1, 5).map((x) => inits.get(x));
    if (!w || w.dataType !== DT.FLOAT || p.some((t) => !t || t.dataType !== DT.FLOAT)) continue;
    if (c.input[2] && inits.get(c.input[2])?.dataType !== DT.FLOAT) continue;
    const eps = bn.attribute.find((a) => a.name === 'epsilon')?.f ?? 1e-5;
    const [gamma, beta, mean, variance] = p.map(floatsOf);
    const wf = floatsOf(w), cout = Number(w.dims[0]), per = wf.length / cout;
    const b = c.input[2] ? floatsOf(inits.get(c.input[2])) : new Float32Array(cout);
    const w2 = new Float32Array(wf.length), b2 = new Float32Array(cout);
    for (let o = 0; o < cout; o++) {
      const k = gamma[o] / Math.sqrt(variance[o] + eps);
      for (let i = o * per; i < (o + 1) * per; i++) w2[i] = wf[i] * k;
      b2[o] = (b[o] - mean[o]) * k + beta[o];
    }
    const wn = `${prefixOf(c)}_weight_bn_folded`, bnm = `${prefixOf(c)}_bias_bn_folded`;
    g.initializer.push(f32Tensor(wn, w.dims, w2), f32Tensor(bnm, [cout], b2));
    c.input = [c.input[0], wn, bnm];
    rename.set(bn.output[0], c.output[0]);
    drop.add(bn);
    folded++;
  }
  if (!folded) return 0;
  g.node = g.node.filter((n) => !drop.has(n));
  for (const n of g.node) n.input = n.input.map((x) => rename.get(x) ?? x);
  const used = new Set(g.node.flatMap((n) => n.input));
  g.initializer = g.initializer.filter((t) => used.has(t.name));
  return folded;
}

/** The activation tensors int8-qdq quantizes: each quantized Conv's data input and output; MaxPool outputs share. */
export function activationTensors(m, convs) {
  const producer = new Map();
  for (const n of m.graph.node) for (const o of n.output) producer.set(o, n);
  const tensors = new Set();
  for (const c of convs) (tensors.add(c.input[0]), tensors.add(c.output[0]));
  const shareWith = new Map(); // tensor → the tensor whose parameters it takes
  for (const t of [...tensors]) {
    let u = t;
    while (producer.get(u)?.opType === 'MaxPool') u = producer.get(u).input[0];
    if (u !== t) (shareWith.set(t, u), tensors.add(u));
  }
  return { tensors: [...tensors], shareWith };
}

// --------------------------------------------------------------------------------------------------- calibration

/** A z-fastest [1,1,X,Y,Z] copy of an x-fastest volume (the layout Tessera feeds the network). */
function toTensorLayout(v, [nx, ny, nz]) {
  const out = new Float32Array(v.length);
  for (let z = 0; z < nz; z++) for (let y = 0; y < ny; y++) for (let x = 0; x < nx; x++) out[(x * ny + y) * nz + z] = v[x + nx * (y + ny * z)];
  return out;
}


/**
 * A smooth random field in ppm inside an ellipsoid mask (zero outside), scaled like a local field (std ≈ 0.03 ppm,
 * extremes ≈ ±0.15): a sum of 40 Gaussian blobs (σ 2–10 voxels) of either sign. x-fastest, like the phantom.
 */
export function randomField(dims, seed) {
  const [nx, ny, nz] = dims;
  const r = prng(seed);
  const field = new Float32Array(nx * ny * nz), mask = new Uint8Array(nx * ny * nz);
  const blobs = Array.from({ length: 40 }, () => ({
    c: [r() * nx, r() * ny, r() * nz], s: 2 + 8 * r(), a: (r() < 0.5 ? -1 : 1) * (0.02 + 0.1 * r() ** 2),
  }));
  const ax = [0.38 + 0.08 * r(), 0.38 + 0.08 * r(), 0.38 + 0.08 * r()];
  for (let z = 0; z < nz; z++)
    for (let y = 0; y < ny; y++)
      for (let x = 0; x < nx; x++) {
        const e = ((x - nx / 2) / (ax[0] * nx)) ** 2 + ((y - ny / 2) / (ax[1] * ny)) ** 2 + ((z - nz / 2) / (ax[2] * nz)) ** 2;
        if (e > 1) continue;
        let v = 0;
        for (const b of blobs) v += b.a * Math.exp(-((x - b.c[0]) ** 2 + (y - b.c[1]) ** 2 + (z - b.c[2]) ** 2) / (2 * b.s * b.s));
        const i = x + nx * (y + ny * z);
        field[i] = v;
        mask[i] = 1;
      }
  return { field, mask };
}

/**
 * count calibration inputs, each {dims: [1,1,X,Y,Z], data} in the network's layout: the phantom (seeds seed, seed+1, …;
 * the wasm module M from bindings/js/module.js) or smooth random fields; normalisation {inputMean, inputStd} applied
 * inside the mask as Tessera does (zero outside).
 */
export async function calibrationInputs({ count = 4, source = 'phantom', dims = [96, 96, 80], seed = 1001, M = null, normalization = null }) {
  if (!Number.isInteger(count) || count < 1) throw new Error(`quantize: --calib must be a positive integer (got ${count})`);
  if (dims.length !== 3 || dims.some((d) => !Number.isInteger(d) || d < 8)) throw new Error(`quantize: --calib-dims must be three integers ≥ 8 (got ${dims.join(',')})`);
  if (!['phantom', 'random'].includes(source)) throw new Error(`quantize: --calib-source must be phantom or random (got '${source}')`);
  if (source === 'phantom' && !M) M = await loadModule();
  const out = [];
  for (let i = 0; i < count; i++) {
    const { field, mask } =
      source === 'phantom' ? M.phantom({ dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] }, { seed: seed + i, threads: 2 }) : randomField(dims, seed + i);
    const x = Float32Array.from(field);
    if (normalization) for (let j = 0; j < x.length; j++) x[j] = mask[j] ? (x[j] - normalization.inputMean) / normalization.inputStd : 0;
    out.push({ dims: [1, 1, ...dims], data: toTensorLayout(x, dims) });
  }
  return out;
}

async function loadModule() {
  const { loadTesseraModule } = await import('../bindings/js/debug.js');
  try {
    return await loadTesseraModule({ pthreadPoolSize: 2 });
  } catch (e) {
    throw new Error(`quantize: the phantom needs the wasm module (build it: scripts/build.sh all), or use --calib-source random (${e.message})`);
  }
}

let ortPromise = null;
/** onnxruntime-web (wasm EP) in node, `threads` threads, errors only. */
export async function loadOrt(threads = 1) {
  ortPromise ??= import('onnxruntime-web');
  const ort = await ortPromise;
  ort.env.wasm.numThreads = threads;
  ort.env.logLevel = 'error';
  return ort;
}

/**
 * Runs the fp32 model with `names` as extra graph outputs on every input; per tensor {min, max} and, when `samples`,
 * a sample of at most `sample` values per input (every k-th voxel) to take percentiles from. group: at most this many
 * extra outputs per session (one run of every input per group): every output of a run is alive at once, so a wide
 * network on a large field needs groups to stay within the wasm heap.
 */
export async function calibrate(m, names, inputs, { threads = 1, samples = false, sample = 1 << 18, group = Infinity } = {}) {
  if (!(group >= 1)) throw new Error(`quantize: --calib-group must be ≥ 1 (got ${group})`);
  const graphInputs = new Set(m.graph.input.map((i) => i.name));
  const stats = new Map(names.map((n) => [n, { min: Infinity, max: -Infinity, samples: [] }]));
  const outputs = names.filter((n) => !graphInputs.has(n));
  const groups = [];
  for (let i = 0; i < Math.max(outputs.length, 1); i += group) groups.push(outputs.slice(i, i + group));
  const ort = await loadOrt(threads);
  const accumulate = (n, d) => {
    const s = stats.get(n);
    let lo = s.min, hi = s.max;
    for (let i = 0; i < d.length; i++) {
      const v = d[i];
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    s.min = lo;
    s.max = hi;
    if (!samples) return;
    const step = Math.max(1, Math.floor(d.length / sample));
    const part = new Float32Array(Math.ceil(d.length / step));
    for (let i = 0, j = 0; i < d.length; i += step) part[j++] = d[i];
    s.samples.push(part);
  };
  for (const inp of inputs) for (const n of names) if (graphInputs.has(n)) accumulate(n, inp.data);
  for (const g of groups) {
    if (!g.length) continue;
    const cm = onnx.ModelProto.decode(onnx.ModelProto.encode(m).finish());
    const have = new Set(cm.graph.output.map((o) => o.name));
    for (const n of g) if (!have.has(n)) cm.graph.output.push(floatOutput(n));
    const session = await ort.InferenceSession.create(onnx.ModelProto.encode(cm).finish(), { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
    try {
      for (const inp of inputs) {
        const out = await session.run({ [session.inputNames[0]]: new ort.Tensor('float32', inp.data, inp.dims) });
        for (const n of g) accumulate(n, out[n].data);
        for (const t of Object.values(out)) t.dispose?.();
      }
    } finally {
      await session.release();
    }
  }
  return stats;
}

/** The range to quantize: [min, max] of the calibration, or the (100 − p, p) percentiles of the sampled values. */
export function rangeOf(s, method = 'minmax', percentile = 99.999) {
  if (!Number.isFinite(s.min) || !Number.isFinite(s.max)) throw new Error('quantize: calibration gave a non-finite activation range');
  if (method === 'minmax') return [s.min, s.max];
  const all = new Float32Array(s.samples.reduce((a, x) => a + x.length, 0));
  let o = 0;
  for (const x of s.samples) (all.set(x, o), (o += x.length));
  all.sort();
  const q = (p) => all[Math.min(all.length - 1, Math.max(0, Math.round((p / 100) * (all.length - 1))))];
  return [q(100 - percentile), q(percentile)];
}

/** Asymmetric per-tensor parameters for [lo, hi] (0 always representable): {scale, zeroPoint}. */
export function activationParams([lo, hi], type = 'uint8') {
  const [qmin, qmax] = type === 'uint8' ? [0, 255] : [-128, 127];
  lo = Math.min(lo, 0);
  hi = Math.max(hi, 0);
  let scale = (hi - lo) / (qmax - qmin);
  if (!(scale > 0)) scale = 1; // an all-zero tensor
  scale = Math.fround(scale);
  const zeroPoint = Math.min(qmax, Math.max(qmin, Math.round(qmin - lo / scale)));
  return { scale, zeroPoint };
}

/** Per-output-channel symmetric int8: {q: Int8Array, scales: Float32Array} for a weight [cout, ...]. */
export function quantizeWeights(w, cout) {
  const per = w.length / cout;
  const q = new Int8Array(w.length), scales = new Float32Array(cout);
  for (let c = 0; c < cout; c++) {
    let a = 0;
    for (let i = c * per; i < (c + 1) * per; i++) a = Math.max(a, Math.abs(w[i]));
    const s = Math.fround(a > 0 ? a / 127 : 1);
    scales[c] = s;
    for (let i = c * per; i < (c + 1) * per; i++) q[i] = Math.max(-127, Math.min(127, Math.round(w[i] / s)));
  }
  return { q, scales };
}

// ---------------------------------------------------------------------------------------------------- the modes

function removeInitializers(m, names) {
  const used = new Set();
  for (const n of m.graph.node) for (const i of n.input) used.add(i);
  m.graph.initializer = m.graph.initializer.filter((t) => !names.has(t.name) || used.has(t.name));
}

/**
 * int8-qdq: {model, report}. params: Map tensor → {scale, zeroPoint} for every activation tensor of
 * activationTensors() (from calibration), type 'uint8' | 'int8'.
 */
export function applyQdq(m, convs, params, type = 'uint8') {
  if (opset(m) < 13) throw new Error(`quantize: int8-qdq needs opset ≥ 13 (per-axis DequantizeLinear); the model has opset ${opset(m)}`);
  const inits = new Map(m.graph.initializer.map((t) => [t.name, t]));
  const zpType = type === 'uint8' ? DT.UINT8 : DT.INT8;
  const zpArray = (v) => (type === 'uint8' ? Uint8Array.of(v) : Int8Array.of(v));
  const newInits = [], before = new Map(); // node → nodes to insert before it
  const qNodes = [];
  const dqOf = new Map(); // activation tensor → its DequantizeLinear output
  for (const [t, p] of params) {
    const s = `${t}_scale`, z = `${t}_zero_point`;
    newInits.push(f32Tensor(s, [], [p.scale]), rawTensor(z, [], zpType, zpArray(p.zeroPoint)));
    qNodes.push(mkNode('QuantizeLinear', [t, s, z], [`${t}_quantized`]), mkNode('DequantizeLinear', [`${t}_quantized`, s, z], [`${t}_dequantized`]));
    dqOf.set(t, `${t}_dequantized`);
  }
  const replaced = new Set();
  for (const c of convs) {
    const wT = inits.get(c.input[1]);
    const cout = Number(wT.dims[0]);
    const { q, scales } = quantizeWeights(floatsOf(wT), cout);
    const wq = `${prefixOf(c)}_weight_quantized`;
    newInits.push(rawTensor(wq, wT.dims, DT.INT8, q), f32Tensor(`${wq}_scale`, [cout], scales), rawTensor(`${wq}_zero_point`, [cout], DT.INT8, new Int8Array(cout)));
    const dqs = [mkNode('DequantizeLinear', [wq, `${wq}_scale`, `${wq}_zero_point`], [`${wq}_dequantized`], [attr('axis', 0)])];
    const inputs = [c.input[0], `${wq}_dequantized`];
    replaced.add(c.input[1]);
    if (c.input.length > 2 && c.input[2]) {
      const b = floatsOf(inits.get(c.input[2]));
      const xs = params.get(c.input[0]).scale;
      const bs = new Float32Array(cout), bq = new Int32Array(cout);
      for (let o = 0; o < cout; o++) {
        bs[o] = Math.fround(xs * scales[o]);
        bq[o] = Math.max(-(2 ** 31), Math.min(2 ** 31 - 1, Math.round(b[o] / bs[o])));
      }
      const bn = `${prefixOf(c)}_bias_quantized`;
      newInits.push(rawTensor(bn, [cout], DT.INT32, bq), f32Tensor(`${bn}_scale`, [cout], bs), rawTensor(`${bn}_zero_point`, [cout], DT.INT32, new Int32Array(cout)));
      dqs.push(mkNode('DequantizeLinear', [bn, `${bn}_scale`, `${bn}_zero_point`], [`${bn}_dequantized`], [attr('axis', 0)]));
      inputs.push(`${bn}_dequantized`);
      replaced.add(c.input[2]);
    }
    c.input = inputs;
    before.set(c, dqs);
  }
  // Who reads the dequantized tensor (the Q/DQ pair's own QuantizeLinear reads the original): every consumer of a
  // quantized Conv's output (ORT fuses Conv → Q only when Q is the output's one consumer); otherwise only the quantized
  // Convs and the MaxPools that run on 8-bit data. Other consumers (a skip connection's Concat, a ConvTranspose) keep
  // the f32 tensor: quantizing what they read would add error and no speed.
  const quantizedConv = new Set(convs);
  const fromQuantizedConv = new Set(convs.map((c) => c.output[0]));
  const readsDq = (n, t) => fromQuantizedConv.has(t) || quantizedConv.has(n) || (n.opType === 'MaxPool' && params.has(n.output[0]));
  for (const n of m.graph.node) n.input = n.input.map((i) => (dqOf.has(i) && readsDq(n, i) ? dqOf.get(i) : i));
  // Order: a Q/DQ pair right after its tensor's producer (graph inputs: first); weight DQs before their Conv.
  const producer = new Map();
  for (const n of m.graph.node) for (const o of n.output) producer.set(o, n);
  const after = new Map();
  const head = [];
  for (let i = 0; i < qNodes.length; i += 2) {
    const p = producer.get(qNodes[i].input[0]);
    if (p) after.set(p, [...(after.get(p) ?? []), qNodes[i], qNodes[i + 1]]);
    else head.push(qNodes[i], qNodes[i + 1]);
  }
  const nodes = [...head];
  for (const n of m.graph.node) nodes.push(...(before.get(n) ?? []), n, ...(after.get(n) ?? []));
  m.graph.node = nodes;
  m.graph.initializer.push(...newInits);
  removeInitializers(m, replaced);
  return m;
}

/** int8-dynamic: DynamicQuantizeLinear → ConvInteger → Cast → Mul → Add per Conv. */
export function applyDynamic(m, convs) {
  if (opset(m) < 11) throw new Error(`quantize: int8-dynamic needs opset ≥ 11 (DynamicQuantizeLinear); the model has opset ${opset(m)}`);
  const inits = new Map(m.graph.initializer.map((t) => [t.name, t]));
  const replace = new Map(), replaced = new Set();
  for (const c of convs) {
    const wT = inits.get(c.input[1]);
    const cout = Number(wT.dims[0]);
    const rank = wT.dims.length;
    const { q, scales } = quantizeWeights(floatsOf(wT), cout);
    const p = prefixOf(c);
    const bshape = [1, cout, ...Array(rank - 2).fill(1)];
    const ni = [
      rawTensor(`${p}_weight_quantized`, wT.dims, DT.INT8, q),
      rawTensor(`${p}_weight_zero_point`, [], DT.INT8, new Int8Array(1)), // ConvInteger takes one zero point (the scale is per channel, applied after)
      f32Tensor(`${p}_weight_scale`, bshape, scales),
    ];
    const y = c.output[0];
    const nodes = [
      mkNode('DynamicQuantizeLinear', [c.input[0]], [`${p}_x_quantized`, `${p}_x_scale`, `${p}_x_zero_point`]),
      mkNode('ConvInteger', [`${p}_x_quantized`, `${p}_weight_quantized`, `${p}_x_zero_point`, `${p}_weight_zero_point`], [`${p}_int32`], c.attribute),
      mkNode('Cast', [`${p}_int32`], [`${p}_int32_float`], [attr('to', DT.FLOAT)]),
      mkNode('Mul', [`${p}_x_scale`, `${p}_weight_scale`], [`${p}_scale`]),
    ];
    replaced.add(c.input[1]);
    if (c.input.length > 2 && c.input[2]) {
      ni.push(f32Tensor(`${p}_bias_broadcast`, bshape, floatsOf(inits.get(c.input[2]))));
      nodes.push(mkNode('Mul', [`${p}_int32_float`, `${p}_scale`], [`${p}_scaled`]), mkNode('Add', [`${p}_scaled`, `${p}_bias_broadcast`], [y]));
      replaced.add(c.input[2]);
    } else nodes.push(mkNode('Mul', [`${p}_int32_float`, `${p}_scale`], [y]));
    m.graph.initializer.push(...ni);
    replace.set(c, nodes);
  }
  m.graph.node = m.graph.node.flatMap((n) => replace.get(n) ?? [n]);
  removeInitializers(m, replaced);
  return m;
}

const f32b = new Float32Array(1), u32b = new Uint32Array(f32b.buffer);
/** IEEE float16 bits of v, round to nearest even (overflow → ±inf). */
export function toHalf(v) {
  f32b[0] = v;
  const x = u32b[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 112;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let h = mant >>> shift;
    const rem = mant & ((1 << shift) - 1), half = 1 << (shift - 1);
    if (rem > half || (rem === half && h & 1)) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++;
  return sign | h;
}

/** The value of float16 bits h. */
export function fromHalf(h) {
  const s = h & 0x8000 ? -1 : 1, e = (h >>> 10) & 0x1f, f = h & 0x3ff;
  if (e === 0) return s * f * 2 ** -24;
  if (e === 0x1f) return f ? NaN : s * Infinity;
  return s * (1 + f / 1024) * 2 ** (e - 15);
}

function halfTensor(t) {
  const f = floatsOf(t);
  const h = new Uint16Array(f.length);
  for (let i = 0; i < f.length; i++) h[i] = toHalf(f[i]);
  return rawTensor(t.name, t.dims, DT.FLOAT16, h);
}

/** fp16: float initializers and Constants to float16, Cast at the f32 inputs and outputs. */
export function applyFp16(m) {
  const g = m.graph;
  // Inputs the ONNX spec types as float32 whatever the data (Resize's and Upsample's scales) stay float32.
  const keepF32 = new Set();
  for (const n of g.node) {
    if (n.opType === 'Resize' && n.input[2]) keepF32.add(n.input[2]);
    if (n.opType === 'Upsample' && n.input[1]) keepF32.add(n.input[1]);
  }
  const initNames = new Set(g.initializer.map((t) => t.name));
  g.initializer = g.initializer.map((t) => (t.dataType === DT.FLOAT && !keepF32.has(t.name) ? halfTensor(t) : t));
  for (const n of g.node) {
    if (n.opType === 'Cast') for (const a of n.attribute) if (a.name === 'to' && Number(a.i) === DT.FLOAT) a.i = DT.FLOAT16;
    if (n.opType === 'Constant' && keepF32.has(n.output[0])) continue;
    for (const a of n.attribute) if (a.t && a.t.dataType === DT.FLOAT) a.t = halfTensor(a.t);
  }
  const rename = new Map();
  const head = [], tail = [];
  for (const i of g.input) {
    if (i.type?.tensorType?.elemType !== DT.FLOAT || initNames.has(i.name)) continue; // (old IRs list initializers as inputs)
    rename.set(i.name, `${i.name}_fp16`);
    head.push(mkNode('Cast', [i.name], [`${i.name}_fp16`], [attr('to', DT.FLOAT16)]));
  }
  for (const n of g.node) n.input = n.input.map((x) => rename.get(x) ?? x);
  const outRename = new Map();
  for (const o of g.output) {
    if (o.type?.tensorType?.elemType !== DT.FLOAT) continue;
    outRename.set(o.name, `${o.name}_fp16`);
    tail.push(mkNode('Cast', [`${o.name}_fp16`], [o.name], [attr('to', DT.FLOAT)]));
  }
  for (const n of g.node) {
    n.output = n.output.map((x) => outRename.get(x) ?? x);
    n.input = n.input.map((x) => outRename.get(x) ?? x);
  }
  g.node = [...head, ...g.node, ...tail];
  g.valueInfo = []; // stale f32 shapes/types would contradict the fp16 tensors
  return m;
}

// ------------------------------------------------------------------------------------------------------- driver

/**
 * The variant of an fp32 model: {bytes, report}. options: mode (MODES), exclude, and for int8-qdq calibration inputs
 * (calibrationInputs()), activations 'uint8' | 'int8', method 'minmax' | 'percentile', percentile, threads.
 */
export async function quantize(bytes, { mode, exclude = ['first', 'last'], minOutChannels = 1, calib = null, calibGroup = Infinity, activations = 'uint8', method = 'minmax', percentile = 99.999, threads = 1 } = {}) {
  if (!MODES.includes(mode)) throw new Error(`quantize: unknown mode '${mode}' (modes: ${MODES.join(', ')})`);
  if (!['uint8', 'int8'].includes(activations)) throw new Error(`quantize: --activations must be uint8 or int8 (got '${activations}')`);
  if (!['minmax', 'percentile'].includes(method)) throw new Error(`quantize: --method must be minmax or percentile (got '${method}')`);
  if (!(percentile > 50 && percentile <= 100)) throw new Error(`quantize: --percentile must be in (50, 100] (got ${percentile})`);
  const m = decodeModel(bytes);
  const report = { mode, opset: opset(m), convs: m.graph.node.filter((n) => n.opType === 'Conv').length };
  if (mode === 'fp16') {
    applyFp16(m);
    report.initializers = m.graph.initializer.filter((t) => t.dataType === DT.FLOAT16).length;
  } else {
    report.foldedBatchNorms = foldBatchNorms(m);
    const { quantized, kept } = selectConvs(m, exclude, minOutChannels);
    if (!quantized.length) throw new Error(`quantize: no Conv to quantize (${kept.length} kept in fp32: ${kept.map((k) => `${k.name}: ${k.why}`).join('; ')})`);
    Object.assign(report, { quantized: quantized.map((n) => n.name), keptFp32: kept });
    if (mode === 'int8-dynamic') applyDynamic(m, quantized);
    else {
      if (!calib || !calib.length) throw new Error('quantize: int8-qdq needs calibration inputs');
      const { tensors, shareWith } = activationTensors(m, quantized);
      const stats = await calibrate(m, tensors, calib, { threads, samples: method === 'percentile', group: calibGroup });
      const params = new Map();
      for (const t of tensors) if (!shareWith.has(t)) params.set(t, activationParams(rangeOf(stats.get(t), method, percentile), activations));
      for (const [t, u] of shareWith) params.set(t, params.get(u));
      report.activations = Object.fromEntries(
        tensors.map((t) => [t, { min: stats.get(t).min, max: stats.get(t).max, ...params.get(t), ...(shareWith.has(t) ? { sharedWith: shareWith.get(t) } : {}) }]),
      );
      applyQdq(m, quantized, params, activations);
    }
  }
  report.producer = `${m.producerName || ''} + tessera scripts/quantize.js ${mode}`.trim();
  m.producerName = report.producer.slice(0, 200);
  const out = onnx.ModelProto.encode(m).finish();
  report.bytes = out.byteLength;
  report.inputBytes = bytes.byteLength;
  return { bytes: out, report };
}

export function parseCli(argv) {
  const { values: a, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      mode: { type: 'string' },
      calib: { type: 'string', default: '4' },
      'calib-source': { type: 'string', default: 'phantom' },
      'calib-dims': { type: 'string', default: '96,96,80' },
      'calib-seed': { type: 'string', default: '1001' },
      'calib-group': { type: 'string' },
      activations: { type: 'string', default: 'uint8' },
      method: { type: 'string', default: 'minmax' },
      percentile: { type: 'string', default: '99.999' },
      exclude: { type: 'string', default: 'first,last' },
      'min-out-channels': { type: 'string', default: '1' },
      model: { type: 'string' },
      threads: { type: 'string', default: '2' },
      report: { type: 'string' },
    },
  });
  const usage = `usage: node scripts/quantize.js IN.onnx OUT.onnx --mode ${MODES.join('|')} [--calib N] [--calib-source phantom|random] ` +
    '[--calib-dims X,Y,Z] [--calib-group G] [--activations uint8|int8] [--method minmax|percentile] [--percentile P] [--exclude first,last|none|NAMES] [--min-out-channels C] [--model ID] [--threads N] [--report FILE.json]';
  if (positionals.length !== 2) throw new Error(`quantize: expected IN.onnx and OUT.onnx\n${usage}`);
  if (!a.mode) throw new Error(`quantize: --mode is required (${MODES.join(', ')})\n${usage}`);
  if (!MODES.includes(a.mode)) throw new Error(`quantize: unknown mode '${a.mode}' (modes: ${MODES.join(', ')})`);
  const int = (k) => {
    const v = Number(a[k]);
    if (!Number.isInteger(v) || v < 1) throw new Error(`quantize: --${k} must be a positive integer (got '${a[k]}')`);
    return v;
  };
  return {
    input: positionals[0], output: positionals[1], mode: a.mode, calib: int('calib'), source: a['calib-source'],
    dims: a['calib-dims'].split(',').map(Number), seed: int('calib-seed'), calibGroup: a['calib-group'] === undefined ? Infinity : int('calib-group'), activations: a.activations, method: a.method,
    percentile: Number(a.percentile), exclude: a.exclude.split(',').filter(Boolean), minOutChannels: int('min-out-channels'), model: a.model, threads: int('threads'), reportFile: a.report,
  };
}

export async function main(argv) {
  const o = parseCli(argv);
  const m = readModel(o.input); // checks the input before any calibration work
  const bytes = new Uint8Array(fs.readFileSync(o.input));
  if (!fs.existsSync(path.dirname(path.resolve(o.output)))) throw new Error(`quantize: output folder '${path.dirname(o.output)}' does not exist`);
  let calib = null;
  if (o.mode === 'int8-qdq') {
    let M = null, normalization = null;
    if (o.source === 'phantom' || o.model) M = await loadModule();
    if (o.model) normalization = M.model(o.model).normalization;
    calib = await calibrationInputs({ count: o.calib, source: o.source, dims: o.dims, seed: o.seed, M, normalization });
  }
  const t0 = performance.now();
  const { bytes: out, report } = await quantize(bytes, { ...o, calib });
  fs.writeFileSync(o.output, out);
  report.seconds = (performance.now() - t0) / 1000;
  if (o.reportFile) fs.writeFileSync(o.reportFile, JSON.stringify(report, null, 1));
  const ops = {};
  for (const n of decodeModel(out).graph.node) ops[n.opType] = (ops[n.opType] ?? 0) + 1;
  console.log(`${o.output}: ${o.mode}, ${out.byteLength} bytes (fp32 ${bytes.byteLength}), graph of ${m.graph.node.length} → ${Object.values(ops).reduce((x, y) => x + y)} nodes`);
  if (report.quantized) console.log(`  ${report.quantized.length} Conv quantized, kept fp32: ${report.keptFp32.map((k) => k.name).join(', ') || 'none'}`);
  if (o.mode === 'int8-qdq') console.log(`  calibration: ${o.calib} ${o.source} field(s) of ${o.dims.join('×')}, ${o.method}${o.method === 'percentile' ? ` ${o.percentile}` : ''}, ${o.activations} activations, ${report.seconds.toFixed(1)} s`);
  console.log(`  ops: ${JSON.stringify(ops)}`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main(process.argv.slice(2)).then(
    () => process.exit(0),
    (e) => {
      console.error(e.message);
      process.exit(2);
    },
  );
}
