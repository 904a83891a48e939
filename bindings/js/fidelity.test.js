// Tiling fidelity end to end: with default settings the tiled χ matches the whole-volume χ (r ≥ 0.99, NRMSE ≤ 0.10
// inside the mask) and the run's self-check says so; overlapping (blended) tiles give the same χ bit for bit whatever
// the worker count.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTessera, readNifti, writeNifti } from './index.js';
import { convStack, prng } from '../../tests/js/networks.js';
import { runCli } from '../../tests/js/run-cli.js';

const DEMO = fileURLToPath(new URL('../../web/models/demo-unet.onnx', import.meta.url));

const cli = (args, cwd) => runCli(args, { cwd });

/** Pearson r and NRMSE = ‖a − b‖ / ‖b‖ over the mask, computed here (not by the code under test). */
function agreement(a, b, mask) {
  let n = 0, sa = 0, sb = 0;
  for (let i = 0; i < mask.length; i++) if (mask[i]) (n++, (sa += a[i]), (sb += b[i]));
  const ma = sa / n, mb = sb / n;
  let saa = 0, sbb = 0, sab = 0, e = 0, bb = 0;
  for (let i = 0; i < mask.length; i++) {
    if (!mask[i]) continue;
    const da = a[i] - ma, db = b[i] - mb;
    saa += da * da, sbb += db * db, sab += da * db;
    e += (a[i] - b[i]) ** 2, bb += b[i] * b[i];
  }
  return { r: sab / Math.sqrt(saa * sbb), nrmse: Math.sqrt(e / bb) };
}

test('invert with default settings, a --spec network whose cost forbids the whole volume, 136×160×120 phantom: r ≥ 0.99 and NRMSE ≤ 0.10 against the whole-volume run, and the self-check says so', { timeout: 1_200_000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-fidelity-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  // The property (the default plan of a volume that cannot run whole is faithful) needs only a volume over the
  // single-patch limit at its declared cost; the clinical size is measured by bench/fidelity-default.js.
  const geometry = { dims: [136, 160, 120], voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  const tessera = await createTessera({ workers: 1 });
  let phantom, demo;
  try {
    phantom = await tessera.phantom({ geometry, seed: 1 });
    demo = await tessera.model('demo-unet');
  } finally {
    await tessera.terminate();
  }
  const like = { dims: geometry.dims, voxelMm: geometry.voxelMm };
  fs.writeFileSync(path.join(dir, 'field.nii'), await writeNifti(phantom.field, like));
  fs.writeFileSync(path.join(dir, 'mask.nii'), await writeNifti(Float32Array.from(phantom.mask), like));
  // The demo network declared at 1400 B/voxel: the mask's box (120×144×104 with its margin) is over the 2.5 GB
  // single-patch limit, so the planner must tile, while the self-check's box (120³) keeps 10,000 mask voxels once the
  // network's reach (49 voxels) is kept from its faces. Its real cost (the registry's) lets the reference run whole.
  fs.writeFileSync(path.join(dir, 'costly.json'), JSON.stringify({ divisor: demo.divisor, bytesPerVoxel: 1400 }));
  fs.writeFileSync(path.join(dir, 'real.json'), JSON.stringify({ divisor: demo.divisor, bytesPerVoxel: demo.bytesPerVoxel, fixedBytes: demo.fixedBytes }));
  const common = ['--field', 'field.nii', '--mask', 'mask.nii', '--weights', DEMO];
  const t0 = Date.now();
  const tiled = await cli(['invert', ...common, '--spec', 'costly.json', '--verify', '--out', 'tiled.nii', '--report', 'tiled.json'], dir);
  assert.equal(tiled.code, 0, tiled.stderr);
  const tiledSeconds = (Date.now() - t0) / 1000;
  const whole = await cli(['invert', ...common, '--spec', 'real.json', '--whole', '--out', 'whole.nii'], dir);
  assert.equal(whole.code, 0, whole.stderr);
  const report = JSON.parse(fs.readFileSync(path.join(dir, 'tiled.json'), 'utf8'));
  assert.equal(report.plan.wholeVolume, false, 'the declared cost forbids the whole volume');
  assert.ok(report.tilesRun > 1);
  const a = readNifti(new Uint8Array(fs.readFileSync(path.join(dir, 'tiled.nii')))).data;
  const b = readNifti(new Uint8Array(fs.readFileSync(path.join(dir, 'whole.nii')))).data;
  const got = agreement(a, b, phantom.mask);
  console.log(`# default plan: ${report.plan.explanation}`);
  console.log(`# against the whole-volume run: r ${got.r.toFixed(4)}, NRMSE ${got.nrmse.toFixed(4)}; self-check r ${report.verify.r.toFixed(4)}, NRMSE ${report.verify.nrmse.toFixed(4)}; predicted r ${report.plan.predictedFidelity.r.toFixed(4)}, NRMSE ${report.plan.predictedFidelity.nrmse.toFixed(4)}; ${tiledSeconds.toFixed(0)} s`);
  assert.ok(got.r >= 0.99, `r ${got.r}`);
  assert.ok(got.nrmse <= 0.1, `NRMSE ${got.nrmse}`);
  // The run's self-check (a box run whole inside the run) reports it, and the log says so.
  assert.equal(report.verify.possible, true, report.verify.message);
  assert.ok(report.verify.r >= 0.99 && report.verify.nrmse <= 0.1, JSON.stringify(report.verify));
  assert.ok(report.verify.voxels > 10000);
  assert.ok(report.verify.dataConsistency > 0 && report.verify.dataConsistency < 1);
  assert.match(tiled.stderr, /self-check: r 0\.99\d\d, NRMSE 0\.0\d\d/);
  assert.match(tiled.stderr, /predicted fidelity: r [\d.]+, NRMSE [\d.]+ against the whole-volume run/);
});

test('overlapping tiles blend to the same χ bit for bit with 1, 2 or 3 workers', async (t) => {
  const tessera = await createTessera({ workers: 3 });
  t.after(() => tessera.terminate());
  const geometry = { dims: [28, 24, 20], voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  const n = 28 * 24 * 20;
  const rnd = prng(5);
  const field = Float32Array.from({ length: n }, () => rnd() - 0.5);
  const weights = convStack({ layers: 3, seed: 2 });
  const spec = { divisor: 1, bytesPerVoxel: 1100 };
  const tile = { core: 12, halo: 2, stride: 7, blend: 'cosine' };
  const runs = [];
  for (const workers of [1, 2, 3]) runs.push(await tessera.invert({ keepInputs: true, field, geometry, spec, weights, tile, workers }));
  assert.ok(runs[2].report.maxInFlight >= 2, 'tiles really ran in parallel');
  assert.deepEqual(runs[1].chi.data, runs[0].chi.data);
  assert.deepEqual(runs[2].chi.data, runs[0].chi.data);
});
