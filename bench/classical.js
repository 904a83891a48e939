// The classical dipole inversions (and the demo network) on the phantom head, natively and in wasm (node and headless
// Chromium), in one table: r, NRMSE and HFEN against the χ truth, seconds per runtime and thread count, wasm speed ÷
// native, the module heap ÷ its plan, and QSM.rs's published seconds for scale.
//
// Per dims: tessera_phantom writes the phantom head (make_acquisition, seed 1, no noise) as NIfTI: the LOCAL field
// (ppm; background removal is measured elsewhere), the brain mask, the brain χ truth, the 4D magnitude (echo 1 for
// MEDI). Native: build/.../tessera_methods_bench on the same phantom (in-process make_acquisition; --native-json FILE
// reuses a JSON it wrote); the demo network natively = onnxruntime-node (CPU EP) on the whole volume through Tessera's
// own plan (bench/common.js runNative), when installed. Wasm: bench/classical-web.js runOne, each run in a fresh
// runtime (createTessera({hardwareThreads: t}): the C++ loops and FFTs get t threads), in node at each --threads and in
// Chromium at --chromium-threads (the page served cross-origin isolated by scripts/serve.js, the volumes fetched).
// Fidelity: both maps demeaned inside the brain mask (the dipole kernel is blind to χ's mean); raw figures in --json.
//
// Usage:
//   node bench/classical.js [--dims 160,192,144/256,256,176] [--methods tkd,tsvd,tikhonov,tv,rts,ilsqr,ndi,medi,demo]
//        [--runtimes native,node,chromium] [--threads 1,2] [--chromium-threads 2] [--time-limit 600]
//        [--native-bin build/native/tessera_methods_bench] [--phantom-bin build/native/tessera_phantom]
//        [--native-json FILE[,FILE per dims]] [--ortnode /tmp/ortnode] [--chromium /usr/bin/chromium] [--json out.json]
// (Not with --no-experimental-fetch when Chromium runs: playwright-core needs the global Headers.)
import { parseArgs } from 'node:util';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { createTessera, readEchoes, readNifti } from '../bindings/js/index.js';
import { loadTesseraModule } from '../bindings/js/debug.js';
import { loadavg, runNative, specOf } from './common.js';
import { runOne, truthOf, score } from './classical-web.js';
import { launchChromium, benchPage } from '../scripts/chromium.js';
import { startServer } from '../scripts/serve.js';

const { values: a } = parseArgs({
  options: {
    dims: { type: 'string', default: '160,192,144/256,256,176' },
    methods: { type: 'string', default: 'tkd,tsvd,tikhonov,tv,rts,ilsqr,ndi,medi,demo' },
    runtimes: { type: 'string', default: 'native,node,chromium' },
    threads: { type: 'string', default: '1,2' },
    'chromium-threads': { type: 'string', default: '2' },
    'time-limit': { type: 'string', default: '600' },
    'native-bin': { type: 'string' },
    'phantom-bin': { type: 'string' },
    'native-json': { type: 'string' },
    ortnode: { type: 'string', default: '/tmp/ortnode' },
    chromium: { type: 'string', default: '/usr/bin/chromium' },
    json: { type: 'string' },
  },
});
const firstExisting = (...p) => p.find((x) => fs.existsSync(x)) ?? p[0];
const nativeBin = a['native-bin'] ?? firstExisting('build/native/tessera_methods_bench', 'build/h-bench/tessera_methods_bench');
const phantomBin = a['phantom-bin'] ?? firstExisting('build/native/tessera_phantom', 'build/h-bench/tessera_phantom');
const methods = a.methods.split(',');
const runtimes = a.runtimes.split(',');
const threads = a.threads.split(',').map(Number);
const chromiumThreads = a['chromium-threads'].split(',').map(Number);
const timeLimit = Number(a['time-limit']);
const nativeJson = a['native-json']?.split(',') ?? [];
// QSM.rs on the 2016 challenge head (its published figures; another CPU, another head).
const QSMRS = { tkd: 3, tv: 10, rts: 12, ilsqr: 66, ndi: 138 };
const demoWeights = new Uint8Array(fs.readFileSync('web/models/demo-unet.onnx'));
let ortNode = null;
try {
  ortNode = createRequire(path.join(path.resolve(a.ortnode), 'package.json'))('onnxruntime-node');
} catch {
  console.log(`(onnxruntime-node not under ${a.ortnode}: no native figure for the demo network)`);
}

