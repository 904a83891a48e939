// bench/tile-speed.js in headless Chromium: seconds per 64³ tile at 1 and 2 ONNX Runtime Web threads, through the
// same WorkerPool (module Workers running bindings/js/runtime/ort-worker.js) and the same measureTileSpeed, on a page served
// cross-origin isolated (COOP/COEP, by scripts/serve.js's startServer) so SharedArrayBuffer and ORT threads work as
// in production. Prints the same table as tile-speed.js (median of `repeats` runs after one warm-up run).
//
// Usage:
//   node scripts/make_standins.js /tmp/standins        # once
//   node bench/browser-tile-speed.js [--onnx /tmp/standins/xqsm-standin.onnx] [--edge 64] [--threads 1,2]
//        [--repeats 3] [--rounds 1] [--warm-edge 0] [--rewrite] [--rewrite-ops OPS] [--chromium /usr/bin/chromium] [--json out.json]
// (Not with --no-experimental-fetch: playwright-core needs the global Headers.) Needs /usr/bin/chromium and
// playwright-core (devDependency).
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { launchChromium, benchPage } from '../scripts/chromium.js';
import { startServer } from '../scripts/serve.js';
import { summarizeTileSpeed, tileSpeedTable, progressLine, tileSpeedConfig, tileSpeedModel, tileSpeedModelName, TILE_SPEED_OPTIONS } from './tile-speed.js';

const { values: a } = parseArgs({ options: { ...TILE_SPEED_OPTIONS, chromium: { type: 'string', default: '/usr/bin/chromium' } } });
const cfg = tileSpeedConfig(a);

const PAGE = `<!doctype html><meta charset="utf-8"><title>tessera tile speed</title>
<script type="module">
import { WorkerPool } from '/bindings/js/runtime/pool.js';
import { measureTileSpeed } from '/bench/tile-speed.js';
window.__run = async (cfg) => {
  if (!crossOriginIsolated) throw new Error('the page is not cross-origin isolated');
  const model = new Uint8Array(await (await fetch('/__model.onnx')).arrayBuffer());
  const points = [];
  for (let r = 0; r < cfg.rounds; r++)
    for (const threads of cfg.threads) {
      const p = await measureTileSpeed({ WorkerPool, model, edge: cfg.edge, threads, repeats: cfg.repeats, warmEdge: cfg.warmEdge });
      points.push(p);
      await window.__progress(p);
    }
  return { points, userAgent: navigator.userAgent, hardwareConcurrency: navigator.hardwareConcurrency };
};
window.__ready = true;
</script>`;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-tilespeed-'));
const pageFile = path.join(tmp, 'page.html');
fs.writeFileSync(pageFile, PAGE);
const modelFile = path.join(tmp, 'model.onnx'); // the --onnx file as exported, or its rewrite (--rewrite)
fs.writeFileSync(modelFile, await tileSpeedModel(a));
const srv = await startServer({ overrides: { '/__tile-speed.html': pageFile, '/__model.onnx': modelFile } });
const userDir = path.join(tmp, 'profile');
const load = () => os.loadavg().map((x) => x.toFixed(2)).join(' ');
console.log(`browser tile speed, ${os.cpus()[0].model} × ${os.cpus().length}, ${tileSpeedModelName(a)}, edge ${cfg.edge}, threads ${cfg.threads.join(',')}, ` +
  `${cfg.repeats} repeats × ${cfg.rounds} round(s); load average ${load()}`);
const context = await launchChromium(userDir, a.chromium);
let result;
try {
  const page = await benchPage(context);
  await page.exposeFunction('__progress', (p) => console.log(progressLine(p, os.loadavg()[0].toFixed(2))));
  await page.goto(`${srv.url}/__tile-speed.html`);
  await page.waitForFunction(() => window.__ready === true);
  result = await page.evaluate((c) => window.__run(c), cfg);
} finally {
  await context.close();
  await srv.close();
  fs.rmSync(tmp, { recursive: true, force: true });
}
console.log(`browser: ${result.userAgent} (hardwareConcurrency ${result.hardwareConcurrency})`);
const s = summarizeTileSpeed(result.points);
console.log(tileSpeedTable(s));
console.log(`load average at end ${load()}`);
if (a.json) fs.writeFileSync(a.json, JSON.stringify({ runtime: 'chromium', userAgent: result.userAgent, loadavg: os.loadavg(), points: result.points, ...s }, null, 2));
