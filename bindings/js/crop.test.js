// The crop to the mask's support (src/crop.cpp) through the package API: an automatic plan runs the mask's bounding
// box as one patch, its χ agrees with the whole-volume run, crop 'off' plans the whole field of view, and a field an
// unmasked network would read outside the box is either planned for (plan() given the field) or refused by name.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createTessera } from './index.js';
import { unet, prng } from '../../tests/js/networks.js';
import { agreement } from '../../bench/speed-web.js';

let tessera;
before(async () => {
  tessera = await createTessera({ workers: 1, hardwareThreads: 2, threadsPerWorker: 2 });
});
after(async () => {
  await tessera?.terminate();
});

/** A 64×64×48 volume whose field and mask fill a box well inside it (the head in a larger field of view); the box and
 * its margin span 40×40×40 on the divisor-8 grid. */
function boxed(lo = [12, 10, 6], hi = [44, 42, 34]) {
  const dims = [64, 64, 48];
  const n = dims[0] * dims[1] * dims[2];
  const rnd = prng(5);
  const field = new Float32Array(n), mask = new Uint8Array(n);
  for (let z = lo[2]; z < hi[2]; z++)
    for (let y = lo[1]; y < hi[1]; y++)
      for (let x = lo[0]; x < hi[0]; x++) {
        const i = x + dims[0] * (y + dims[1] * z);
        mask[i] = 1;
        field[i] = (rnd() * 2 - 1) * 0.05;
      }
  return { geometry: { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] }, field, mask, n, lo, hi };
}

const demoWeights = () => new Uint8Array(fs.readFileSync(new URL('../../web/models/demo-unet.onnx', import.meta.url)));

/** The demo U-Net's whole-volume run of boxed() (the registry's cost: it fits), made once for the tests that compare with it. */
let wholeRun = null;
function wholeVolume() {
  const { geometry, field, mask } = boxed();
  wholeRun ??= tessera.invert({ keepInputs: true, geometry, field, mask, model: 'demo-unet', weights: demoWeights(), whole: true });
  return wholeRun;
}

