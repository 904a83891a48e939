// cohort/Snakefile's phase_pipeline end to end with Debian's snakemake (7.21): the phantom scan of C++
// (tessera_phantom) as BIDS echoes through `tessera-qsm pipeline` (TV), bit for bit against direct runs and r > 0.8
// against its χ truth, with the intermediates kept; the manifest's method / model columns beside a local-field row
// (the demo U-Net on a small phantom field of tests/js/cohort-fixtures.js, against a single-subject `tessera-qsm
// invert`). also: SWI, minIP, R2*, T2* as BIDS derivatives of an API phantom scan. ROMEO: the real 3-echo brain scan
// of ../shared/data/romeo-small split into BIDS echoes, through phase_pipeline with also swi,r2star: χ and the
// SWI / minIP / R2* / T2* derivatives bit for bit against the direct run on the 4D files.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTessera, readNifti, readEchoes } from '../bindings/js/index.js';
import { discover, pipelineConfig, CohortError } from './lib/subjects.js';
import { nifti4d } from '../tests/js/nifti4d.js';
import {
  ROOT, CLI, DEMO_NET, CORES, SUBJECTS, put, gunzip, exec, execAsync, snakemake as snakemakeIn, assertSnakemake7, jobs, walk,
  splitEchoes, pearson, writeBidsTree, cliInput,
} from '../tests/js/cohort-fixtures.js';

let dir; // everything of this test
let bids; // a BIDS tree of one local field map (sub-01 of the fixtures): the manifest's invert row
let tessera; // the API, for the phantom scan and the schema
const p = (...a) => path.join(dir, ...a);
const snakemake = (config, extra = []) => snakemakeIn(dir, config, extra);

before(async () => {
  assertSnakemake7();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-cohort-pipeline-'));
  tessera = await createTessera({ workers: 1 });
  bids = await writeBidsTree(dir, tessera, [SUBJECTS[0]]);
});

after(async () => {
  await tessera?.terminate();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});


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
  // The manifest's local-field row: the single-subject `tessera-qsm invert` of the same files, beside them.
  fs.mkdirSync(p('ref'), { recursive: true });
  const ref14 = p('ref', 'sub-14.nii.gz');
  const invert14 = execAsync(process.execPath, [CLI, 'invert', ...cliInput(dir, bids, SUBJECTS[0]), '--out', ref14, '--quiet'], { cwd: dir });
  const [ref01, ref02, ref11, ref13, inv14] = await Promise.all([
    direct('sub-01', ['--method', 'tv', '--param', 'lambda=0.0005']),
    direct('sub-02', ['--method', 'tv', '--param', 'lambda=0.0005', '--mask', files.mask]),
    direct('sub-11', ['--method', 'rts']),
    direct('sub-13', ['--model', 'demo-unet', '--weights', DEMO_NET]),
    invert14,
  ]);
  assert.equal(inv14.code, 0, inv14.log);
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
    14: gunzip(ref14),
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
  const schema = await tessera.schema();
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
  const scan = await tessera.phantomScan({ geometry, te, snr: 100 });
  fs.writeFileSync(q('phase.nii'), await nifti4d(scan.phase, te.length, geometry));
  fs.writeFileSync(q('mag.nii'), await nifti4d(scan.magnitude, te.length, geometry));
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
