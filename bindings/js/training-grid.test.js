// Networks on their training grid (MoDL-QSM at 1 mm, resampled in k-space and back), a registry network's own export
// run with verifyWeights: false, and the field checks of network runs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createTessera } from './index.js';
import { convStack, twoChannel } from '../../tests/js/networks.js';

let tessera;
before(async () => {
  tessera = await createTessera({ workers: 1, threadsPerWorker: 1, watchdogMs: 20000 });
});
after(async () => {
  await tessera?.terminate();
});

// A field of a few cycles over the field of view (band-limited on both grids), voxel i at i · voxel mm.
function bandLimited(dims, voxelMm) {
  const [nx, ny, nz] = dims;
  const f = new Float32Array(nx * ny * nz);
  const tp = 2 * Math.PI;
  for (let z = 0; z < nz; z++)
    for (let y = 0; y < ny; y++)
      for (let x = 0; x < nx; x++) {
        const px = x / nx, py = y / ny, pz = z / nz;
        f[x + nx * (y + ny * z)] = 0.05 * Math.cos(tp * (2 * px + py) + 0.3) + 0.02 * Math.sin(tp * (3 * pz - px)) + 0.004;
      }
  return f;
}

function ellipsoid(dims) {
  const [nx, ny, nz] = dims;
  const m = new Uint8Array(nx * ny * nz);
  for (let z = 0; z < nz; z++)
    for (let y = 0; y < ny; y++)
      for (let x = 0; x < nx; x++) {
        const u = (x + 0.5) / nx - 0.5, v = (y + 0.5) / ny - 0.5, w = (z + 0.5) / nz - 0.5;
        m[x + nx * (y + ny * z)] = u * u + v * v + w * w < 0.14 ? 1 : 0;
      }
  return m;
}

// The test's own k-space resampling: a direct DFT per axis (double precision), the centred spectrum's shared
// frequencies kept, the real part of the inverse.
function resample(values, from, to) {
  let re = Float64Array.from(values), im = new Float64Array(values.length), d = [...from];
  for (let axis = 0; axis < 3; axis++) {
    const n = d[axis], m = to[axis];
    const od = [...d];
    od[axis] = m;
    const ore = new Float64Array(od[0] * od[1] * od[2]), oim = new Float64Array(ore.length);
    const lo = Math.max(-Math.floor(n / 2), -Math.floor(m / 2)), hi = Math.min(Math.ceil(n / 2) - 1, Math.ceil(m / 2) - 1);
    const sIn = axis === 0 ? 1 : axis === 1 ? d[0] : d[0] * d[1];
    const sOut = axis === 0 ? 1 : axis === 1 ? od[0] : od[0] * od[1];
    const other = [0, 1, 2].filter((a) => a !== axis);
    for (let b = 0; b < d[other[1]]; b++)
      for (let a = 0; a < d[other[0]]; a++) {
        const c = [0, 0, 0];
        c[other[0]] = a;
        c[other[1]] = b;
        const baseIn = c[0] + d[0] * (c[1] + d[1] * c[2]), baseOut = c[0] + od[0] * (c[1] + od[1] * c[2]);
        const coef = [];
        for (let f = lo; f <= hi; f++) {
          let cr = 0, ci = 0;
          for (let i = 0; i < n; i++) {
            const t = (-2 * Math.PI * f * i) / n, vr = re[baseIn + i * sIn], vi = im[baseIn + i * sIn];
            cr += vr * Math.cos(t) - vi * Math.sin(t);
            ci += vr * Math.sin(t) + vi * Math.cos(t);
          }
          coef.push([f, cr, ci]);
        }
        for (let j = 0; j < m; j++) {
          let sr = 0, si = 0;
          for (const [f, cr, ci] of coef) {
            const t = (2 * Math.PI * f * j) / m;
            sr += cr * Math.cos(t) - ci * Math.sin(t);
            si += cr * Math.sin(t) + ci * Math.cos(t);
          }
          ore[baseOut + j * sOut] = sr / n;
          oim[baseOut + j * sOut] = si / n;
        }
      }
    re = ore;
    im = oim;
    d = od;
  }
  return re;
}

