// The phase networks (iqsm, iqfm, iqsm-plus) from the tessera-qsm command line, end to end: the CLI runs as a child
// process (plain `node cli.js`, as the shebang runs it) on NIfTI files and the iQSM LoT layer built here.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import zlib from 'node:zlib';
import os from 'node:os';
import path from 'node:path';
import { createTessera, readNifti, writeNifti } from './index.js';
import { runCli } from '../../tests/js/run-cli.js';
import { nifti4d } from '../../tests/js/nifti4d.js';
import { lotNet, LOT_KERNEL, LOT_SCALE } from '../../tests/js/phase-networks.js';

let dir;
const f = (name) => path.join(dir, name);
const run = (args, { onStderr } = {}) => runCli(args, { cwd: dir, onStderr });

function noStack(r) {
  assert.doesNotMatch(r.stderr, /\n\s+at .+:\d+:\d+/, `stack trace on stderr:\n${r.stderr}`);
}

// A plain Uint8Array copy (readNifti misreads node Buffers, whose slice() is a view).
const bytes = (p) => new Uint8Array(fs.readFileSync(p));

const C = Math.cos(0.2), S = Math.sin(0.2);

// The phase networks (iqsm, iqfm, iqsm-plus) from the command line. The network is the iQSM LoT layer
// (tests/js/phase-networks.js): output = Σ_k K_k sin(φ_k − φ_0) · 0.06/(B0·TE) on the mask the core erodes
// by a sphere of radius 3 (a box shrinks by 3 on every side), φ = −phase (phaseSign −1).

const PDIMS = [36, 34, 30];
const PN = PDIMS[0] * PDIMS[1] * PDIMS[2];
const PLO = [6, 6, 5]; // mask box [PLO, PDIMS - PLO)
const pidx = (x, y, z) => x + PDIMS[0] * (y + PDIMS[1] * z);
// Rotated 0.2 rad about x: B0 (scanner z) is 11.5° off the third voxel axis.
const PAFFINE = [1, 0, 0, -18, 0, C, -S, -17, 0, S, C, -15, 0, 0, 0, 1];
const wrapPi = (v) => Math.atan2(Math.sin(v), Math.cos(v));
let phase1; // wrapped phase, 1 echo
let phase2; // 2 echoes, one after the other
let magnitude2;
let pmask; // Uint8Array box
let eroded; // the box shrunk by 3
let apiStarted;

