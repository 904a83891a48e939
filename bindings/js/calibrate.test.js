// calibrate.js through the runtime: a network's memory cost measured in fresh ONNX Runtime workers and fitted in C++;
// a spec without bytesPerVoxel is calibrated before planning, and the plan and the report say so.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createTessera } from './index.js';
import { measurePoint } from './calibrate.js';
import { unet, prng } from '../../tests/js/networks.js';

const net = unet({ base: 8, seed: 7 }); // three poolings: divisor 8
const spec = { divisor: 8 };
let tessera;
let calibration;

before(async () => {
  tessera = await createTessera({ workers: 1, threadsPerWorker: 1 });
  calibration = await tessera.calibrate({ weights: net, spec });
});
after(async () => {
  await tessera?.terminate();
});

const line = (c, voxels) => c.fixedBytes + c.bytesPerVoxel * voxels;

test('calibrate: every measured heap lies under the line, and so does a larger patch it never ran (within 2×)', async () => {
  const c = calibration;
  assert.ok(c.points.length >= 3, `${c.points.length} points`);
  assert.ok(c.points.every((p) => p.edge % 8 === 0), 'edges are multiples of the divisor');
  assert.ok(c.fit.slopeMeasured, c.fit.note);
  for (const p of c.points) {
    assert.equal(p.voxels, p.edge ** 3);
    assert.ok(p.heapBytes >= p.afterSessionBytes && p.afterSessionBytes > 0);
    assert.ok(line(c, p.voxels) >= p.heapBytes, `${p.edge}³: heap ${p.heapBytes} over the line ${line(c, p.voxels)}`);
  }
  assert.ok(c.bytesPerVoxel >= c.fit.fittedBytesPerVoxel * (1 + c.fit.slopeMargin), 'the slope is raised');
  // The independent measurement: a fresh worker runs a 64³ patch (twice the largest calibration edge or more).
  const largest = Math.max(...c.points.map((p) => p.edge));
  const edge = Math.max(64, 2 * largest);
  const real = await measurePoint({ model: net, edge, threads: 1, runs: 1 });
  const predicted = line(c, real.voxels);
  assert.ok(predicted >= real.heapBytes, `${edge}³: the calibrated ${predicted} B is under the measured heap ${real.heapBytes} B`);
  assert.ok(predicted <= 2 * real.heapBytes, `${edge}³: the calibrated ${predicted} B is over twice the measured heap ${real.heapBytes} B`);
});

test('a spec without bytesPerVoxel is calibrated before planning (plan and invert with weights); plan and report say so', async () => {
  const dims = [40, 40, 40];
  const n = dims[0] * dims[1] * dims[2];
  const r = prng(5);
  const field = Float32Array.from({ length: n }, () => (r() - 0.5) * 0.1);
  const mask = new Uint8Array(n).fill(1);
  const geometry = { dims, voxelMm: [1, 1, 1] };
  const plan = await tessera.plan({ geometry, mask, spec, weights: net, tile: { core: 24, halo: 4 } });
  assert.equal(plan.cost.source, 'calibrated');
  // The same weights: the calibration before() made is reused, not measured again.
  assert.equal(plan.cost.seconds, calibration.seconds);
  assert.equal(plan.cost.bytesPerVoxel, calibration.bytesPerVoxel);
  assert.equal(plan.cost.fixedBytes, calibration.fixedBytes);
  assert.equal(plan.bytesPerTile, calibration.fixedBytes + calibration.bytesPerVoxel * 32 ** 3);
  // Declared, or without weights (nothing to calibrate): said too.
  const declared = await tessera.plan({ geometry, mask, spec: { ...spec, bytesPerVoxel: 700 }, weights: net, tile: { core: 24, halo: 4 } });
  assert.deepEqual([declared.cost.source, declared.cost.bytesPerVoxel], ['declared', 700]);
  const assumed = await tessera.plan({ geometry, mask, spec, tile: { core: 24, halo: 4 } });
  assert.equal(assumed.cost.source, 'assumed');
  assert.match(assumed.cost.note, /no weights/);
  // invert with that plan, and invert planning for itself: both run with the calibrated cost, within it.
  for (const p of [plan, undefined]) {
    const { report } = await tessera.invert({ keepInputs: true, field, mask, geometry, spec, weights: net, tile: { core: 24, halo: 4 }, plan: p });
    assert.equal(report.plan.cost.source, 'calibrated');
    assert.equal(report.memory.cost.bytesPerVoxel, calibration.bytesPerVoxel);
    assert.ok(report.memory.workerHeapVsPlan <= 1, `worker heap ${report.memory.workerHeapVsPlan}× the calibrated plan`);
    assert.equal(report.memory.warning, undefined);
  }
});

test('calibrate refuses what it cannot measure, by name', async () => {
  await assert.rejects(tessera.calibrate({ spec }), (e) => e.code === 'InvalidArgument' && /weights/.test(e.message));
  await assert.rejects(tessera.calibrate({ weights: net, spec: { divisor: 0 } }), (e) => e.code === 'InvalidArgument' && /spec\.divisor/.test(e.message));
  await assert.rejects(
    tessera.calibrate({ weights: new Uint8Array([1, 2, 3, 4]), spec }),
    (e) => /calibration failed: the network could not be loaded/.test(e.message) && e.code === 'ModelLoadFailed',
  );
});
