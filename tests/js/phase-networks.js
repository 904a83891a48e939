// Test networks for the wrapped-phase models (iQSM / iQFM / iQSM+, Gao et al.), built with onnx-proto
// (ONNX IR 8, opset 17, f32). Not a test file: tests import the builder and the pure-JS reference.
//
// lotNet() is exactly the "LoT layer" b output of those networks (no U-Net, no /4):
//   c = cos(phase), s = sin(phase)
//   LG(x) = Conv3d(x, K, padding 1) · border          (border: 1 inside, 0 on the outermost voxel layer)
//   chi   = (LG(s)·c − LG(c)·s) · mask / (b0·te) · (3·20e-3)      [· b0_dir[0,0,2] for plus]
// with K the fixed 27-point Laplacian LOT_KERNEL. LG(s)·c − LG(c)·s = Σ_k K_k sin(φ_k − φ_0): the Laplacian
// of the UNWRAPPED phase for smooth phase, whatever the wraps.
//
// Layout everywhere: f32 [1, 1, X, Y, Z], row-major (z fastest), like the ONNX tensors the pool runs.
import { onnx, tensor, valueInfo, attrInts, node } from './onnx-build.js';

/** The iQSM LoT kernel (3×3×3, symmetric): corners 1/13, edge neighbours 3/26, face neighbours 3/13, centre −44/13. */
export const LOT_KERNEL = (() => {
  const k = new Float32Array(27);
  for (let x = 0; x < 3; x++)
    for (let y = 0; y < 3; y++)
      for (let z = 0; z < 3; z++) {
        const off = (x !== 1) + (y !== 1) + (z !== 1); // 0 centre, 1 face, 2 edge, 3 corner
        k[(x * 3 + y) * 3 + z] = [-44 / 13, 3 / 13, 3 / 26, 1 / 13][off];
      }
  return k;
})();

/** The LoT layer's constant factor 3·20e-3 (applied after the division by b0·te). */
export const LOT_SCALE = 3 * 20e-3;

const ROLES = ['phase', 'mask', 'te', 'b0', 'b0_dir', 'border'];

/**
 * Input names in the reference order for the phase networks: phase, mask, te, b0, (b0_dir when plus), border.
 * @param {boolean} plus
 * @param {Record<string,string>|string[]} [names] renames: an object by role (phase, mask, te, b0, b0_dir,
 *   border) or an array of the names in order
 * @returns {{role: string, name: string}[]}
 */
export function phaseInputs(plus, names) {
  const roles = ROLES.filter((r) => plus || r !== 'b0_dir');
  let list;
  if (Array.isArray(names)) {
    if (names.length !== roles.length) throw new RangeError(`expected ${roles.length} input names (${roles.join(', ')})`);
    list = roles.map((role, i) => ({ role, name: names[i] }));
  } else {
    for (const k of Object.keys(names ?? {}))
      if (!roles.includes(k)) throw new RangeError(`unknown input role '${k}' (roles: ${roles.join(', ')})`);
    list = roles.map((role) => ({ role, name: names?.[role] ?? role }));
  }
  if (new Set(list.map((e) => e.name)).size !== list.length) throw new RangeError('input names must be distinct');
  return list;
}

/** ValueInfo of a phase-network input by role. */
export function phaseInputInfo(role, name) {
  if (role === 'te' || role === 'b0') return valueInfo(name, [1]);
  if (role === 'b0_dir') return valueInfo(name, [1, 1, 3]);
  return valueInfo(name, [1, 1, 'X', 'Y', 'Z']);
}

/**
 * The LoT layer's b output as an ONNX test network.
 * Inputs (reference order): phase [1,1,X,Y,Z], mask [1,1,X,Y,Z], te [1], b0 [1], (plus: b0_dir [1,1,3]),
 * border [1,1,X,Y,Z]; X, Y, Z dynamic. Output 'chi' [1,1,X,Y,Z]. With plus the output is multiplied by
 * b0_dir[0,0,2] (so a test sees the direction arrive).
 * @param {{plus?: boolean, names?: Record<string,string>|string[]}} [o]
 * @returns {Uint8Array} ONNX bytes
 */
