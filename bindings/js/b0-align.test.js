// B0 off the volume's third axis (b0Align): a network that assumes B0 along z runs on a B0-aligned grid and χ comes back
// closer to the untilted answer than when the tilt is ignored (at 40°, above the threshold where resampling wins); the plan
// is the aligned grid's and says so; the warning appears above the warning angle (the plan's, from C++) and not below.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createTessera } from './index.js';

const tessera = await createTessera({ workers: 1, threadsPerWorker: 2 });
after(() => tessera.terminate());

const weights = new Uint8Array(fs.readFileSync(new URL('../../web/models/demo-unet.onnx', import.meta.url)));

/** B0 tilted by deg from the third axis, towards an azimuth of 30° in the x-y plane. */
function b0Dir(deg) {
  const t = (deg * Math.PI) / 180, a = Math.PI / 6;
  return [Math.sin(t) * Math.cos(a), Math.sin(t) * Math.sin(a), Math.cos(t)];
}

/** ‖test − ref‖ / ‖ref‖ inside mask. */
function nrmse(test, ref, mask) {
  let d = 0, r = 0;
  for (let i = 0; i < mask.length; i++) if (mask[i]) { d += (test[i] - ref[i]) ** 2; r += ref[i] ** 2; }
  return Math.sqrt(d / r);
}

const DIMS = [48, 48, 36];
const VOXEL = [10 / 3, 10 / 3, 4]; // a whole head (160×160×144 mm) on a small grid: fast, and anisotropic

