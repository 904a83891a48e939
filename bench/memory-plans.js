// Planned against measured module heap for every kind of run the C++ core plans: each classical method, the pipeline
// (multi-echo phase to χ) and the physics-loop networks run whole (stand-in weights). Each row runs in a fresh runtime
// (wasm memory never shrinks) and reads the module's heap after the run (report.memory.moduleHeapBytes: the wasm
// memory's size, its high-water), next to plan.moduleHeapBytes. Inputs come from a separate runtime.
// Iterative methods run a few iterations: their memory is all allocated before the first one ends.
// The physics loops run small convolution stacks of the networks' channels (tests/js/networks.js) unless --standins
// names the stand-ins' folder: the module heap holds the loop's volumes, not the network's activations (those live
// in the ONNX Runtime workers), so it is the same for any network of the same inputs and outputs.
// Usage: node --no-experimental-fetch bench/memory-plans.js [--dims 160,192,144] [--pipeline-dims 160,192,144;256,256,176]
//          [--echoes 4] [--pipeline-methods tkd,default,default+swi+r2star] [--only tkd,tv,pipeline,modl-qsm,...]
//          [--standins /tmp/standins] [--loop-dims 96,96,96] [--thread-counts 1,2,4,8] [--thread-methods tkd,tv]
//          [--thread-dims 128,128,96] [--json out.json]
// --thread-counts: TKD and TV (--thread-methods) again at each of these runtimes' thread counts (--only threads), on a
// smaller volume (--thread-dims): every thread beyond the first holds its stack in the module heap.
// --pipeline-methods: a method, or default (no method: the pipeline's default inversion), each with +swi / +r2star for
// the optional outputs.
// --standins: the stand-ins of `node scripts/make_standins.js /tmp/standins --only modl-qsm` (and --only lpcnn).
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import { createTessera } from '../bindings/js/index.js';
import { loadavg } from './common.js';
import { convStack } from '../tests/js/networks.js';

const { values: a } = parseArgs({
  options: {
    dims: { type: 'string', default: '160,192,144' },
    'pipeline-dims': { type: 'string', default: '160,192,144;256,256,176' },
    'loop-dims': { type: 'string', default: '96,96,96' },
    echoes: { type: 'string', default: '4' },
    'pipeline-methods': { type: 'string', default: 'tkd,default,default+swi+r2star' },
    only: { type: 'string' },
    standins: { type: 'string' },
    threads: { type: 'string', default: '2' },
    'thread-counts': { type: 'string', default: '1,2,4,8' },
    'thread-methods': { type: 'string', default: 'tkd,tv' },
    'thread-dims': { type: 'string', default: '128,128,96' },
    json: { type: 'string' },
  },
});
const parseDims = (s) => s.split(',').map(Number);
const only = a.only ? new Set(a.only.split(',')) : null;
const wanted = (k) => !only || only.has(k);
const mb = (b) => (b / 1e6).toFixed(1);
const threads = Number(a.threads);
const geom = (dims) => ({ dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] });

// A few iterations of each iterative method: what it allocates is allocated before its first iteration ends.
const SHORT = { tv: { maxIterations: 3 }, rts: { maxIterations: 2, lsmrIterations: 2 }, ilsqr: { maxIterations: 2 }, ndi: { maxIterations: 3 },
  medi: { maxIterations: 1, cgMaxIterations: 2 }, tfi: { maxIterations: 1, cgMaxIterations: 2 } };
const METHODS = ['tkd', 'tsvd', 'tikhonov', 'tv', 'rts', 'ilsqr', 'medi', 'ndi', 'tfi'];
const needsMagnitude = (m) => m === 'medi' || m === 'tfi';

const rows = [];
/** One row: fn(t) runs in a fresh runtime of `cores` threads and returns {plan, heap}. */
async function row(kind, dims, fn, cores = threads) {
  const t = await createTessera({ workers: 1, hardwareThreads: cores });
  try {
    const t0 = performance.now();
    const base = (await t.status()).moduleHeapBreakBytes;
    const { plan, heap, note } = await fn(t);
    const brk = (await t.status()).moduleHeapBreakBytes;
    const r = { kind, dims, threads: cores, planned: plan.moduleHeapBytes, measured: heap, base, brk, need: plan.needBytes, ratio: plan.moduleHeapBytes / heap, seconds: (performance.now() - t0) / 1000, note };
    rows.push(r);
    console.log(`${kind.padEnd(22)} ${dims.join('×').padEnd(12)} planned ${mb(r.planned).padStart(8)} MB  measured ${mb(r.measured).padStart(8)} MB  plan/measured ${r.ratio.toFixed(2)}  break ${brk ? mb(brk) : '-'} MB (startup ${base ? mb(base) : '-'})  (${r.seconds.toFixed(1)} s)${note ? `  ${note}` : ''}`);
  } catch (e) {
    rows.push({ kind, dims, error: e.message });
    console.log(`${kind.padEnd(22)} ${dims.join('×').padEnd(12)} failed: ${e.message}`);
  } finally {
    await t.terminate();
  }
}

console.log(`memory plans, node ${process.version}, ${os.cpus()[0].model} × ${os.cpus().length}, ${threads} thread(s); load average ${loadavg()}`);

