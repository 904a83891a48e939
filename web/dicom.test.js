// web/dicom.js: a DICOM folder in the From phase workflow.
//   - sortSeries (node): phase vs magnitude by ImageType and dcm2niix's _ph suffix, echoes by EchoNumber, TE and B0
//     from the sidecars, real/imaginary left out, each refusal (no phase, several phases, echo counts or TEs that
//     disagree, an echo twice) in words;
//   - in Chromium (playwright-core, the page served by scripts/serve.js): the phantom head scanned, written as DICOM
//     files by dcmjs (tests/js/make-dicom.js: Siemens-style phase 0…4095 × 2 − 4096, one file per slice, echo, part) and
//     given to the DICOM folder input: TE, B0, echoes, dims and voxel size filled from the headers, the phase read as
//     scanner integers; the converted phase equals the written integers × π/4096 at the same patient position (the
//     NIfTI affine mapped back to the DICOM geometry), the magnitude equals the written integers; the pipeline with TKD
//     runs, χ bit-identical to the node API's pipeline() on the converted data, r ≥ 0.999 vs the node API's χ of the scan
//     itself (no DICOM, no quantisation), and the same r vs the phantom's truth as that χ's;
//   - the refusals through the input (no DICOM, no phase series, echo counts that disagree, dims that disagree), each
//     with its message, Run disabled; a folder dropped (a drop event) converts; Cancel during dcm2niix terminates its
//     worker and keeps the input. Screenshot of the loaded input card: test-artifacts/dicom-input.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { NO_FETCH_GLOBALS, testInChildWithFetchGlobals } from '../scripts/chromium.js';
import { sortSeries, DicomError } from './dicom.js';
import { defaultBackgroundTitle } from '../tests/js/background-titles.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CHROMIUM = '/usr/bin/chromium';
const skip = fs.existsSync(CHROMIUM) ? false : `${CHROMIUM} is missing: install it with scripts/bootstrap.sh --browser (apt-get install chromium)`;

// ---------------------------------------------------------------------------------------------------------------------
// sortSeries on sidecars as dcm2niix writes them

/** One dcm2niix output: series, echo, TE (s), ImageType. */
const out = (name, series, echo, te, type, extra = {}) => ({
  name,
  nii: name,
  sidecar: { SeriesNumber: series, SeriesDescription: `s${series}`, ProtocolName: 'gre', EchoNumber: echo, EchoTime: te, ImageType: type, MagneticFieldStrength: 2.89, ...extra },
});
const P = ['ORIGINAL', 'PRIMARY', 'P', 'ND', 'PHASE'];
const M = ['ORIGINAL', 'PRIMARY', 'M', 'ND', 'MAGNITUDE'];

test('sortSeries: phase and magnitude by ImageType (or _ph), echoes by EchoNumber, TE and B0 from the sidecars', () => {
  const s = sortSeries([
    out('series3_e3_ph', 3, 3, 0.015, P),
    out('series2_e2', 2, 2, 0.01, M),
    out('series3_e1_ph', 3, 1, 0.005, P),
    out('series2_e1', 2, 1, 0.005, M),
    out('series3_e2_ph', 3, 2, 0.01, ['ORIGINAL', 'PRIMARY', 'OTHER']), // the suffix alone says phase
    out('series2_e3', 2, 3, 0.015, M),
    out('series4_e1_real', 4, 1, 0.005, ['ORIGINAL', 'PRIMARY', 'R', 'REAL']),
  ]);
  assert.deepEqual(s.phase.map((o) => o.name), ['series3_e1_ph', 'series3_e2_ph', 'series3_e3_ph']);
  assert.deepEqual(s.magnitude.map((o) => o.name), ['series2_e1', 'series2_e2', 'series2_e3']);
  assert.deepEqual(s.te, [0.005, 0.01, 0.015]);
  assert.equal(s.b0, 2.89);
  assert.deepEqual(s.phaseSeries, { number: 3, description: 's3', echoes: 3 });
  assert.deepEqual(s.magnitudeSeries, { number: 2, description: 's2', echoes: 3 });
  assert.ok(s.notes.some((n) => /left out: series 4 “s4” \(ORIGINAL\\PRIMARY\\R\\REAL\)/.test(n)), s.notes.join('; '));
});

