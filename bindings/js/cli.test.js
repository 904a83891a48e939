// The tessera-qsm command line end to end: the CLI runs as a child process (plain `node cli.js`, as the
// shebang runs it) on NIfTI files and ONNX networks built here.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTessera, readNifti, writeNifti } from './index.js';
import { convStack, convStackReference, unet, prng } from '../../tests/js/networks.js';

const CLI = fileURLToPath(new URL('./cli.js', import.meta.url));
const GAMMA_BAR = 42.577478; // Hz per ppm per tesla
const DIMS = [24, 20, 16];
const N = DIMS[0] * DIMS[1] * DIMS[2];
const MARGIN = 2; // mask: a box MARGIN voxels inside the faces
// An oblique affine (rotation about x, anisotropic voxels, offset): the output must keep it.
const C = Math.cos(0.2), S = Math.sin(0.2);
const AFFINE = [1.2, 0, 0, -14, 0, 1.0 * C, -0.9 * S, -10, 0, 1.0 * S, 0.9 * C, -7, 0, 0, 0, 1];
const SPEC = { divisor: 1, inputMean: 0.01, inputStd: 0.05, outputMean: 0.002, outputStd: 0.5 };

let dir;
let field; // Float32Array, ppm, x fastest
let mask;
const f = (name) => path.join(dir, name);

function run(args, { onStderr } = {}) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => {
      stderr += d;
      onStderr?.(stderr, child);
    });
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

function noStack(r) {
  assert.doesNotMatch(r.stderr, /\n\s+at .+:\d+:\d+/, `stack trace on stderr:\n${r.stderr}`);
}

// A plain Uint8Array copy (readNifti misreads node Buffers, whose slice() is a view).
const bytes = (p) => new Uint8Array(fs.readFileSync(p));

const idx = (x, y, z) => x + DIMS[0] * (y + DIMS[1] * z);

// χ the 1-layer conv stack gives with SPEC, computed in plain JS (ONNX layout [X,Y,Z], z fastest).
function expectedChi(fieldPpm) {
  const [X, Y, Z] = DIMS;
  const input = new Float32Array(N);
  for (let z = 0; z < Z; z++)
    for (let y = 0; y < Y; y++)
      for (let x = 0; x < X; x++) input[(x * Y + y) * Z + z] = (fieldPpm[idx(x, y, z)] - SPEC.inputMean) / SPEC.inputStd;
  const out = convStackReference(input, DIMS, { layers: 1, seed: 4 });
  const chi = new Float32Array(N);
  for (let z = 0; z < Z; z++)
    for (let y = 0; y < Y; y++) for (let x = 0; x < X; x++) chi[idx(x, y, z)] = SPEC.outputStd * out[(x * Y + y) * Z + z] + SPEC.outputMean;
  return chi;
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-cli-'));
  const rnd = prng(21);
  field = new Float32Array(N).map(() => (rnd() * 2 - 1) * 0.1);
  mask = new Float32Array(N);
  for (let z = MARGIN; z < DIMS[2] - MARGIN; z++)
    for (let y = MARGIN; y < DIMS[1] - MARGIN; y++) for (let x = MARGIN; x < DIMS[0] - MARGIN; x++) mask[idx(x, y, z)] = 1;
  const like = { dims: DIMS, voxelMm: [1.2, 1.0, 0.9], affine: AFFINE };
  fs.writeFileSync(f('field.nii.gz'), await writeNifti(field, like, { gzip: true }));
  fs.writeFileSync(f('mask.nii'), await writeNifti(mask, like));
  const hz = field.map((v) => v * GAMMA_BAR * 3);
  fs.writeFileSync(f('field-hz.nii'), await writeNifti(hz, like));
  fs.writeFileSync(f('mask-small.nii'), await writeNifti(new Float32Array(24 * 20 * 15).fill(1), { dims: [24, 20, 15], voxelMm: [1, 1, 1] }));
  fs.writeFileSync(f('net.onnx'), convStack({ layers: 1, seed: 4 }));
  fs.writeFileSync(f('spec.json'), JSON.stringify(SPEC));
  fs.writeFileSync(f('spec-bad.json'), JSON.stringify({ divisor: 1, inputSTD: 2 }));
  fs.writeFileSync(f('spec-nan.json'), JSON.stringify({ divisor: '8' }));
  fs.writeFileSync(f('spec8.json'), JSON.stringify({ divisor: 8 }));
  fs.writeFileSync(f('wrong.onnx'), convStack({ layers: 1 }));
});