async function api(request) {
  const tessera = await (apiStarted ??= createTessera({ workers: 1, threadsPerWorker: 1 }));
  return tessera.invert({ ...request, keepInputs: true }); // the volumes are the tests' own, used again
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-cli-phase-'));
  // A field map, its mask and a network spec: the inputs of the field networks, which the phase usage errors refuse.
  const fieldLike = { dims: [24, 20, 16], voxelMm: [1, 1, 1] };
  fs.writeFileSync(f('field.nii.gz'), await writeNifti(new Float32Array(24 * 20 * 16).fill(0.01), fieldLike, { gzip: true }));
  fs.writeFileSync(f('mask.nii'), await writeNifti(new Float32Array(24 * 20 * 16).fill(1), fieldLike));
  fs.writeFileSync(f('spec.json'), JSON.stringify({ divisor: 1, bytesPerVoxel: 1100 }));
  const [X, Y, Z] = PDIMS;
  const psi = new Float64Array(PN);
  phase1 = new Float32Array(PN);
  pmask = new Uint8Array(PN);
  eroded = new Uint8Array(PN);
  const inBox = (p, lo, hi) => p.every((v, i) => v >= lo[i] && v < hi[i]);
  const hi = PDIMS.map((d, i) => d - PLO[i]);
  for (let z = 0; z < Z; z++)
    for (let y = 0; y < Y; y++)
      for (let x = 0; x < X; x++) {
        const i = pidx(x, y, z);
        psi[i] = 3.1 + 0.45 * Math.sin(0.21 * x) + 0.35 * Math.cos(0.17 * y + 0.29 * z) + 0.25 * Math.sin(0.13 * z);
        phase1[i] = wrapPi(psi[i]);
        pmask[i] = inBox([x, y, z], PLO, hi) ? 1 : 0;
        eroded[i] = inBox([x, y, z], PLO.map((v) => v + 3), hi.map((v) => v - 3)) ? 1 : 0;
      }
  phase2 = new Float32Array(2 * PN);
  magnitude2 = new Float32Array(2 * PN);
  phase2.set(phase1);
  for (let i = 0; i < PN; i++) phase2[PN + i] = wrapPi(2.5 * psi[i]);
  for (let i = 0; i < 2 * PN; i++) magnitude2[i] = 0.5 + ((i * 7919) % 97) / 97;
  const like = { dims: PDIMS, voxelMm: [1, 1, 1], affine: PAFFINE };
  fs.writeFileSync(f('phase.nii.gz'), await writeNifti(phase1, like, { gzip: true }));
  fs.writeFileSync(f('pmask.nii'), await writeNifti(Float32Array.from(pmask), like));
  fs.writeFileSync(f('phase2.nii'), await nifti4d(phase2, 2, like));
  fs.writeFileSync(f('mag2.nii'), await nifti4d(magnitude2, 2, like));
  // Siemens-style integers (-4096..4095 = -π..π) as float32 values and as int16 (no scl_slope), and degrees.
  const ints = phase1.map((v) => Math.min(4095, Math.round((v * 4096) / Math.PI)));
  fs.writeFileSync(f('phase-int.nii'), await writeNifti(ints, like));
  const int16 = new Uint8Array(352 + 2 * PN);
  int16.set((await writeNifti(ints, like)).subarray(0, 352));
  const hv = new DataView(int16.buffer);
  hv.setInt16(70, 4, true); // datatype int16
  hv.setInt16(72, 16, true); // bitpix
  new Int16Array(int16.buffer, 352, PN).set(ints);
  fs.writeFileSync(f('phase-int16.nii'), int16);
  fs.writeFileSync(f('phase-deg.nii'), await writeNifti(phase1.map((v) => (v * 180) / Math.PI), like));
  fs.writeFileSync(f('lot.onnx'), lotNet());
  fs.writeFileSync(f('lot-named.onnx'), lotNet({ names: { mask: 'mask_brain', border: 'mask_border' } }));
});

