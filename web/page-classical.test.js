// The browser page's classical methods and its From phase workflow end to end in Chromium (playwright-core driving
// Debian's /usr/bin/chromium), served by scripts/serve.js on an ephemeral port, in a session of their own (the network
// path, the faults and the soak are web/page.test.js's); the page opens on the field workflows (?start=field).
// The classical methods (the C++ schema's `method` list): the Inversion select lists them with the plan's titles;
// choosing TKD replaces the network panel and the tile settings with its parameters (the threshold at the schema's
// default, range and help), the readout shows the method's plan (steps, threads, module heap vs the heap limit); an
// out-of-range threshold is refused in the C++ core's words next to the input, Run and the demo disabled; the demo
// with TKD downloads no network, its χ (downloaded as NIfTI) is bit-identical to the node API's invert({method:
// 'tkd'}) on the same phantom, r vs truth > 0.8; Cancel during a method run (an iterative method when the schema lists
// one, else TKD on 192×192×160) settles the page at once and no result arrives.
// From phase (the pipeline, tessera.pipeline()): the options are the schema's at their defaults; the demo (phantom scan,
// 128×128×96 at 1.5 mm, 4 echoes, SNR 100, mask from the magnitude eroded 3 mm, the default background removal, RTS) shows the stage while it
// runs, the plan's stages, each stage's figures, r vs truth > 0.8, and its χ is bit-identical to the node API's
// pipeline() on the same scan; every intermediate can be shown; Cancel mid-pipeline stops it; a 4D phase + 4D magnitude
// (writeNifti + dims) through the file inputs runs with TKD and its local field downloads bit-identical to node's;
// TEs that do not match the echoes (or in ms) are refused in words with Run disabled; a magnitude of other dims too.
// Screenshots: test-artifacts/*.png. The test observes the page only through its DOM (tests/js/page-session.js) and
// its downloads. Runs in ≈1 min on 2 idle cores.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from '../scripts/serve.js';
import { launchChromium, NO_FETCH_GLOBALS, testInChildWithFetchGlobals } from '../scripts/chromium.js';
import { backgroundTitle } from '../tests/js/background-titles.js';
import { pageSession, watchPage } from '../tests/js/page-session.js';
import { nifti4d } from '../tests/js/nifti4d.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = path.join(ROOT, 'test-artifacts');
const skip = fs.existsSync(CHROMIUM) ? false : `${CHROMIUM} is missing: install it with scripts/bootstrap.sh --browser (apt-get install chromium)`;

// playwright-core needs node's fetch globals (Headers, Request) at import; `node --no-experimental-fetch` removes them:
// then this file runs itself again in a child node without that flag and reports the child's result as one test.
if (NO_FETCH_GLOBALS) {
  await testInChildWithFetchGlobals(import.meta.url, 'classical methods and From phase in the browser, in a child node with the fetch globals playwright-core needs', { skip, minPassed: 5 });
} else suite();

