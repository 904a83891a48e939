// IR2QSM-shaped stand-in with seeded random weights, for measuring what ONNX Runtime Web needs per patch voxel
// (bench/calibrate.js), built like the xQSM- and QSMnet-shaped nets of scripts/standins.js (onnx-proto, ONNX IR 8,
// opset 17, f32, weights as raw_data). Input 'input' f32 [1, 1, X, Y, Z] (dynamic), output 'output' [1, 1, X, Y, Z].
//
// Taken from the authors' public PyTorch code (YangGaoUQ/IR2QSM, Train/IR2Unet.py and Train/IR2UnetBlock.py; Li M,
// Chen C, Xiong Z, et al., Med Phys 2025), read, not copied:
//   IR2Unet(iterations 4, multiplier 1, depth 4): channels f = 16·2^i = 16-32-64-128.
//   CB(i, o) = Conv3d 3³ pad 1 with bias → BatchNorm3d → ReLU;  DB(i, o) = ConvTranspose3d 2³ stride 2 → BN → ReLU.
//   Per iteration t (the four iterations have their own weights):
//     pre: CB(1, 16), CB(16, 16) on the input (t = 0) or on the previous iteration's output (t > 0);
//     encoder level l = 0..2: (t > 0 only: CB(2f_l, f_l) on concat[x, dec of level l from iteration t−1]),
//       CB(f_l, f_l) (= the skip enc[l]), CB(f_l, 2f_l), MaxPool 2³;
//     middle ConvSRU2(128, 128): u = sigmoid(CB(x)), o = CB(x), h = h·(1 − u) + o·u, with h = x at t = 0 and the
//       previous iteration's h after (the recurrent module);
//     decoder level L = 0..2 (in = f_{3−L}, out = in/2): DB(in, out), concat the skip, CB(in, in), CB(in, out);
//     post: CB(16, 16), Conv3d 1³ 16→1 with bias, + the network input (residual) = the iteration's output.
//   End: concat the four outputs, Conv3d 1³ 4→1 with bias, + the input.
//   Divisor 2^(depth−1) = 8 (three max-poolings), as the registry says.
// Chosen where the code leaves freedom:
//   - modules the forward pass never calls are not in the graph (an ONNX export drops them): iteration 0's encoder
//     CB(2f, f) (iteration 0 has no previous decoder output to concatenate) and post_transform_conv_block1;
//   - dropout and the training-time noise are identities at inference (the code's last AddNoise is not guarded by
//     `self.training`, so an export traced with noise would carry a random-normal op; left out: it does not change
//     which activations are live);
//   - BatchNorm stays a separate node with its running statistics stored (as the PyTorch export keeps it; ORT folds it
//     at load time).
// The count then gives 10 059 929 stored floats = 40 239 716 B against the real file's 40 259 354 B (−0.05 %; the
// rest is graph structure and names).
import { Builder } from './standins.js';
import { attrInt } from '../tests/js/onnx-build.js';
import { constant } from './standins-loops.js';

/**
 * IR2QSM-shaped recurrent U-Net with random weights.
 * @param {{base?: number, depth?: number, iterations?: number, seed?: number}} [o] first-level channels (16 =
 *   published), levels (4: three poolings), iterations (4), weight seed
 * @returns {Uint8Array} ONNX bytes; spatial dims must be multiples of ir2qsmDivisor(depth)
 */
export function ir2qsmStandin({ base = 16, depth = 4, iterations = 4, seed = 41 } = {}) {
  if (depth < 2 || iterations < 1) throw new RangeError('ir2qsmStandin: depth must be at least 2 and iterations at least 1');
  const b = new Builder(seed);
  const f = Array.from({ length: depth }, (_, i) => base * 2 ** i);
  const top = f[depth - 1];
  const cb = (x, ci, co) => b.relu(b.bn(b.conv(x, ci, co), co));
  const one = constant(b, [1], []);
  let prev = 'input';
  let h = null;
  let dec = [];
  const outs = [];
  for (let t = 0; t < iterations; t++) {
    let x = cb(cb(prev, 1, f[0]), f[0], f[0]);
    const enc = [];
    for (let l = 0; l < depth - 1; l++) {
      if (t > 0) x = cb(b.concat(x, dec[depth - l - 2]), 2 * f[l], f[l]);
      x = cb(x, f[l], f[l]);
      enc[l] = x;
      x = b.maxpool(cb(x, f[l], 2 * f[l]));
    }
    if (t === 0) h = x;
    const u = b.op('Sigmoid', [cb(x, top, top)]);
    const o = cb(x, top, top);
    h = b.add(b.op('Mul', [h, b.op('Sub', [one, u])]), b.op('Mul', [o, u]));
    x = h;
    const nextDec = [];
    for (let L = 0; L < depth - 1; L++) {
      const ci = f[depth - 1 - L], co = ci / 2;
      const up = b.relu(b.bn(b.convT(x, ci, co, 2), co));
      x = cb(cb(b.concat(up, enc[depth - L - 2]), ci, ci), ci, co);
      nextDec[L] = x;
    }
    dec = nextDec;
    const y = b.add(b.conv(cb(x, f[0], f[0]), f[0], 1, 1), 'input');
    outs.push(y);
    prev = y;
  }
  const all = outs.length > 1 ? b.op('Concat', outs, [attrInt('axis', 1)]) : outs[0];
  return b.finish(b.add(b.conv(all, iterations, 1, 1), 'input'), 'tessera-standin-ir2qsm');
}

/** Spatial divisor of the IR2QSM-shaped net: depth − 1 max-poolings. */
export const ir2qsmDivisor = (depth = 4) => 2 ** (depth - 1);

/**
 * Parameter count of ir2qsmStandin from the architecture (independent of the builder); trainable = conv and
 * transposed-conv weights and biases + BN scale and bias, stored = trainable + BN running mean and variance.
 */
export function ir2qsmParamCount({ base = 16, depth = 4, iterations = 4 } = {}) {
  let t = 0, r = 0;
  const cb = (i, o) => {
    t += 27 * i * o + o + 2 * o;
    r += 2 * o;
  };
  const db = (i, o) => {
    t += 8 * i * o + o + 2 * o;
    r += 2 * o;
  };
  const f = Array.from({ length: depth }, (_, i) => base * 2 ** i);
  for (let it = 0; it < iterations; it++) {
    cb(1, f[0]);
    cb(f[0], f[0]);
    for (let l = 0; l < depth - 1; l++) {
      if (it > 0) cb(2 * f[l], f[l]);
      cb(f[l], f[l]);
      cb(f[l], 2 * f[l]);
    }
    cb(f[depth - 1], f[depth - 1]);
    cb(f[depth - 1], f[depth - 1]);
    for (let L = 0; L < depth - 1; L++) {
      const ci = f[depth - 1 - L];
      db(ci, ci / 2);
      cb(ci, ci);
      cb(ci, ci / 2);
    }
    cb(f[0], f[0]);
    t += f[0] + 1;
  }
  t += iterations + 1;
  return { trainable: t, stored: t + r };
}

/** The IR2QSM stand-in by registry id (the same shape as STANDINS in scripts/standins.js). */
export const IR2QSM_STANDINS = {
  ir2qsm: { build: ir2qsmStandin, params: ir2qsmParamCount, divisor: ir2qsmDivisor(4), file: 'ir2qsm-standin.onnx', model: 'ir2qsm', weightsIndex: 0, channels: 1 },
};