after(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('invert --spec, tiled: χ matches the normalised network computed in JS, header and affine kept', async () => {
  const r = await run(['invert', '--field', 'field.nii.gz', '--mask', 'mask.nii', '--spec', 'spec.json', '--weights', 'net.onnx',
    '--core', '8', '--halo', '1', '--workers', '2', '--out', 'chi.nii.gz']);
  assert.equal(r.code, 0, r.stderr);
  noStack(r);
  assert.match(r.stderr, /progress 100%\s+\d+\/\d+ tiles/);
  assert.equal((r.stderr.match(/^progress /gm) ?? []).length <= 10, true);
  const inNii = readNifti(bytes(f('field.nii.gz')));
  const out = readNifti(bytes(f('chi.nii.gz')));
  assert.deepEqual(out.dims, DIMS);
  assert.deepEqual(out.affine, inNii.affine);
  assert.deepEqual(out.voxelMm, inNii.voxelMm);
  assert.equal(out.datatype, 16);
  const want = expectedChi(field);
  let maxDiff = 0;
  let maxAbs = 0;
  let compared = 0;
  for (let z = 0; z < DIMS[2]; z++)
    for (let y = 0; y < DIMS[1]; y++)
      for (let x = 0; x < DIMS[0]; x++) {
        const i = idx(x, y, z);
        if (!mask[i]) {
          assert.equal(out.data[i], 0, `outside the mask at ${x},${y},${z}`);
          continue;
        }
        // Voxels whose 3×3×3 neighbourhood lies inside the mask: no dependence on padding or masking.
        const m = MARGIN + 1;
        if (x < m || y < m || z < m || x >= DIMS[0] - m || y >= DIMS[1] - m || z >= DIMS[2] - m) continue;
        maxDiff = Math.max(maxDiff, Math.abs(out.data[i] - want[i]));
        maxAbs = Math.max(maxAbs, Math.abs(want[i]));
        compared++;
      }
  assert.ok(compared > 1000 && maxAbs > 0.1, `${compared} voxels, max |χ| ${maxAbs}`);
  assert.ok(maxDiff <= 1e-5 * maxAbs, `max |cli - reference| = ${maxDiff} (max |χ| ${maxAbs})`);
});

test('invert --whole --report equals the JS API run exactly; the report has tiles, plan, command, versions', async () => {
  const r = await run(['invert', '--field', 'field.nii.gz', '--mask', 'mask.nii', '--spec', 'spec.json', '--weights', 'net.onnx',
    '--whole', '--out', 'chi-whole.nii', '--report', 'report.json', '--quiet']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stderr, '', '--quiet prints nothing');
  const out = readNifti(bytes(f('chi-whole.nii')));
  const tessera = await createTessera({ workers: 1 });
  try {
    const geometry = { dims: DIMS, voxelMm: out.voxelMm, b0Dir: readNifti(bytes(f('field.nii.gz'))).b0Dir };
    const api = await tessera.invert({ field, mask: Uint8Array.from(mask), geometry, spec: SPEC, weights: bytes(f('net.onnx')), whole: true });
    assert.deepEqual(out.data, api.chi);
  } finally {
    await tessera.terminate();
  }
  const report = JSON.parse(fs.readFileSync(f('report.json'), 'utf8'));
  assert.equal(report.tilesRun, 1);
  assert.equal(report.tilesTotal, 1);
  assert.equal(report.plan.wholeVolume, true);
  assert.ok(report.plan.feasible);
  assert.deepEqual(report.command.slice(0, 2), ['tessera-qsm', 'invert']);
  assert.ok(report.command.includes('--whole'));
  assert.equal(typeof report.versions.tessera, 'string');
  assert.equal(report.versions.node, process.versions.node);
  assert.ok(report.totalWallSeconds > 0 && report.wallSeconds > 0);
  assert.deepEqual(report.network.spec, { ...SPEC, bytesPerVoxel: 1100, fixedBytes: 0 });
  assert.equal(report.weights[0].sha256.length, 64);
  assert.deepEqual(report.inputs.field.dims, DIMS);
  assert.equal(report.inputs.mask.voxelsInside, mask.reduce((a, b) => a + b, 0));
});

test('a field in Hz with --units hz --b0 3 gives the χ of the ppm field; hz without --b0 is a usage error', async () => {
  const common = ['--mask', 'mask.nii', '--spec', 'spec.json', '--weights', 'net.onnx', '--whole', '--quiet'];
  const [ppm, hz, noB0] = await Promise.all([
    run(['invert', '--field', 'field.nii.gz', ...common, '--out', 'chi-ppm.nii']),
    run(['invert', '--field', 'field-hz.nii', '--units', 'hz', '--b0', '3', ...common, '--out', 'chi-hz.nii']),
    run(['invert', '--field', 'field-hz.nii', '--units', 'hz', ...common, '--out', 'chi-x.nii']),
  ]);
  assert.equal(ppm.code, 0, ppm.stderr);
  assert.equal(hz.code, 0, hz.stderr);
  const a = readNifti(bytes(f('chi-ppm.nii'))).data;
  const b = readNifti(bytes(f('chi-hz.nii'))).data;
  let maxDiff = 0;
  let maxAbs = 0;
  for (let i = 0; i < N; i++) {
    maxDiff = Math.max(maxDiff, Math.abs(a[i] - b[i]));
    maxAbs = Math.max(maxAbs, Math.abs(a[i]));
  }
  assert.ok(maxAbs > 0.1 && maxDiff <= 1e-5 * maxAbs, `max |hz - ppm| = ${maxDiff} (max |χ| ${maxAbs})`);
  assert.equal(noB0.code, 2);
  assert.match(noB0.stderr, /--units hz needs --b0/);
  assert.ok(!fs.existsSync(f('chi-x.nii')));
});

test('plan prints the budget table; --json prints the plan', async () => {
  const [table, json] = await Promise.all([
    run(['plan', '--field', 'field.nii.gz', '--mask', 'mask.nii', '--spec', 'spec.json', '--core', '8', '--halo', '1']),
    run(['plan', '--field', 'field.nii.gz', '--mask', 'mask.nii', '--spec', 'spec.json', '--core', '2', '--halo', '1', '--json']),
  ]);
  assert.equal(table.code, 0, table.stderr);
  for (const re of [/plan: feasible/, /patch edge\s+10 \(10×10×10\)/, /MB per tile\s+1\.1 MB/, /tiles in flight\s+\d/,
    /tiles\s+\d+ total, \d+ active, \d+ skipped/, /activation memory\s+.*of the 1\.50 GB budget/, /peak memory\s+.*of the 4\.29 GB heap ceiling/,
    /single-patch limit 2\.50 GB/]) {
    assert.match(table.stdout, re);
  }
  assert.equal(json.code, 0, json.stderr);
  const plan = JSON.parse(json.stdout);
  assert.equal(plan.feasible, true);
  assert.equal(plan.patchEdge, 4);
  assert.equal(plan.tilesActive + plan.tilesSkipped, plan.tilesTotal);
  assert.ok(plan.tilesSkipped > 0, 'tiles outside the mask are skipped');
});

test('plan of core 128 halo 8 divisor 8 on 200×200×150 is refused with the planner advice (exit 2)', async () => {
  fs.writeFileSync(f('big.nii.gz'), await writeNifti(new Float32Array(200 * 200 * 150), { dims: [200, 200, 150], voxelMm: [1, 1, 1] }, { gzip: true }));
  const r = await run(['plan', '--field', 'big.nii.gz', '--spec', 'spec8.json', '--core', '128', '--halo', '8']);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stdout, /REFUSED/);
  assert.match(r.stdout, /largest core that fits is 112/);
  assert.match(r.stdout, /patch edge\s+144/);
  noStack(r);
});