function suite() {
let srv, ctx, page, tmp;
const consoleErrors = [];
const foreignRequests = [];
const served = []; // the server's log: 'GET /path 200 12 ms'
const runHeaps = new Map(); // a classical demo run's #report data (its module heap planned and reached), by run
/** The node API's runtime (1 worker) that the tests compare the page with: started once, shared, terminated after. */
let nodeOnce = null;
const nodeApi = () => (nodeOnce ??= import('../bindings/js/index.js').then(({ createTessera }) => createTessera({ workers: 1 })));

before(async () => {
  if (skip) return;
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-page-classical-'));
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  srv = await startServer({ log: (line) => served.push(line) });
  ctx = await launchChromium(path.join(tmp, 'profile'), CHROMIUM, { acceptDownloads: true, viewport: { width: 1280, height: 1000 } });
  page = ctx.pages()[0] ?? (await ctx.newPage());
  watchPage(page, srv.url, { consoleErrors, foreignRequests });
  await page.goto(`${srv.url}/?start=field`); // the field workflows first (the page opens on From a scan)
  await page.waitForFunction(() => document.body.dataset.state === 'idle' && document.querySelector('#planReadout').dataset.feasible, null, { timeout: 60000 });
});

after(async () => {
  if (nodeOnce) await (await nodeOnce).terminate().catch(() => {});
  await ctx?.close().catch(() => {});
  await srv?.close();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

const { waitState, readData, pageState, errorText, planWith } = pageSession(() => page);
/** The first numeric parameter of a method (prefix '<method>.') with another valid value than its default. */
const schemaOption = (schema, prefix) => {
  const o = schema.find((x) => x.name.startsWith(prefix) && typeof x.default === 'number' && !x.choices?.length);
  if (!o) return null;
  const other = o.integer ? o.default + 1 : o.default * 1.25;
  return { name: o.name, kind: other <= o.max ? 'number' : 'none', other };
};
/** The node API's request schema (tessera.schema()), read once. */
let schemaOnce = null;
const nodeSchema = () => (schemaOnce ??= nodeApi().then((t) => t.schema()));

// The classical methods (the C++ schema's `method` list): the inversion choice, the parameters from the schema, the
// demo with TKD (no download, χ bit-identical to the node API's), a refusal in the C++ core's words, Cancel.
test('classical method: TKD from the schema (its threshold at the default, range, help); an out-of-range value refused in the C++ words with Run disabled', { skip }, async () => {
  const schema = await nodeSchema();
  const names = schema.find((o) => o.name === 'method').choices;
  assert.ok(names.includes('tkd'));
  assert.deepEqual(await page.$$eval('#inversion option', (o) => o.map((x) => x.value)), ['network', ...names], 'the schema’s list, after the network');
  assert.match(await page.$eval('#inversion option[value=tkd]', (o) => o.textContent), /^TKD \(tkd\)$/, 'the plan’s title');
  await page.selectOption('#inversion', 'tkd');
  assert.equal(await page.isHidden('#networkBox'), true, 'the network panel gives way');
  assert.equal(await page.isHidden('#tileControls'), true, 'no tiles, workers, quality or verify for a method');
  const opt = schema.find((o) => o.name === 'tkd.threshold');
  const input = '[data-option="tkd.threshold"]';
  assert.equal(await page.inputValue(input), String(opt.default), 'the schema’s default');
  assert.equal(await page.getAttribute(input, 'max'), String(opt.max));
  assert.match(await page.$eval(input, (e) => e.closest('label').title), new RegExp(`^${opt.help.replace(/[()]/g, '\\$&')}`));
  // every <method>.<param> option of the schema has its input
  const params = await page.$$eval('#methodParams [data-option]', (e) => e.map((x) => x.dataset.option));
  assert.deepEqual(params, schema.filter((o) => o.name.startsWith('tkd.')).map((o) => o.name));
  await planWith({ feasible: true, method: 'tkd', methodTitle: 'TKD' });
  const plan = await readData('#planReadout');
  await page.locator('#networkCard').screenshot({ path: path.join(ARTIFACTS, 'method-params.png') });
  await page.locator('#tileCard').screenshot({ path: path.join(ARTIFACTS, 'method-plan.png') });
  assert.ok(plan.methodSteps >= 1 && plan.threads >= 1 && plan.moduleHeapBytes > 0 && plan.moduleHeapBytes < plan.heapLimitBytes);
  const readout = await page.textContent('#planReadout');
  assert.match(readout, /Steps\s*\d+ steps?/);
  assert.match(readout, /Module heap\s*[\d.]+ MB of the [\d.]+ GB heap limit/);
  // out of range: the C++ schema's message, next to the input and as the plan's advice; Run and the demo disabled
  await page.fill(input, '0.9');
  await page.waitForSelector('#methodMsg:not([hidden])', { timeout: 10000 });
  const msg = await page.textContent('#methodMsg');
  assert.match(msg, /^tkd\.threshold must be in \(0, 2\/3\), got 0\.9/);
  assert.equal(await page.textContent('#planAdvice'), msg);
  assert.equal(await page.getAttribute(input, 'aria-invalid'), 'true');
  assert.equal((await readData('#planReadout')).feasible, false);
  assert.equal(await page.isDisabled('#run'), true);
  assert.equal(await page.isDisabled('#demo'), true);
  await page.fill(input, '');
  await page.waitForFunction(() => /Type a value for tkd\.threshold/.test(document.querySelector('#methodMsg').textContent), null, { timeout: 5000 });
  assert.equal(await page.isDisabled('#demo'), true);
  // a change of method (here: to the network and back) resets the defaults
  await page.fill(input, '0.3');
  await page.selectOption('#inversion', 'network');
  assert.equal(await page.isHidden('#networkBox'), false);
  await page.selectOption('#inversion', 'tkd');
  assert.equal(await page.inputValue(input), String(opt.default));
  await planWith({ feasible: true, method: 'tkd' });
  assert.equal(await page.isHidden('#methodMsg'), true);
  assert.equal(await page.isDisabled('#demo'), false);
});

test('classical method: the demo with TKD runs without a download; χ bit-identical to the node API’s invert({method: \'tkd\'}), r vs truth > 0.8', { skip }, async () => {
  const { readNifti } = await import('../bindings/js/index.js');
  // The node API on the same phantom (the page's demo: seed 1, no noise) and the schema's default threshold, made
  // while the page makes its own.
  const geometry = { dims: [128, 128, 96], voxelMm: [1.75, 1.75, 1.75], b0Dir: [0, 0, 1] };
  const node = (async () => {
    const t = await nodeApi();
    const p = await t.phantom({ geometry, seed: 1, noise: 0 });
    let sum = 0;
    for (let i = 0; i < p.field.length; i++) if (p.mask[i]) sum += p.field[i];
    return { sum, chi: (await t.invert({ keepInputs: true, field: p.field, mask: p.mask, geometry, method: 'tkd' })).chi.data };
  })();
  node.catch(() => {});
  const requests = served.length;
  await page.selectOption('#inversion', 'tkd');
  await planWith({ feasible: true, method: 'tkd' });
  await page.click('#demo');
  await waitState(['done', 'error'], 60000);
  assert.equal(await pageState(), 'done', await errorText());
  assert.deepEqual(served.slice(requests).filter((l) => /\.onnx /.test(l)), [], 'no network downloaded');
  const report = await readData('#report');
  assert.equal(report.method, 'tkd');
  assert.ok(report.finite && report.nonzeroOutside === 0);
  assert.ok(report.r > 0.8, `r vs truth ${report.r}`);
  assert.match(await page.textContent('#corr'), /r vs truth = 0\.\d{3}/);
  const text = await page.textContent('#report');
  assert.match(text, /Method\s*TKD \(tkd\): threshold [\d.]+; \d+ step\(s\), \d+ thread\(s\)/);
  // The run's module-heap plan against the heap the same run reached, in a runtime of its own (as memory-plans.test.js
  // measures it); its bounds are checked below, with the From phase demo's.
  assert.match(text, /Memory\s*the plan allowed [\d.]+ MB of module heap; the run reached [\d.]+ MB \(in a runtime of its own, read after the run\): the plan is [\d.]+× what the run used/);
  assert.equal(report.moduleHeapPlanVsRun, report.moduleHeapPlanned / report.moduleHeapBytes);
  assert.match(text, new RegExp(`the plan is ${report.moduleHeapPlanVsRun.toFixed(2)}×`), 'the ratio shown is the one published');
  runHeaps.set('TKD demo', report);
  assert.match(await page.textContent('#progressText'), /^tkd: (\d+)\/\1 steps \(100%\)/);
  assert.equal((await readData('#progress')).stage, 'tkd');
  assert.deepEqual((await readData('#resultCard .panels')).shown, ['chi', 'field', 'truth']);
  assert.deepEqual(await readData('#tileCounts'), { total: 1, queued: 0, running: 0, done: 1, skipped: 0 });
  const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 20000 }), page.click('#download')]);
  const chi = readNifti(fs.readFileSync(await dl.path()));
  assert.deepEqual(chi.dims, geometry.dims);
  assert.deepEqual(chi.voxelMm, geometry.voxelMm);
  const want = await node;
  assert.equal((await readData('#inputInfo')).sumInMask, want.sum, 'the page’s field is the node phantom’s');
  assert.equal(chi.data.length, want.chi.length);
  const bytes = (a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
  assert.ok(bytes(chi.data).equals(bytes(want.chi)), 'χ bit-identical to the node API’s');
  console.log(`# TKD demo: run ${report.wallSeconds.toFixed(2)} s, r ${report.r.toFixed(3)}, NRMSE ${(100 * report.nrmse).toFixed(1)} %, module heap: the plan ${report.moduleHeapPlanVsRun.toFixed(2)}× what the run reached`);
  await page.locator('#resultCard').screenshot({ path: path.join(ARTIFACTS, 'tkd-demo.png') });
});

