// Speed of the product's default against the engines underneath, in one run on this machine (issue #12): for each
// network × phantom, native ONNX Runtime (onnxruntime-node, CPU EP, whole volume), ONNX Runtime Web on the whole volume
// through Tessera (invert({whole: true}), where it fits the single-patch limit) and Tessera with default settings
// (quality faithful: the planner chooses), with the fidelity of every Tessera result against the whole-volume χ (the
// native one: both engines agree to ~1e-6 ppm on these networks). Voxels per second = volume voxels / seconds of the
// run (native: session.run of the padded volume; Tessera: report.wallSeconds, gather, workers and scatter included,
// session creation not), and the wall time around invert() beside it.
//
// The Web half (bench/speed-web.js) runs in node and then in headless Chromium (playwright-core, /usr/bin/chromium, the
// page served cross-origin isolated by scripts/serve.js) on the same inputs, against the same native reference.
//
// Networks: demo (web/models/demo-unet.onnx at its registry cost), xqsm (the xQSM-shaped stand-in with random
// weights, scripts/make_standins.js, at the registry's xQSM cost) and deep (the QSMnet-shaped stand-in of
// scripts/standins.js: a 4-level U-Net of 5³ kernels, receptive field beyond ±60 voxels, at base 8 channels, run as a
// custom network declared at 1,100 B/voxel so that the whole volume does not fit; --deep-onnx: the same shape with
// other weights, e.g. the trained deep network of scripts/train_demo_net.md; --deep-context probe: its requests carry
// the context measured by receptiveField({probe: true}), as a user who measured it would pass).
//
// onnxruntime-node is NOT a dependency of the repository (see bench/native-ort.js):
//   mkdir -p /tmp/ortnode && cd /tmp/ortnode && npm init -y && npm install onnxruntime-node@1.30.0 --onnxruntime-node-install=skip
// Usage:
//   node scripts/make_standins.js /tmp/standins --only xqsm        # once, for --nets xqsm
//   node bench/speed.js [--nets demo,xqsm,deep] [--dims 160,160,128/256,256,176] [--threads 2] [--runtimes node,chromium]
//        [--ortnode /tmp/ortnode] [--standins /tmp/standins] [--chromium /usr/bin/chromium] [--json out.json]
//        [--deep-onnx deep-unet.onnx] [--deep-context probe]
// (Not with --no-experimental-fetch when Chromium runs: playwright-core needs the global Headers.)
// The estimate columns: the first estimate (a runtime that never measured the network: registry or default speed)
// against the cold default run's wall time; the speed probe sized to that run (plan({measureSpeed: true})) on a fresh
// runtime, its net cost (probe + the run after it, which takes the probe's worker, minus the cold run) and its
// estimate against the run after it.
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { createTessera } from '../bindings/js/index.js';
import { loadTesseraModule } from '../bindings/js/debug.js';
import { loadavg, readStandin, requireOrtNode, runNative, specOf, DEEP_SPEC, deepStandin } from './common.js';
import { webSpeed } from './speed-web.js';
import { launchChromium, benchPage } from '../scripts/chromium.js';
import { startServer } from '../scripts/serve.js';

