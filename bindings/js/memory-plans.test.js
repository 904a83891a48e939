// Module-heap plans against the heap a run really reaches, per kind of run the C++ core plans (a closed-form method, an
// iterative one, one with a magnitude prior, the pipeline, a physics loop run whole): each in a fresh runtime (wasm
// memory never shrinks), the heap read after the run. A plan must never be under the heap, and at most 1.25× it.
// Small volumes keep this quick; bench/memory-plans.js runs the large ones.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createTessera } from './index.js';
import { twoChannel, convStack } from '../../tests/js/networks.js';

const geometry = { dims: [96, 96, 80], voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
let maker;
let phantom;
let magnitude;
before(async () => {
  maker = await createTessera({ workers: 1 });
  phantom = await maker.phantom({ geometry, seed: 1 });
  magnitude = new Float32Array(phantom.mask.length).map((_, i) => (phantom.mask[i] ? 1 : 0.2));
});
after(async () => {
  await maker?.terminate();
});

/** plan / measured module heap of run(t) in a fresh runtime of `threads` threads; run returns {plan, heap}. */
async function ratio(run, threads = 2) {
  const t = await createTessera({ workers: 1, hardwareThreads: threads });
  try {
    const { plan, heap } = await run(t);
    return { ratio: plan.moduleHeapBytes / heap, plan: plan.moduleHeapBytes, heap };
  } finally {
    await t.terminate();
  }
}

function within(kind, r) {
  assert.ok(r.ratio >= 1 && r.ratio <= 1.25, `${kind}: planned ${r.plan} B, heap ${r.heap} B: plan/heap ${r.ratio.toFixed(3)}, outside [1, 1.25]`);
}

for (const [method, options] of [['tkd', {}], ['tv', { tv: { maxIterations: 2 } }], ['medi', { medi: { maxIterations: 1, cgMaxIterations: 2 } }]]) {
  test(`${method}: the module-heap plan is within 1–1.25× of the heap the run reaches`, { timeout: 120000 }, async () => {
    const r = await ratio(async (t) => {
      const req = { geometry, field: phantom.field, mask: phantom.mask, method, ...options, ...(method === 'medi' ? { magnitude } : {}), keepInputs: true };
      const plan = await t.plan(req);
      const out = await t.invert({ ...req, plan });
      return { plan, heap: out.report.memory.moduleHeapBytes };
    });
    within(method, r);
  });
}

// Every thread beyond the first holds its stack in the module heap: the plan counts them at any thread count. On the
// page's TKD demo volume (128×128×96).
const demo = { dims: [128, 128, 96], voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
for (const [method, options] of [['tkd', {}], ['tv', { tv: { maxIterations: 2 } }]]) {
  test(`${method} at 1, 2, 4 and 8 threads: the module-heap plan is within 1–1.25× of the heap the run reaches`, { timeout: 240000 }, async () => {
    const ph = await maker.phantom({ geometry: demo, seed: 1 });
    for (const threads of [1, 2, 4, 8]) {
      const r = await ratio(async (t) => {
        const req = { geometry: demo, field: ph.field, mask: ph.mask, method, ...options, keepInputs: true };
        const plan = await t.plan(req);
        assert.equal(plan.threads, threads);
        const out = await t.invert({ ...req, plan });
        return { plan, heap: out.report.memory.moduleHeapBytes };
      }, threads);
      within(`${method}, ${threads} threads`, r);
    }
  });
}

test('the pipeline (4 echoes, TKD): the module-heap plan is within 1–1.25× of the heap the run reaches', { timeout: 180000 }, async () => {
  const te = [0.004, 0.008, 0.012, 0.016];
  const scan = await maker.phantomScan({ geometry, te, seed: 1 });
  const r = await ratio(async (t) => {
    const req = { geometry, te, b0: 3, phase: scan.phase, magnitude: scan.magnitude, method: 'tkd', keepInputs: true };
    const plan = await t.plan({ ...req, pipeline: true });
    const out = await t.pipeline({ ...req, plan });
    return { plan, heap: out.report.memory.moduleHeapBytes };
  });
  within('pipeline', r);
});

test('the pipeline with SWI and R2* (4 echoes, TKD, also swi, r2star): the module-heap plan is within 1–1.25× of the heap', { timeout: 180000 }, async () => {
  const te = [0.004, 0.008, 0.012, 0.016];
  const scan = await maker.phantomScan({ geometry, te, seed: 1 });
  const r = await ratio(async (t) => {
    const req = { geometry, te, b0: 3, phase: scan.phase, magnitude: scan.magnitude, method: 'tkd', also: ['swi', 'r2star'], keepInputs: true };
    const plan = await t.plan({ ...req, pipeline: true });
    const out = await t.pipeline({ ...req, plan });
    return { plan, heap: out.report.memory.moduleHeapBytes };
  });
  within('pipeline + SWI + R2*', r);
});

test('a physics loop (MoDL-QSM, whole): the module-heap plan is within 1–1.25× of the heap the run reaches', { timeout: 180000 }, async () => {
  const r = await ratio(async (t) => {
    const req = { geometry, field: phantom.field, mask: phantom.mask, model: 'modl-qsm', weights: twoChannel(), whole: true, keepInputs: true };
    const plan = await t.plan(req);
    const out = await t.invert({ ...req, plan });
    return { plan, heap: out.report.memory.moduleHeapBytes };
  });
  within('modl-qsm', r);
});

test('a physics loop the auto-planner runs whole is planned with its loop\'s volumes, as when asked to run whole', { timeout: 60000 }, async () => {
  const t = await createTessera({ workers: 1, hardwareThreads: 2 });
  try {
    for (const [model, channels] of [['modl-qsm', 2], ['lpcnn', 1]]) {
      const weights = convStack({ layers: 2, channels: 4, inChannels: channels, outChannels: channels, seed: 5 });
      const req = { geometry, field: phantom.field, mask: phantom.mask, model, weights, keepInputs: true };
      const auto = await t.plan(req);
      const whole = await t.plan({ ...req, whole: true });
      assert.ok(auto.wholeVolume, `${model}: the auto-planner ran it tiled (${auto.explanation})`);
      assert.equal(auto.moduleHeapBytes, whole.moduleHeapBytes, model);
      // Above a plain network's (its input and output, 16 bytes a patch voxel) by the loop's volumes.
      const plain = await t.plan({ ...req, model: undefined, spec: { divisor: 8, bytesPerVoxel: 430 }, whole: true });
      assert.ok(whole.moduleHeapBytes > plain.moduleHeapBytes + 24 * 96 * 96 * 80, `${model}: ${whole.moduleHeapBytes} vs ${plain.moduleHeapBytes}`);
    }
  } finally {
    await t.terminate();
  }
});
