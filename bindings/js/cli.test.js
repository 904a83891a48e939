// The tessera-qsm command line end to end: the CLI runs as a child process (plain `node cli.js`, as the
// shebang runs it) on NIfTI files and ONNX networks built here. The phase networks' commands: cli-phase.test.js.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTessera, readNifti, writeNifti, GAMMA_BAR_MHZ_PER_T } from './index.js';
import { CLI, runCli } from '../../tests/js/run-cli.js';
import { convStack, convStackReference, unet, prng, twoChannel, memoryHog } from '../../tests/js/networks.js';
import { baseFiles, headerCases, gzipCases } from '../../tests/js/nifti-fuzz.js';

const DIMS = [24, 20, 16];
const N = DIMS[0] * DIMS[1] * DIMS[2];
const MARGIN = 2; // mask: a box MARGIN voxels inside the faces
// An oblique affine (rotation about x, anisotropic voxels, offset): the output must keep it.
const C = Math.cos(0.2), S = Math.sin(0.2);
const AFFINE = [1.2, 0, 0, -14, 0, 1.0 * C, -0.9 * S, -10, 0, 1.0 * S, 0.9 * C, -7, 0, 0, 0, 1];
// Declared cost (a spec without bytesPerVoxel is calibrated first: the calibrate tests below).
const SPEC = { divisor: 1, bytesPerVoxel: 1100, inputMean: 0.01, inputStd: 0.05, outputMean: 0.002, outputStd: 0.5 };

let dir;
let field; // Float32Array, ppm, x fastest
let mask;
const f = (name) => path.join(dir, name);

const run = (args, { onStderr } = {}) => runCli(args, { cwd: dir, onStderr });

/** Memoises fn: the first call runs it, later calls get its promise (work several tests check, done once). */
const once = (fn) => {
  let p;
  return () => (p ??= fn());
};

// One API runtime for every test that checks the CLI against the JS API (each createTessera is a runtime start).
let apiStarted;
const apiRuntime = () => (apiStarted ??= createTessera({ workers: 1 }));

/** `invert --whole` on the oblique field, χ and report written: the run two tests check (report; χ of the Hz field). */
const wholeRun = once(() => run(['invert', '--field', 'field.nii.gz', '--mask', 'mask.nii', '--spec', 'spec.json', '--weights', 'net.onnx',
  '--whole', '--out', 'chi-whole.nii', '--report', 'report.json', '--quiet']));

/** The same run through the JS API (the header's voxel size and B0 direction; b0Align as given, default auto). */
const apiWhole = once(async () => {
  const { voxelMm, b0Dir } = readNifti(bytes(f('field.nii.gz')));
  const tessera = await apiRuntime();
  return tessera.invert({ keepInputs: true, field, mask: Uint8Array.from(mask), geometry: { dims: DIMS, voxelMm, b0Dir }, spec: SPEC, weights: bytes(f('net.onnx')), whole: true });
});

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
  const hz = field.map((v) => v * GAMMA_BAR_MHZ_PER_T * 3);
  fs.writeFileSync(f('field-hz.nii'), await writeNifti(hz, like));
  fs.writeFileSync(f('mask-small.nii'), await writeNifti(new Float32Array(24 * 20 * 15).fill(1), { dims: [24, 20, 15], voxelMm: [1, 1, 1] }));
  fs.writeFileSync(f('net.onnx'), convStack({ layers: 1, seed: 4 }));
  fs.writeFileSync(f('spec.json'), JSON.stringify(SPEC));
  fs.writeFileSync(f('spec-bad.json'), JSON.stringify({ divisor: 1, inputSTD: 2 }));
  fs.writeFileSync(f('spec-nan.json'), JSON.stringify({ divisor: '8' }));
  fs.writeFileSync(f('spec8.json'), JSON.stringify({ divisor: 8 }));
  fs.writeFileSync(f('wrong.onnx'), convStack({ layers: 1 }));
});

