// Real vendor field maps (../shared/data/dcm-fieldmaps: dcm2niix's validation DICOM from GE, Philips and Siemens) and a
// real scan whose header leaves the phase scaled (../shared/data/romeo-small), in the page (Chromium, playwright-core,
// the page served by scripts/serve.js):
//   - GE's and Philips' (enhanced DICOM) B0 maps in Hz (ImageType FIELDMAPHZ) are sorted as field maps with their
//     magnitude, B0 from the headers, and the pipeline starts from them as the total field (no echo fit) to χ;
//   - Siemens' phase difference (EchoTime1/EchoTime2) with its magnitude series: ΔTE from the headers fills TE, the
//     scanner integers are read as such with a warning, and the pipeline runs to χ;
//   - Siemens' magnitude folder alone is refused naming the phase it lacks; its phase difference alone asks for a mask
//     or magnitude, Run disabled;
//   - the NIfTI files dcm2niix made in the page go through the CLI (`tessera-qsm pipeline --total-field … --units hz`,
//     `--phase-difference … --te1 --te2`): χ bit-identical to the page's download;
//   - ROMEO's Phase.nii + Mag.nii dropped together on the page's drop zone in From phase: the rescaling warning shows, a
//     χ results; with also SWI + R2*, SWI, minIP, R2* and T2* are listed with their units and downloaded with ROMEO's
//     header, SWI is at most the echoes' root-sum-of-squares magnitude in the mask, minIP ≤ SWI, R2* plausible.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { NO_FETCH_GLOBALS, testInChildWithFetchGlobals } from '../scripts/chromium.js';
import { convertInPage as convertInPageOf } from '../tests/js/dicom-in-page.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CHROMIUM = '/usr/bin/chromium';
const DATA = path.resolve(ROOT, '../shared/data');
const FMAPS = path.join(DATA, 'dcm-fieldmaps');
const ROMEO = path.join(DATA, 'romeo-small');
const skip = !fs.existsSync(CHROMIUM)
  ? `${CHROMIUM} is missing: install it with scripts/bootstrap.sh --browser (apt-get install chromium)`
  : !fs.existsSync(FMAPS) || !fs.existsSync(ROMEO) ? `no ${FMAPS} or ${ROMEO}` : false;

if (NO_FETCH_GLOBALS) {
  await testInChildWithFetchGlobals(import.meta.url, 'vendor field maps and ROMEO in the page, in a child node with the fetch globals playwright-core needs', { skip, minPassed: 7 });
} else suite();

