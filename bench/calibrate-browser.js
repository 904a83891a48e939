// The memory calibration of bench/calibrate.js, in headless Chromium: the same WorkerPool (bindings/js/runtime/pool.js,
// module Workers running bindings/js/runtime/ort-worker.js) and the same measurePoint/summarize/recommend, on a page served
// cross-origin isolated (COOP same-origin + COEP require-corp + CORP same-origin) by scripts/serve.js, so SharedArrayBuffer and ORT threads work as in production.
//
// Usage:
//   node bench/calibrate-browser.js --onnx /tmp/standins/xqsm-standin.onnx \
//     --network xqsm-standin --edges 32,48,64 --repeats 2 --threads 2 [--runs 1] [--out bench/calibration.json]
// (Not with --no-experimental-fetch: playwright-core needs the global Headers.)
// Needs /usr/bin/chromium (apt-get install -y chromium) and playwright-core (devDependency).
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { startServer } from '../scripts/serve.js';
import { launchChromium, benchPage } from '../scripts/chromium.js';
import { summarize, recommend, table, mergeJson, METHOD } from './calibrate.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values: a } = parseArgs({
  options: {
    onnx: { type: 'string' },
    network: { type: 'string' },
    edges: { type: 'string', default: '32,48,64' },
    repeats: { type: 'string', default: '2' },
    threads: { type: 'string', default: '2' },
    runs: { type: 'string', default: '1' },
    'min-edge': { type: 'string', default: '64' },
    chromium: { type: 'string', default: '/usr/bin/chromium' },
    out: { type: 'string' },
    note: { type: 'string' },
    inputs: { type: 'string' },
    channels: { type: 'string', default: '1' },
  },
});
if (!a.onnx) {
  console.error('usage: node bench/calibrate-browser.js --onnx NET.onnx [--network NAME] ' +
    '[--edges 32,48,64] [--repeats 2] [--threads 2] [--runs 1] [--out bench/calibration.json] [--inputs phase,mask,te,b0,border] [--channels 2]');
  process.exit(2);
}
const modelFile = path.resolve(a.onnx);
const model = fs.readFileSync(modelFile);
const network = a.network ?? path.basename(modelFile, '.onnx');
const cfg = {
  edges: a.edges.split(',').map(Number),
  repeats: Number(a.repeats),
  threads: Number(a.threads),
  runs: Number(a.runs),
  inputRoles: a.inputs ? a.inputs.split(',') : undefined, // multi-input (phase) networks, as calibrate.js --inputs
  channels: Number(a.channels), // multi-channel networks (MoDL-QSM: 2), as calibrate.js --channels
};
if (!Number.isInteger(cfg.channels) || cfg.channels < 1) {
  console.error(`--channels must be a whole number of at least 1 (got '${a.channels}'); MoDL-QSM takes --channels 2`);
  process.exit(2);
}

const PAGE = `<!doctype html><meta charset="utf-8"><title>tessera calibration</title>
<script type="module">
import { WorkerPool } from '/bindings/js/runtime/pool.js';
import { measurePoint } from '/bench/calibrate.js';
window.__calibrate = async (cfg) => {
  if (!crossOriginIsolated) throw new Error('the page is not cross-origin isolated');
  const model = new Uint8Array(await (await fetch('/__model.onnx')).arrayBuffer());
  const points = [];
  for (let rep = 1; rep <= cfg.repeats; rep++)
    for (const edge of cfg.edges) {
      const p = { repeat: rep, ...(await measurePoint({ WorkerPool, model, edge, threads: cfg.threads, runs: cfg.runs, inputRoles: cfg.inputRoles, channels: cfg.channels })) };
      points.push(p);
      await window.__progress(p);
    }
  return { points, userAgent: navigator.userAgent, hardwareConcurrency: navigator.hardwareConcurrency, crossOriginIsolated };
};
window.__ready = true;
</script>`;

// The page and the model next to the repository, served cross-origin isolated by scripts/serve.js.
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-calib-'));
const pageFile = path.join(tmp, 'page.html');
fs.writeFileSync(pageFile, PAGE);
const srv = await startServer({ overrides: { '/__calibrate.html': pageFile, '/__model.onnx': modelFile } });
const base = srv.url;

const MB = (b) => (b / 1e6).toFixed(1);
const userDir = path.join(tmp, 'profile');
const context = await launchChromium(userDir, a.chromium);
const t0 = performance.now();
const loadStart = os.loadavg().map((l) => +l.toFixed(2));
let result;
try {
  const page = await benchPage(context);
  await page.exposeFunction('__progress', (p) =>
    console.log(`  repeat ${p.repeat} edge ${p.edge}: heap ${MB(p.heapBytes)} MB (after first run ${MB(p.firstRunHeapBytes)}), ` +
      `after session ${MB(p.afterSessionBytes)} MB, heap/vox ${(p.heapBytes / p.voxels).toFixed(1)} B, ` +
      `runs ${p.secondsPerRun.join('/')} s, session ${p.sessionSeconds} s`));
  await page.goto(`${base}/__calibrate.html`);
  await page.waitForFunction(() => window.__ready === true);
  const ua = await page.evaluate(() => navigator.userAgent);
  console.log(`${network} in Chromium (${ua}): ${modelFile} (${model.byteLength} B), ${cfg.threads} thread(s), ` +
    `edges ${cfg.edges.join(',')}, ${cfg.repeats} repeat(s), ${cfg.runs} run(s)/pool; load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  result = await page.evaluate((c) => window.__calibrate(c), cfg);
} finally {
  await context.close();
  await srv.close();
  fs.rmSync(tmp, { recursive: true, force: true });
}

const { points } = result;
const s = summarize(points);
const rec = recommend(s, points, { minEdge: Number(a['min-edge']) });
console.log(table(s));
console.log(`safe, per-voxel only (patches ≥ ${rec.minEdge}³, +${rec.margin * 100} %): ${rec.perVoxelOnly.bytesPerVoxel} B/voxel; ` +
  `with a fixed part: ${MB(rec.withFixed.fixedBytes)} MB + ${rec.withFixed.bytesPerVoxel} B/voxel; ` +
  `worst (heap−session)/voxel ${rec.worstIncrementPerVoxel}; total ${((performance.now() - t0) / 1000).toFixed(0)} s`);
const ortVersion = JSON.parse(fs.readFileSync(path.join(ROOT, 'node_modules/onnxruntime-web/package.json'), 'utf8')).version;
const entry = {
  network,
  runtime: 'chromium',
  method: `${METHOD} Headless Chromium page (crossOriginIsolated ${result.crossOriginIsolated}), module Workers.`,
  date: new Date().toISOString().slice(0, 10),
  machine: {
    cpu: os.cpus()[0].model,
    cores: os.cpus().length,
    os: `${os.type()} ${os.release()}`,
    browser: result.userAgent,
    hardwareConcurrency: result.hardwareConcurrency,
    onnxruntimeWeb: ortVersion,
    loadAverageStart: loadStart,
    loadAverageEnd: os.loadavg().map((l) => +l.toFixed(2)),
  },
  model: { file: path.basename(modelFile), bytes: model.byteLength, sha256: createHash('sha256').update(model).digest('hex') },
  threads: cfg.threads,
  inputs: cfg.inputRoles,
  channels: cfg.channels > 1 ? cfg.channels : undefined,
  runsPerPool: cfg.runs,
  repeats: cfg.repeats,
  note: a.note,
  points,
  ...s,
  recommendation: rec,
};
if (a.out) {
  await mergeJson(a.out, entry);
  console.log(`written to ${a.out}`);
}
