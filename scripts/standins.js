// Architecture-faithful stand-ins for the published QSM networks, with seeded random weights, for measuring
// what ONNX Runtime Web really needs per patch voxel (bench/calibrate.js). Built with onnx-proto like
// tests/js/networks.js (ONNX IR 8, opset 17, f32), but the weights are stored as raw_data: the QSMnet-shaped
// net has ~99.4 M parameters and a repeated float field would be far too slow to encode.
//
// Both nets: input 'input' f32 [1, 1, X, Y, Z] with dynamic X, Y, Z; output 'output' [1, 1, X, Y, Z].
// The operators are the ones the real exports use: Conv, ConvTranspose, BatchNormalization (inference form,
// random but sane scale/bias/mean/var), Relu / LeakyRelu, AveragePool, MaxPool, Add, Concat.
//
// xQSM-shaped (shared/docs/models.md "xQSM architecture", and the structure of the authors' PyTorch code:
// OctConv / OctUp / OctEncodingBlocks / OctMidBlocks / OctDecodingBlocks):
//   every octave conv splits channels 50/50 into H (full resolution) and L (half resolution):
//     y_H = ReLU( BN(conv3(H→H)(x_H)) + BN(ConvT2s2(conv3(L→H)(x_L))) )
//     y_L = ReLU( BN(conv3(L→L)(x_L)) + BN(conv3(H→L)(AvgPool2(x_H))) )
//   input octave conv 1→base (H = conv(x), L = conv(AvgPool2(x))), then base→base;
//   encoder level 1: base→base, base→base; level k ≥ 2: n/2→n, n→n (n = base·2^(k-1)); max-pool 2³ on both
//   branches after each level; bottleneck n→2n→n; decoder per level (m = channels coming in):
//   OctUp (H: ConvT k2s2 H→H + ConvT k4s4 L→H; L: ConvT k2s2 L→L + conv3 H→L; BN; ReLU), concat the skip
//   per branch, octave convs 2m→m and m→m/2 (last level m→m); final octave conv to one branch
//   (ReLU(BN(conv3 H→H) + BN(ConvT(conv3 L→H)))), 1×1×1 conv base→1, plus the input (global residual).
//   Divisor 2^(depth+1) = 8 for depth 2 (the L branch of the bottleneck is at 1/8 resolution).
//
// QSMnet-shaped (models.md "QSMnet architecture"): 3D U-Net, k³ 'same' conv + BN + LeakyReLU(0.1), two per
//   level, channels base·2^i (32-64-128-256), bottleneck base·2^levels (512), max-pool 2³ between levels,
//   ConvTranspose 2³ s2 halving channels, skip concat, two k³ convs per level, final 1³ conv base→1.
//   Divisor 2^levels = 16.
import { onnx, prng, tensor, valueInfo, attrInts, attrInt, attrFloat, node } from '../tests/js/onnx-build.js';

export { prng };

/** n floats uniform in [lo, hi) from a seed. */
function uniform(n, seed, lo, hi) {
  const r = prng(seed);
  const out = new Float32Array(n);
  const w = hi - lo;
  for (let i = 0; i < n; i++) out[i] = lo + w * r();
  return out;
}

const k3 = (k) => [k, k, k];

/**
 * Graph builder. Initializer names start with their role: 'w_'/'b_' (conv), 'wt_'/'bt_' (transposed conv),
 * 'bn_scale_'/'bn_bias_' (trainable), 'bn_mean_'/'bn_var_' (running statistics: stored, not trainable).
 */
