// Tests of the wrapped-phase test network (tests/js/phase-networks.js): the LoT layer of iQSM / iQFM / iQSM+
// as ONNX, run in ONNX Runtime Web (wasm, 1 thread), against the plain-JS reference and the physics.
// Run: node --test --test-force-exit tests/js/phase-networks.test.js
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as ort from 'onnxruntime-web';
import { onnx } from './onnx-build.js';
import { randomArray, prng } from './networks.js';
import { LOT_KERNEL, LOT_SCALE, lotNet, lotReference, borderShell, conv27 } from './phase-networks.js';

ort.env.wasm.numThreads = 1;
ort.env.logLevel = 'error';

const wrap = (v) => Math.atan2(Math.sin(v), Math.cos(v));

/** Run an ONNX model once; feeds by name: Float32Array + dims. Returns the first output. */
async function run(bytes, feeds) {
  const session = await ort.InferenceSession.create(bytes, { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
  try {
    const t = {};
    for (const [k, [data, dims]] of Object.entries(feeds)) t[k] = new ort.Tensor('float32', data, dims);
    const r = await session.run(t);
    return { out: r[session.outputNames[0]], inputNames: [...session.inputNames], outputNames: [...session.outputNames] };
  } finally {
    await session.release();
  }
}

function volFeeds(names, { phase, mask, border, te, b0, dir }, dims) {
  const v = [1, 1, ...dims];
  const f = { [names[0]]: [phase, v], [names[1]]: [mask, v], [names[2]]: [Float32Array.of(te), [1]], [names[3]]: [Float32Array.of(b0), [1]] };
  if (dir) f[names[4]] = [Float32Array.from(dir), [1, 1, 3]];
  f[names[names.length - 1]] = [border, v];
  return f;
}

function randomCase(dims, seed) {
  const V = dims[0] * dims[1] * dims[2];
  const phase = randomArray(V, seed, Math.PI); // wrapped: uniform in [-π, π)
  const r = prng(seed + 1);
  const mask = new Float32Array(V);
  for (let i = 0; i < V; i++) mask[i] = r() < 0.8 ? 1 : 0;
  return { phase, mask, border: borderShell(dims), te: 0.02, b0: 3 };
}

function maxRelDiff(a, b, sel = () => true) {
  let d = 0, m = 0;
  for (let i = 0; i < a.length; i++) {
    if (!sel(i)) continue;
    d = Math.max(d, Math.abs(a[i] - b[i]));
    m = Math.max(m, Math.abs(b[i]));
  }
  return { rel: d / m, max: m };
}

test('LOT_KERNEL: the 27-point Laplacian (sums to 0, Σ w·|r|² = 6, symmetric)', () => {
  let s = 0, s2 = 0;
  for (let x = 0; x < 3; x++)
    for (let y = 0; y < 3; y++)
      for (let z = 0; z < 3; z++) {
        const w = LOT_KERNEL[(x * 3 + y) * 3 + z];
        s += w;
        s2 += w * ((x - 1) ** 2 + (y - 1) ** 2 + (z - 1) ** 2);
        assert.equal(w, LOT_KERNEL[((2 - x) * 3 + y) * 3 + z]);
        assert.equal(w, LOT_KERNEL[(z * 3 + x) * 3 + y]);
      }
  assert.ok(Math.abs(s) < 1e-6, `sum ${s}`);
  assert.ok(Math.abs(s2 - 6) < 1e-5, `second moment ${s2}`);
  assert.equal(LOT_KERNEL[13], Math.fround(-44 / 13));
  assert.equal(LOT_KERNEL[0], Math.fround(1 / 13));
});

test('lotNet: graph inputs/outputs in the reference order with the documented shapes', () => {
  const shape = (vi) => vi.type.tensorType.shape.dim.map((d) => (d.dimParam ? d.dimParam : Number(d.dimValue)));
  for (const plus of [false, true]) {
    const g = onnx.ModelProto.decode(lotNet({ plus })).graph;
    assert.deepEqual(g.input.map((i) => i.name), plus ? ['phase', 'mask', 'te', 'b0', 'b0_dir', 'border'] : ['phase', 'mask', 'te', 'b0', 'border']);
    assert.deepEqual(shape(g.input[0]), [1, 1, 'X', 'Y', 'Z']);
    assert.deepEqual(shape(g.input[2]), [1]);
    assert.deepEqual(shape(g.input[3]), [1]);
    if (plus) assert.deepEqual(shape(g.input[4]), [1, 1, 3]);
    assert.deepEqual(shape(g.input[g.input.length - 1]), [1, 1, 'X', 'Y', 'Z']);
    assert.deepEqual(g.output.map((o) => o.name), ['chi']);
  }
  assert.throws(() => lotNet({ names: { phase: 'a', mask: 'a' } }), /distinct/);
  assert.throws(() => lotNet({ names: { b0_dir: 'z' } }), /unknown input role/);
  assert.throws(() => lotNet({ plus: true, names: ['a', 'b'] }), /expected 6/);
});

test('lotNet in ORT equals lotReference on random wrapped phase 16×16×32 (random mask, border shell)', async () => {
  const dims = [16, 16, 32];
  const c = randomCase(dims, 7);
  const { out } = await run(lotNet(), volFeeds(['phase', 'mask', 'te', 'b0', 'border'], c, dims));
  assert.deepEqual(Array.from(out.dims, Number), [1, 1, ...dims]);
  const ref = lotReference(c.phase, c.mask, c.border, c.te, c.b0, dims);
  const { rel, max } = maxRelDiff(out.data, ref);
  assert.ok(max > 1, `max |chi| ${max}`);
  assert.ok(rel <= 1e-5, `max abs diff / max |ref| = ${rel}`);
  // the border shell and the mask zero the output
  for (let i = 0; i < ref.length; i++) if (!c.border[i] || !c.mask[i]) assert.ok(out.data[i] === 0, `voxel ${i}`);
  // te and b0 divide: doubling b0·te halves the output
  const half = await run(lotNet(), volFeeds(['phase', 'mask', 'te', 'b0', 'border'], { ...c, te: 0.04 }, dims));
  assert.ok(maxRelDiff(half.out.data, Float32Array.from(ref, (v) => v / 2)).rel <= 1e-5);
});

/** ψ in 16×16×32: a sum of low-frequency sinusoids around 3.1 rad, so wrap(ψ) wraps (ψ crosses π). */
function smoothPhase(dims, amp, offset) {
  const [X, Y, Z] = dims;
  const psi = new Float64Array(X * Y * Z);
  for (let x = 0; x < X; x++)
    for (let y = 0; y < Y; y++)
      for (let z = 0; z < Z; z++)
        psi[(x * Y + y) * Z + z] =
          offset + amp * (Math.sin((2 * Math.PI * x) / 40 + 0.3) + Math.cos((2 * Math.PI * y) / 44 - 0.5) + Math.sin((2 * Math.PI * z) / 60 + 1.1));
  return psi;
}

test('physics: lotNet(wrap ψ) is the 27-point Laplacian of the UNWRAPPED ψ (interior, ~1e-3), whatever the wraps', async () => {
  const dims = [16, 16, 32];
  const V = dims[0] * dims[1] * dims[2];
  const te = 0.025, b0 = 2.89;
  const border = borderShell(dims);
  const mask = new Float32Array(V).fill(1);
  const f = LOT_SCALE / (b0 * te);

  // (1) Smooth ψ spanning [2.99, 4.0]: wrap(ψ) jumps by 2π across the ψ = π surface, inside the volume.
  const psi = smoothPhase(dims, 0.3, 3.1);
  const wrapped = Float32Array.from(psi, wrap);
  let jumps = 0;
  for (let i = 0; i < V; i++) if (border[i] && Math.abs(wrapped[i] - psi[i]) > 6) jumps++;
  assert.ok(jumps > V / 4, `wrapped interior voxels ${jumps}`);
  const { out } = await run(lotNet(), volFeeds(['phase', 'mask', 'te', 'b0', 'border'], { phase: wrapped, mask, border, te, b0 }, dims));
  const lap = conv27(psi, dims, LOT_KERNEL);
  const expected = Float32Array.from(lap, (v) => v * f);
  const inside = (i) => border[i] === 1;
  const { rel } = maxRelDiff(out.data, expected, inside);
  assert.ok(rel < 1.5e-3, `LoT vs Laplacian of unwrapped ψ: max rel diff ${rel}`);
  // the naive Laplacian of the wrapped phase is wrong by ~2π·w near the wraps
  const naive = conv27(wrapped, dims, LOT_KERNEL);
  assert.ok(maxRelDiff(Float32Array.from(naive, (v) => v * f), expected, inside).rel > 100);

  // (2) Any ψ (amplitude 4 per term, many wraps): exactly Σ_k K_k sin(ψ_k − ψ_0), the identity behind the trick.
  const big = smoothPhase(dims, 4, 0);
  const bigWrapped = Float32Array.from(big, wrap);
  const r2 = await run(lotNet(), volFeeds(['phase', 'mask', 'te', 'b0', 'border'], { phase: bigWrapped, mask, border, te, b0 }, dims));
  const [X, Y, Z] = dims;
  const ident = new Float32Array(V);
  for (let x = 1; x < X - 1; x++)
    for (let y = 1; y < Y - 1; y++)
      for (let z = 1; z < Z - 1; z++) {
        const i = (x * Y + y) * Z + z;
        let s = 0;
        for (let k = 0; k < 27; k++) {
          const j = ((x + Math.floor(k / 9) - 1) * Y + (y + (Math.floor(k / 3) % 3) - 1)) * Z + z + (k % 3) - 1;
          s += LOT_KERNEL[k] * Math.sin(big[j] - big[i]);
        }
        ident[i] = s * f;
      }
  const d2 = maxRelDiff(r2.out.data, ident);
  assert.ok(d2.rel < 1e-5, `LoT vs Σ K sin(Δψ): ${d2.rel}`);
});

test('plus: b0_dir arrives (output scales with its z component); renamed inputs work', async () => {
  const dims = [16, 16, 16];
  const c = randomCase(dims, 11);
  const ref = lotReference(c.phase, c.mask, c.border, c.te, c.b0, dims);
  const names = ['wphs', 'masks', 'TEs', 'B0', 'z_prjs', 'border_shell'];
  const bytes = lotNet({ plus: true, names: { phase: 'wphs', mask: 'masks', te: 'TEs', b0: 'B0', b0_dir: 'z_prjs', border: 'border_shell' } });
  for (const dir of [[0, 0, 1], [0.6, 0, 0.8], [0, -0.8, -0.6]]) {
    const { out, inputNames } = await run(bytes, volFeeds(names, { ...c, dir }, dims));
    assert.deepEqual(inputNames, names);
    const want = lotReference(c.phase, c.mask, c.border, c.te, c.b0, dims, dir[2]);
    assert.ok(maxRelDiff(out.data, want).rel <= 1e-5, `dir ${dir}`);
  }
  // not plus, names as an array (e.g. an export's anonymous names)
  const anon = ['input.1', 'input.2', 'onnx::Mul_3', 'onnx::Mul_4', 'border'];
  const { out, inputNames } = await run(lotNet({ names: anon }), volFeeds(anon, c, dims));
  assert.deepEqual(inputNames, anon);
  assert.ok(maxRelDiff(out.data, ref).rel <= 1e-5);
});