const PAGE = `<!doctype html><meta charset="utf-8"><title>tessera classical</title>
<script type="module">
import { createTessera } from '/bindings/js/index.js';
import { runOne, truthOf } from '/bench/classical-web.js';
const bytes = async (url) => new Uint8Array(await (await fetch(url)).arrayBuffer());
let loaded = null;
window.__run = async (c) => {
  if (!crossOriginIsolated) throw new Error('the page is not cross-origin isolated');
  if (loaded?.id !== c.id) {
    const f = (what) => bytes('/__cls/' + c.id + '.' + what);
    const field = new Float32Array((await f('field')).buffer), chi = new Float32Array((await f('chi')).buffer);
    const magnitude = new Float32Array((await f('magnitude')).buffer), mask = await f('mask');
    loaded = { id: c.id, field, mask, magnitude, truth: truthOf(c.dims, chi, mask), weights: await bytes('/web/models/demo-unet.onnx') };
  }
  const geometry = { dims: c.dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  // Copies: a run may transfer its inputs to the runtime's worker.
  return runOne({ createTessera, geometry, field: loaded.field.slice(), mask: loaded.mask.slice(), magnitude: loaded.magnitude.slice(),
    method: c.method, weights: loaded.weights.slice(), threads: c.threads, truth: loaded.truth, timeLimit: c.timeLimit });
};
window.__ready = true;
</script>`;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-classical-'));
const pageFile = path.join(tmp, 'page.html');
fs.writeFileSync(pageFile, PAGE);
const overrides = { '/__cls.html': pageFile };
const results = []; // {dims, method, runtime, threads, ...}
const log = (s) => console.log(`  ${s}   [load ${loadavg()}]`);
const f = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : '?');

console.log(`classical, node ${process.version}, ${os.cpus()[0].model} × ${os.cpus().length}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB; load ${loadavg()}`);
const cases = [];
for (const [di, d] of a.dims.split('/').entries()) {
  const dims = d.split(',').map(Number);
  const id = dims.join('x');
  const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
  const file = (w) => path.join(tmp, `${id}.${w}.nii`);
  execFileSync(phantomBin, ['--dims', ...dims.map(String), '--voxel', '1', '1', '1', '--threads', '2', '--local-out', file('field'),
    '--chi-out', file('chi'), '--mask-out', file('mask'), '--magnitude-out', file('magnitude'), '--te-ms', '4,8,12,16,20']);
  const nii = (w) => readNifti(new Uint8Array(fs.readFileSync(file(w))));
  const n = dims[0] * dims[1] * dims[2];
  const field = Float32Array.from(nii('field').data), chi = Float32Array.from(nii('chi').data);
  const mask = Uint8Array.from(nii('mask').data), magnitude = readEchoes(new Uint8Array(fs.readFileSync(file('magnitude')))).data.slice(0, n);
  const truth = truthOf(dims, chi, mask);
  console.log(`phantom ${id}: ${(n / 1e6).toFixed(2)} M voxels, ${(mask.reduce((s, x) => s + x, 0) / 1e6).toFixed(2)} M in the brain mask`);

  if (runtimes.includes('native')) {
    const classical = methods.filter((m) => m !== 'demo');
    let nat;
    if (nativeJson[di]) nat = JSON.parse(fs.readFileSync(nativeJson[di], 'utf8'));
    else if (classical.length) {
      const out = path.join(tmp, `${id}.native.json`);
      execFileSync(nativeBin, ['--dims', dims.join(','), '--methods', classical.join(','), '--threads', threads.join(','),
        '--time-limit', String(timeLimit), '--json', out], { stdio: ['ignore', 'inherit', 'inherit'] });
      nat = JSON.parse(fs.readFileSync(out, 'utf8'));
    }
    for (const r of nat?.rows ?? []) if (classical.includes(r.method)) results.push({ dims: id, runtime: 'native', ...r });
    if (methods.includes('demo') && ortNode) {
      const M = await loadTesseraModule({ pthreadPoolSize: 2 });
      for (const t of threads) {
        const session = await ortNode.InferenceSession.create(demoWeights, { executionProviders: ['cpu'], intraOpNumThreads: t, interOpNumThreads: 1 });
        const nr = await runNative(M, ortNode, session, geometry, field, mask, { spec: specOf(M, 'demo-unet'), whole: true });
        await session.release();
        const row = { dims: id, runtime: 'native', method: 'demo', threads: t, seconds: nr.seconds, complete: true, ...score(nr.chi, truth) };
        results.push(row);
        log(`native demo ${t}t: ${f(row.seconds, 2)} s (session.run of the whole volume), r ${f(row.r, 4)}`);
      }
    }
  }
  if (runtimes.includes('node')) {
    for (const method of methods)
      for (const t of threads) {
        const r = await runOne({ createTessera, geometry, field: field.slice(), mask: mask.slice(), magnitude: magnitude.slice(), method,
          weights: demoWeights.slice(), threads: t, truth, timeLimit });
        results.push({ dims: id, runtime: 'node', method, threads: t, ...r });
        log(`node ${method} ${t}t: ${f(r.seconds, 2)} s${r.complete ? '' : ` projected (${r.steps} of ${r.planned} steps in ${f(r.wall)} s)`}, ` +
          `r ${f(r.r, 4)} NRMSE ${f(r.nrmse, 3)} HFEN ${f(r.hfen, 3)}, module heap ÷ plan ${f(r.memory?.moduleHeapVsPlan, 3)}` +
          (r.memory?.workerHeapVsPlan ? `, worker heap ÷ plan ${f(r.memory.workerHeapVsPlan, 3)}` : ''));
      }
  }
  if (runtimes.includes('chromium')) {
    for (const [what, data] of [['field', field], ['mask', mask], ['chi', chi], ['magnitude', magnitude]]) {
      fs.writeFileSync(path.join(tmp, `${id}.${what}`), data);
      overrides[`/__cls/${id}.${what}`] = path.join(tmp, `${id}.${what}`);
    }
    cases.push({ id, dims });
  }
}

