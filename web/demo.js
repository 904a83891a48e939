// The demo: the C++ numerical head phantom inverted with the bundled demo U-Net (registry id 'demo-unet', its
// weights served with the page at web/models/demo-unet.onnx).
export const DEMO = {
  geometry: { dims: [128, 128, 96], voxelMm: [1.75, 1.75, 1.75], b0Dir: [0, 0, 1] },
  seed: 1,
  noise: 0,
  id: 'demo-unet', // the registry entry: divisor, calibrated memory cost, masked input, size and sha256
};
