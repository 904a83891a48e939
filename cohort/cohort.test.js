// cohort/Snakefile end to end with Debian's snakemake (7.21) on three small phantom subjects (tests/js/cohort-fixtures.js:
// two local field maps through the bundled demo U-Net, one two-echo wrapped phase with magnitude through iQSM with
// the test LoT network). Every χ is compared bit for bit with a single-subject `tessera-qsm invert` of the same
// inputs; the declared threads / mem_mb with `tessera-qsm plan --json`; a run killed mid-way (SIGKILL to snakemake
// and its jobs) is resumed; a re-run redoes only what is missing; the TSV-manifest route through the SLURM profile
// gives the same χ; bad inputs are refused by name before anything runs. measure_reach: cohort-reach.test.js;
// phase_pipeline (the classical pipeline, its optional outputs, ROMEO's real scan): cohort-pipeline.test.js.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { readNifti, readEchoes, writeNifti } from '../bindings/js/index.js';
import { discover, CohortError } from './lib/subjects.js';
import {
  ROOT, SNAKEFILE, CLI, CORES, TE, B0, SUBJECTS, put, gunzip, exec, execAsync, cliWithRss, snakemakeArgs, snakemake as snakemakeIn,
  assertSnakemake7, jobs, walk, bidsTreeIn, bidsConfig as bidsConfigOf, cliInput, anatOf,
} from '../tests/js/cohort-fixtures.js';

let dir; // everything of this test
let bids; // the BIDS tree
let refs; // path → reference χ bytes (decompressed), from single-subject CLI runs
let plans; // path → `tessera-qsm plan --json` of the same inputs
let rss; // path → max RSS (bytes) of the reference run
const p = (...a) => path.join(dir, ...a);
const snakemake = (config, extra = []) => snakemakeIn(dir, config, extra);
const bidsConfig = (out) => bidsConfigOf(dir, bids, out);

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
  assertSnakemake7();
  ({ dir, bids } = await bidsTreeIn('tessera-cohort-'));
  // The single-subject CLI runs and plans of the same inputs (the phase from the 4D file of the tree's writer), all at
  // once: each reference is its own process.
  refs = {};
  plans = {};
  rss = {};
  await Promise.all(
    SUBJECTS.flatMap((s) => {
      const input = cliInput(dir, bids, s);
      const out = p('ref', `${anatOf(bids, s).stem}.nii.gz`);
      const extra = s.kind === 'field' ? [] : ['--magnitude', p('ref', 'mag4d.nii.gz')];
      return [
        execAsync(process.execPath, [CLI, 'plan', ...input, '--json']).then((plan) => {
          assert.equal(plan.code, 0, plan.log);
          plans[s.path] = JSON.parse(plan.stdout);
        }),
        cliWithRss(dir, ['invert', ...input, ...extra, '--out', out, '--quiet']).then((bytes) => {
          rss[s.path] = bytes;
          refs[s.path] = gunzip(out);
        }),
      ];
    }),
  );
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
  const [zx, zy, zz] = SUBJECTS[0].dims;
  assert.match(z.log, new RegExp(`error: the mask holds no voxel: all ${zx * zy * zz} values of the ${zx}×${zy}×${zz} mask are 0.*check the mask file`));
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
  const dims = (s) => s.dims.join('×');
  assert.notEqual(dims(SUBJECTS[1]), dims(SUBJECTS[2]), 'the two acquisitions differ in dims');
  assert.match(bad.stderr, new RegExp(`^error: the echoes .*sub-03_echo-1_part-phase_MEGRE\\.nii\\.gz and .*sub-02_ses-a_localfield\\.nii\\.gz differ in dims ${dims(SUBJECTS[1])} vs ${dims(SUBJECTS[2])}.*: they must be one acquisition`));
  assert.ok(!fs.existsSync(p('bad.nii')));
});