test('classical method: Cancel during a method run stops it; no result arrives, the runtime plans again', { skip, timeout: 120000 }, async () => {
  const { writeNifti } = await import('../bindings/js/index.js');
  // An iterative method when the schema lists one (cancelled between its steps), else TKD on a volume large enough
  // to be caught running.
  const probe = { dims: [128, 128, 96], voxelMm: [1.75, 1.75, 1.75], b0Dir: [0, 0, 1] };
  const t = await nodeApi();
  let iterative = null;
  const listed = await page.$$eval('#inversion option', (o) => o.map((x) => x.value));
  for (const m of (await nodeSchema()).find((o) => o.name === 'method').choices.filter((x) => listed.includes(x))) {
    const p = await t.plan({ geometry: probe, method: m }).catch(() => null);
    if (p?.feasible && p.methodSteps >= 20 && (!iterative || p.methodSteps > iterative.steps)) iterative = { method: m, steps: p.methodSteps };
  }
  await page.selectOption('#inversion', iterative?.method ?? 'tkd');
  if (!iterative) {
    const dims = [192, 192, 160];
    const like = { dims, voxelMm: [1, 1, 1] };
    const n = dims[0] * dims[1] * dims[2];
    await page.check('input[name=units][value=ppm]');
    await page.check('input[name=maskSource][value=file]');
    const seq = (await readData('#inputInfo')).seq;
    await page.setInputFiles('#maskFile', { name: 'big_mask.nii.gz', mimeType: 'application/gzip', buffer: Buffer.from(await writeNifti(new Float32Array(n).fill(1), like, { gzip: true })) });
    await page.setInputFiles('#fieldFile', { name: 'big_field.nii.gz', mimeType: 'application/gzip', buffer: Buffer.from(await writeNifti(new Float32Array(n), like, { gzip: true })) });
    await page.waitForFunction((s) => Number(document.querySelector('#inputInfo').dataset.seq) > s && document.body.dataset.state === 'idle' && document.querySelector('#inputInfo').dataset.dims === '192,192,160', seq, { timeout: 60000 });
  }
  await planWith({ feasible: true, method: iterative?.method ?? 'tkd' });
  const errorsBefore = (await readData('#error')).count ?? 0;
  await page.click('#run');
  // Cancel is clicked in the page, in the task that sees the run going (an iterative one past its first step): a click
  // sent from here could arrive after a short run had ended on a busy machine.
  await page.waitForFunction((stepped) => {
    const cancel = document.querySelector('#cancel');
    if (document.body.dataset.state !== 'running' || cancel.disabled) return false;
    if (stepped && Number(document.querySelector('#progress').dataset.done ?? 0) < 1) return false;
    cancel.click();
    return true;
  }, !!iterative, { timeout: 60000, polling: 20 });
  const t0 = Date.now();
  await waitState(['cancelled'], 2000);
  const ms = Date.now() - t0;
  assert.equal(await page.isDisabled('#cancel'), true);
  await page.waitForTimeout(iterative ? 1500 : 2500); // long enough for the run to have ended by itself
  assert.equal(await pageState(), 'cancelled');
  assert.deepEqual(await readData('#report'), {}, 'no result arrives after a cancel');
  assert.equal(await page.isDisabled('#download'), true);
  assert.equal((await readData('#error')).count ?? 0, errorsBefore, 'no error shown');
  assert.match(await page.textContent('#progressText'), /^cancelled at \d+\/\d+ steps/);
  if (iterative) {
    const p = await readData('#progress');
    assert.ok(p.done < p.total, `stopped before the end: ${p.done}/${p.total}`);
  }
  assert.equal(await page.isDisabled('#run'), false);
  console.log(`# method cancel (${iterative ? `${iterative.method}, ${iterative.steps} steps` : 'tkd on 192×192×160'}) settled the page in ${ms} ms`);
  // The runtime answers again after the cancel: a new plan for another threshold.
  const first = schemaOption(await nodeSchema(), `${iterative?.method ?? 'tkd'}.`);
  if (first?.kind === 'number') {
    await page.fill(`[data-option="${first.name}"]`, String(first.other));
    await planWith({ feasible: true, method: iterative?.method ?? 'tkd' });
  }
  await page.selectOption('#inversion', 'network');
  await page.waitForFunction(() => document.querySelector('#planReadout').dataset.method === undefined, null, { timeout: 15000 });
});

