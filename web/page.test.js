// The browser page end to end in Chromium (playwright-core driving Debian's /usr/bin/chromium), served by
// scripts/serve.js on an ephemeral port:
//   - the server: COOP/COEP/CORP headers, MIME types, / → /web/, 404s, no path outside the repository;
//   - the page loads cross-origin isolated, with no console error and no request to another origin;
//   - an infeasible tile setting (core 128, halo 8, divisor 8) is refused with the planner's advice, Run disabled;
//   - "Try the demo" runs to completion: progress 100 %, every tile on the map done or skipped (the map's
//     skipped count equals the planner's), χ finite, 0 outside the mask, r vs the phantom truth inside the
//     mask > 0.5 with the real demo network, and the NiiVue χ panel shows an image (non-blank pixels);
//   - the demo network goes through the weights cache (Cache API): after a reload it is not downloaded again;
//   - Cancel mid-run stops the run at once (no result arrives later);
//   - the tile map draws the C++ plan's tiles (plan.grid): 56×64×48 at core 24 / halo 8 is 18 tiles, 4 skipped;
//   - a field/mask NIfTI pair written in node (writeNifti of the phantom) loaded through the file inputs runs
//     end to end with a custom network (.onnx file input) — so the page runs again after a cancel — and the
//     download is a valid .nii.gz with the input's dims and voxel size.
// While web/models/demo-unet.onnx does not exist (the demo network is trained separately), the server
// serves a stand-in U-Net (tests/js/networks.js, divisor 8) at that URL and the r threshold is not
// applied (a random network has no relation to the truth); the result is still checked for the rest.
// Also: Hz → ppm conversion of the loaded field, a mask by thresholding a magnitude image, a registry network
// with wrong weights refused in words.
// Fidelity: the quality select holds the schema's values, default and help; the readout shows the estimate beside
// the plan's predicted r and NRMSE, the network's reach (from the custom .onnx's graph; "unknown: assumed" without
// it); at 15000 B/voxel (the 64×64×48 whole volume over the single-patch limit) faithful warns that nothing within
// the budget reaches its target and plans overlapping, blended tiles (the map's legend names the stride), while fast
// plans another, faster tiling without a warning; a demo run with Verify shows the self-check's r, NRMSE, max |Δ|,
// voxels, box and data-consistency residual equal to the node API's report.verify on the same field and tiling,
// the progress line says when the check runs; a whole-volume run with Verify says "exact (whole volume)".
// The phase networks: with iQSM selected the page asks for a wrapped phase (3D/4D), TE (s), B0, magnitude,
// erosion and sign, the tile settings are off; a TE in milliseconds is refused (the CLI's rule); a wrapped-phase NIfTI + box mask and the LoT-layer test network
// (tests/js/phase-networks.js) as a local weights file give exactly the node API's χ (nonzero only inside the
// eroded mask); a TE count that does not match the echoes is refused in words with Run disabled; a 4D two-echo
// phase with a two-echo magnitude runs iQFM (the output and the download named local field); a phase in
// degrees is refused with advice, then loads with Phase units “degrees”; a volume over the single-patch limit
// gets the planner's refusal.
// Screenshots: test-artifacts/*.png (the README's, web/screenshot.png, is web/viewer.test.js's).
// TESSERA_DEMO_NET=/path/net.onnx serves a candidate demo network in place of web/models/.
// The test observes the page only through its DOM: text, <body data-state>, the data-* attributes the panels
// publish (#inputInfo, #planReadout, #progress, #tileCounts, #tileStride, #report, #verifyReadout, #error, .panels)
// and downloads (and, for the self-check's progress lines, a MutationObserver the test itself adds).
// The classical methods and From phase are web/page-classical.test.js's. Runs in ≈1.5 min on 2 idle cores.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { createHash } from 'node:crypto';
import { startServer } from '../scripts/serve.js';
import { launchChromium, NO_FETCH_GLOBALS, testInChildWithFetchGlobals } from '../scripts/chromium.js';
import { pageSession, watchPage } from '../tests/js/page-session.js';
import { nifti4d } from '../tests/js/nifti4d.js';


const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = path.join(ROOT, 'test-artifacts');
// TESSERA_DEMO_NET=/path/to/candidate.onnx serves that file as the demo network (and applies the r check).
const DEMO_NET = process.env.TESSERA_DEMO_NET || path.join(ROOT, 'web/models/demo-unet.onnx');
const REAL_NET = fs.existsSync(DEMO_NET);
const R_MIN = 0.5; // r(χ, truth) inside the mask, demo phantom, real demo network (TKD reaches ≈0.85+)
const skip = fs.existsSync(CHROMIUM) ? false : `${CHROMIUM} is missing: install it with scripts/bootstrap.sh --browser (apt-get install chromium)`;

// playwright-core needs node's fetch globals (Headers, Request) at import; `node --no-experimental-fetch` removes them:
// then this file runs itself again in a child node without that flag and reports the child's result as one test.
if (NO_FETCH_GLOBALS) {
  await testInChildWithFetchGlobals(import.meta.url, 'browser suite, in a child node with the fetch globals playwright-core needs', { skip, minPassed: 10 });
} else suite();

