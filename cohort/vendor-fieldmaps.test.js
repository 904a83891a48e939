// cohort/Snakefile with real scanner field maps (../shared/data/dcm-fieldmaps: dcm2niix's validation DICOM from GE,
// Philips and Siemens), converted by the page's own dcm2niix (tests/js/dicom-in-page.js, Chromium) as a user of the page
// would, then given to the cohort twice: as a BIDS tree (sub-<label>/fmap/: GE's and Philips' B0 maps in Hz as
// _fieldmap with dcm2niix's sidecar "Units": "Hz", Siemens' phase difference as _phasediff with its EchoTime1/2, each
// with its magnitude) and as a TSV manifest (fieldmap + units, phasediff + te1 + te2, b0 and magnitude columns) naming
// copies of the same NIfTI files without their sidecars. Each subject's χ through the manifest is bit for bit the BIDS
// route's (config phase_pipeline=tkd), with the run report's inputs (units, ΔTE) the same.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { NO_FETCH_GLOBALS, testInChildWithFetchGlobals } from '../scripts/chromium.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const SNAKEFILE = path.join(ROOT, 'cohort', 'Snakefile');
const CHROMIUM = '/usr/bin/chromium';
const FMAPS = path.resolve(ROOT, '../shared/data/dcm-fieldmaps');
const CORES = 2;
const skip = !fs.existsSync(CHROMIUM)
  ? `${CHROMIUM} is missing: install it with scripts/bootstrap.sh --browser (apt-get install chromium)`
  : !fs.existsSync(FMAPS) ? `no ${FMAPS}` : false;

// Each vendor's folder, the outputs dcm2niix makes of it (the map, its magnitude) and how the cohort takes the map.
const VENDORS = [
  { subject: 'ge', folder: 'GE/6_CV_Neuro', map: 'series6_fieldmaphz', magnitude: 'series6', kind: 'fieldmap' },
  { subject: 'philips', folder: 'Philips/fmap', map: 'series801_e2_fieldmaphz', magnitude: 'series801_e1', kind: 'fieldmap' },
  { subject: 'siemens', folder: 'Siemens', map: 'series3_e2_ph', magnitude: 'series2', kind: 'phasediff' },
];

if (NO_FETCH_GLOBALS) {
  await testInChildWithFetchGlobals(import.meta.url, 'vendor field maps through the cohort, in a child node with the fetch globals playwright-core needs', { skip, minPassed: 1 });
} else suite();

