// Stand-ins for the networks of the physics loops (LPCNN, MoDL-QSM, NeXtQSM's BF and VJP nets) with seeded random
// weights, for measuring what ONNX Runtime Web needs per patch voxel (bench/calibrate.js); built like the stand-ins
// of scripts/standins.js (onnx-proto, ONNX IR 8, opset 17, f32, weights as raw_data). Input 'input' f32
// [1, C, X, Y, Z] (dynamic X, Y, Z), output 'output' [1, C', X, Y, Z]: the layout Tessera feeds (models.md).
// The loop around each net (FFTs, the dipole kernel, the iterations) runs in Tessera's C++ core, not in the ONNX file.
//
// LPCNN (Lai, Aggarwal, van Zijl, Li, Sulam, MICCAI 2020; the authors' Sulam-Group/LPCNN,
//   LPCNN/lib/model/lpcnn/lpcnn.py, read, not copied): the proximal network `gen` =
//   Conv3d 3³ 1→32 (no bias) → ReLU; 8 × wBasicBlock(32): conv 3³ (no bias) → BN → ReLU → dropout → conv 3³ (no bias)
//   → BN → + the block input → ReLU; Conv3d 1³ 32→32 (no bias) → ReLU; 1³ 32→32 (no bias) → ReLU; 1³ 32→1 (no bias).
//   No pooling: any patch size runs (the registry's divisor 8 is the planner's grid, not the net's). 447 360 stored
//   floats = 1 789 440 B against lpcnn.onnx's 1 790 869 B (−0.08 %). The loop's step α is a constant of the
//   algorithm (models.md), not in the file.
// MoDL-QSM (Feng, Zhao, Wang, et al., NeuroImage 2021; the authors' Ruimin-Feng/MoDL-QSM, model/MoDL_QSM.py, Keras,
//   read, not copied): the denoiser `basic_model` = Conv3D 3³ 2→32 (no bias) → ReLU; 8 × Res_block(k = 2, 32 channels):
//   conv 3³ (no bias) → BN → ReLU → dropout → conv 3³ (no bias) → BN → + input → ReLU; Conv3D 1³ 32→32 (no bias) → ReLU
//   twice; Conv3D 1³ 32→2 with bias. Two channels in and out (models.md: planes contiguous). No pooling. 448 258 stored
//   floats = 1 793 032 B against modl-qsm.onnx's 1 794 143 B (−0.06 %).
// NeXtQSM (Cognolato, O'Brien, Jin, et al., Med Image Anal 2023; QSMxT/NeXtQSM: nextqsm/tf_utils/nets/unet.py,
//   blocks/cnn_block.py, models/varnet.py, checkpoints/params.json and convert_to_onnx.py, TensorFlow, read, not
//   copied): both nets are the repository's UNet with conv_per_layer 1, no batch norm, ReLU, max_pool and upsampling
//   off (so: strided convolutions down, transposed convolutions up), 3³ kernels, channels min(512, 16·2^i):
//   encoder level 0: conv 3³ 1→16 stride 1; level i ≥ 1: conv 3³ stride 2 ('SAME': pad 0 before, 1 after);
//   decoder level i = n−2..0: ConvTranspose 3³ stride 2 ('SAME') → ReLU, concat the encoder's level-i output;
//   last conv 3³ → 1 channel, with bias, no activation.
//   BF (background field) net: n_layers 7 (16-32-64-128-256-512-512; divisor 2^6 = 64): 28 301 553 floats =
//   113 206 212 B against nextqsm-bf.onnx's 113 211 474 B (−0.005 %).
//   VJP net: the variational network's regulariser is the same UNet with vn_n_layers 6 (16…512; divisor 32), and the
//   loop needs ∂/∂x Σ|net(x)| (models.md: g_R = VJP(x)/N): the file computes that vector-Jacobian product, so the
//   graph here is the forward UNet, Sign(output), and the backward pass through every layer with the same weight
//   tensors (conv ↔ transposed conv with the same strides and pads; ReLU' as Where(activation > 0); the concat's
//   gradient split, the skip gradients added), every forward activation kept for it. The weights are stored once:
//   10 605 809 floats = 42 423 236 B against nextqsm-vjp.onnx's 42 437 407 B (−0.03 %), which says the real export
//   shares them too.
//   Chosen: NCDHW layout (the TensorFlow export is channels-last; for one channel [1,1,X,Y,Z] and [1,X,Y,Z,1] are the
//   same bytes), and the learned step sizes λ are constants of Tessera's loop (models.md), not in the file.
import { Builder, uniform } from './standins.js';
import { onnx, tensor, attrInts, attrInt, node } from '../tests/js/onnx-build.js';

