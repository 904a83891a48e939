// The phase networks (iQSM, iQFM, iQSM+) end to end through the public API: wrapped phase, TE, B0, magnitude
// and mask go in; the C++ core erodes, swaps, crops, pads and builds the border shell; the ONNX Runtime worker
// binds the named inputs. The network is the iQSM LoT layer itself (tests/js/phase-networks.js), so the
// expected output follows from the physics: Σ_k K_k sin(φ(p+k) − φ(p)) · 0.06 / (B0 · TE) on the eroded mask,
// with φ = −ψ computed from the UNWRAPPED phase ψ (wrapping must not matter).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createTessera } from './index.js';
import { lotNet, LOT_KERNEL, LOT_SCALE } from '../../tests/js/phase-networks.js';

let tessera;
before(async () => {
  tessera = await createTessera({ workers: 1, threadsPerWorker: 1, watchdogMs: 30000 });
});
after(async () => {
  await tessera?.terminate();
});

const wrap = (v) => Math.atan2(Math.sin(v), Math.cos(v));

/** A smooth phase that wraps (ψ crosses ±π), a box mask [lo, hi) and what erosion by 3 leaves of it. */
function scene(dims, { lo = [6, 6, 5], hi, scale = 1 } = {}) {
  const [X, Y, Z] = dims;
  hi = hi ?? [X - 6, Y - 6, Z - 5];
  const n = X * Y * Z;
  const psi = new Float64Array(n), phase = new Float32Array(n), mask = new Uint8Array(n), eroded = new Uint8Array(n);
  const inBox = (p, a, b) => p.every((v, i) => v >= a[i] && v < b[i]);
  for (let z = 0; z < Z; z++)
    for (let y = 0; y < Y; y++)
      for (let x = 0; x < X; x++) {
        const i = x + X * (y + Y * z);
        psi[i] = scale * (3.1 + 0.45 * Math.sin(0.21 * x) + 0.35 * Math.cos(0.17 * y + 0.29 * z) + 0.25 * Math.sin(0.13 * z));
        phase[i] = wrap(psi[i]);
        mask[i] = inBox([x, y, z], lo, hi) ? 1 : 0;
        // A box eroded by a sphere of radius 3 is the box shrunk by 3 on every side.
        eroded[i] = inBox([x, y, z], lo.map((v) => v + 3), hi.map((v) => v - 3)) ? 1 : 0;
      }
  return { dims, n, psi, phase, mask, eroded, geometry: { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] } };
}

/** The LoT layer on the unwrapped phase, host layout: Σ_k K_k sin(φ(p+k) − φ(p)) · 0.06/(B0·TE), φ = −ψ. */
function expected(s, te, b0, factor = 1) {
  const [X, Y, Z] = s.dims;
  const out = new Float64Array(s.n);
  for (let z = 0; z < Z; z++)
    for (let y = 0; y < Y; y++)
      for (let x = 0; x < X; x++) {
        const i = x + X * (y + Y * z);
        if (!s.eroded[i]) continue;
        let acc = 0;
        for (let k = 0; k < 27; k++) {
          const dx = Math.floor(k / 9) - 1, dy = (Math.floor(k / 3) % 3) - 1, dz = (k % 3) - 1;
          const j = x + dx + X * (y + dy + Y * (z + dz));
          acc += LOT_KERNEL[k] * Math.sin(-s.psi[j] + s.psi[i]);
        }
        out[i] = (acc * LOT_SCALE * factor) / (b0 * te);
      }
  return out;
}

function assertClose(got, want, mask, what, rel = 2e-5) {
  let max = 0, err = 0;
  for (let i = 0; i < want.length; i++) max = Math.max(max, Math.abs(want[i]));
  assert.ok(max > 0, `${what}: the expected output is not all zero`);
  for (let i = 0; i < want.length; i++) {
    if (!mask[i]) assert.equal(got[i], 0, `${what}: voxel ${i} outside the eroded mask must be 0`);
    err = Math.max(err, Math.abs(got[i] - want[i]));
  }
  assert.ok(err <= rel * max, `${what}: max error ${err} vs max |value| ${max}`);
}