after(async () => {
  await (await apiStarted)?.terminate();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** CLI output equals the API's to 1e-6 (relative to the largest value), and is nonzero exactly inside the eroded mask. */
function assertPhaseOutput(got, want, what) {
  assert.equal(got.length, PN, what);
  let max = 0;
  let err = 0;
  for (let i = 0; i < PN; i++) {
    max = Math.max(max, Math.abs(want[i]));
    err = Math.max(err, Math.abs(got[i] - want[i]));
    if (eroded[i]) assert.notEqual(got[i], 0, `${what}: voxel ${i} inside the eroded mask is 0`);
    else assert.equal(got[i], 0, `${what}: voxel ${i} outside the eroded mask is ${got[i]}`);
  }
  assert.ok(max > 0.01, `${what}: max |value| ${max}`);
  assert.ok(err <= 1e-6 * max, `${what}: max |cli - api| = ${err} (max |value| ${max})`);
}

test('invert --phase: iqsm equals the JS API and the LoT physics, B0 direction from the header; iqfm writes the local field and says so', async () => {
  const common = ['--phase', 'phase.nii.gz', '--mask', 'pmask.nii', '--te', '0.02'];
  const [iqsm, iqfm] = await Promise.all([
    run(['invert', '--model', 'iqsm', ...common, '--weights', 'lot.onnx', '--out', 'p-iqsm.nii', '--report', 'p-report.json']),
    run(['invert', '--model', 'iqfm', ...common, '--weights', 'lot.onnx', '--out', 'p-iqfm.nii.gz']),
  ]);
  for (const r of [iqsm, iqfm]) {
    assert.equal(r.code, 0, r.stderr);
    noStack(r);
  }
  assert.match(iqsm.stderr, /iqsm: whole volume, 1 echo \(TE 20 ms\), B0 3 T \(default; --b0 to change\)/);
  // The header's B0 direction (11.5° off the third axis) reaches the core, which warns for iQSM.
  assert.match(iqsm.stderr, /warning: iQSM assumes B0 along the volume's third axis; yours is 11° off/);
  assert.match(iqsm.stderr, /wrote p-iqsm\.nii: χ \(ppm\)/);
  assert.match(iqfm.stderr, /iqfm: the output is the local field \(ppm\), not χ/);
  assert.match(iqfm.stderr, /wrote p-iqfm\.nii\.gz: local field \(ppm\)/);

  const inNii = readNifti(bytes(f('phase.nii.gz')));
  const out = readNifti(bytes(f('p-iqsm.nii')));
  assert.deepEqual(out.dims, PDIMS);
  assert.deepEqual(out.affine, inNii.affine);
  assert.equal(out.header.descrip, 'chi ppm, tessera-qsm iqsm');
  const geometry = { dims: PDIMS, voxelMm: inNii.voxelMm, b0Dir: inNii.b0Dir };
  const want = await api({ model: 'iqsm', phase: phase1, mask: pmask, geometry, te: 0.02, weights: lotNet() });
  assertPhaseOutput(out.data, want.chi.data, 'iqsm');
  // The physics: Σ_k K_k sin(φ_k − φ_0) · 0.06/(B0·TE) with φ = −phase, on the eroded mask.
  let err = 0;
  let max = 0;
  for (let i = 0; i < PN; i++) {
    if (!eroded[i]) continue;
    let acc = 0;
    for (let k = 0; k < 27; k++) {
      const j = i + (Math.floor(k / 9) - 1) + PDIMS[0] * ((Math.floor(k / 3) % 3) - 1 + PDIMS[1] * ((k % 3) - 1));
      acc += LOT_KERNEL[k] * Math.sin(phase1[i] - phase1[j]);
    }
    const v = (acc * LOT_SCALE) / (3 * 0.02);
    err = Math.max(err, Math.abs(out.data[i] - v));
    max = Math.max(max, Math.abs(v));
  }
  assert.ok(err <= 1e-4 * max, `iqsm vs the LoT physics: ${err} (max ${max})`);

  const field = readNifti(bytes(f('p-iqfm.nii.gz')));
  assert.equal(field.header.descrip, 'local field ppm, tessera-qsm iqfm');
  // The same LoT network behind iqfm: the same numbers, written as the local field.
  assert.deepEqual(field.data, out.data);


  const report = JSON.parse(fs.readFileSync(f('p-report.json'), 'utf8'));
  assert.equal(report.quantity, 'chi');
  assert.equal(report.inputs.phase.echoes, 1);
  assert.deepEqual(report.inputs.phase.te, [0.02]);
  assert.equal(report.inputs.phase.units, 'rad');
  assert.equal(report.network.model, 'iqsm');
});

test('invert --phase 4D: two echoes with --te 0.01,0.02, --magnitude and --input-name equal the JS API; the output is 3D', async () => {
  const names = ['--input-name', 'mask=mask_brain', '--input-name', 'border=mask_border'];
  const r = await run(['invert', '--model', 'iqsm', '--phase', 'phase2.nii', '--magnitude', 'mag2.nii', '--mask', 'pmask.nii',
    '--te', '0.01,0.02', '--b0', '7', ...names, '--weights', 'lot-named.onnx', '--out', 'p-two.nii']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /2 echoes \(TE 10, 20 ms\), B0 7 T,/);
  assert.match(r.stderr, /progress 100%\s+2\/2/);
  const out = readNifti(bytes(f('p-two.nii')));
  assert.deepEqual(out.dims, PDIMS);
  assert.deepEqual(out.header.dim.slice(0, 5), [3, ...PDIMS, 1]);
  assert.deepEqual(out.affine, readNifti(bytes(f('phase.nii.gz'))).affine);
  const inNii = readNifti(bytes(f('phase.nii.gz')));
  const want = await api({
    model: 'iqsm', phase: phase2, magnitude: magnitude2, mask: pmask, geometry: { dims: PDIMS, voxelMm: inNii.voxelMm, b0Dir: inNii.b0Dir },
    te: [0.01, 0.02], b0: 7, inputNames: { mask: 'mask_brain', border: 'mask_border' }, weights: lotNet({ names: { mask: 'mask_brain', border: 'mask_border' } }),
  });
  assertPhaseOutput(out.data, want.chi.data, '2 echoes');
});

test('phase units: integers and degrees are refused with a hint; --phase-units scanner and --phase-sign +1 convert', async () => {
  const base = ['invert', '--model', 'iqsm', '--mask', 'pmask.nii', '--te', '0.02', '--weights', 'lot.onnx'];
  const [int16, ints, deg, wrongUnits, scanner] = await Promise.all([
    run([...base, '--phase', 'phase-int16.nii', '--out', 'never.nii']),
    run([...base, '--phase', 'phase-int.nii', '--out', 'never.nii']),
    run([...base, '--phase', 'phase-deg.nii', '--out', 'never.nii']),
    run([...base, '--phase', 'phase-int.nii', '--phase-units', 'deg', '--out', 'never.nii']),
    run([...base, '--phase', 'phase-int.nii', '--phase-units', 'scanner', '--phase-sign', '+1', '--out', 'p-int.nii']),
  ]);
  assert.equal(int16.code, 2, int16.stderr);
  assert.match(int16.stderr, /^error: the phase phase-int16\.nii is stored as int16 integers \(\[-4096, 4095\]\) with no scl_slope: that is not radians\. Give --phase-units scanner/);
  assert.equal(ints.code, 2, ints.stderr);
  assert.match(ints.stderr, /^error: the phase phase-int\.nii spans \[-4096, 4095\], outside \[-π, π\]: .*scanner integers.*--phase-units scanner.*--phase-scale/);
  assert.equal(deg.code, 2, deg.stderr);
  assert.match(deg.stderr, /^error: the phase phase-deg\.nii spans \[-180, 179\.99\d*\], outside \[-π, π\]: .*degrees: give --phase-units deg/);
  assert.equal(wrongUnits.code, 2, wrongUnits.stderr);
  assert.match(wrongUnits.stderr, /^error: the phase phase-int\.nii spans \[-4096, 4095\], which --phase-units deg maps to \[-71\.4\d*, 71\.4\d*\] rad, outside \[-π, π\]/);
  for (const r of [int16, ints, deg, wrongUnits]) noStack(r);
  assert.ok(!fs.existsSync(f('never.nii')));
  assert.equal(scanner.code, 0, scanner.stderr);
  assert.match(scanner.stderr, /scanner integers in \[-4096, 4095\]: a span of 8192 values = 2π/);
  const inNii = readNifti(bytes(f('phase.nii.gz')));
  const geometry = { dims: PDIMS, voxelMm: inNii.voxelMm, b0Dir: inNii.b0Dir };
  const ints32 = readNifti(bytes(f('phase-int.nii'))).data;
  const fromInts = await api({ model: 'iqsm', phase: ints32.map((v) => (v * Math.PI) / 4096), phaseSign: 1, mask: pmask, geometry, te: 0.02, weights: lotNet() });
  assertPhaseOutput(readNifti(bytes(f('p-int.nii'))).data, fromInts.chi.data, 'scanner integers, phase sign +1');
});

test('phase usage errors: missing --te, TE count or ms, --phase with a field model, --field with iqsm, flags of the other input (exit 2)', async () => {
  const base = ['--mask', 'pmask.nii', '--weights', 'lot.onnx', '--out', 'never.nii', '--quiet'];
  const cases = await Promise.all([
    run(['invert', '--model', 'iqsm', '--phase', 'phase.nii.gz', ...base]),
    run(['invert', '--model', 'iqsm', '--phase', 'phase2.nii', '--te', '0.02', ...base]),
    run(['invert', '--model', 'iqsm', '--phase', 'phase.nii.gz', '--te', '20', ...base]),
    run(['invert', '--model', 'xqsm', '--phase', 'phase.nii.gz', '--te', '0.02', ...base]),
    run(['invert', '--model', 'iqsm', '--field', 'field.nii.gz', '--mask', 'mask.nii', '--weights', 'lot.onnx', '--out', 'never.nii']),
    run(['invert', '--spec', 'spec.json', '--field', 'field.nii.gz', '--te', '0.02', ...base]),
    run(['invert', '--model', 'iqsm', '--phase', 'phase.nii.gz', '--field', 'field.nii.gz', '--te', '0.02', ...base]),
    run(['invert', '--model', 'iqsm', '--phase', 'phase.nii.gz', '--te', '0.02', '--magnitude', 'mag2.nii', ...base]),
    run(['invert', '--model', 'iqsm', '--phase', 'phase.nii.gz', '--te', '0.02', '--input-name', 'b0_dir=dir', ...base]),
    run(['invert', '--model', 'iqsm', '--phase', 'phase.nii.gz', '--te', '0.02', '--phase-sign', '2', ...base]),
  ]);
  const expect = [
    [2, /^error: --phase needs --te: the echo time in seconds, one per echo/],
    [2, /^error: --te gives 1 echo time\(s\) but the phase phase2\.nii holds 2 echo\(es\) \(4D, 2 volumes along the 4th dim\)/],
    [2, /^error: --te 20: 20 s is implausible for an echo time; give TE in seconds, not milliseconds \(20 ms = 0\.02: --te 0\.02\)/],
    [2, /^error: --phase is the input of the phase networks \(iqsm, iqfm, iqsm-plus\); xqsm \(field-to-chi\) inverts a local field map: give --field/],
    [2, /^error: iQSM \(iqsm\) reconstructs from the wrapped phase: give --phase p\.nii --te/],
    [2, /^error: --te is for --phase/],
    [2, /^error: --field and --phase exclude each other/],
    [1, /^error: the magnitude mag2\.nii is 36×34×30 with 2 echo\(es\) but the phase phase\.nii\.gz is 36×34×30 with 1/],
    [2, /^error: --input-name: iQSM has no input role 'b0_dir' \(roles: phase, mask, te, b0, border\)/],
    [2, /^error: --phase-sign must be \+1 or -1, got '2'/],
  ];
  cases.forEach((r, i) => {
    assert.equal(r.code, expect[i][0], `case ${i}: ${r.stderr}`);
    assert.match(r.stderr, expect[i][1], `case ${i}`);
    noStack(r);
  });
  assert.ok(!fs.existsSync(f('never.nii')));
});

test('plan --phase: the echo count comes from the file; a volume too large for the whole-volume network is refused (exit 2)', async () => {
  // 256×256×192 uint8 zeros, gzipped: 12.6 M voxels, beyond the single-patch limit at any cost over 200 B/voxel.
  const bigDims = [256, 256, 192];
  const bigFile = new Uint8Array(352 + bigDims[0] * bigDims[1] * bigDims[2]);
  bigFile.set((await writeNifti(new Float32Array(1), { dims: [1, 1, 1], voxelMm: [1, 1, 1] })).subarray(0, 352));
  const bv = new DataView(bigFile.buffer);
  bigDims.forEach((d, i) => bv.setInt16(42 + 2 * i, d, true));
  bv.setInt16(70, 2, true); // datatype uint8
  bv.setInt16(72, 8, true); // bitpix
  fs.writeFileSync(f('big-phase.nii.gz'), zlib.gzipSync(bigFile));
  const [table, json, big] = await Promise.all([
    run(['plan', '--model', 'iqsm', '--phase', 'phase2.nii', '--mask', 'pmask.nii']),
    run(['plan', '--model', 'iqsm-plus', '--phase', 'phase2.nii', '--mask', 'pmask.nii', '--te', '0.01,0.02', '--json']),
    run(['plan', '--model', 'iqsm', '--phase', 'big-phase.nii.gz', '--te', '0.02']),
  ]);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /plan: feasible/);
  assert.match(table.stdout, /input\s+wrapped phase, 2 echoes \(one network call each\)/);
  assert.match(table.stdout, /mode\s+whole volume/);
  assert.match(table.stdout, /patch edge\s+.*48×48×32/);
  assert.match(table.stdout, /tiles\s+2 total/);
  assert.equal(json.code, 0, json.stderr);
  const plan = JSON.parse(json.stdout);
  assert.equal(plan.feasible, true);
  assert.equal(plan.wholeVolume, true);
  assert.equal(plan.tilesTotal, 2);
  assert.equal(big.code, 2, big.stderr);
  assert.match(big.stdout, /REFUSED/);
  assert.match(big.stdout, /refused: .*iQSM runs on the whole volume \(it cannot be tiled\)/);
  noStack(big);
});