const INT64 = onnx.TensorProto.DataType.INT64;

/** A Constant node on builder b (not an initializer: not a parameter); int64 when asked. Returns its output. */
export function constant(b, values, dims, int64 = false) {
  const y = b.name('const');
  const t = int64
    ? onnx.TensorProto.create({ name: y, dims, dataType: INT64, int64Data: values })
    : tensor(y, dims, values);
  b.nodes.push(node('Constant', [], [y], [onnx.AttributeProto.create({ name: 'value', type: onnx.AttributeProto.AttributeType.TENSOR, t })]));
  return y;
}

const k3 = (k) => [k, k, k];
const SAME_S1 = Array(6).fill(1); // 3³, stride 1
const SAME_S2 = [0, 0, 0, 1, 1, 1]; // 3³, stride 2, TensorFlow 'SAME' on even sizes: nothing before, one after

class LoopBuilder extends Builder {
  /** A conv weight [cout, cin, k³] (He-uniform, fan_in cin·k³/stride³) and optionally its bias. */
  convWeights(cin, cout, k, { bias = true, stride = 1, transposed = false } = {}) {
    const w = this.name(transposed ? 'wt' : 'w');
    const a = Math.sqrt((6 * stride ** 3) / (cin * k ** 3));
    const dims = transposed ? [cin, cout, k, k, k] : [cout, cin, k, k, k];
    this.inits.push(tensor(w, dims, uniform(cin * cout * k ** 3, this.s(), -a, a)));
    if (!bias) return { w };
    const bn = this.name(transposed ? 'bt' : 'b');
    this.inits.push(tensor(bn, [cout], uniform(cout, this.s(), -0.05, 0.05)));
    return { w, b: bn };
  }
  /** Conv with the given weight (and bias), kernel k, stride, pads. */
  convWith(x, { w, b }, k, stride = 1, pads = Array(6).fill((k - 1) >> 1)) {
    return this.op('Conv', b ? [x, w, b] : [x, w], [attrInts('kernel_shape', k3(k)), attrInts('pads', pads), attrInts('strides', k3(stride))]);
  }
  /** ConvTranspose with the given weight [cin, cout, k³] (and bias). */
  convTWith(x, { w, b }, k, stride, pads) {
    return this.op('ConvTranspose', b ? [x, w, b] : [x, w], [attrInts('kernel_shape', k3(k)), attrInts('pads', pads), attrInts('strides', k3(stride))]);
  }
  /** Conv cin→cout with fresh weights; bias optional. */
  convx(x, cin, cout, { k = 3, stride = 1, pads, bias = true } = {}) {
    return this.convWith(x, this.convWeights(cin, cout, k, { bias, stride }), k, stride, pads);
  }
}

// ------------------------------------------------------------------------------------------- LPCNN, MoDL-QSM

/** The shared residual trunk of LPCNN's gen and MoDL-QSM's basic_model: first conv, residual blocks, 1³ convs. */
function residualTrunk(b, cin, c, blocks) {
  let x = b.relu(b.convx('input', cin, c, { bias: false }));
  for (let i = 0; i < blocks; i++) {
    const y = b.relu(b.bn(b.convx(x, c, c, { bias: false }), c));
    x = b.relu(b.add(b.bn(b.convx(y, c, c, { bias: false }), c), x));
  }
  x = b.relu(b.convx(x, c, c, { k: 1, bias: false }));
  return b.relu(b.convx(x, c, c, { k: 1, bias: false }));
}