test('iQSM gets wrapped phase, TE, B0, the eroded mask and the border shell in the reference layout', async () => {
  const s = scene([40, 36, 30]);
  let wraps = 0;
  for (let i = 0; i < s.n; i++) if (s.eroded[i] && Math.abs(s.psi[i]) > Math.PI) wraps++;
  assert.ok(wraps > 100, `the phase must actually wrap inside the mask (${wraps} voxels beyond π)`);
  const r = await tessera.invert({ keepInputs: true, model: 'iqsm', phase: s.phase, mask: s.mask, geometry: s.geometry, te: 0.02, b0: 3, weights: lotNet() });
  assert.equal(r.quantity, 'chi');
  assert.deepEqual(r.report.plan.patchDims, [48, 48, 32]); // the whole volume padded to 16
  assert.deepEqual(r.report.pool[0].inputBinding, { phase: 'phase', mask: 'mask', te: 'te', b0: 'b0', border: 'border' });
  assertClose(r.chi.data, expected(s, 0.02, 3), s.eroded, 'iQSM');
  // The trig trick equals the Laplacian of the unwrapped phase up to the curvature terms (≈ 5e-3 here).
  const [X, Y] = s.dims;
  let err = 0, max = 0;
  for (let i = 0; i < s.n; i++) {
    if (!s.eroded[i]) continue;
    let lap = 0;
    for (let k = 0; k < 27; k++) {
      const dx = Math.floor(k / 9) - 1, dy = (Math.floor(k / 3) % 3) - 1, dz = (k % 3) - 1;
      lap += LOT_KERNEL[k] * -s.psi[i + dx + X * (dy + Y * dz)];
    }
    lap *= LOT_SCALE / (3 * 0.02);
    err = Math.max(err, Math.abs(r.chi.data[i] - lap));
    max = Math.max(max, Math.abs(lap));
  }
  assert.ok(err < 1e-2 * max, `LoT vs the Laplacian of the unwrapped phase: ${err} vs ${max}`);
});

test('iQSM+ swaps y and z when B0 lies closer to y, gives the network the unit direction, crops and undoes it all', async () => {
  const s = scene([44, 38, 30], { lo: [8, 7, 6], hi: [30, 33, 25] });
  const geometry = { ...s.geometry, b0Dir: [0, 1.6, 1.2] }; // not unit: the core normalises to (0, 0.8, 0.6)
  const r = await tessera.invert({ keepInputs: true, model: 'iqsm-plus', phase: s.phase, mask: s.mask, geometry, te: 0.015, b0: 7, weights: lotNet({ plus: true }) });
  // Swapped, the direction is (0, 0.6, 0.8): the stand-in scales its output by the z component, 0.8.
  assertClose(r.chi.data, expected(s, 0.015, 7, 0.8), s.eroded, 'iQSM+ tilted');
  // The crop: the eroded mask's box [11,27)×[10,30)×[9,22) + 16, clamped, swapped (y↔z), padded to 16.
  assert.deepEqual(r.report.plan.patchDims, [48, 32, 48]);
  const axial = await tessera.invert({ keepInputs: true, model: 'iqsm-plus', phase: s.phase, mask: s.mask, geometry: s.geometry, te: 0.015, b0: 7, weights: lotNet({ plus: true }) });
  assertClose(axial.chi.data, expected(s, 0.015, 7, 1), s.eroded, 'iQSM+ axial');
  assert.deepEqual(axial.report.plan.patchDims, [48, 48, 32]);
});

test('echoes are combined with (magnitude·TE)² weights; iQFM reports a local field', async () => {
  const te = [0.01, 0.025];
  const echoes = te.map((t) => scene([36, 34, 28], { scale: t / 0.01 }));
  const n = echoes[0].n;
  const phase = new Float32Array(2 * n), magnitude = new Float32Array(2 * n);
  echoes.forEach((s, e) => phase.set(s.phase, e * n));
  for (let i = 0; i < 2 * n; i++) magnitude[i] = 0.5 + ((i * 7919) % 97) / 97;
  const r = await tessera.invert({
    keepInputs: true,
    model: 'iqfm', phase, magnitude, mask: echoes[0].mask, geometry: echoes[0].geometry, te, b0: 3, weights: lotNet(),
  });
  assert.equal(r.quantity, 'local-field');
  assert.equal(r.localField, r.chi, 'the same Volume');
  assert.equal(r.report.tilesRun, 2); // one network call per echo
  const per = echoes.map((s, e) => expected(s, te[e], 3));
  const want = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const w = te.map((t, e) => (magnitude[e * n + i] * t) ** 2);
    want[i] = (w[0] * per[0][i] + w[1] * per[1][i]) / (w[0] + w[1]);
  }
  assertClose(r.chi.data, want, echoes[0].eroded, 'two echoes');
});