test('sortSeries: without EchoNumber the echoes follow EchoTime; no magnitude and no TE are said, not refused', () => {
  const s = sortSeries([out('b', 5, undefined, 0.02, P), out('a', 5, undefined, 0.01, P)].map((o) => ({ ...o, sidecar: { ...o.sidecar, EchoNumber: undefined } })));
  assert.deepEqual(s.phase.map((o) => o.name), ['a', 'b']);
  assert.deepEqual(s.magnitude, []);
  assert.equal(s.magnitudeSeries, null);
  assert.ok(s.notes.some((n) => /no magnitude series: choose a mask/.test(n)));
  const noTe = sortSeries([out('x', 5, 1, undefined, P)]);
  assert.equal(noTe.te, null);
  assert.ok(noTe.notes.some((n) => /echo times are not in the DICOM headers: type them/.test(n)));
});

test('sortSeries: several magnitude series: the phase’s protocol, then its echo count', () => {
  const s = sortSeries([
    out('p1', 7, 1, 0.005, P), out('p2', 7, 2, 0.01, P),
    out('swi', 9, 1, 0.005, ['DERIVED', 'PRIMARY', 'M', 'MNIP'], { ProtocolName: 'swi' }),
    out('m1', 6, 1, 0.005, M), out('m2', 6, 2, 0.01, M),
    out('one', 8, 1, 0.005, M),
  ]);
  assert.equal(s.magnitudeSeries.number, 6);
});

test('sortSeries: each refusal names the problem and the fix', () => {
  const refused = (outputs, code, re) => {
    assert.throws(() => sortSeries(outputs), (e) => {
      assert.ok(e instanceof DicomError);
      assert.equal(e.code, code);
      assert.match(e.message, re);
      return true;
    });
  };
  refused([out('m', 2, 1, 0.005, M)], 'NoPhase', /no phase series \(found: series 2 “s2” \(magnitude\)\): choose a folder with the multi-echo phase \(ImageType P or PHASE\)/);
  refused([out('a', 3, 1, 0.005, P), out('b', 5, 1, 0.005, P, { ProtocolName: 'other' })], 'SeveralPhase', /2 phase series \(series 3 “s3”, series 5 “s5”\): choose a folder with the phase and magnitude of one acquisition/);
  refused(
    [out('p1', 3, 1, 0.005, P), out('p2', 3, 2, 0.01, P), out('p3', 3, 3, 0.015, P), out('m1', 2, 1, 0.005, M), out('m2', 2, 2, 0.01, M)],
    'EchoesMismatch',
    /The phase \(series 3 “s3”\) has 3 echoes but the magnitude \(series 2 “s2”\) has 2: choose a folder with every echo of both series/,
  );
  refused([out('p1', 3, 1, 0.005, P), out('m1', 2, 1, 0.006, M)], 'TeMismatch', /The magnitude \(series 2 “s2”\) has echo times 0\.006 s but the phase \(series 3 “s3”\) 0\.005 s/);
  refused([out('p1', 3, 1, 0.005, P), out('p1b', 3, 1, 0.005, P)], 'EchoRepeated', /The phase \(series 3 “s3”\) holds echo 1 twice \(p1, p1b\): choose a folder with one scan of this series/);
  refused(
    [out('p1', 3, 1, 0.005, P), out('m1', 2, 1, 0.005, M, { ProtocolName: 'a' }), out('m2', 4, 1, 0.005, M, { ProtocolName: 'b' })],
    'SeveralMagnitude',
    /2 magnitude series that could go with the phase \(series 2 “s2”, series 4 “s4”\)/,
  );
});

