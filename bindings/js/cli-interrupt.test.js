// What an interrupted `tessera-qsm invert` leaves behind: its outputs (χ and report) are written as
// `.<name>.<pid>.partial` and renamed into place, so a target is absent, its old version or complete; a temp
// file left by a killed process is removed by the next run that writes the same target. And `--cores`, which
// makes the auto-planner's choice independent of the machine (what the cohort workflow declares per job).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { readNifti, writeNifti } from './index.js';
import { CLI, runCli } from '../../tests/js/run-cli.js';
import { convStack, unet, prng } from '../../tests/js/networks.js';

const DIMS = [48, 48, 32];
const N = DIMS[0] * DIMS[1] * DIMS[2];
let dir;
const f = (name) => path.join(dir, name);

const run = (args, { onStderr } = {}) => runCli(args, { cwd: dir, onStderr });

/** The pid of a process that has exited (for a temp file whose writer is gone). */
function deadPid() {
  const r = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(r.stdout);
}

const partialsIn = () => fs.readdirSync(dir).filter((n) => n.endsWith('.partial'));
const SLOW = ['invert', '--field', 'field.nii', '--mask', 'mask.nii', '--spec', 'unet.json', '--weights', 'unet.onnx', '--core', '8', '--halo', '4', '--workers', '1'];

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-cli-interrupt-'));
  const rnd = prng(9);
  const like = { dims: DIMS, voxelMm: [1, 1, 1] };
  fs.writeFileSync(f('field.nii'), await writeNifti(new Float32Array(N).map(() => rnd() - 0.5), like));
  fs.writeFileSync(f('mask.nii'), await writeNifti(new Float32Array(N).fill(1), like));
  fs.writeFileSync(f('unet.onnx'), unet({ base: 4 }));
  fs.writeFileSync(f('unet.json'), JSON.stringify({ divisor: 8, bytesPerVoxel: 1100 }));
  fs.writeFileSync(f('net.onnx'), convStack({ layers: 1, seed: 3 }));
  fs.writeFileSync(f('spec.json'), JSON.stringify({ divisor: 1, bytesPerVoxel: 1100 }));
});
after(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('a temp file left by a killed run is removed by the next run of the same target; a live writer\'s is kept', async () => {
  const dead = deadPid();
  const stale = [`.chi.nii.gz.${dead}.partial`, `.r.json.${dead}.partial`];
  const live = `.chi.nii.gz.${process.pid}.partial`; // this test process is alive: another writer's file
  const other = `.other.nii.${dead}.partial`; // another target: not this run's business
  for (const n of [...stale, live, other]) fs.writeFileSync(f(n), 'half a file');
  const r = await run(['invert', '--field', 'field.nii', '--mask', 'mask.nii', '--spec', 'spec.json', '--weights', 'net.onnx',
    '--core', '24', '--halo', '1', '--out', 'chi.nii.gz', '--report', 'r.json', '--quiet']);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(partialsIn().sort(), [live, other].sort());
  assert.equal(readNifti(new Uint8Array(fs.readFileSync(f('chi.nii.gz')))).data.length, N);
  assert.equal(JSON.parse(fs.readFileSync(f('r.json'), 'utf8')).output, 'chi.nii.gz');
  for (const n of [live, other]) fs.rmSync(f(n));
});

for (const sig of ['SIGTERM', 'SIGKILL']) {
  test(`${sig} mid-run leaves no χ, no report and no temp file; an earlier χ/report pair stays as it was`, async () => {
    const out = `${sig}-chi.nii`;
    const report = `${sig}-r.json`;
    fs.writeFileSync(f(out), 'old chi');
    fs.writeFileSync(f(report), 'old report');
    let sent = false;
    const r = await run([...SLOW, '--out', out, '--report', report], {
      onStderr: (text, child) => {
        if (!sent && /^progress\s+10%/m.test(text)) {
          sent = true;
          child.kill(sig);
        }
      },
    });
    assert.ok(sent, `no progress line before the end:\n${r.stderr}`);
    if (sig === 'SIGTERM') {
      assert.equal(r.code, 143, r.stderr);
      assert.match(r.stderr, /\ncancelled\n$/);
    } else {
      assert.equal(r.signal, 'SIGKILL');
    }
    assert.equal(fs.readFileSync(f(out), 'utf8'), 'old chi');
    assert.equal(fs.readFileSync(f(report), 'utf8'), 'old report');
    assert.deepEqual(partialsIn(), []);
  });
}

// Output folders that cannot take the files: read-only and full, each a small tmpfs mounted here (as root: chmod does
// not stop root from writing, a read-only mount does; a full tmpfs gives the real ENOSPC of a write).
/** Mounts a tmpfs of `size` at dir/name for test t (unmounted after it); the reason it cannot, or null. */
function mountTmpfs(t, name, size) {
  if (process.getuid?.() !== 0) return 'not root: a read-only or full folder needs a tmpfs mount (chmod does not stop root)';
  fs.mkdirSync(f(name), { recursive: true });
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', f(name)], { stdio: 'pipe' });
  } catch (e) {
    return `mount -t tmpfs is not allowed here: ${String(e.stderr ?? e.message).trim()}`;
  }
  t.after(() => spawnSync('umount', ['-l', f(name)]));
  return null;
}
const remount = (name, mode) => execFileSync('mount', ['-o', `remount,${mode}`, f(name)], { stdio: 'pipe' });
const FAST = ['invert', '--field', 'field.nii', '--mask', 'mask.nii', '--spec', 'spec.json', '--weights', 'net.onnx', '--core', '24', '--halo', '1', '--quiet'];
const partialsUnder = (name) => fs.readdirSync(f(name)).filter((n) => n.endsWith('.partial'));

