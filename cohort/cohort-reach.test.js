// cohort/Snakefile's measure_reach on the small phantom BIDS tree of tests/js/cohort-fixtures.js (two local field maps
// through the bundled demo U-Net, one wrapped phase through iQSM with the test LoT network): one probe of the field
// network for the cohort (`tessera-qsm receptive-field --probe`, the costly part: two runs of a patch its graph's
// reach sizes), every plan and run of it with that file, each χ bit for bit the single-subject CLI's with --context.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { discover } from './lib/subjects.js';
import { CLI, DEMO_NET, CORES, SUBJECTS, gunzip, execAsync, snakemake as snakemakeIn, assertSnakemake7, jobs, bidsTreeIn, bidsConfig as bidsConfigOf } from '../tests/js/cohort-fixtures.js';

let dir; // everything of this test
let bids; // the BIDS tree
const p = (...a) => path.join(dir, ...a);
const snakemake = (config, extra = []) => snakemakeIn(dir, config, extra);
const bidsConfig = (out) => bidsConfigOf(dir, bids, out);

before(async () => {
  assertSnakemake7();
  ({ dir, bids } = await bidsTreeIn('tessera-cohort-reach-'));
});

after(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
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
  // The single-subject CLI runs with the same file (both at once: each its own process).
  const fields = SUBJECTS.filter((s) => s.kind === 'field');
  const cliRuns = fields.map((s) => {
    const anat = path.join(bids, path.dirname(s.path));
    const stem = path.basename(s.path);
    const ref = p('ref', `${stem}-reach.nii.gz`);
    return execAsync(process.execPath, [CLI, 'invert', '--field', path.join(anat, `${stem}_localfield.nii.gz`), '--model', 'demo-unet', '--weights', DEMO_NET, '--mask', path.join(anat, `${stem}_desc-brain_mask.nii.gz`), '--cores', String(CORES), '--context', reachFile, '--out', ref, '--quiet']).then((cli) => ({ ...cli, ref }));
  });
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
    const cli = await cliRuns[fields.indexOf(s)];
    assert.equal(cli.code, 0, cli.log);
    assert.ok(gunzip(path.join(out, `${s.path}_Chimap.nii.gz`)).equals(gunzip(cli.ref)), `${s.path}: χ differs from the CLI run with --context`);
  }
  await assert.rejects(discover({ bids, field_model: 'demo-unet', measure_reach: 'maybe' }), /config measure_reach must be true or false, got 'maybe'/);
});