const { values: a } = parseArgs({
  options: {
    nets: { type: 'string', default: 'demo,xqsm,deep' },
    dims: { type: 'string', default: '160,160,128/256,256,176' },
    threads: { type: 'string', default: '2' },
    ortnode: { type: 'string', default: '/tmp/ortnode' },
    standins: { type: 'string', default: '/tmp/standins' },
    runtimes: { type: 'string', default: 'node,chromium' },
    chromium: { type: 'string', default: '/usr/bin/chromium' },
    json: { type: 'string' },
    'deep-onnx': { type: 'string' },
    'deep-context': { type: 'string' },
  },
});
if (a['deep-context'] !== undefined && a['deep-context'] !== 'probe') {
  console.error(`--deep-context: 'probe' is the only context it measures, got '${a['deep-context']}'`);
  process.exit(2);
}
const ortNode = requireOrtNode(a.ortnode, createRequire, path);
const threads = Number(a.threads);
const M = await loadTesseraModule({ pthreadPoolSize: 2 });
// network: what the requests name ({model} or {spec}); native: the spec of the native run (no wasm budget there).
const registry = (model) => ({ network: { model }, native: specOf(M, model) });
const NETS = {
  demo: { ...registry('demo-unet'), weights: () => new Uint8Array(fs.readFileSync('web/models/demo-unet.onnx')) },
  xqsm: { ...registry('xqsm'), weights: () => readStandin(path.join(a.standins, 'xqsm-standin.onnx')) },
  deep: {
    network: { spec: DEEP_SPEC }, native: { ...DEEP_SPEC, bytesPerVoxel: 1 },
    weights: a['deep-onnx'] ? () => new Uint8Array(fs.readFileSync(a['deep-onnx'])) : deepStandin,
  },
};

// The Chromium page: the same webSpeed, with createTessera from the served package and the case's files.
const PAGE = `<!doctype html><meta charset="utf-8"><title>tessera speed</title>
<script type="module">
import { createTessera } from '/bindings/js/index.js';
import { webSpeed } from '/bench/speed-web.js';
const bytes = async (url) => new Uint8Array(await (await fetch(url)).arrayBuffer());
window.__run = async (c) => {
  if (!crossOriginIsolated) throw new Error('the page is not cross-origin isolated');
  const f = (what) => bytes('/__speed/' + c.id + '.' + what);
  const field = new Float32Array((await f('field')).buffer), reference = new Float32Array((await f('reference')).buffer);
  const geometry = { dims: c.dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  return webSpeed({ createTessera, geometry, field, mask: await f('mask'), network: c.network, weights: await f('weights'), reference, threads: c.threads });
};
window.__ready = true;
</script>`;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-speed-'));
const pageFile = path.join(tmp, 'page.html');
fs.writeFileSync(pageFile, PAGE);
const overrides = { '/__speed.html': pageFile };

const runtimes = a.runtimes.split(',');
const HEAD = '| network | phantom | runtime | native whole s (Mvox/s) | Web whole s (Mvox/s) | Tessera default: plan | voxels run ÷ volume | run s (wall s) | Mvox/s | ÷ native | ÷ Web whole | r / NRMSE vs whole | first estimate ÷ wall (speed) | probe s; probe + run − cold run, ÷ cold wall | probed estimate ÷ wall after it | worker / module heap ÷ plan |';
console.log(`speed, node ${process.version}, ${os.cpus()[0].model} × ${os.cpus().length}, ${threads} threads everywhere; load ${loadavg()}`);
console.log(HEAD);
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
const rows = [];
// Chromium runs after node, on the same inputs and reference, served from files (the page fetches them).
const cases = [];

/** The run's heaps against its plan (≤ 1: within the plan), as the runtime reports them. */
const heapVsPlan = (m) => [m?.workerHeapVsPlan, m?.moduleHeapVsPlan].map((x) => (Number.isFinite(x) ? x.toFixed(2) : '?')).join(' / ');