class Builder {
  constructor(seed) {
    this.nodes = [];
    this.inits = [];
    this.n = 0;
    this.seed = seed >>> 0;
  }
  name(prefix) {
    return `${prefix}_${this.n++}`;
  }
  s() {
    // a fresh seed per initializer, fixed by the build order
    return (Math.imul(this.seed, 2654435761) + Math.imul(this.n + 1, 40503)) >>> 0;
  }
  /** k³ convolution, 'same' zero padding, He-uniform weights (fan_in = cin·k³), small bias. */
  conv(x, cin, cout, k = 3) {
    const w = this.name('w');
    const a = Math.sqrt(6 / (cin * k * k * k));
    this.inits.push(tensor(w, [cout, cin, k, k, k], uniform(cout * cin * k * k * k, this.s(), -a, a)));
    const b = this.name('b');
    this.inits.push(tensor(b, [cout], uniform(cout, this.s(), -0.05, 0.05)));
    const y = this.name('conv');
    const p = (k - 1) >> 1;
    this.nodes.push(
      node('Conv', [x, w, b], [y], [attrInts('kernel_shape', k3(k)), attrInts('pads', Array(6).fill(p)), attrInts('strides', [1, 1, 1])]),
    );
    return y;
  }
  /** Transposed conv, kernel k, stride k (non-overlapping: fan_in = cin). Weight layout [cin, cout, k, k, k]. */
  convT(x, cin, cout, k = 2) {
    const w = this.name('wt');
    const a = Math.sqrt(6 / cin);
    this.inits.push(tensor(w, [cin, cout, k, k, k], uniform(cin * cout * k * k * k, this.s(), -a, a)));
    const b = this.name('bt');
    this.inits.push(tensor(b, [cout], uniform(cout, this.s(), -0.05, 0.05)));
    const y = this.name('up');
    this.nodes.push(node('ConvTranspose', [x, w, b], [y], [attrInts('kernel_shape', k3(k)), attrInts('strides', k3(k))]));
    return y;
  }
  /** Inference-mode BatchNormalization with random but sane statistics (keeps activations O(1)). */
  bn(x, c, gain = 1) {
    const names = ['bn_scale', 'bn_bias', 'bn_mean', 'bn_var'].map((p) => this.name(p));
    const ranges = [[0.6 * gain, 0.9 * gain], [-0.1, 0.1], [-0.1, 0.1], [0.5, 1.5]];
    names.forEach((nm, i) => this.inits.push(tensor(nm, [c], uniform(c, this.s(), ranges[i][0], ranges[i][1]))));
    const y = this.name('bn');
    this.nodes.push(node('BatchNormalization', [x, ...names], [y], [attrFloat('epsilon', 1e-5), attrFloat('momentum', 0.9)]));
    return y;
  }
  op(type, inputs, attrs = []) {
    const y = this.name(type.toLowerCase());
    this.nodes.push(node(type, inputs, [y], attrs));
    return y;
  }
  relu(x) {
    return this.op('Relu', [x]);
  }
  leaky(x, alpha = 0.1) {
    return this.op('LeakyRelu', [x], [attrFloat('alpha', alpha)]);
  }
  add(a, b) {
    return this.op('Add', [a, b]);
  }
  concat(a, b) {
    return this.op('Concat', [a, b], [attrInt('axis', 1)]);
  }
  maxpool(x) {
    return this.op('MaxPool', [x], [attrInts('kernel_shape', [2, 2, 2]), attrInts('strides', [2, 2, 2])]);
  }
  avgpool(x) {
    return this.op('AveragePool', [x], [attrInts('kernel_shape', [2, 2, 2]), attrInts('strides', [2, 2, 2])]);
  }
  finish(output, producer) {
    this.nodes.push(node('Identity', [output], ['output']));
    const m = onnx.ModelProto.create({
      irVersion: 8,
      producerName: producer,
      opsetImport: [{ domain: '', version: 17 }],
      graph: onnx.GraphProto.create({
        name: producer,
        node: this.nodes,
        initializer: this.inits,
        input: [valueInfo('input', [1, 1, 'X', 'Y', 'Z'])],
        output: [valueInfo('output', [1, 1, 'X', 'Y', 'Z'])],
      }),
    });
    return onnx.ModelProto.encode(m).finish();
  }
}

// ------------------------------------------------------------------------------------------------ xQSM

const SQRT_HALF = Math.SQRT1_2; // two BN'd paths are summed per branch: keep the sum's variance ~1

/** Octave conv ci→co (both split 50/50): returns {h, l}. */
function octConv(b, x, ci, co) {
  const hi = ci >> 1, li = ci - hi, ho = co >> 1, lo = co - ho;
  const hh = b.bn(b.conv(x.h, hi, ho), ho, SQRT_HALF);
  const lh = b.bn(b.convT(b.conv(x.l, li, ho), ho, ho, 2), ho, SQRT_HALF);
  const ll = b.bn(b.conv(x.l, li, lo), lo, SQRT_HALF);
  const hl = b.bn(b.conv(b.avgpool(x.h), hi, lo), lo, SQRT_HALF);
  return { h: b.relu(b.add(hh, lh)), l: b.relu(b.add(ll, hl)) };
}

