// The plan is a handle: plan() keeps the C++ plan in the runtime and returns a read-only view with its id;
// invert({plan}) runs the held plan, refusing in words a plan without an id, of another runtime, no longer held, or made
// for another mask, geometry, network, method or parameter; C++ reads each API call's request once (the runtime's
// internal counter, reached here through the driver worker's message, not through the package's API); the CLI's
// invert plans once, also when its weights are downloaded and with --measure-speed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createTessera, writeNifti } from './index.js';
import { counters } from './debug.js';
import { cmdInvert } from './cli/invert.js';
import { parse } from './cli/flags.js';
import { Progress } from './cli/progress.js';
import { convStack } from '../../tests/js/networks.js';

const geometry = { dims: [24, 20, 16], voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
const spec = { divisor: 1, bytesPerVoxel: 1100 };
const tile = { core: 8, halo: 1 };
let t;
let phantom;
const weights = convStack({ layers: 1, seed: 2 });

before(async () => {
  t = await createTessera({ workers: 1, hardwareThreads: 2 });
  phantom = await t.phantom({ geometry });
});
after(async () => {
  await t?.terminate();
});

/** Requests C++ read while f ran, and f's result. */
async function parsesOf(f) {
  const before = (await counters(t)).requestParses;
  const value = await f();
  return { parses: (await counters(t)).requestParses - before, value };
}

test('plan() returns a frozen view with an id; nested objects frozen too; the fields are the plan\'s', async () => {
  const plan = await t.plan({ geometry, mask: phantom.mask, spec, tile, verify: true });
  assert.match(plan.id, /^[0-9a-f]{12}-\d+$/);
  assert.ok(Object.isFrozen(plan) && Object.isFrozen(plan.tile) && Object.isFrozen(plan.grid.tiles[0]) && Object.isFrozen(plan.verify));
  assert.throws(() => { plan.tilesInFlight = 99; }, TypeError);
  assert.equal(plan.feasible, true, plan.message);
  assert.deepEqual(plan.tile, { core: 8, halo: 1, stride: 8, blend: 'crop' });
  assert.equal(plan.tilesTotal, 3 * 3 * 2);
  assert.equal(plan.cost.source, 'declared');
  const method = await t.plan({ geometry, mask: phantom.mask, method: 'tkd' });
  assert.ok(Object.isFrozen(method) && typeof method.id === 'string' && method.id !== plan.id);
  assert.equal(method.method, 'tkd');
});

test('one request parse per call: plan() 1, invert() 1 with or without a plan, verify on still 1; a method\'s alike', async () => {
  const request = { geometry, field: phantom.field, mask: phantom.mask, spec, weights, tile, keepInputs: true };
  const planned = await parsesOf(() => t.plan(request));
  assert.equal(planned.parses, 1);
  assert.equal((await parsesOf(() => t.invert(request))).parses, 1);
  const handed = await parsesOf(() => t.invert({ ...request, plan: planned.value }));
  assert.equal(handed.parses, 1);
  const verified = await t.plan({ ...request, verify: true });
  const checked = await parsesOf(() => t.invert({ ...request, verify: true, plan: verified }));
  assert.equal(checked.parses, 1);
  assert.equal(checked.value.report.verify.possible, true, checked.value.report.verify.message);
  assert.equal((await parsesOf(() => t.invert({ ...request, verify: true }))).parses, 1);
  const tkd = { geometry, field: phantom.field, mask: phantom.mask, method: 'tkd', keepInputs: true };
  const methodPlan = await parsesOf(() => t.plan(tkd));
  assert.equal(methodPlan.parses, 1);
  assert.equal((await parsesOf(() => t.invert(tkd))).parses, 1);
  const run = await parsesOf(() => t.invert({ ...tkd, plan: methodPlan.value }));
  assert.equal(run.parses, 1);
  // The held plan runs: the same χ as the run that planned for itself.
  assert.deepEqual(run.value.chi.data, (await t.invert(tkd)).chi.data);
});

test('the held plan runs: χ and the tiles as the plan said, the same as a run planning for itself', async () => {
  const request = { geometry, field: phantom.field, mask: phantom.mask, spec, weights, tile, keepInputs: true };
  const plan = await t.plan(request);
  const handed = await t.invert({ ...request, plan });
  const own = await t.invert(request);
  assert.deepEqual(handed.chi.data, own.chi.data);
  assert.equal(handed.report.tilesRun, plan.tilesActive);
  assert.equal(handed.report.plan.id, plan.id);
  // What plan() fixed stays fixed: a tile given to invert beside the plan does not re-plan the run.
  const other = await t.invert({ ...request, tile: { core: 12, halo: 1 }, plan });
  assert.equal(other.report.tilesRun, plan.tilesActive);
  assert.deepEqual(other.chi.data, own.chi.data);
});

test('refused in words: no id, another runtime, no longer held, another mask, geometry, network, method or parameter', async () => {
  const request = { geometry, field: phantom.field, mask: phantom.mask, spec, weights, tile, keepInputs: true };
  const plan = await t.plan(request);
  const refused = (re) => (e) => {
    assert.equal(e.code, 'InvalidArgument', e.message);
    assert.match(e.message, re);
    return true;
  };
  await assert.rejects(t.invert({ ...request, plan: { ...plan, id: undefined } }), refused(/plan must be the object plan\(\) returned.*call plan\(\)/));
  await assert.rejects(t.invert({ ...request, plan: 'auto' }), refused(/plan must be the object plan\(\) returned/));
  const other = await createTessera({ workers: 1 });
  try {
    const foreign = await other.plan(request);
    await assert.rejects(t.invert({ ...request, plan: foreign }), refused(/made by another Tessera runtime: call plan\(\) on the runtime that runs it/));
  } finally {
    await other.terminate();
  }
  const mask = phantom.mask.slice();
  mask[mask.indexOf(1)] = 0;
  await assert.rejects(t.invert({ ...request, mask, plan }), refused(/plan was made for another mask: \d+ voxels in x .*; this mask holds \d+ voxels.*call plan\(\) with this mask/));
  const shifted = { ...geometry, voxelMm: [1, 1, 2] };
  await assert.rejects(t.invert({ ...request, geometry: shifted, plan }), refused(/plan was made for a volume of 24×20×16 at 1×1×1 mm.*this one is 24×20×16 at 1×1×2 mm/));
  await assert.rejects(t.invert({ ...request, spec: { ...spec, divisor: 2 }, plan }), refused(/plan was made for network spec \(divisor 1,.*this request gives network spec \(divisor 2/));
  await assert.rejects(t.invert({ ...request, spec: undefined, model: 'demo-unet', plan }), refused(/plan was made for network spec .*this request gives network demo-unet/));
  await assert.rejects(t.invert({ ...request, b0Align: 'on', plan }), refused(/plan was made for b0Align auto; this request gives b0Align on/));
  await assert.rejects(t.invert({ keepInputs: true, geometry, field: phantom.field, mask: phantom.mask, method: 'tkd', plan }), refused(/made for a network's run \(model or spec\); this request is a classical method's run/));
  const tkd = await t.plan({ geometry, mask: phantom.mask, method: 'tkd' });
  await assert.rejects(t.invert({ keepInputs: true, geometry, field: phantom.field, mask: phantom.mask, method: 'tkd', tkd: { threshold: 0.1 }, plan: tkd }), refused(/made for tkd\.threshold [\d.]+; this request gives tkd\.threshold 0\.1/));
  await assert.rejects(t.invert({ keepInputs: true, geometry, field: phantom.field, mask: phantom.mask, method: 'tsvd', plan: tkd }), refused(/made for method tkd; this request gives method tsvd/));
  // Phase networks: the acquisition is part of what the plan was made for (nothing runs: no weights are needed).
  const iqsm = await t.plan({ geometry, mask: phantom.mask, model: 'iqsm', te: 0.02 });
  await assert.rejects(t.invert({ keepInputs: true, geometry, phase: phantom.field, mask: phantom.mask, model: 'iqsm', te: 0.03, weights, plan: iqsm }), refused(/made for te \[0\.02\]; this request gives te \[0\.03\]/));
  await assert.rejects(t.invert({ keepInputs: true, geometry, phase: phantom.field, mask: phantom.mask, model: 'iqsm', te: 0.02, phaseSign: 1, weights, plan: iqsm }), refused(/made for phaseSign -1; this request gives phaseSign 1/));
  // The last 16 plans are held: the 17th plan after this one drops it.
  for (let i = 0; i < 16; i++) await t.plan({ geometry, mask: phantom.mask, method: 'tkd' });
  await assert.rejects(t.invert({ ...request, plan }), refused(/this plan is no longer held by the runtime \(it holds the last 16\): call plan\(\) again/));
});

test('a pipeline runs the plan handed back; a plan of other stage options is refused by name', async () => {
  const te = [0.004, 0.008];
  const scan = await t.phantomScan({ geometry, te, snr: 0 });
  const request = { geometry, mask: scan.mask, te, b0: 3, method: 'tkd', keepInputs: true };
  const plan = await t.plan({ ...request, pipeline: true });
  const run = await parsesOf(() => t.pipeline({ ...request, phase: scan.phase, plan }));
  assert.equal(run.parses, 1);
  assert.deepEqual(run.value.chi.data, (await t.pipeline({ ...request, phase: scan.phase })).chi.data);
  const made = (await t.schema()).find((o) => o.name === 'background').default;  // the plan's: the default
  const other = made === 'pdf' ? 'vsharp' : 'pdf';
  await assert.rejects(t.pipeline({ ...request, phase: scan.phase, background: other, plan }), (e) => {
    assert.equal(e.code, 'InvalidArgument');
    assert.ok(e.message.includes(`plan was made for background ${made}; this request gives background ${other}`), e.message);
    return true;
  });
});

/** Runs `tessera-qsm invert ARGS` in this process and counts the plan() calls and the requests C++ read. */
async function cliInvert(args) {
  const schema = await t.schema();
  const { o, values } = parse('invert', args, schema);
  let runtime;
  let plans = 0;
  const ctx = {
    args: ['invert', ...args],
    out: () => {},
    signal: new AbortController().signal,
    progress: new Progress({ quiet: true }),
    schema,
    values,
    async start(opts) {
      runtime = await createTessera(opts);
      const plan = runtime.plan.bind(runtime);
      runtime.plan = (r) => {
        plans++;
        return plan(r);
      };
      return runtime;
    },
  };
  try {
    const code = await cmdInvert(o, ctx);
    return { code, plans, parses: (await counters(runtime)).requestParses };
  } finally {
    await runtime?.terminate();
  }
}

test('the CLI\'s invert plans once: weights downloaded, local, and with --measure-speed; the run takes that plan', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-plan-handle-'));
  const demo = fs.readFileSync(new URL('../../web/models/demo-unet.onnx', import.meta.url));
  const server = http.createServer((req, res) => res.end(demo));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const like = { dims: geometry.dims, voxelMm: geometry.voxelMm };
    fs.writeFileSync(path.join(dir, 'field.nii'), await writeNifti(phantom.field, like));
    fs.writeFileSync(path.join(dir, 'mask.nii'), await writeNifti(Float32Array.from(phantom.mask), like));
    fs.writeFileSync(path.join(dir, 'demo.onnx'), demo);
    const common = ['--field', path.join(dir, 'field.nii'), '--mask', path.join(dir, 'mask.nii'), '--model', 'demo-unet', '--quiet'];
    const url = `http://127.0.0.1:${server.address().port}/demo-unet.onnx`;
    const runs = {
      downloaded: ['--weights', url],
      local: ['--weights', path.join(dir, 'demo.onnx')],
      // Without --threads the probe runs on the threads the plan gives each worker: plan() plans, measures, and plans
      // the held request again with the speed (not read again); the CLI still calls plan() once.
      'measure-speed': ['--weights', url, '--measure-speed'],
    };
    const chi = {};
    for (const [name, extra] of Object.entries(runs)) {
      const out = path.join(dir, `${name}.nii`);
      const r = await cliInvert([...common, ...extra, '--out', out]);
      assert.equal(r.code, 0, name);
      assert.equal(r.plans, 1, `${name}: tessera.plan() calls`);
      // The plan read the request once, the run read it once to check it against the plan (the speed probe reads its
      // own phantom patches' requests).
      if (name !== 'measure-speed') assert.equal(r.parses, 2, `${name}: requests read`);
      chi[name] = fs.readFileSync(out);
    }
    assert.deepEqual(chi.downloaded, chi.local, 'planned before the download (the registry\'s reach) or with the local file: the same χ');
  } finally {
    server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