const maker = await createTessera({ workers: 1 });
const mdims = parseDims(a.dims);
if (METHODS.some(wanted)) {
  const g = geom(mdims);
  const ph = await maker.phantom({ geometry: g, seed: 1 });
  const magnitude = new Float32Array(ph.mask.length).map((_, i) => (ph.mask[i] ? 1 : 0.2));
  for (const m of METHODS.filter(wanted)) {
    await row(m, mdims, async (t) => {
      const req = { geometry: g, field: ph.field, mask: ph.mask, method: m, ...(needsMagnitude(m) ? { magnitude } : {}), ...(SHORT[m] ? { [m]: SHORT[m] } : {}) };
      const plan = await t.plan(req);
      if (!plan.feasible) throw new Error(plan.message);
      const out = await t.invert({ keepInputs: true, ...req, plan });
      return { plan, heap: out.report.memory.moduleHeapBytes };
    });
  }
}

// The same methods in runtimes of 1, 2, 4, 8 threads: the plan counts the stacks of the threads beyond the first.
if (wanted('threads')) {
  const tdims = parseDims(a['thread-dims']);
  const g = geom(tdims);
  const ph = await maker.phantom({ geometry: g, seed: 1 });
  for (const m of a['thread-methods'].split(',')) {
    for (const cores of a['thread-counts'].split(',').map(Number)) {
      await row(`${m}, ${cores} thread${cores > 1 ? 's' : ''}`, tdims, async (t) => {
        const req = { geometry: g, field: ph.field, mask: ph.mask, method: m, ...(SHORT[m] ? { [m]: SHORT[m] } : {}) };
        const plan = await t.plan(req);
        if (!plan.feasible) throw new Error(plan.message);
        const out = await t.invert({ keepInputs: true, ...req, plan });
        return { plan, heap: out.report.memory.moduleHeapBytes };
      }, cores);
    }
  }
}

const echoes = Number(a.echoes);
const te = Array.from({ length: echoes }, (_, i) => 0.004 * (i + 1));
for (const pd of a['pipeline-dims'].split(';').map(parseDims)) {
  let scan;
  for (const entry of a['pipeline-methods'].split(',')) {
    const [name, ...also] = entry.split('+');
    if (!wanted('pipeline') && !wanted(`pipeline-${name}`)) continue;
    const g = geom(pd);
    scan ??= await maker.phantomScan({ geometry: g, te, seed: 1 });
    const method = name === 'default' ? undefined : name;
    // The default inversion (the plan names it) cut short as the methods are.
    const short = name === 'default' ? (await maker.plan({ geometry: g, te, b0: 3, pipeline: true })).method : name;
    await row(`pipeline ${echoes} echoes, ${name}${also.length ? ` + ${also.join(', ')}` : ''}`, pd, async (t) => {
      const req = { geometry: g, te, b0: 3, phase: scan.phase, magnitude: scan.magnitude, ...(method ? { method } : {}),
        ...(SHORT[short] ? { [short]: SHORT[short] } : {}), ...(also.length ? { also } : {}) };
      const plan = await t.plan({ ...req, pipeline: true });
      if (!plan.feasible) throw new Error(plan.message);
      const out = await t.pipeline({ keepInputs: true, ...req, plan });
      return { plan, heap: out.report.memory.moduleHeapBytes, note: `stages ${plan.stages.join(', ')}` };
    });
  }
}

const ldims = parseDims(a['loop-dims']);
for (const model of ['modl-qsm', 'lpcnn']) {
  if (!wanted(model)) continue;
  const channels = model === 'modl-qsm' ? 2 : 1; // MoDL-QSM's network takes and gives 2 channels, LPCNN's 1
  const file = a.standins && `${a.standins}/${model}-standin.onnx`;
  if (file && !fs.existsSync(file)) {
    console.log(`${model}: no stand-in at ${file} (node scripts/make_standins.js ${a.standins} --only ${model})`);
    continue;
  }
  const weights = file ? new Uint8Array(fs.readFileSync(file)) : convStack({ layers: 2, channels: 4, inChannels: channels, outChannels: channels, seed: 5 });
  const g = geom(ldims);
  const ph = await maker.phantom({ geometry: g, seed: 1 });
  await row(`${model} whole (${file ? 'stand-in' : 'small net'})`, ldims, async (t) => {
    const req = { geometry: g, field: ph.field, mask: ph.mask, model, weights, whole: true };
    const plan = await t.plan(req);
    if (!plan.feasible) throw new Error(plan.message);
    const out = await t.invert({ keepInputs: true, ...req, plan });
    return { plan, heap: out.report.memory.moduleHeapBytes };
  });
}
await maker.terminate();

console.log('\n| run | volume | planned module heap (MB) | measured (MB) | plan / measured |');
console.log('|---|---|---|---|---|');
for (const r of rows) {
  if (r.error) console.log(`| ${r.kind} | ${r.dims.join('×')} | failed: ${r.error} | | |`);
  else console.log(`| ${r.kind} | ${r.dims.join('×')} | ${mb(r.planned)} | ${mb(r.measured)} | ${r.ratio.toFixed(2)} |`);
}
console.log(`load average at end ${loadavg()}`);
if (a.json) fs.writeFileSync(a.json, JSON.stringify({ loadavg: os.loadavg(), rows }, null, 2));