/** Input octave conv: one full-resolution channel in, co out (H from x, L from AvgPool(x)). */
function firstOct(b, x, co) {
  const ho = co >> 1, lo = co - ho;
  return { h: b.relu(b.bn(b.conv(x, 1, ho), ho)), l: b.relu(b.bn(b.conv(b.avgpool(x), 1, lo), lo)) };
}

/** Final octave conv to one (full-resolution) branch of co channels. */
function lastOct(b, x, ci, co) {
  const hi = ci >> 1, li = ci - hi;
  const hh = b.bn(b.conv(x.h, hi, co), co, SQRT_HALF);
  const lh = b.bn(b.convT(b.conv(x.l, li, co), co, co, 2), co, SQRT_HALF);
  return b.relu(b.add(hh, lh));
}

/** Decoder upsampling of an n-channel octave pair to the next finer level. */
function octUp(b, x, n) {
  const h = n >> 1, l = n - h;
  const yh = b.add(b.convT(x.h, h, h, 2), b.convT(x.l, l, h, 4));
  const yl = b.add(b.convT(x.l, l, l, 2), b.conv(x.h, h, l));
  return { h: b.relu(b.bn(yh, h, SQRT_HALF)), l: b.relu(b.bn(yl, l, SQRT_HALF)) };
}

/**
 * xQSM-shaped octave-convolution U-Net with random weights.
 * @param {{base?: number, depth?: number, seed?: number}} [o] base channels (even; 64 = the published net),
 *   poolings (2), weight seed
 * @returns {Uint8Array} ONNX bytes; spatial dims must be multiples of xqsmDivisor(depth)
 */
export function xqsmStandin({ base = 64, depth = 2, seed = 11 } = {}) {
  if (base % 4 !== 0) throw new RangeError('xqsmStandin: base must be a multiple of 4');
  const b = new Builder(seed);
  let x = firstOct(b, 'input', base);
  x = octConv(b, x, base, base);
  const skips = [];
  let n = base;
  for (let k = 1; k <= depth; k++) {
    const out = base * 2 ** (k - 1);
    x = octConv(b, x, k === 1 ? base : out / 2, out);
    x = octConv(b, x, out, out);
    skips.push(x);
    x = { h: b.maxpool(x.h), l: b.maxpool(x.l) };
    n = out;
  }
  x = octConv(b, x, n, 2 * n);
  x = octConv(b, x, 2 * n, n);
  let m = n;
  for (let j = 1; j <= depth; j++) {
    const up = octUp(b, x, m);
    const s = skips[depth - j];
    x = { h: b.concat(up.h, s.h), l: b.concat(up.l, s.l) };
    x = octConv(b, x, 2 * m, m);
    const next = j === depth ? m : m / 2;
    x = octConv(b, x, m, next);
    m = next;
  }
  const y = lastOct(b, x, m, m);
  const out = b.conv(y, m, 1, 1);
  return b.finish(b.add(out, 'input'), 'tessera-standin-xqsm');
}

/** Spatial divisor of the xQSM-shaped net: depth poolings plus the half-resolution L branch. */
export const xqsmDivisor = (depth = 2) => 2 ** (depth + 1);

/**
 * Parameter count of xqsmStandin, from the architecture (independent of the builder).
 * trainable = conv/transposed-conv weights and biases + BN scale and bias (what PyTorch counts);
 * stored = trainable + BN running mean and variance (the floats an ONNX file with BatchNormalization nodes holds).
 */
export function xqsmParamCount({ base = 64, depth = 2 } = {}) {
  let t = 0, r = 0;
  const oct = (ci, co) => {
    const h = co >> 1;
    t += 27 * ci * co + 2 * co + 8 * h * h + h + 4 * co; // four convs + biases, ConvT (L→H), 4 BN
    r += 4 * co;
  };
  const first = (co) => {
    t += 27 * co + co + 2 * co;
    r += 2 * co;
  };
  const last = (ci, co) => {
    t += 2 * (27 * (ci >> 1) * co + co) + 8 * co * co + co + 4 * co + co + 1; // 2 convs, ConvT, 2 BN, 1×1 conv
    r += 4 * co;
  };
  const up = (n) => {
    const h = n >> 1;
    t += (8 + 64 + 8 + 27) * h * h + 4 * h + 2 * n;
    r += 2 * n;
  };
  first(base);
  oct(base, base);
  let n = base;
  for (let k = 1; k <= depth; k++) {
    n = base * 2 ** (k - 1);
    oct(k === 1 ? base : n / 2, n);
    oct(n, n);
  }
  oct(n, 2 * n);
  oct(2 * n, n);
  let m = n;
  for (let j = 1; j <= depth; j++) {
    up(m);
    oct(2 * m, m);
    const next = j === depth ? m : m / 2;
    oct(m, next);
    m = next;
  }
  last(m, m);
  return { trainable: t, stored: t + r };
}