// From phase (the pipeline): the demo with RTS (χ r vs truth, bit-identical to the node API's pipeline()), a 4D phase +
// magnitude through the file inputs (the local field downloaded, equal to node's), TEs that do not match refused, Cancel.
const PIPE_DEMO = { geometry: { dims: [128, 128, 96], voxelMm: [1.5, 1.5, 1.5], b0Dir: [0, 0, 1] }, te: [0.004, 0.008, 0.012, 0.016], b0: 3, snr: 100 };
const bytesOf = (a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
/** How two volumes differ, in words (the voxels that differ and the largest |Δ|). */
const diffText = (a, b) => {
  let k = 0, m = 0;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) (k++, (m = Math.max(m, Math.abs(a[i] - b[i]))));
  return `${k} of ${a.length} voxels differ, max |Δ| ${m}`;
};
/** Selects "From phase" and waits for its plan (the pipeline's stages in the readout). */
async function startFromPhase() {
  await page.selectOption('#startFrom', 'pipeline');
  await page.waitForFunction(() => document.querySelector('#planReadout').dataset.pipeline === 'true', null, { timeout: 20000, polling: 50 });
}

test('From phase: the demo (phantom scan, mask from the magnitude, the default background removal, RTS) runs to completion; χ r vs truth > 0.8 and bit-identical to the node API’s pipeline(); every intermediate shown and named', { skip, timeout: 180000 }, async () => {
  // The node API on the same scan and options, made while the page makes its own.
  const node = (async () => {
    const t = await nodeApi();
    const d = PIPE_DEMO;
    const scan = await t.phantomScan({ geometry: d.geometry, te: d.te, b0: d.b0, snr: d.snr, seed: 1 });
    const schema = await nodeSchema();
    const out = await t.pipeline({ keepInputs: true, phase: scan.phase, magnitude: scan.magnitude, geometry: d.geometry, te: d.te, b0: d.b0, method: 'rts', brainMask: { erosion: 3 } });
    return { out, schema };
  })();
  node.catch(() => {});
  await page.selectOption('#inversion', 'network');
  await startFromPhase();
  assert.equal(await page.isHidden('#pipePhaseFileLabel'), false);
  assert.equal(await page.isHidden('#phaseFileLabel'), true);
  assert.equal(await page.isHidden('#maskSourceBox'), true, 'mask and magnitude are both optional');
  assert.equal(await page.isHidden('#tileControls'), true);
  const { schema, out: want } = await node;
  const bg = backgroundTitle(schema);
  // the pipeline's options are the schema's, at its defaults
  const options = await page.$$eval('#pipelineParams [data-option]', (e) => e.map((x) => [x.dataset.option, x.value]));
  const names = options.map(([n]) => n);
  for (const n of ['unwrap', 'background', 'fitResidualLimit', 'vsharp.maxRadius', 'pdf.maxIterations', 'brainMask.threshold', 'brainMask.erosion']) assert.ok(names.includes(n), n);
  for (const [n, v] of options) {
    const o = schema.find((x) => x.name === n);
    assert.equal(v, String(o.default), n);
  }
  const requests = served.length;
  await page.click('#demo');
  await waitState(['running'], 60000);
  await page.waitForFunction(() => /step \d+\/\d+/.test(document.querySelector('#progressText').textContent), null, { timeout: 60000, polling: 50 });
  const mid = await page.textContent('#progressText');
  assert.match(mid, new RegExp(`^(brain mask|echo fit \\((offset|echo \\d of 4)\\)|${bg} → RTS): step \\d+/\\d+ \\(\\d+%\\)`));
  await waitState(['done', 'error'], 150000);
  assert.equal(await pageState(), 'done', await errorText());
  assert.deepEqual(served.slice(requests).filter((l) => /\.onnx /.test(l)), [], 'no network downloaded');
  // the plan readout: the stages and memory
  const plan = await readData('#planReadout');
  assert.equal(plan.stages, `brain mask|echo fit|${bg}|RTS`);
  assert.ok(plan.moduleHeapBytes > 0 && plan.moduleHeapBytes < plan.heapLimitBytes);
  assert.match(await page.textContent('#planReadout'), new RegExp(`Stages\\s*brain mask → echo fit → ${bg} → RTS`));
  const report = await readData('#report');
  assert.equal(report.pipeline, true);
  assert.ok(report.finite, 'χ finite');
  assert.ok(report.r > 0.8, `r vs truth ${report.r}`);
  const count = (m) => m.reduce((a, v) => a + (v ? 1 : 0), 0);
  assert.equal(report.brainMaskVoxels, count(want.mask.data));
  assert.equal(report.localMaskVoxels, count(want.localMask.data));
  const text = await page.textContent('#report');
  assert.match(text, /Brain mask\s*[\d,]+ voxels \(made from the magnitude: otsu threshold, eroded 3 mm\)/);
  assert.match(text, /Echo fit\s*region-growing unwrapping; fit mask [\d,]+ voxels/);
  assert.match(text, new RegExp(`Background removal\\s*${bg}: local mask [\\d,]+ voxels`));
  assert.match(text, /Inversion\s*RTS \(rts\)/);
  assert.match(text, /Wall time/);
  // The pipeline's module-heap plan against the heap the same run reached (its own runtime): bounds checked below.
  assert.match(text, /Memory\s*the plan allowed [\d.]+ MB of module heap; the run reached [\d.]+ MB \(in a runtime of its own, read after the run\): the plan is [\d.]+× what the run used/);
  assert.equal(report.moduleHeapPlanVsRun, report.moduleHeapPlanned / report.moduleHeapBytes);
  runHeaps.set('From phase demo', report);
  // every intermediate in the viewer's choice; χ downloads bit-identical to node's
  assert.deepEqual(await page.$$eval('#output option', (o) => o.map((x) => x.value)), ['chi', 'localField', 'totalField', 'unwrappedPhase', 'mask', 'fitMask', 'localMask']);
  assert.equal((await readData('#output')).selected, 'chi');
  const { readNifti } = await import('../bindings/js/index.js');
  const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 20000 }), page.click('#download')]);
  assert.equal(dl.suggestedFilename(), 'phantom-scan_chi.nii.gz');
  const chi = readNifti(fs.readFileSync(await dl.path()));
  assert.deepEqual(chi.dims, PIPE_DEMO.geometry.dims);
  assert.ok(bytesOf(chi.data).equals(bytesOf(want.chi.data)), `χ bit-identical to the node API’s pipeline(): ${diffText(chi.data, want.chi.data)}`);
  await page.selectOption('#output', 'unwrappedPhase');
  await page.waitForFunction(() => document.querySelector('#output').dataset.selected === 'unwrappedPhase', null, { timeout: 10000 });
  assert.equal(await page.textContent('#capChi'), 'Unwrapped phase, echo 1 (rad)');
  await page.locator('#resultCard').screenshot({ path: path.join(ARTIFACTS, 'pipeline-demo.png') });
  await page.locator('#inputCard').screenshot({ path: path.join(ARTIFACTS, 'pipeline-input.png') });
  console.log(`# From phase demo: run ${report.wallSeconds.toFixed(2)} s, r ${report.r.toFixed(3)}, mask ${report.brainMaskVoxels}, local mask ${report.localMaskVoxels}, module heap: the plan ${report.moduleHeapPlanVsRun.toFixed(2)}× what the run reached`);
});