test("an export's input names bind by name, by order or explicitly; ambiguous names fail naming the inputs", async () => {
  const s = scene([36, 34, 28]);
  const run = (weights, extra = {}) => tessera.invert({ keepInputs: true, model: 'iqsm', phase: s.phase, mask: s.mask, geometry: s.geometry, te: 0.02, weights, ...extra });
  const want = expected(s, 0.02, 3);
  const upstream = await run(lotNet({ names: { phase: 'wphs', mask: 'masks', te: 'TEs', b0: 'B0', border: 'border_shell' } }));
  assert.deepEqual(upstream.report.pool[0].inputBinding, { phase: 'wphs', mask: 'masks', te: 'TEs', b0: 'B0', border: 'border_shell' });
  assertClose(upstream.chi.data, want, s.eroded, 'upstream names');
  const generic = await run(lotNet({ names: ['input.1', 'input.2', 'input.3', 'input.4', 'input.5'] }));
  assert.equal(generic.report.pool[0].inputBinding.border, 'input.5'); // the reference order
  assertClose(generic.chi.data, want, s.eroded, 'generic names');
  const unclear = lotNet({ names: { mask: 'in_a', border: 'in_b' } });
  await assert.rejects(run(unclear), (e) => {
    assert.equal(e.code, 'ModelLoadFailed');
    assert.match(e.message, /cannot tell which of the network's inputs in_a, in_b is mask, border.*inputNames/);
    return true;
  });
  const told = await run(unclear, { inputNames: { mask: 'in_a', border: 'in_b' } });
  assertClose(told.chi.data, want, s.eroded, 'explicit names');
});

test('a phase network over the single-patch limit is refused up front with advice', async () => {
  const dims = [224, 224, 176];
  const plan = await tessera.plan({ model: 'iqsm', geometry: { dims }, te: 0.02 });
  assert.equal(plan.feasible, false);
  assert.match(plan.message, /iQSM runs on the whole volume \(it cannot be tiled\).*crop the field of view/);
  const n = dims[0] * dims[1] * dims[2];
  await assert.rejects(
    tessera.invert({ keepInputs: true, model: 'iqsm', phase: new Float32Array(n), geometry: { dims }, te: 0.02, weights: lotNet() }),
    (e) => e.code === 'BudgetExceeded' && /cannot be tiled/.test(e.message),
  );
  // iQSM+ crops to the brain: the same volume with a head-sized mask fits.
  const mask = new Uint8Array(n);
  for (let z = 40; z < 120; z++) for (let y = 40; y < 136; y++) for (let x = 48; x < 128; x++) mask[x + 224 * (y + 224 * z)] = 1;
  const plus = await tessera.plan({ model: 'iqsm-plus', geometry: { dims }, mask, te: [0.01, 0.02] });
  assert.equal(plus.feasible, true, plus.message);
  assert.equal(plus.tilesTotal, 2);
  assert.equal((await tessera.status()).liveWorkers, 0);
});

test('bad phase-network input is refused by name', async () => {
  const s = scene([36, 34, 28]);
  const base = { model: 'iqsm', phase: s.phase, mask: s.mask, geometry: s.geometry, te: 0.02, weights: lotNet(), keepInputs: true };
  const refused = (extra, code, re) =>
    assert.rejects(tessera.invert({ ...base, ...extra }), (e) => {
      assert.equal(e.code, code, e.message);
      assert.match(e.message, re);
      return true;
    });
  await refused({ te: undefined }, 'InvalidArgument', /echo time/);
  await refused({ te: 20 }, 'InvalidArgument', /seconds \(20 ms = 0\.02\)/);
  await refused({ te: [0.01, 0.02] }, 'InvalidArgument', /phase holds 1 echo\(es\) of 36×34×28 but te gives 2 echo time\(s\): give one TE per echo/);
  await refused({ b0: -3 }, 'InvalidArgument', /tesla/);
  await refused({ phase: s.phase.subarray(1) }, 'InvalidArgument', /phase holds/);
  await refused({ phase: undefined, field: s.phase }, 'InvalidArgument', /reconstructs from wrapped phase/);
  await refused({ model: 'xqsm', weights: lotNet() }, 'InvalidArgument', /phase and magnitude are inputs of the phase networks/);
  await refused({ tE: 0.02 }, 'InvalidArgument', /unknown option\(s\) tE/);
  await refused({ tile: { core: 56, halo: 4 } }, 'InvalidArgument', /iQSM runs on the whole volume only: it reconstructs from wrapped phase and cannot be tiled/);
  const nan = s.phase.slice();
  nan[5000] = NaN;
  await refused({ phase: nan }, 'NonFiniteInput', /NaN/);
  assert.deepEqual(await tessera.status().then((t) => [t.running, t.liveWorkers]), [0, 0]); // no refusal left a run behind
});

test('a multi-echo phase run can be cancelled: AbortError, no worker left, the runtime still works', async () => {
  const s = scene([36, 34, 28]);
  const echoes = 12; // the abort reaches the run long before the last echo
  const phase = new Float32Array(echoes * s.n);
  for (let e = 0; e < echoes; e++) phase.set(s.phase, e * s.n);
  const controller = new AbortController();
  const seen = [];
  const run = tessera.invert({
    keepInputs: true,
    model: 'iqsm', phase, mask: s.mask, geometry: s.geometry, te: Array.from({ length: echoes }, (_, e) => 0.005 * (e + 1)), weights: lotNet(),
    signal: controller.signal,
    onProgress: (p) => {
      seen.push(`${p.done}/${p.total}`);
      if (p.done >= 1) controller.abort();
    },
  });
  await assert.rejects(run, (e) => e.name === 'AbortError');
  assert.ok(seen.includes(`1/${echoes}`) && !seen.includes(`${echoes}/${echoes}`), `progress ${seen.join(' ')}`);
  assert.equal((await tessera.status()).liveWorkers, 0);
  const again = await tessera.invert({ keepInputs: true, model: 'iqsm', phase: s.phase, mask: s.mask, geometry: s.geometry, te: 0.02, weights: lotNet() });
  assertClose(again.chi.data, expected(s, 0.02, 3), s.eroded, 'after cancel');
});
