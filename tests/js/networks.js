// Test networks for the JavaScript suites, built with onnx-proto (ONNX IR 8, opset 17, f32).
// Not a test file: tests import the builders (ONNX bytes as Uint8Array) and the pure-JS reference.
//
// Layout everywhere: f32 [1, C, X, Y, Z], row-major (z fastest), like the ONNX tensors the pool runs.
import { onnx, prng, tensor, valueInfo, attrInts, attrInt, node, GraphBuilder } from './onnx-build.js';

export { prng };

/** A Float32Array of n pseudo-random values in [-scale, scale) from a seed. */
export function randomArray(n, seed, scale = 1) {
  const r = prng(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = (2 * r() - 1) * scale;
  return out;
}

function model(graph) {
  const m = onnx.ModelProto.create({
    irVersion: 8,
    producerName: 'tessera-tests',
    opsetImport: [{ domain: '', version: 17 }],
    graph,
  });
  return onnx.ModelProto.encode(m).finish();
}

/** Graph-building helper with name generation. */
class Builder extends GraphBuilder {
  /** 3D convolution (kernel k, 'same' zero padding unless given), He-like small weights from the seed. */
  conv(x, cin, cout, { k = 3, stride = 1, pads, weights, bias } = {}) {
    const w = this.name('w');
    const b = this.name('b');
    const n = cout * cin * k * k * k;
    const wData = weights ?? randomArray(n, this.seed + 7919 * this.n, Math.sqrt(1.5 / (cin * k * k * k)));
    const bData = bias ?? randomArray(cout, this.seed + 104729 * this.n + 1, 0.05);
    this.inits.push(tensor(w, [cout, cin, k, k, k], wData), tensor(b, [cout], bData));
    const p = pads ?? Array(6).fill((k - 1) >> 1);
    const y = this.name('conv');
    this.nodes.push(
      node('Conv', [x, w, b], [y], [
        attrInts('kernel_shape', [k, k, k]),
        attrInts('pads', p),
        attrInts('strides', [stride, stride, stride]),
      ]),
    );
    return y;
  }
  upconv(x, cin, cout) {
    const w = this.name('wt');
    const b = this.name('bt');
    this.inits.push(
      tensor(w, [cin, cout, 2, 2, 2], randomArray(cin * cout * 8, this.seed + 31 * this.n, Math.sqrt(1.5 / (cin * 8)))),
      tensor(b, [cout], randomArray(cout, this.seed + 37 * this.n, 0.05)),
    );
    const y = this.name('up');
    this.nodes.push(
      node('ConvTranspose', [x, w, b], [y], [attrInts('kernel_shape', [2, 2, 2]), attrInts('strides', [2, 2, 2])]),
    );
    return y;
  }
  finish(input, output, inChannels, outChannels, outDims = ['X', 'Y', 'Z']) {
    this.nodes.push(node('Identity', [output], ['output']));
    return model(
      onnx.GraphProto.create({
        name: 'tessera_test',
        node: this.nodes,
        initializer: this.inits,
        input: [valueInfo('input', [1, inChannels, 'X', 'Y', 'Z'])],
        output: [valueInfo('output', [1, outChannels, ...outDims])],
      }),
    );
  }
}

/** Deterministic weights of the conv stack: [{w, b, cin, cout}] per layer (shared by builder and reference). */
export function convStackWeights({ layers = 3, channels = 4, inChannels = 1, outChannels = 1, seed = 1 } = {}) {
  const out = [];
  for (let l = 0; l < layers; l++) {
    const cin = l === 0 ? inChannels : channels;
    const cout = l === layers - 1 ? outChannels : channels;
    const s = (seed * 1000003 + l * 7919) >>> 0;
    out.push({
      cin,
      cout,
      w: randomArray(cout * cin * 27, s, Math.sqrt(1.5 / (cin * 27))),
      b: randomArray(cout, s + 1, 0.05),
    });
  }
  return out;
}

/**
 * (a) A stack of `layers` 3×3×3 Conv3d ('same' zero padding), ReLU between, last layer linear.
 * Receptive radius = layers voxels. Input 'input' [1,inChannels,X,Y,Z] with dynamic X,Y,Z.
 * (c) With inChannels = outChannels = 2 it is the 2-channel network.
 * @returns {Uint8Array} ONNX bytes
 */
export function convStack(opts = {}) {
  const ws = convStackWeights(opts);
  const b = new Builder(opts.seed ?? 1);
  let x = 'input';
  ws.forEach((l, i) => {
    x = b.conv(x, l.cin, l.cout, { weights: l.w, bias: l.b });
    if (i < ws.length - 1) x = b.relu(x);
  });
  return b.finish('input', x, ws[0].cin, ws[ws.length - 1].cout);
}

/** (c) 2 channels in, 2 channels out (conv stack of `layers`, hidden `channels`). */
export function twoChannel({ layers = 2, channels = 4, seed = 5 } = {}) {
  return convStack({ layers, channels, inChannels: 2, outChannels: 2, seed });
}

/**
 * (b) Small 3D U-Net: three levels of MaxPool 2³ (spatial dims must be multiples of 8), a
 * ConvTranspose 2³ stride-2 decoder with skip concatenation. Input/output [1,1,X,Y,Z].
 * @returns {Uint8Array} ONNX bytes
 */
export function unet({ base = 4, seed = 3 } = {}) {
  const b = new Builder(seed);
  const c = [base, base * 2, base * 4, base * 8];
  let x = b.relu(b.conv('input', 1, c[0]));
  const skips = [];
  let cin = c[0];
  for (let lvl = 1; lvl <= 3; lvl++) {
    skips.push({ x, ch: cin });
    x = b.maxpool(x);
    x = b.relu(b.conv(x, cin, c[lvl]));
    cin = c[lvl];
  }
  for (let lvl = 2; lvl >= 0; lvl--) {
    const skip = skips[lvl];
    x = b.upconv(x, cin, skip.ch);
    x = b.concat(x, skip.x);
    x = b.relu(b.conv(x, 2 * skip.ch, skip.ch));
    cin = skip.ch;
  }
  x = b.conv(x, cin, 1, { k: 1 });
  return b.finish('input', x, 1, 1);
}

/**
 * (d) A network whose output shape is wrong: one strided 3³ conv (stride 2, pad 1) halves the
 * spatial dims: [1,1,X,Y,Z] → [1,1,ceil(X/2),ceil(Y/2),ceil(Z/2)].
 * @returns {Uint8Array} ONNX bytes
 */
export function wrongShape({ seed = 9 } = {}) {
  const b = new Builder(seed);
  const x = b.conv('input', 1, 1, { stride: 2 });
  return b.finish('input', x, 1, 1, ['X2', 'Y2', 'Z2']);
}

/**
 * Pure-JS reference of convStack(opts) on `input` ([1,inChannels,X,Y,Z] row-major, z fastest):
 * a direct 3D convolution with zero padding, accumulated in f64 and rounded to f32 per layer.
 * @returns {Float32Array} [1,outChannels,X,Y,Z]
 */
export function convStackReference(input, [X, Y, Z], opts = {}) {
  const ws = convStackWeights(opts);
  const V = X * Y * Z;
  let cur = input;
  ws.forEach((l, li) => {
    const out = new Float32Array(l.cout * V);
    const acc = new Float64Array(V);
    for (let co = 0; co < l.cout; co++) {
      acc.fill(l.b[co]);
      for (let ci = 0; ci < l.cin; ci++) {
        const src = ci * V;
        for (let kx = 0; kx < 3; kx++)
          for (let ky = 0; ky < 3; ky++)
            for (let kz = 0; kz < 3; kz++) {
              const wv = l.w[(((co * l.cin + ci) * 3 + kx) * 3 + ky) * 3 + kz];
              const dx = kx - 1, dy = ky - 1, dz = kz - 1;
              for (let x = Math.max(0, -dx); x < Math.min(X, X - dx); x++)
                for (let y = Math.max(0, -dy); y < Math.min(Y, Y - dy); y++) {
                  const o = (x * Y + y) * Z;
                  const s = src + ((x + dx) * Y + (y + dy)) * Z + dz;
                  for (let z = Math.max(0, -dz); z < Math.min(Z, Z - dz); z++) acc[o + z] += wv * cur[s + z];
                }
            }
      }
      const relu = li < ws.length - 1;
      for (let i = 0; i < V; i++) out[co * V + i] = relu && acc[i] < 0 ? 0 : acc[i];
    }
    cur = out;
  });
  return cur;
}

/**
 * A native-patching network (AutoQSM / QSMGAN shape): the central out³ of a [1, 1, 64, 64, 64] input, times scale.
 * Through native patching with scale 1 it is the identity of the field (AutoQSM's blend weights sum to 1).
 * @returns {Uint8Array} ONNX bytes
 */
export function centralCrop({ out = 32, scale = 1 } = {}) {
  const b = new Builder(1);
  const o = (64 - out) / 2;
  const INT64 = onnx.TensorProto.DataType.INT64;
  const ints = (name, values) => onnx.TensorProto.create({ name, dims: [values.length], dataType: INT64, int64Data: values });
  b.inits.push(ints('starts', [o, o, o]), ints('ends', [o + out, o + out, o + out]), ints('axes', [2, 3, 4]), tensor('scale', [1], [scale]));
  const cropped = b.op('Slice', ['input', 'starts', 'ends', 'axes']);
  return b.finish('input', b.op('Mul', [cropped, 'scale']), 1, 1, [out, out, out]);
}

/**
 * A network whose activations grow with the tile: input [1,1,X,Y,Z] is broadcast to `copies` copies (Expand,
 * copies·X·Y·Z·4 bytes), concatenated `fold` times (fold times that) and reduced back by a max over the copies, so
 * the output equals the input exactly. It needs (1 + fold)·copies·X·Y·Z·4 bytes at once: with the defaults an 8³
 * tile needs 8 MiB and a 64³ tile 4 GiB (a 256 MiB broadcast, then a 3.75 GiB concatenation), past the 4 GB
 * ceiling of ONNX Runtime Web's wasm heap while only the broadcast is ever written.
 * @returns {Uint8Array} ONNX bytes
 */
export function memoryHog({ copies = 256, fold = 15 } = {}) {
  const b = new Builder(1);
  const INT64 = onnx.TensorProto.DataType.INT64;
  b.inits.push(onnx.TensorProto.create({ name: 'copies', dims: [5], dataType: INT64, int64Data: [copies, 1, 1, 1, 1] }));
  const wide = b.op('Expand', ['input', 'copies']);
  const tall = b.op('Concat', Array(fold).fill(wide), [attrInt('axis', 0)]);
  const back = b.op('ReduceMax', [tall], [attrInts('axes', [0]), attrInt('keepdims', 1)]);
  return b.finish('input', back, 1, 1);
}
