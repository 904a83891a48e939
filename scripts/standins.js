// Architecture-faithful stand-ins for the published QSM networks, with seeded random weights, for measuring
// what ONNX Runtime Web really needs per patch voxel (bench/calibrate.js). Built with onnx-proto like
// tests/js/networks.js (ONNX IR 8, opset 17, f32), but the weights are stored as raw_data: the QSMnet-shaped
// net has ~99.4 M parameters and a repeated float field would be far too slow to encode.
//
// Both nets: input 'input' f32 [1, 1, X, Y, Z] with dynamic X, Y, Z; output 'output' [1, 1, X, Y, Z].
// (The iQSM- / iQSM+-shaped nets further down take wrapped phase and several inputs: see their section.)
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
import { onnx, prng, tensor, valueInfo, attrInts, attrInt, attrFloat, node, GraphBuilder } from '../tests/js/onnx-build.js';
import { LOT_KERNEL, phaseInputs, phaseInputInfo } from '../tests/js/phase-networks.js';

export { prng };
// scripts/standins-ir2qsm.js and scripts/standins-loops.js build their nets with Builder and uniform below.

/** n floats uniform in [lo, hi) from a seed. */
export function uniform(n, seed, lo, hi) {
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
export class Builder extends GraphBuilder {
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
  leaky(x, alpha = 0.1) {
    return this.op('LeakyRelu', [x], [attrFloat('alpha', alpha)]);
  }
  add(a, b) {
    return this.op('Add', [a, b]);
  }
  avgpool(x) {
    return this.op('AveragePool', [x], [attrInts('kernel_shape', [2, 2, 2]), attrInts('strides', [2, 2, 2])]);
  }
  /** The model with input [1, cin, X, Y, Z] and output [1, cout, X, Y, Z]. */
  finish(output, producer, cin = 1, cout = 1) {
    this.nodes.push(node('Identity', [output], ['output']));
    const m = onnx.ModelProto.create({
      irVersion: 8,
      producerName: producer,
      opsetImport: [{ domain: '', version: 17 }],
      graph: onnx.GraphProto.create({
        name: producer,
        node: this.nodes,
        initializer: this.inits,
        input: [valueInfo('input', [1, cin, 'X', 'Y', 'Z'])],
        output: [valueInfo('output', [1, cout, 'X', 'Y', 'Z'])],
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

// -------------------------------------------------------------------------------------- iQSM / iQSM+

// iQSM-shaped (Gao et al.; the structure of sunhongfu/iQSM models/unet_blocks.py, unet.py, lot_unet.py), for
// wrapped phase in:
//   LoT layer: c = cos(phase), s = sin(phase); LG(x, K) = Conv3d(x, K, pad 1) · border (the exported form of
//     "zero the outermost voxel layer"); b = (LG(s,Kx)·c − LG(c,Kx)·s) · mask / (b0·te) · 0.06 with the fixed
//     27-point Laplacian Kx; d = the same with 15 learnable 3³ kernels; x = concat[b, d] (16 channels).
//   U-Net (EncodingDepth 4): base·2^(k-1) channels per level (16-32-64-128), each level two
//     (conv3 → BN → ReLU), first 16→base; max-pool 2³; mid n→2n→n; decoder per level m: ConvT(m, m, 2, s2) →
//     BN → ReLU, concat the skip, (conv3 2m→m → BN → ReLU), (conv3 m→m/2 → BN → ReLU) (last level m→m);
//     1³ conv base→1; + b (residual with the LoT channel); / 4.
//   iQSM+ (sunhongfu/iQSM_Plus): b0_dir [1,1,3] → Z_embed (Linear 3→3, GELU, Linear 3→5) → e [1,5]; every
//     conv3 + BN + ReLU of the U-Net becomes ZPrjs_Conv_Layer: y = ReLU(BN(conv3(x) + C(HWD(x)))) where
//     HWD(x) = conv3(x, tile(w, cin)), w = Linear 10→27(SiLU(Linear 5→10(SiLU(e)))) a per-sample 3³ kernel
//     (one output channel), and C(h) = h·scale + shift with [scale, shift] = Linear 10→2co(SiLU(Linear
//     5→10(SiLU(e)))); plus one extra such layer 16→base before the encoder (ini_embd_layer). The decoder's
//     ConvT/BN/ReLU and the final 1³ conv are plain.
//   Divisor 2^depth = 16. Constants (0.06, the /4, shapes) are Constant nodes, not initializers, so the
//   initializers are exactly the parameters (the fixed Laplacian Kx counts as one 27-float parameter).

const INT64 = onnx.TensorProto.DataType.INT64;

/**
 * Input names in order for iqsmStandin({plus, names}) (the same as the LoT test network's, lotNet):
 * phase, mask, te, b0, (plus: b0_dir), border; names: renames, an object by role or an array in order.
 */
export function iqsmInputs({ plus = false, names } = {}) {
  return phaseInputs(plus, names).map((e) => e.name);
}

class PhaseBuilder extends Builder {
  /** A Constant node (not an initializer: not a parameter). */
  constant(values, dims, int64 = false) {
    const y = this.name('const');
    const t = int64
      ? onnx.TensorProto.create({ name: y, dims, dataType: INT64, int64Data: values })
      : tensor(y, dims, values);
    this.nodes.push(node('Constant', [], [y], [onnx.AttributeProto.create({ name: 'value', type: onnx.AttributeProto.AttributeType.TENSOR, t })]));
    return y;
  }
  /** A named f32 initializer from data. */
  init(prefix, dims, data) {
    const w = this.name(prefix);
    this.inits.push(tensor(w, dims, data));
    return w;
  }
  /** 3³ 'same' convolution with a given (initializer or computed) weight and no bias. */
  convW(x, w) {
    return this.op('Conv', [x, w], [attrInts('kernel_shape', [3, 3, 3]), attrInts('pads', Array(6).fill(1)), attrInts('strides', [1, 1, 1])]);
  }
  mul(a, b) {
    return this.op('Mul', [a, b]);
  }
  /** Linear layer on [.., cin]: MatMul with W [cin, cout] (uniform ±a) + bias (given or uniform ±bias). */
  linear(x, cin, cout, a, bias = 0.05) {
    const w = this.init('lw', [cin, cout], uniform(cin * cout, this.s(), -a, a));
    const bData = typeof bias === 'number' ? uniform(cout, this.s(), -bias, bias) : bias;
    const b = this.init('lb', [cout], bData);
    return this.add(this.op('MatMul', [x, w]), b);
  }
  silu(x) {
    return this.mul(x, this.op('Sigmoid', [x]));
  }
  /** GELU as PyTorch exports it at opset 17: x · 0.5 · (1 + erf(x / √2)). */
  gelu(x) {
    const e = this.op('Erf', [this.op('Div', [x, this.constant([Math.SQRT2], [])])]);
    return this.mul(this.mul(x, this.add(e, this.constant([1], []))), this.constant([0.5], []));
  }
  reshape(x, shape) {
    return this.op('Reshape', [x, this.constant(shape, [shape.length], true)]);
  }
  /** Split along axis 1 into two equal halves. */
  split2(x) {
    const a = this.name('split'), c = this.name('split');
    this.nodes.push(node('Split', [x], [a, c], [attrInt('axis', 1)]));
    return [a, c];
  }
  finishPhase(output, ins, producer) {
    this.nodes.push(node('Identity', [output], ['chi']));
    const m = onnx.ModelProto.create({
      irVersion: 8,
      producerName: producer,
      opsetImport: [{ domain: '', version: 17 }],
      graph: onnx.GraphProto.create({
        name: producer,
        node: this.nodes,
        initializer: this.inits,
        input: ins.map((e) => phaseInputInfo(e.role, e.name)),
        output: [valueInfo('chi', [1, 1, 'X', 'Y', 'Z'])],
      }),
    });
    return onnx.ModelProto.encode(m).finish();
  }
}

/** LoT layer: returns {b, x} with b the Laplacian channel [1,1,..] and x = concat[b, d] [1,16,..]. */
function lotLayer(b, n, filters) {
  const c = b.op('Cos', [n.phase]);
  const s = b.op('Sin', [n.phase]);
  const factor = b.op('Div', [b.constant([3 * 20e-3], [1]), b.mul(n.b0, n.te)]);
  const kx = b.init('lot_kx', [1, 1, 3, 3, 3], LOT_KERNEL);
  // learnable kernels: random zero-sum 3³ filters (derivative-like, as the trained ones start from Kx)
  const ky = new Float32Array(filters * 27);
  const r = uniform(filters * 27, b.s(), -0.5, 0.5);
  for (let f = 0; f < filters; f++) {
    let m = 0;
    for (let k = 0; k < 27; k++) m += r[f * 27 + k];
    for (let k = 0; k < 27; k++) ky[f * 27 + k] = 0.5 * LOT_KERNEL[k] + r[f * 27 + k] - m / 27;
  }
  const kyName = b.init('lot_ky', [filters, 1, 3, 3, 3], ky);
  const branch = (k) => {
    const lgS = b.mul(b.convW(s, k), n.border);
    const lgC = b.mul(b.convW(c, k), n.border);
    const diff = b.op('Sub', [b.mul(lgS, c), b.mul(lgC, s)]);
    return b.mul(b.mul(diff, n.mask), factor);
  };
  const lb = branch(kx);
  const ld = branch(kyName);
  return { b: lb, x: b.concat(lb, ld) };
}

/** iQSM+ ZPrjs_Conv_Layer's two embeddings of e [1,5] for a conv cin→co: the term added before BN. */
function zprjsEdit(b, x, e, cin, co) {
  // HWD: a per-sample 3³ kernel (one output channel) applied to the channel sum (the kernel is tiled over the
  // input channels); the inputs are ReLU outputs (positive mean), so |w| ~ 1/(cin·sqrt(27)) keeps it O(1)
  const sw = 1 / (cin * Math.sqrt(27));
  const h1 = b.silu(b.linear(b.silu(e), 5, 10, Math.sqrt(6 / 5)));
  const w = b.linear(h1, 10, 27, 0.5 * sw, 1.5 * sw);
  const wk = b.op('Tile', [b.reshape(w, [1, 1, 3, 3, 3]), b.constant([1, cin, 1, 1, 1], [5], true)]);
  const h = b.convW(x, wk);
  // C: per-channel scale and shift of the one-channel map, broadcast to co channels
  const g1 = b.silu(b.linear(b.silu(e), 5, 10, Math.sqrt(6 / 5)));
  const bias = new Float32Array(2 * co);
  bias.set(uniform(co, b.s(), 0.2, 0.5), 0);
  bias.set(uniform(co, b.s(), -0.05, 0.05), co);
  const ss = b.linear(g1, 10, 2 * co, 0.05, bias);
  const [scale, shift] = b.split2(b.reshape(ss, [1, 2 * co, 1, 1, 1]));
  return b.add(b.mul(h, scale), shift);
}

/**
 * BN scale gain of the iQSM-shaped layers: He-initialised conv → BN (scale ~0.75·gain, var ~U(0.5, 1.5)) →
 * ReLU keeps the activations' RMS about constant through the 22 layers with gain ≈ 1.3 (with 1 it shrinks
 * ~0.8× per layer).
 */
const BN_GAIN = 1.3;

/**
 * iQSM-shaped (plus: iQSM+-shaped) network with random weights, wrapped phase in.
 * Inputs in the reference order (iqsmInputs): phase [1,1,X,Y,Z], mask [1,1,X,Y,Z], te [1], b0 [1],
 * (plus: b0_dir [1,1,3], the unit B0 direction), border [1,1,X,Y,Z] (1 inside, 0 on the outer voxel layer).
 * Output 'chi' [1,1,X,Y,Z].
 * @param {{plus?: boolean, seed?: number, base?: number, depth?: number, names?: Record<string,string>|string[]}} [o]
 *   base: first-level U-Net channels (16 = published), depth: poolings (4 = published)
 * @returns {Uint8Array} ONNX bytes; spatial dims must be multiples of 2^depth (iqsmDivisor for depth 4)
 */
export function iqsmStandin({ plus = false, seed = 31, base = 16, depth = 4, names } = {}) {
  const ins = phaseInputs(plus, names);
  const n = Object.fromEntries(ins.map((e) => [e.role, e.name]));
  const b = new PhaseBuilder(seed);
  const lot = lotLayer(b, n, 15);
  let e = null;
  if (plus) e = b.reshape(b.linear(b.gelu(b.linear(n.b0_dir, 3, 3, 1)), 3, 5, 1), [1, 5]);
  const layer = (x, ci, co) => {
    let y = b.conv(x, ci, co);
    if (plus) y = b.add(y, zprjsEdit(b, x, e, ci, co));
    return b.relu(b.bn(y, co, BN_GAIN));
  };
  let x = lot.x;
  let cin = 16;
  if (plus) {
    x = layer(x, cin, base);
    cin = base;
  }
  const skips = [];
  let ch = base;
  for (let k = 1; k <= depth; k++) {
    ch = base * 2 ** (k - 1);
    x = layer(layer(x, k === 1 ? cin : ch / 2, ch), ch, ch);
    skips.push(x);
    x = b.maxpool(x);
  }
  x = layer(layer(x, ch, 2 * ch), 2 * ch, ch);
  let m = ch;
  for (let j = 1; j <= depth; j++) {
    const up = b.relu(b.bn(b.convT(x, m, m, 2), m, BN_GAIN));
    x = b.concat(up, skips[depth - j]);
    const next = j === depth ? m : m / 2;
    x = layer(layer(x, 2 * m, m), m, next);
    m = next;
  }
  const y = b.add(b.conv(x, m, 1, 1), lot.b);
  const out = b.op('Div', [y, b.constant([4], [])]);
  return b.finishPhase(out, ins, plus ? 'tessera-standin-iqsm-plus' : 'tessera-standin-iqsm');
}

/** Spatial divisor of the published iQSM / iQSM+ (depth 4): 2^4. */
export const iqsmDivisor = 16;

/**
 * Parameter count of iqsmStandin from the architecture; same meaning as xqsmParamCount (trainable includes
 * the LoT kernels: the fixed 27-float Laplacian and the 15 learnable 3³ kernels).
 */
export function iqsmParamCount({ plus = false, base = 16, depth = 4 } = {}) {
  let t = 27 + 15 * 27, r = 0;
  const layer = (ci, co) => {
    t += 27 * ci * co + co + 2 * co;
    r += 2 * co;
    if (plus) t += (5 * 10 + 10 + 10 * 27 + 27) + (5 * 10 + 10 + 10 * 2 * co + 2 * co); // HWD + C embeddings
  };
  let cin = 16;
  if (plus) {
    t += 3 * 3 + 3 + 3 * 5 + 5; // Z_embed
    layer(cin, base);
    cin = base;
  }
  let ch = base;
  for (let k = 1; k <= depth; k++) {
    ch = base * 2 ** (k - 1);
    layer(k === 1 ? cin : ch / 2, ch);
    layer(ch, ch);
  }
  layer(ch, 2 * ch);
  layer(2 * ch, ch);
  let m = ch;
  for (let j = 1; j <= depth; j++) {
    t += 8 * m * m + m + 2 * m;
    r += 2 * m;
    const next = j === depth ? m : m / 2;
    layer(2 * m, m);
    layer(m, next);
    m = next;
  }
  t += m + 1;
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

/**
 * The stand-ins by registry id: builder, parameter formula, divisor, file name; the wrapped-phase nets also
 * list their input names in order (inputs) and their output name (output).
 */
export const STANDINS = {
  xqsm: { build: xqsmStandin, params: xqsmParamCount, divisor: xqsmDivisor(2), file: 'xqsm-standin.onnx' },
  qsmnet: { build: qsmnetStandin, params: qsmnetParamCount, divisor: qsmnetDivisor(4), file: 'qsmnet-standin.onnx' },
  // wrapped-phase nets: several inputs (names in order), output 'chi'
  iqsm: {
    build: (o = {}) => iqsmStandin({ ...o, plus: false }),
    params: (o = {}) => iqsmParamCount({ ...o, plus: false }),
    divisor: iqsmDivisor,
    file: 'iqsm-standin.onnx',
    inputs: iqsmInputs({ plus: false }),
    output: 'chi',
  },
  'iqsm-plus': {
    build: (o = {}) => iqsmStandin({ ...o, plus: true }),
    params: (o = {}) => iqsmParamCount({ ...o, plus: true }),
    divisor: iqsmDivisor,
    file: 'iqsm-plus-standin.onnx',
    inputs: iqsmInputs({ plus: true }),
    output: 'chi',
  },
};