function suite() {
  let dir;
  const sidecars = {};
  const p = (...a) => path.join(dir, ...a);
  const gunzip = (file) => {
    const b = fs.readFileSync(file);
    return b[0] === 0x1f && b[1] === 0x8b ? zlib.gunzipSync(b) : b;
  };

  before(async () => {
    if (skip) return;
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-cohort-vendor-'));
    const { startServer } = await import('../scripts/serve.js');
    const { launchChromium } = await import('../scripts/chromium.js');
    const { convertInPage } = await import('../tests/js/dicom-in-page.js');
    const srv = await startServer();
    const ctx = await launchChromium(p('profile'), CHROMIUM);
    try {
      const page = ctx.pages()[0] ?? (await ctx.newPage());
      await page.goto(`${srv.url}/web/`);
      for (const v of VENDORS) Object.assign(sidecars, await convertInPage(page, path.join(FMAPS, v.folder), p('converted', v.subject)));
    } finally {
      await ctx.close().catch(() => {});
      await srv.close();
    }
  });

  after(() => {
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  test('GE’s and Philips’ B0 maps in Hz and Siemens’ phase difference: the TSV manifest (fieldmap + units, phasediff + te1 + te2) gives the BIDS fmap/ route’s χ bit for bit', { skip, timeout: 600000 }, async () => {
    const bids = p('bids');
    const plain = p('plain');
    fs.mkdirSync(plain);
    const rows = [['subject', 'fieldmap', 'phasediff', 'magnitude', 'mask', 'units', 'te1', 'te2', 'b0'].join('\t')];
    for (const v of VENDORS) {
      const src = (name) => p('converted', v.subject, `${name}.nii`);
      const side = sidecars[v.map];
      assert.ok(side, `dcm2niix made ${v.map} of ${v.folder}: ${Object.keys(sidecars).join(', ')}`);
      assert.equal(side.MagneticFieldStrength, 3, `${v.map}: B0 in its sidecar`);
      const fmap = path.join(bids, `sub-${v.subject}`, 'fmap');
      fs.mkdirSync(fmap, { recursive: true });
      const stem = path.join(fmap, `sub-${v.subject}`);
      // BIDS: dcm2niix's own sidecar beside the map (GE and Philips: "Units": "Hz"; Siemens: EchoTime1/2).
      fs.copyFileSync(src(v.map), `${stem}_${v.kind}.nii`);
      fs.writeFileSync(`${stem}_${v.kind}.json`, JSON.stringify(side));
      fs.copyFileSync(src(v.magnitude), `${stem}_${v.kind === 'fieldmap' ? 'magnitude' : 'magnitude1'}.nii`);
      // The manifest: the same files without a sidecar; their units, echo times and B0 in its columns.
      fs.copyFileSync(src(v.map), path.join(plain, `${v.subject}_map.nii`));
      fs.copyFileSync(src(v.magnitude), path.join(plain, `${v.subject}_mag.nii`));
      const map = `plain/${v.subject}_map.nii`;
      if (v.kind === 'fieldmap') {
        assert.equal(side.Units, 'Hz', `${v.map}: dcm2niix's sidecar says Hz`);
        rows.push([v.subject, map, 'n/a', `plain/${v.subject}_mag.nii`, 'n/a', 'hz', 'n/a', 'n/a', String(side.MagneticFieldStrength)].join('\t'));
      } else {
        assert.ok(side.EchoTime2 > side.EchoTime1, `${v.map}: EchoTime1 ${side.EchoTime1}, EchoTime2 ${side.EchoTime2}`);
        rows.push([v.subject, 'n/a', map, `plain/${v.subject}_mag.nii`, 'n/a', 'n/a', String(side.EchoTime1), String(side.EchoTime2), String(side.MagneticFieldStrength)].join('\t'));
      }
    }
    fs.writeFileSync(path.join(bids, 'dataset_description.json'), JSON.stringify({ Name: 'vendor field maps', BIDSVersion: '1.9.0' }));
    fs.writeFileSync(p('subjects.tsv'), `${rows.join('\n')}\n`);
    // The two routes run at once (each its own output folder, its own Snakemake state in it).
    const snakemake = (config) =>
      new Promise((resolve, reject) => {
        const child = spawn('snakemake', ['-s', SNAKEFILE, '--cores', String(CORES), '--config', ...config, 'phase_pipeline=tkd', `cores_per_job=${CORES}`], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
        let log = '';
        child.stdout.on('data', (d) => (log += d));
        child.stderr.on('data', (d) => (log += d));
        child.on('error', reject);
        child.on('close', (code) => resolve({ code, log }));
      });
    const routes = await Promise.all([snakemake([`bids=${bids}`, `output=${p('deriv-bids')}`]), snakemake([`manifest=${p('subjects.tsv')}`, `output=${p('deriv-manifest')}`])]);
    for (const r of routes) assert.equal(r.code, 0, r.log);
    for (const v of VENDORS) {
      const s = `sub-${v.subject}`;
      const chi = (route) => gunzip(p(route, s, 'fmap', `${s}_Chimap.nii.gz`));
      const [viaBids, viaManifest] = [chi('deriv-bids'), chi('deriv-manifest')];
      assert.ok(viaManifest.subarray(352).equals(viaBids.subarray(352)), `${s}: the manifest's χ differs from the BIDS route's`);
      const data = new Float32Array(viaBids.buffer.slice(viaBids.byteOffset + 352, viaBids.byteOffset + viaBids.length));
      assert.ok(data.every(Number.isFinite), `${s}: χ finite`);
      const nonzero = data.filter((x) => x !== 0).length;
      assert.ok(nonzero > 1000, `${s}: χ defined in ${nonzero} voxels`);
      const report = (route) => JSON.parse(fs.readFileSync(p(route, s, 'fmap', `${s}_Chimap.json`), 'utf8')).inputs;
      const [rb, rm] = [report('deriv-bids'), report('deriv-manifest')];
      if (v.kind === 'fieldmap') assert.deepEqual([rb.totalFieldUnits, rm.totalFieldUnits], ['hz', 'hz']);
      else {
        const side = sidecars[v.map];
        assert.equal(rm.deltaTE, rb.deltaTE);
        assert.ok(Math.abs(rb.deltaTE - (side.EchoTime2 - side.EchoTime1)) < 1e-9, `${s}: ΔTE ${rb.deltaTE}`);
      }
      console.log(`# ${s} (${v.folder}, ${v.kind}): χ in ${nonzero} voxels, the manifest's bit for bit the BIDS route's`);
    }
  });
}