test('input errors: mask dims mismatch, unknown and non-numeric spec keys, wrong registry weights (exit 1)', async () => {
  const base = ['invert', '--field', 'field.nii.gz', '--weights', 'net.onnx', '--out', 'never.nii', '--quiet'];
  const [dims, badKey, nan, weights, missing] = await Promise.all([
    run([...base, '--mask', 'mask-small.nii', '--spec', 'spec.json']),
    run([...base, '--mask', 'mask.nii', '--spec', 'spec-bad.json']),
    run([...base, '--mask', 'mask.nii', '--spec', 'spec-nan.json']),
    run(['invert', '--field', 'field.nii.gz', '--mask', 'mask.nii', '--model', 'xqsm', '--weights', 'wrong.onnx', '--out', 'never.nii', '--quiet']),
    run([...base, '--mask', 'nope.nii', '--spec', 'spec.json']),
  ]);
  assert.equal(dims.code, 1, dims.stderr);
  assert.match(dims.stderr, /^error: the mask mask-small\.nii has dims 24×20×15 but the field field\.nii\.gz has 24×20×16: field and mask must have the same dims/);
  assert.equal(badKey.code, 1, badKey.stderr);
  assert.match(badKey.stderr, /^error: the network spec spec-bad\.json has an unknown key 'inputSTD' \(allowed: divisor, bytesPerVoxel/);
  assert.equal(nan.code, 1, nan.stderr);
  assert.match(nan.stderr, /'divisor' must be a finite number, got "8"/);
  assert.equal(weights.code, 1, weights.stderr);
  assert.match(weights.stderr, /^error: WeightsMismatch: .*wrong\.onnx have \d+ bytes, expected 20901826 bytes/);
  assert.equal(missing.code, 1, missing.stderr);
  assert.match(missing.stderr, /^error: could not read the mask nope\.nii: no such file/);
  for (const r of [dims, badKey, nan, weights, missing]) noStack(r);
  assert.ok(!fs.existsSync(f('never.nii')));
});

test('usage errors exit 2 with a clear message; --help, models and the shebang work', async () => {
  const [unknown, noOut, wholeCore, badCore, noCmd, help, models] = await Promise.all([
    run(['invert', '--field', 'field.nii.gz', '--bogus']),
    run(['invert', '--field', 'field.nii.gz', '--mask', 'mask.nii', '--spec', 'spec.json', '--weights', 'net.onnx']),
    run(['plan', '--field', 'field.nii.gz', '--spec', 'spec.json', '--whole', '--core', '8']),
    run(['plan', '--field', 'field.nii.gz', '--spec', 'spec.json', '--core', '8.5']),
    run(['frobnicate']),
    run(['invert', '--help']),
    run(['models']),
  ]);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /^error: unknown option --bogus for `tessera-qsm invert`/);
  assert.equal(noOut.code, 2);
  assert.match(noOut.stderr, /--out is required/);
  assert.equal(wholeCore.code, 2);
  assert.match(wholeCore.stderr, /--whole .* no --core or --halo/);
  assert.equal(badCore.code, 2);
  assert.match(badCore.stderr, /--core must be a whole number >= 1, got '8\.5'/);
  assert.equal(noCmd.code, 2);
  assert.match(noCmd.stderr, /unknown command 'frobnicate'/);
  for (const r of [unknown, noOut, wholeCore, badCore, noCmd]) noStack(r);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /--spec FILE/);
  assert.equal(models.code, 0, models.stderr);
  assert.match(models.stdout, /^id\s+kind\s+divisor\s+memory per worker/);
  // The listing shows the registry's figures (whatever they are), measured or provisional.
  assert.match(models.stdout, /\nxqsm\s+field-to-chi\s+8\s+(\d+(\.\d+)? MB \+ )?\d+ B\/voxel \((measured|provisional)\)\s+xqsm\.onnx 20\.9 MB/);
  assert.match(models.stdout, /\nnextqsm\s+.*nextqsm-bf\.onnx .* \+ nextqsm-vjp\.onnx/);
  // Executable, with a working shebang.
  assert.ok(fs.statSync(CLI).mode & 0o111);
  assert.match(execFileSync(CLI, ['--version'], { encoding: 'utf8' }), /^tessera-qsm \d+\.\d+\.\d+/);
});

