// cohort/Snakefile end to end with Debian's snakemake (7.21) on three small phantom subjects: two local field maps
// (the bundled demo U-Net) and one two-echo wrapped phase with magnitude (iQSM with the test LoT network of
// tests/js/phase-networks.js). Every χ is compared bit for bit with a single-subject `tessera-qsm invert` of the
// same inputs; the declared threads / mem_mb with `tessera-qsm plan --json`; a run killed mid-way (SIGKILL to
// snakemake and its jobs) is resumed; a re-run redoes only what is missing; the TSV-manifest route gives the
// same χ; bad inputs are refused by name before anything runs. phase_pipeline: the phantom scan of C++
// (tessera_phantom) as BIDS echoes through `tessera-qsm pipeline` (TV), bit for bit against direct runs and r > 0.8
// against its χ truth, with the intermediates kept; the manifest's method / model columns.
// ROMEO: the real 3-echo brain scan of ../shared/data/romeo-small split into BIDS echoes, through phase_pipeline with
// also swi,r2star: χ and the SWI / minIP / R2* / T2* derivatives bit for bit against the direct run on the 4D files.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { createTessera, readNifti, readEchoes, writeNifti, GAMMA_BAR_MHZ_PER_T } from '../bindings/js/index.js';
import { lotNet } from '../tests/js/phase-networks.js';
import { discover, pipelineConfig, CohortError } from './lib/subjects.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const SNAKEFILE = path.join(ROOT, 'cohort', 'Snakefile');
const CLI = path.join(ROOT, 'bindings', 'js', 'cli.js');
const DEMO_NET = path.join(ROOT, 'web', 'models', 'demo-unet.onnx');
const CORES = 2;
const TE = [0.004, 0.008];
const B0 = 3;

let dir; // everything of this test
let bids; // the BIDS tree
let refs; // path → reference χ bytes (decompressed), from single-subject CLI runs
let plans; // path → `tessera-qsm plan --json` of the same inputs
let rss; // path → max RSS (bytes) of the reference run
const p = (...a) => path.join(dir, ...a);

const SUBJECTS = [
  { path: 'sub-01/anat/sub-01', kind: 'field', dims: [48, 48, 40], seed: 1 },
  { path: 'sub-02/ses-a/anat/sub-02_ses-a', kind: 'field', dims: [56, 48, 48], seed: 2 },
  { path: 'sub-03/anat/sub-03', kind: 'phase', dims: [48, 48, 40], seed: 3 },
];

function put(file, bytes) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, bytes);
}

/** A 4D NIfTI of the echoes written here (not by the workflow's stacker): the single-subject reference's input. */
async function writeNifti4D(data, like, echoes) {
  const [x, y, z] = like.dims;
  const b = await writeNifti(data, { ...like, dims: [x, y, z * echoes] });
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  dv.setInt16(40, 4, true);
  dv.setInt16(46, z, true);
  dv.setInt16(48, echoes, true);
  return b;
}

const gunzip = (file) => {
  const b = fs.readFileSync(file);
  return b[0] === 0x1f && b[1] === 0x8b ? zlib.gunzipSync(b) : b;
};

/** Runs a command to its end: {code, signal, stdout, stderr}. */
function exec(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...opts });
  if (r.error) throw r.error;
  return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr, log: r.stdout + r.stderr };
}

/** `tessera-qsm` under python's getrusage, for the child's max RSS. */
function cliWithRss(args) {
  const py = 'import resource,subprocess,sys\nr=subprocess.run(sys.argv[1:])\nprint(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\nsys.exit(r.returncode)';
  const r = exec('python3', ['-c', py, process.execPath, CLI, ...args], { cwd: dir });
  assert.equal(r.code, 0, r.log ?? r.stderr);
  return Number(r.stderr.trim().split('\n').at(-1)) * 1024;
}

const snakemakeArgs = (config, extra = []) => ['-s', SNAKEFILE, '--cores', String(CORES), '--config', ...config, ...extra];

function snakemake(config, extra = []) {
  return exec('snakemake', snakemakeArgs(config, extra), { cwd: dir });
}

const bidsConfig = (out) => [`bids=${bids}`, `output=${out}`, 'field_model=demo-unet', `weights={"iqsm": "${p('lot.onnx')}"}`, `cores_per_job=${CORES}`];

/** The jobs snakemake started, from its log: [{rule, jobid, path, threads, mem_mb}]. */
function jobs(log) {
  const out = [];
  for (const m of log.matchAll(/^(?:local)?(?:rule|checkpoint) (\w+):\n((?: {4}.*(?:\n|$))*)/gm)) {
    const g = (re) => re.exec(m[2])?.[1];
    const mem = g(/mem_mb=(\d+)/);
    out.push({ rule: m[1], jobid: g(/jobid: (\d+)/), path: g(/wildcards: path=([^,\n]+)/), threads: Number(g(/threads: (\d+)/) ?? 1), mem_mb: mem === undefined ? undefined : Number(mem) });
  }
  return out;
}

/** Every file under d (relative paths). */
function walk(d, base = d) {
  if (!fs.existsSync(d)) return [];
  return fs.readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(d, e.name), base) : [path.relative(base, path.join(d, e.name))]));
}

/** Each subject's χ in out equals its reference, bit for bit (header and data, decompressed). */
function assertSameAsCli(out, which = SUBJECTS) {
  for (const s of which) {
    const file = path.join(out, `${s.path}_Chimap.nii.gz`);
    assert.ok(fs.existsSync(file), `${file} is missing`);
    const got = gunzip(file);
    assert.equal(got.length, refs[s.path].length, s.path);
    assert.ok(got.subarray(352).equals(refs[s.path].subarray(352)), `${s.path}: χ differs from the single-subject CLI run`);
    assert.ok(got.equals(refs[s.path]), `${s.path}: the NIfTI header differs from the single-subject CLI run`);
  }
}

before(async () => {
  const version = spawnSync('snakemake', ['--version'], { encoding: 'utf8' });
  assert.ok(version.status === 0 && /^7\./.test(version.stdout), `snakemake 7 is needed (Debian's snakemake; scripts/bootstrap.sh installs it): ${version.error?.message ?? version.stdout}`);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-cohort-'));
  bids = p('bids');
  const tessera = await createTessera({ workers: 1 });
  try {
    for (const s of SUBJECTS) {
      const geometry = { dims: s.dims, voxelMm: [1.5, 1.5, 1.5] };
      const { field, mask } = await tessera.phantom({ geometry, seed: s.seed });
      const like = { dims: s.dims, voxelMm: geometry.voxelMm };
      const anat = path.join(bids, path.dirname(s.path));
      const stem = path.basename(s.path);
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
      put(p('ref', 'phase4d.nii.gz'), await writeNifti4D(phase, like, 2));
      put(p('ref', 'mag4d.nii.gz'), await writeNifti4D(mag, like, 2));
    }
  } finally {
    await tessera.terminate();
  }
  put(path.join(bids, 'dataset_description.json'), JSON.stringify({ Name: 'phantoms', BIDSVersion: '1.9.0' }));
  fs.writeFileSync(p('lot.onnx'), lotNet());

  // The single-subject CLI runs and plans of the same inputs (the phase from the 4D file written above).
  refs = {};
  plans = {};
  rss = {};
  for (const s of SUBJECTS) {
    const anat = path.join(bids, path.dirname(s.path));
    const stem = path.basename(s.path);
    const mask = ['--mask', path.join(anat, `${stem}_desc-brain_mask.nii.gz`), '--cores', String(CORES)];
    // The workflow plans and runs with the network's weights (their graph: its reach and its work per voxel).
    const input =
      s.kind === 'field'
        ? ['--field', path.join(anat, `${stem}_localfield.nii.gz`), '--model', 'demo-unet', '--weights', DEMO_NET, ...mask]
        : ['--phase', p('ref', 'phase4d.nii.gz'), '--te', TE.join(','), '--b0', String(B0), '--model', 'iqsm', '--weights', p('lot.onnx'), '--threads', String(CORES), ...mask];
    const plan = exec(process.execPath, [CLI, 'plan', ...input, '--json']);
    assert.equal(plan.code, 0, plan.log ?? plan.stderr);
    plans[s.path] = JSON.parse(plan.stdout);
    const out = p('ref', `${stem}.nii.gz`);
    const extra = s.kind === 'field' ? [] : ['--magnitude', p('ref', 'mag4d.nii.gz')];
    rss[s.path] = cliWithRss(['invert', ...input, ...extra, '--out', out, '--quiet']);
    refs[s.path] = gunzip(out);
  }
});