function suite() {
  let srv, ctx, page, tmp, bg;
  /** The node API's runtime (1 worker) the tests compare the page with: started once, shared, terminated after. */
  let nodeOnce = null;
  const nodeApi = () => (nodeOnce ??= import('../bindings/js/index.js').then(({ createTessera }) => createTessera({ workers: 1 })));
  let romeoSpread; // the 1st–99th percentile span of χ from ROMEO's Phase.nii (ppm), measured by its test below
  const consoleErrors = [];

  before(async () => {
    if (skip) return;
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-fmaps-'));
    // the stage title of the schema's default background removal, whichever it is
    const { defaultBackgroundTitle } = await import('../tests/js/background-titles.js');
    bg = await defaultBackgroundTitle(await nodeApi());
    const { startServer } = await import('../scripts/serve.js');
    const { launchChromium } = await import('../scripts/chromium.js');
    srv = await startServer();
    ctx = await launchChromium(path.join(tmp, 'profile'), CHROMIUM, { acceptDownloads: true, viewport: { width: 1280, height: 1000 } });
    page = ctx.pages()[0] ?? (await ctx.newPage());
    page.on('console', (m) => m.type() === 'error' && consoleErrors.push(m.text()));
    page.on('pageerror', (e) => consoleErrors.push(`uncaught: ${e.message}`));
    await page.goto(`${srv.url}/web/`);
    await page.waitForFunction(() => document.body.dataset.state === 'idle' && document.querySelector('#planReadout').dataset.feasible, null, { timeout: 60000 });
    await page.selectOption('#startFrom', 'pipeline');
    await page.waitForFunction(() => document.querySelector('#planReadout').dataset.pipeline === 'true', null, { timeout: 20000, polling: 50 });
    await page.selectOption('#inversion', 'tkd');
  });

  after(async () => {
    if (nodeOnce) await (await nodeOnce).terminate().catch(() => {});
    await ctx?.close().catch(() => {});
    await srv?.close();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  const readData = (selector) =>
    page.$eval(selector, (e) => {
      const parse = (x) => (x === 'true' ? true : x === 'false' ? false : x !== '' && Number.isFinite(Number(x)) ? Number(x) : x);
      return Object.fromEntries(Object.entries(e.dataset).map(([k, v]) => [k, ['te', 'dims', 'voxelMm', 'phaseRange'].includes(k) ? v.split(',').map(parse) : parse(v)]));
    });
  const errorText = async () => ((await page.isHidden('#error')) ? '' : await page.textContent('#error'));

  /** Gives a folder to the DICOM input; waits for its conversion and, when it converted, for the input to load. */
  async function chooseFolder(dir) {
    const seq = Number((await readData('#inputInfo')).seq ?? 0);
    await page.setInputFiles('#dicomDir', dir);
    await page.waitForFunction(() => ['done', 'error', 'cancelled'].includes(document.querySelector('#dicomText').dataset.state), null, { timeout: 90000, polling: 50 });
    const status = await readData('#dicomText');
    if (status.state === 'done') {
      await page.waitForFunction((s) => (Number(document.querySelector('#inputInfo').dataset.seq) > s || !document.querySelector('#error').hidden) && document.body.dataset.state === 'idle', seq, { timeout: 60000 });
    }
    return status;
  }

  /** Runs the loaded input with the plan's stages; returns the χ download's bytes. */
  async function runToChi(stages, file) {
    await page.waitForFunction((want) => document.querySelector('#planReadout').dataset.stages === want && !document.querySelector('#run').disabled, stages, { timeout: 30000 });
    await page.click('#run');
    await page.waitForFunction(() => ['done', 'error'].includes(document.body.dataset.state), null, { timeout: 180000 });
    assert.equal(await page.evaluate(() => document.body.dataset.state), 'done', await errorText());
    const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 20000 }), page.click('#download')]);
    assert.equal(dl.suggestedFilename(), file);
    return fs.readFileSync(await dl.path());
  }

  /** dcm2niix's outputs of a folder, converted in the page as the DICOM input does, written to dir: {name: sidecar}. */
  const convertInPage = (folder, dir) => convertInPageOf(page, folder, dir);

  /** The CLI's pipeline in dir; returns its χ's data (readNifti). */
  async function cliChi(dir, args) {
    const run = spawnSync(process.execPath, [path.join(ROOT, 'bindings/js/cli.js'), 'pipeline', ...args, '--method', 'tkd', '--out', 'chi.nii'], { cwd: dir, encoding: 'utf8', timeout: 240000 });
    assert.equal(run.status, 0, run.stderr);
    const { readNifti } = await import('../bindings/js/index.js');
    return { chi: readNifti(fs.readFileSync(path.join(dir, 'chi.nii'))).data, stderr: run.stderr, stdout: run.stdout };
  }

  const same = (a, b) => a.length === b.length && a.every((v, i) => Object.is(v, b[i]));

  for (const [vendor, folder, mapName, magName, dims] of [
    ['GE', 'GE/6_CV_Neuro', 'series6_fieldmaphz', 'series6', [128, 128, 16]],
    ['Philips (enhanced DICOM)', 'Philips/fmap', 'series801_e2_fieldmaphz', 'series801_e1', [64, 64, 32]],
  ]) {
    test(`${vendor}: the B0 map in Hz (FIELDMAPHZ) and its magnitude go from DICOM to χ as a total field; the converted NIfTI through the CLI gives the same χ`, { skip, timeout: 300000 }, async () => {
      const status = await chooseFolder(path.join(FMAPS, folder));
      assert.equal(status.state, 'done', await errorText());
      assert.equal(status.kind, 'fieldmap');
      assert.equal(status.b0, 3);
      assert.equal(await page.inputValue('#b0'), '3');
      const info = await readData('#inputInfo');
      assert.equal(info.from, 'fieldmap');
      assert.equal(info.magnitude, true);
      assert.deepEqual(info.dims, dims);
      assert.match(await page.textContent('#inputInfo'), /field map in Hz, series \d+, its magnitude: the pipeline starts from it as the total field \(no echo fit\)/);
      const { readNifti } = await import('../bindings/js/index.js');
      const chiPage = readNifti(await runToChi(`brain mask|${bg}|TKD`, `${path.basename(folder)}_chi.nii.gz`));
      assert.deepEqual(chiPage.dims, dims);
      assert.ok(chiPage.data.every(Number.isFinite), 'χ finite');
      const nonzero = chiPage.data.filter((v) => v !== 0).length;
      assert.ok(nonzero > 1000, `χ defined in ${nonzero} voxels`);
      assert.match(await page.textContent('#report'), /a field map in Hz, B0 3 T/);
      // The same conversion to NIfTI, through the CLI.
      const dir = path.join(tmp, vendor.split(' ')[0]);
      const sidecars = await convertInPage(path.join(FMAPS, folder), dir);
      assert.equal(sidecars[mapName].Units, 'Hz');
      const cli = await cliChi(dir, ['--total-field', `${mapName}.nii`, '--units', 'hz', '--magnitude', `${magName}.nii`, '--b0', String(sidecars[mapName].MagneticFieldStrength)]);
      assert.ok((cli.stdout + cli.stderr).includes(`a total field in Hz, B0 3 T: brain mask → ${bg} → TKD`), cli.stderr);
      assert.ok(same(cli.chi, chiPage.data), 'the CLI\'s χ is the page\'s');
      // The methods' command names the field map and magnitude the page offers as NIfTI; on them it gives the page's χ.
      const box = await readData('#methodsBox');
      const stemName = path.basename(folder);
      assert.equal(box.files, `${stemName}_fieldmap_Hz.nii|${stemName}_magnitude.nii`);
      const args = JSON.parse(box.command);
      assert.equal(args[args.indexOf('--total-field') + 1], `${stemName}_fieldmap_Hz.nii`);
      const offered = path.join(dir, 'offered');
      fs.mkdirSync(offered);
      for (const f of box.files.split('|')) {
        const [d] = await Promise.all([page.waitForEvent('download', { timeout: 20000 }), page.click(`#methodsFiles button[data-file="${f}"]`)]);
        fs.copyFileSync(await d.path(), path.join(offered, f));
      }
      const rerun = spawnSync(process.execPath, [path.join(ROOT, 'bindings/js/cli.js'), ...args.slice(1)], { cwd: offered, encoding: 'utf8', timeout: 240000 });
      assert.equal(rerun.status, 0, rerun.stderr);
      assert.ok(same(readNifti(fs.readFileSync(path.join(offered, args[args.indexOf('--out') + 1]))).data, chiPage.data), 'the methods command gives the page\'s χ');
      const sorted = chiPage.data.filter((v) => v !== 0).sort();
      const [p1, p99] = [sorted[Math.floor(0.01 * sorted.length)], sorted[Math.floor(0.99 * sorted.length)]];
      const warnings = (await page.textContent('#report')).match(/Warning(.*?)χ in the mask/)?.[1] ?? 'none';
      console.log(`# ${vendor}: χ in ${nonzero} voxels, 1st–99th percentile [${p1.toFixed(3)}, ${p99.toFixed(3)}] ppm; CLI bit-identical; warnings: ${warnings}`);
    });
  }

  test('Siemens: the phase difference (EchoTime1/2) and its magnitude series go from DICOM to χ with ΔTE from the headers; the CLI with --te1 --te2 gives the same χ', { skip, timeout: 300000 }, async () => {
    const status = await chooseFolder(path.join(FMAPS, 'Siemens'));
    assert.equal(status.state, 'done', await errorText());
    assert.equal(status.kind, 'phasediff');
    assert.equal(status.phaseSeries, 3);
    assert.equal(status.magnitudeSeries, 2);
    assert.equal(status.deltaTe, 0.00246);
    assert.equal(await page.inputValue('#te'), '0.00246');
    const info = await readData('#inputInfo');
    assert.equal(info.from, 'phasediff');
    assert.equal(info.echoes, 1);
    assert.deepEqual(info.dims, [64, 64, 36]);
    const text = await page.textContent('#inputInfo');
    assert.match(text, /phase difference series 3, magnitude series 2 \(TE1 5\.19 ms, TE2 7\.65 ms\): the pipeline starts from it with ΔTE 2\.46 ms/);
    assert.match(text, /the phase difference is stored as integers; phase from scanner integers in \[-4096, 4094\]/);
    const { readNifti } = await import('../bindings/js/index.js');
    const chiPage = readNifti(await runToChi(`brain mask|echo fit|${bg}|TKD`, 'Siemens_chi.nii.gz'));
    assert.ok(chiPage.data.every(Number.isFinite), 'χ finite');
    const nonzero = chiPage.data.filter((v) => v !== 0).length;
    assert.ok(nonzero > 1000, `χ defined in ${nonzero} voxels`);
    assert.match(await page.textContent('#report'), /a phase difference, ΔTE 0\.00246 s, B0 3 T/);
    const dir = path.join(tmp, 'Siemens');
    const sidecars = await convertInPage(path.join(FMAPS, 'Siemens'), dir);
    const ph = sidecars.series3_e2_ph;
    const cli = await cliChi(dir, ['--phase-difference', 'series3_e2_ph.nii', '--te1', String(ph.EchoTime1), '--te2', String(ph.EchoTime2), '--magnitude', 'series2.nii', '--b0', '3']);
    assert.match(cli.stderr, /warning: the phase difference is stored as integers/);
    assert.ok(same(cli.chi, chiPage.data), 'the CLI\'s χ is the page\'s');
    // The methods' command: --phase-difference on the phase difference the page offers (rad), with the run's ΔTE.
    const box = await readData('#methodsBox');
    assert.equal(box.files, 'Siemens_phasediff_rad.nii|Siemens_magnitude.nii');
    const args = JSON.parse(box.command);
    assert.deepEqual(args.slice(args.indexOf('--phase-difference'), args.indexOf('--phase-difference') + 6), ['--phase-difference', 'Siemens_phasediff_rad.nii', '--phase-units', 'rad', '--delta-te', await page.inputValue('#te')]); // the ΔTE the run used (the TE box)
    const offered = path.join(dir, 'offered');
    fs.mkdirSync(offered);
    for (const f of box.files.split('|')) {
      const [d] = await Promise.all([page.waitForEvent('download', { timeout: 20000 }), page.click(`#methodsFiles button[data-file="${f}"]`)]);
      fs.copyFileSync(await d.path(), path.join(offered, f));
    }
    const rerun = spawnSync(process.execPath, [path.join(ROOT, 'bindings/js/cli.js'), ...args.slice(1)], { cwd: offered, encoding: 'utf8', timeout: 240000 });
    assert.equal(rerun.status, 0, rerun.stderr);
    assert.ok(same(readNifti(fs.readFileSync(path.join(offered, args[args.indexOf('--out') + 1]))).data, chiPage.data), 'the methods command gives the page\'s χ');
    console.log(`# Siemens phase difference: χ in ${nonzero} voxels; CLI bit-identical`);
  });

  test('Siemens: the magnitude folder alone is refused naming the phase it lacks; the phase difference alone asks for a magnitude or mask', { skip, timeout: 120000 }, async () => {
    const status = await chooseFolder(path.join(FMAPS, 'Siemens/2_gre_field_magph'));
    assert.equal(status.state, 'error');
    await page.waitForFunction(() => !document.querySelector('#error').hidden, null, { timeout: 20000 });
    assert.match(await errorText(), /holds no phase series \(found: series 2 “gre_field_magph” \(magnitude\)\)/);
    assert.equal(await page.isDisabled('#run'), true);
    const alone = await chooseFolder(path.join(FMAPS, 'Siemens/3_gre_field_magph'));
    assert.equal(alone.state, 'done', await errorText());
    assert.equal(alone.kind, 'phasediff');
    assert.match(await page.textContent('#dicomText'), /no magnitude/);
    await page.waitForFunction(() => /No mask and no magnitude/.test(document.querySelector('#phaseMsg')?.textContent ?? ''), null, { timeout: 20000 });
    assert.equal(await page.isDisabled('#run'), true);
  });

  test('ROMEO’s Phase.nii + Mag.nii (a header that leaves the phase scaled) in From phase: the rescaling warning shows and a χ results', { skip, timeout: 300000 }, async () => {
    await page.fill('#te', '0.004, 0.008, 0.012');
    await page.fill('#b0', '3');
    const seq = Number((await readData('#inputInfo')).seq ?? 0);
    await page.setInputFiles('#maskFile', []);
    // Dropped on the page's drop zone together (the names say which is the magnitude).
    const files = ['Phase.nii', 'Mag.nii'].map((name) => ({ name, b64: fs.readFileSync(path.join(ROMEO, name)).toString('base64') }));
    await page.evaluate((list) => {
      const dt = new DataTransfer();
      for (const f of list) dt.items.add(new File([Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0))], f.name));
      document.querySelector('#drop').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    }, files);
    await page.waitForFunction((s) => Number(document.querySelector('#inputInfo').dataset.seq) > s && document.body.dataset.state === 'idle', seq, { timeout: 60000 });
    const info = await readData('#inputInfo');
    assert.equal(info.echoes, 3);
    assert.deepEqual(info.dims, [51, 51, 41]);
    assert.match(await page.textContent('#inputInfo'), /warning: the phase spans \[[^\]]+\], far less than the 2π of a wrapped phase in radians: rescaled/);
    const { readNifti } = await import('../bindings/js/index.js');
    const chi = readNifti(await runToChi(`brain mask|echo fit|${bg}|TKD`, 'Phase_chi.nii.gz'));
    assert.ok(chi.data.every(Number.isFinite), 'χ finite');
    const inside = chi.data.filter((v) => v !== 0);
    assert.ok(inside.length > 1000, `χ defined in ${inside.length} voxels`);
    const sorted = Float32Array.from(inside).sort();
    const p1 = sorted[Math.floor(0.01 * sorted.length)], p99 = sorted[Math.floor(0.99 * sorted.length)];
    // A scaled phase left as it was gives χ of at most 0.0035 ppm; rescaled, a brain's χ spans tenths of a ppm.
    assert.ok(p99 - p1 > 0.05 && p99 - p1 < 5, `χ 1st–99th percentile [${p1}, ${p99}] ppm`);
    romeoSpread = p99 - p1;
    console.log(`# ROMEO: χ in ${inside.length} voxels, 1st–99th percentile [${p1.toFixed(3)}, ${p99.toFixed(3)}] ppm`);
  });

  test('ROMEO’s files, also SWI + R2*: SWI, minIP, R2*, T2* listed with their units, downloaded with ROMEO’s dims and affine; SWI ≤ the echoes’ root-sum-of-squares magnitude in the mask, minIP ≤ SWI, R2* median plausible, T2*·R2* = 1', { skip, timeout: 300000 }, async () => {
    // ROMEO's files are loaded by the test above.
    assert.deepEqual((await readData('#inputInfo')).dims, [51, 51, 41], 'ROMEO loaded');
    await page.check('#also-swi');
    await page.check('#also-r2star');
    try {
      const { readNifti, readEchoes } = await import('../bindings/js/index.js');
      const chi = readNifti(await runToChi(`brain mask|echo fit|${bg}|TKD|SWI|minIP|R2*`, 'Phase_chi.nii.gz')).data;
      // The brain mask as χ's support (χ is 0 outside it).
      const mask = chi.map((v) => (v !== 0 ? 1 : 0));
      const mag = readEchoes(fs.readFileSync(path.join(ROMEO, 'Mag.nii')));
      const n = 51 * 51 * 41;
      assert.equal(mag.echoes, 3);
      const vols = await page.$eval('#viewerCard', (e) => e.dataset.volumes.split(','));
      const got = {};
      for (const [k, unit] of Object.entries({ swi: 'a.u.', minIp: 'a.u.', r2star: 's⁻¹', t2star: 's' })) {
        assert.ok(vols.includes(`result.${k}`), `result.${k} listed: ${vols}`);
        await page.selectOption('#viewVolume', `result.${k}`);
        await page.waitForFunction((v) => document.querySelector('#viewerCard').dataset.volume === v && document.querySelector('#viewValue').dataset.volume === v, `result.${k}`, { timeout: 10000 });
        assert.equal((await readData('#viewValue')).unit, unit, `${k}'s unit`);
        const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 20000 }), page.click('#viewDownload')]);
        assert.match(dl.suggestedFilename(), /^Phase_.+\.nii\.gz$/, `${k}'s file name`);
        const nii = readNifti(fs.readFileSync(await dl.path()));
        assert.deepEqual([nii.dims, nii.voxelMm, nii.affine], [mag.dims, mag.voxelMm, mag.affine], `${k}: ROMEO's dims and affine`);
        assert.ok(nii.data.every(Number.isFinite), `${k} finite`);
        got[k] = nii.data;
      }
      // SWI is the echoes' root-sum-of-squares magnitude times a phase mask in [0, 1] (contrast/swi.h).
      let inMask = 0, darkened = 0;
      for (let i = 0; i < n; i++) {
        if (!mask[i]) continue;
        inMask++;
        let ss = 0;
        for (let e = 0; e < 3; e++) ss += mag.data[e * n + i] ** 2;
        const rss = Math.sqrt(ss);
        assert.ok(got.swi[i] >= 0 && got.swi[i] <= rss * (1 + 1e-5) + 1e-6, `SWI ${got.swi[i]} ≤ RSS ${rss} at ${i}`);
        if (got.swi[i] < 0.9 * rss) darkened++;
      }
      assert.ok(inMask > 1000, `${inMask} voxels in the mask`);
      assert.ok(darkened > 0, 'the phase mask darkens some voxels');
      // minIP: the minimum over a slab that holds the voxel itself.
      let above = 0;
      for (let i = 0; i < n; i++) if (got.minIp[i] > got.swi[i]) above++;
      assert.equal(above, 0, 'minIP ≤ SWI voxelwise');
      const r2In = [];
      let checked = 0;
      for (let i = 0; i < n; i++) {
        if (!mask[i]) continue;
        r2In.push(got.r2star[i]);
        if (got.r2star[i] >= 1) {
          checked++;
          assert.ok(Math.abs(got.t2star[i] * got.r2star[i] - 1) < 1e-5, `T2*·R2* at ${i}: ${got.t2star[i]}·${got.r2star[i]}`);
        }
      }
      r2In.sort((a, b) => a - b);
      const median = r2In[r2In.length >> 1];
      assert.ok(median >= 10 && median <= 100, `R2* median ${median} s⁻¹ in the mask`);
      console.log(`# ROMEO: ${inMask} voxels in the mask, SWI below 0.9·RSS in ${darkened}; R2* median ${median.toFixed(1)} s⁻¹, T2*·R2* = 1 checked in ${checked}`);
    } finally {
      await page.uncheck('#also-swi');
      await page.uncheck('#also-r2star');
    }
  });

  test('ROMEO’s phase_with_nan.nii through the file inputs: with Mag.nii (another scan) refused naming both sizes; alone, asks for a mask or magnitude; an all-ones mask refused for its NaN inside; a brain mask: the NaN outside and the ±4.7 span said in the API’s words, χ finite in the mask, the API’s bit for bit, its spread of the order of Phase.nii’s', { skip, timeout: 300000 }, async () => {
    const { readEchoes, readNifti, writeNifti } = await import('../bindings/js/index.js');
    const file = path.join(ROMEO, 'phase_with_nan.nii');
    const phase = readEchoes(fs.readFileSync(file));
    const [X, Y, Z] = phase.dims;
    const n = X * Y * Z;
    const te = [0.004, 0.008];
    // The node API's words and χ on the same inputs.
    const t = await nodeApi();
    // A brain mask as a user would draw it: an ellipse inside the head (x 24–104, y 24–88 of 128×128), every slice.
    const brain = Uint8Array.from({ length: n }, (_, i) => (((i % X) - 64) / 40) ** 2 + ((Math.floor(i / X) % Y - 56) / 32) ** 2 <= 1 ? 1 : 0);
    const mag = readEchoes(fs.readFileSync(path.join(ROMEO, 'Mag.nii')));
    await assert.rejects(t.pipeline({ phase, magnitude: mag, te, method: 'tkd', keepInputs: true }), /magnitude is 51×51×41 but phase is 128×128×5/);
    const api = await t.pipeline({ phase, mask: brain, te, method: 'tkd', background: 'pdf', keepInputs: true });
    const like = { dims: [X, Y, Z], voxelMm: phase.voxelMm.slice(0, 3) };
    fs.writeFileSync(path.join(tmp, 'nan_ones_mask.nii'), await writeNifti(new Float32Array(n).fill(1), like));
    fs.writeFileSync(path.join(tmp, 'nan_brain_mask.nii'), await writeNifti(Float32Array.from(brain), like));
    const loaded = async (seq) => page.waitForFunction((s) => (Number(document.querySelector('#inputInfo').dataset.seq) > s || !document.querySelector('#error').hidden) && document.body.dataset.state === 'idle', seq, { timeout: 60000 });
    await page.fill('#te', te.join(', '));
    await page.fill('#b0', '3');
    await page.setInputFiles('#maskFile', []);
    // With ROMEO's Mag.nii (51×51×41, another scan): refused, naming both sizes as the API does.
    await page.setInputFiles('#magFile', path.join(ROMEO, 'Mag.nii'));
    await page.waitForFunction(() => document.body.dataset.state === 'idle', null, { timeout: 60000 });
    let seq = Number((await readData('#inputInfo')).seq ?? 0);
    await page.setInputFiles('#pipePhaseFile', file);
    await page.waitForFunction(() => !document.querySelector('#error').hidden && document.body.dataset.state === 'idle', null, { timeout: 60000 });
    assert.match(await errorText(), /The phase is 128×128×5 but the magnitude Mag\.nii is 51×51×41: they must have the same dimensions/);
    assert.match(await page.textContent('#inputInfo'), /phase_with_nan\.nii: not loaded/);
    assert.equal((await readData('#inputInfo')).loaded, false);
    assert.equal(await page.isDisabled('#run'), true);
    // Alone: loaded (its ±4.7 span rescaled, said as the API says it), Run disabled until a mask or magnitude is chosen.
    await page.setInputFiles('#magFile', []);
    await loaded(seq);
    assert.equal((await readData('#inputInfo')).loaded, true, await errorText());
    assert.deepEqual((await readData('#inputInfo')).dims, [X, Y, Z]);
    await page.waitForFunction(() => /No mask and no magnitude: choose a mask, or the magnitude to make one from/.test(document.querySelector('#phaseMsg')?.textContent ?? ''), null, { timeout: 20000 });
    assert.equal(await page.isDisabled('#run'), true);
    // An all-ones mask: its 1280 NaN are inside it: refused in the CLI's words (the fix: the file or the mask).
    seq = Number((await readData('#inputInfo')).seq ?? 0);
    await page.setInputFiles('#maskFile', path.join(tmp, 'nan_ones_mask.nii'));
    await page.waitForFunction(() => !document.querySelector('#error').hidden && document.body.dataset.state === 'idle', null, { timeout: 60000 });
    assert.match(await errorText(), /The phase holds 1280 NaN or infinite values inside the mask: fix the file or the mask/);
    assert.equal(await page.isDisabled('#run'), true);
    // A brain mask: loaded with the API's two warnings (what was assumed), then run with PDF and TKD as the API ran.
    seq = Number((await readData('#inputInfo')).seq ?? 0);
    await page.setInputFiles('#maskFile', path.join(tmp, 'nan_brain_mask.nii'));
    await loaded(seq);
    assert.equal(await page.isHidden('#error'), true, await errorText());
    const info = await page.textContent('#inputInfo');
    const said = (w) => info.includes(w);
    const nanWarning = api.report.warnings.find((w) => /NaN or infinite value\(s\) outside the mask: set to 0 there/.test(w));
    const spanWarning = api.report.warnings.find((w) => /^the phase spans \[-4\.65724, 4\.70933\], far more than the 2π/.test(w));
    assert.ok(nanWarning && spanWarning, api.report.warnings.join('\n'));
    assert.ok(said(nanWarning), `the page says “${nanWarning}”: ${info}`);
    assert.ok(said(spanWarning), `the page says “${spanWarning}”: ${info}`);
    const mask = brain.reduce((a, v) => a + v, 0);
    assert.equal((await readData('#inputInfo')).maskVoxels, mask);
    const background = '#pipelineParams [data-option="background"]';
    const defaultBackground = await page.inputValue(background);
    await page.selectOption(background, 'pdf');
    try {
      const chi = readNifti(await runToChi('echo fit|PDF|TKD', 'phase_with_nan_chi.nii.gz')).data;
      let inMask = 0;
      for (let i = 0; i < n; i++) {
        if (!brain[i]) continue;
        inMask++;
        assert.ok(Number.isFinite(chi[i]), `χ finite at ${i} in the mask`);
      }
      assert.equal(inMask, mask);
      const same = chi.length === api.chi.data.length && chi.every((v, i) => Object.is(v, api.chi.data[i]));
      assert.ok(same, 'the page’s χ is the API’s on the same phase, mask, TE and options');
      const sorted = Float32Array.from(chi.filter((v, i) => brain[i] && v !== 0)).sort();
      const spread = sorted[Math.floor(0.99 * sorted.length)] - sorted[Math.floor(0.01 * sorted.length)];
      // No ground truth: a brain's χ, of the order of the Phase.nii run's (a phase left unscaled or poisoned by NaN
      // gives nothing, or a χ far out of range).
      assert.ok(romeoSpread > 0, 'the Phase.nii run above measured its spread');
      assert.ok(spread > romeoSpread / 10 && spread < romeoSpread * 10, `χ 1st–99th percentile span ${spread} ppm vs Phase.nii's ${romeoSpread} ppm`);
      console.log(`# ROMEO phase_with_nan: χ finite in the ${mask} mask voxels, = the API's; 1st–99th percentile span ${spread.toFixed(3)} ppm (Phase.nii's ${romeoSpread.toFixed(3)})`);
    } finally {
      await page.selectOption(background, defaultBackground);
    }
  });

  test('no console error in the session but dcm2niix’s own', { skip }, () => {
    assert.deepEqual(consoleErrors.filter((e) => !/dcm2niix|Dcm2niix/i.test(e)), []);
  });
}
