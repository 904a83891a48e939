// Classical methods through the public API in node: the same C++ step engine as the networks, no ONNX Runtime.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { agreement } from '../../bench/speed-web.js';
import { createTessera } from './index.js';

let tessera;
let phantom;
const geometry = { dims: [48, 48, 40], voxelMm: [4, 4, 4], b0Dir: [0, 0, 1] };
before(async () => {
  tessera = await createTessera({ workers: 1 });
  phantom = await tessera.phantom({ geometry });
});
after(async () => {
  await tessera?.terminate();
});

/** Pearson r inside the mask (bench/speed-web.js's agreement, the one the benchmarks use). */
const r = (a, b, mask) => agreement(a, b, mask).r;
/** The methods whose prior comes from the magnitude (MEDI; TFI, which inverts the total field: a local field is one). */
const needsMagnitude = (m) => m === 'medi' || m === 'tfi';
/** r every method reaches on the phantom's local field; TFI, a total-field method, also fits sources outside the mask there (measured 0.818). */
const floorR = (m) => (m === 'tfi' ? 0.8 : 0.85);

test('every method in the schema has its parameters listed and plans; one that needs the magnitude is refused without it as InvalidArgument', async () => {
  const schema = await tessera.schema();
  const names = schema.find((o) => o.name === 'method').choices;
  assert.ok(names.includes('tkd'));
  for (const m of names) {
    // Without a magnitude, exactly the methods that need one are refused, as a missing input (not as over budget).
    const bare = await tessera.plan({ geometry, mask: phantom.mask, method: m });
    assert.equal(bare.feasible, !needsMagnitude(m), `${m}: ${bare.message}`);
    if (needsMagnitude(m)) {
      assert.equal(bare.refusal, 'InvalidArgument');
      assert.match(bare.message, /needs the magnitude/);
      await assert.rejects(tessera.invert({ keepInputs: true, field: phantom.field, mask: phantom.mask, geometry, method: m }),
        (e) => e.code === 'InvalidArgument' && /needs the magnitude/.test(e.message));
    }
    const plan = await tessera.plan({ geometry, mask: phantom.mask, method: m, magnitude: needsMagnitude(m) ? phantom.field : undefined });
    assert.equal(plan.feasible, true, `${m}: ${plan.message}`);
    assert.equal(plan.method, m);
    assert.ok(plan.methodSteps >= 1);
    assert.ok(plan.moduleHeapBytes > plan.workspaceBytes);
  }
});

test('invert({method: "tkd"}) is tkd(), with progress, and reaches the phantom truth', async () => {
  const events = [];
  const out = await tessera.invert({ keepInputs: true, field: phantom.field, mask: phantom.mask, geometry, method: 'tkd', tkd: { threshold: 0.2 }, onProgress: (p) => events.push(p) });
  const direct = await tessera.tkd({ keepInputs: true, field: phantom.field, mask: phantom.mask, geometry, threshold: 0.2 });
  assert.deepEqual(out.chi, direct);
  assert.equal(out.quantity, 'chi');
  assert.equal(out.report.method, 'tkd');
  assert.ok(events.length >= 1 && events.at(-1).done === events.at(-1).total, JSON.stringify(events.at(-1)));
  assert.ok(r(out.chi.data, phantom.chi, phantom.mask) > 0.8);
  assert.ok(out.report.memory.moduleHeapVsPlan <= 1, `module heap ${out.report.memory.moduleHeapVsPlan} of its plan`);
});

test('a method request with a network option, a wrong parameter or another method\'s options is refused by name', async () => {
  await assert.rejects(tessera.invert({ keepInputs: true, field: phantom.field, mask: phantom.mask, geometry, method: 'tkd', tile: 'auto' }), /unknown option\(s\) tile/);
  await assert.rejects(tessera.invert({ keepInputs: true, field: phantom.field, mask: phantom.mask, geometry, method: 'tkd', tkd: { thresh: 0.2 } }), /unknown tkd option 'thresh' \(known: threshold\)/);
  await assert.rejects(tessera.invert({ keepInputs: true, field: phantom.field, mask: phantom.mask, geometry, method: 'tkd', tkd: { threshold: 2 } }), /tkd.threshold must be in/);
  await assert.rejects(tessera.invert({ keepInputs: true, field: phantom.field, mask: phantom.mask, geometry, method: 'nope' }), /unknown method 'nope'/);
  await assert.rejects(tessera.invert({ keepInputs: true, field: phantom.field, mask: phantom.mask, geometry, method: 'tkd', model: 'xqsm' }), /unknown option\(s\) model/);
  const empty = new Uint8Array(phantom.mask.length);
  await assert.rejects(tessera.invert({ keepInputs: true, field: phantom.field, mask: empty, geometry, method: 'tkd' }), /mask/);
});

test('a volume over the heap is refused by the plan with the largest volume that fits', async () => {
  // 640×640×480 (197 M voxels): TKD needs about 22 bytes a voxel, 4.4 GB, over the 3.5 GB heap (planning costs time in
  // proportion to the volume: no larger one is needed).
  const dims = [640, 640, 480];
  const plan = await tessera.plan({ geometry: { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] }, method: 'tkd' });
  assert.equal(plan.feasible, false);
  const fits = /largest volume that fits holds (\d+) voxels/.exec(plan.message);
  assert.ok(fits, plan.message);
  assert.ok(Number(fits[1]) > 0 && Number(fits[1]) < dims[0] * dims[1] * dims[2], plan.message);
});

