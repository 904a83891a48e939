// Each tiled patch shrunk to the mask voxels its core serves (src/tiling.cpp shrink_patch) through the package API: a
// run hands out patches of several sizes, none larger than the plan's edge, the pool runs each at the dims it is
// given, and χ equals the whole-volume run where the network looks no further than the halo.
// TESSERA_WASM_DIR names another build's node folder to test (default: the package's dist/wasm/node).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { createTessera } from './index.js';
import { loadTesseraModule } from './debug.js';
import { convStack, prng } from '../../tests/js/networks.js';

const wasmBase = process.env.TESSERA_WASM_DIR ? path.resolve(process.env.TESSERA_WASM_DIR) : undefined;

let tessera, M;
before(async () => {
  tessera = await createTessera({ workers: 2, hardwareThreads: 2, threadsPerWorker: 1, wasmBase });
  M = await loadTesseraModule({ pthreadPoolSize: 2, wasmBase });
});
after(async () => {
  await tessera?.terminate();
});

const LAYERS = 3; // the conv stack's receptive radius
const spec = { divisor: 1, bytesPerVoxel: 1100 };
const weights = convStack({ layers: LAYERS, seed: 4 });

/**
 * A 40×36×30 random field and an ellipsoid mask off the volume's centre, kept LAYERS voxels from its faces (there the
 * whole volume's zero padding between layers differs from a patch's): many cores hold a sliver of it.
 */
function lopsided() {
  const dims = [40, 36, 30];
  const n = dims[0] * dims[1] * dims[2];
  const rnd = prng(7);
  const field = new Float32Array(n), mask = new Uint8Array(n);
  for (let z = 0; z < dims[2]; z++)
    for (let y = 0; y < dims[1]; y++)
      for (let x = 0; x < dims[0]; x++) {
        const i = x + dims[0] * (y + dims[1] * z);
        field[i] = rnd() * 2 - 1;
        const u = (x - 15) / 12, v = (y - 16) / 12.5, w = (z - 13) / 9.5;
        mask[i] = u * u + v * v + w * w <= 1 ? 1 : 0;
      }
  return { geometry: { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] }, field, mask, n };
}

function maxDiff(a, b) {
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i] - b[i]));
  return d;
}

test('a tiled run hands out patches shrunk to their mask, each within the plan\'s edge', () => {
  const { geometry, field, mask } = lopsided();
  const handle = M.plan(geometry, mask, { spec, tile: { core: 10, halo: LAYERS } }, undefined);
  const plan = handle.view();
  assert.equal(plan.feasible, true, plan.message);
  const e = plan.patchEdge;
  const volume = new M.Volume(geometry, 1);
  volume.fieldView().set(field);
  volume.maskView().set(mask);
  const run = M.startFieldRun(volume, handle);
  const sizes = new Set();
  let patches = 0, voxels = 0;
  try {
    for (let p; (p = run.next()) !== null; ) {
      const [, channels, x, y, z] = p.dims;
      assert.equal(channels, 1);
      assert.ok(x <= e && y <= e && z <= e, `patch ${p.dims} of a ${e}³ plan`);
      assert.equal(p.input.length, x * y * z);
      sizes.add(`${x}×${y}×${z}`);
      patches++;
      voxels += x * y * z;
      run.finish(p.job, new Float32Array(x * y * z));
    }
    assert.equal(run.state().finished, true);
    assert.equal(run.report().tilesRun, plan.tilesActive);
  } finally {
    run.delete();
    volume.delete();
    handle.delete();
  }
  assert.equal(patches, plan.tilesActive);
  assert.ok(sizes.size >= 4, `patch sizes ${[...sizes]}`);
  assert.ok(voxels < 0.8 * patches * e ** 3, `${voxels} voxels run, ${patches} × ${e}³ unshrunk`);
});

test('shrunk patches through the worker pool: χ equals the whole volume (1e-6) when the halo covers the network\'s reach', async () => {
  const { geometry, field, mask, n } = lopsided();
  const whole = await tessera.invert({ keepInputs: true, field, mask, geometry, spec, weights, whole: true });
  const tiled = await tessera.invert({ keepInputs: true, field, mask, geometry, spec, weights, tile: { core: 10, halo: LAYERS } });
  assert.equal(tiled.report.plan.wholeVolume, false);
  const d = maxDiff(whole.chi.data, tiled.chi.data);
  assert.ok(d <= 1e-6, `max |tiled - whole| = ${d}`);
  for (let i = 0; i < n; i++) if (!mask[i]) assert.equal(tiled.chi.data[i], 0);
  // A halo short of the reach shows: the comparison can fail.
  const short = await tessera.invert({ keepInputs: true, field, mask, geometry, spec, weights, tile: { core: 10, halo: LAYERS - 1 } });
  assert.ok(maxDiff(whole.chi.data, short.chi.data) > 1e-4, 'a halo below the receptive field should show');
});