after(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('BIDS tree: χ equal to single-subject CLI runs, resources from the plan, dataset_description, weights fetched once; a re-run redoes only what is missing', { timeout: 180000 }, () => {
  const out = p('deriv-full');
  const r = snakemake(bidsConfig(out));
  assert.equal(r.code, 0, r.log ?? r.stderr);
  assertSameAsCli(out);
  const ran = jobs(r.log);
  // Weights: one job per file for the cohort (demo-unet once for its two subjects), sha256 checked.
  assert.deepEqual(ran.filter((j) => j.rule === 'weights').length, 2);
  assert.match(r.log, /weights demo-unet\.onnx: 5609982 bytes from .*web\/models\/demo-unet\.onnx, sha256 750a2452\w+, sha256 verified/);
  assert.match(r.log, /weights iqsm\.onnx: \d+ bytes .* NOT verified: no sha256 known for it \(pin one in the config/);
  assert.equal(ran.filter((j) => j.rule === 'stack_echoes').length, 2); // phase and magnitude of sub-03
  for (const s of SUBJECTS) {
    const plan = plans[s.path];
    // The workflow's plan is `tessera-qsm plan --json` of the same inputs, and the run obeyed it (its report's plan).
    assert.deepEqual(JSON.parse(fs.readFileSync(path.join(out, '.tessera', `${s.path}_plan.json`), 'utf8')), plan);
    const report = JSON.parse(fs.readFileSync(path.join(out, `${s.path}_Chimap.json`), 'utf8'));
    assert.deepEqual(report.plan, plan, `${s.path}: the run's plan is not the declared one`);
    assert.equal(report.output, `${s.path}_Chimap.nii.gz`);
    assert.equal(report.network.model, s.kind === 'field' ? 'demo-unet' : 'iqsm');
    if (s.kind === 'phase') {
      assert.deepEqual(report.inputs.phase.te, TE);
      assert.equal(report.inputs.phase.b0Tesla, B0);
      assert.equal(report.inputs.phase.echoes, 2);
    }
    // Declared: threads = tiles in flight × the plan's threads per worker (whole volume: cores_per_job), mem_mb = the plan's
    // peak + node + each worker (cohort/config.yaml: 128 + 256 per worker); and the run fits it.
    const inv = ran.find((j) => j.rule === 'invert' && j.path === s.path);
    assert.ok(inv, `no invert job for ${s.path}`);
    assert.equal(inv.threads, plan.tilesInFlight * plan.threadsPerWorker, s.path);
    assert.equal(inv.mem_mb, Math.ceil(plan.peakBytes / 1e6) + 128 + 256 * plan.tilesInFlight, s.path);
    assert.ok(rss[s.path] <= inv.mem_mb * 2 ** 20, `${s.path}: the run's RSS ${rss[s.path]} B exceeds the declared ${inv.mem_mb} MB`);
  }
  const desc = JSON.parse(fs.readFileSync(path.join(out, 'dataset_description.json'), 'utf8'));
  const version = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version;
  assert.equal(desc.DatasetType, 'derivative');
  assert.match(desc.BIDSVersion, /^1\.\d+\.\d+$/);
  assert.equal(desc.GeneratedBy[0].Name, 'tessera-qsm');
  assert.equal(desc.GeneratedBy[0].Version, version);
  assert.match(desc.GeneratedBy[0].Description, /demo-unet.*iqsm/);
  assert.deepEqual(desc.SourceDatasets, [{ URL: `file://${bids}` }]);
  // Outputs only where BIDS derivatives put them (the workflow's own state under hidden folders); no temp file.
  const visible = walk(out).filter((f) => !f.split(path.sep).some((c) => c.startsWith('.'))).sort();
  assert.deepEqual(visible, ['dataset_description.json', ...SUBJECTS.flatMap((s) => [`${s.path}_Chimap.json`, `${s.path}_Chimap.nii.gz`])].sort());
  assert.deepEqual(walk(out).filter((f) => /partial|MEGRE/.test(f)), []);

  // One χ removed: only that subject runs again (its plan and the weights are kept, the rest is up to date).
  const mtimes = Object.fromEntries(SUBJECTS.map((s) => [s.path, fs.statSync(path.join(out, `${s.path}_Chimap.nii.gz`)).mtimeMs]));
  fs.rmSync(path.join(out, `${SUBJECTS[1].path}_Chimap.nii.gz`));
  const again = snakemake(bidsConfig(out));
  assert.equal(again.code, 0, again.log ?? again.stderr);
  assert.deepEqual(jobs(again.log).filter((j) => j.rule !== 'all').map((j) => `${j.rule} ${j.path}`), [`invert ${SUBJECTS[1].path}`]);
  assertSameAsCli(out);
  for (const s of [SUBJECTS[0], SUBJECTS[2]]) assert.equal(fs.statSync(path.join(out, `${s.path}_Chimap.nii.gz`)).mtimeMs, mtimes[s.path]);
});

test('measure_reach: each field network\'s reach is measured once for the cohort, and every plan and run of it takes that file: χ equal to the CLI with --context it; a value not true or false is refused', { timeout: 180000 }, async () => {
  const out = p('deriv-reach');
  const r = snakemake([...bidsConfig(out), 'measure_reach=true']);
  assert.equal(r.code, 0, r.log ?? r.stderr);
  // One probe for demo-unet's two subjects; none for iQSM (a whole-volume network has no reach to plan with).
  assert.deepEqual(jobs(r.log).filter((j) => j.rule === 'reach').length, 1);
  const reachFile = path.join(out, '.tessera', 'reach', 'demo-unet.json');
  const reach = JSON.parse(fs.readFileSync(reachFile, 'utf8'));
  assert.ok(Array.isArray(reach.probe.within) && reach.probe.within.at(-1) === 1, 'the probe profile');
  assert.match(reach.weightsSha256[0], /^750a2452[0-9a-f]{56}$/);
  for (const s of SUBJECTS) {
    const report = JSON.parse(fs.readFileSync(path.join(out, `${s.path}_Chimap.json`), 'utf8'));
    if (s.kind !== 'field') {
      assert.equal(report.options.contextFile, null, `${s.path}: a phase network takes no reach`);
      continue;
    }
    assert.equal(report.options.contextFile, '.tessera/reach/demo-unet.json');
    assert.equal(report.plan.context.measured, true);
    assert.equal(report.plan.context.radius90, reach.probe.radius90);
    const plan = JSON.parse(fs.readFileSync(path.join(out, '.tessera', `${s.path}_plan.json`), 'utf8'));
    assert.deepEqual(report.plan, plan, `${s.path}: the run's plan is not the declared one`);
    // The single-subject CLI run with the same file: the same χ, bit for bit.
    const anat = path.join(bids, path.dirname(s.path));
    const stem = path.basename(s.path);
    const ref = p('ref', `${stem}-reach.nii.gz`);
    const cli = exec(process.execPath, [CLI, 'invert', '--field', path.join(anat, `${stem}_localfield.nii.gz`), '--model', 'demo-unet', '--weights', DEMO_NET, '--mask', path.join(anat, `${stem}_desc-brain_mask.nii.gz`), '--cores', String(CORES), '--context', reachFile, '--out', ref, '--quiet']);
    assert.equal(cli.code, 0, cli.log);
    assert.ok(gunzip(path.join(out, `${s.path}_Chimap.nii.gz`)).equals(gunzip(ref)), `${s.path}: χ differs from the CLI run with --context`);
  }
  await assert.rejects(discover({ bids, field_model: 'demo-unet', measure_reach: 'maybe' }), /config measure_reach must be true or false, got 'maybe'/);
});

/** Whether a `cli.js invert` process runs in the process group pgid (Linux /proc). */
function cliRunning(pgid) {
  for (const pid of fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]) !== pgid) continue;
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (cmd.some((c) => c.endsWith('cli.js')) && cmd.includes('invert')) return true;
    } catch {
      /* gone meanwhile */
    }
  }
  return false;
}