test('an iterative method is cancelled between two iterations; every method reaches the phantom truth', async () => {
  const controller = new AbortController();
  let seen = 0;
  let total = 0;
  await assert.rejects(
    tessera.invert({ keepInputs: true, field: phantom.field, mask: phantom.mask, geometry, method: 'tv', signal: controller.signal, onProgress: (p) => ((total = p.total), ++seen === 2 && controller.abort()) }),
    (e) => e.name === 'AbortError',
  );
  // The cancel crosses to the driver worker by message; until it arrives the worker goes on stepping (a step of this
  // 48x48x40 TV takes about a millisecond, and the progress messages queue behind it on a fast machine), so the run must
  // stop within a tenth of its steps, not at the next one.
  assert.ok(total > 20 && seen <= total / 10, `stopped after ${seen} of ${total} steps`);
  const short = { tv: { maxIterations: 30 }, rts: { maxIterations: 10 }, ilsqr: { maxIterations: 10 }, ndi: { maxIterations: 30 }, medi: { maxIterations: 2, cgMaxIterations: 10 } };
  const magnitude = phantom.chi.map((c) => 1 - 2 * Math.abs(c)); // MEDI's edges: the compartments' contrast
  const schema = await tessera.schema();
  for (const method of schema.find((o) => o.name === 'method').choices) {
    const out = await tessera.invert({ keepInputs: true, field: phantom.field, mask: phantom.mask, geometry, method, ...(short[method] && { [method]: short[method] }), magnitude: needsMagnitude(method) ? magnitude : undefined });
    const rr = r(out.chi.data, phantom.chi, phantom.mask);
    assert.ok(rr > floorR(method), `${method}: r ${rr}`);
  }
});

test('tessera-qsm invert --method M for every method on a NIfTI pair; a bad parameter is refused by name', async () => {
  const { spawnSync } = await import('node:child_process');
  const fs = await import('node:fs');
  const os = await import('node:os');
  const path = await import('node:path');
  const { writeNifti, readNifti } = await import('./index.js');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-methods-'));
  const cli = path.join(path.dirname(new URL(import.meta.url).pathname), 'cli.js');
  try {
    const like = { dims: geometry.dims, voxelMm: geometry.voxelMm };
    fs.writeFileSync(path.join(dir, 'f.nii'), await writeNifti(phantom.field, like));
    fs.writeFileSync(path.join(dir, 'm.nii'), await writeNifti(Float32Array.from(phantom.mask), like));
    fs.writeFileSync(path.join(dir, 'mag.nii'), await writeNifti(phantom.chi.map((c) => 1 - 2 * Math.abs(c)), like));
    const short = { tv: ['maxIterations=30'], rts: ['maxIterations=10'], ilsqr: ['maxIterations=10'], ndi: ['maxIterations=30'], medi: ['maxIterations=2', 'cgMaxIterations=10'] };
    const schema = await tessera.schema();
    for (const method of schema.find((o) => o.name === 'method').choices) {
      const args = [cli, 'invert', '--field', 'f.nii', '--mask', 'm.nii', '--method', method, '--out', `${method}.nii.gz`, '--quiet'];
      for (const p of short[method] ?? []) args.push('--param', p);
      if (needsMagnitude(method)) args.push('--magnitude', 'mag.nii');
      const run = spawnSync(process.execPath, args, { cwd: dir, encoding: 'utf8', timeout: 120000 });
      assert.equal(run.status, 0, `${method}: ${run.stderr}`);
      const chi = readNifti(new Uint8Array(fs.readFileSync(path.join(dir, `${method}.nii.gz`)))).data;
      assert.ok(r(chi, phantom.chi, phantom.mask) > floorR(method), method);
    }
    const bad = spawnSync(process.execPath, [cli, 'invert', '--field', 'f.nii', '--mask', 'm.nii', '--method', 'tv', '--param', 'lambda=5', '--out', 'x.nii'], { cwd: dir, encoding: 'utf8' });
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr, /tv\.lambda must be in \(0, 1\]/);
    const noMag = spawnSync(process.execPath, [cli, 'invert', '--field', 'f.nii', '--mask', 'm.nii', '--method', 'medi', '--out', 'x.nii'], { cwd: dir, encoding: 'utf8' });
    assert.notEqual(noMag.status, 0);
    assert.match(noMag.stderr, /MEDI needs the magnitude/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// The head-size figure (160×192×144) is bench/memory-plans.js's RTS row; here a head of a quarter of its voxels, whose
// plan is still five times the 16 MiB a fresh module starts with: the heap must grow to hold the run.
test('RTS on a 96×112×96 head in a fresh runtime stays within its planned module heap, a plan several times the module\'s initial heap', { timeout: 180000 }, async () => {
  const head = { dims: [96, 112, 96], voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  const { field, mask } = await tessera.phantom({ geometry: head });
  const fresh = await createTessera({ workers: 1, hardwareThreads: 2 });
  try {
    const initial = (await fresh.status()).moduleHeapBytes;
    const out = await fresh.invert({ field, mask, geometry: head, method: 'rts' });
    const { moduleHeapVsPlan, moduleHeapBytes } = out.report.memory;
    assert.ok(moduleHeapBytes > 4 * initial, `the run grew the module heap from ${initial} B to ${moduleHeapBytes} B only`);
    assert.ok(moduleHeapVsPlan <= 1, `module heap ${moduleHeapBytes} B is ${moduleHeapVsPlan} of its plan`);
  } finally {
    await fresh.terminate();
  }
});