// ---------------------------------------------------------------------------------------------- QSMnet

/**
 * QSMnet-shaped 3D U-Net with random weights.
 * @param {{base?: number, levels?: number, kernel?: number, seed?: number}} [o] first-level channels (32),
 *   poolings (4), conv kernel edge (5), weight seed
 * @returns {Uint8Array} ONNX bytes; spatial dims must be multiples of qsmnetDivisor(levels)
 */
export function qsmnetStandin({ base = 32, levels = 4, kernel = 5, seed = 23 } = {}) {
  const b = new Builder(seed);
  const block = (x, ci, co) => b.leaky(b.bn(b.conv(x, ci, co, kernel), co));
  let x = 'input';
  let cin = 1;
  const skips = [];
  for (let i = 0; i < levels; i++) {
    const c = base * 2 ** i;
    x = block(block(x, cin, c), c, c);
    skips.push(x);
    x = b.maxpool(x);
    cin = c;
  }
  const cb = base * 2 ** levels;
  x = block(block(x, cin, cb), cb, cb);
  cin = cb;
  for (let i = levels - 1; i >= 0; i--) {
    const c = base * 2 ** i;
    x = b.concat(b.convT(x, cin, c, 2), skips[i]);
    x = block(block(x, 2 * c, c), c, c);
    cin = c;
  }
  return b.finish(b.conv(x, cin, 1, 1), 'tessera-standin-qsmnet');
}

export const qsmnetDivisor = (levels = 4) => 2 ** levels;

/** Parameter count of qsmnetStandin from the architecture; same meaning as xqsmParamCount. */
export function qsmnetParamCount({ base = 32, levels = 4, kernel = 5 } = {}) {
  const k = kernel ** 3;
  let t = 0, r = 0;
  const block = (ci, co) => {
    t += k * ci * co + co + 2 * co;
    r += 2 * co;
  };
  let cin = 1;
  for (let i = 0; i < levels; i++) {
    const c = base * 2 ** i;
    block(cin, c);
    block(c, c);
    cin = c;
  }
  const cb = base * 2 ** levels;
  block(cin, cb);
  block(cb, cb);
  cin = cb;
  for (let i = levels - 1; i >= 0; i--) {
    const c = base * 2 ** i;
    t += 8 * cin * c + c;
    block(2 * c, c);
    block(c, c);
    cin = c;
  }
  t += cin + 1;
  return { trainable: t, stored: t + r };
}

// ------------------------------------------------------------------------------------------- inspection

/**
 * Count the initializer floats of an ONNX model built here: {trainable, stored, initializers, nodes, ops}
 * (BN running mean/var are stored but not trainable). Works on any ONNX model whose BN statistics follow the
 * naming above; for others `stored` is still the total.
 * @param {Uint8Array} bytes
 */
export function inspectModel(bytes) {
  const m = onnx.ModelProto.decode(bytes);
  let stored = 0, running = 0;
  for (const t of m.graph.initializer) {
    const n = t.dims.reduce((a, d) => a * Number(d), 1);
    stored += n;
    if (/^bn_(mean|var)_/.test(t.name)) running += n;
  }
  const ops = {};
  for (const nd of m.graph.node) ops[nd.opType] = (ops[nd.opType] ?? 0) + 1;
  return { trainable: stored - running, stored, initializers: m.graph.initializer.length, nodes: m.graph.node.length, ops };
}

/** The stand-ins by registry id: builder, parameter formula, divisor. */
export const STANDINS = {
  xqsm: { build: xqsmStandin, params: xqsmParamCount, divisor: xqsmDivisor(2), file: 'xqsm-standin.onnx' },
  qsmnet: { build: qsmnetStandin, params: qsmnetParamCount, divisor: qsmnetDivisor(4), file: 'qsmnet-standin.onnx' },
};