function printRow(row) {
  rows.push(row);
  const { net, dims, runtime, native, web } = row;
  const nvox = dims[0] * dims[1] * dims[2];
  const mv = (s) => (nvox / s / 1e6).toFixed(3);
  console.log(`| ${net} | ${dims.join('×')} | ${runtime} | ${native.toFixed(1)} (${mv(native)}) | ${web ? `${web.seconds.toFixed(1)} (${mv(web.seconds)})` : 'does not fit'} | ` +
    `${row.plan} | ${row.share.toFixed(2)} | ${row.tessera.toFixed(1)} (${row.wall.toFixed(1)}) | ${mv(row.tessera)} | ${(native / row.tessera).toFixed(2)} | ` +
    `${web ? (web.seconds / row.tessera).toFixed(2) : '-'} | ${row.r.toFixed(4)} / ${row.nrmse.toFixed(3)} | ${(row.estimated / row.wall).toFixed(2)} (${row.unprobedSource}) | ` +
    `${row.probe.toFixed(1)}; ${(row.probe + row.warmWall - row.wall).toFixed(1)} (${((row.probe + row.warmWall - row.wall) / row.wall).toFixed(3)}) | ` +
    `${(row.probedEstimate / row.warmWall).toFixed(2)} (${row.warmWall.toFixed(1)} s${row.warmStart ? '' : ', cold'}${row.probedPlan === row.plan ? '' : `; ${row.probedPlan}`}) | ${heapVsPlan(row.memory)} |`);
  // The probe's own runs, beside the table (stderr): each edge's timed runs in ms, the untimed first of the larger.
  const ms = (v) => v.map((x) => (1000 * x).toFixed(0)).join(' ');
  const [[small], [large]] = row.probePoints;
  console.error(`  probe ${net} ${dims.join('×')} ${runtime}: ${small}³ ${ms(row.probeRuns.small)} ms; ${large}³ ${ms(row.probeRuns.large)} ms (untimed ${ms([row.probeRuns.untimed])})`);
}

for (const net of a.nets.split(',')) {
  if (!NETS[net]) throw new Error(`unknown network '${net}' (known: ${Object.keys(NETS).join(', ')})`);
  const weights = NETS[net].weights();
  let { network } = NETS[net];
  if (net === 'deep' && a['deep-context'] === 'probe') {
    const t = await createTessera({ hardwareThreads: threads });
    const { probe } = await t.receptiveField({ weights, ...network, probe: true });
    await t.terminate();
    console.error(`  deep: measured context radius90 ${probe.radius90}, radius99 ${probe.radius99} (${probe.seconds.toFixed(0)} s), passed as the requests' context`);
    network = { ...network, context: { within: probe.within } };
  }
  for (const d of a.dims.split('/')) {
    const dims = d.split(',').map(Number);
    const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
    const { field, mask } = M.phantom(geometry, { seed: 1, threads: 2 });
    // A session per volume, released before the Web half: its arena holds the whole run's activations (≈ 18 GB for the
    // xQSM-shaped network on 256×256×176), which would otherwise sit beside the Web workers' heaps.
    const session = await ortNode.InferenceSession.create(weights, { executionProviders: ['cpu'], intraOpNumThreads: threads, interOpNumThreads: 1 });
    const native = await runNative(M, ortNode, session, geometry, field, mask, { spec: NETS[net].native, whole: true });
    await session.release();
    if (runtimes.includes('node')) {
      const w = await webSpeed({ createTessera, geometry, field, mask, network, weights, reference: native.chi, threads });
      printRow({ net, dims, runtime: 'node', native: native.seconds, ...w });
    }
    if (runtimes.includes('chromium')) {
      const id = `${net}-${dims.join('x')}`;
      for (const [what, data] of [['field', field], ['mask', mask], ['reference', native.chi], ['weights', weights]]) {
        fs.writeFileSync(path.join(tmp, `${id}.${what}`), data);
        overrides[`/__speed/${id}.${what}`] = path.join(tmp, `${id}.${what}`);
      }
      cases.push({ id, net, network, dims, native: native.seconds });
    }
  }
}

if (cases.length) {
  const srv = await startServer({ overrides });
  const context = await launchChromium(path.join(tmp, 'profile'), a.chromium);
  try {
    const page = await benchPage(context);
    await page.goto(`${srv.url}/__speed.html`);
    await page.waitForFunction(() => window.__ready === true);
    for (const c of cases) {
      const w = await page.evaluate((x) => window.__run(x), { ...c, threads });
      printRow({ ...c, runtime: 'chromium', ...w });
    }
  } finally {
    await context.close();
    await srv.close();
  }
}
fs.rmSync(tmp, { recursive: true, force: true });
console.log(`load at end ${loadavg()}`);
if (a.json) fs.writeFileSync(a.json, JSON.stringify({ threads, rows }, null, 1));
process.exit(0);