export function lotNet({ plus = false, names } = {}) {
  const ins = phaseInputs(plus, names);
  const n = Object.fromEntries(ins.map((e) => [e.role, e.name]));
  const inits = [tensor('lot_k', [1, 1, 3, 3, 3], LOT_KERNEL), tensor('lot_scale', [1], [LOT_SCALE])];
  const conv = (x, y) =>
    node('Conv', [x, 'lot_k'], [y], [attrInts('kernel_shape', [3, 3, 3]), attrInts('pads', [1, 1, 1, 1, 1, 1]), attrInts('strides', [1, 1, 1])]);
  const out = plus ? 'lot_b' : 'chi';
  const nodes = [
    node('Cos', [n.phase], ['cos']),
    node('Sin', [n.phase], ['sin']),
    conv('sin', 'conv_sin'),
    node('Mul', ['conv_sin', n.border], ['lg_sin']),
    conv('cos', 'conv_cos'),
    node('Mul', ['conv_cos', n.border], ['lg_cos']),
    node('Mul', ['lg_sin', 'cos'], ['t1']),
    node('Mul', ['lg_cos', 'sin'], ['t2']),
    node('Sub', ['t1', 't2'], ['lap']),
    node('Mul', ['lap', n.mask], ['lap_masked']),
    node('Mul', [n.b0, n.te], ['b0te']),
    node('Div', ['lot_scale', 'b0te'], ['factor']),
    node('Mul', ['lap_masked', 'factor'], [out]),
  ];
  if (plus) {
    inits.push(tensor('pick_z', [3, 1], [0, 0, 1]));
    nodes.push(node('MatMul', [n.b0_dir, 'pick_z'], ['b0z']), node('Mul', [out, 'b0z'], ['chi']));
  }
  const m = onnx.ModelProto.create({
    irVersion: 8,
    producerName: 'tessera-tests',
    opsetImport: [{ domain: '', version: 17 }],
    graph: onnx.GraphProto.create({
      name: plus ? 'lot_layer_plus' : 'lot_layer',
      node: nodes,
      initializer: inits,
      input: ins.map((e) => phaseInputInfo(e.role, e.name)),
      output: [valueInfo('chi', [1, 1, 'X', 'Y', 'Z'])],
    }),
  });
  return onnx.ModelProto.encode(m).finish();
}

/** The border shell for dims [X,Y,Z]: 1 inside, 0 on the outermost voxel layer. */
export function borderShell([X, Y, Z]) {
  const out = new Float32Array(X * Y * Z);
  for (let x = 1; x < X - 1; x++)
    for (let y = 1; y < Y - 1; y++) out.fill(1, (x * Y + y) * Z + 1, (x * Y + y) * Z + Z - 1);
  return out;
}

/** 3×3×3 convolution with zero padding of a [X][Y][Z] volume (f64 accumulation). */
export function conv27(src, [X, Y, Z], kernel) {
  const out = new Float64Array(X * Y * Z);
  for (let kx = 0; kx < 3; kx++)
    for (let ky = 0; ky < 3; ky++)
      for (let kz = 0; kz < 3; kz++) {
        const w = kernel[(kx * 3 + ky) * 3 + kz];
        const dx = kx - 1, dy = ky - 1, dz = kz - 1;
        for (let x = Math.max(0, -dx); x < Math.min(X, X - dx); x++)
          for (let y = Math.max(0, -dy); y < Math.min(Y, Y - dy); y++) {
            const o = (x * Y + y) * Z;
            const s = ((x + dx) * Y + (y + dy)) * Z + dz;
            for (let z = Math.max(0, -dz); z < Math.min(Z, Z - dz); z++) out[o + z] += w * src[s + z];
          }
      }
  return out;
}

/**
 * Plain-JS reference of lotNet on network layout ([X][Y][Z], z fastest).
 * @param {Float32Array} phase wrapped (or not) phase
 * @param {Float32Array} mask
 * @param {Float32Array} border border shell (see borderShell)
 * @param {number} te echo time
 * @param {number} b0 field strength
 * @param {number[]} dims [X, Y, Z]
 * @param {number} [b0z] z component of the B0 direction (plus); 1 otherwise
 * @returns {Float32Array}
 */
export function lotReference(phase, mask, border, te, b0, dims, b0z = 1) {
  const V = dims[0] * dims[1] * dims[2];
  const c = new Float64Array(V), s = new Float64Array(V);
  for (let i = 0; i < V; i++) {
    c[i] = Math.cos(phase[i]);
    s[i] = Math.sin(phase[i]);
  }
  const lgS = conv27(s, dims, LOT_KERNEL), lgC = conv27(c, dims, LOT_KERNEL);
  const f = (LOT_SCALE / (Number(b0) * Number(te))) * b0z;
  const out = new Float32Array(V);
  for (let i = 0; i < V; i++) out[i] = (lgS[i] * c[i] - lgC[i] * s[i]) * border[i] * mask[i] * f;
  return out;
}
