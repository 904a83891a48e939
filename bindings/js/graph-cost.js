// How much a network computes: the multiply-accumulates of its convolutions per input voxel, read from the ONNX graph
// (onnx-graph.js: the weights' dims are read, their values never decoded). The planner estimates the time of a field
// network whose speed was not measured here from it (C++ kSecondsPerMac); the registry declares it for its networks.

import { readOnnxGraph, resizeScales } from './onnx-graph.js';

const CONV = new Set(['Conv', 'ConvInteger', 'QLinearConv']);
const POOL = new Set(['MaxPool', 'AveragePool', 'LpPool']);
const product = (list) => list.reduce((a, b) => a * b, 1);

/**
 * The multiply-accumulates per input voxel of a network's convolutions and transposed convolutions (bytesOrGraph: ONNX
 * bytes, or a graph readOnnxGraph returned).
 * Each tensor carries how many input voxels one of its voxels stands for (the strides' product, divided by the
 * transposed convolutions' and resizes'); a convolution costs output channels · input channels per group · kernel
 * voxels per output voxel. Returns {macsPerVoxel, convolutions (the layers counted), unscaled (operations whose change
 * of scale was not followed: the layers after them are counted at the scale before)}.
 * Throws an Error naming what is wrong when the bytes are not an ONNX model.
 */
export function graphCost(bytesOrGraph) {
  const graph = bytesOrGraph?.nodes ? bytesOrGraph : readOnnxGraph(bytesOrGraph);
  if (!graph.inputs.length) throw new Error('the ONNX graph has no data input');
  const scale = new Map([[graph.inputs[0], 1]]);
  let macs = 0;
  let convolutions = 0;
  const unscaled = new Set();
  for (const n of graph.nodes) {
    const known = n.inputs.filter((x) => scale.has(x)).map((x) => scale.get(x));
    if (!known.length) continue; // constants only
    const s = Math.min(...known);
    const strides = () => product(n.attrs.strides?.ints?.map(Number) ?? [1]);
    let out = s;
    if (CONV.has(n.op) || n.op === 'ConvTranspose') {
      const w = graph.initializers.get(n.inputs[n.op === 'QLinearConv' ? 3 : 1]);
      if (n.op === 'ConvTranspose') out = s / strides();
      else out = s * strides();
      if (w && w.dims.length >= 3) {
        const [a, b, ...kernel] = w.dims.map(Number);
        // Conv weights are [out, in / group, k...] (per output voxel); ConvTranspose's [in, out / group, k...] (per input voxel).
        macs += (a * b * product(kernel)) / (n.op === 'ConvTranspose' ? s : out);
        convolutions++;
      }
    } else if (POOL.has(n.op)) out = s * strides();
    else if (n.op === 'Resize' || n.op === 'Upsample') {
      const scales = resizeScales(n, graph);
      if (scales?.length >= 5) out = s / product(scales.slice(2));
      else unscaled.add(n.op);
    }
    for (const o of n.outputs) scale.set(o, out);
  }
  return { macsPerVoxel: macs, convolutions, unscaled: [...unscaled] };
}
