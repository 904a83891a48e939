// `tessera-qsm plan --method`, `plan --pipeline` and the pipeline's refusal from its input's header: planned before
// any image is read, so that files cut off after their header are planned (and refused) instead of failing to read.
// The CLI runs as a child process (tests/js/run-cli.js).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { createTessera, writeNifti } from './index.js';
import { runCli } from '../../tests/js/run-cli.js';
import { defaultBackgroundTitle } from '../../tests/js/background-titles.js';

let dir;
const f = (name) => path.join(dir, name);
const run = (args) => runCli(args, { cwd: dir });

/**
 * A NIfTI-1 file of dims × echoes (4D when echoes > 1) at voxel size mm, float32, cut off after its header: the
 * header a scanner export of that size would have, and no image byte.
 */
async function headerOnly(dims, echoes, mm) {
  const bytes = await writeNifti(new Float32Array(1), { dims: [1, 1, 1], voxelMm: [mm, mm, mm] });
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const dim = [echoes > 1 ? 4 : 3, ...dims, echoes, 1, 1, 1];
  dim.forEach((d, i) => dv.setInt16(40 + 2 * i, d, true));
  return bytes.subarray(0, dv.getFloat32(108, true)); // vox_offset: the header and its extension flags
}

const TE6 = '0.004,0.008,0.012,0.016,0.020,0.024';

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-cli-plan-'));
  // The scan: 320×320×200 at 0.7 mm, six echoes; a larger one (512×512×320, six echoes) that cannot fit.
  const scan = await headerOnly([320, 320, 200], 6, 0.7);
  fs.writeFileSync(f('scan6.nii'), scan);
  fs.writeFileSync(f('scan6.nii.gz'), zlib.gzipSync(scan));
  fs.writeFileSync(f('huge6.nii'), await headerOnly([512, 512, 320], 6, 0.5));
  fs.writeFileSync(f('huge6.nii.gz'), zlib.gzipSync(await headerOnly([512, 512, 320], 6, 0.5)));
  fs.writeFileSync(f('field-big.nii'), await headerOnly([448, 448, 320], 1, 0.5));
  fs.writeFileSync(f('field-small.nii'), await headerOnly([96, 96, 80], 1, 1));
  fs.writeFileSync(f('mask.nii'), new Uint8Array(4)); // never read: the plans and refusals come first
  fs.writeFileSync(f('not-nifti.nii'), new Uint8Array(400));
});