function suite() {
let srv, ctx, page, tmp, netPath, pair, qualityOption;
const consoleErrors = [];
const foreignRequests = [];
const served = []; // the server's log: 'GET /path 200 12 ms'
/** The node API's runtime (1 worker) that the tests compare the page with: started once, shared, terminated after. */
let nodeOnce = null;
const nodeApi = () => (nodeOnce ??= import('../bindings/js/index.js').then(({ createTessera }) => createTessera({ workers: 1 })));
/** How many times the server sent the demo network. */
const demoDownloads = () => served.filter((l) => /^GET \/web\/models\/demo-unet\.onnx 200 /.test(l)).length;

before(async () => {
  if (skip) return;
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-page-'));
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const overrides = {};
  netPath = DEMO_NET;
  if (REAL_NET && process.env.TESSERA_DEMO_NET) overrides['/web/models/demo-unet.onnx'] = DEMO_NET;
  if (!REAL_NET) {
    const { unet } = await import('../tests/js/networks.js');
    netPath = path.join(tmp, 'standin-unet.onnx');
    fs.writeFileSync(netPath, unet({ base: 4 }));
    overrides['/web/models/demo-unet.onnx'] = netPath;
    console.log(`# ${DEMO_NET} is missing: serving a stand-in U-Net there; the r > ${R_MIN} check is skipped`);
  }
  // The NIfTI pair: the C++ phantom (node flavour of the runtime), written with writeNifti.
  const { writeNifti, GAMMA_BAR_MHZ_PER_T } = await import('../bindings/js/index.js');
  const t = await nodeApi();
  {
    qualityOption = (await t.schema()).find((o) => o.name === 'quality');
    const geometry = { dims: [64, 64, 48], voxelMm: [2, 2, 2], b0Dir: [0, 0, 1] };
    const p = await t.phantom({ geometry, seed: 3 });
    const like = { dims: geometry.dims, voxelMm: geometry.voxelMm };
    pair = {
      geometry,
      truth: p.chi,
      mask: p.mask,
      // the field in Hz at 3 T: the page converts it (units Hz, B0 3 T)
      fieldPpmSum: p.field.reduce((a, v, i) => a + (p.mask[i] ? v : 0), 0),
      field: await writeNifti(p.field.map((v) => v * GAMMA_BAR_MHZ_PER_T * 3), like, { gzip: true, description: 'phantom local field (Hz at 3 T)' }),
      magnitude: await writeNifti(Float32Array.from(p.mask, (m, i) => (m ? 100 + (i % 7) : 1)), like, { gzip: true }),
      maskNii: await writeNifti(Float32Array.from(p.mask), like, { gzip: true, description: 'phantom mask' }),
      // the field in ppm as the node API gets it (the self-check test compares the page with node on it)
      fieldPpm: p.field,
      fieldPpmNii: await writeNifti(p.field, like, { gzip: true, description: 'phantom local field (ppm)' }),
    };
  }
  srv = await startServer({ overrides, log: (line) => served.push(line) });
  ctx = await launchChromium(path.join(tmp, 'profile'), CHROMIUM, { acceptDownloads: true, viewport: { width: 1280, height: 1000 } });
  page = ctx.pages()[0] ?? (await ctx.newPage());
  watchPage(page, srv.url, { consoleErrors, foreignRequests });
});

after(async () => {
  if (nodeOnce) await (await nodeOnce).terminate().catch(() => {});
  await ctx?.close().catch(() => {});
  await srv?.close();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

const { T, waitState, readData, pageState, errorText, planWith } = pageSession(() => page);
/** The readout's estimate row says the plan's time and its predicted r and NRMSE (as rounded on the page). */
function assertEstimate(text, plan) {
  const m = /Estimate\s*Estimated (?:(\d+) min )?(\d+(?:\.\d)?) s · predicted r ([\d.]+), NRMSE ([\d.]+) vs the whole-volume run/.exec(text);
  assert.ok(m, `no estimate beside the predicted fidelity in: ${text}`);
  m.splice(1, 2, 60 * Number(m[1] ?? 0) + Number(m[2])); // '1 min 12 s', '42 s' or '4.2 s'
  assert.ok(Math.abs(m[1] - plan.estimatedSeconds) <= 0.5, `${m[1]} s vs ${plan.estimatedSeconds}`);
  assert.ok(Math.abs(Number(m[2]) - plan.predictedR) <= 5e-4, `r ${m[2]} vs ${plan.predictedR}`);
  assert.ok(Math.abs(Number(m[3]) - plan.predictedNrmse) <= 5e-4, `NRMSE ${m[3]} vs ${plan.predictedNrmse}`);
}

// The served demo network's sha256 (the page verified it against the registry's before caching it).
const DEMO_SHA = REAL_NET ? createHash('sha256').update(fs.readFileSync(DEMO_NET)).digest('hex') : null;
/** The sha256 of the demo network's bytes in the page's weights cache (read with model-loader.js), or null. */
const cachedDemoSha = () =>
  page.evaluate(async (sha256) => {
    const ml = await import('/bindings/js/model-loader.js');
    const bytes = await ml.readCachedWeights([{ file: 'demo-unet.onnx', sha256 }]);
    return bytes ? ml.sha256Hex(bytes[0]) : null;
  }, DEMO_SHA);

function get(url) {
  return new Promise((resolve, reject) => {
    http.get(url, (res) => {
      res.resume();
      res.on('end', () => resolve(res));
    }).on('error', reject);
  });
}

test('serve.js: isolation headers, MIME types, redirect, 404, no icon, no traversal', { skip }, async () => {
  const root = await get(`${srv.url}/`);
  assert.equal(root.statusCode, 302);
  assert.equal(root.headers.location, '/web/');
  const wasm = await get(`${srv.url}/dist/wasm/web/tessera.wasm`);
  assert.equal(wasm.statusCode, 200);
  assert.equal(wasm.headers['content-type'], 'application/wasm');
  assert.equal(wasm.headers['cross-origin-opener-policy'], 'same-origin');
  assert.equal(wasm.headers['cross-origin-embedder-policy'], 'require-corp');
  assert.equal(wasm.headers['cross-origin-resource-policy'], 'same-origin');
  assert.match((await get(`${srv.url}/node_modules/onnxruntime-web/dist/ort.wasm.min.mjs`)).headers['content-type'], /^text\/javascript/);
  assert.match((await get(`${srv.url}/package.json`)).headers['content-type'], /^application\/json/);
  assert.equal((await get(`${srv.url}/web/nope.js`)).statusCode, 404);
  assert.equal((await get(`${srv.url}/favicon.ico`)).statusCode, 204);
  assert.equal((await get(`${srv.url}/%2e%2e/%2e%2e/etc/passwd`)).statusCode, 404);
  assert.equal((await get(`${srv.url}/web/..%2f..%2fetc%2fpasswd`)).statusCode, 404);
  assert.equal((await get(`${srv.url}/.git/config`)).statusCode, 404);
});

test('the page loads cross-origin isolated, with the runtime and a plan', { skip }, async () => {
  const t0 = Date.now();
  await page.goto(`${srv.url}/?start=field`); // the field workflows first (the page opens on From a scan)
  assert.equal(new URL(page.url()).pathname, '/web/');
  await page.waitForFunction(() => document.body.dataset.state === 'idle' && document.querySelector('#planReadout').dataset.feasible, null, { timeout: 60000 });
  assert.equal(await T(() => crossOriginIsolated), true);
  const plan = await readData('#planReadout');
  assert.equal(plan.feasible, true);
  // Auto by default: the C++ auto-planner's choice, explained on the page, and the package's own default plan for
  // the demo geometry on this machine (the page keeps no worker or tile rule of its own).
  assert.equal(plan.patchEdge % 8, 0);
  const { createTessera } = await import('../bindings/js/index.js');
  const cores = await T(() => navigator.hardwareConcurrency);
  const node = await createTessera({ hardwareThreads: cores });
  let api;
  try {
    api = await node.plan({ geometry: { dims: [128, 128, 96], voxelMm: [1.75, 1.75, 1.75], b0Dir: [0, 0, 1] }, model: 'demo-unet' });
  } finally {
    await node.terminate();
  }
  for (const k of ['patchEdge', 'tilesInFlight', 'wholeVolume', 'tilesTotal']) assert.equal(plan[k], api[k], `page vs API plan: ${k}`);
  assert.equal(plan.core, api.tile.core);
  assert.equal(plan.halo, api.tile.halo);
  if (!plan.wholeVolume) assert.equal(plan.patchEdge, Math.ceil((plan.core + 2 * plan.halo) / 8) * 8);
  // The workers and threads the planner chose show in their inputs (nothing typed: nothing fixed).
  assert.equal(await page.inputValue('#workers'), String(api.workers));
  assert.equal(await page.inputValue('#threads'), String(api.threadsPerWorker));
  // Auto chooses the halo too (the faithful planner): the page shows the plan's, not a page constant.
  assert.equal(await page.inputValue('#halo'), String(plan.halo));
  assert.equal(await page.textContent('#planExplain'), `Auto-planner: ${api.explanation}.`);
  assert.match(api.explanation, plan.wholeVolume ? /whole volume.*exact by definition.*estimated \d+ s/ : /core \d+, halo \d+.*predicted r [\d.]+, NRMSE [\d.]+.*estimated \d+ s/);
  assert.equal(await page.inputValue('#core'), String(plan.core));
  assert.match(await page.textContent('#planReadout'), new RegExp(`Tiles in flight\\s*${plan.tilesInFlight}`));
  // The quality select: the schema's values, default and help (not page constants); the readout's estimate
  // beside the predicted fidelity, both the plan's.
  assert.deepEqual(qualityOption.choices, ['faithful', 'balanced', 'fast']);
  assert.deepEqual(await page.$$eval('#quality option', (o) => o.map((x) => x.value)), qualityOption.choices);
  assert.equal(await page.inputValue('#quality'), qualityOption.default);
  assert.equal(await page.getAttribute('#quality', 'title'), qualityOption.help);
  assert.equal(await page.textContent('#qualityHelp'), `Quality: ${qualityOption.help}.`);
  assert.equal(plan.quality, 'faithful');
  assert.equal(await page.isChecked('#verify'), false);
  if (plan.wholeVolume) assert.match(await page.textContent('#planReadout'), /Estimate\s*Estimated \d+(\.\d)? s · exact \(the whole volume runs at once\)/);
  else assertEstimate(await page.textContent('#planReadout'), plan);
  assert.equal(await page.isDisabled('#demo'), false);
  assert.equal(await page.isDisabled('#run'), true, 'Run needs an input first');
  await page.waitForFunction(() => document.querySelector('#cacheInfo').textContent !== '', null, { timeout: 10000 });
  assert.equal(await page.textContent('#cacheInfo'), 'cache empty', 'a fresh profile');
  const models = await page.$$eval('#model option', (o) => o.map((x) => x.value));
  assert.ok(models.includes('demo') && models.includes('xqsm') && models.includes('custom'));
  console.log(`# page ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
});

test('an infeasible tile setting is refused with the planner\'s advice and Run disabled', { skip }, async () => {
  await page.uncheck('#auto'); // explicit tile settings
  // xQSM's calibrated cost (76 MB + 1120 B/voxel): a 144³ patch is over the 2.5 GB single-patch limit.
  await page.selectOption('#model', 'xqsm');
  await page.fill('#core', '128');
  await page.fill('#halo', '8');
  // The advice of the settings as filled (core 128 with the old halo may be shown first, for a moment).
  await page.waitForFunction(() => !document.querySelector('#planAdvice').hidden && /at halo 8/.test(document.querySelector('#planAdvice').textContent), null, { timeout: 10000 });
  assert.match(await page.textContent('#planAdvice'), /largest core that fits is 112/);
  assert.equal(await page.isDisabled('#run'), true);
  assert.equal(await page.isDisabled('#demo'), true);
  await page.screenshot({ path: path.join(ARTIFACTS, 'infeasible.png'), fullPage: true });
  // Core 56 (72³ patches): the demo and Cancel tests that follow run these settings, 8 of 18 tiles (the rest outside
  // the mask's box), 3.0 M voxels through the network against 4.0 M at core 32.
  await page.fill('#core', '56');
  await page.waitForSelector('#planAdvice', { state: 'hidden', timeout: 10000 });
  await page.selectOption('#model', 'demo');
  await page.waitForFunction(() => document.querySelector('#planReadout').dataset.feasible === 'true', null, { timeout: 10000 });
  assert.equal(await page.isDisabled('#demo'), false);
});

test('the demo runs to completion: progress, tile map, χ against the truth, NiiVue shows it', { skip }, async () => {
  const t0 = Date.now();
  await page.click('#demo');
  await waitState(['running'], 30000);
  // mid-run: the tile map shows progress
  await page.waitForFunction(() => Number(document.querySelector('#progress').dataset.done ?? 0) >= 1, null, { timeout: 60000, polling: 100 });
  // The map shows exactly the tiles the runtime names as running, never more than the plan allows (one read:
  // the page publishes the progress and the map's counts together).
  const mid = await T(() => ({ p: { ...document.querySelector('#progress').dataset }, c: { ...document.querySelector('#tileCounts').dataset }, k: document.querySelector('#planReadout').dataset.tilesInFlight }));
  mid.p.done = Number(mid.p.done);
  mid.p.runningTiles = mid.p.runningTiles ? mid.p.runningTiles.split(',') : [];
  mid.c = Object.fromEntries(Object.entries(mid.c).map(([k, v]) => [k, Number(v)]));
  mid.k = Number(mid.k);
  assert.equal(mid.c.running, new Set(mid.p.runningTiles).size);
  assert.ok(mid.c.running <= mid.k, `${mid.c.running} running, plan allows ${mid.k}`);
  assert.ok(mid.c.done + mid.c.running >= mid.p.done);
  await page.screenshot({ path: path.join(ARTIFACTS, 'demo-running.png'), fullPage: true });
  await waitState(['done', 'error'], 240000);
  const s = {
    state: await pageState(),
    error: await errorText(),
    progress: await readData('#progress'),
    counts: await readData('#tileCounts'),
    report: await readData('#report'),
    plan: await readData('#planReadout'),
    shown: (await readData('#resultCard .panels')).shown,
  };
  assert.equal(s.state, 'done', s.error);
  assert.equal(s.progress.done, s.progress.total);
  assert.equal(await page.$eval('#progress', (p) => p.value / p.max), 1);
  assert.match(await page.textContent('#progressText'), /100%/);
  assert.equal(s.counts.done + s.counts.skipped, s.counts.total, `every tile done or skipped: ${JSON.stringify(s.counts)}`);
  assert.equal(s.counts.queued + s.counts.running, 0);
  assert.equal(s.counts.skipped, s.plan.tilesSkipped, 'drawn skipped tiles = planner');
  assert.equal(s.counts.done, s.report.tilesRun);
  assert.equal(s.report.tilesRun + s.report.tilesSkipped, s.report.tilesTotal);
  assert.equal(s.report.finite, true, 'χ is finite');
  assert.equal(s.report.nonzeroOutside, 0, 'χ is 0 outside the mask');
  assert.ok(s.report.std > 0, 'χ varies inside the mask');
  assert.match(await page.textContent('#report'), new RegExp(`Against the phantom truth\\s*r = ${s.report.r.toFixed(3)}`));
  assert.match(await page.textContent('#report'), /Execution provider\s*wasm/, 'the report names the execution provider that ran');
  console.log(`# demo: ${((Date.now() - t0) / 1000).toFixed(1)} s in all (run ${s.report.wallSeconds.toFixed(1)} s); ${s.report.tilesRun} tiles; r = ${s.report.r.toFixed(3)}, NRMSE ${(100 * s.report.nrmse).toFixed(1)} %${REAL_NET ? '' : ' (stand-in network)'}`);
  if (REAL_NET) assert.ok(s.report.r > R_MIN, `r vs truth = ${s.report.r}`);
  assert.deepEqual(s.shown, ['chi', 'field', 'truth']);
  // The χ panel: a picture, not a blank canvas (read back through a screenshot of the element)
  await page.waitForTimeout(300);
  const png = await page.locator('#nvChi').screenshot();
  const px = await page.evaluate(async (b64) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const bmp = await createImageBitmap(new Blob([bytes], { type: 'image/png' }));
    const c = new OffscreenCanvas(bmp.width, bmp.height);
    const g = c.getContext('2d');
    g.drawImage(bmp, 0, 0);
    const d = g.getImageData(0, 0, bmp.width, bmp.height).data;
    const levels = new Set();
    let bright = 0;
    for (let i = 0; i < d.length; i += 4) {
      const l = (d[i] + d[i + 1] + d[i + 2]) / 3;
      if (l > 40) bright++;
      levels.add(Math.round(l / 8));
    }
    return { bright, total: d.length / 4, levels: levels.size };
  }, png.toString('base64'));
  assert.ok(px.bright > 0.1 * px.total && px.levels >= 8, `χ panel looks blank: ${JSON.stringify(px)}`);
  // The demo network went through the weights cache (Cache API): stored once verified, under its sha256.
  assert.equal(demoDownloads(), 1);
  await page.waitForFunction(() => document.querySelector('#cacheInfo').textContent === 'cached: demo-unet.onnx', null, { timeout: 5000 });
  assert.equal(await cachedDemoSha(), DEMO_SHA);
  await page.locator('#resultCard').scrollIntoViewIfNeeded();
  await page.screenshot({ path: path.join(ARTIFACTS, 'demo-done.png'), fullPage: true });
});

test('Cancel stops a run at once and leaves the page ready', { skip }, async () => {
  const errorsBefore = (await readData('#error')).count ?? 0;
  await page.click('#run');
  await page.waitForFunction(() => document.body.dataset.state === 'running' && Number(document.querySelector('#progress').dataset.done ?? 0) >= 2, null, { timeout: 60000, polling: 50 });
  const t0 = Date.now();
  await page.click('#cancel');
  await waitState(['cancelled'], 2000);
  const ms = Date.now() - t0;
  assert.equal(await page.isDisabled('#cancel'), true);
  assert.equal(await page.isDisabled('#run'), false);
  await page.waitForTimeout(1500);
  const s = { state: await pageState(), report: await readData('#report'), counts: await readData('#tileCounts'), errors: (await readData('#error')).count ?? 0 };
  assert.equal(s.state, 'cancelled');
  assert.deepEqual(s.report, {}, 'no result arrives after a cancel');
  assert.equal(await page.textContent('#report'), '');
  assert.equal(await page.isDisabled('#download'), true);
  assert.equal(s.counts.running, 0);
  assert.ok(s.counts.done < s.counts.total - s.counts.skipped, 'stopped before the end');
  assert.equal(s.errors, errorsBefore, 'no error shown');
  assert.equal(await page.isHidden('#error'), true);
  assert.match(await page.textContent('#progressText'), /cancelled/);
  console.log(`# cancel settled the page in ${ms} ms at ${s.counts.done} tiles`);
});

test('Measure speed: the estimate uses this machine\'s speed, and the next run takes the measuring worker (no start-up of its own)', { skip, timeout: 300000 }, async () => {
  await page.check('#auto'); // an automatic plan: the one with an estimate
  await planWith({ feasible: true, estimateSource: 'graph' }); // the demo network's registry work per voxel at the engine's rate
  const before = await readData('#planReadout');
  assert.equal(await page.isDisabled('#measureSpeed'), false);
  await page.click('#measureSpeed');
  assert.equal(await page.isDisabled('#run'), true, 'Run waits while the speed is measured');
  await page.waitForFunction(() => /Measured on this machine|not measured/.test(document.querySelector('#speedText').textContent), null, { timeout: 180000, polling: 200 });
  assert.match(await page.textContent('#speedText'), /Measured on this machine in [\d.]+ s \(\d threads?: 32³ [\d.]+ s, 64³ [\d.]+ s\)/);
  await planWith({ estimateSource: 'measured' });
  const plan = await readData('#planReadout');
  assert.match(await page.textContent('#planReadout'), /time from this machine’s measured speed/);
  assert.equal(await page.isDisabled('#run'), false);
  await page.click('#run');
  await waitState(['done', 'error'], 240000);
  assert.equal(await pageState(), 'done', await errorText());
  const report = await readData('#report');
  assert.equal(report.warmStart, true, 'the run took the measuring worker');
  assert.ok(report.workerHeapVsPlan <= 1, `worker heap ${report.workerHeapVsPlan} of the plan`);
  console.log(`# measured estimate ${plan.estimatedSeconds.toFixed(1)} s, run ${report.wallSeconds.toFixed(1)} s (${(plan.estimatedSeconds / report.wallSeconds).toFixed(2)}×; ${plan.tilesActive} tile(s), patch ${plan.patchEdge})`);
  assert.ok(before.estimatedSeconds > 0);
  assert.match(await page.textContent('#speedText'), /kept for later visits/);
  // The measured speed is kept for this machine and browser: a reload plans with it, without measuring again, and
  // with the worker's start-up (the measuring worker went with the old page).
  await page.reload();
  await page.waitForFunction(() => document.body.dataset.state === 'idle' && document.querySelector('#planReadout').dataset.feasible, null, { timeout: 60000 });
  await planWith({ estimateSource: 'measured' });
  assert.match(await page.textContent('#speedText'), /Measured on this machine on \d{4}-\d\d-\d\d \d\d:\d\d UTC \(32³ [\d.]+ s, 64³ [\d.]+ s\), kept from an earlier visit/);
  const kept = await readData('#planReadout');
  assert.ok(kept.estimatedSeconds > plan.estimatedSeconds, `the kept speed's estimate (${kept.estimatedSeconds} s) adds the worker start-up to the warm one (${plan.estimatedSeconds} s)`);
  // Another browser or machine does not use it: the entry is keyed by the user agent and the logical cores.
  await page.evaluate(() => {
    const all = JSON.parse(localStorage.getItem('tessera-qsm.speeds.v2'));
    for (const e of Object.values(all)) e.machine = `another browser · ${e.machine}`;
    localStorage.setItem('tessera-qsm.speeds.v2', JSON.stringify(all));
  });
  await page.reload();
  await page.waitForFunction(() => document.body.dataset.state === 'idle' && document.querySelector('#planReadout').dataset.feasible, null, { timeout: 60000 });
  assert.equal((await readData('#planReadout')).estimateSource, 'graph');
  assert.equal(await page.textContent('#speedText'), '');
  // No speed of the demo network on this machine: loading an input measures it by itself before the first run, with
  // patches sized to the planned run (smaller than the button's 32³ and 64³ on this small volume), and the estimate
  // before Run is this machine's; the run takes the measuring worker.
  await page.setInputFiles('#fieldFile', { name: 'phantom_field.nii.gz', mimeType: 'application/gzip', buffer: Buffer.from(pair.fieldPpmNii) });
  await page.setInputFiles('#maskFile', { name: 'phantom_mask.nii.gz', mimeType: 'application/gzip', buffer: Buffer.from(pair.maskNii) });
  await page.waitForFunction(() => /Measured by itself|not measured/.test(document.querySelector('#speedText').textContent), null, { timeout: 120000, polling: 200 });
  const note = await page.textContent('#speedText');
  const edges = note.match(/^Measured by itself before the first run on this machine in [\d.]+ s \(\d threads?: (\d+)³ [\d.]+ s, (\d+)³ [\d.]+ s\)/);
  assert.ok(edges, note);
  assert.ok(Number(edges[1]) < 32 && Number(edges[2]) < 64 && Number(edges[1]) < Number(edges[2]), note);
  await planWith({ feasible: true, estimateSource: 'measured' });
  const first = await readData('#planReadout');
  await page.click('#run');
  await waitState(['done', 'error'], 120000);
  assert.equal(await pageState(), 'done', await errorText());
  const firstRun = await readData('#report');
  assert.equal(firstRun.warmStart, true, 'the first run took the worker that measured by itself');
  console.log(`# measured by itself: ${note}; estimate ${first.estimatedSeconds.toFixed(1)} s, run ${firstRun.wallSeconds.toFixed(1)} s`);
  await page.uncheck('#auto');
  await page.fill('#core', '32'); // the browser restores the auto plan's values on a reload
  await page.fill('#halo', '8');
  await planWith({ feasible: true, patchEdge: 48 });
});

test('a NIfTI pair loaded through the file inputs runs end to end with a custom network; χ downloads as NIfTI', { skip }, async () => {
  const { readNifti } = await import('../bindings/js/index.js');
  await page.check('input[name=units][value=hz]');
  await page.fill('#b0', '3');
  await page.setInputFiles('#fieldFile', { name: 'phantom_field.nii.gz', mimeType: 'application/gzip', buffer: Buffer.from(pair.field) });
  await page.setInputFiles('#maskFile', { name: 'phantom_mask.nii.gz', mimeType: 'application/gzip', buffer: Buffer.from(pair.maskNii) });
  // The previous test's input is from files too: wait for the latest load (the units and B0 reload the earlier file).
  await page.waitForFunction(() => document.querySelector('#inputInfo').dataset.source === 'files' && document.body.dataset.state === 'idle', null, { timeout: 20000 });
  const input = await readData('#inputInfo');
  assert.deepEqual(input.dims, pair.geometry.dims);
  assert.equal(input.maskVoxels, pair.mask.reduce((a, b) => a + b, 0));
  assert.deepEqual(input.voxelMm, pair.geometry.voxelMm);
  assert.ok(Math.abs(input.sumInMask - pair.fieldPpmSum) <= 1e-3 * Math.abs(pair.fieldPpmSum) + 1e-3, `Hz → ppm: ${input.sumInMask} vs ${pair.fieldPpmSum}`);
  await page.selectOption('#model', 'custom');
  await page.fill('#customDivisor', '8');
  await page.fill('#customBpv', '1100');
  await page.setInputFiles('#customFile', netPath);
  await page.waitForFunction(() => document.querySelector('#planReadout').dataset.feasible === 'true' && document.querySelector('#planReadout').dataset.patchEdge === '48' && !document.querySelector('#run').disabled, null, { timeout: 10000 });
  await page.click('#run');
  await waitState(['done', 'error'], 120000);
  const s = { state: await pageState(), error: await errorText(), counts: await readData('#tileCounts'), report: await readData('#report') };
  assert.equal(s.state, 'done', s.error);
  assert.equal(s.counts.running + s.counts.queued, 0);
  assert.ok(s.report.finite && s.report.nonzeroOutside === 0);
  const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 20000 }), page.click('#download')]);
  assert.match(dl.suggestedFilename(), /^phantom_field_chi\.nii\.gz$/);
  const bytes = fs.readFileSync(await dl.path());
  assert.deepEqual([...bytes.subarray(0, 2)], [0x1f, 0x8b], 'gzipped');
  const chi = readNifti(bytes);
  fs.writeFileSync(path.join(ARTIFACTS, dl.suggestedFilename()), bytes);
  assert.deepEqual(chi.dims, pair.geometry.dims);
  assert.deepEqual(chi.voxelMm, pair.geometry.voxelMm);
  assert.equal(chi.datatype, 16);
  let n = 0, sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  for (let i = 0; i < chi.data.length; i++) {
    if (!pair.mask[i]) {
      assert.equal(chi.data[i], 0);
      continue;
    }
    const x = chi.data[i], y = pair.truth[i];
    n++; sx += x; sy += y; sxx += x * x; syy += y * y; sxy += x * y;
  }
  const r = (n * sxy - sx * sy) / Math.sqrt((n * sxx - sx * sx) * (n * syy - sy * sy));
  console.log(`# NIfTI run: ${s.report.tilesRun} tiles in ${s.report.wallSeconds.toFixed(1)} s; downloaded χ r vs truth = ${r.toFixed(3)}${REAL_NET ? '' : ' (stand-in network)'}`);
  if (REAL_NET) assert.ok(r > R_MIN, `r = ${r}`);
  await page.screenshot({ path: path.join(ARTIFACTS, 'nifti-done.png'), fullPage: true });
});