test('modl-qsm on the 2016 challenge voxels runs on its 1 mm training grid: χ equals the run on a grid resampled here', async () => {
  const dims = [20, 18, 16];
  const voxelMm = [1.0625, 1.0625, 1.071];
  const geometry = { dims, voxelMm, b0Dir: [0, 0, 1] };
  const field = bandLimited(dims, voxelMm);
  const mask = ellipsoid(dims);
  const weights = twoChannel();
  const plan = await tessera.plan({ geometry, field, mask, model: 'modl-qsm', whole: true });
  assert.ok(plan.feasible, plan.message);
  assert.deepEqual(plan.trainingGrid.dims, [21, 19, 17]);
  assert.match(plan.warning, /resampled in k-space to 21×19×17/);
  const run = await tessera.invert({ keepInputs: true, geometry, field, mask, model: 'modl-qsm', weights, whole: true });
  assert.match(run.report.warning, /21×19×17/);

  // By hand: field and mask on 1 mm-like voxels over the same field of view, the same network there, χ back.
  const to = [21, 19, 17];
  const tGeometry = { dims: to, voxelMm: voxelMm.map((v, a) => (dims[a] * v) / to[a]), b0Dir: [0, 0, 1] };
  const tField = Float32Array.from(resample(field, dims, to));
  const tMask = Uint8Array.from(resample(mask, dims, to), (v) => (v >= 0.5 ? 1 : 0));
  const onGrid = await tessera.invert({ keepInputs: true, geometry: tGeometry, field: tField, mask: tMask, model: 'modl-qsm', weights, whole: true });
  assert.equal(onGrid.report.warning, '');
  const back = resample(onGrid.chi.data, to, dims);
  let worst = 0, peak = 0;
  for (let i = 0; i < field.length; i++) {
    const want = mask[i] ? back[i] : 0;
    worst = Math.max(worst, Math.abs(run.chi.data[i] - want));
    peak = Math.max(peak, Math.abs(want));
  }
  assert.ok(peak > 1e-3, `peak ${peak}`);
  assert.ok(worst < 1e-4 * peak, `worst ${worst} of peak ${peak}`);
});

test('a registry network\'s own export: refused naming verifyWeights, run with verifyWeights: false, its sha256 recorded', async () => {
  const own = twoChannel(); // other bytes than the registry's modl-qsm.onnx
  await assert.rejects(tessera.loadWeights('modl-qsm', { sources: own }), (e) => e.code === 'WeightsMismatch' && /verifyWeights: false/.test(e.message) && /--weights-unverified/.test(e.message));
  const [bytes] = await tessera.loadWeights('modl-qsm', { sources: own, verifyWeights: false });
  assert.equal(bytes.byteLength, own.byteLength);
  const dims = [16, 16, 16];
  const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  const field = bandLimited(dims, geometry.voxelMm);
  const mask = ellipsoid(dims);
  const { sha256Hex } = await import('./index.js');
  const sha = await sha256Hex(bytes);
  const run = await tessera.invert({ keepInputs: true, geometry, field, mask, model: 'modl-qsm', weights: bytes, whole: true, verifyWeights: false });
  const registry = (await tessera.model('modl-qsm')).weights[0].sha256;
  assert.deepEqual(run.report.weights, [{ file: 'modl-qsm.onnx', sha256: sha, registrySha256: registry, verified: false }]);
  assert.match(run.report.warning, new RegExp(`weights not verified: sha256 ${sha} of modl-qsm.onnx differs from the registry's ${registry}`));
  assert.ok(run.report.warnings.some((w) => w.startsWith(`weights not verified: sha256 ${sha}`)), run.report.warnings.join(' | '));
  // Without verifyWeights: false the same bytes run as given (invert does not read files), recorded, not warned.
  const quiet = await tessera.invert({ keepInputs: true, geometry, field, mask, model: 'modl-qsm', weights: bytes, whole: true });
  assert.equal(quiet.report.weights[0].sha256, sha);
  assert.doesNotMatch(quiet.report.warning, /weights not verified/);
});

test('network runs with a field: a 100 mm voxel warns, a field in Hz is refused unless fieldUnits says ppm', async () => {
  const dims = [16, 16, 16];
  const mask = ellipsoid(dims);
  const weights = convStack({ layers: 1 }); // a one-channel stand-in inside LPCNN's loop (no training grid declared)
  const field = bandLimited(dims, [1, 1, 1]);
  const wide = await tessera.invert({ keepInputs: true, geometry: { dims, voxelMm: [1, 1, 100], b0Dir: [0, 0, 1] }, field, mask, model: 'lpcnn', weights, whole: true });
  assert.match(wide.report.warning, /voxel size 1×1×100/);
  const hz = Float32Array.from(field, (v) => v * 128);
  const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  await assert.rejects(
    tessera.invert({ keepInputs: true, geometry, field: hz, mask, model: 'lpcnn', weights, whole: true }),
    (e) => e.code === 'InvalidArgument' && /beyond ±1 ppm/.test(e.message) && /fieldUnits: 'ppm'/.test(e.message),
  );
  const stated = await tessera.invert({ keepInputs: true, geometry, field: hz, mask, model: 'lpcnn', weights, whole: true, fieldUnits: 'ppm' });
  assert.equal(stated.chi.data.length, hz.length);
});