if (cases.length) {
  const srv = await startServer({ overrides });
  const context = await launchChromium(path.join(tmp, 'profile'), a.chromium);
  try {
    const page = await benchPage(context);
    await page.goto(`${srv.url}/__cls.html`);
    await page.waitForFunction(() => window.__ready === true);
    for (const c of cases)
      for (const method of methods)
        for (const t of chromiumThreads) {
          const r = await page.evaluate((x) => window.__run(x), { ...c, method, threads: t, timeLimit });
          results.push({ dims: c.id, runtime: 'chromium', method, threads: t, ...r });
          log(`chromium ${method} ${t}t: ${f(r.seconds, 2)} s${r.complete ? '' : ` projected (${r.steps} of ${r.planned} steps)`}, ` +
            `r ${f(r.r, 4)}, module heap ÷ plan ${f(r.memory?.moduleHeapVsPlan, 3)}` + (r.memory?.workerHeapVsPlan ? `, worker heap ÷ plan ${f(r.memory.workerHeapVsPlan, 3)}` : ''));
        }
  } finally {
    await context.close();
    await srv.close();
  }
}

// The table: one row per dims × method; fidelity from the first complete run (native, else node, else Chromium); the
// largest |Δr| between runtimes beside it.
const pick = (id, m, rt, t) => results.filter((r) => r.dims === id && r.method === m && r.runtime === rt && r.threads === t);
const secs = (rows) => {
  if (!rows.length) return '-';
  const best = Math.min(...rows.map((r) => r.seconds));
  const done = rows.every((r) => r.complete);
  return `${f(best, best < 10 ? 2 : 1)}${done ? '' : '*'}`;
};
const min = (rows) => (rows.length ? Math.min(...rows.map((r) => r.seconds)) : NaN);
console.log(`\nload at end ${loadavg()}; seconds = best of the runs of that cell; * = projected from the steps done within ${timeLimit} s`);
console.log('| phantom | method | r | NRMSE | HFEN | native 1t / 2t s | node 1t / 2t s | Chromium 2t s | wasm ÷ native speed, 2t (node / Chromium) | module heap ÷ plan (node 1t / 2t / Chromium) | QSM.rs published s |');
console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const c of a.dims.split('/').map((d) => d.split(',').map(Number).join('x')))
  for (const m of methods) {
    const all = results.filter((r) => r.dims === c && r.method === m);
    const scored = ['native', 'node', 'chromium'].map((rt) => all.find((r) => r.runtime === rt && r.complete && Number.isFinite(r.r))).find(Boolean);
    const rs = all.filter((r) => r.complete && Number.isFinite(r.r)).map((r) => r.r);
    const dr = rs.length > 1 ? Math.max(...rs) - Math.min(...rs) : 0;
    const ct = chromiumThreads.at(-1);
    const n2 = min(pick(c, m, 'native', 2)), w2 = min(pick(c, m, 'node', 2)), c2 = min(pick(c, m, 'chromium', ct));
    const heap = (rows) => (rows.length ? Math.max(...rows.map((r) => r.memory?.moduleHeapVsPlan ?? NaN)) : NaN);
    const heaps = [heap(pick(c, m, 'node', 1)), heap(pick(c, m, 'node', 2)), heap(pick(c, m, 'chromium', ct))];
    const wheap = Math.max(...all.map((r) => r.memory?.workerHeapVsPlan ?? -1));
    console.log(`| ${c.replaceAll('x', '×')} | ${m} | ${f(scored?.r, 4)}${dr > 1e-3 ? ` (Δr ${dr.toFixed(3)} between runtimes)` : ''} | ${f(scored?.nrmse, 3)} | ${f(scored?.hfen, 3)} | ` +
      `${secs(pick(c, m, 'native', 1))} / ${secs(pick(c, m, 'native', 2))} | ${secs(pick(c, m, 'node', 1))} / ${secs(pick(c, m, 'node', 2))} | ` +
      `${secs(pick(c, m, 'chromium', ct))} | ${f(n2 / w2, 2)} / ${f(n2 / c2, 2)} | ${heaps.map((h) => f(h, 2)).join(' / ')}${wheap > 0 ? ` (worker ${f(wheap, 2)})` : ''} | ${QSMRS[m] ?? '-'} |`);
  }
if (a.json) fs.writeFileSync(a.json, JSON.stringify({ node: process.version, cpu: os.cpus()[0].model, cores: os.cpus().length, results }, null, 1));
fs.rmSync(tmp, { recursive: true, force: true });
process.exit(0);