after(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

// One API runtime (1 hardware thread, as the CLI's --cores 1) for the figures the CLI's are checked against.
let apiStarted;
const apiRuntime = () => (apiStarted ??= createTessera({ workers: 1, hardwareThreads: 1 }));
after(async () => {
  await (await apiStarted)?.terminate();
});

/** The planned module heap of a request in the API, for the CLI's figure to be checked against. */
const apiPlan = async (request) => (await apiRuntime()).plan(request);

test('plan --method: a method\'s module heap from the field\'s header alone (the API\'s figure), exit 0 when it fits, 2 with the largest crop when not', { timeout: 120000 }, async () => {
  const small = await run(['plan', '--method', 'tv', '--field', 'field-small.nii', '--mask', 'mask.nii', '--cores', '1']);
  assert.equal(small.code, 0, small.stderr);
  const geometry = { dims: [96, 96, 80], voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  const planned = await apiPlan({ geometry, mask: new Uint8Array(96 * 96 * 80).fill(1), method: 'tv' });
  const mb = (planned.moduleHeapBytes / 1e6).toFixed(1);
  assert.match(small.stdout, new RegExp(`module heap\\s+${mb.replace('.', '\\.')} MB planned`));
  assert.match(small.stdout, /fits\s+yes/);

  const big = await run(['plan', '--method', 'ilsqr', '--field', 'field-big.nii', '--mask', 'mask.nii', '--cores', '1']);
  assert.equal(big.code, 2, big.stderr);
  assert.match(big.stdout, /fits\s+no/);
  const m = /the largest crop that fits is about (\d+)×(\d+)×(\d+) \((\d+) voxels\)/.exec(big.stdout);
  assert.ok(m, big.stdout);
  const [x, y, z, voxels] = m.slice(1).map(Number);
  assert.ok(x * y * z <= voxels && voxels < 448 * 448 * 320, big.stdout);
  // The crop keeps the volume's shape and fits when planned itself.
  assert.ok(Math.abs(x / y - 1) < 0.02 && Math.abs(x / z - 448 / 320) < 0.02, big.stdout);
  const crop = await apiPlan({ geometry: { dims: [x, y, z], voxelMm: [0.5, 0.5, 0.5], b0Dir: [0, 0, 1] }, mask: new Uint8Array(x * y * z).fill(1), method: 'ilsqr' });
  assert.equal(crop.feasible, true, crop.message);
  assert.match(big.stdout, /node's 32-bit WebAssembly heap/);
  assert.doesNotMatch(big.stdout, /browser/);
});

test('plan --pipeline: the issue\'s 320×320×200 six-echo 0.7 mm scan is planned from its header (.nii and .nii.gz) and fits', { timeout: 120000 }, async () => {
  const bg = await defaultBackgroundTitle(await apiRuntime());
  for (const file of ['scan6.nii', 'scan6.nii.gz']) {
    const r = await run(['plan', '--pipeline', '--phase', file, '--te', TE6, '--magnitude', file, '--method', 'tkd', '--cores', '1', '--json']);
    assert.equal(r.code, 0, r.stderr);
    const plan = JSON.parse(r.stdout);
    assert.equal(plan.feasible, true);
    assert.deepEqual(plan.stages, ['brain mask', 'echo fit', bg, 'TKD']);
    // At least the six echoes of phase and magnitude (f32) themselves.
    assert.ok(plan.moduleHeapBytes > 320 * 320 * 200 * 6 * 8 && plan.moduleHeapBytes <= 3.5e9, String(plan.moduleHeapBytes));
  }
  const text = await run(['plan', '--pipeline', '--phase', 'scan6.nii', '--te', TE6, '--mask', 'mask.nii', '--method', 'tkd', '--cores', '1']);
  assert.equal(text.code, 0, text.stderr);
  assert.match(text.stdout, /the pipeline on 320×320×200 with 6 echoes/);
  assert.ok(text.stdout.includes(`echo fit → ${bg} → TKD`), text.stdout);
  assert.match(text.stdout, /fits\s+yes/);
});

test('pipeline: a scan too large is refused from its header, before its data is read, with the largest crop that fits', { timeout: 120000 }, async () => {
  for (const file of ['huge6.nii', 'huge6.nii.gz']) {
    const r = await run(['pipeline', '--phase', file, '--te', TE6, '--mask', 'mask.nii', '--method', 'tkd', '--out', 'chi.nii', '--cores', '1']);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /^error: the pipeline on 512×512×320 with 6 echoes needs [\d.]+ GB of the module heap, over the 3\.50 GB that node's 32-bit WebAssembly heap can safely hold/);
    assert.match(r.stderr, /the largest crop that fits is about \d+×\d+×\d+ \(\d+ voxels\)/);
    assert.match(r.stderr, /or give fewer echoes/);
    assert.match(r.stderr, /planned from the header of huge6\.nii(\.gz)?; nothing was read/);
    assert.doesNotMatch(r.stderr, /truncated|browser/);
    assert.equal(fs.existsSync(f('chi.nii')), false);
  }
  // The same scan through plan --pipeline: the same verdict, exit 2; the crop it names fits when planned itself.
  const p = await run(['plan', '--pipeline', '--phase', 'huge6.nii', '--te', TE6, '--mask', 'mask.nii', '--method', 'tkd', '--cores', '1']);
  assert.equal(p.code, 2, p.stderr);
  assert.match(p.stdout, /fits\s+no/);
  const crop = /the largest crop that fits is about (\d+)×(\d+)×(\d+)/.exec(p.stdout).slice(1).map(Number);
  fs.writeFileSync(f('crop6.nii'), await headerOnly(crop, 6, 0.5));
  const c = await run(['plan', '--pipeline', '--phase', 'crop6.nii', '--te', TE6, '--mask', 'mask.nii', '--method', 'tkd', '--cores', '1']);
  assert.equal(c.code, 0, `${crop.join('×')}: ${c.stdout}${c.stderr}`);
});

test('invert --method: a field too large for the method is refused from its header, before its data is read', { timeout: 60000 }, async () => {
  const r = await run(['invert', '--method', 'ilsqr', '--field', 'field-big.nii', '--mask', 'mask.nii', '--out', 'chi.nii', '--cores', '1']);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /^error: ilsqr on 448×448×320 needs [\d.]+ GB of the module heap, over the 3\.50 GB that node's 32-bit WebAssembly heap/);
  assert.match(r.stderr, /the largest crop that fits is about \d+×\d+×\d+ .*or choose a method with less memory.*planned from the header of field-big\.nii; nothing was read/);
  assert.doesNotMatch(r.stderr, /truncated|browser/);
});

test('pipeline and plan --pipeline: the header\'s echoes against --te, and a file that is no NIfTI header, refused in words', { timeout: 60000 }, async () => {
  const te = await run(['pipeline', '--phase', 'scan6.nii', '--te', '0.004,0.008', '--mask', 'mask.nii', '--method', 'tkd', '--out', 'chi.nii']);
  assert.equal(te.code, 2, te.stderr);
  assert.match(te.stderr, /--te gives 2 echo time\(s\) but the phase scan6\.nii holds 6 echo\(es\)/);
  const bad = await run(['plan', '--pipeline', '--phase', 'not-nifti.nii', '--te', '0.004', '--mask', 'mask.nii', '--method', 'tkd']);
  assert.equal(bad.code, 1, bad.stderr);
  assert.match(bad.stderr, /^error: the phase not-nifti\.nii is not a NIfTI volume Tessera reads: not a NIfTI file/);
  const usage = await run(['plan', '--pipeline', '--phase', 'scan6.nii', '--te', TE6, '--method', 'tkd']);
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /--mask, or --magnitude/);
});
