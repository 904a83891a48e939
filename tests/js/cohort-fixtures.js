// What the cohort workflow's test files (cohort/cohort*.test.js) share: the paths, running snakemake and the CLI, its
// log's jobs, and the small phantom BIDS tree of three subjects they run. Not a test file.
//
// The tree: two local field maps (the bundled demo U-Net) and one two-echo wrapped phase with magnitude (iQSM with the
// test LoT network of tests/js/phase-networks.js), each with its brain mask. The volumes are small (the tests prove
// plumbing and equality between two routes, not a figure), two of them of different dims.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { createTessera, writeNifti, GAMMA_BAR_MHZ_PER_T } from '../../bindings/js/index.js';
import { lotNet } from './phase-networks.js';
import { nifti4d } from './nifti4d.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const SNAKEFILE = path.join(ROOT, 'cohort', 'Snakefile');
export const CLI = path.join(ROOT, 'bindings', 'js', 'cli.js');
export const DEMO_NET = path.join(ROOT, 'web', 'models', 'demo-unet.onnx');
export const CORES = 2;
export const TE = [0.004, 0.008];
export const B0 = 3;

export const SUBJECTS = [
  { path: 'sub-01/anat/sub-01', kind: 'field', dims: [32, 32, 24], seed: 1 },
  { path: 'sub-02/ses-a/anat/sub-02_ses-a', kind: 'field', dims: [40, 32, 32], seed: 2 },
  { path: 'sub-03/anat/sub-03', kind: 'phase', dims: [32, 32, 24], seed: 3 },
];

export function put(file, bytes) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, bytes);
}

export const gunzip = (file) => {
  const b = fs.readFileSync(file);
  return b[0] === 0x1f && b[1] === 0x8b ? zlib.gunzipSync(b) : b;
};

/** Runs a command to its end: {code, signal, stdout, stderr, log}. */
export function exec(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...opts });
  if (r.error) throw r.error;
  return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr, log: r.stdout + r.stderr };
}

/** exec without blocking the event loop (so that several run at once): a promise of the same result. */
export function execAsync(cmd, args, opts = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr, log: stdout + stderr }));
  });
}

/** `tessera-qsm` (argv after cli.js) under python's getrusage: a promise of its max RSS in bytes (exit 0 asserted). */
export async function cliWithRss(cwd, args) {
  const py = 'import resource,subprocess,sys\nr=subprocess.run(sys.argv[1:])\nprint(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\nsys.exit(r.returncode)';
  const r = await execAsync('python3', ['-c', py, process.execPath, CLI, ...args], { cwd });
  assert.equal(r.code, 0, r.log);
  return Number(r.stderr.trim().split('\n').at(-1)) * 1024;
}

export const snakemakeArgs = (config, extra = []) => ['-s', SNAKEFILE, '--cores', String(CORES), '--config', ...config, ...extra];

/** snakemake run in cwd to its end (exec's result). */
export const snakemake = (cwd, config, extra = []) => exec('snakemake', snakemakeArgs(config, extra), { cwd });

/** Snakemake 7 (Debian's), which the workflow is written for, or a failure saying how to get it. */
export function assertSnakemake7() {
  const version = spawnSync('snakemake', ['--version'], { encoding: 'utf8' });
  assert.ok(version.status === 0 && /^7\./.test(version.stdout), `snakemake 7 is needed (Debian's snakemake; scripts/bootstrap.sh installs it): ${version.error?.message ?? version.stdout}`);
}

/** The jobs snakemake started, from its log: [{rule, jobid, path, threads, mem_mb}]. */
export function jobs(log) {
  const out = [];
  for (const m of log.matchAll(/^(?:local)?(?:rule|checkpoint) (\w+):\n((?: {4}.*(?:\n|$))*)/gm)) {
    const g = (re) => re.exec(m[2])?.[1];
    const mem = g(/mem_mb=(\d+)/);
    out.push({ rule: m[1], jobid: g(/jobid: (\d+)/), path: g(/wildcards: path=([^,\n]+)/), threads: Number(g(/threads: (\d+)/) ?? 1), mem_mb: mem === undefined ? undefined : Number(mem) });
  }
  return out;
}

/** Every file under d (relative paths). */
export function walk(d, base = d) {
  if (!fs.existsSync(d)) return [];
  return fs.readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(d, e.name), base) : [path.relative(base, path.join(d, e.name))]));
}

/** A 4D NIfTI-1 (echoes along dim 4) as one 3D file per echo: the header with dim[0] = 3, dim[4] = 1, then that echo's bytes. */
export function splitEchoes(file4d) {
  const b = gunzip(file4d);
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  assert.equal(dv.getInt32(0, true), 348, `${file4d}: a little-endian NIfTI-1 is expected`);
  const offset = Math.round(dv.getFloat32(108, true));
  const [nx, ny, nz, echoes] = [42, 44, 46, 48].map((o) => dv.getInt16(o, true));
  const bytes = nx * ny * nz * (dv.getInt16(72, true) / 8);
  return Array.from({ length: echoes }, (_, e) => {
    const h = Buffer.from(b.subarray(0, offset));
    h.writeInt16LE(3, 40);
    h.writeInt16LE(1, 48);
    return zlib.gzipSync(Buffer.concat([h, b.subarray(offset + e * bytes, offset + (e + 1) * bytes)]));
  });
}

/** The anat folder and file stem of a subject in the tree. */
export const anatOf = (bids, s) => ({ anat: path.join(bids, path.dirname(s.path)), stem: path.basename(s.path) });

