// A real run's memory against the planner's estimate: the C++ module heap and every ONNX Runtime
// worker heap (high-water), next to plan.activationBytes / moduleHeapBytes / peakBytes.
// Usage: node --no-experimental-fetch bench/memory-run.js [--onnx net.onnx] [--divisor 8] [--bpv 1100]
//          [--dims 160,160,120] [--core 56] [--halo 4] [--workers 2] [--threads 1]
// Without --onnx it uses the small test U-Net of tests/js/networks.js.
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { createTessera } from '../bindings/js/index.js';
import { unet } from '../tests/js/networks.js';

const { values: a } = parseArgs({
  options: {
    onnx: { type: 'string' }, divisor: { type: 'string', default: '8' }, bpv: { type: 'string', default: '1100' },
    dims: { type: 'string', default: '160,160,120' }, core: { type: 'string', default: '56' }, halo: { type: 'string', default: '4' },
    workers: { type: 'string', default: '2' }, threads: { type: 'string', default: '1' },
  },
});
const dims = a.dims.split(',').map(Number);
const geometry = { dims, voxelMm: [1.5, 1.5, 1.5], b0Dir: [0, 0, 1] };
const weights = a.onnx ? new Uint8Array(readFileSync(a.onnx)) : unet({ base: 4 });
const spec = { divisor: Number(a.divisor), bytesPerVoxel: Number(a.bpv) };
const tile = { core: Number(a.core), halo: Number(a.halo) };
const workers = Number(a.workers);
const mb = (b) => (b / 1e6).toFixed(1);

// The phantom comes from a separate runtime: its forward model (2x padded FFT) would otherwise
// raise the module heap high-water of the run being measured (wasm memory never shrinks).
const maker = await createTessera({ workers: 1 });
const ph = await maker.phantom({ geometry, seed: 1 });
await maker.terminate();

const t = await createTessera({ workers, threadsPerWorker: Number(a.threads) });
try {
  const plan = await t.plan({ geometry, mask: ph.mask, spec, tile, workers });
  const { report } = await t.invert({ keepInputs: true, field: ph.field, mask: ph.mask, geometry, spec, weights, tile, workers });
  const workerPeak = Math.max(...report.memory.workerHeapHighWater);
  const workerSum = report.memory.workerHeapHighWater.reduce((x, y) => x + y, 0);
  console.log(`memory run on ${os.cpus()[0].model} (${os.cpus().length} cores), node ${process.version}`);
  console.log(`volume ${dims.join('×')}, ${a.onnx ?? 'test U-Net (tests/js/networks.js unet base 4)'}, core ${tile.core} halo ${tile.halo}, ${workers} workers × ${a.threads} threads`);
  console.log(`plan: patch ${plan.patchEdge}³, ${mb(plan.bytesPerTile)} MB/tile at ${spec.bytesPerVoxel} B/voxel, ${plan.tilesInFlight} in flight, ${plan.tilesActive} tiles (+${plan.tilesSkipped} skipped)`);
  console.log('                          planned (MB)   measured (MB)');
  console.log(`activations, all tiles    ${mb(plan.activationBytes).padStart(12)}   ${mb(workerSum).padStart(13)}  (sum of worker heap high-waters, incl. weights + runtime)`);
  console.log(`one worker heap           ${mb(plan.bytesPerTile).padStart(12)}   ${mb(workerPeak).padStart(13)}`);
  console.log(`C++ module heap           ${mb(plan.moduleHeapBytes).padStart(12)}   ${mb(report.memory.moduleHeapBytes).padStart(13)}`);
  console.log(`wall ${report.wallSeconds.toFixed(2)} s, ${report.tilesRun} tiles, ${(report.tilesRun / report.wallSeconds).toFixed(2)} tiles/s, most in flight ${report.maxInFlight}`);
} finally {
  await t.terminate();
}