test('a custom network without bytes per voxel is calibrated from its .onnx before it is planned; the run stays within it', { skip }, async () => {
  // The custom network and the NIfTI pair of the previous test.
  await page.fill('#customBpv', '');
  await planWith({ feasible: 'true', costSource: 'calibrated' }, 120000);
  const plan = await readData('#planReadout');
  assert.ok(plan.costBytesPerVoxel > 0);
  assert.match(await page.textContent('#planReadout'), new RegExp(`Memory cost\\s*[\\d.]+ MB \\+ ${plan.costBytesPerVoxel} B/voxel per worker, calibrated \\(\\d patches measured in [\\d.]+ s\\)`));
  await page.click('#run');
  await waitState(['done', 'error'], 120000);
  assert.equal(await pageState(), 'done', await errorText());
  const report = await readData('#report');
  assert.ok(report.workerHeapVsPlan <= 1, `worker heap ${report.workerHeapVsPlan}× the calibrated plan`);
  assert.equal(report.memoryWarning, false);
  // Declared far too low: the run's report shows the memory warning with the figure to declare.
  await page.fill('#customBpv', '1');
  await planWith({ feasible: 'true', costSource: 'declared', costBytesPerVoxel: 1 });
  await page.click('#run');
  await waitState(['done', 'error'], 120000);
  assert.equal(await pageState(), 'done', await errorText());
  assert.equal((await readData('#report')).memoryWarning, true);
  assert.match(await page.textContent('#report'), /Memory warning\s*an ONNX Runtime worker heap reached .* declare "bytesPerVoxel": \d+ in the spec/);
  await page.fill('#customBpv', '1100');
});

