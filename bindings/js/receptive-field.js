// How far a network looks: its theoretical receptive field, derived from the ONNX graph, and the measured one, from a
// probe of the network (the response of its output to a perturbation of one input voxel, by distance).
//
// The graph is read straight from the ONNX bytes (onnx-graph.js: the weights are skipped, never decoded), so a
// 400 MB file costs no copy. Each spatial axis of every tensor carries how one of its voxels maps onto the network
// input: voxel i depends on input voxels [start + jump·i, start + jump·i + width]. Convolutions and poolings widen it
// by (kernel − 1)·dilation·jump and multiply the jump by the stride; transposed convolutions and resizes divide it;
// padding and slicing shift the start; element-wise and channel operations merge their inputs' windows. Operations
// that mix the whole extent (global pooling, instance/layer normalisation over space, reductions) make the field
// global; operations it cannot follow (reshapes over space, custom domains) are named.

import { readOnnxGraph, tensorValues, resizeScales } from './onnx-graph.js';

// ---------------------------------------------------------------------------------------------------
// Receptive field through the graph.

// Operations that keep every spatial position to itself (element-wise or over channels only).
const POINTWISE = new Set([
  'Relu', 'LeakyRelu', 'PRelu', 'Elu', 'Selu', 'Celu', 'Gelu', 'Sigmoid', 'HardSigmoid', 'HardSwish', 'Tanh', 'Softplus',
  'Softsign', 'Mish', 'Exp', 'Log', 'Abs', 'Neg', 'Sqrt', 'Reciprocal', 'Sin', 'Cos', 'Atan', 'Atanh', 'Asinh', 'Erf',
  'Sign', 'Floor', 'Ceil', 'Round', 'Clip', 'Identity', 'Cast', 'Dropout', 'BatchNormalization', 'Add', 'Sub', 'Mul',
  'Div', 'Pow', 'Max', 'Min', 'Sum', 'Mean', 'Where', 'Concat', 'Split', 'Softmax', 'LogSoftmax', 'Not', 'And', 'Or',
  'Equal', 'Greater', 'Less', 'GreaterOrEqual', 'LessOrEqual', 'Unsqueeze', 'Squeeze', 'Shape', 'QuantizeLinear',
  'DequantizeLinear', 'DynamicQuantizeLinear', 'MatMulInteger', 'Expand',
]);
// Operations whose output depends on the whole spatial extent.
const GLOBAL = new Set(['GlobalAveragePool', 'GlobalMaxPool', 'GlobalLpPool', 'InstanceNormalization', 'LpNormalization']);
const WINDOWED = new Set(['Conv', 'ConvInteger', 'QLinearConv', 'MaxPool', 'AveragePool', 'LpPool']);

const attrInts = (n, name, fallback) => (n.attrs[name]?.ints?.length ? n.attrs[name].ints.map(Number) : fallback);
const attrInt = (n, name, fallback) => (n.attrs[name]?.i !== undefined ? Number(n.attrs[name].i) : fallback);
const attrString = (n, name, fallback) => n.attrs[name]?.s ?? fallback;

// A window per spatial axis: voxel i of the tensor depends on input voxels [start + jump·i, start + jump·i + width].
const identityWindow = () => [0, 1, 2].map(() => ({ start: 0, jump: 1, width: 0 }));

function merge(windows) {
  const ws = windows.filter(Boolean);
  if (!ws.length) return null;
  if (ws.some((w) => w === 'global')) return 'global';
  return [0, 1, 2].map((a) => {
    const jump = Math.min(...ws.map((w) => w[a].jump));
    const start = Math.min(...ws.map((w) => w[a].start));
    const end = Math.max(...ws.map((w) => w[a].start + w[a].width));
    return { start, jump, width: end - start };
  });
}

/** The kernel's spatial shape of a conv-like node: the attribute, else the weight initializer's trailing dims. */
function kernelShape(n, graph) {
  const k = attrInts(n, 'kernel_shape', null);
  if (k) return k;
  const w = graph.initializers.get(n.inputs[n.op === 'QLinearConv' ? 3 : 1]);
  if (w && w.dims.length >= 3) return w.dims.slice(2).map(Number);
  throw new Error(`${n.op} node without kernel_shape and without a constant weight: its kernel size is unknown`);
}

/** pads_begin per spatial axis (explicit pads, or auto_pad SAME_* as for stride 1; VALID 0). */
function padsBegin(n, kernel, dilations) {
  const auto = attrString(n, 'auto_pad', 'NOTSET');
  if (auto === 'SAME_UPPER' || auto === 'SAME_LOWER') {
    return kernel.map((k, a) => {
      const total = (k - 1) * dilations[a];
      return auto === 'SAME_UPPER' ? Math.floor(total / 2) : Math.ceil(total / 2);
    });
  }
  const pads = attrInts(n, 'pads', null);
  return pads ? pads.slice(0, kernel.length) : kernel.map(() => 0);
}