after(async () => {
  await (await apiStarted)?.terminate();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('invert --spec, tiled: χ matches the normalised network computed in JS, header and affine kept', async () => {
  // The oblique affine puts B0 11.5° off the third axis: --b0-align off runs the network on the field as it is, whatever
  // the threshold.
  const r = await run(['invert', '--field', 'field.nii.gz', '--mask', 'mask.nii', '--spec', 'spec.json', '--weights', 'net.onnx',
    '--core', '8', '--halo', '1', '--workers', '2', '--b0-align', 'off', '--out', 'chi.nii.gz']);
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

test('NaN outside the mask is set to 0 (the shared input loader): the run equals the one on the zeroed field', async () => {
  const like = { dims: DIMS, voxelMm: [1.2, 1.0, 0.9], affine: AFFINE };
  const withNaN = field.slice();
  const zeroed = field.slice();
  for (const i of [idx(0, 0, 0), idx(DIMS[0] - 1, DIMS[1] - 1, DIMS[2] - 1), idx(1, 5, 7)]) {
    assert.equal(mask[i], 0);
    withNaN[i] = NaN;
    zeroed[i] = 0;
  }
  fs.writeFileSync(f('field-nan.nii'), await writeNifti(withNaN, like));
  const a = await run(['invert', '--field', 'field-nan.nii', '--mask', 'mask.nii', '--spec', 'spec.json', '--weights', 'net.onnx', '--whole', '--out', 'chi-nan.nii', '--quiet']);
  assert.equal(a.code, 0, a.stderr);
  // The run on the zeroed field: the JS API's (the CLI's --whole run is the API's, bit for bit: the --report test).
  const { voxelMm, b0Dir } = readNifti(bytes(f('field.nii.gz')));
  const b = await (await apiRuntime()).invert({ keepInputs: true, field: zeroed, mask: Uint8Array.from(mask), geometry: { dims: DIMS, voxelMm, b0Dir }, spec: SPEC, weights: bytes(f('net.onnx')), whole: true });
  assert.deepEqual(readNifti(bytes(f('chi-nan.nii'))).data, b.chi.data);
});

test('invert --whole --report equals the JS API run exactly; the report has tiles, plan, command, versions', async () => {
  const r = await wholeRun();
  assert.equal(r.code, 0, r.stderr);
  // --quiet prints no progress; only a heap over its plan is said (here: 1100 B/voxel and no fixed part declared, under
  // the 16 MiB an ONNX Runtime worker starts with).
  const rep = JSON.parse(fs.readFileSync(f('report.json'), 'utf8'));
  assert.equal(r.stderr, rep.memory.warning ? `warning: ${rep.memory.warning}\n` : '', '--quiet prints nothing else');
  const out = readNifti(bytes(f('chi-whole.nii')));
  assert.deepEqual(out.voxelMm, readNifti(bytes(f('field.nii.gz'))).voxelMm);
  assert.deepEqual(out.data, (await apiWhole()).chi.data);
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
  assert.deepEqual(report.network.spec, { ...SPEC, fixedBytes: 0 });
  assert.deepEqual([report.plan.cost.source, report.memory.cost.bytesPerVoxel], ['declared', 1100]);
  assert.equal(report.weights[0].sha256.length, 64);
  assert.deepEqual(report.inputs.field.dims, DIMS);
  assert.equal(report.inputs.mask.voxelsInside, mask.reduce((a, b) => a + b, 0));
});

test('--b0-align: the header B0 11.5° off the third axis warns by default (under the 12° threshold: run as it is), on resamples and says so, off warns; a bad value is a usage error', async () => {
  const b0 = readNifti(bytes(f('field.nii.gz'))).b0Dir;
  const tilt = (Math.atan2(Math.hypot(b0[0], b0[1]), Math.abs(b0[2])) * 180) / Math.PI;
  assert.ok(Math.abs(tilt - 11.46) < 0.01, `the fixture's tilt ${tilt}`);
  const args = ['--field', 'field.nii.gz', '--mask', 'mask.nii', '--spec', 'spec.json', '--weights', 'net.onnx', '--whole'];
  const plan = await run(['plan', ...args]);
  assert.equal(plan.code, 0, plan.stderr);
  assert.match(plan.stdout, /B0\s+B0 is 11\.5° off the volume's third axis: run as it is \(b0Align auto resamples above 12\.0°/);
  assert.match(plan.stdout, /warning\s+B0 is 11\.5° off .*run as it is, so χ is approximate/);
  const onPlan = await run(['plan', ...args, '--b0-align', 'on']);
  assert.match(onPlan.stdout, /B0\s+B0 is 11\.5° off the volume's third axis: the field is resampled to a B0-aligned grid \d+×\d+×\d+/);
  const json = JSON.parse((await run(['plan', ...args, '--b0-align', 'off', '--json'])).stdout);
  assert.equal(json.b0Align.resampled, false);
  assert.match(json.warning, /not resampled because b0Align is off/);

  const on = await run(['invert', ...args, '--b0-align', 'ON', '--out', 'chi-b0on.nii', '--report', 'report-b0on.json']);
  assert.equal(on.code, 0, on.stderr);
  assert.match(on.stderr, /B0: B0 is 11\.5° off .*resampled to a B0-aligned grid/);
  assert.match(on.stderr, /warning: B0 is 11\.5° off .*Tessera resampled the field to a B0-aligned grid/);
  const report = JSON.parse(fs.readFileSync(f('report-b0on.json'), 'utf8'));
  assert.equal(report.b0Align.resampled, true);
  assert.equal(report.options.b0Align, 'on');
  const auto = await run(['invert', ...args, '--out', 'chi-b0auto.nii']);
  assert.equal(auto.code, 0, auto.stderr);
  assert.match(auto.stderr, /warning: B0 is 11\.5° off .*run as it is/);
  // The CLI's χ is the API's, for both settings (auto: the API's default run).
  const tessera = await apiRuntime();
  const geometry = { dims: DIMS, voxelMm: readNifti(bytes(f('field.nii.gz'))).voxelMm, b0Dir: b0 };
  const apiOn = await tessera.invert({ keepInputs: true, field, mask: Uint8Array.from(mask), geometry, spec: SPEC, weights: bytes(f('net.onnx')), whole: true, b0Align: 'on' });
  assert.deepEqual(readNifti(bytes(f('chi-b0on.nii'))).data, apiOn.chi.data, 'chi-b0on.nii');
  assert.deepEqual(readNifti(bytes(f('chi-b0auto.nii'))).data, (await apiWhole()).chi.data, 'chi-b0auto.nii');
  assert.notDeepEqual(readNifti(bytes(f('chi-b0on.nii'))).data, readNifti(bytes(f('chi-b0auto.nii'))).data);
  const bad = await run(['invert', ...args, '--b0-align', 'sideways', '--out', 'x.nii']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--b0-align must be auto, on, off, got 'sideways'/);
  noStack(bad);
});

test('a field in Hz with --units hz --b0 3 gives the χ of the ppm field; hz without --b0 is a usage error', async () => {
  const common = ['--mask', 'mask.nii', '--spec', 'spec.json', '--weights', 'net.onnx', '--whole', '--quiet'];
  // The ppm run: the --whole run of the field in ppm (the report test's).
  const [ppm, hz, noB0] = await Promise.all([
    wholeRun(),
    run(['invert', '--field', 'field-hz.nii', '--units', 'hz', '--b0', '3', ...common, '--out', 'chi-hz.nii']),
    run(['invert', '--field', 'field-hz.nii', '--units', 'hz', ...common, '--out', 'chi-x.nii']),
  ]);
  assert.equal(ppm.code, 0, ppm.stderr);
  assert.equal(hz.code, 0, hz.stderr);
  const a = readNifti(bytes(f('chi-whole.nii'))).data;
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

test('plan --measure-speed times the network here and says the estimate uses it; without weights it is a usage error', async () => {
  // One probe at a time: two probes side by side time each other's load.
  const table = await run(['plan', '--field', 'field.nii.gz', '--mask', 'mask.nii', '--spec', 'spec.json', '--weights', 'net.onnx', '--measure-speed', '--quality', 'fast']);
  const json = await run(['plan', '--field', 'field.nii.gz', '--mask', 'mask.nii', '--spec', 'spec.json', '--weights', 'net.onnx', '--measure-speed', '--quality', 'fast', '--json']);
  const none = await run(['plan', '--field', 'field.nii.gz', '--mask', 'mask.nii', '--spec', 'spec.json', '--measure-speed']);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /estimated \d+ s.*\(time from this machine's measured speed \(--measure-speed\)\)/);
  assert.equal(json.code, 0, json.stderr);
  const plan = JSON.parse(json.stdout);
  assert.equal(plan.estimateSource, 'measured');
  assert.ok(plan.estimatedSeconds > 0);
  assert.equal(none.code, 2);
  assert.match(none.stderr, /--measure-speed with --spec need --weights FILE/);
});

test('receptive-field --probe --json writes the reach that plan and invert take as --context: the same plan and χ as --probe, its weights named; other weights, not JSON, no profile, a bad profile or --probe beside it are refused', { timeout: 120000 }, async () => {
  const net = ['--spec', 'spec.json', '--weights', 'net.onnx'];
  const rf = await run(['receptive-field', ...net, '--probe', '--json']);
  assert.equal(rf.code, 0, rf.stderr);
  const measured = JSON.parse(rf.stdout);
  assert.deepEqual(measured.weightsSha256, [createHash('sha256').update(fs.readFileSync(f('net.onnx'))).digest('hex')]);
  assert.ok(Array.isArray(measured.probe.within) && measured.probe.within.at(-1) === 1, 'the probe profile');
  fs.writeFileSync(f('reach.json'), rf.stdout);
  const input = ['--field', 'field.nii.gz', '--mask', 'mask.nii'];

  // invert --probe: the network probed, then run; its report holds the plan it ran (what plan --json prints).
  const y = await run(['invert', ...input, ...net, '--probe', '--out', 'probed.nii', '--report', 'probed.json']);
  assert.equal(y.code, 0, y.stderr);
  assert.match(y.stderr, /probe: running the network/);
  const b = JSON.parse(fs.readFileSync(f('probed.json'), 'utf8')).plan;

  // The plan takes it as the probe's own: the same plan as --probe, without running the network.
  const fromFile = await run(['plan', ...input, ...net, '--context', 'reach.json', '--json']);
  assert.equal(fromFile.code, 0, fromFile.stderr);
  assert.match(fromFile.stderr, /context: the reach measured earlier \(reach\.json\): 90 % of the response within \d+ voxels/);
  assert.doesNotMatch(fromFile.stderr, /probe: running the network/);
  const a = JSON.parse(fromFile.stdout);
  assert.equal(a.context.measured, true);
  assert.equal(a.context.radius90, measured.probe.radius90);
  for (const k of ['context', 'predictedFidelity', 'tile', 'patchDims', 'tilesTotal', 'voxelsRun', 'crop']) assert.deepEqual(a[k], b[k], k);

  // invert: χ equal to the --probe run's, the same plan, and the report names the file.
  const x = await run(['invert', ...input, ...net, '--context', 'reach.json', '--out', 'ctx.nii', '--report', 'ctx.json']);
  assert.equal(x.code, 0, x.stderr);
  assert.doesNotMatch(x.stderr, /probe: running the network/);
  assert.deepEqual((await readNifti(bytes(f('ctx.nii')))).data, (await readNifti(bytes(f('probed.nii')))).data);
  const ctxReport = JSON.parse(fs.readFileSync(f('ctx.json'), 'utf8'));
  assert.equal(ctxReport.options.contextFile, 'reach.json');
  for (const k of ['context', 'predictedFidelity', 'tile', 'patchDims', 'tilesTotal', 'voxelsRun', 'crop']) assert.deepEqual(ctxReport.plan[k], b[k], `invert's ${k}`);

  // Refused, each in one line that names the file and how to make a good one.
  fs.writeFileSync(f('reach-text.json'), 'radius 4');
  fs.writeFileSync(f('reach-none.json'), JSON.stringify({ graph: measured.graph }));
  fs.writeFileSync(f('reach-bad.json'), JSON.stringify({ within: [0.6, 0.2, 1] }));
  const cases = [
    [['--spec', 'spec.json', '--weights', 'wrong.onnx', '--context', 'reach.json'], 1, /the reach in reach\.json was measured on other weights \(sha256 [0-9a-f]{12}…, these are [0-9a-f]{12}…\): measure this network's with `tessera-qsm receptive-field --probe --json` or give --probe/],
    [[...net, '--context', 'reach-text.json'], 1, /the context reach-text\.json is not valid JSON: .*; write it with `tessera-qsm receptive-field/],
    [[...net, '--context', 'reach-none.json'], 1, /the context reach-none\.json holds no measured reach \(probe\.within, an array of fractions\); write it with/],
    [[...net, '--context', 'no-such.json'], 1, /could not read the context no-such\.json: no such file/],
    [[...net, '--context', 'reach-bad.json'], 1, /a context profile must be non-decreasing fractions in \[0, 1\]/],
    [[...net, '--context', 'reach.json', '--probe'], 2, /give --probe \(measure the reach now\) or --context FILE \(a reach measured earlier\), not both/],
  ];
  for (const [args, code, re] of cases) {
    const r = await run(['plan', ...input, ...args]);
    assert.equal(r.code, code, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, re);
    noStack(r);
  }
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

test('plan --crop off of a volume over the single-patch limit cuts the field of view into slabs and says so', async () => {
  // A long-reach network (radius 117: no cubic tiling within the limits comes near the target) at 1,100 B/voxel on
  // 160×160×128 (3.6 GB as one patch).
  fs.writeFileSync(f('view.nii.gz'), await writeNifti(new Float32Array(160 * 160 * 128), { dims: [160, 160, 128], voxelMm: [1, 1, 1] }, { gzip: true }));
  fs.writeFileSync(f('spec-deep.json'), JSON.stringify({ divisor: 16, bytesPerVoxel: 1100, receptiveRadius: 117 }));
  const r = await run(['plan', '--field', 'view.nii.gz', '--spec', 'spec-deep.json', '--crop', 'off']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /mode\s+the whole field of view \(0-160 × 0-160 × 0-128\) in \d+ slabs along [xyz], halo \d+/);
  noStack(r);
});

test('--weights-unverified runs your own export of a registry network: warned (even --quiet), its sha256 in the report, χ the API run\'s; without it refused naming the flag; plan takes it, and its table names a training grid', async () => {
  // MoDL-QSM's stand-in (two channels in and out) on a 1 mm grid (its training grid: no resampling).
  const dims = [16, 16, 16];
  const like = { dims, voxelMm: [1, 1, 1] };
  const rnd = prng(33);
  const own = new Float32Array(16 ** 3).map(() => (rnd() * 2 - 1) * 0.1);
  const box = new Float32Array(16 ** 3);
  for (let z = 3; z < 13; z++) for (let y = 3; y < 13; y++) for (let x = 3; x < 13; x++) box[x + 16 * (y + 16 * z)] = 1;
  fs.writeFileSync(f('own-field.nii'), await writeNifti(own, like));
  fs.writeFileSync(f('own-mask.nii'), await writeNifti(box, like));
  const net = twoChannel();
  fs.writeFileSync(f('own.onnx'), net);
  const sha = createHash('sha256').update(net).digest('hex');
  const common = ['invert', '--field', 'own-field.nii', '--mask', 'own-mask.nii', '--model', 'modl-qsm', '--weights', 'own.onnx', '--whole', '--quiet'];
  const planArgs = ['plan', '--field', 'own-field.nii', '--mask', 'own-mask.nii', '--model', 'modl-qsm', '--weights', 'own.onnx', '--whole', '--json'];
  // The 2016 challenge's voxels: 16 · 1.0625 = 17 mm, 16 · 1.071 = 17.136 mm, so 17 voxels of 1 mm (1.008 mm) per axis.
  const challenge = { dims, voxelMm: [1.0625, 1.0625, 1.071] };
  fs.writeFileSync(f('own-field-2016.nii'), await writeNifti(own, challenge));
  fs.writeFileSync(f('own-mask-2016.nii'), await writeNifti(box, challenge));
  const [ran, refused, noFile, planned, planRefused, table] = await Promise.all([
    run([...common, '--weights-unverified', '--out', 'own-chi.nii', '--report', 'own-report.json']),
    run([...common, '--out', 'own-never.nii']),
    run(['invert', '--field', 'own-field.nii', '--mask', 'own-mask.nii', '--model', 'modl-qsm', '--weights-unverified', '--out', 'own-never.nii']),
    run([...planArgs, '--weights-unverified']),
    run(planArgs),
    run(['plan', '--field', 'own-field-2016.nii', '--mask', 'own-mask-2016.nii', '--model', 'modl-qsm', '--whole']),
  ]);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /training grid +17×17×17 voxels, 1×1×1\.008 mm \(field resampled there in k-space, χ back; /);
  assert.match(table.stdout, /resampled in k-space to 17×17×17/);
  // plan takes the flag too (it reads --weights for the network's reach).
  assert.equal(planned.code, 0, planned.stderr);
  assert.ok(JSON.parse(planned.stdout).feasible);
  assert.match(planned.stderr, /warning: weights not verified: sha256 [0-9a-f]{64} of modl-qsm\.onnx/);
  assert.equal(planRefused.code, 1, planRefused.stderr);
  assert.match(planRefused.stderr, /WeightsMismatch: .*--weights-unverified/);
  const tessera = await apiRuntime();
  const registry = (await tessera.model('modl-qsm')).weights[0].sha256;
  assert.notEqual(sha, registry);
  assert.equal(ran.code, 0, ran.stderr);
  noStack(ran);
  assert.ok(ran.stderr.includes(`warning: weights not verified: sha256 ${sha} of modl-qsm.onnx differs from the registry's ${registry} (--weights-unverified)\n`), ran.stderr);
  const report = JSON.parse(fs.readFileSync(f('own-report.json'), 'utf8'));
  assert.deepEqual(report.weights, [{ source: 'own.onnx', file: 'modl-qsm.onnx', bytes: net.byteLength, sha256: sha, registrySha256: registry, verified: false }]);
  assert.ok(report.warning.includes(`weights not verified: sha256 ${sha}`), report.warning);
  const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  const api = await tessera.invert({ keepInputs: true, geometry, field: own, mask: Uint8Array.from(box), model: 'modl-qsm', weights: net, whole: true, verifyWeights: false });
  assert.deepEqual(readNifti(bytes(f('own-chi.nii'))).data, api.chi.data);
  assert.equal(refused.code, 1, refused.stderr);
  assert.match(refused.stderr, /^error: WeightsMismatch: .*own\.onnx have \d+ bytes, expected 1794143 bytes.*--weights-unverified/);
  noStack(refused);
  assert.equal(noFile.code, 2, noFile.stderr);
  assert.match(noFile.stderr, /--weights-unverified runs your own export of the network: give it with --weights FILE/);
  assert.ok(!fs.existsSync(f('own-never.nii')));
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

test('fuzz sample: 12 mutated NIfTI files (seeded) as --field or --mask of plan and invert: exit 0, or 1/2 with one clear line, never a stack trace', { timeout: 120000 }, async () => {
  const cases = [...headerCases(777, 8), ...gzipCases(778, 4)];
  const [good] = baseFiles(); // 4×3×2 float32, every voxel but one nonzero
  fs.writeFileSync(f('fuzz-good.nii'), good.bytes);
  const outcomes = {};
  for (let k = 0; k < cases.length; k += 4) {
    const batch = cases.slice(k, k + 4).map((c, j) => {
      const i = k + j;
      const file = `fuzz-${i}.nii${c.bytes[0] === 0x1f && c.bytes[1] === 0x8b ? '.gz' : ''}`;
      fs.writeFileSync(f(file), c.bytes);
      const [fieldFile, maskFile] = i % 3 === 2 ? ['fuzz-good.nii', file] : [file, 'fuzz-good.nii'];
      const args = i % 6 === 3
        ? ['invert', '--field', fieldFile, '--mask', maskFile, '--spec', 'spec.json', '--weights', 'net.onnx', '--whole', '--out', `fuzz-${i}-chi.nii`, '--quiet']
        : ['plan', '--field', fieldFile, '--mask', maskFile, '--spec', 'spec.json'];
      return run(args).then((r) => ({ r, c, args }));
    });
    for (const { r, c, args } of await Promise.all(batch)) {
      const what = `${args.slice(0, 5).join(' ')} (${c.name}):\n${r.stderr}`;
      noStack(r);
      assert.ok([0, 1, 2].includes(r.code), `exit ${r.code} ${r.signal ?? ''}: ${what}`);
      if (r.code !== 0) assert.match(r.stderr, /^error: [^\n]{10,}\n$/, what);
      outcomes[r.code] = (outcomes[r.code] ?? 0) + 1;
    }
  }
  assert.ok(outcomes[1] > 0, JSON.stringify(outcomes));
  console.log(`# exit codes of ${cases.length} CLI runs on mutated files: ${JSON.stringify(outcomes)}`);
});

test('--crop-margin sizes the automatic crop to the mask: the plan runs the box + that margin, χ equals the API\'s; a bad value or a fixed run is a usage error', async () => {
  const args = ['--field', 'field.nii.gz', '--mask', 'mask.nii', '--spec', 'spec.json', '--weights', 'net.onnx'];
  const plans = {};
  for (const m of [0, 1]) {
    const r = await run(['plan', ...args, '--crop-margin', String(m), '--json']);
    assert.equal(r.code, 0, r.stderr);
    plans[m] = JSON.parse(r.stdout);
  }
  // The mask is a box MARGIN voxels inside each face; the spec's divisor is 1, so no grid rounding widens the crop.
  const box = DIMS.map((d) => d - 2 * MARGIN);
  for (const m of [0, 1]) {
    assert.ok(plans[m].crop, `margin ${m}: the plan crops (${plans[m].explanation})`);
    assert.deepEqual(plans[m].patchDims, box.map((d) => d + 2 * m), `margin ${m}`);
    // Under the least margin measured faithful: the prediction leaves the box's own error out, and says so.
    assert.match(plans[m].fidelityWarning ?? '', new RegExp(`the crop margin of ${m} voxels? is under the \\d+ measured faithful`));
  }
  const out = await run(['invert', ...args, '--crop-margin', '1', '--out', 'chi-margin1.nii']);
  assert.equal(out.code, 0, out.stderr);
  const { voxelMm, b0Dir } = readNifti(bytes(f('field.nii.gz')));
  const api = await (await apiRuntime()).invert({ keepInputs: true, field, mask: Uint8Array.from(mask), geometry: { dims: DIMS, voxelMm, b0Dir }, spec: SPEC, weights: bytes(f('net.onnx')), cropMargin: 1 });
  assert.deepEqual(readNifti(bytes(f('chi-margin1.nii'))).data, api.chi.data);
  for (const [extra, re] of [
    [['--crop-margin', '-1'], /--crop-margin must be a whole number >= 0, got '-1'/],
    [['--crop-margin', 'two'], /--crop-margin must be a whole number >= 0, got 'two'/],
    [['--crop-margin', '2', '--whole'], /--crop-margin sizes the auto-planner's crop to the mask: it takes no --whole, --core, --phase or --crop off/],
    [['--crop-margin', '2', '--crop', 'off'], /--crop-margin sizes .* --crop off/],
  ]) {
    const r = await run(['plan', ...args, ...extra]);
    assert.equal(r.code, 2, `${extra.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, re);
  }
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
  assert.match(models.stdout, /^id\s+kind\s+inputs\s+divisor\s+reach\s+memory per worker/);
  assert.match(models.stdout, /\ndemo-unet\s+field-to-chi\s+field\s+8\s+±51\s/, "the reach comes from the registry (the shipped graph)");
  // The listing shows the registry's figures (whatever they are), measured or provisional.
  assert.match(models.stdout, /\nxqsm\s+field-to-chi\s+field\s+8\s+±\d+\s+(\d+(\.\d+)? MB \+ )?\d+ B\/voxel \((measured|provisional)\)\s+xqsm\.onnx 20\.9 MB/);
  // The phase networks list their input roles (the registry's inputs).
  assert.match(models.stdout, /\niqsm\s+whole-volume-only\s+phase,mask,te,b0,border\s+16\s/);
  assert.match(models.stdout, /\niqfm\s+whole-volume-only\s+phase,mask,te,b0,border\s/);
  assert.match(models.stdout, /\niqsm-plus\s+whole-volume-only\s+phase,mask,te,b0,b0_dir,border\s/);
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
  fs.writeFileSync(f('unet.json'), JSON.stringify({ divisor: 8, bytesPerVoxel: 1100 }));
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

// The calibration tests' network: 2 KiB of activations a voxel (256 copies of the input, then their concatenation; the
// output is the input), so that the heap grows from the first patch (16³: 8 MiB) and the three first patches measure
// the slope, each in a fresh ONNX Runtime worker (a network whose heap grows only at larger patches takes up to six).
const calNet = () => memoryHog({ copies: 256, fold: 1 });

test('calibrate: the points, the fitted and safe cost, the figures to declare; --json; bad usage', async () => {
  fs.writeFileSync(f('cal-net.onnx'), calNet());
  fs.writeFileSync(f('cal.json'), JSON.stringify({ divisor: 8 }));
  const [table, json, noWeights, both] = await Promise.all([
    run(['calibrate', '--weights', 'cal-net.onnx', '--spec', 'cal.json']),
    run(['calibrate', '--weights', 'cal-net.onnx', '--spec', 'cal.json', '--json']),
    run(['calibrate', '--spec', 'cal.json']),
    run(['calibrate', '--weights', 'cal-net.onnx', '--spec', 'cal.json', '--model', 'demo-unet']),
  ]);
  assert.equal(json.code, 0, json.stderr);
  const c = JSON.parse(json.stdout);
  assert.ok(c.points.length >= 3 && c.points.every((p) => p.edge % 8 === 0 && p.heapBytes <= c.fixedBytes + c.bytesPerVoxel * p.voxels));
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /patch 16³ +heap [\d.]+ MB \(after session [\d.]+ MB\)/);
  assert.match(table.stdout, /cost +[\d.]+ MB \+ \d+ B\/voxel per worker \(1 thread; every measured heap under it\)/);
  assert.match(table.stdout, /declare +"fixedBytes": \d+, "bytesPerVoxel": \d+/);
  assert.match(table.stderr, /calibrate: patch 16³: heap/);
  assert.equal(noWeights.code, 2);
  assert.match(noWeights.stderr, /^error: calibrate needs --weights FILE\|URL/);
  assert.equal(both.code, 2);
  assert.match(both.stderr, /^error: give at most one of --model ID or --spec net\.json/);
});

test('a --spec without bytesPerVoxel is calibrated before planning (invert; plan with --weights); without weights it is marked assumed', async () => {
  fs.writeFileSync(f('cal-net2.onnx'), calNet());
  fs.writeFileSync(f('cal2.json'), JSON.stringify({ divisor: 8 }));
  const [inv, plan, assumed] = await Promise.all([
    run(['invert', '--field', 'field.nii.gz', '--mask', 'mask.nii', '--spec', 'cal2.json', '--weights', 'cal-net2.onnx', '--whole',
      '--out', 'chi-cal.nii', '--report', 'report-cal.json']),
    run(['plan', '--field', 'field.nii.gz', '--mask', 'mask.nii', '--spec', 'cal2.json', '--weights', 'cal-net2.onnx', '--whole']),
    run(['plan', '--field', 'field.nii.gz', '--mask', 'mask.nii', '--spec', 'cal2.json', '--whole']),
  ]);
  assert.equal(inv.code, 0, inv.stderr);
  const line = inv.stderr.match(/calibrate: ([\d.]+) MB \+ (\d+) B\/voxel per worker \((\d) patches/);
  assert.ok(line, inv.stderr);
  assert.ok(inv.stderr.indexOf('calibrate: the spec declares no bytesPerVoxel') < inv.stderr.indexOf('whole volume'), 'calibrated before the plan is printed');
  const report = JSON.parse(fs.readFileSync(f('report-cal.json'), 'utf8'));
  assert.equal(report.plan.cost.source, 'calibrated');
  assert.equal(report.plan.cost.bytesPerVoxel, Number(line[2]));
  assert.equal(report.plan.cost.points.length, Number(line[3]));
  assert.equal(report.memory.cost.source, 'calibrated');
  assert.ok(report.memory.workerHeapVsPlan <= 1, `${report.memory.workerHeapVsPlan}`);
  assert.equal(report.memory.warning, undefined);
  assert.doesNotMatch(inv.stderr, /warning: .*heap/); // (the fixture's 11.5° B0 tilt is warned about: a different warning)
  assert.equal(plan.code, 0, plan.stderr);
  assert.match(plan.stdout, /memory cost +[\d.]+ MB \+ \d+ B\/voxel per worker, calibrated \(\d patches 16–\d+³ measured in [\d.]+ s\)/);
  assert.equal(assumed.code, 0, assumed.stderr);
  assert.match(assumed.stdout, /memory cost +1100 B\/voxel per worker, ASSUMED: the spec declares no bytesPerVoxel; give --weights net\.onnx to calibrate it/);
});

test('a run whose heap exceeds its plan prints a warning with the figure to declare (also with --quiet); the report carries it', async () => {
  fs.writeFileSync(f('low.json'), JSON.stringify({ divisor: 8, bytesPerVoxel: 1 }));
  fs.writeFileSync(f('low-net.onnx'), unet({ base: 8, seed: 7 }));
  const r = await run(['invert', '--field', 'field.nii.gz', '--mask', 'mask.nii', '--spec', 'low.json', '--weights', 'low-net.onnx', '--whole',
    '--out', 'chi-low.nii', '--report', 'report-low.json', '--quiet']);
  assert.equal(r.code, 0, r.stderr);
  const report = JSON.parse(fs.readFileSync(f('report-low.json'), 'utf8'));
  const m = report.memory;
  assert.ok(m.workerHeapVsPlan > 1);
  assert.equal(r.stderr, `warning: ${m.warning}\n`);
  assert.match(m.warning, new RegExp(`${m.workerHeapVsPlan.toFixed(2)}× the .* planned per tile .*--spec bytesPerVoxel ${m.measuredBytesPerVoxel}\\)`));
  assert.ok(fs.existsSync(f('chi-low.nii')), 'the run itself succeeded');
});

test('the request flags come from the schema: --stride and --blend reach the plan, the help and the refusals give the schema\'s help, range and choices', async () => {
  const schema = await (await apiRuntime()).schema();
  const option = (name) => schema.find((o) => o.name === name);
  const base = ['plan', '--field', 'field.nii.gz', '--mask', 'mask.nii', '--spec', 'spec.json', '--json'];
  const tooBig = option('tile.core').max + 1;
  const [overlap, threads, help, bigCore, badBlend, strideAlone, badStage] = await Promise.all([
    run([...base, '--core', '8', '--halo', '1', '--stride', '6', '--blend', 'cosine']),
    run([...base, '--threads', '2']),
    run(['invert', '--help']),
    run([...base, '--core', String(tooBig)]),
    run([...base, '--core', '8', '--blend', 'median']),
    run([...base, '--stride', '6']),
    run(['pipeline', '--phase', 'nope.nii', '--te', '0.004,0.008', '--method', 'tkd', '--mask', 'mask.nii', '--option', 'vsharp.radius=3', '--out', 'x.nii']),
  ]);
  assert.equal(overlap.code, 0, overlap.stderr);
  const plan = JSON.parse(overlap.stdout);
  assert.deepEqual([plan.tile.stride, plan.tile.blend, plan.grid.stride, plan.grid.blend], [6, 'cosine', 6, 'cosine']);
  assert.equal(threads.code, 0, threads.stderr);
  assert.equal(JSON.parse(threads.stdout).threadsPerWorker, 2, 'plan takes --threads as invert does (the auto-planner keeps it)');
  assert.equal(help.code, 0, help.stderr);
  const text = help.stdout.replace(/\n {21}/g, ' ');
  for (const [flag, name] of [['stride', 'tile.stride'], ['blend', 'tile.blend'], ['crop-margin', 'cropMargin'], ['threads', 'threadsPerWorker']]) {
    const o = option(name);
    const entry = text.split('\n').find((l) => l.startsWith(`  --${flag} `));
    assert.ok(entry?.includes(o.help), `--${flag}: ${entry}`);
    assert.ok(entry.includes(`default ${o.default}`), `--${flag} default: ${entry}`);
    if (o.choices.length) assert.ok(entry.startsWith(`  --${flag} ${o.choices.join('|')}`), entry);
    else assert.ok(entry.includes(`[${o.min}, ${o.max}]`), `--${flag} range: ${entry}`);
  }
  assert.equal(bigCore.code, 2);
  assert.match(bigCore.stderr, new RegExp(`^error: --core must be a whole number in \\[1, ${option('tile.core').max}\\], got '${tooBig}'\\n$`));
  assert.equal(badBlend.code, 2);
  assert.equal(badBlend.stderr, `error: --blend must be ${option('tile.blend').choices.join(', ')}, got 'median'\n`);
  assert.equal(strideAlone.code, 2);
  assert.match(strideAlone.stderr, /^error: --stride and --blend shape a tiling of a given --core/);
  assert.equal(badStage.code, 2);
  assert.match(badStage.stderr, /^error: --option vsharp\.radius is not a pipeline option \(options: unwrap, .*vsharp\.maxRadius/);
});