// The Memory row compares like with like (the run's plan, the heap of a runtime that ran only that run): the plan is never
// under that heap and at most 1.25× it, as bindings/js/memory-plans.test.js asks of every plan (the plans count the
// stacks of the page's threads, which the runtime allocates at its start).
test('the report’s Memory row: each classical demo’s module-heap plan within [1, 1.25]× the heap its run reached in its own runtime', { skip }, () => {
  assert.deepEqual([...runHeaps.keys()].sort(), ['From phase demo', 'TKD demo'], 'both demos ran');
  for (const [run, r] of runHeaps) console.log(`# ${run}: module heap planned ${r.moduleHeapPlanned} B, reached ${r.moduleHeapBytes} B in its own runtime: plan/heap ${r.moduleHeapPlanVsRun.toFixed(3)}`);
  for (const [run, r] of runHeaps) {
    assert.ok(r.moduleHeapPlanVsRun >= 1 && r.moduleHeapPlanVsRun <= 1.25, `${run}: planned ${r.moduleHeapPlanned} B, reached ${r.moduleHeapBytes} B: plan/heap ${r.moduleHeapPlanVsRun}`);
  }
});

test('From phase: Cancel mid-pipeline stops it; no result arrives', { skip, timeout: 120000 }, async () => {
  await startFromPhase();
  const errorsBefore = (await readData('#error')).count ?? 0;
  await page.click('#demo');
  // past the scan, two steps of the pipeline done (the progress of the run itself: the last run's was cleared)
  // Clicked in the page the moment that holds (a click from here can come after the last step on a loaded host).
  await page.evaluate(() => new Promise((resolve, reject) => {
    const end = Date.now() + 90000;
    const tick = () => {
      if (document.body.dataset.state === 'running' && /step \d+/.test(document.querySelector('#progressText').textContent) && Number(document.querySelector('#progress').dataset.done ?? 0) >= 2) {
        document.querySelector('#cancel').click();
        resolve();
      } else if (Date.now() > end) reject(new Error('the pipeline never reached step 2'));
      else setTimeout(tick, 2);
    };
    tick();
  }));
  await waitState(['cancelled'], 2000);
  await page.waitForTimeout(1500);
  assert.equal(await pageState(), 'cancelled');
  assert.deepEqual(await readData('#report'), {}, 'no result arrives after a cancel');
  assert.equal(await page.isDisabled('#download'), true);
  assert.equal((await readData('#error')).count ?? 0, errorsBefore, 'no error shown');
  assert.match(await page.textContent('#progressText'), /^cancelled at \d+\/\d+ steps/);
  const p = await readData('#progress');
  assert.ok(p.done < p.total, `stopped before the end: ${p.done}/${p.total}`);
});