/**
 * LPCNN-shaped proximal network with random weights: [1,1,X,Y,Z] → [1,1,X,Y,Z], any size.
 * @param {{channels?: number, blocks?: number, seed?: number}} [o] width (32 = published), residual blocks (8), seed
 */
export function lpcnnStandin({ channels = 32, blocks = 8, seed = 51 } = {}) {
  const b = new LoopBuilder(seed);
  const x = residualTrunk(b, 1, channels, blocks);
  return b.finish(b.convx(x, channels, 1, { k: 1, bias: false }), 'tessera-standin-lpcnn', 1, 1);
}

/** Parameter count of lpcnnStandin from the architecture; trainable and stored as in scripts/standins.js. */
export function lpcnnParamCount({ channels: c = 32, blocks = 8 } = {}) {
  const t = 27 * c + blocks * (2 * 27 * c * c + 4 * c) + 2 * c * c + c;
  return { trainable: t, stored: t + blocks * 4 * c };
}

/**
 * MoDL-QSM-shaped denoiser with random weights: [1,2,X,Y,Z] → [1,2,X,Y,Z], any size.
 * @param {{channels?: number, blocks?: number, seed?: number}} [o] width (32 = published), residual blocks (8), seed
 */
export function modlStandin({ channels = 32, blocks = 8, seed = 61 } = {}) {
  const b = new LoopBuilder(seed);
  const x = residualTrunk(b, 2, channels, blocks);
  return b.finish(b.convx(x, channels, 2, { k: 1 }), 'tessera-standin-modl-qsm', 2, 2);
}

/** Parameter count of modlStandin from the architecture. */
export function modlParamCount({ channels: c = 32, blocks = 8 } = {}) {
  const t = 54 * c + blocks * (2 * 27 * c * c + 4 * c) + 2 * c * c + 2 * c + 2;
  return { trainable: t, stored: t + blocks * 4 * c };
}

// ---------------------------------------------------------------------------------------------------- NeXtQSM

const filtersOf = (base, maxFilters) => (i) => Math.min(maxFilters, base * 2 ** i);

/** The forward UNet; returns the output and what the backward pass needs (weights, activations, channel counts). */
function unetForward(b, levels, base, maxFilters) {
  const f = filtersOf(base, maxFilters);
  const enc = [];
  let x = 'input';
  let cin = 1;
  for (let i = 0; i < levels; i++) {
    const stride = i === 0 ? 1 : 2;
    const w = b.convWeights(cin, f(i), 3, { stride });
    x = b.relu(b.convWith(x, w, 3, stride, i === 0 ? SAME_S1 : SAME_S2));
    enc.push({ w: w.w, a: x });
    cin = f(i);
  }
  const dec = [];
  for (let i = levels - 2; i >= 0; i--) {
    const w = b.convWeights(cin, f(i), 3, { stride: 2, transposed: true });
    const u = b.relu(b.convTWith(x, w, 3, 2, SAME_S2));
    x = b.concat(u, enc[i].a);
    dec.push({ w: w.w, u, level: i, cu: f(i), cskip: f(i) });
    cin = 2 * f(i);
  }
  const last = b.convWeights(cin, 1, 3);
  return { y: b.convWith(x, last, 3, 1, SAME_S1), enc, dec, last: last.w };
}

/** ∂/∂input Σ|y| through the UNet of unetForward (the same weight tensors, no biases needed). */
function unetBackward(b, fwd) {
  const zero = constant(b, [0], []);
  const reluGrad = (a, g) => b.op('Where', [b.op('Greater', [a, zero]), g, zero]);
  let g = b.op('Sign', [fwd.y]);
  g = b.convTWith(g, { w: fwd.last }, 3, 1, SAME_S1);
  const skip = [];
  for (let j = fwd.dec.length - 1; j >= 0; j--) {
    const d = fwd.dec[j];
    const gu = b.name('split'), gs = b.name('split');
    b.nodes.push(node('Split', [g, constant(b, [d.cu, d.cskip], [2], true)], [gu, gs], [attrInt('axis', 1)]));
    skip[d.level] = gs;
    g = b.convWith(reluGrad(d.u, gu), { w: d.w }, 3, 2, SAME_S2);
  }
  for (let i = fwd.enc.length - 1; i >= 0; i--) {
    if (skip[i]) g = b.add(g, skip[i]);
    g = b.convTWith(reluGrad(fwd.enc[i].a, g), { w: fwd.enc[i].w }, 3, i === 0 ? 1 : 2, i === 0 ? SAME_S1 : SAME_S2);
  }
  return g;
}