test('sortSeries: scanner field maps — a B0 map in Hz (FIELDMAPHZ; Philips enhanced: its magnitude by the BIDS guess), a Siemens phase difference (EchoTime1/2)', () => {
  // GE as dcm2niix writes it: the map and its magnitude in one series, the map's Units "Hz".
  const ge = sortSeries([
    out('series6_fieldmaphz', 6, undefined, undefined, ['ORIGINAL', 'PRIMARY', 'OTHER', 'FIELDMAPHZ'], { Units: 'Hz', EchoTime1: 0.004608, EchoTime2: 0.006912, MagneticFieldStrength: 3 }),
    out('series6', 6, undefined, 0.004608, ['ORIGINAL', 'PRIMARY', 'OTHER', 'MAGNITUDE'], { MagneticFieldStrength: 3 }),
  ]);
  assert.equal(ge.kind, 'fieldmap');
  assert.equal(ge.units, 'hz');
  assert.equal(ge.fieldMap.name, 'series6_fieldmaphz');
  assert.deepEqual(ge.magnitude.map((o) => o.name), ['series6']);
  assert.deepEqual([ge.te1, ge.te2, ge.b0], [0.004608, 0.006912, 3]);
  assert.deepEqual(ge.fieldSeries, { number: 6, description: 's6', echoes: 1 });
  // Philips' enhanced DICOM: echo 1 typed T1\MIXED, a magnitude only by dcm2niix's BIDS guess; echo 2 the map.
  const philips = sortSeries([
    out('series801_e1', 801, 1, 0.00152, ['ORIGINAL', 'PRIMARY', 'T1', 'MIXED'], { BidsGuess: ['fmap', '_acq-SSRMFFE_run-801_magnitude'] }),
    out('series801_e2_fieldmaphz', 801, 2, 0.00152, ['ORIGINAL', 'PRIMARY', 'T1', 'MIXED', 'FIELDMAPHZ'], { Units: 'Hz' }),
  ]);
  assert.equal(philips.kind, 'fieldmap');
  assert.deepEqual(philips.magnitude.map((o) => o.name), ['series801_e1']);
  // Siemens: the phase difference (series 3, EchoTime1 < EchoTime2) and the magnitude of echo 1 (series 2, another TE).
  const siemens = sortSeries([
    out('series3_e2_ph', 3, 2, 0.00765, P, { EchoTime1: 0.00519, EchoTime2: 0.00765 }),
    out('series2', 2, undefined, 0.00519, M),
  ]);
  assert.equal(siemens.kind, 'phasediff');
  assert.deepEqual([siemens.te1, siemens.te2, siemens.deltaTE], [0.00519, 0.00765, 0.00246]);
  assert.deepEqual(siemens.phase.map((o) => o.name), ['series3_e2_ph']);
  assert.deepEqual(siemens.magnitude.map((o) => o.name), ['series2']);
  assert.deepEqual(siemens.notes, []);
  // Without the magnitude series: said, not refused; a multi-echo phase keeps its kind.
  assert.match(sortSeries([out('series3_e2_ph', 3, 2, 0.00765, P, { EchoTime1: 0.00519, EchoTime2: 0.00765 })]).notes.join(), /no magnitude series: choose a mask/);
  assert.equal(sortSeries([out('p1', 3, 1, 0.005, P), out('m1', 2, 1, 0.005, M)]).kind, 'phase');
  // Two field maps, or a field map beside a phase: refused.
  assert.throws(
    () => sortSeries([out('a_fieldmaphz', 6, 1, 0.004, ['FIELDMAPHZ'], { Units: 'Hz' }), out('p1', 3, 1, 0.005, P)]),
    (e) => e.code === 'SeveralFieldMaps' && /series 6 “s6” \(1 field map in Hz\), series 3 “s3” \(phase\): choose a folder with one field map/.test(e.message),
  );
});

// ---------------------------------------------------------------------------------------------------------------------
// In Chromium

// playwright-core needs node's fetch globals at import: without them (node --no-experimental-fetch) this file runs
// itself again in a child node and reports the child's result as one test (scripts/chromium.js).
if (NO_FETCH_GLOBALS) {
  await testInChildWithFetchGlobals(import.meta.url, 'DICOM browser tests, in a child node with the fetch globals playwright-core needs', { skip });
} else browserSuite();