/**
 * Starts the workflow in its own process group and sends sig to the group (snakemake and its jobs, as Ctrl-C in a
 * terminal does) as soon as one invert job has finished while another runs. Returns {finished, started, log, code,
 * signal}: the subjects whose invert snakemake saw finish / started in this run.
 */
async function interrupt(out, sig, extra = []) {
  const child = spawn('snakemake', snakemakeArgs(bidsConfig(out), extra), { cwd: dir, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  let finished = null;
  let started = [];
  const onData = (d) => {
    log += d;
    if (finished) return;
    const inverts = jobs(log).filter((j) => j.rule === 'invert');
    const done = inverts.filter((j) => new RegExp(`Finished job ${j.jobid}\\.`).test(log));
    if (done.length >= 1 && inverts.length > done.length) {
      finished = done.map((j) => j.path);
      started = inverts.map((j) => j.path);
      // Once the next job's CLI runs (snakemake is then waiting for it), as a user would see it running.
      const t0 = Date.now();
      const poll = setInterval(() => {
        if (cliRunning(child.pid) || Date.now() - t0 > 20000) {
          clearInterval(poll);
          setTimeout(() => process.kill(-child.pid, sig), 500);
        }
      }, 50);
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const [code, signal] = await new Promise((r) => child.on('close', (c, s) => r([c, s])));
  assert.ok(finished, `snakemake ended before it could be interrupted:\n${log}`);
  return { finished, started, log, code, signal };
}

/** After an interrupted run: each χ on disk is complete (= the CLI's) with its report; some are missing. */
function assertNothingHalfWritten(out) {
  const present = SUBJECTS.filter((s) => fs.existsSync(path.join(out, `${s.path}_Chimap.nii.gz`)));
  assert.ok(present.length < SUBJECTS.length, 'every subject finished before the interruption: nothing left to resume');
  assertSameAsCli(out, present);
  for (const s of present) JSON.parse(fs.readFileSync(path.join(out, `${s.path}_Chimap.json`), 'utf8'));
  // Only clearly named temp files may be left (.<name>.<pid>.partial, <plan>.partial); the next run removes them.
  for (const f of walk(out).filter((x) => /partial/.test(x))) assert.match(path.basename(f), /^\..+\.\d+\.partial$|_plan\.json\.partial$/, f);
  return present.map((s) => s.path);
}

test('interrupted mid-run (Ctrl-C, then SIGKILL to snakemake and its jobs): no half-written χ or report; each resume finishes only what is missing and matches the CLI', { timeout: 180000 }, async () => {
  const out = p('deriv-killed');
  const chi = (k) => path.join(out, `${k}_Chimap.nii.gz`);
  // Ctrl-C: snakemake stops its running job (the CLI exits 130 and writes nothing) and releases its lock. A job it
  // was just starting may still finish (Snakemake 7 waits for it) without being recorded: complete, but marked
  // incomplete, so the next run is given --rerun-incomplete and redoes it.
  const first = await interrupt(out, 'SIGINT');
  assert.equal(first.code, 1, first.log);
  assert.match(first.log, /Terminating processes on user request/);
  const present = assertNothingHalfWritten(out);
  for (const k of first.finished) assert.ok(present.includes(k), `${k} finished but is missing`);
  const mtimes = Object.fromEntries(first.finished.map((k) => [k, fs.statSync(chi(k)).mtimeMs]));

  // Again, killed hard this time: the lock and the running job's incomplete marker stay.
  const second = await interrupt(out, 'SIGKILL', ['--rerun-incomplete']);
  assert.equal(second.signal, 'SIGKILL');
  for (const k of first.finished) assert.ok(!second.started.includes(k), `${k} was run again after Ctrl-C`);
  assertNothingHalfWritten(out);
  for (const k of second.finished) mtimes[k] = fs.statSync(chi(k)).mtimeMs;

  // Locked until --unlock; then --rerun-incomplete redoes the job that was running and what is missing, nothing else.
  const locked = snakemake(bidsConfig(out));
  assert.notEqual(locked.code, 0);
  assert.match(locked.log, /Directory cannot be locked[\s\S]*--unlock/);
  assert.equal(snakemake(bidsConfig(out), ['--unlock']).code, 0);
  const resumed = snakemake(bidsConfig(out), ['--rerun-incomplete']);
  assert.equal(resumed.code, 0, resumed.log);
  assertSameAsCli(out);
  const redone = jobs(resumed.log).filter((j) => j.rule === 'invert').map((j) => j.path);
  assert.ok(redone.length >= 1);
  for (const [k, t] of Object.entries(mtimes)) {
    assert.ok(!redone.includes(k), `${k} had finished before the kill and was run again`);
    assert.equal(fs.statSync(chi(k)).mtimeMs, t);
  }
  assert.deepEqual(walk(out).filter((f) => /partial|MEGRE/.test(f)), []);
  assert.deepEqual(walk(path.join(out, '.snakemake', 'incomplete')), []);
});

test('TSV manifest through the SLURM profile (a stand-in sbatch): the same χ as the CLI, sbatch asked for the planned memory and cores', { timeout: 180000 }, () => {
  const which = SUBJECTS.slice(1); // sub-02 (a session), sub-03 (phase)
  const rows = which.map((s) => {
    const anat = path.join('bids', path.dirname(s.path));
    const stem = path.basename(s.path);
    const [, sub, ses] = /^sub-([a-zA-Z0-9]+)(?:_ses-([a-zA-Z0-9]+))?/.exec(stem);
    const mask = path.join(anat, `${stem}_desc-brain_mask.nii.gz`);
    return s.kind === 'field'
      ? [sub, ses ?? '', path.join(anat, `${stem}_localfield.nii.gz`), '', '', mask, '', '', 'demo-unet']
      : [sub, ses ?? 'n/a', '', 'ref/phase4d.nii.gz', 'ref/mag4d.nii.gz', mask, TE.join(','), String(B0), 'iqsm'];
  });
  fs.writeFileSync(p('subjects.tsv'), `${['subject', 'session', 'field', 'phase', 'magnitude', 'mask', 'te', 'b0', 'model'].join('\t')}\n${rows.map((r) => r.join('\t')).join('\n')}\n`);
  // sbatch as a stand-in: records its arguments and runs the job script here, in the background (as SLURM would,
  // elsewhere), printing a job id as --parsable does.
  const bin = p('fakebin');
  put(path.join(bin, 'sbatch'), '#!/bin/bash\necho "$*" >> "$SBATCH_LOG"\nbash "${@: -1}" > /dev/null 2>&1 < /dev/null &\necho $!\n');
  fs.chmodSync(path.join(bin, 'sbatch'), 0o755);
  const out = p('deriv-manifest');
  const config = [`manifest=${p('subjects.tsv')}`, `output=${out}`, `weights={"iqsm": "${p('lot.onnx')}"}`, `cores_per_job=${CORES}`];
  const r = exec('snakemake', ['-s', SNAKEFILE, '--profile', path.join(ROOT, 'cohort', 'profiles', 'slurm'), '--config', ...config], {
    cwd: dir,
    // CI=true: Snakemake's cluster executor checks for finished jobs every second instead of every 10 s.
    env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, SBATCH_LOG: p('sbatch.log'), CI: 'true' },
  });
  assert.equal(r.code, 0, r.log);
  assertSameAsCli(out, which);
  // One sbatch per subject, each with its job's declared memory and cores (= its plan, as in the BIDS test).
  const submitted = fs.readFileSync(p('sbatch.log'), 'utf8').trim().split('\n');
  const inverts = jobs(r.log).filter((j) => j.rule === 'invert');
  assert.deepEqual(inverts.map((j) => j.path).sort(), which.map((s) => s.path).sort());
  assert.equal(submitted.length, which.length, submitted.join('\n'));
  for (const j of inverts) {
    const plan = plans[j.path];
    const mem = Math.ceil(plan.peakBytes / 1e6) + 128 + 256 * plan.tilesInFlight;
    const cpus = plan.tilesInFlight * plan.threadsPerWorker;
    const line = submitted.find((l) => l.includes(`snakejob.invert.${j.jobid}.sh`));
    assert.ok(line, `no sbatch for job ${j.jobid} (${j.path}):\n${submitted.join('\n')}`);
    assert.match(line, new RegExp(`--job-name=tessera-invert --mem=${mem} --cpus-per-task=${cpus} `));
  }
  assert.equal(jobs(r.log).filter((j) => j.rule === 'stack_echoes').length, 0); // the manifest gave the 4D phase
  const desc = JSON.parse(fs.readFileSync(path.join(out, 'dataset_description.json'), 'utf8'));
  assert.deepEqual(desc.SourceDatasets, [{ URL: `file://${p('subjects.tsv')}` }]);
});

test('bad inputs are refused by name, with the fix, before anything runs', async () => {
  const refused = async (config, pattern) => {
    await assert.rejects(discover(config), (e) => {
      assert.ok(e instanceof CohortError, e.stack);
      assert.match(e.message, pattern);
      return true;
    });
  };
  // Through snakemake: the message, no traceback, exit 1.
  fs.mkdirSync(p('empty-bids', 'sub-01', 'anat'), { recursive: true });
  const none = snakemake([`bids=${p('empty-bids')}`], ['-n']);
  assert.equal(none.code, 1);
  assert.match(none.log, /no subject to run in the BIDS folder .*empty-bids: its 1 sub-\* folder\(s\) hold no sub-<label>\/\[ses-<label>\/\]anat\/ input: a local field <prefix>_localfield\.nii\.gz, or a wrapped phase/);
  assert.doesNotMatch(none.log, /Traceback/);
  await refused({ bids: p('nowhere') }, /the BIDS folder .*nowhere does not exist/);
  await refused({}, /give exactly one of config bids=<BIDS folder> or manifest=<subjects\.tsv>/);

  // A phase without EchoTime in its sidecar.
  const noTe = p('bids-note', 'sub-09', 'anat');
  for (const f of fs.readdirSync(path.join(bids, 'sub-03', 'anat'))) {
    if (f.endsWith('.nii.gz')) fs.cpSync(path.join(bids, 'sub-03', 'anat', f), path.join(noTe, f.replaceAll('sub-03', 'sub-09')));
  }
  fs.writeFileSync(path.join(noTe, 'sub-09_echo-1_part-phase_MEGRE.json'), JSON.stringify({ EchoTime: 0.004, MagneticFieldStrength: 3 }));
  await refused({ bids: p('bids-note') }, /sub-09\/anat\/sub-09: the phase sub-09_echo-2_part-phase_MEGRE\.nii\.gz has no EchoTime in a JSON sidecar \(no sub-09_echo-2_part-phase_MEGRE\.json found\): add "EchoTime" in seconds/);
  fs.writeFileSync(path.join(noTe, 'sub-09_echo-2_part-phase_MEGRE.json'), JSON.stringify({ EchoTime: 8 }));
  await refused({ bids: p('bids-note') }, /EchoTime 8 in .*sub-09_echo-2_part-phase_MEGRE\.json is implausible: BIDS gives it in seconds/);
  fs.writeFileSync(path.join(noTe, 'sub-09_echo-2_part-phase_MEGRE.json'), JSON.stringify({ EchoTime: 0.008 }));
  fs.rmSync(path.join(noTe, 'sub-09_echo-2_part-mag_MEGRE.nii.gz'));
  await refused({ bids: p('bids-note') }, /the magnitude must have every echo of the phase \(phase echoes 1, 2; magnitude echoes 1\)/);
  fs.rmSync(path.join(noTe, 'sub-09_echo-1_part-mag_MEGRE.nii.gz'));
  fs.rmSync(path.join(noTe, 'sub-09_desc-brain_mask.nii.gz'));
  await refused({ bids: p('bids-note') }, /sub-09\/anat\/sub-09: no mask in .*: add sub-09_desc-brain_mask\.nii\.gz/);

  // Manifest rows: a missing file, a duplicate, a phase without te, a wrong network.
  const header = 'subject\tfield\tphase\tmask\tte\tmodel\n';
  const mask = 'bids/sub-01/anat/sub-01_desc-brain_mask.nii.gz';
  const manifest = (rows) => {
    fs.writeFileSync(p('bad.tsv'), header + rows.map((r) => r.join('\t')).join('\n'));
    return { manifest: p('bad.tsv'), field_model: 'demo-unet' };
  };
  await refused(manifest([['01', 'bids/sub-01/anat/gone.nii.gz', '', mask, '', '']]), /bad\.tsv line 2 \(sub-01\): the field bids\/sub-01\/anat\/gone\.nii\.gz does not exist .*paths are relative to the manifest's folder/);
  const field = 'bids/sub-01/anat/sub-01_localfield.nii.gz';
  await refused(manifest([['01', field, '', mask, '', ''], ['sub-01', field, '', mask, '', '']]), /line 3: sub-01 is also on line 2: one row per subject and session/);
  await refused(manifest([['01', '', 'ref/phase4d.nii.gz', mask, '', 'iqsm']]), /line 2 \(sub-01\): a phase row needs te \(echo times in seconds, comma-separated\) or EchoTime in the JSON sidecar .*phase4d\.json \(not found\)/);
  await refused(manifest([['01', field, '', mask, '', 'iqsm']]), /line 2 \(sub-01\): iqsm takes a wrapped phase, this run gives a local field \(networks for it: .*demo-unet/);
  await refused(manifest([['01', field, '', mask, '', 'nonet']]), /unknown network 'nonet'/);
  await refused(manifest([['01', field, mask, '', '']]), /line 2 has 5 cell\(s\), the header 6/);

  // Weights: a sha256 pinned in the config is what the weights job checks; a wrong one fails it by name.
  const pinned = await discover({ bids, field_model: 'demo-unet', weights: { iqsm: { source: p('lot.onnx'), sha256: 'AB'.repeat(32) } } });
  assert.deepEqual(pinned.models.iqsm.weights, [{ file: 'iqsm.onnx', source: p('lot.onnx'), bytes: 0, sha256: 'ab'.repeat(32) }]);
  const wrong = exec(process.execPath, [path.join(ROOT, 'cohort', 'lib', 'weights.js'), '--source', p('lot.onnx'), '--out', p('w', 'iqsm.onnx'), '--sha256', 'ab'.repeat(32)]);
  assert.equal(wrong.code, 1);
  assert.match(wrong.stderr, /^error: WeightsMismatch: the sha256 of the network weights .* is [0-9a-f]{64}, expected (ab){32}/);
  assert.ok(!fs.existsSync(p('w', 'iqsm.onnx')));
  await refused({ bids, field_model: 'demo-unet', weights: { iqsm: { source: p('lot.onnx'), sha256: 'xyz' } } }, /config weights\.iqsm: sha256 'xyz' is not 64 hex digits/);
  await refused({ bids, field_model: 'demo-unet', weights: { 'demo-unet': p('gone.onnx') } }, /config weights\.demo-unet: .*gone\.onnx does not exist/);

  // An all-zero mask: the C++ core refuses the plan; snakemake stops with the message and writes no χ.
  const zero = p('bids-zero', 'sub-05', 'anat');
  fs.mkdirSync(zero, { recursive: true });
  fs.cpSync(path.join(bids, 'sub-01', 'anat', 'sub-01_localfield.nii.gz'), path.join(zero, 'sub-05_localfield.nii.gz'));
  const like = readNifti(new Uint8Array(gunzip(path.join(zero, 'sub-05_localfield.nii.gz'))));
  fs.writeFileSync(path.join(zero, 'sub-05_desc-brain_mask.nii.gz'), await writeNifti(new Float32Array(like.data.length), like, { gzip: true }));
  const z = snakemake([`bids=${p('bids-zero')}`, 'field_model=demo-unet']);
  assert.notEqual(z.code, 0);
  assert.match(z.log, /error: the mask holds no voxel: all 92160 values of the 48×48×40 mask are 0.*check the mask file/);
  assert.ok(!fs.existsSync(p('bids-zero', 'derivatives', 'tessera', 'sub-05', 'anat', 'sub-05_Chimap.nii.gz')));
});

test('stack-echoes keeps the stored values byte for byte and refuses echoes of different acquisitions', async () => {
  const anat = path.join(bids, 'sub-03', 'anat');
  const echoes = [1, 2].map((e) => path.join(anat, `sub-03_echo-${e}_part-phase_MEGRE.nii.gz`));
  const out = p('stacked.nii');
  const r = exec(process.execPath, [path.join(ROOT, 'cohort', 'lib', 'stack-echoes.js'), '--out', out, ...echoes]);
  assert.equal(r.code, 0, r.log ?? r.stderr);
  const stacked = readEchoes(new Uint8Array(fs.readFileSync(out)));
  assert.equal(stacked.echoes, 2);
  const ref = readEchoes(new Uint8Array(gunzip(p('ref', 'phase4d.nii.gz'))));
  assert.deepEqual(stacked.dims, ref.dims);
  assert.ok(Buffer.from(stacked.data.buffer).equals(Buffer.from(ref.data.buffer)));
  const other = path.join(bids, 'sub-01', 'anat', 'sub-01_localfield.nii.gz');
  const bad = exec(process.execPath, [path.join(ROOT, 'cohort', 'lib', 'stack-echoes.js'), '--out', p('bad.nii'), echoes[0], path.join(bids, 'sub-02', 'ses-a', 'anat', 'sub-02_ses-a_localfield.nii.gz'), other]);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /^error: the echoes .*sub-03_echo-1_part-phase_MEGRE\.nii\.gz and .*sub-02_ses-a_localfield\.nii\.gz differ in dims 56×48×48 vs 48×48×40.*: they must be one acquisition/);
  assert.ok(!fs.existsSync(p('bad.nii')));
});

/** Pearson r of x and y over the voxels where m is nonzero (both demeaned there). */
function pearson(x, y, m) {
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

/** A 4D NIfTI-1 (echoes along dim 4) as one 3D file per echo: the header with dim[0] = 3, dim[4] = 1, then that echo's bytes. */
function splitEchoes(file4d) {
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

test('phase_pipeline: BIDS phase + magnitude echoes (mask optional) through tessera-qsm pipeline: χ bit-identical to direct runs, r > 0.8 against the phantom, intermediates kept, mem_mb from the pipeline plan; the manifest method column; a phase echo without TE refused before anything runs', { timeout: 120000 }, async () => {
  const t0 = Date.now();
  const d = p('pipeline');
  const q = (...a) => path.join(d, ...a);
  fs.mkdirSync(q('scan'), { recursive: true });
  // The phantom scan (multi-echo wrapped phase, magnitude, the χ truth and brain mask), from C++.
  const phantom = path.join(ROOT, 'build', 'native', 'tessera_phantom');
  assert.ok(fs.existsSync(phantom), `${phantom} is missing: scripts/build.sh native`);
  const scanArgs = ['--dims', '48', '48', '36', '--voxel', '4', '4', '4', '--te-ms', '4,8,12', '--snr', '100'];
  const files = { phase: q('scan', 'phase.nii'), magnitude: q('scan', 'mag.nii'), chi: q('scan', 'chi.nii'), mask: q('scan', 'mask.nii'), json: q('scan', 'scan.json') };
  const ph = exec(phantom, [...scanArgs, '--phase-out', files.phase, '--magnitude-out', files.magnitude, '--chi-out', files.chi, '--mask-out', files.mask, '--json-out', files.json]);
  assert.equal(ph.code, 0, ph.log);
  const scan = JSON.parse(fs.readFileSync(files.json, 'utf8'));
  assert.deepEqual(scan.EchoTime, [0.004, 0.008, 0.012]);
  const truth = readNifti(new Uint8Array(gunzip(files.chi))).data;

  // BIDS: sub-01 without a mask (the pipeline makes it from the magnitude), sub-02 with the phantom's brain mask.
  // Sidecars: EchoTime per echo, MagneticFieldStrength at the top (BIDS inheritance).
  const tree = q('bids');
  const phases = splitEchoes(files.phase);
  const mags = splitEchoes(files.magnitude);
  for (const sub of ['01', '02']) {
    const anat = path.join(tree, `sub-${sub}`, 'anat');
    phases.forEach((b, e) => {
      put(path.join(anat, `sub-${sub}_echo-${e + 1}_part-phase_MEGRE.nii.gz`), b);
      put(path.join(anat, `sub-${sub}_echo-${e + 1}_part-mag_MEGRE.nii.gz`), mags[e]);
      put(path.join(anat, `sub-${sub}_echo-${e + 1}_part-phase_MEGRE.json`), JSON.stringify({ EchoTime: scan.EchoTime[e] }));
    });
  }
  put(path.join(tree, 'MEGRE.json'), JSON.stringify({ MagneticFieldStrength: scan.MagneticFieldStrength }));
  fs.copyFileSync(files.mask, path.join(tree, 'sub-02', 'anat', 'sub-02_desc-brain_mask.nii'));
  // TV with a stronger λ than the default (the 4 mm phantom is coarse), V-SHARP radii up to 16 mm (4 voxels).
  const pipeline = { method: 'tv', params: { lambda: 0.0005 }, options: { background: 'vsharp', 'vsharp.maxRadius': 16 } };
  const flags = ['--te', scan.EchoTime.join(','), '--b0', String(scan.MagneticFieldStrength), '--magnitude', files.magnitude, '--option', 'background=vsharp', '--option', 'vsharp.maxRadius=16', '--cores', String(CORES)];
  // The direct runs (each under python's getrusage for its max RSS), all at once.
  fs.mkdirSync(q('ref'), { recursive: true });
  const py = 'import resource,subprocess,sys\nr=subprocess.run(sys.argv[1:])\nprint(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\nsys.exit(r.returncode)';
  const direct = (name, extra) =>
    new Promise((resolve, reject) => {
      const out = q('ref', `${name}.nii.gz`);
      const child = spawn('python3', ['-c', py, process.execPath, CLI, 'pipeline', '--phase', files.phase, ...flags, ...extra, '--out', out, '--quiet'], { cwd: dir });
      let log = '';
      child.stdout.on('data', (b) => (log += b));
      child.stderr.on('data', (b) => (log += b));
      child.on('error', reject);
      child.on('close', (code) => (code === 0 ? resolve({ chi: gunzip(out), rss: Number(log.trim().split('\n').at(-1)) * 1024 }) : reject(new Error(`${name}: exit ${code}\n${log}`))));
    });
  const [ref01, ref02, ref11, ref13] = await Promise.all([
    direct('sub-01', ['--method', 'tv', '--param', 'lambda=0.0005']),
    direct('sub-02', ['--method', 'tv', '--param', 'lambda=0.0005', '--mask', files.mask]),
    direct('sub-11', ['--method', 'rts']),
    direct('sub-13', ['--model', 'demo-unet', '--weights', DEMO_NET]),
  ]);
  const refs2 = { 'sub-01': ref01, 'sub-02': ref02 };

  const out = q('deriv');
  const config = [`bids=${tree}`, `output=${out}`, `phase_pipeline=${JSON.stringify(pipeline)}`, 'keep_intermediates=true', `cores_per_job=${CORES}`];
  const r = snakemake(config);
  assert.equal(r.code, 0, r.log);
  const ran = jobs(r.log);
  assert.deepEqual(ran.filter((j) => ['invert', 'plan', 'weights'].includes(j.rule)), []);
  assert.equal(ran.filter((j) => j.rule === 'stack_echoes').length, 4); // phase and magnitude of each subject
  const rs = [];
  // The local field's derivatives are named after the background removal.
  const bg = pipeline.options.background;
  const stages = ['desc-brain_mask', 'desc-echofit_mask', 'desc-echofit_residual', 'desc-echofit_phaseoffset', 'desc-echofit_fieldmap', 'desc-echofit_totalfield', 'desc-unwrapped_phase', `desc-${bg}_localfield`, `desc-${bg}_mask`];
  for (const sub of ['sub-01', 'sub-02']) {
    const stem = path.join(out, sub, 'anat', sub);
    // χ: the direct `tessera-qsm pipeline` run's, bit for bit (header and data).
    assert.ok(gunzip(`${stem}_Chimap.nii.gz`).equals(refs2[sub].chi), `${sub}: χ differs from the direct tessera-qsm pipeline run`);
    // Against the phantom's truth where χ is defined (the pipeline's local mask, kept as an intermediate).
    const chi = readNifti(new Uint8Array(gunzip(`${stem}_Chimap.nii.gz`))).data;
    const local = readNifti(new Uint8Array(gunzip(`${stem}_desc-${bg}_mask.nii.gz`))).data;
    const rr = pearson(chi, truth, local);
    assert.ok(rr > 0.8, `${sub}: χ r ${rr.toFixed(3)} against the phantom's truth`);
    rs.push(`${sub} r ${rr.toFixed(3)}`);
    // The report: the run's inputs from the sidecars, its inversion, its plan = the job's plan, the intermediates.
    const report = JSON.parse(fs.readFileSync(`${stem}_Chimap.json`, 'utf8'));
    assert.deepEqual(report.inputs.te, scan.EchoTime);
    assert.equal(report.inputs.b0, scan.MagneticFieldStrength);
    assert.equal(report.inputs.echoes, 3);
    assert.equal(report.inputs.mask === null, sub === 'sub-01');
    assert.deepEqual(report.inversion, { method: 'tv', params: { lambda: 0.0005 } });
    assert.deepEqual(report.options, { background: 'vsharp', vsharp: { maxRadius: 16 } });
    assert.deepEqual(Object.values(report.intermediates), stages.map((s) => `${sub}_${s}.nii.gz`));
    const plan = JSON.parse(fs.readFileSync(path.join(out, '.tessera', `${sub}/anat/${sub}_pipeline-plan.json`), 'utf8'));
    assert.deepEqual(report.plan, plan.pipeline, `${sub}: the run's plan is not the declared one`);
    assert.deepEqual(plan.pipeline.stages, [...(sub === 'sub-01' ? ['brain mask'] : []), 'echo fit', 'V-SHARP', 'TV-ADMM']);
    assert.equal(plan.network, null);
    // Declared: threads = cores_per_job, mem_mb = the plan's peak + node (mem_base_mb); the direct run fits it.
    const job = ran.find((j) => j.rule === 'pipeline' && j.path === `${sub}/anat/${sub}`);
    assert.ok(job, `no pipeline job for ${sub}`);
    assert.equal(job.threads, CORES);
    assert.equal(job.mem_mb, Math.ceil(plan.pipeline.peakBytes / 1e6) + 128);
    assert.ok(refs2[sub].rss <= job.mem_mb * 2 ** 20, `${sub}: the run's RSS ${refs2[sub].rss} B exceeds the declared ${job.mem_mb} MB`);
    // Intermediates: the echoes' unwrapped phases stacked (4D), the given mask kept as the brain mask.
    const unwrapped = readEchoes(new Uint8Array(gunzip(`${stem}_desc-unwrapped_phase.nii.gz`)));
    assert.equal(unwrapped.echoes, 3);
    const brain = readNifti(new Uint8Array(gunzip(`${stem}_desc-brain_mask.nii.gz`))).data;
    if (sub === 'sub-02') {
      const given = readNifti(new Uint8Array(gunzip(files.mask))).data;
      assert.ok(brain.every((v, i) => (v !== 0) === (given[i] !== 0)));
    }
    assert.ok(local.every((v, i) => !v || brain[i]), `${sub}: the local mask leaves the brain mask`);
  }
  const visible = walk(out).filter((f) => !f.split(path.sep).some((c) => c.startsWith('.'))).sort();
  assert.deepEqual(visible, ['dataset_description.json', ...['sub-01', 'sub-02'].flatMap((s) => [`Chimap.json`, `Chimap.nii.gz`, ...stages.map((x) => `${x}.nii.gz`)].map((x) => `${s}/anat/${s}_${x}`))].sort());
  assert.deepEqual(walk(out).filter((f) => /partial|MEGRE|_stages/.test(f)), []);
  assert.match(JSON.parse(fs.readFileSync(path.join(out, 'dataset_description.json'), 'utf8')).GeneratedBy[0].Description, /tessera-qsm pipeline.*methods: tv/);

  // The manifest: a phase row's method column (rts, the config's options), a row without one (the config's tv; a
  // mask given), a row with a field network (the pipeline's --model), beside a local-field row (invert).
  const rel = (f) => path.relative(dir, f);
  const te = scan.EchoTime.join(',');
  const rows = [
    ['subject', 'phase', 'magnitude', 'field', 'mask', 'te', 'b0', 'method', 'model'],
    ['11', rel(files.phase), rel(files.magnitude), '', '', te, '3', 'rts', ''],
    ['12', rel(files.phase), rel(files.magnitude), '', rel(files.mask), te, '3', '', ''],
    ['13', rel(files.phase), rel(files.magnitude), '', '', te, '3', '', 'demo-unet'],
    ['14', '', '', rel(path.join(bids, 'sub-01', 'anat', 'sub-01_localfield.nii.gz')), rel(path.join(bids, 'sub-01', 'anat', 'sub-01_desc-brain_mask.nii.gz')), '', '', '', 'demo-unet'],
  ];
  fs.writeFileSync(p('pipeline.tsv'), `${rows.map((x) => x.join('\t')).join('\n')}\n`);
  const refs3 = {
    11: ref11.chi,
    12: ref02.chi,
    13: ref13.chi,
    14: refs['sub-01/anat/sub-01'],
  };
  const outM = q('deriv-manifest');
  const m = snakemake([`manifest=${p('pipeline.tsv')}`, `output=${outM}`, `phase_pipeline=${JSON.stringify(pipeline)}`, `cores_per_job=${CORES}`]);
  assert.equal(m.code, 0, m.log);
  for (const [sub, ref] of Object.entries(refs3)) {
    assert.ok(gunzip(path.join(outM, `sub-${sub}`, 'anat', `sub-${sub}_Chimap.nii.gz`)).equals(ref), `sub-${sub}: χ differs from its direct run`);
  }
  const mj = jobs(m.log);
  assert.deepEqual(mj.filter((j) => j.rule === 'pipeline').map((j) => j.path).sort(), ['sub-11/anat/sub-11', 'sub-12/anat/sub-12', 'sub-13/anat/sub-13']);
  assert.deepEqual(mj.filter((j) => j.rule === 'invert').map((j) => j.path), ['sub-14/anat/sub-14']);
  assert.equal(JSON.parse(fs.readFileSync(path.join(outM, 'sub-11', 'anat', 'sub-11_Chimap.json'), 'utf8')).inversion.method, 'rts');
  // The network's memory is on top of the pipeline's: its plan (no mask given: the whole volume) and its worker.
  const netPlan = JSON.parse(fs.readFileSync(path.join(outM, '.tessera', 'sub-13/anat/sub-13_pipeline-plan.json'), 'utf8'));
  assert.equal(mj.find((j) => j.path === 'sub-13/anat/sub-13' && j.rule === 'pipeline').mem_mb, Math.ceil(netPlan.pipeline.peakBytes / 1e6) + 128 + Math.ceil(netPlan.network.peakBytes / 1e6) + 256 * netPlan.network.tilesInFlight);

  // Refused by name before anything runs: a phase echo without its EchoTime, no mask and no magnitude, a wrong
  // phase_pipeline.
  fs.rmSync(path.join(tree, 'sub-02', 'anat', 'sub-02_echo-2_part-phase_MEGRE.json'));
  const refusedOut = q('deriv-refused');
  const bad = snakemake([`bids=${tree}`, `output=${refusedOut}`, `phase_pipeline=${JSON.stringify(pipeline)}`]);
  assert.equal(bad.code, 1, bad.log);
  assert.match(bad.log, /sub-02\/anat\/sub-02: the phase sub-02_echo-2_part-phase_MEGRE\.nii\.gz has no EchoTime in a JSON sidecar \(MEGRE\.json\): add "EchoTime" in seconds to sub-02_echo-2_part-phase_MEGRE\.json/);
  assert.doesNotMatch(bad.log, /Traceback|rule pipeline/);
  assert.deepEqual(walk(refusedOut).filter((f) => !f.startsWith('.snakemake')), []);
  put(path.join(tree, 'sub-02', 'anat', 'sub-02_echo-2_part-phase_MEGRE.json'), JSON.stringify({ EchoTime: scan.EchoTime[1] }));
  const refused = async (config, pattern) => {
    await assert.rejects(discover(config), (e) => {
      assert.ok(e instanceof CohortError, e.stack);
      assert.match(e.message, pattern);
      return true;
    });
  };
  for (let e = 1; e <= 3; e++) fs.renameSync(path.join(tree, 'sub-01', 'anat', `sub-01_echo-${e}_part-mag_MEGRE.nii.gz`), q(`mag-${e}.nii.gz`));
  await refused({ bids: tree, phase_pipeline: pipeline }, /sub-01\/anat\/sub-01: no mask and no magnitude in .*: the pipeline makes the brain mask from the magnitude: add sub-01_echo-<n>_part-mag_MEGRE\.nii\.gz for every echo, or sub-01_desc-brain_mask\.nii\.gz/);
  for (let e = 1; e <= 3; e++) fs.renameSync(q(`mag-${e}.nii.gz`), path.join(tree, 'sub-01', 'anat', `sub-01_echo-${e}_part-mag_MEGRE.nii.gz`));
  await refused({ bids: tree, phase_pipeline: { model: 'iqsm' } }, /sub-01: iqsm takes a wrapped phase, but this run goes through the pipeline .*: give a field network \(.*demo-unet.*\) or a method/);
  // The config itself (discover checks it first, against the schema; here directly, one schema for all).
  const tessera = await createTessera({ workers: 1 });
  const schema = await tessera.schema();
  await tessera.terminate();
  const wrong = (phase_pipeline, pattern) => assert.throws(() => pipelineConfig({ phase_pipeline }, schema), (e) => e instanceof CohortError && pattern.test(e.message));
  wrong('qsmx', /config phase_pipeline: unknown method 'qsmx' \(methods: tkd, .*rts/);
  wrong({ method: 'tv', params: { lamda: 1e-3 } }, /config phase_pipeline\.params: tv has no parameter 'lamda' \(its parameters: lambda, /);
  wrong({ method: 'tv', params: { lambda: 5 } }, /config phase_pipeline\.params: tv\.lambda 5 is not a number in \(0, 1\]/);
  wrong({ method: 'rts', options: { background: 'harp' } }, /config phase_pipeline\.options: background 'harp' is not one of vsharp, pdf, lbv, ismv, sharp, resharp/);
  wrong({ method: 'rts', options: { vsharp: { radius: 4 } } }, /config phase_pipeline\.options: unknown option 'vsharp\.radius' \(options: .*vsharp\.maxRadius/);
  wrong({ method: 'rts', model: 'xqsm' }, /config phase_pipeline: give one inversion of the local field: method .* or model/);
  wrong({ model: 'xqsm', params: { delta: 0.1 } }, /config phase_pipeline\.params are a classical method's parameters: they need method/);
  assert.deepEqual(pipelineConfig({ phase_pipeline: { method: 'rts', params: { delta: '0.1' }, options: { vsharp: { maxRadius: 4 }, unwrap: 'laplacian' } } }, schema), {
    method: 'rts', params: { delta: 0.1 }, options: { 'vsharp.maxRadius': 4, unwrap: 'laplacian' },
  });
  console.log(`# phase_pipeline: χ against the phantom's truth in the local mask: ${rs.join(', ')}; ${((Date.now() - t0) / 1000).toFixed(1)} s`);
});

test('phase_pipeline also: SWI, minIP, R2* and T2* as BIDS derivatives (_swi, _minIP, _R2starmap, _T2starmap) with JSON sidecars, each the direct `tessera-qsm pipeline --also` run\'s', { timeout: 120000 }, async () => {
  const d = p('also');
  const q = (...a) => path.join(d, ...a);
  fs.mkdirSync(d, { recursive: true });
  // A small phantom scan from the API (3 equally spaced echoes: ARLO), written as BIDS echoes of one subject.
  const geometry = { dims: [40, 40, 30], voxelMm: [5, 5, 5], b0Dir: [0, 0, 1] };
  const te = [0.004, 0.008, 0.012];
  const tessera = await createTessera({ workers: 1 });
  const scan = await tessera.phantomScan({ geometry, te, snr: 100 });
  await tessera.terminate();
  fs.writeFileSync(q('phase.nii'), await writeNifti4D(scan.phase, geometry, te.length));
  fs.writeFileSync(q('mag.nii'), await writeNifti4D(scan.magnitude, geometry, te.length));
  const tree = q('bids');
  const anat = path.join(tree, 'sub-01', 'anat');
  const mags = splitEchoes(q('mag.nii'));
  splitEchoes(q('phase.nii')).forEach((b, e) => {
    put(path.join(anat, `sub-01_echo-${e + 1}_part-phase_MEGRE.nii.gz`), b);
    put(path.join(anat, `sub-01_echo-${e + 1}_part-mag_MEGRE.nii.gz`), mags[e]);
    put(path.join(anat, `sub-01_echo-${e + 1}_part-phase_MEGRE.json`), JSON.stringify({ EchoTime: te[e] }));
  });
  put(path.join(tree, 'MEGRE.json'), JSON.stringify({ MagneticFieldStrength: 3 }));
  const pipeline = { method: 'tkd', also: ['swi', 'r2star'], options: { 'vsharp.maxRadius': 3, 'swi.maskPower': 3 } };
  const out = q('deriv');
  const r = snakemake([`bids=${tree}`, `output=${out}`, `phase_pipeline=${JSON.stringify(pipeline)}`, `cores_per_job=${CORES}`]);
  assert.equal(r.code, 0, r.log);
  // The direct run on the same files.
  fs.mkdirSync(q('ref'), { recursive: true });
  const direct = exec(process.execPath, [CLI, 'pipeline', '--phase', q('phase.nii'), '--magnitude', q('mag.nii'), '--te', te.join(','), '--b0', '3', '--method', 'tkd', '--option', 'vsharp.maxRadius=3', '--option', 'swi.maskPower=3', '--also', 'swi,r2star', '--out', q('ref', 'chi.nii.gz'), '--quiet'], { cwd: dir });
  assert.equal(direct.code, 0, direct.log);
  const stem = path.join(out, 'sub-01', 'anat', 'sub-01');
  for (const [suffix, units, author] of [['swi', 'arbitrary', 'Haacke EM'], ['minIP', 'arbitrary', undefined], ['R2starmap', '1/s', 'Pei M'], ['T2starmap', 's', 'Pei M']]) {
    const got = readNifti(new Uint8Array(gunzip(`${stem}_${suffix}.nii.gz`)));
    const want = readNifti(new Uint8Array(gunzip(q('ref', `chi_${suffix}.nii.gz`))));
    assert.deepEqual(got.dims.slice(0, 3), geometry.dims, suffix);
    assert.ok(Buffer.from(got.data.buffer, got.data.byteOffset, got.data.byteLength).equals(Buffer.from(want.data.buffer, want.data.byteOffset, want.data.byteLength)), `${suffix}: the direct run's, bit for bit`);
    const side = JSON.parse(fs.readFileSync(`${stem}_${suffix}.json`, 'utf8'));
    assert.equal(side.Units, units, suffix);
    assert.deepEqual(side.EchoTime, te);
    if (author) assert.ok(side.References.some((x) => x.startsWith(author)), `${suffix}: cites ${author}`);
  }
  // R2* against the phantom's decay: inside the brain mask the tissue's T2* lies in tens of ms.
  const t2 = readNifti(new Uint8Array(gunzip(`${stem}_T2starmap.nii.gz`))).data;
  const inside = [...scan.mask.keys()].filter((i) => scan.mask[i]);
  const median = inside.map((i) => t2[i]).sort((a, b) => a - b)[inside.length >> 1];
  assert.ok(median > 0.01 && median < 0.2, `median T2* in the brain ${median} s`);
  const side = JSON.parse(fs.readFileSync(`${stem}_swi.json`, 'utf8'));
  assert.equal(side.Parameters['swi.maskPower'], '3');
  assert.deepEqual(walk(out).filter((f) => /_Chimap_(swi|minIP|R2starmap|T2starmap)|partial/.test(f)), [], 'no CLI-named or partial file left');
  // also's words are the schema's.
  await assert.rejects(discover({ bids: tree, phase_pipeline: { method: 'tkd', also: ['swi', 'qsm'] } }), (e) => e instanceof CohortError && /config phase_pipeline\.also: unknown output 'qsm' \(outputs: swi, r2star\)/.test(e.message));
});

test('ROMEO real data: the small multi-echo brain scan of ROMEO.jl as BIDS echoes through phase_pipeline with also swi,r2star: SWI, minIP, R2* and T2* derivatives with sidecars, plausible R2* in the brain, χ and derivatives the direct run\'s', { timeout: 120000 }, async () => {
  const t0 = Date.now();
  const d = p('romeo');
  const q = (...a) => path.join(d, ...a);
  fs.mkdirSync(d, { recursive: true });
  // ../shared/data/romeo-small: real 4D phase and magnitude (3 echoes); its README: no echo times in the files (any
  // increasing ones serve), the phase stored scaled (scl_slope NaN: read as a span of ~0.007), rescaled with a warning.
  const romeo = path.join(ROOT, '..', 'shared', 'data', 'romeo-small');
  const src = { phase: path.join(romeo, 'Phase.nii'), magnitude: path.join(romeo, 'Mag.nii') };
  for (const f of Object.values(src)) assert.ok(fs.existsSync(f), `${f} is missing (ROMEO.jl's test/data/small)`);
  const hdr = gunzip(src.phase);
  const dims = [42, 44, 46].map((o) => hdr.readInt16LE(o));
  assert.equal(hdr.readInt16LE(48), 3, 'ROMEO small: 3 echoes');
  const te = [0.004, 0.008, 0.012];
  const tree = q('bids');
  const anat = path.join(tree, 'sub-01', 'anat');
  const mags = splitEchoes(src.magnitude);
  splitEchoes(src.phase).forEach((b, e) => {
    put(path.join(anat, `sub-01_echo-${e + 1}_part-phase_MEGRE.nii.gz`), b);
    put(path.join(anat, `sub-01_echo-${e + 1}_part-mag_MEGRE.nii.gz`), mags[e]);
    put(path.join(anat, `sub-01_echo-${e + 1}_part-phase_MEGRE.json`), JSON.stringify({ EchoTime: te[e] }));
  });
  put(path.join(tree, 'MEGRE.json'), JSON.stringify({ MagneticFieldStrength: 3 }));
  put(path.join(tree, 'dataset_description.json'), JSON.stringify({ Name: 'romeo-small', BIDSVersion: '1.9.0' }));
  const pipeline = { method: 'tv', also: ['swi', 'r2star'] };
  const out = q('deriv');
  const r = snakemake([`bids=${tree}`, `output=${out}`, `phase_pipeline=${JSON.stringify(pipeline)}`, 'keep_intermediates=true', `cores_per_job=${CORES}`]);
  assert.equal(r.code, 0, r.log);
  // The direct run on the original 4D files (not the split echoes).
  fs.mkdirSync(q('ref'), { recursive: true });
  const direct = exec(process.execPath, [CLI, 'pipeline', '--phase', src.phase, '--magnitude', src.magnitude, '--te', te.join(','), '--b0', '3', '--method', 'tv', '--also', 'swi,r2star', '--cores', String(CORES), '--out', q('ref', 'chi.nii.gz')], { cwd: dir });
  assert.equal(direct.code, 0, direct.log);
  assert.match(direct.log, /warning: the phase spans .* rescaled/, 'the scaled phase is rescaled with a warning');
  const stem = path.join(out, 'sub-01', 'anat', 'sub-01');
  const bytes = (v) => Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  const chi = readNifti(new Uint8Array(gunzip(`${stem}_Chimap.nii.gz`)));
  assert.deepEqual(chi.dims.slice(0, 3), dims);
  assert.ok(gunzip(`${stem}_Chimap.nii.gz`).equals(gunzip(q('ref', 'chi.nii.gz'))), 'χ: the direct run\'s, bit for bit (header and data)');
  const maps = {};
  for (const [suffix, units] of [['swi', 'arbitrary'], ['minIP', 'arbitrary'], ['R2starmap', '1/s'], ['T2starmap', 's']]) {
    const got = readNifti(new Uint8Array(gunzip(`${stem}_${suffix}.nii.gz`)));
    const want = readNifti(new Uint8Array(gunzip(q('ref', `chi_${suffix}.nii.gz`))));
    assert.deepEqual(got.dims.slice(0, 3), dims, suffix);
    assert.ok(bytes(got.data).equals(bytes(want.data)), `${suffix}: the direct run's, bit for bit`);
    const side = JSON.parse(fs.readFileSync(`${stem}_${suffix}.json`, 'utf8'));
    assert.equal(side.Units, units, suffix);
    assert.deepEqual(side.EchoTime, te, suffix);
    maps[suffix] = got.data;
  }
  // SWI finite everywhere; the minIP (a slab around each voxel, the voxel included) never above the SWI.
  assert.ok(maps.swi.every(Number.isFinite), 'SWI is finite');
  const above = maps.minIP.filter((v, i) => !(v <= maps.swi[i])).length;
  assert.equal(above, 0, `${above} voxels of the minIP above the SWI`);
  // R2* in the brain mask the pipeline made from the magnitude: in vivo GRE at 3 T, tens of 1/s.
  const brain = readNifti(new Uint8Array(gunzip(`${stem}_desc-brain_mask.nii.gz`))).data;
  const inside = [...brain.keys()].filter((i) => brain[i]);
  assert.ok(inside.length > 1000, `brain mask of ${inside.length} voxels`);
  const r2 = inside.map((i) => maps.R2starmap[i]).sort((a, b) => a - b);
  const median = r2[r2.length >> 1];
  assert.ok(median >= 10 && median <= 100, `median R2* in the brain ${median} 1/s`);
  assert.deepEqual(walk(out).filter((f) => /_Chimap_(swi|minIP|R2starmap|T2starmap)|partial/.test(f)), [], 'no CLI-named or partial file left');
  console.log(`# ROMEO small ${dims.join('×')}: brain ${inside.length} voxels, median R2* ${median.toFixed(1)} 1/s (IQR ${r2[r2.length >> 2].toFixed(1)}–${r2[(3 * r2.length) >> 2].toFixed(1)}), SWI range ${Math.min(...maps.swi).toPrecision(3)}–${Math.max(...maps.swi).toPrecision(3)}; ${((Date.now() - t0) / 1000).toFixed(1)} s`);
});