/**
 * NeXtQSM-shaped UNet with random weights: the BF net (vjp false) maps [1,1,X,Y,Z] → [1,1,X,Y,Z]; the VJP net (vjp
 * true) returns ∂/∂input Σ|UNet(input)|, the same shape.
 * @param {{vjp?: boolean, levels?: number, base?: number, maxFilters?: number, seed?: number}} [o] levels (BF 7, VJP 6
 *   published), first-level channels (16), channel cap (512), seed
 * @returns {Uint8Array} ONNX bytes; spatial dims must be multiples of nextqsmDivisor(levels)
 */
export function nextqsmStandin({ vjp = false, levels = vjp ? 6 : 7, base = 16, maxFilters = 512, seed = vjp ? 73 : 71 } = {}) {
  if (levels < 2) throw new RangeError('nextqsmStandin: levels must be at least 2');
  const b = new LoopBuilder(seed);
  const fwd = unetForward(b, levels, base, maxFilters);
  const out = vjp ? unetBackward(b, fwd) : fwd.y;
  return b.finish(out, vjp ? 'tessera-standin-nextqsm-vjp' : 'tessera-standin-nextqsm-bf', 1, 1);
}

/** Spatial divisor of the NeXtQSM-shaped UNet: levels − 1 stride-2 convolutions (BF 64, VJP 32). */
export const nextqsmDivisor = (levels) => 2 ** (levels - 1);

/** Parameter count of nextqsmStandin from the architecture (no batch norm: trainable = stored; the VJP shares them). */
export function nextqsmParamCount({ vjp = false, levels = vjp ? 6 : 7, base = 16, maxFilters = 512 } = {}) {
  const f = filtersOf(base, maxFilters);
  let t = 0;
  let cin = 1;
  for (let i = 0; i < levels; i++) {
    t += 27 * cin * f(i) + f(i);
    cin = f(i);
  }
  for (let i = levels - 2; i >= 0; i--) {
    t += 27 * cin * f(i) + f(i);
    cin = 2 * f(i);
  }
  t += 27 * cin + 1;
  return { trainable: t, stored: t };
}

/**
 * The physics-loop stand-ins by file (the same shape as STANDINS in scripts/standins.js): model is the registry id,
 * weightsIndex the file's place in the registry entry's weights, channels the input/output channels.
 */
export const LOOP_STANDINS = {
  lpcnn: { build: lpcnnStandin, params: lpcnnParamCount, divisor: 8, file: 'lpcnn-standin.onnx', model: 'lpcnn', weightsIndex: 0, channels: 1 },
  'modl-qsm': { build: modlStandin, params: modlParamCount, divisor: 2, file: 'modl-qsm-standin.onnx', model: 'modl-qsm', weightsIndex: 0, channels: 2 },
  'nextqsm-bf': {
    build: (o = {}) => nextqsmStandin({ ...o, vjp: false }),
    params: (o = {}) => nextqsmParamCount({ ...o, vjp: false }),
    divisor: nextqsmDivisor(7),
    file: 'nextqsm-bf-standin.onnx',
    model: 'nextqsm',
    weightsIndex: 0,
    channels: 1,
  },
  'nextqsm-vjp': {
    build: (o = {}) => nextqsmStandin({ ...o, vjp: true }),
    params: (o = {}) => nextqsmParamCount({ ...o, vjp: true }),
    divisor: nextqsmDivisor(6),
    file: 'nextqsm-vjp-standin.onnx',
    model: 'nextqsm',
    weightsIndex: 1,
    channels: 1,
  },
};