test('From phase: a 4D phase NIfTI + magnitude through the file inputs runs end to end, the local field downloads (equal to node’s); TEs that do not match the echoes are refused in words', { skip, timeout: 150000 }, async () => {
  const { writeNifti, readNifti } = await import('../bindings/js/index.js');
  // A small scan (the file inputs, the refusals and the equality with node do not depend on its size).
  const geometry = { dims: [48, 48, 40], voxelMm: [2, 2, 2], b0Dir: [0, 0, 1] };
  const te = [0.005, 0.01, 0.015];
  const like = { dims: geometry.dims, voxelMm: geometry.voxelMm };
  const t = await nodeApi();
  const scan = await t.phantomScan({ geometry, te, b0: 3, snr: 100, seed: 2 });
  const want = await t.pipeline({ keepInputs: true, phase: scan.phase, magnitude: scan.magnitude, geometry, te, b0: 3, method: 'tkd' });
  await startFromPhase();
  await page.selectOption('#inversion', 'tkd');
  await page.fill('[data-option="brainMask.erosion"]', '0'); // the schema's default (the demo left 3 mm)
  await page.fill('#te', '0.005, 0.01');
  await page.fill('#b0', '3');
  const seq = (await readData('#inputInfo')).seq;
  await page.setInputFiles('#maskFile', []);
  await page.setInputFiles('#magFile', { name: 'scan_mag.nii', mimeType: 'application/octet-stream', buffer: await nifti4d(scan.magnitude, 3, like) });
  await page.setInputFiles('#pipePhaseFile', { name: 'scan_phase.nii', mimeType: 'application/octet-stream', buffer: await nifti4d(scan.phase, 3, like) });
  await page.waitForFunction((s) => Number(document.querySelector('#inputInfo').dataset.seq) > s && document.body.dataset.state === 'idle', seq, { timeout: 60000 });
  const info = await readData('#inputInfo');
  assert.equal(info.kind, 'pipeline');
  assert.equal(info.echoes, 3);
  assert.equal(info.maskGiven, false);
  // two TEs for three echoes: refused in words next to TE, Run disabled
  await page.waitForSelector('#phaseMsg:not([hidden])', { timeout: 10000 });
  assert.match(await page.textContent('#phaseMsg'), /The phase holds 3 echoes but 2 echo times were given: give one TE per echo/);
  assert.equal(await page.isDisabled('#run'), true);
  // milliseconds: refused too
  await page.fill('#te', '5, 10, 15');
  await page.waitForFunction(() => /milliseconds/.test(document.querySelector('#phaseMsg').textContent), null, { timeout: 5000 });
  assert.equal(await page.isDisabled('#run'), true);
  await page.fill('#te', te.join(', '));
  await page.waitForSelector('#phaseMsg', { state: 'hidden', timeout: 5000 });
  const stages = `brain mask|echo fit|${backgroundTitle(await nodeSchema())}|TKD`;
  await page.waitForFunction((want) => document.querySelector('#planReadout').dataset.stages === want && !document.querySelector('#run').disabled, stages, { timeout: 20000 });
  await page.click('#run');
  await waitState(['done', 'error'], 120000);
  assert.equal(await pageState(), 'done', await errorText());
  await page.selectOption('#output', 'localField');
  await page.waitForFunction(() => document.querySelector('#output').dataset.selected === 'localField', null, { timeout: 10000 });
  const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 20000 }), page.click('#download')]);
  assert.equal(dl.suggestedFilename(), 'scan_phase_localfield.nii.gz');
  const lf = readNifti(fs.readFileSync(await dl.path()));
  assert.deepEqual(lf.dims, geometry.dims);
  assert.deepEqual(lf.voxelMm, geometry.voxelMm);
  assert.ok(bytesOf(lf.data).equals(bytesOf(want.localField.data)), `the local field equals the node API’s: ${diffText(lf.data, want.localField.data)}`);
  // a magnitude of other dims: the loader's refusal in words, no input
  await page.setInputFiles('#magFile', { name: 'small_mag.nii.gz', mimeType: 'application/gzip', buffer: Buffer.from(await writeNifti(new Float32Array(8 * 8 * 8), { dims: [8, 8, 8], voxelMm: [1, 1, 1] }, { gzip: true })) });
  await page.waitForFunction(() => !document.querySelector('#error').hidden, null, { timeout: 20000 });
  assert.match(await errorText(), new RegExp(`The phase is ${geometry.dims.join('×')} but the magnitude small_mag\\.nii\\.gz is 8×8×8: they must have the same dimensions`));
  assert.equal(await page.isDisabled('#run'), true);
  await page.setInputFiles('#magFile', []);
  await page.setInputFiles('#pipePhaseFile', []);
  await page.selectOption('#startFrom', 'field');
  await page.selectOption('#inversion', 'network');
});

test('no console error and no request to another origin during the whole session', { skip }, () => {
  assert.deepEqual(consoleErrors, []);
  assert.deepEqual(foreignRequests, []);
});
}