/**
 * Writes the phantom BIDS tree of `subjects` under dir/bids (tessera: an API instance, for the phantoms), with
 * dir/ref/phase4d.nii.gz and dir/ref/mag4d.nii.gz (the phase subject's echoes as 4D files) and dir/lot.onnx (the
 * phase network's weights). Returns the tree's path.
 */
export async function writeBidsTree(dir, tessera, subjects = SUBJECTS) {
  const bids = path.join(dir, 'bids');
  for (const s of subjects) {
    const geometry = { dims: s.dims, voxelMm: [1.5, 1.5, 1.5] };
    const { field, mask } = await tessera.phantom({ geometry, seed: s.seed });
    const like = { dims: s.dims, voxelMm: geometry.voxelMm };
    const { anat, stem } = anatOf(bids, s);
    put(path.join(anat, `${stem}_desc-brain_mask.nii.gz`), await writeNifti(Float32Array.from(mask), like, { gzip: true }));
    if (s.kind === 'field') {
      put(path.join(anat, `${stem}_localfield.nii.gz`), await writeNifti(field, like, { gzip: true }));
      continue;
    }
    // Wrapped phase of the phantom's field with an offset (so it wraps), two echoes, and a magnitude.
    const n = field.length;
    const phase = new Float32Array(2 * n);
    const mag = new Float32Array(2 * n);
    for (let e = 0; e < 2; e++) {
      const ph = Float32Array.from(field, (v) => {
        const x = 2 * Math.PI * GAMMA_BAR_MHZ_PER_T * B0 * TE[e] * v + 2.5;
        return Math.atan2(Math.sin(x), Math.cos(x));
      });
      const mg = Float32Array.from(mask, (m, i) => (m ? 1 : 0.05) * Math.exp(-TE[e] / 0.04) * (1 + 0.1 * Math.sin(i)));
      phase.set(ph, e * n);
      mag.set(mg, e * n);
      put(path.join(anat, `${stem}_echo-${e + 1}_part-phase_MEGRE.nii.gz`), await writeNifti(ph, like, { gzip: true }));
      put(path.join(anat, `${stem}_echo-${e + 1}_part-mag_MEGRE.nii.gz`), await writeNifti(mg, like, { gzip: true }));
      // EchoTime per echo; MagneticFieldStrength once for both parts and echoes (BIDS inheritance).
      put(path.join(anat, `${stem}_echo-${e + 1}_part-phase_MEGRE.json`), JSON.stringify({ EchoTime: TE[e] }));
    }
    put(path.join(bids, 'MEGRE.json'), JSON.stringify({ MagneticFieldStrength: B0 }));
    put(path.join(dir, 'ref', 'phase4d.nii.gz'), await nifti4d(phase, 2, like));
    put(path.join(dir, 'ref', 'mag4d.nii.gz'), await nifti4d(mag, 2, like));
  }
  put(path.join(bids, 'dataset_description.json'), JSON.stringify({ Name: 'phantoms', BIDSVersion: '1.9.0' }));
  fs.writeFileSync(path.join(dir, 'lot.onnx'), lotNet());
  return bids;
}

/**
 * A fresh temporary folder (named from prefix) holding the phantom BIDS tree of `subjects` (writeBidsTree, with a
 * runtime of its own). Returns {dir, bids}.
 */
export async function bidsTreeIn(prefix, subjects = SUBJECTS) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const tessera = await createTessera({ workers: 1 });
  try {
    return { dir, bids: await writeBidsTree(dir, tessera, subjects) };
  } finally {
    await tessera.terminate();
  }
}

/** The workflow's config for the tree bids (dir: where lot.onnx lies) into out. */
export const bidsConfig = (dir, bids, out) => [`bids=${bids}`, `output=${out}`, 'field_model=demo-unet', `weights={"iqsm": "${path.join(dir, 'lot.onnx')}"}`, `cores_per_job=${CORES}`];

/**
 * The single-subject CLI input flags of a subject of the tree (the workflow plans and runs with the network's weights:
 * their graph gives its reach and its work per voxel); the phase subject's from dir/ref/phase4d.nii.gz.
 */
export function cliInput(dir, bids, s) {
  const { anat, stem } = anatOf(bids, s);
  const mask = ['--mask', path.join(anat, `${stem}_desc-brain_mask.nii.gz`), '--cores', String(CORES)];
  return s.kind === 'field'
    ? ['--field', path.join(anat, `${stem}_localfield.nii.gz`), '--model', 'demo-unet', '--weights', DEMO_NET, ...mask]
    : ['--phase', path.join(dir, 'ref', 'phase4d.nii.gz'), '--te', TE.join(','), '--b0', String(B0), '--model', 'iqsm', '--weights', path.join(dir, 'lot.onnx'), '--threads', String(CORES), ...mask];
}

/** Pearson r of x and y over the voxels where m is nonzero (both demeaned there). */
export function pearson(x, y, m) {
  let n = 0;
  let sx = 0;
  let sy = 0;
  for (let i = 0; i < x.length; i++) if (m[i]) (n += 1), (sx += x[i]), (sy += y[i]);
  let c = 0;
  let vx = 0;
  let vy = 0;
  for (let i = 0; i < x.length; i++) {
    if (!m[i]) continue;
    const a = x[i] - sx / n;
    const b = y[i] - sy / n;
    c += a * b;
    vx += a * a;
    vy += b * b;
  }
  return c / Math.sqrt(vx * vy);
}