/**
 * The theoretical receptive field of an ONNX network (bytes, or a graph readOnnxGraph returned): per spatial axis, how
 * many input voxels below and above an output voxel it depends on. Returns {radius: [x, y, z] (the larger side per
 * axis), below, above, radiusMax, global (an operation mixes the whole extent, so no finite radius holds), unknownOps:
 * [op names it could not follow], ops: {op: count}}. The network's first input is the one followed; its tensors are
 * [N, C, X, Y, Z].
 * @param {Uint8Array|ArrayBuffer|object} bytesOrGraph
 */
export function graphReceptiveField(bytesOrGraph) {
  const graph = bytesOrGraph?.nodes ? bytesOrGraph : readOnnxGraph(bytesOrGraph);
  if (!graph.inputs.length) throw new Error('the ONNX graph has no data input');
  const win = new Map([[graph.inputs[0], identityWindow()]]);
  const ops = {};
  const unknown = new Set();
  // Nodes in file order are topologically sorted (ONNX requires it); loop until nothing changes for safety.
  for (const n of graph.nodes) {
    ops[n.op] = (ops[n.op] ?? 0) + 1;
    const ins = n.inputs.map((x) => win.get(x) ?? null);
    const data = ins[0];
    let out = null;
    if (!ins.some(Boolean)) out = null; // constants only
    else if (ins.some((w) => w === 'global')) out = 'global';
    else if (n.domain && n.domain !== 'ai.onnx' && n.domain !== '') {
      unknown.add(`${n.domain}.${n.op}`);
      out = merge(ins);
    } else if (GLOBAL.has(n.op)) out = 'global';
    else if (n.op === 'LayerNormalization' || n.op === 'GroupNormalization') {
      // Normalising over the spatial axes (GroupNormalization always does; LayerNormalization from its axis on).
      const axis = attrInt(n, 'axis', -1);
      out = n.op === 'GroupNormalization' || (axis >= 0 ? axis <= 4 : axis >= -3) ? 'global' : merge(ins);
    } else if (n.op.startsWith('Reduce') || n.op === 'ArgMax' || n.op === 'ArgMin') {
      const axes = attrInts(n, 'axes', null) ?? tensorValues(graph.initializers.get(n.inputs[1])) ?? [0, 1, 2, 3, 4];
      out = axes.some((x) => x >= 2 || x <= -1) ? 'global' : merge(ins);
    } else if ((WINDOWED.has(n.op) || n.op === 'ConvTranspose') && data) {
      const kernel = kernelShape(n, graph);
      const strides = attrInts(n, 'strides', kernel.map(() => 1));
      const dilations = attrInts(n, 'dilations', kernel.map(() => 1));
      const begin = padsBegin(n, kernel, dilations);
      const transposed = n.op === 'ConvTranspose';
      out = data.map((w, a) => {
        if (a >= kernel.length) return { ...w };
        const K = (kernel[a] - 1) * dilations[a] + 1;
        const s = strides[a];
        // A window: output i reads inputs i·s − pad .. i·s − pad + K − 1. Transposed: output o depends on inputs i
        // with i·s in [o + pad − (K − 1), o + pad], in input coordinates between start + jump·(o + pad − K + 1)/s and
        // start + jump·(o + pad)/s + width.
        if (!transposed) return { start: w.start - w.jump * begin[a], jump: w.jump * s, width: w.width + w.jump * (K - 1) };
        return { start: w.start + (w.jump * (begin[a] - K + 1)) / s, jump: w.jump / s, width: w.width + (w.jump * (K - 1)) / s };
      });
    } else if ((n.op === 'Resize' || n.op === 'Upsample') && data) {
      const scales = resizeScales(n, graph);
      const mode = attrString(n, 'mode', 'nearest');
      if (!scales || scales.length < 5) {
        unknown.add(`${n.op} (scales not constant)`);
        out = merge(ins);
      } else {
        // Output o reads input x ≈ o / s (any coordinate transformation), rounded (nearest) or its 2 (linear) or 4
        // (cubic) neighbours: a window of ±½, ±1 or ±2 input voxels around it.
        const reach = mode === 'nearest' ? 0.5 : mode === 'cubic' ? 2 : 1;
        out = data.map((w, a) => ({ start: w.start - w.jump * reach, jump: w.jump / scales[a + 2], width: w.width + 2 * w.jump * reach }));
      }
    } else if (n.op === 'Pad' && data) {
      const pads = attrInts(n, 'pads', null) ?? tensorValues(graph.initializers.get(n.inputs[1]));
      if (!pads || pads.length < 10) {
        unknown.add('Pad (pads not constant)');
        out = data;
      } else out = data.map((w, a) => ({ ...w, start: w.start - w.jump * pads[a + 2] }));
    } else if (n.op === 'Slice' && data) {
      const starts = tensorValues(graph.initializers.get(n.inputs[1])) ?? attrInts(n, 'starts', null);
      const axes = tensorValues(graph.initializers.get(n.inputs[3])) ?? attrInts(n, 'axes', null) ?? starts?.map((_, i) => i);
      const steps = tensorValues(graph.initializers.get(n.inputs[4])) ?? starts?.map(() => 1);
      if (!starts) {
        unknown.add('Slice (starts not constant)');
        out = data;
      } else {
        out = data.map((w) => ({ ...w }));
        axes.forEach((ax, i) => {
          const a = (ax < 0 ? ax + 5 : ax) - 2;
          if (a < 0 || a > 2) return;
          if (starts[i] < 0) unknown.add('Slice (negative start on a spatial axis)');
          out[a] = { start: out[a].start + out[a].jump * Math.max(0, starts[i]), jump: out[a].jump * (steps[i] ?? 1), width: out[a].width };
        });
      }
    } else if (POINTWISE.has(n.op)) out = merge(ins);
    else {
      unknown.add(n.op);
      out = merge(ins);
    }
    for (const o of n.outputs) win.set(o, out);
  }
  const final = win.get(graph.outputs[0]);
  if (final === undefined || final === null) throw new Error('the ONNX graph output does not depend on its input');
  if (final === 'global') {
    return { radius: null, below: null, above: null, radiusMax: Infinity, global: true, unknownOps: [...unknown], ops };
  }
  // Output voxel i sits at input voxel i (a size-preserving network): it reads [i + start, i + start + width].
  const below = final.map((w) => Math.max(0, -w.start));
  const above = final.map((w) => Math.max(0, w.start + w.width));
  const radius = below.map((b, a) => Math.ceil(Math.max(b, above[a])));
  return { radius, below, above, radiusMax: Math.max(...radius), global: false, unknownOps: [...unknown], ops };
}