test('demo U-Net: the automatic plan runs the mask box + its margin as one patch, χ within NRMSE 0.05 of the whole volume, zero outside the mask', async () => {
  const { geometry, field, mask, n, lo, hi } = boxed();
  const weights = demoWeights();
  const plan = await tessera.plan({ geometry, mask, model: 'demo-unet' });
  assert.equal(plan.feasible, true, plan.message);
  assert.equal(plan.wholeVolume, true);
  assert.ok(plan.crop, plan.explanation);
  assert.match(plan.explanation, /the mask's bounding box \+ \d+ voxels as one patch/);
  for (let a = 0; a < 3; a++) {
    const m = plan.crop.margin;
    assert.ok(m > 0 && plan.crop.lo[a] <= lo[a] - m && plan.crop.hi[a] >= hi[a] + m, `axis ${a}: ${plan.crop.lo[a]}-${plan.crop.hi[a]}, margin ${m}`);
    assert.equal(plan.crop.patchLo[a] % 8, 0); // 64×64×48 needs no padding: the grid starts at 0
    assert.equal(plan.crop.patchDims[a] % 8, 0);
    assert.deepEqual(plan.patchDims, plan.crop.patchDims);
  }
  assert.ok(plan.patchDims.reduce((x, y) => x * y) < n / 3, `box ${plan.patchDims} of ${geometry.dims}`);
  const cropped = await tessera.invert({ keepInputs: true, geometry, field, mask, model: 'demo-unet', weights, plan });
  // The box's memory is planned like a whole volume of its size: the run stays within it.
  assert.ok(cropped.report.memory.workerHeapVsPlan <= 1, `worker heap ${cropped.report.memory.workerHeapVsPlan}× the plan`);
  assert.ok(cropped.report.memory.moduleHeapVsPlan <= 1, `module heap ${cropped.report.memory.moduleHeapVsPlan}× the plan`);
  const whole = await wholeVolume();
  assert.equal(whole.report.plan.crop, null);
  assert.deepEqual(whole.report.plan.patchDims, geometry.dims);
  const g = agreement(cropped.chi.data, whole.chi.data, mask);
  assert.ok(g.r > 0.99 && g.nrmse < 0.05, `r ${g.r}, NRMSE ${g.nrmse}`);
  for (let i = 0; i < n; i++) if (!mask[i]) assert.equal(cropped.chi.data[i], 0, `voxel ${i} outside the mask`);
  // crop off: the whole field of view.
  const off = await tessera.plan({ geometry, mask, model: 'demo-unet', crop: 'off' });
  assert.equal(off.crop, null);
  await assert.rejects(tessera.plan({ geometry, mask, model: 'demo-unet', crop: 'sometimes' }), /crop must be auto or off/);
});

test('a mask box over the single-patch limit runs as slabs with a halo on the cut faces only: χ within the faithful target of the whole volume, within its plan', async () => {
  const { geometry, field, mask, n } = boxed();
  const weights = demoWeights();
  const m = await tessera.model('demo-unet');
  const z = m.normalization;
  // The demo U-Net declared at 45 kB/voxel: its 40×40×40 box needs 2.9 GB, over the 2.5 GB single-patch limit.
  const spec = { divisor: m.divisor, maskedInput: m.maskedInput, inputMean: z.inputMean, inputStd: z.inputStd, outputMean: z.outputMean,
    outputStd: z.outputStd, bytesPerVoxel: 45000, receptiveRadius: 24 };
  const plan = await tessera.plan({ geometry, mask, spec });
  assert.equal(plan.feasible, true, plan.message);
  assert.equal(plan.wholeVolume, false);
  assert.ok(plan.crop && plan.crop.split.pieces >= 2, plan.explanation);
  assert.match(plan.explanation, /slabs along [xyz], halo \d+/);
  assert.equal(plan.tilesActive, plan.crop.split.pieces);
  const axis = plan.crop.split.axis;
  for (let a = 0; a < 3; a++) if (a !== axis) assert.equal(plan.patchDims[a], plan.crop.patchDims[a]);
  assert.ok(plan.patchDims[axis] < plan.crop.patchDims[axis]);
  assert.ok(plan.bytesPerTile <= (await tessera.limits()).maxPatchActivationBytes);
  const slabs = await tessera.invert({ keepInputs: true, geometry, field, mask, spec, weights, plan });
  assert.equal(slabs.report.tilesRun, plan.crop.split.pieces);
  assert.ok(slabs.report.memory.workerHeapVsPlan <= 1 && slabs.report.memory.moduleHeapVsPlan <= 1, JSON.stringify(slabs.report.memory));
  // The reference: the whole volume at the network's real cost (the declared one would not fit it), i.e. the same network
  // through the registry (the spec above declares its normalization).
  const whole = await wholeVolume();
  const g = agreement(slabs.chi.data, whole.chi.data, mask);
  assert.ok(g.nrmse <= plan.predictedFidelity.nrmse + 0.05 && g.nrmse < 0.1 && g.r > 0.99, `r ${g.r}, NRMSE ${g.nrmse} (predicted ${plan.predictedFidelity.nrmse})`);
  for (let i = 0; i < n; i++) if (!mask[i]) assert.equal(slabs.chi.data[i], 0, `voxel ${i} outside the mask`);
  console.log(`# slabs: ${plan.crop.split.pieces} along ${'xyz'[axis]}, halo ${plan.crop.split.halo}, patch ${plan.patchDims.join('×')}: r ${g.r.toFixed(5)}, NRMSE ${g.nrmse.toFixed(4)} (predicted ${plan.predictedFidelity.nrmse.toFixed(4)})`);
});

test('an unmasked network: plan() without the field crops to the mask and the run refuses a field outside the box naming the fix; with the field the box holds it', async () => {
  const { geometry, field, mask } = boxed();
  const weights = unet({ base: 2, seed: 4 });
  const spec = { divisor: 8, bytesPerVoxel: 1100, receptiveRadius: 20 };
  field[2 + geometry.dims[0] * (30 + geometry.dims[1] * 30)] = 0.2; // outside the mask, far from it
  const byMask = await tessera.plan({ geometry, mask, spec });
  assert.ok(byMask.crop, byMask.explanation);
  assert.ok(byMask.crop.lo[0] > 2);
  await assert.rejects(tessera.invert({ keepInputs: true, geometry, field, mask, spec, weights, plan: byMask }), (e) => {
    assert.equal(e.code, 'InvalidArgument');
    assert.match(e.message, /not zero at 1 voxels outside the box the plan crops to .*crop: 'off'/);
    return true;
  });
  const byField = await tessera.plan({ geometry, mask, field, spec });
  assert.ok(byField.crop === null || byField.crop.lo[0] <= 2, JSON.stringify(byField.crop));
  const run = await tessera.invert({ keepInputs: true, geometry, field, mask, spec, weights }); // planned here, with the field
  assert.ok(run.report.plan.crop === null || run.report.plan.crop.lo[0] <= 2);
});