test('a tilted phantom through the API: b0Align auto resamples and gets closer to the untilted answer than off', { timeout: 300000 }, async () => {
  const upright = { dims: DIMS, voxelMm: VOXEL, b0Dir: [0, 0, 1] };
  const base = await tessera.phantom({ geometry: upright, seed: 1 });
  const untilted = await tessera.invert({ keepInputs: true, field: base.field, mask: base.mask, geometry: upright, model: 'demo-unet', weights, whole: true });
  assert.equal(untilted.report.b0Align.resampled, false);
  assert.equal(untilted.report.warning, '');

  const geometry = { dims: DIMS, voxelMm: VOXEL, b0Dir: b0Dir(40) };
  const { field, mask } = await tessera.phantom({ geometry, seed: 1 }); // the same χ and mask; the field of B0 at 40°
  const request = { field, mask, geometry, model: 'demo-unet', weights, whole: true, keepInputs: true };
  const plan = await tessera.plan(request);
  assert.equal(plan.b0Align.resampled, true);
  assert.ok(Math.abs(plan.b0Align.tiltDegrees - 40) < 1e-9, `${plan.b0Align.tiltDegrees}`);
  assert.ok(plan.b0Align.thresholdDegrees < 40, 'auto resamples at 40°');
  // The plan is the aligned grid's: its whole-volume patch holds the aligned dims (padded to the divisor 8).
  const ad = plan.b0Align.alignedDims;
  assert.ok(Array.isArray(ad) && ad.length === 3);
  ad.forEach((d, i) => assert.equal(plan.patchDims[i], Math.ceil(d / 8) * 8, `axis ${i}: ${plan.patchDims} vs ${ad}`));
  assert.ok(plan.b0Align.extraModuleBytes >= DIMS[0] * DIMS[1] * DIMS[2] * 9, `${plan.b0Align.extraModuleBytes}`);
  assert.match(plan.b0Align.summary, /40\.0° off .* resampled to a B0-aligned grid \d+×\d+×\d+/);
  assert.match(plan.warning, /B0 is 40\.0° off the volume's third axis.*Tessera resampled the field to a B0-aligned grid/);

  const auto = await tessera.invert({ ...request, plan });
  const off = await tessera.invert({ ...request, b0Align: 'off' });
  assert.equal(auto.report.b0Align.resampled, true);
  assert.equal(off.report.b0Align.resampled, false);
  assert.match(auto.report.warning, /resampled/);
  assert.match(off.report.warning, /not resampled because b0Align is off/);
  for (let i = 0; i < mask.length; i++) if (!mask[i]) assert.equal(auto.chi.data[i], 0, `outside the mask at ${i}`);
  const eAuto = nrmse(auto.chi.data, untilted.chi.data, mask);
  const eOff = nrmse(off.chi.data, untilted.chi.data, mask);
  console.log(`# B0 at 40°, ${DIMS.join('×')} at ${VOXEL.map((v) => v.toFixed(2)).join('×')} mm: NRMSE against the untilted answer ${eAuto.toFixed(3)} resampled, ${eOff.toFixed(3)} ignored`);
  assert.ok(eAuto < 0.75 * eOff, `resampled ${eAuto} vs ignored ${eOff}`);
});

test('the warning appears above the warning angle and not below; auto resamples above its threshold; off warns; physics loops never', async () => {
  const mask = undefined; // every voxel
  const at = (deg, extra = {}) => tessera.plan({ geometry: { dims: [40, 36, 32], voxelMm: [1, 1, 1], b0Dir: b0Dir(deg) }, mask, model: 'demo-unet', whole: true, ...extra });
  const { thresholdDegrees: t, warnDegrees: w } = (await at(0)).b0Align;
  assert.ok(w > 0 && w < t && t < 40, `warning above ${w}°, resampling above ${t}°`);
  const below = await at(w - 0.5);
  assert.equal(below.b0Align.resampled, false);
  assert.equal(below.b0Align.warning, '');
  assert.equal(below.warning, '');
  assert.match(below.b0Align.summary, /run as it is/);
  const mid = Math.round((w + t) / 2);
  const between = await at(mid);
  assert.equal(between.b0Align.resampled, false);
  assert.match(between.warning, new RegExp(`B0 is ${mid}\\.0° off .*run as it is, so χ is approximate`));
  const above = await at(t + 1);
  assert.equal(above.b0Align.resampled, true);
  assert.match(above.warning, new RegExp(`B0 is ${(t + 1).toFixed(1)}° off .*Tessera resampled`));
  const off = await at(t + 1, { b0Align: 'off' });
  assert.equal(off.b0Align.resampled, false);
  assert.match(off.warning, /not resampled because b0Align is off/);
  const on = await at(w - 0.5, { b0Align: 'on' });
  assert.equal(on.b0Align.resampled, true);
  assert.equal(on.warning, '');
  const loop = await at(t + 10, { model: 'lpcnn' });
  assert.equal(loop.b0Align.assumesZ, false);
  assert.equal(loop.b0Align.resampled, false);
  assert.doesNotMatch(loop.warning, /B0 is/);
  await assert.rejects(at(t + 1, { b0Align: 'sideways' }), (e) => e.code === 'InvalidArgument' && /b0Align must be auto, on or off/.test(e.message));
  const option = (await tessera.schema()).find((o) => o.name === 'b0Align');
  assert.deepEqual(option.choices, ['auto', 'on', 'off']);
  assert.equal(option.default, 'auto');
});

test('b0Resample: the identity at 0°, a small error on a smooth field at 20°, the aligned grid the plan names', async () => {
  const dims = [40, 36, 32];
  const n = dims[0] * dims[1] * dims[2];
  const field = new Float32Array(n);
  const mask = new Uint8Array(n);
  for (let z = 0; z < dims[2]; z++)
    for (let y = 0; y < dims[1]; y++)
      for (let x = 0; x < dims[0]; x++) {
        const i = x + dims[0] * (y + dims[1] * z);
        field[i] = Math.exp(-((x - 20) ** 2 + (y - 17) ** 2 + (z - 15) ** 2) / 60);
        mask[i] = (x - 19.5) ** 2 / 225 + (y - 17.5) ** 2 / 196 + (z - 15.5) ** 2 / 144 <= 1 ? 1 : 0;
      }
  const straight = await tessera.b0Resample({ field, mask, geometry: { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] } });
  assert.equal(straight.tiltDegrees, 0);
  for (let i = 0; i < n; i++) assert.ok(Math.abs(straight.back[i] - (mask[i] ? field[i] : 0)) < 1e-6, `voxel ${i}`);
  const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: b0Dir(20) };
  const tilted = await tessera.b0Resample({ field, mask, geometry, masked: false });
  const e = nrmse(tilted.back, field, mask);
  assert.ok(e > 0 && e < 0.01, `spline round trip NRMSE ${e}`);
  const cubic = await tessera.b0Resample({ field, mask, geometry, masked: false, interpolation: 'cubic' });
  const linear = await tessera.b0Resample({ field, mask, geometry, masked: false, interpolation: 'linear' });
  const [eLinear, eCubic] = [nrmse(linear.back, field, mask), nrmse(cubic.back, field, mask)];
  console.log(`# smooth field at 20°, round-trip NRMSE: spline ${e.toExponential(2)}, cubic ${eCubic.toExponential(2)}, trilinear ${eLinear.toExponential(2)}`);
  assert.ok(eLinear > e && eLinear > eCubic, 'trilinear loses the most');
  assert.deepEqual(tilted.geometry.b0Dir, [0, 0, 1]);
  const plan = await tessera.plan({ geometry, mask, model: 'demo-unet', whole: true });
  assert.deepEqual(plan.b0Align.alignedDims, tilted.geometry.dims);
  assert.equal(tilted.mask.length, tilted.geometry.dims.reduce((a, b) => a * b, 1));
});