test('SIGINT mid-run cancels: "cancelled", exit 130, no output file', async () => {
  const dims = [48, 48, 32];
  const rnd = prng(5);
  const like = { dims, voxelMm: [1, 1, 1] };
  fs.writeFileSync(f('slow-field.nii'), await writeNifti(new Float32Array(48 * 48 * 32).map(() => rnd() - 0.5), like));
  fs.writeFileSync(f('slow-mask.nii'), await writeNifti(new Float32Array(48 * 48 * 32).fill(1), like));
  fs.writeFileSync(f('unet.onnx'), unet({ base: 4 }));
  fs.writeFileSync(f('unet.json'), JSON.stringify({ divisor: 8 }));
  let sent = false;
  const r = await run(
    ['invert', '--field', 'slow-field.nii', '--mask', 'slow-mask.nii', '--spec', 'unet.json', '--weights', 'unet.onnx',
      '--core', '8', '--halo', '4', '--workers', '1', '--out', 'slow-chi.nii'],
    {
      onStderr: (text, child) => {
        if (!sent && /^progress\s+10%/m.test(text)) {
          sent = true;
          child.kill('SIGINT');
        }
      },
    },
  );
  assert.ok(sent, `no progress line before the end:\n${r.stderr}`);
  assert.equal(r.code, 130, r.stderr);
  assert.match(r.stderr, /\ncancelled\n$/);
  assert.doesNotMatch(r.stderr, /progress 100%/);
  assert.ok(!fs.existsSync(f('slow-chi.nii')));
  assert.deepEqual(fs.readdirSync(dir).filter((n) => n.includes('partial')), []);
});
