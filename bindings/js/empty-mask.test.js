// An all-zero mask is refused by the C++ core (plan_inversion for a plan, plan_of_choice for a run), so the API,
// the CLI and the page refuse it alike instead of writing an all-zero χ with exit 0.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTessera, writeNifti } from './index.js';
import { convStack, prng } from '../../tests/js/networks.js';

const CLI = fileURLToPath(new URL('./cli.js', import.meta.url));
const DIMS = [20, 18, 16];
const N = DIMS[0] * DIMS[1] * DIMS[2];
const geometry = { dims: DIMS, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
const EMPTY = /the mask holds no voxel: all 5760 values of the 20×18×16 mask are 0.*check the mask file.*threshold.*belongs to this field/;

let tessera;
let dir;
const rnd = prng(5);
const field = new Float32Array(N).map(() => rnd() - 0.5);
const empty = new Uint8Array(N);
const full = new Uint8Array(N).fill(1);
const spec = { divisor: 1, bytesPerVoxel: 1100 }; // declared: a spec without it is calibrated first (calibrate.test.js)

before(async () => {
  tessera = await createTessera({ workers: 1 });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-empty-mask-'));
  const like = { dims: DIMS, voxelMm: [1, 1, 1] };
  fs.writeFileSync(path.join(dir, 'field.nii'), await writeNifti(field, like));
  fs.writeFileSync(path.join(dir, 'empty.nii'), await writeNifti(new Float32Array(N), like));
  fs.writeFileSync(path.join(dir, 'spec.json'), JSON.stringify(spec));
  fs.writeFileSync(path.join(dir, 'net.onnx'), convStack({ layers: 1, seed: 2 }));
});
after(async () => {
  await tessera?.terminate();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const refused = (e) => {
  assert.equal(e.code, 'InvalidArgument', e.message);
  assert.match(e.message, EMPTY);
  return true;
};

test('API: plan and invert refuse an all-zero mask (InvalidArgument, with the fix); a plan made on a real mask is refused on it too', async () => {
  const weights = convStack({ layers: 1, seed: 2 });
  await assert.rejects(tessera.plan({ field, mask: empty, geometry, spec }), refused);
  await assert.rejects(tessera.plan({ field, mask: empty, geometry, spec, whole: true }), refused);
  await assert.rejects(tessera.invert({ keepInputs: true, field, mask: empty, geometry, spec, weights, tile: { core: 8, halo: 1 } }), refused);
  // The run path: a plan made for a full mask, handed back with the empty one (prepare_run → plan_of_choice).
  const plan = await tessera.plan({ field, mask: full, geometry, spec, tile: { core: 8, halo: 1 } });
  assert.equal(plan.feasible, true, plan.message);
  await assert.rejects(tessera.invert({ keepInputs: true, field, mask: empty, geometry, spec, weights, tile: { core: 8, halo: 1 }, plan }), refused);
  // One voxel is a mask: the same request runs.
  const one = new Uint8Array(N);
  one[N >> 1] = 1;
  const { chi } = await tessera.invert({ keepInputs: true, field, mask: one, geometry, spec, weights, tile: { core: 8, halo: 1 } });
  assert.notEqual(chi.data[N >> 1], 0);
});

test('CLI: invert and plan with an all-zero mask exit 1 with the message and write nothing', () => {
  const common = ['--field', 'field.nii', '--mask', 'empty.nii', '--spec', 'spec.json'];
  const inv = spawnSync(process.execPath, [CLI, 'invert', ...common, '--weights', 'net.onnx', '--out', 'chi.nii', '--report', 'r.json'], { cwd: dir, encoding: 'utf8' });
  assert.equal(inv.status, 1, inv.stderr);
  assert.match(inv.stderr, /^error: the mask holds no voxel/m);
  assert.match(inv.stderr, EMPTY);
  assert.doesNotMatch(inv.stderr, /\n\s+at .+:\d+:\d+/);
  assert.deepEqual(fs.readdirSync(dir).filter((n) => /chi|r\.json|partial/.test(n)), []);
  const plan = spawnSync(process.execPath, [CLI, 'plan', ...common], { cwd: dir, encoding: 'utf8' });
  assert.equal(plan.status, 1, plan.stderr);
  assert.match(plan.stderr, EMPTY);
});
