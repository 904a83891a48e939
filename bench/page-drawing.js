// What the page costs the machine around a run, by Chromium process: a first load, reloads, the network demo and the
// From-phase demo, each with the CPU seconds of the GPU process (where WebGL runs: SwiftShader, in software, on a
// machine without a GPU), the renderers (the page and its workers: the runs themselves) and the browser process, and
// the WebGL work the page asked for (contexts made, slices NiiVue computed into 3D textures, draw calls).
//
// Usage (Chromium needs node's fetch globals: no --no-experimental-fetch):
//   node bench/page-drawing.js [--reloads 2]
//
// Prints one table row per step. The CPU seconds are read from /proc/<pid>/stat of Chromium's processes (Linux).
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer } from '../scripts/serve.js';
import { launchChromium } from '../scripts/chromium.js';
import { loadavg } from './common.js';
import { countWebGl, webGlCounts } from '../tests/js/gl-counts.js';

const { values: a } = parseArgs({ options: { reloads: { type: 'string', default: '2' } } });

/** CPU seconds so far of Chromium's live processes, by type (gpu-process, renderer, browser, utility, zygote). */
function chromiumCpu() {
  const out = {};
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (!cmd.includes('chromium')) continue;
      const type = /--type=([a-z-]+)/.exec(cmd)?.[1] ?? 'browser';
      const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      out[type] = (out[type] ?? 0) + (Number(f[11]) + Number(f[12])) / 100; // utime + stime, in clock ticks of 1/100 s
    } catch {
      // a process that ended meanwhile
    }
  }
  return out;
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-page-drawing-'));
const srv = await startServer({ port: 0 });
const ctx = await launchChromium(path.join(tmp, 'profile'), '/usr/bin/chromium', { viewport: { width: 1280, height: 1000 } });
const page = ctx.pages()[0] ?? (await ctx.newPage());
await countWebGl(page);
const idle = () => page.waitForFunction(() => document.body.dataset.state === 'idle' && document.querySelector('#planReadout')?.dataset.feasible, null, { timeout: 120000 });
const settled = () => new Promise((r) => setTimeout(r, 2000)); // what the GPU process still does after the page says idle or done

console.log(`page drawing, Chromium ${ctx.browser()?.version() ?? ''}, ${os.cpus()[0].model} × ${os.cpus().length}; load ${loadavg()}`);
console.log('| step | seconds | GPU process CPU-s | renderers CPU-s | browser CPU-s | WebGL contexts | slices computed | draws |');
console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
/** The page's WebGL work so far, summed over its canvases: {contexts, slices, draws}. */
async function glTotals() {
  const c = await webGlCounts(page).catch(() => null);
  const sum = (t) => Object.values(t ?? {}).reduce((a, b) => a + b, 0);
  return { contexts: c?.contexts.length ?? 0, slices: sum(c?.slices), draws: sum(c?.draws) };
}
async function step(name, act) {
  const gl0 = await glTotals();
  const c0 = chromiumCpu();
  const t0 = performance.now();
  await act();
  const seconds = (performance.now() - t0) / 1000;
  await settled();
  const c1 = chromiumCpu();
  const gl1 = await glTotals();
  const d = (k) => ((c1[k] ?? 0) - (c0[k] ?? 0)).toFixed(2);
  // A load starts a new document: its counts start at 0.
  const g = (k) => gl1[k] - (/load/.test(name) ? 0 : gl0[k]);
  console.log(`| ${name} | ${seconds.toFixed(1)} | ${d('gpu-process')} | ${d('renderer')} | ${d('browser')} | ${g('contexts')} | ${g('slices')} | ${g('draws')} |`);
}
try {
  await step('first load, to idle', async () => {
    await page.goto(`${srv.url}/`);
    await idle();
  });
  for (let i = 0; i < Number(a.reloads); i++) {
    await step(`reload ${i + 1}, to idle`, async () => {
      await page.reload();
      await idle();
    });
  }
  const demo = async () => {
    await page.click('#demo');
    await page.waitForFunction(() => ['done', 'error'].includes(document.body.dataset.state), null, { timeout: 600000, polling: 200 });
    const state = await page.evaluate(() => document.body.dataset.state);
    if (state !== 'done') throw new Error(`the demo ended in ${state}: ${await page.textContent('#error')}`);
  };
  await page.selectOption('#startFrom', 'field');
  await page.selectOption('#inversion', 'network');
  await page.waitForFunction(() => document.querySelector('#planReadout').dataset.feasible, null, { timeout: 60000 });
  await step('the demo (demo U-Net, 128×128×96)', demo);
  await page.reload();
  await idle();
  await page.selectOption('#startFrom', 'pipeline');
  await page.selectOption('#inversion', 'rts');
  await page.waitForFunction(() => document.querySelector('#planReadout').dataset.pipeline === 'true', null, { timeout: 60000 });
  await step('From phase: the demo (phantom scan, RTS)', demo);
} finally {
  await ctx.close();
  await srv.close();
  fs.rmSync(tmp, { recursive: true, force: true });
}
