// The speed probe's timed runs, round by round, on a fresh runtime per trial: does a fresh worker's patch time settle
// after the untimed run, or does it still fall over the rounds (code being optimised), in node and in Chromium? The demo
// U-Net's probe sized to its default run on a phantom (the draft plan's voxelsRun), with `repeats` pairs fixed.
//
// --after run: each trial first runs the default inversion on another runtime and terminates it (as speed.js does before
// its probe: does a fresh worker run slowly while a large heap is being freed?), then waits --pause seconds; --after
// same: the run is the probing runtime's own (a page's one runtime, whose run's worker ends before the probe starts).
//
// Usage:
//   node bench/probe-runs.js [--dims 256,256,176] [--trials 3] [--repeats 6] [--runtimes node,chromium]
//        [--after none|run|same] [--pause 0]
// (Not with --no-experimental-fetch when Chromium runs: playwright-core needs the global Headers.)
//
// Prints one line per trial: the edges, the untimed run and each edge's timed runs (ms), the probe's seconds.
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTessera } from '../bindings/js/index.js';
import { launchChromium, benchPage } from '../scripts/chromium.js';
import { startServer } from '../scripts/serve.js';
import { loadavg } from './common.js';

const { values: a } = parseArgs({
  options: {
    dims: { type: 'string', default: '256,256,176' },
    trials: { type: 'string', default: '3' },
    repeats: { type: 'string', default: '6' },
    runtimes: { type: 'string', default: 'node,chromium' },
    after: { type: 'string', default: 'none' },
    pause: { type: 'string', default: '0' },
  },
});
if (!['none', 'run', 'same'].includes(a.after)) throw new Error(`--after: 'none', 'run' or 'same', got '${a.after}'`);
const job = { dims: a.dims.split(',').map(Number), repeats: Number(a.repeats), after: a.after, pause: Number(a.pause) };

/** One trial on a fresh runtime: the draft plan sizes the probe, which times `repeats` pairs. */
async function trial(create, weights, { dims, repeats, after, pause }) {
  const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  let before = 0;
  const sleep = (seconds) => new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  // The default inversion on runtime r (its worker ends with the run): its seconds.
  const runOn = async (r) => {
    const { field, mask } = await r.phantom({ geometry, seed: 1 });
    const t0 = performance.now();
    await r.invert({ keepInputs: true, field, mask, geometry, model: 'demo-unet', weights });
    return (performance.now() - t0) / 1000;
  };
  if (after === 'run') {
    const cold = await create({ workers: 2, hardwareThreads: 2, threadsPerWorker: 1 });
    try {
      before = await runOn(cold);
    } finally {
      await cold.terminate();
    }
  }
  if (pause > 0 && after !== 'same') await sleep(pause);
  const t = await create({ workers: 2, hardwareThreads: 2, threadsPerWorker: 1 });
  try {
    if (after === 'same') {
      before = await runOn(t);
      if (pause > 0) await sleep(pause);
    }
    const { mask } = await t.phantom({ geometry, seed: 1 });
    const draft = await t.plan({ geometry, mask, model: 'demo-unet' });
    const s = await t.measureSpeed({ weights, model: 'demo-unet', threads: draft.threadsPerWorker, repeats, runVoxels: draft.voxelsRun });
    return { edges: s.points.map((p) => p.edge), runs: s.runs, seconds: s.seconds, before };
  } finally {
    await t.terminate();
  }
}

const print = (runtime, i, r) => {
  const ms = (x) => x.map((v) => Math.round(v * 1000)).join(' ');
  console.log(`${runtime} trial ${i}: edges ${r.edges.join(', ')}; untimed ${Math.round(r.runs.untimed * 1000)} ms; ` +
    `smaller ${ms(r.runs.small)}; larger ${ms(r.runs.large)}; probe ${r.seconds.toFixed(2)} s${r.before ? `; after a ${r.before.toFixed(1)} s run, ${job.pause} s pause` : ''}; load ${loadavg()}`);
};

console.log(`probe runs, demo U-Net, ${job.dims.join('×')}, ${job.repeats} pairs, after ${job.after}, pause ${job.pause} s, node ${process.version}, ${os.cpus()[0].model} × ${os.cpus().length}`);
const runtimes = a.runtimes.split(',');
if (runtimes.includes('node')) {
  const weights = new Uint8Array(fs.readFileSync(new URL('../web/models/demo-unet.onnx', import.meta.url)));
  for (let i = 1; i <= Number(a.trials); i++) print('node', i, await trial(createTessera, weights, job));
}
if (runtimes.includes('chromium')) {
  const PAGE = `<!doctype html><meta charset="utf-8"><script type="module">
import { createTessera } from '/bindings/js/index.js';
${trial.toString()}
window.__run = async (job) => {
  const weights = new Uint8Array(await (await fetch('/web/models/demo-unet.onnx')).arrayBuffer());
  return trial(createTessera, weights, job);
};
window.__ready = true;
</script>`;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-probe-runs-'));
  fs.writeFileSync(path.join(tmp, 'page.html'), PAGE);
  const srv = await startServer({ overrides: { '/__probe.html': path.join(tmp, 'page.html') } });
  const context = await launchChromium(path.join(tmp, 'profile'));
  try {
    const page = await benchPage(context);
    await page.goto(`${srv.url}/__probe.html`);
    await page.waitForFunction(() => window.__ready === true);
    for (let i = 1; i <= Number(a.trials); i++) print('chromium', i, await page.evaluate((x) => window.__run(x), job));
  } finally {
    await context.close();
    await srv.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}