test('the quality select changes the plan (fast: another, faster tiling than faithful when the whole volume does not fit); the readout shows the estimate beside the predicted fidelity, the network’s reach and the fidelity warning of a tiny budget; overlapping tiles on the map', { skip }, async () => {
  const { graphReceptiveField } = await import('../bindings/js/index.js');
  const graph = graphReceptiveField(new Uint8Array(fs.readFileSync(netPath)));
  // The custom network of the previous test (its .onnx chosen) on the 64×64×48 pair, planned automatically with 2
  // workers typed (the whole volume would fit one: the auto-planner runs it whole unless several workers are asked for).
  await page.fill('#workers', '2');
  await page.check('#auto');
  await page.uncheck('#whole');
  await page.fill('#customBpv', '1100');
  await page.selectOption('#quality', 'faithful');
  assert.equal(await page.isDisabled('#quality'), false);
  // Crop auto is the default; the readout names the box when the plan has one (bindings/js/crop.test.js runs a crop
  // end to end).
  assert.equal(await page.inputValue('#crop'), 'auto');
  assert.equal(await page.isDisabled('#crop'), false);
  await planWith({ feasible: 'true', quality: 'faithful' });
  const first = await readData('#planReadout');
  if (first.cropped) assert.match(await page.textContent('#planReadout'), /the mask's bounding box \+ \d+ voxels: x \d+-\d+/);
  else assert.doesNotMatch(await page.textContent('#planReadout'), /bounding box/);
  // The rest of this test is about tilings: crop off plans over the whole field of view.
  await page.selectOption('#crop', 'off');
  // With the .onnx the planner reads the network's reach from its graph.
  await planWith({ feasible: 'true', quality: 'faithful', contextAssumed: 'false', contextRadius: graph.radiusMax });
  let plan = await readData('#planReadout');
  let text = await page.textContent('#planReadout');
  assertEstimate(text, plan);
  const file = path.basename(netPath).replace(/\./g, '\\.');
  assert.match(text, new RegExp(`Network reach\\s*receptive radius ${graph.radiusMax} voxels, 90 % of the dependence within ${plan.contextRadius90} — from the graph of ${file}`));
  assert.equal(plan.fidelityWarning, false);
  assert.equal(await page.isHidden('#fidelityWarning'), true);
  assert.match(await page.textContent('#planExplain'), /predicted r [\d.]+, NRMSE [\d.]+ against the whole-volume run \(faithful target r ≥ 0\.99, NRMSE ≤ 0\.10\)/);
  // Without it the reach is unknown: the planner assumes one, and the page says so.
  await page.setInputFiles('#customFile', []);
  await planWith({ feasible: 'true', contextAssumed: 'true' });
  plan = await readData('#planReadout');
  assert.match(await page.textContent('#planReadout'), new RegExp(`Network reach\\s*unknown: assumed ${plan.contextRadius} voxels`));
  await page.setInputFiles('#customFile', netPath);
  await planWith({ feasible: 'true', contextAssumed: 'false' });

  // A tiny budget: at 15000 B/voxel the whole 64×64×48 volume is over the single-patch limit, and no tiling within
  // the memory budget reaches the faithful target: the most faithful one is planned, with the warning.
  await page.fill('#customBpv', '15000');
  await planWith({ feasible: 'true', quality: 'faithful', fidelityWarning: 'true' });
  const faithful = await readData('#planReadout');
  assert.equal(faithful.wholeVolume, false);
  assertEstimate(await page.textContent('#planReadout'), faithful);
  assert.equal(await page.isVisible('#fidelityWarning'), true);
  const warning = await page.textContent('#fidelityWarning');
  const best = /^Fidelity: no tiling within the memory budget reaches the faithful target r ≥ 0\.99, NRMSE ≤ 0\.10 \(the best is predicted r ([\d.]+), NRMSE ([\d.]+)\): the run takes the most faithful one; the result is approximate\.$/.exec(warning);
  assert.ok(best, warning);
  assert.ok(Math.abs(Number(best[1]) - faithful.predictedR) <= 5e-4 && Math.abs(Number(best[2]) - faithful.predictedNrmse) <= 5e-4, `${warning} vs the plan's ${faithful.predictedR}, ${faithful.predictedNrmse}`);
  await page.screenshot({ path: path.join(ARTIFACTS, 'fidelity-warning.png'), fullPage: true });
  // The map draws the plan's tiles; overlapping cores (stride < core) are said in the readout and the legend.
  const map = await readData('#tileCounts');
  assert.deepEqual([map.total, map.skipped], [faithful.tilesTotal, faithful.tilesSkipped]);
  if (faithful.stride < faithful.core) {
    assert.match(await page.textContent('#planReadout'), new RegExp(`Stride\\s*${faithful.stride} \\(${faithful.blend} blend\\): the cores overlap and are blended`));
    assert.equal(await page.isVisible('#tileStride'), true);
    assert.equal(await page.textContent('#tileStride'), ` stride ${faithful.stride} (${faithful.blend} blend): the ${faithful.core}-voxel cores overlap`);
    assert.deepEqual(await readData('#tileStride'), { stride: faithful.stride, blend: faithful.blend, core: faithful.core });
    await page.locator('#runCard').screenshot({ path: path.join(ARTIFACTS, 'tilemap-overlap.png') });
  } else {
    assert.equal(await page.isHidden('#tileStride'), true);
  }
  // The whole volume does not fit: refused with the planner's advice.
  await page.check('#whole');
  await page.waitForSelector('#planAdvice:not([hidden])', { timeout: 15000 });
  assert.match(await page.textContent('#planAdvice'), /over the [\d.]+ GB single-patch limit/);
  assert.equal(await page.isDisabled('#quality'), true, 'the quality steers the auto-planner only');
  await page.uncheck('#whole');
  await planWith({ feasible: 'true', quality: 'faithful', fidelityWarning: 'true' });

  // Fast: speed only, no target, so no warning; another tiling, estimated faster.
  await page.selectOption('#quality', 'fast');
  await planWith({ feasible: 'true', quality: 'fast' });
  const fast = await readData('#planReadout');
  assert.notDeepEqual([fast.core, fast.halo, fast.stride, fast.blend], [faithful.core, faithful.halo, faithful.stride, faithful.blend]);
  assert.ok(fast.estimatedSeconds < faithful.estimatedSeconds, `fast ${fast.estimatedSeconds} s vs faithful ${faithful.estimatedSeconds} s`);
  assert.equal(fast.wholeVolume, false);
  assert.equal(fast.fidelityWarning, false);
  assert.equal(await page.isHidden('#fidelityWarning'), true);
  assertEstimate(await page.textContent('#planReadout'), fast);
  assert.match(await page.textContent('#planExplain'), /predicted r [\d.]+, NRMSE [\d.]+ against the whole-volume run \(quality fast: no target\)/);
  console.log(`# quality at 15000 B/voxel: faithful core ${faithful.core} halo ${faithful.halo} stride ${faithful.stride} (${faithful.blend}) ${faithful.estimatedSeconds.toFixed(0)} s, r ${faithful.predictedR.toFixed(3)}; fast core ${fast.core} halo ${fast.halo} ${fast.estimatedSeconds.toFixed(0)} s, r ${fast.predictedR.toFixed(3)}`);
  await page.selectOption('#quality', 'faithful');
  await page.fill('#customBpv', '1100');
  await planWith({ feasible: 'true', quality: 'faithful', fidelityWarning: 'false' });

  // Measure reach: the network's measured context (receptiveField's probe) replaces its graph's in the plan, and the
  // readout says so. It is kept by the weights' sha256: the same file chosen again, or on a later visit, keeps it;
  // another file (other weights, maybe the same name) has none. The probed network is a small U-Net (base 2: its
  // probe takes about a second, the demo network's ten).
  const otherNet = path.join(tmp, 'other-weights.onnx');
  const { unet } = await import('../tests/js/networks.js');
  fs.writeFileSync(otherNet, unet({ base: 2 }));
  const otherGraph = graphReceptiveField(new Uint8Array(fs.readFileSync(otherNet)));
  await page.setInputFiles('#customFile', otherNet);
  await planWith({ feasible: 'true', contextAssumed: 'false', contextRadius: otherGraph.radiusMax });
  assert.equal(await page.isDisabled('#measureReach'), false);
  await page.click('#measureReach');
  await planWith({ feasible: 'true', contextMeasured: 'true' }, 120000);
  const measured = await readData('#planReadout');
  assert.ok(measured.contextRadius90 > 0 && measured.contextRadius90 < otherGraph.radiusMax, `measured radius90 ${measured.contextRadius90}, graph ${otherGraph.radiusMax}`);
  const measuredReach = new RegExp(`Network reach\\s*measured by probe: 90 % within ${measured.contextRadius90} voxels, 99 % within ${measured.contextRadius99}`);
  assert.match(await page.textContent('#planReadout'), measuredReach);
  assert.match(await page.textContent('#reachText'), /^Measured in .+ \(a \d+³ patch\): the plan uses it instead of the graph's reach; kept for later visits$/);
  await page.setInputFiles('#customFile', []);
  await planWith({ feasible: 'true', contextAssumed: 'true' });
  await page.setInputFiles('#customFile', otherNet);
  await planWith({ feasible: 'true', contextMeasured: 'true', contextRadius90: measured.contextRadius90 });
  await page.setInputFiles('#customFile', { name: path.basename(otherNet), mimeType: 'application/octet-stream', buffer: fs.readFileSync(netPath) });
  await planWith({ feasible: 'true', contextAssumed: 'false', contextRadius: graph.radiusMax });
  assert.notEqual((await readData('#planReadout')).contextMeasured, true);
  assert.equal(await page.textContent('#reachText'), '');
  // A measurement is cancelled like a run: Cancel stops it (the demo network's probe, still running), says so, and
  // leaves the plan as it was.
  assert.equal(await page.isDisabled('#cancel'), true);
  await page.click('#measureReach');
  await page.waitForFunction(() => /measuring the reach/.test(document.querySelector('#reachText').textContent), null, { timeout: 60000, polling: 20 });
  await page.click('#cancel');
  await page.waitForFunction(() => document.querySelector('#reachText').textContent === 'Reach not measured: cancelled', null, { timeout: 30000 });
  await page.waitForFunction(() => !document.querySelector('#measureReach').disabled && document.querySelector('#cancel').disabled, null, { timeout: 10000 });
  assert.notEqual((await readData('#planReadout')).contextMeasured, true);
  // A later visit (another page of this browser profile): the same file's measured reach is the plan's without
  // measuring again.
  const later = await ctx.newPage();
  try {
    await later.goto(page.url());
    await later.waitForFunction(() => document.body.dataset.state === 'idle' && document.querySelector('#planReadout').dataset.feasible, null, { timeout: 60000 });
    await later.selectOption('#model', 'custom');
    await later.fill('#customDivisor', '8');
    await later.fill('#customBpv', '1100');
    await later.setInputFiles('#customFile', otherNet);
    const note = /^Measured on \d{4}-\d\d-\d\d \d\d:\d\d UTC \(a \d+³ patch\), kept from an earlier visit: the plan uses it instead of the graph's reach; Measure reach measures again$/;
    await later.waitForFunction(
      ([r90, source]) => document.querySelector('#planReadout').dataset.contextMeasured === 'true' && document.querySelector('#planReadout').dataset.contextRadius90 === r90 && new RegExp(source).test(document.querySelector('#reachText').textContent),
      [String(measured.contextRadius90), note.source],
      { timeout: 20000, polling: 50 },
    );
    assert.match(await later.textContent('#planReadout'), measuredReach);
  } finally {
    await later.close();
  }
});

test('Verify (self-check): the verified fidelity beside the predicted one, equal to the node API’s report.verify; a whole-volume run is exact', { skip, timeout: 240000 }, async () => {
  // The demo network on the pair's field in ppm, planned automatically (faithful), with the self-check.
  await page.selectOption('#model', 'demo');
  await page.check('input[name=units][value=ppm]');
  await page.check('input[name=maskSource][value=file]');
  await page.setInputFiles('#fieldFile', { name: 'phantom_field_ppm.nii.gz', mimeType: 'application/gzip', buffer: Buffer.from(pair.fieldPpmNii) });
  await page.waitForFunction(
    (want) => document.body.dataset.state !== 'loading' && Math.abs(Number(document.querySelector('#inputInfo').dataset.sumInMask) - want) <= 1e-3 * Math.abs(want) + 1e-3,
    pair.fieldPpmSum,
    { timeout: 20000 },
  );
  await page.check('#verify');
  await planWith({ feasible: 'true', quality: 'faithful', verifyPossible: 'true', wholeVolume: 'false' });
  const plan = await readData('#planReadout');
  const planned = await page.textContent('#planReadout');
  assert.match(planned, new RegExp(`Self-check\\s*after the tiles, the box \\[${plan.verifyLo.join(', ')}\\] to \\[${plan.verifyHi.join(', ')}\\] runs whole`));
  // Every progress line the page shows, collected by the test (the page has no hook for it).
  await page.evaluate(() => {
    const el = document.querySelector('#progressText');
    const seen = (window.testProgressLines = []);
    new MutationObserver(() => seen.push(el.textContent)).observe(el, { childList: true, characterData: true, subtree: true });
  });
  await page.click('#run');
  await waitState(['done', 'error'], 180000);
  assert.equal(await pageState(), 'done', await errorText());
  const v = await readData('#verifyReadout');
  const lines = await page.evaluate(() => window.testProgressLines);
  assert.ok(lines.some((l) => new RegExp(`^self-check: the box \\[${plan.verifyLo.join(', ')}\\] to \\[${plan.verifyHi.join(', ')}\\] runs whole · \\d+/\\d+`).test(l)), `no self-check progress among ${JSON.stringify(lines.slice(-5))}`);
  assert.equal((await readData('#progress')).stage, 'verify');
  // The node API on the same field, mask, network and tiling.
  const tile = { core: plan.core, halo: plan.halo, stride: plan.stride, blend: plan.blend };
  const out = await (await nodeApi()).invert({ keepInputs: true, field: pair.fieldPpm, mask: pair.mask, geometry: pair.geometry, model: 'demo-unet', weights: new Uint8Array(fs.readFileSync(netPath)), tile, workers: plan.tilesInFlight, verify: true });
  const want = out.report.verify;
  assert.equal(want.possible, true);
  assert.deepEqual(
    [v.possible, v.exact, v.boxLo, v.boxHi, v.compareLo, v.compareHi, v.margin, v.voxels],
    [true, false, want.box.lo, want.box.hi, want.compareLo, want.compareHi, want.margin, want.voxels],
  );
  assert.deepEqual([v.boxLo, v.boxHi], [plan.verifyLo, plan.verifyHi], 'the box the plan showed');
  for (const k of ['r', 'nrmse', 'dataConsistency']) assert.ok(Math.abs(v[k] - want[k]) <= 1e-5, `${k}: page ${v[k]}, node ${want[k]}`);
  assert.ok(Math.abs(v.maxAbs - want.maxAbs) <= 1e-4, `max |Δ|: page ${v.maxAbs}, node ${want.maxAbs}`);
  assert.deepEqual([v.predictedR, v.predictedNrmse], [plan.predictedR, plan.predictedNrmse], 'the predicted fidelity is the plan’s');
  // The words say the same numbers.
  const shown = await page.textContent('#verifyReadout');
  const m = /Verified\s*r ([\d.]+), NRMSE ([\d.]+), max \|Δ\| ([\d.e+-]+) ppm over ([\d,]+) voxels/.exec(shown);
  assert.ok(m, shown);
  assert.ok(Math.abs(Number(m[1]) - v.r) <= 5e-4 && Math.abs(Number(m[2]) - v.nrmse) <= 5e-4, shown);
  assert.ok(Math.abs(Number(m[3]) - v.maxAbs) <= 0.05 * v.maxAbs, shown);
  assert.equal(Number(m[4].replace(/,/g, '')), v.voxels);
  assert.match(shown, /Predicted\s*r [\d.]+, NRMSE [\d.]+/);
  const dc = /Data consistency\s*‖M\(D∗χ − f\)‖ \/ ‖M f‖ = ([\d.]+)/.exec(shown);
  assert.ok(dc && Math.abs(Number(dc[1]) - v.dataConsistency) <= 5e-4, shown);
  assert.equal(await page.isVisible('#verifyBox'), true);
  await page.locator('#resultCard').screenshot({ path: path.join(ARTIFACTS, 'verify-done.png') });
  console.log(`# self-check: verified r ${v.r.toFixed(4)}, NRMSE ${v.nrmse.toFixed(4)} (predicted r ${plan.predictedR.toFixed(4)}, NRMSE ${plan.predictedNrmse.toFixed(4)}), max |Δ| ${v.maxAbs.toExponential(1)} ppm, ${v.voxels} voxels, data consistency ${v.dataConsistency.toFixed(3)}; page vs node |Δr| ${Math.abs(v.r - want.r).toExponential(1)}`);

  // The whole volume: the result is the whole-volume run itself.
  await page.check('#whole');
  await planWith({ feasible: 'true', wholeVolume: 'true', verifyPossible: 'false' });
  const whole = await page.textContent('#planReadout');
  assert.match(whole, /Estimate\s*.* · exact \(the whole volume runs at once\)/);
  assert.match(whole, /Self-check\s*not possible: the whole volume runs at once/);
  await page.click('#run');
  await waitState(['done', 'error'], 120000);
  assert.equal(await pageState(), 'done', await errorText());
  const w = await readData('#verifyReadout');
  assert.deepEqual([w.possible, w.exact, w.r, w.nrmse], [false, true, 1, 0]);
  assert.match(await page.textContent('#verifyReadout'), /^Verifiedexact \(whole volume\)/);
  await page.uncheck('#whole');
  await page.uncheck('#verify');
  await page.waitForFunction(() => document.querySelector('#planReadout').dataset.wholeVolume === 'false' && document.querySelector('#planReadout').dataset.verifyPossible === undefined, null, { timeout: 15000 });
});

test('a mask made by thresholding a magnitude image', { skip }, async () => {
  const seq = (await readData('#inputInfo')).seq;
  await page.check('input[name=maskSource][value=magnitude]');
  await page.setInputFiles('#magFile', { name: 'phantom_mag.nii.gz', mimeType: 'application/gzip', buffer: Buffer.from(pair.magnitude) });
  await page.waitForFunction((s) => Number(document.querySelector('#inputInfo').dataset.seq) > s && document.body.dataset.state === 'idle', seq, { timeout: 20000 });
  const input = await readData('#inputInfo');
  assert.equal(input.maskVoxels, pair.mask.reduce((a, b) => a + b, 0));
  assert.match(await page.textContent('#inputInfo'), /mask from phantom_mag\.nii\.gz/);
});

test('a registry network: licence and citation shown; wrong weights refused in words, page stays usable', { skip }, async () => {
  await page.selectOption('#model', 'xqsm');
  const info = await page.textContent('#modelInfo');
  assert.match(info, /Licence:/);
  assert.match(info, /Citation:.*xQSM/);
  await page.check('input[name=weightsSource][value=file]');
  await page.setInputFiles('#weightsFile', { name: 'xqsm.onnx', mimeType: 'application/octet-stream', buffer: Buffer.alloc(100) });
  await page.waitForFunction(() => document.querySelector('#planReadout').dataset.feasible === 'true' && !document.querySelector('#run').disabled, null, { timeout: 10000 });
  await page.click('#run');
  await waitState(['error', 'done'], 30000);
  assert.equal(await pageState(), 'error');
  assert.match(await page.textContent('#error'), /weights.*expected 20901826/s);
  assert.equal((await readData('#error')).code, 'WeightsMismatch');
  assert.equal((await readData('#tileCounts')).running, 0);
  assert.equal(await page.isDisabled('#run'), false);
  await page.selectOption('#model', 'demo');
});

test('the tile map draws the plan that runs: 56×64×48 at core 24 / halo 8 is 18 tiles, 14 to run', { skip }, async () => {
  const { writeNifti } = await import('../bindings/js/index.js');
  // 2⅓ × 2⅔ × 2 cores: partial tiles at the far x and y edges, none in z (the plan's clamping is exercised in x and y).
  const C = 24;
  const dims = [56, 64, 48];
  const [X, Y, Z] = dims;
  const like = { dims, voxelMm: [1, 1, 1] };
  // Inside everywhere except x ≥ 48 with y < 24 or y ≥ 48: four of the 3×3×2 core-24 tiles hold no mask voxel.
  const mask = new Float32Array(X * Y * Z);
  for (let z = 0, i = 0; z < Z; z++) for (let y = 0; y < Y; y++) for (let x = 0; x < X; x++, i++) mask[i] = x >= 2 * C && (y < C || y >= 2 * C) ? 0 : 1;
  // The oracle, computed here: core-aligned tiles from 0, clamped at the far edges; skipped = no mask voxel in the core.
  const counts = dims.map((d) => Math.ceil(d / C));
  let skipped = 0;
  for (let k = 0; k < counts[2]; k++)
    for (let j = 0; j < counts[1]; j++)
      for (let i = 0; i < counts[0]; i++) {
        let any = false;
        for (let z = k * C; z < Math.min(Z, k * C + C) && !any; z++)
          for (let y = j * C; y < Math.min(Y, j * C + C) && !any; y++)
            for (let x = i * C; x < Math.min(X, i * C + C); x++) if (mask[x + X * (y + Y * z)]) { any = true; break; }
        if (!any) skipped++;
      }
  assert.deepEqual([counts, skipped], [[3, 3, 2], 4]);
  await page.selectOption('#model', 'demo');
  await page.uncheck('#auto');
  await page.uncheck('#whole');
  await page.fill('#core', String(C));
  await page.fill('#halo', '8');
  await page.check('input[name=units][value=ppm]');
  await page.check('input[name=maskSource][value=file]');
  const seq = (await readData('#inputInfo')).seq;
  await page.setInputFiles('#maskFile', { name: 'grid_mask.nii.gz', mimeType: 'application/gzip', buffer: Buffer.from(await writeNifti(mask, like, { gzip: true })) });
  await page.setInputFiles('#fieldFile', { name: 'grid_field.nii.gz', mimeType: 'application/gzip', buffer: Buffer.from(await writeNifti(new Float32Array(X * Y * Z), like, { gzip: true })) });
  await page.waitForFunction((s) => Number(document.querySelector('#inputInfo').dataset.seq) > s && document.body.dataset.state === 'idle', seq, { timeout: 30000 });
  await page.waitForFunction((c) => document.querySelector('#planReadout').dataset.core === c && document.querySelector('#tileCounts').dataset.total === '18', String(C), { timeout: 15000 });
  const plan = await readData('#planReadout');
  assert.deepEqual([plan.core, plan.halo, plan.tilesTotal, plan.tilesActive, plan.tilesSkipped], [C, 8, 18, 14, 4]);
  assert.match(await page.textContent('#planReadout'), /Tiles\s*18 total, 14 to run, 4 skipped/);
  const map = await readData('#tileCounts');
  assert.deepEqual(map, { total: 18, queued: 14, running: 0, done: 0, skipped: 4 });
  assert.equal(await page.textContent('#tileCounts'), '18 tiles: 0 done · 0 running · 14 queued · 4 skipped');
  assert.equal(await page.$eval('#tilemap', (c) => c.dataset.grid), '3,3,2', 'two layers of 3×3 tiles, not three');
  // The slice slider picks the layer from the plan's cores: z 23 is in layer 1, z 24 in layer 2.
  for (const [z, layer] of [[C - 1, '0'], [C, '1']]) {
    await page.$eval('#tileSlice', (e, v) => {
      e.value = String(v);
      e.dispatchEvent(new Event('input'));
    }, z);
    assert.equal(await page.$eval('#tilemap', (c) => c.dataset.layer), layer);
  }
  await page.locator('#runCard').screenshot({ path: path.join(ARTIFACTS, 'tilemap-plan.png') });
  await page.fill('#core', '32'); // the settings the next test started from
});

test('the phase networks: wrapped phase (3D, then 4D multi-echo with magnitude), TE, B0 → iQSM and iQFM, equal to the node API', { skip, timeout: 150000 }, async () => {
  const t0 = Date.now();
  const { writeNifti, readNifti } = await import('../bindings/js/index.js');
  const { lotNet } = await import('../tests/js/phase-networks.js');
  // A smooth phase ψ that wraps (the phase.test.js scene), a box mask and its erosion by 3 (the box shrunk by 3).
  const dims = [40, 36, 30];
  const [X, Y, Z] = dims;
  const n = X * Y * Z;
  const like = { dims, voxelMm: [1, 1, 1] };
  const lo = [6, 6, 5], hi = [X - 6, Y - 6, Z - 5];
  const inBox = (p, a, b) => p.every((v, i) => v >= a[i] && v < b[i]);
  const phaseOf = (scale) => {
    const out = new Float32Array(n);
    for (let z = 0, i = 0; z < Z; z++)
      for (let y = 0; y < Y; y++)
        for (let x = 0; x < X; x++, i++) {
          const psi = scale * (3.1 + 0.45 * Math.sin(0.21 * x) + 0.35 * Math.cos(0.17 * y + 0.29 * z) + 0.25 * Math.sin(0.13 * z));
          out[i] = Math.atan2(Math.sin(psi), Math.cos(psi));
        }
    return out;
  };
  const mask = new Uint8Array(n), eroded = new Uint8Array(n);
  for (let z = 0, i = 0; z < Z; z++)
    for (let y = 0; y < Y; y++)
      for (let x = 0; x < X; x++, i++) {
        mask[i] = inBox([x, y, z], lo, hi) ? 1 : 0;
        eroded[i] = inBox([x, y, z], lo.map((v) => v + 3), hi.map((v) => v - 3)) ? 1 : 0;
      }
  const echo1 = phaseOf(1), echo2 = phaseOf(1.5);
  const phase4d = new Float32Array(2 * n);
  phase4d.set(echo1);
  phase4d.set(echo2, n);
  const mag4d = Float32Array.from({ length: 2 * n }, (_, i) => 0.5 + ((i * 7919) % 97) / 97);
  const file = (name, buffer) => ({ name, mimeType: 'application/octet-stream', buffer: Buffer.from(buffer) });
  const files = {
    phase3d: file('phase3d.nii.gz', await writeNifti(echo1, like, { gzip: true })),
    phase4d: file('phase4d.nii', await nifti4d(phase4d, 2, like)),
    mag4d: file('mag4d.nii', await nifti4d(mag4d, 2, like)),
    mask: file('box_mask.nii.gz', await writeNifti(Float32Array.from(mask), like, { gzip: true })),
    degrees: file('phase_deg.nii.gz', await writeNifti(echo1.map((v) => (v * 180) / Math.PI), like, { gzip: true })),
  };
  // The node API on the same inputs: the reference the page must reproduce.
  const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  const t = await nodeApi();
  // A cube over the single-patch limit at iQFM's registered cost (with 20 % to spare), a multiple of 16.
  const cost = (await t.model('iqfm')).bytesPerVoxel;
  const bigEdge = 16 * Math.ceil(Math.cbrt((1.2 * (await t.limits()).maxPatchActivationBytes) / cost) / 16);
  const want3d = (await t.invert({ keepInputs: true, model: 'iqsm', phase: echo1, mask, geometry, te: 0.02, b0: 3, weights: lotNet() })).chi.data;
  const r4d = await t.invert({ keepInputs: true, model: 'iqfm', phase: phase4d, magnitude: mag4d, mask, geometry, te: [0.02, 0.03], b0: 3, weights: lotNet() });
  assert.equal(r4d.quantity, 'local-field');
  const want4d = r4d.chi.data;
  const compare = (got, want, what) => {
    let err = 0, inside = 0;
    for (let i = 0; i < n; i++) {
      err = Math.max(err, Math.abs(got[i] - want[i]));
      if (!eroded[i]) assert.equal(got[i], 0, `${what}: voxel ${i} outside the eroded mask`);
      else if (got[i] !== 0) inside++;
    }
    assert.ok(err <= 1e-5, `${what}: max |page − node| = ${err}`);
    assert.ok(inside > 0.9 * eroded.reduce((a, b) => a + b, 0), `${what}: nonzero inside the eroded mask (${inside})`);
    return err;
  };
  const seqNow = async () => (await readData('#inputInfo')).seq ?? 0;
  const runEnabled = () => page.waitForFunction(() => document.querySelector('#planReadout').dataset.feasible === 'true' && !document.querySelector('#run').disabled, null, { timeout: 15000 });
  const loadedAfter = (seq, timeout = 20000) =>
    page.waitForFunction((s) => Number(document.querySelector('#inputInfo').dataset.seq) > s && document.body.dataset.state === 'idle', seq, { timeout });

  // Selecting iQSM: the phase inputs replace the field map; the tile settings are off, with the reason.
  await page.selectOption('#model', 'iqsm');
  assert.equal(await page.isVisible('#phaseFile'), true);
  assert.equal(await page.isVisible('#fieldFile'), false);
  assert.equal(await page.isVisible('#te'), true);
  assert.equal(await page.isVisible('#b0'), true);
  assert.equal(await page.inputValue('#erode'), '3');
  assert.equal(await page.inputValue('#phaseSign'), '-1');
  assert.match(await page.textContent('#modelInfo'), /Inputs: wrapped phase.*brain mask \(eroded\), TE \(s\), B0 \(T\), border shell/);
  assert.match(await page.textContent('#tileNote'), /iQSM runs on the whole volume at once \(it cannot be tiled\): the tile settings, the quality target and the self-check do not apply/);
  for (const id of ['#core', '#halo', '#auto', '#whole', '#workers', '#quality', '#verify']) assert.equal(await page.isDisabled(id), true, `${id} is off`);
  await page.check('input[name=weightsSource][value=file]');
  await page.setInputFiles('#weightsFile', file('iqsm.onnx', lotNet()));
  // The 3D wrapped phase and a box mask through the file inputs (the magnitude of the field session is dropped).
  await page.check('input[name=maskSource][value=file]');
  await page.setInputFiles('#magFile', []);
  await page.setInputFiles('#maskFile', files.mask);
  let seq = await seqNow();
  await page.setInputFiles('#phaseFile', files.phase3d);
  await loadedAfter(seq);
  let input = await readData('#inputInfo');
  assert.equal(input.kind, 'phase');
  assert.deepEqual(input.dims, dims);
  assert.equal(input.echoes, 1);
  assert.equal(input.maskVoxels, mask.reduce((a, b) => a + b, 0));
  assert.ok(input.phaseRange[0] >= -3.1416 && input.phaseRange[1] <= 3.1416);
  assert.match(await page.textContent('#inputInfo'), /phase3d\.nii\.gz: 40×36×30 voxels .* 1 echo,/);
  // No TE yet, then a TE count that does not match the file: a clear message, Run disabled.
  assert.match(await page.textContent('#phaseMsg'), /Type the echo time TE in seconds, e\.g\. 0\.02/);
  assert.equal(await page.isDisabled('#run'), true);
  await page.fill('#te', '0.02, 0.03');
  await page.waitForSelector('#phaseMsg:not([hidden])');
  assert.match(await page.textContent('#phaseMsg'), /The phase holds 1 echo but 2 echo times were given: give one TE per echo, in seconds, comma-separated/);
  await page.waitForTimeout(300);
  assert.equal(await page.isDisabled('#run'), true);
  // TE in seconds, like the API and the CLI: a value above 1 s is refused as probably milliseconds.
  await page.fill('#te', '20');
  await page.waitForFunction(() => /probably milliseconds/.test(document.querySelector('#phaseMsg').textContent));
  assert.match(await page.textContent('#phaseMsg'), /TE 20 s is implausible for an echo time \(probably milliseconds\): give TE in seconds, not milliseconds \(20 ms = 0\.02: type 0\.02\)/);
  await page.waitForTimeout(300);
  assert.equal(await page.isDisabled('#run'), true);
  await page.fill('#te', '0.02');
  await page.fill('#b0', '3');
  await page.waitForSelector('#phaseMsg', { state: 'hidden' });
  await runEnabled();
  // The planner's whole-volume readout: the volume padded to 16, one network call.
  const readout = await page.textContent('#planReadout');
  assert.match(readout, /48×48×32 voxels \(whole volume, padded to a multiple of 16\)/);
  assert.match(readout, /Network calls\s*1 \(one per echo\)/);
  await page.click('#run');
  await waitState(['done', 'error'], 60000);
  let s = { state: await pageState(), error: await errorText(), report: await readData('#report') };
  assert.equal(s.state, 'done', s.error);
  assert.equal(s.report.quantity, 'chi');
  assert.equal(s.report.nonzeroOutside, 0);
  assert.match(await page.textContent('#report'), /TE 0\.02 s, B0 3 T, mask eroded by 3 voxels, phase sign −1/);
  assert.equal(await page.textContent('#capChi'), 'χ (ppm)');
  assert.equal(await page.textContent('#capField'), 'Wrapped phase (rad)');
  let [dl] = await Promise.all([page.waitForEvent('download', { timeout: 20000 }), page.click('#download')]);
  assert.equal(dl.suggestedFilename(), 'phase3d_chi.nii.gz');
  let out = readNifti(fs.readFileSync(await dl.path()));
  assert.deepEqual(out.dims, dims);
  const err3d = compare(out.data, want3d, 'iQSM, one echo');

  // A 4D phase with two echoes and a two-echo magnitude; the single TE no longer matches.
  seq = await seqNow();
  await page.setInputFiles('#phaseFile', files.phase4d);
  await page.waitForFunction((s) => Number(document.querySelector('#inputInfo').dataset.seq) > s && document.querySelector('#inputInfo').dataset.echoes === '2', seq, { timeout: 20000 });
  seq = await seqNow();
  await page.setInputFiles('#magFile', files.mag4d);
  await loadedAfter(seq);
  assert.equal((await readData('#inputInfo')).magnitude, true);
  assert.match(await page.textContent('#inputInfo'), /2 echoes,.*echoes combined with \(magnitude·TE\)² weights from mag4d\.nii/);
  await page.waitForSelector('#phaseMsg:not([hidden])');
  assert.match(await page.textContent('#phaseMsg'), /The phase holds 2 echoes but 1 echo time was given/);
  assert.equal(await page.isDisabled('#run'), true);
  // iQFM: the output is the local field, named so.
  await page.selectOption('#model', 'iqfm');
  assert.match(await page.textContent('#modelInfo'), /Output: local field \(ppm\)/);
  await page.fill('#te', '0.02, 0.03');
  await page.waitForSelector('#phaseMsg', { state: 'hidden' });
  await page.waitForFunction(() => document.querySelector('#planReadout').dataset.tilesTotal === '2', null, { timeout: 15000 });
  await runEnabled();
  await page.click('#run');
  await waitState(['done', 'error'], 60000);
  s = { state: await pageState(), error: await errorText(), report: await readData('#report') };
  assert.equal(s.state, 'done', s.error);
  assert.equal(s.report.quantity, 'local-field');
  assert.equal(s.report.tilesRun, 2);
  assert.equal(await page.textContent('#capChi'), 'Local field (ppm)');
  assert.match(await page.textContent('#download'), /Download local field/);
  assert.match(await page.textContent('#report'), /Local field in the mask/);
  [dl] = await Promise.all([page.waitForEvent('download', { timeout: 20000 }), page.click('#download')]);
  assert.equal(dl.suggestedFilename(), 'phase4d_localfield.nii.gz');
  out = readNifti(fs.readFileSync(await dl.path()));
  const err4d = compare(out.data, want4d, 'iQFM, two echoes');
  await page.screenshot({ path: path.join(ARTIFACTS, 'phase-done.png'), fullPage: true });

  // A phase in degrees is refused with what to do; choosing the units loads it.
  await page.setInputFiles('#magFile', []);
  await page.setInputFiles('#phaseFile', files.degrees);
  await page.waitForSelector('#error:not([hidden])', { timeout: 20000 });
  assert.match(await page.textContent('#error'), /The phase spans \[-?1\d\d\.?\d*, 1\d\d.*outside \[-π, π\].*looks like degrees: choose Phase units “degrees”/);
  assert.equal(await page.isDisabled('#run'), true);
  seq = await seqNow();
  await page.selectOption('#phaseUnits', 'deg');
  await loadedAfter(seq);
  assert.equal(await page.isHidden('#error'), true);
  assert.match(await page.textContent('#inputInfo'), /phase converted from degrees/);
  await page.selectOption('#phaseUnits', 'rad');

  // Too large for one patch: the planner's refusal and advice, Run disabled.
  const bigDims = [bigEdge, bigEdge, bigEdge];
  const bigLike = { dims: bigDims, voxelMm: [1, 1, 1] };
  const bigN = bigDims[0] * bigDims[1] * bigDims[2];
  await page.setInputFiles('#maskFile', file('big_mask.nii.gz', await writeNifti(new Float32Array(bigN).fill(1), bigLike, { gzip: true })));
  seq = await seqNow();
  await page.setInputFiles('#phaseFile', file('big_phase.nii.gz', await writeNifti(new Float32Array(bigN), bigLike, { gzip: true })));
  await page.waitForFunction((s) => Number(document.querySelector('#inputInfo').dataset.seq) > s, seq, { timeout: 30000 });
  await page.fill('#te', '0.02');
  await page.waitForSelector('#planAdvice:not([hidden])', { timeout: 20000 });
  assert.match(await page.textContent('#planAdvice'), /iQFM runs on the whole volume \(it cannot be tiled\).*crop the field of view/);
  assert.equal(await page.isDisabled('#run'), true);
  await page.fill('#te', '');

  // Back to a field network: the field input, the tile settings and χ as before.
  await page.selectOption('#model', 'demo');
  assert.equal(await page.isVisible('#fieldFile'), true);
  assert.equal(await page.isVisible('#te'), false);
  assert.equal((await readData('#inputInfo')).kind, 'field');
  await page.waitForFunction(() => document.querySelector('#planReadout').dataset.feasible === 'true' && document.querySelector('#planReadout').dataset.wholeVolume !== 'true', null, { timeout: 15000 });
  assert.equal(await page.isDisabled('#halo'), false);
  assert.equal(await page.isDisabled('#workers'), false);
  assert.equal(await page.isDisabled('#verify'), false);
  assert.equal(await page.isVisible('#tileNote'), false);
  console.log(`# phase networks: ${((Date.now() - t0) / 1000).toFixed(1)} s; page vs node max |Δ| ${err3d.toExponential(1)} (iQSM), ${err4d.toExponential(1)} (iQFM, 2 echoes)`);
});

test('the weights cache in Chromium: after a reload the demo network comes from the cache, not the server; Clear empties it', { skip }, async () => {
  const before = demoDownloads();
  assert.ok(before >= 1);
  await page.reload();
  await page.waitForFunction(() => document.body.dataset.state === 'idle' && document.querySelector('#cacheInfo').textContent !== '', null, { timeout: 60000 });
  assert.equal(await page.textContent('#cacheInfo'), 'cached: demo-unet.onnx');
  await page.click('#demo');
  // Past the weights: the network is starting (or running); then the run is not needed.
  await page.waitForFunction(() => /tiles · /.test(document.querySelector('#progressText').textContent), null, { timeout: 60000, polling: 50 });
  await page.click('#cancel');
  await waitState(['cancelled'], 5000);
  assert.equal(demoDownloads(), before, 'no download: the cached copy (sha256 checked) was used');
  await page.click('#clearCache');
  await page.waitForFunction(() => document.querySelector('#cacheInfo').textContent === 'cache empty', null, { timeout: 5000 });
  assert.equal(await cachedDemoSha(), null);
});

// ------------------------------------------------------------------------------------------------
// Faults in the browser: a reload and a tab close mid-run, and a soak of the package in a page. Each uses its own tab
// of the app; the package runs there through the page's import map (import('/bindings/js/index.js')), on the test
// networks (tests/js/networks.js) handed over as bytes. Workers are counted two ways: Chromium's own list of worker
// targets (CDP Target.getTargets, dedicated workers nested in workers included) and Playwright's worker 'close' events.

let browserCdp = null;
/** Worker targets alive in the whole browser (every tab, nested workers included). */
async function workerTargets() {
  browserCdp ??= await ctx.browser().newBrowserCDPSession();
  return (await browserCdp.send('Target.getTargets')).targetInfos.filter((t) => t.type === 'worker').length;
}
/** The worker targets' URLs (file names), sorted: what a count that differs is made of. */
async function workerNames() {
  browserCdp ??= await ctx.browser().newBrowserCDPSession();
  return (await browserCdp.send('Target.getTargets')).targetInfos.filter((t) => t.type === 'worker').map((t) => t.url.replace(/^.*\//, '')).sort().join(' ');
}
/** Polls until f() is true (10 s at most); returns its last value. */
async function until(f, ms = 10000) {
  const end = Date.now() + ms;
  let v = await f();
  while (!v && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 100));
    v = await f();
  }
  return v;
}
/** The worker-target count once it has held still for 1.5 s (a cancelled run elsewhere may still be closing workers). */
async function settledWorkerTargets(ms = 20000) {
  const end = Date.now() + ms;
  let last = await workerTargets();
  let since = Date.now();
  while (Date.now() < end && Date.now() - since < 1500) {
    await new Promise((r) => setTimeout(r, 100));
    const now = await workerTargets();
    if (now !== last) [last, since] = [now, Date.now()];
  }
  return last;
}
/** A new tab of the app, idle (its own runtime started). */
async function appTab() {
  const tab = await ctx.newPage();
  await tab.goto(`${srv.url}/web/?start=field`);
  await tab.waitForFunction(() => document.body.dataset.state === 'idle' && document.querySelector('#planReadout').dataset.feasible, null, { timeout: 60000 });
  return tab;
}
/** Starts a long tiled run of the package in `tab` (a U-Net over 64×64×48 in 8³ cores, 2 workers) and waits for 2 tiles. */
async function startLongRun(tab) {
  await tab.evaluate(async (net) => {
    const { createTessera } = await import('/bindings/js/index.js');
    const t = await createTessera({ workers: 2, threadsPerWorker: 1 });
    const dims = [64, 64, 48];
    const field = new Float32Array(dims[0] * dims[1] * dims[2]).map((_, i) => Math.sin(i));
    globalThis.longRun = { done: 0 };
    t.invert({ keepInputs: true, field, geometry: { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] }, spec: { divisor: 8, bytesPerVoxel: 1100 }, weights: new Uint8Array(net),
      tile: { core: 8, halo: 4 }, workers: 2, onProgress: (p) => (globalThis.longRun.done = p.done) }).catch(() => {});
  }, Array.from(unetNet()));
  await tab.waitForFunction(() => globalThis.longRun.done >= 2, null, { timeout: 90000, polling: 50 });
}
let unetBytes = null;
const unetNet = () => (unetBytes ??= networks.unet({ base: 4 }));
let networks = null;
before(async () => {
  networks = await import('../tests/js/networks.js');
});

test('reload mid-run: every worker of the old page closes (none orphaned), and the reloaded page plans and runs', { skip }, async () => {
  const tab = await appTab();
  const idle = await settledWorkerTargets(); // the main page's and this tab's app workers
  const idleNames = await workerNames();
  await startLongRun(tab);
  const old = tab.workers();
  assert.ok(old.some((w) => w.url().endsWith('/ort-worker.js')), 'ONNX Runtime workers run in the old page');
  assert.ok((await workerTargets()) > idle);
  let closed = 0;
  for (const w of old) w.once('close', () => closed++);
  await tab.reload();
  await tab.waitForFunction(() => document.body.dataset.state === 'idle' && document.querySelector('#planReadout').dataset.feasible === 'true', null, { timeout: 60000 });
  assert.ok(await until(() => closed === old.length), `${closed} of the old page's ${old.length} workers closed`);
  // The same workers as before the run; the main page's ONNX Runtime workers (a session Measure speed kept for its next
  // run) may have closed meanwhile, at the end of their idle time, and only those. An orphan of the old page is caught
  // above (every old worker closed).
  const asBefore = async () => {
    const now = (await workerNames()).split(' ');
    const left = idleNames.split(' ');
    for (const name of now) {
      const i = left.indexOf(name);
      if (i < 0) return false;
      left.splice(i, 1);
    }
    return left.every((name) => /^ort-/.test(name));
  };
  assert.ok(await until(asBefore, 30000), `${await workerTargets()} worker targets after the reload (${await workerNames()}), ${idle} in an idle tab (${idleNames})`);
  // The reloaded page runs: the package's χ equals the JS reference of the conv stack.
  const dims = [12, 10, 8];
  const n = dims[0] * dims[1] * dims[2];
  const field = Float32Array.from({ length: n }, (_, i) => Math.cos(i));
  const chi = await tab.evaluate(async ({ net, field, dims }) => {
    const { createTessera } = await import('/bindings/js/index.js');
    const t = await createTessera({ workers: 1 });
    try {
      const r = await t.invert({ keepInputs: true, field: new Float32Array(field), geometry: { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] }, spec: { divisor: 1, bytesPerVoxel: 1100 }, weights: new Uint8Array(net), whole: true });
      return Array.from(r.chi.data);
    } finally {
      await t.terminate();
    }
  }, { net: Array.from(networks.convStack({ layers: 2, seed: 8 })), field: Array.from(field), dims });
  // network layout [X,Y,Z] (z fastest) of the x-fastest volume
  const input = new Float32Array(n);
  for (let z = 0; z < dims[2]; z++) for (let y = 0; y < dims[1]; y++) for (let x = 0; x < dims[0]; x++) input[(x * dims[1] + y) * dims[2] + z] = field[x + dims[0] * (y + dims[1] * z)];
  const ref = networks.convStackReference(input, dims, { layers: 2, seed: 8 });
  let maxDiff = 0;
  for (let z = 0; z < dims[2]; z++) for (let y = 0; y < dims[1]; y++) for (let x = 0; x < dims[0]; x++) maxDiff = Math.max(maxDiff, Math.abs(chi[x + dims[0] * (y + dims[1] * z)] - ref[(x * dims[1] + y) * dims[2] + z]));
  assert.ok(maxDiff <= 1e-5, `max |χ − reference| ${maxDiff}`);
  await tab.close();
});

test('tab closed mid-run: all its workers close, the browser keeps only the other tabs\'', { skip }, async () => {
  const others = await settledWorkerTargets();
  const tab = await appTab();
  await startLongRun(tab);
  const mine = tab.workers();
  assert.ok((await workerTargets()) >= others + mine.length - 1, 'the tab\'s workers are listed');
  let closed = 0;
  for (const w of mine) w.once('close', () => closed++);
  await tab.close();
  assert.ok(await until(() => closed === mine.length), `${closed} of the closed tab's ${mine.length} workers closed`);
  assert.ok(await until(async () => (await workerTargets()) === others), `${await workerTargets()} worker targets after the tab closed, ${others} before it opened`);
});

test('soak in Chromium: 50 mixed runs of the package in one page (2 networks, 3 sizes, cancels): no leaked worker, flat module heap, χ bit-identical to a fresh runtime', { skip, timeout: 480000 }, async () => {
  // 50 runs as in the node soak (bindings/js/index.test.js); small volumes keep it to about a minute.
  const tab = await appTab();
  const kinds = [
    { dims: [20, 18, 14], spec: { divisor: 1, bytesPerVoxel: 1100 }, net: Array.from(networks.convStack({ layers: 2, seed: 6 })), tile: { core: 8, halo: 2 } },
    { dims: [32, 24, 24], spec: { divisor: 8, bytesPerVoxel: 1100 }, net: Array.from(unetNet()), tile: { core: 8, halo: 4 } },
    { dims: [16, 16, 16], spec: { divisor: 1, bytesPerVoxel: 1100 }, net: Array.from(networks.convStack({ layers: 1, seed: 7 })), whole: true },
  ];
  await tab.evaluate(async (kinds) => {
    const { createTessera } = await import('/bindings/js/index.js');
    const { pendingCalls } = await import('/bindings/js/debug.js');
    const args = (k) => {
      const n = k.dims[0] * k.dims[1] * k.dims[2];
      return { field: new Float32Array(n).map((_, i) => Math.sin(0.37 * i)), geometry: { dims: k.dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] },
        spec: k.spec, weights: new Uint8Array(k.net), tile: k.tile, whole: k.whole, workers: 1 };
    };
    const bytes = (a) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
    const same = (a, b) => a.length === b.length && bytes(a).every((v, i) => v === bytes(b)[i]);
    // references: each request on a fresh runtime
    const refs = [];
    for (const k of kinds) {
      const fresh = await createTessera({ workers: 1 });
      refs.push((await fresh.invert(args(k))).chi.data);
      await fresh.terminate();
    }
    const soak = await createTessera({ workers: 1, recycleHeapBytes: 24 * 2 ** 20 });
    globalThis.soak = {
      async run(kind, cancelAt) {
        const controller = new AbortController();
        const out = await soak.invert({ keepInputs: true, ...args(kinds[kind]), signal: controller.signal, onProgress: (p) => cancelAt >= 0 && p.done >= cancelAt && controller.abort() })
          .then((r) => ({ same: same(r.chi.data, refs[kind]) }), (e) => ({ error: `${e.name}: ${e.message}` }));
        const st = await soak.status();
        return { ...out, running: st.running, liveWorkers: st.liveWorkers, moduleHeapBytes: st.moduleHeapBytes, pending: pendingCalls(soak) };
      },
      end: () => soak.terminate(),
    };
  }, kinds);
  let seed = 20;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
  const tally = { completed: 0, cancelled: 0 };
  const heaps = [];
  let between = null;
  for (let i = 0; i < 50; i++) {
    const kind = Math.floor(rnd() * kinds.length);
    const cancelAt = rnd() < 0.25 ? Math.floor(rnd() * 3) : -1;
    const r = await tab.evaluate(({ kind, cancelAt }) => globalThis.soak.run(kind, cancelAt), { kind, cancelAt });
    const where = `run ${i} (kind ${kind}${cancelAt >= 0 ? `, cancelled at tile ${cancelAt}` : ''})`;
    if (r.error) {
      assert.ok(cancelAt >= 0 && r.error.startsWith('AbortError'), `${where}: ${r.error}`);
      tally.cancelled++;
    } else {
      assert.equal(r.same, true, `${where}: χ differs from a fresh runtime's`);
      tally.completed++;
    }
    assert.deepEqual([r.running, r.liveWorkers, r.pending], [0, 0, 0], `${where}: a run, worker or pending call left`);
    heaps.push(r.moduleHeapBytes);
    // Between runs the browser holds no more workers than before (the app's and the soak runtime's): none leaked.
    // (An earlier test's worker may still be closing after the first run: the count may fall, never rise.)
    const n = await until(async () => between === null || (await workerTargets()) <= between);
    assert.ok(n, `${where}: ${await workerTargets()} worker targets between runs, ${between} before`);
    between = Math.min(between ?? Infinity, await workerTargets());
  }
  assert.ok(tally.completed > 0 && tally.cancelled > 0, JSON.stringify(tally));
  assert.equal(heaps.at(-1), Math.max(...heaps.slice(0, 5)), `module heap: ${heaps.join(' ')}`);
  await tab.evaluate(() => globalThis.soak.end());
  await tab.close();
  console.log(`# Chromium soak: ${JSON.stringify(tally)}, module heap ${(heaps.at(-1) / 2 ** 20).toFixed(0)} MiB flat, ${between} worker targets between runs`);
});

test('no console error and no request to another origin during the whole session', { skip }, () => {
  assert.deepEqual(consoleErrors, []);
  assert.deepEqual(foreignRequests, []);
});
}