// ---------------------------------------------------------------------------------------------------
// The probe: the measured context.

/** The smallest edge >= n that is a multiple of divisor. */
const roundUp = (n, divisor) => Math.ceil(n / divisor) * divisor;

/**
 * The probe's patch edge for a network of this theoretical radius: the whole response of the centre voxel fits
 * (2·radius + 1, rounded up to the divisor), capped at maxEdge (rounded down to the divisor).
 */
export function probeEdge(radius, divisor, maxEdge = Infinity) {
  const d = Math.max(1, divisor | 0);
  const want = roundUp(2 * Math.max(1, Math.ceil(radius)) + 1, d);
  return Math.max(d, Math.min(want, Math.floor(maxEdge / d) * d));
}

/**
 * The measured context profile from a probe: plus and minus are the network's outputs (network layout [1, C, X, Y, Z],
 * channel 0 read) for the baseline input with the centre voxel raised and lowered by the same amount. The response
 * |plus − minus| is summed over shells of Euclidean distance from the centre; within[ρ] is the fraction of it at
 * distances <= ρ + ½, for ρ = 0 .. the largest radius whose shell lies inside the patch (the rest, beyond, is folded
 * into the last entry). Returns {within, radius90, radius99, outsideFraction (response beyond the largest whole
 * shell), total}.
 * dims: the patch [X, Y, Z]; centre: the raised voxel [x, y, z].
 */
export function contextProfile(plus, minus, dims, centre) {
  const [X, Y, Z] = dims;
  if (plus.length < X * Y * Z || minus.length < X * Y * Z) throw new Error('probe outputs are smaller than the patch');
  const [cx, cy, cz] = centre;
  const whole = Math.min(cx, cy, cz, X - 1 - cx, Y - 1 - cy, Z - 1 - cz); // shells up to this radius are whole
  const shells = new Float64Array(whole + 2);
  let total = 0;
  for (let x = 0; x < X; x++)
    for (let y = 0; y < Y; y++)
      for (let z = 0; z < Z; z++) {
        const i = (x * Y + y) * Z + z;
        const d = Math.abs(plus[i] - minus[i]);
        if (!(d > 0)) continue;
        const rho = Math.round(Math.hypot(x - cx, y - cy, z - cz));
        shells[Math.min(rho, whole + 1)] += d;
        total += d;
      }
  if (!(total > 0)) throw new Error('the network does not respond to its input (the probe saw no change): it cannot be probed');
  const within = [];
  let acc = 0;
  for (let r = 0; r <= whole; r++) {
    acc += shells[r];
    within.push(acc / total);
  }
  const outsideFraction = shells[whole + 1] / total;
  within[within.length - 1] = 1; // what lies beyond the patch's whole shells is counted at the last radius
  const radiusAt = (f) => within.findIndex((w) => w >= f);
  return { within, radius90: radiusAt(0.9), radius99: radiusAt(0.99), outsideFraction, total };
}