test('output folder read-only (a read-only mount), before and during the run: exit 1 naming the path, earlier χ and report untouched, no temp file', async (t) => {
  const why = mountTmpfs(t, 'ro', '1m');
  if (why) return t.skip(why);
  fs.writeFileSync(f('ro/chi.nii'), 'old chi');
  fs.writeFileSync(f('ro/r.json'), 'old report');
  remount('ro', 'ro');
  const before = await run([...FAST, '--out', 'ro/chi.nii', '--report', 'ro/r.json']);
  assert.equal(before.code, 1, before.stderr);
  assert.equal(before.stderr, `error: cannot write --out ro/chi.nii: the directory ${f('ro')} is on a read-only file system\n`);
  // Writable when the run starts, read-only by the time it writes (remounted at 10 % progress).
  remount('ro', 'rw');
  let flipped = false;
  const during = await run([...SLOW, '--out', 'ro/chi.nii', '--report', 'ro/r.json'], {
    onStderr: (text) => {
      if (!flipped && /^progress\s+10%/m.test(text)) {
        flipped = true;
        remount('ro', 'ro');
      }
    },
  });
  assert.ok(flipped, `no progress line:\n${during.stderr}`);
  assert.equal(during.code, 1, during.stderr);
  assert.match(during.stderr, /\nerror: could not write ro\/chi\.nii: EROFS: read-only file system, open '.*\/ro\/\.chi\.nii\.\d+\.partial' \(write elsewhere\)\n$/);
  assert.doesNotMatch(during.stderr, /\n\s+at .+:\d+:\d+/);
  assert.equal(fs.readFileSync(f('ro/chi.nii'), 'utf8'), 'old chi');
  assert.equal(fs.readFileSync(f('ro/r.json'), 'utf8'), 'old report');
  assert.deepEqual(partialsUnder('ro'), []);
});

test('output folder full (a 256 KiB tmpfs, the χ needs 295 KB): exit 1 with ENOSPC naming the file, earlier χ and report untouched, the temp file removed', async (t) => {
  const why = mountTmpfs(t, 'full', '256k');
  if (why) return t.skip(why);
  fs.writeFileSync(f('full/chi.nii'), 'old chi');
  fs.writeFileSync(f('full/r.json'), 'old report');
  const free = () => fs.statfsSync(f('full')).bfree;
  const freeBefore = free();
  const r = await run([...FAST, '--out', 'full/chi.nii', '--report', 'full/r.json']);
  assert.equal(r.code, 1, r.stderr);
  assert.equal(r.stderr, 'error: could not write full/chi.nii: ENOSPC: no space left on device, write (free space there or write elsewhere)\n');
  assert.equal(fs.readFileSync(f('full/chi.nii'), 'utf8'), 'old chi');
  assert.equal(fs.readFileSync(f('full/r.json'), 'utf8'), 'old report');
  assert.deepEqual(partialsUnder('full'), []);
  assert.equal(free(), freeBefore, 'the space the temp file took is free again');
  // With room, the same command writes both (the failure was the folder, not the run).
  remount('full', 'size=2m');
  const ok = await run([...FAST, '--out', 'full/chi.nii', '--report', 'full/r.json']);
  assert.equal(ok.code, 0, ok.stderr);
  assert.equal(readNifti(new Uint8Array(fs.readFileSync(f('full/chi.nii')))).data.length, N);
  assert.deepEqual(partialsUnder('full'), []);
});

// quality fast: the speed-only planner tiles even this small volume (faithful would run it whole, on one worker).
test('--cores bounds workers × threads of the auto-plan, the same on any machine; invert obeys it and reports it', async () => {
  const plan = (cores) => {
    const r = spawnSync(process.execPath, [CLI, 'plan', '--field', 'field.nii', '--mask', 'mask.nii', '--spec', 'unet.json', '--cores', String(cores), '--quality', 'fast', '--json'], { cwd: dir, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout);
  };
  const one = plan(1);
  assert.equal(one.workers * one.threadsPerWorker, 1);
  assert.match(one.explanation, /1 hardware thread is available/);
  const three = plan(3);
  assert.ok(three.workers * three.threadsPerWorker <= 3);
  assert.match(three.explanation, /3 hardware threads are available/);
  const bad = spawnSync(process.execPath, [CLI, 'plan', '--field', 'field.nii', '--spec', 'unet.json', '--cores', '0'], { cwd: dir, encoding: 'utf8' });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /^error: --cores must be a whole number >= 1, got '0'/);
  const inv = await run(['invert', '--field', 'field.nii', '--mask', 'mask.nii', '--spec', 'spec.json', '--weights', 'net.onnx',
    '--cores', '1', '--quality', 'fast', '--out', 'c1.nii', '--report', 'c1.json', '--quiet']);
  assert.equal(inv.code, 0, inv.stderr);
  const rep = JSON.parse(fs.readFileSync(f('c1.json'), 'utf8'));
  assert.equal(rep.options.cores, 1);
  assert.equal(rep.plan.workers * rep.plan.threadsPerWorker, 1);
  const same = spawnSync(process.execPath, [CLI, 'plan', '--field', 'field.nii', '--mask', 'mask.nii', '--spec', 'spec.json', '--cores', '1', '--quality', 'fast', '--json'], { cwd: dir, encoding: 'utf8' });
  assert.deepEqual(rep.plan.tile, JSON.parse(same.stdout).tile);
});