function browserSuite() {
  /** The phantom scan: 64×64×48 at 3 mm (the phantom's 192×192×144 mm field of view), 3 echoes, 3 T. */
  const SCAN = { dims: [64, 64, 48], voxelMm: [3, 3, 3], te: [0.005, 0.01, 0.015], b0: 3, snr: 100, seed: 4 };
  /** The small folders of the refusals and the drop: 16×16×8 at 2 mm, smooth analytic phase. */
  const SMALL = { dims: [16, 16, 8], voxelMm: [2, 2, 2], te: [0.004, 0.008, 0.012], b0: 3 };
  // χ after the DICOM round trip vs χ of the node API on the scan itself (the phase unquantised): r ≥ 0.999 (measured
  // 0.9999); vs the phantom's truth, the same r as that χ's to ±0.005 (TKD on this scan: 0.81, the pipeline's own figure).
  const R_SAME = 0.999;
  const R_TRUTH_DELTA = 0.005;
  // dcm2niix's own stderr for the no-DICOM folder (a console error of its worker): the only console error expected.
  const EXPECTED_CONSOLE = [/^Error: Unable to find any DICOM images in \/input/];
  let srv, ctx, page, tmp, written, scan, direct, background;
  const consoleErrors = [];
  /** The node API's runtime (1 worker) the tests compare the page with: started once, shared, terminated after. */
  let nodeOnce = null;
  const nodeApi = () => (nodeOnce ??= import('../bindings/js/index.js').then(({ createTessera }) => createTessera({ workers: 1 })));

  before(async () => {
    if (skip) return;
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-dicom-'));
    const { writeDicomScan } = await import('../tests/js/make-dicom.js');
    const t = await nodeApi();
    const geometry = { dims: SCAN.dims, voxelMm: SCAN.voxelMm, b0Dir: [0, 0, 1] };
    scan = await t.phantomScan({ geometry, te: SCAN.te, b0: SCAN.b0, snr: SCAN.snr, seed: SCAN.seed });
    // the pipeline on the scan itself (no DICOM, no quantisation): what the DICOM round trip is compared with
    direct = await t.pipeline({ keepInputs: true, phase: scan.phase, magnitude: scan.magnitude, geometry, te: SCAN.te, b0: SCAN.b0, method: 'tkd' });
    // the stage title of the schema's default background removal, whichever it is
    background = await defaultBackgroundTitle(t);
    written = writeDicomScan(path.join(tmp, 'phantom'), { ...SCAN, phase: scan.phase, magnitude: scan.magnitude });
    const small = (extra = {}) => {
      const n = SMALL.dims[0] * SMALL.dims[1] * SMALL.dims[2];
      const field = (echoes, dims = SMALL.dims) => Float32Array.from({ length: dims[0] * dims[1] * dims[2] * echoes }, (_, i) => {
        const v = i % (dims[0] * dims[1] * dims[2]);
        const e = Math.floor(i / (dims[0] * dims[1] * dims[2]));
        const [x, y, z] = [v % dims[0], Math.floor(v / dims[0]) % dims[1], Math.floor(v / (dims[0] * dims[1]))];
        const p = (e + 1) * (0.3 * x - 0.2 * y + 0.1 * z);
        return Math.atan2(Math.sin(p), Math.cos(p));
      });
      return { ...SMALL, phase: field(3), magnitude: Float32Array.from({ length: n * 3 }, (_, i) => 100 + (i % 13)), ...extra };
    };
    writeDicomScan(path.join(tmp, 'small'), small());
    writeDicomScan(path.join(tmp, 'magnitude-only'), small({ phase: null }));
    writeDicomScan(path.join(tmp, 'echoes-disagree'), small({ magnitude: new Float32Array(16 * 16 * 8 * 2).fill(100), magnitudeEchoes: 2 }));
    writeDicomScan(path.join(tmp, 'dims-disagree'), small({ magnitude: new Float32Array(8 * 8 * 8 * 3).fill(100), magnitudeDims: [8, 8, 8] }));
    fs.mkdirSync(path.join(tmp, 'no-dicom'));
    fs.writeFileSync(path.join(tmp, 'no-dicom', 'notes.txt'), 'not an image\n');
    fs.writeFileSync(path.join(tmp, 'no-dicom', 'IM0001'), Buffer.alloc(4096, 7));

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

  /** An element's data-* (numbers and booleans parsed; te and dims-like lists as arrays). */
  const readData = (selector) =>
    page.$eval(selector, (e) => {
      const parse = (x) => (x === 'true' ? true : x === 'false' ? false : x !== '' && Number.isFinite(Number(x)) ? Number(x) : x);
      return Object.fromEntries(Object.entries(e.dataset).map(([k, v]) => [k, ['te', 'dims', 'voxelMm', 'phaseRange'].includes(k) ? v.split(',').map(parse) : parse(v)]));
    });
  const errorText = async () => ((await page.isHidden('#error')) ? '' : await page.textContent('#error'));
  /** Gives a folder to the DICOM input and waits for its conversion to end (data-state not converting). */
  async function chooseFolder(dir) {
    const seq = Number((await readData('#inputInfo')).seq ?? 0);
    await page.setInputFiles('#dicomDir', dir);
    await page.waitForFunction(() => ['done', 'error', 'cancelled'].includes(document.querySelector('#dicomText').dataset.state), null, { timeout: 60000, polling: 50 });
    return seq;
  }
  /** Waits for a refusal in the error box; returns its text. */
  async function refusal() {
    await page.waitForFunction(() => !document.querySelector('#error').hidden && document.body.dataset.state === 'idle', null, { timeout: 20000 });
    return errorText();
  }

  test('a DICOM folder (the phantom scan, written by dcmjs) fills TE, B0 and echoes; the converted phase and magnitude are the written ones at the same positions; the pipeline with TKD runs, χ equal to node’s and near the truth', { skip, timeout: 240000 }, async () => {
    await page.fill('#te', '0.1');
    await page.fill('#b0', '1.5');
    const seq = await chooseFolder(path.join(tmp, 'phantom'));
    assert.equal((await readData('#dicomText')).state, 'done', await errorText());
    await page.waitForFunction((s) => Number(document.querySelector('#inputInfo').dataset.seq) > s && document.body.dataset.state === 'idle', seq, { timeout: 60000 });
    const status = await readData('#dicomText');
    assert.equal(status.files, written.files.length);
    assert.equal(status.echoes, 3);
    assert.deepEqual(status.te, SCAN.te);
    assert.equal(status.b0, SCAN.b0);
    assert.equal(await page.inputValue('#te'), SCAN.te.join(', '));
    assert.equal(await page.inputValue('#b0'), String(SCAN.b0));
    assert.equal(await page.inputValue('#phaseUnits'), 'scanner', 'Siemens-style integers are read as scanner units');
    const info = await readData('#inputInfo');
    assert.equal(info.kind, 'pipeline');
    assert.equal(info.source, 'dicom');
    assert.equal(info.echoes, 3);
    assert.equal(info.magnitude, true);
    assert.deepEqual(info.dims, SCAN.dims);
    assert.deepEqual(info.voxelMm, SCAN.voxelMm);
    let lo = Infinity, hi = -Infinity;
    for (const s of written.phaseStored) (lo = Math.min(lo, 2 * s - 4096)), (hi = Math.max(hi, 2 * s - 4096));
    assert.deepEqual(info.phaseRange, [lo, hi], 'the phase as dcm2niix scaled it: RescaleSlope 2, RescaleIntercept −4096');
    assert.match(await page.textContent('#inputInfo'), /DICOM folder “phantom” \(\d+ files\) converted in this page by dcm2niix: phase series 3, magnitude series 2, 3 echoes/);
    assert.match(await page.textContent('#inputInfo'), /phase from scanner integers/);
    fs.mkdirSync(path.join(ROOT, 'test-artifacts'), { recursive: true });
    await page.locator('#inputCard').screenshot({ path: path.join(ROOT, 'test-artifacts', 'dicom-input.png') });

    // The same conversion through the module in the page: the data, compared voxel by voxel with what was written.
    await page.evaluate(() => {
      const i = Object.assign(document.createElement('input'), { type: 'file', multiple: true, id: 'probeDir', hidden: true });
      i.webkitdirectory = true;
      document.body.append(i);
    });
    await page.setInputFiles('#probeDir', path.join(tmp, 'phantom'));
    const got = await page.evaluate(async () => {
      const { convertDicom, sortSeries, loadDicom } = await import('/web/dicom.js');
      const { createIoClient } = await import('/web/io-client.js');
      const files = [...document.querySelector('#probeDir').files];
      const sorted = sortSeries(await convertDicom(files));
      const { r, magnitude, units } = await loadDicom(createIoClient(), { dicom: sorted, mask: null, magnitude: null }, 'rad');
      const b64 = (a) => {
        const u = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
        let s = '';
        for (let k = 0; k < u.length; k += 0x8000) s += String.fromCharCode(...u.subarray(k, k + 0x8000));
        return btoa(s);
      };
      return { dims: r.dims, voxelMm: r.voxelMm, b0Dir: r.b0Dir, affine: r.like.affine, echoes: r.echoes, units, phase: b64(r.phase), magnitude: b64(magnitude) };
    });
    const f32 = (b) => {
      const buf = Buffer.from(b, 'base64');
      return new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
    };
    const phase = f32(got.phase), magnitude = f32(got.magnitude);
    assert.equal(got.units, 'scanner');
    assert.deepEqual(got.dims, SCAN.dims);
    assert.deepEqual(got.voxelMm, SCAN.voxelMm);
    const { dicomIndex } = await import('../tests/js/make-dicom.js');
    const [nx, ny, nz] = SCAN.dims;
    const n = nx * ny * nz;
    const A = got.affine;
    /** The written voxel (x fastest) at converted voxel (i, j, k): the NIfTI affine (RAS) → LPS → the DICOM geometry. */
    const map = new Int32Array(n);
    for (let k = 0; k < nz; k++) for (let j = 0; j < ny; j++) for (let i = 0; i < nx; i++) {
      const ras = [0, 1, 2].map((r) => A[4 * r] * i + A[4 * r + 1] * j + A[4 * r + 2] * k + A[4 * r + 3]);
      const w = dicomIndex(written.geometry, [-ras[0], -ras[1], ras[2]]);
      const idx = w.map(Math.round);
      assert.ok(w.every((v, a) => Math.abs(v - idx[a]) < 1e-3 && idx[a] >= 0 && idx[a] < SCAN.dims[a]), `voxel ${i},${j},${k} maps to ${w} (the geometry does not match)`);
      map[i + nx * (j + ny * k)] = idx[0] + nx * (idx[1] + ny * idx[2]);
    }
    let worstExact = 0, worstTruth = 0, magDiff = 0;
    for (let e = 0; e < 3; e++) {
      for (let v = 0; v < n; v++) {
        const w = e * n + map[v];
        const want = ((2 * written.phaseStored[w] - 4096) * Math.PI) / 4096;
        worstExact = Math.max(worstExact, Math.abs(phase[e * n + v] - want));
        const d = phase[e * n + v] - scan.phase[w];
        worstTruth = Math.max(worstTruth, Math.abs(d - 2 * Math.PI * Math.round(d / (2 * Math.PI))));
        magDiff = Math.max(magDiff, Math.abs(magnitude[e * n + v] - written.magnitudeStored[w]));
      }
    }
    assert.ok(worstExact < 1e-6, `converted phase vs the written integers × π/4096: max |Δ| ${worstExact}`);
    assert.ok(worstTruth <= Math.PI / 4096 + 1e-5, `converted phase vs the phantom's phase: max |Δ| ${worstTruth} (quantisation π/4096)`);
    assert.equal(magDiff, 0, 'the magnitude is the written integers');

    // The pipeline with TKD on the DICOM input: χ bit-identical to the node API's on the converted data, near the truth.
    await page.waitForFunction((want) => document.querySelector('#planReadout').dataset.stages === want && !document.querySelector('#run').disabled, `brain mask|echo fit|${background}|TKD`, { timeout: 30000 });
    await page.click('#run');
    await page.waitForFunction(() => ['done', 'error'].includes(document.body.dataset.state), null, { timeout: 120000 });
    assert.equal(await page.evaluate(() => document.body.dataset.state), 'done', await errorText());
    const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 20000 }), page.click('#download')]);
    assert.equal(dl.suggestedFilename(), 'phantom_chi.nii.gz');
    const { readNifti } = await import('../bindings/js/index.js');
    const chi = readNifti(fs.readFileSync(await dl.path()));
    assert.deepEqual(chi.dims, SCAN.dims);
    assert.deepEqual(chi.voxelMm, SCAN.voxelMm);
    const want = await (await nodeApi()).pipeline({ keepInputs: true, phase, magnitude, geometry: { dims: got.dims, voxelMm: got.voxelMm, b0Dir: got.b0Dir }, te: SCAN.te, b0: SCAN.b0, method: 'tkd' });
    let differ = 0;
    for (let v = 0; v < n; v++) if (chi.data[v] !== want.chi.data[v]) differ++;
    assert.equal(differ, 0, `χ bit-identical to the node API's pipeline() on the converted data: ${differ} voxels differ`);
    // The methods' command names the converted NIfTI files the page offers; run in node on them it gives the page's χ.
    const box = await page.$eval('#methodsBox', (e) => ({ ...e.dataset }));
    const args = JSON.parse(box.command);
    assert.deepEqual(box.files.split('|'), ['phantom_phase_rad.nii', 'phantom_magnitude.nii']);
    for (const f of box.files.split('|')) assert.equal(args[args.indexOf(f === 'phantom_phase_rad.nii' ? '--phase' : '--magnitude') + 1], f, args.join(' '));
    const cli = fs.mkdtempSync(path.join(tmp, 'cli-'));
    for (const f of box.files.split('|')) {
      const [d] = await Promise.all([page.waitForEvent('download', { timeout: 20000 }), page.click(`#methodsFiles button[data-file="${f}"]`)]);
      assert.equal(d.suggestedFilename(), f);
      fs.copyFileSync(await d.path(), path.join(cli, f));
    }
    const { execFileSync } = await import('node:child_process');
    execFileSync(process.execPath, ['--no-experimental-fetch', path.join(ROOT, 'bindings/js/cli.js'), ...args.slice(1)], { cwd: cli, stdio: 'pipe', timeout: 180000 });
    const cliChi = readNifti(fs.readFileSync(path.join(cli, args[args.indexOf('--out') + 1])));
    assert.ok(Buffer.from(cliChi.data.buffer, cliChi.data.byteOffset, cliChi.data.byteLength).equals(Buffer.from(chi.data.buffer, chi.data.byteOffset, chi.data.byteLength)), 'the command on the offered NIfTI files gives the page’s χ byte for byte');
    assert.ok(chi.data.every(Number.isFinite), 'χ finite');
    // r in the phantom's brain mask at the written positions: vs χ of the scan itself, and vs the truth
    const corr = (a, b, inside) => {
      let sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0, m = 0;
      for (let v = 0; v < a.length; v++) {
        if (!inside(v)) continue;
        (sa += a[v]), (sb += b[v]), (saa += a[v] * a[v]), (sbb += b[v] * b[v]), (sab += a[v] * b[v]), m++;
      }
      return (sab - (sa * sb) / m) / Math.sqrt((saa - (sa * sa) / m) * (sbb - (sb * sb) / m));
    };
    const at = (vol) => Float32Array.from(map, (w) => vol[w]); // a written-order volume in the converted order
    const inBrain = (v) => scan.mask[map[v]] && want.localMask.data[v];
    const rSame = corr(chi.data, at(direct.chi.data), inBrain);
    const rTruth = corr(chi.data, at(scan.chi), inBrain);
    const rDirect = corr(at(direct.chi.data), at(scan.chi), inBrain);
    assert.ok(rSame >= R_SAME, `r(χ via DICOM, χ of the scan itself) ${rSame.toFixed(5)}`);
    assert.ok(Math.abs(rTruth - rDirect) <= R_TRUTH_DELTA, `r vs truth ${rTruth.toFixed(3)} via DICOM, ${rDirect.toFixed(3)} from the scan itself`);
    console.log(`# DICOM → From phase (TKD): ${written.files.length} files; r vs χ of the scan itself ${rSame.toFixed(5)}; r vs truth ${rTruth.toFixed(3)} (scan itself ${rDirect.toFixed(3)})`);
  });

  test('Cancel during dcm2niix terminates its worker; the input loaded before stays', { skip, timeout: 60000 }, async () => {
    const before = await readData('#inputInfo');
    // Cancel as soon as dcm2niix has the files: the conversion cannot have ended (this task has not yielded since).
    await page.evaluate(() => {
      const el = document.querySelector('#dicomText');
      const o = new MutationObserver(() => {
        if (el.dataset.stage === 'converting') {
          o.disconnect();
          document.querySelector('#dicomCancel').click();
        }
      });
      o.observe(el, { attributes: true });
    });
    await chooseFolder(path.join(tmp, 'phantom'));
    assert.equal((await readData('#dicomText')).state, 'cancelled');
    assert.match(await page.textContent('#dicomText'), /^conversion cancelled after [\d.]+ s$/);
    assert.equal(await page.isHidden('#dicomCancel'), true);
    assert.equal(await page.evaluate(() => document.body.dataset.state), 'idle');
    assert.equal(await errorText(), '');
    const dcmWorkers = () => page.workers().map((w) => w.url()).filter((u) => /dcm2niix/.test(u));
    for (let i = 0; i < 50 && dcmWorkers().length; i++) await page.waitForTimeout(100);
    assert.deepEqual(dcmWorkers(), [], 'no dcm2niix worker left');
    const after = await readData('#inputInfo');
    assert.equal(after.seq, before.seq);
    assert.equal(after.loaded, true);
  });

  test('refusals: no DICOM, no phase series, echo counts that disagree, dims that disagree — each in words, Run disabled', { skip, timeout: 120000 }, async () => {
    const cases = [
      ['no-dicom', /No DICOM image in the folder “no-dicom” \(2 files\): dcm2niix found nothing it can convert\. Choose the folder that holds the scan’s DICOM files/],
      ['magnitude-only', /The DICOM folder holds no phase series \(found: series 2 “gre_qsm” \(magnitude\)\): choose a folder with the multi-echo phase/],
      ['echoes-disagree', /The phase \(series 3 “gre_qsm_phase”\) has 3 echoes but the magnitude \(series 2 “gre_qsm”\) has 2: choose a folder with every echo of both series/],
      ['dims-disagree', /The phase \(series 3 “gre_qsm_phase”\) is 16×16×8 but the magnitude \(series 2 “gre_qsm”\) is 8×8×8: they must have the same dimensions; choose a folder with the phase and magnitude of one acquisition/],
    ];
    for (const [folder, re] of cases) {
      await chooseFolder(path.join(tmp, folder));
      const text = await refusal();
      assert.match(text, re, folder);
      const info = await readData('#inputInfo');
      assert.equal(info.loaded, false, `${folder}: no input after a refusal`);
      // refused by the conversion: the folder's name; by the loader (dims): the converted files'
      assert.match(await page.textContent('#inputInfo'), folder === 'dims-disagree' ? /^series3_e1_ph\.nii, series3_e2_ph\.nii, series3_e3_ph\.nii: not loaded/ : new RegExp(`^${folder}: not loaded \\(see the message above\\)`));
      assert.equal(await page.isDisabled('#run'), true, folder);
    }
  });

  test('a folder dropped on the DICOM box converts (the drop event’s files)', { skip, timeout: 60000 }, async () => {
    const dir = path.join(tmp, 'small');
    const files = fs.readdirSync(dir).map((f) => ({ name: f, b64: fs.readFileSync(path.join(dir, f)).toString('base64') }));
    const seq = Number((await readData('#inputInfo')).seq);
    await page.evaluate((list) => {
      const dt = new DataTransfer();
      for (const f of list) dt.items.add(new File([Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0))], f.name));
      document.querySelector('#dicomBox').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    }, files);
    await page.waitForFunction((s) => document.querySelector('#dicomText').dataset.state === 'done' && Number(document.querySelector('#inputInfo').dataset.seq) > s && document.body.dataset.state === 'idle', seq, { timeout: 60000 });
    const info = await readData('#inputInfo');
    assert.equal(info.echoes, 3);
    assert.deepEqual(info.dims, SMALL.dims);
    assert.equal(await page.inputValue('#te'), SMALL.te.join(', '));
    assert.equal(await errorText(), '');
  });

  test('no console error in the DICOM session but dcm2niix’s own for the folder without DICOM', { skip }, () => {
    assert.deepEqual(consoleErrors.filter((t) => !EXPECTED_CONSOLE.some((re) => re.test(t))), []);
    assert.equal(consoleErrors.length, EXPECTED_CONSOLE.length, consoleErrors.join('\n'));
  });
}
