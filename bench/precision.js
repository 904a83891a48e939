// Issue #12's "Precision" lever: reduced-precision variants of a network (scripts/quantize.js) against the fp32 network,
// in ONNX Runtime Web (wasm, node), side by side in one run:
//   1. seconds per patch (plain onnxruntime-web session.run of a [1,1,P,P,P] field, 1 and 2 threads; each thread count
//      in its own node process, since ORT Web fixes its thread count when its wasm starts), variants alternating with
//      fp32 in every repeat (session created, one warm-up run, one timed run, released), native onnxruntime-node beside
//      them when it is installed;
//   2. the whole-volume χ of every variant through Tessera (invert({whole: true}), the variant's bytes as weights)
//      against the fp32 whole-volume χ on the phantom: Pearson r and NRMSE inside the mask, and the run's seconds
//      (where the whole volume does not fit the single-patch limit, Tessera's default plan, the same for all).
//
// Variants (scripts/quantize.js options):
//   int8-qdq      static QDQ, every Conv but the first and last, uint8 activations calibrated on phantom fields
//   int8-qdq-w32  the same, only Convs with ≥ 32 output channels (the layers where QLinearConv beats fp32 in ORT Web)
//   int8-qdq-all  static QDQ of every Conv
//   int8-dynamic  DynamicQuantizeLinear + ConvInteger
//   fp16          float16 weights and graph
// Calibration: --calib phantom fields of --calib-dims (96×96×80), seeds 1001…, never the evaluation phantom (seed 1);
// --calib-group G for a wide network (scripts/quantize.js).
//
// Usage (onnxruntime-node, optional, not a dependency: see bench/native-ort.js):
//   node scripts/make_standins.js /tmp/standins --only xqsm      # once, for --nets xqsm
//   node --no-experimental-fetch bench/precision.js [--nets demo,xqsm] [--variants int8-qdq,int8-qdq-w32,fp16]
//        [--patches 64,96] [--threads 1,2] [--repeats 3] [--dims 160,160,128] [--whole-threads 2] [--whole-repeats 2]
//        [--calib 4] [--calib-dims 96,96,80] [--calib-group G] [--out /tmp/precision] [--reuse] [--skip-patches] [--skip-whole]
//        [--ortnode /tmp/ortnode] [--standins /tmp/standins] [--json out.json]
//   --reuse takes the variants already in --out (same options, same bytes: the calibration is deterministic).
//   The whole-volume table also gives each run's worker heap high-water mark (a fresh Tessera per run): int8 variants
//   can need far more than fp32 (bench/RESULTS.md).
import { parseArgs } from 'node:util';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadavg, agreement } from './common.js';
import { quantize, calibrationInputs, randomField, loadOrt } from '../scripts/quantize.js';

const VARIANTS = {
  'int8-qdq': { mode: 'int8-qdq' },
  'int8-qdq-w32': { mode: 'int8-qdq', minOutChannels: 32 },
  'int8-qdq-all': { mode: 'int8-qdq', exclude: ['none'] },
  'int8-dynamic': { mode: 'int8-dynamic' },
  fp16: { mode: 'fp16' },
};

const { values: a } = parseArgs({
  options: {
    nets: { type: 'string', default: 'demo' },
    variants: { type: 'string', default: 'int8-qdq,int8-qdq-w32,fp16' },
    patches: { type: 'string', default: '64,96' },
    threads: { type: 'string', default: '1,2' },
    repeats: { type: 'string', default: '3' },
    dims: { type: 'string', default: '160,160,128' },
    'whole-threads': { type: 'string', default: '2' },
    'whole-repeats': { type: 'string', default: '2' },
    calib: { type: 'string', default: '4' },
    'calib-dims': { type: 'string', default: '96,96,80' },
    'calib-group': { type: 'string' },
    out: { type: 'string', default: path.join(os.tmpdir(), 'precision') },
    reuse: { type: 'boolean', default: false },
    'skip-patches': { type: 'boolean', default: false },
    'skip-whole': { type: 'boolean', default: false },
    ortnode: { type: 'string', default: '/tmp/ortnode' },
    standins: { type: 'string', default: '/tmp/standins' },
    json: { type: 'string' },
    child: { type: 'string' }, // internal: one thread count's patch timings, JSON job
  },
});

/** onnxruntime-node when installed under dir, else null (the native columns are then left out). */
function ortNodeOrNull(dir) {
  try {
    return createRequire(path.join(path.resolve(dir), 'package.json'))('onnxruntime-node');
  } catch {
    return null;
  }
}

const median = (x) => {
  const s = [...x].sort((p, q) => p - q), h = s.length >> 1;
  return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2;
};

// ------------------------------------------------------------------------------------------- child: patch speed

async function childPatchSpeed(job) {
  const ort = await loadOrt(job.threads);
  const ortNode = job.ortnode ? ortNodeOrNull(job.ortnode) : null;
  const P = job.patch;
  const { field } = randomField([P, P, P], 77); // content does not change a conv's cost; a field-like input anyway
  const dims = [1, 1, P, P, P];
  const res = Object.fromEntries(job.models.map((m) => [m.name, { web: [], native: [] }]));
  const loadStart = loadavg();
  for (let r = 0; r < job.repeats; r++) {
    const order = r % 2 ? [...job.models].reverse() : job.models;
    for (const m of order) {
      const bytes = new Uint8Array(fs.readFileSync(m.file));
      const s = await ort.InferenceSession.create(bytes, { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
      try {
        const x = new ort.Tensor('float32', field, dims);
        await s.run({ [s.inputNames[0]]: x }); // warm-up (the first run costs up to 2× a later one)
        const t0 = performance.now();
        await s.run({ [s.inputNames[0]]: x });
        res[m.name].web.push((performance.now() - t0) / 1000);
      } finally {
        await s.release();
      }
      if (ortNode) {
        const s2 = await ortNode.InferenceSession.create(bytes, { executionProviders: ['cpu'], intraOpNumThreads: job.threads, interOpNumThreads: 1, graphOptimizationLevel: 'all' });
        const x = new ortNode.Tensor('float32', field, dims);
        await s2.run({ [s2.inputNames[0]]: x });
        const t0 = performance.now();
        await s2.run({ [s2.inputNames[0]]: x });
        res[m.name].native.push((performance.now() - t0) / 1000);
        await s2.release?.();
      }
    }
  }
  process.stdout.write(JSON.stringify({ res, loadStart, loadEnd: loadavg() }) + '\n');
}

if (a.child) {
  await childPatchSpeed(JSON.parse(a.child));
  process.exit(0);
}

// --------------------------------------------------------------------------------------------------------- main

const { createTessera } = await import('../bindings/js/index.js');
const { loadTesseraModule } = await import('../bindings/js/debug.js');
const NETS = {
  demo: { model: 'demo-unet', file: 'web/models/demo-unet.onnx' },
  xqsm: { model: 'xqsm', file: path.join(a.standins, 'xqsm-standin.onnx') },
};
const variants = a.variants.split(',').filter(Boolean);
for (const v of variants) if (!VARIANTS[v]) throw new Error(`unknown variant '${v}' (known: ${Object.keys(VARIANTS).join(', ')})`);
const patches = a.patches.split(',').map(Number);
const threadList = a.threads.split(',').map(Number);
const repeats = Number(a.repeats);
const dims = a.dims.split(',').map(Number);
const wholeThreads = Number(a['whole-threads']);
const wholeRepeats = Number(a['whole-repeats']);
const haveNative = ortNodeOrNull(a.ortnode) !== null;
fs.mkdirSync(a.out, { recursive: true });
const M = await loadTesseraModule({ pthreadPoolSize: 2 });
const here = path.dirname(fileURLToPath(import.meta.url));
const results = { machine: `${os.cpus()[0].model} × ${os.cpus().length}`, node: process.version, nets: {} };

console.log(`precision, node ${process.version}, ${results.machine}; load ${loadavg()}; native ${haveNative ? a.ortnode : 'not installed (no native columns)'}`);

for (const net of a.nets.split(',')) {
  const { model, file } = NETS[net] ?? {};
  if (!model) throw new Error(`unknown net '${net}' (demo, xqsm)`);
  if (!fs.existsSync(file)) throw new Error(`${file} not found${net === 'xqsm' ? `: run  node scripts/make_standins.js ${a.standins} --only xqsm  first` : ''}`);
  const fp32 = new Uint8Array(fs.readFileSync(file));
  const R = (results.nets[net] = { variants: {}, patches: {}, whole: null });
  const files = [{ name: 'fp32', file: path.resolve(file) }];

  // 1. The variants.
  let calib = null;
  for (const v of variants) {
    const out = path.join(a.out, `${net}-${v}.onnx`);
    const opts = VARIANTS[v];
    if (!(a.reuse && fs.existsSync(out))) {
      if (opts.mode === 'int8-qdq' && !calib) {
        calib = await calibrationInputs({ count: Number(a.calib), source: 'phantom', dims: a['calib-dims'].split(',').map(Number), seed: 1001, M, normalization: M.model(model).normalization });
      }
      const t0 = performance.now();
      const { bytes, report } = await quantize(fp32, { ...opts, calib, threads: 2, calibGroup: a['calib-group'] ? Number(a['calib-group']) : Infinity });
      fs.writeFileSync(out, bytes);
      R.variants[v] = { bytes: bytes.byteLength, quantized: report.quantized?.length ?? 0, keptFp32: report.keptFp32?.map((k) => k.name) ?? [], seconds: (performance.now() - t0) / 1000 };
      console.log(`${net} ${v}: ${out}, ${bytes.byteLength} bytes (fp32 ${fp32.byteLength}), ${report.quantized ? `${report.quantized.length} Conv quantized, ${report.keptFp32.length} fp32` : `${report.initializers} f16 initializers`}; made in ${R.variants[v].seconds.toFixed(1)} s`);
    } else console.log(`${net} ${v}: reusing ${out}`);
    files.push({ name: v, file: out });
  }

  // 2. Seconds per patch, fp32 and variants alternating, per thread count in a fresh process.
  if (!a['skip-patches']) {
    console.log(`\n${net}: seconds per patch (median of ${repeats}; each a second run after a warm-up), ORT Web wasm${haveNative ? ' | native onnxruntime-node' : ''}`);
    const head = `| patch | threads | ${files.map((f) => `${f.name} Web s`).join(' | ')} | ${files.slice(1).map((f) => `fp32 ÷ ${f.name}`).join(' | ')}${haveNative ? ` | ${files.map((f) => `${f.name} native s`).join(' | ')} | native ÷ Web (fp32) | native fp32 ÷ best Web` : ''} | load |`;
    console.log(head);
    console.log(head.replace(/[^|]+/g, '---'));
    for (const P of patches) {
      for (const threads of threadList) {
        const job = { threads, patch: P, repeats, models: files, ortnode: haveNative ? a.ortnode : null };
        const r = spawnSync(process.execPath, ['--no-experimental-fetch', path.join(here, 'precision.js'), '--child', JSON.stringify(job)], { encoding: 'utf8', maxBuffer: 1 << 24 });
        if (r.status !== 0) throw new Error(`patch speed child (P ${P}, ${threads} threads) failed: ${r.stderr.slice(-2000)}`);
        const { res, loadStart, loadEnd } = JSON.parse(r.stdout.trim().split('\n').pop());
        const web = Object.fromEntries(files.map((f) => [f.name, median(res[f.name].web)]));
        const nat = haveNative ? Object.fromEntries(files.map((f) => [f.name, median(res[f.name].native)])) : null;
        R.patches[`${P}/${threads}`] = { res, web, native: nat, loadStart, loadEnd };
        const bestWeb = Math.min(...Object.values(web));
        console.log(`| ${P}³ | ${threads} | ${files.map((f) => web[f.name].toFixed(3)).join(' | ')} | ${files.slice(1).map((f) => (web.fp32 / web[f.name]).toFixed(2)).join(' | ')}` +
          (nat ? ` | ${files.map((f) => nat[f.name].toFixed(3)).join(' | ')} | ${(nat.fp32 / web.fp32).toFixed(2)} | ${(nat.fp32 / bestWeb).toFixed(2)}` : '') + ` | ${loadStart} → ${loadEnd} |`);
      }
    }
  }

  // 3. Whole-volume χ of each variant against fp32's, through Tessera, alternating; a fresh Tessera (worker) per run,
  //    so that the worker heap's high-water mark is the run's own.
  if (!a['skip-whole']) {
    const geometry = { dims, voxelMm: [1, 1, 1], b0Dir: [0, 0, 1] };
    const { field, mask } = M.phantom(geometry, { seed: 1, threads: 2 });
    const fresh = () => createTessera({ workers: 1, threadsPerWorker: wholeThreads, hardwareThreads: Math.max(2, wholeThreads) });
    const probe = await fresh();
    const whole = (await probe.plan({ geometry, mask, model, whole: true }).finally(() => probe.terminate())).feasible;
    const how = whole ? 'whole volume' : "Tessera's default plan (the whole volume does not fit)";
    console.log(`\n${net}: ${dims.join('×')} phantom (seed 1), ${how}, 1 worker × ${wholeThreads} threads, ${wholeRepeats} alternating repeats; load ${loadavg()}`);
    const runs = Object.fromEntries(files.map((f) => [f.name, { seconds: [], chi: null, heap: [] }]));
    for (let r = 0; r < wholeRepeats; r++) {
      const order = r % 2 ? [...files].reverse() : files;
      for (const f of order) {
        const weights = new Uint8Array(fs.readFileSync(f.file));
        const tessera = await fresh();
        let chi, report;
        try {
          ({ chi: { data: chi }, report } = await tessera.invert({ keepInputs: true, geometry, field, mask, model, weights, ...(whole ? { whole: true } : {}), threadsPerWorker: wholeThreads }));
        } catch (e) {
          // A variant may fail where fp32 runs (e.g. out of memory in the worker): a result to report, not a crash.
          runs[f.name].error = `${e.code ?? ''} ${e.message.split('\n')[0].slice(0, 300)}`.trim();
          console.log(`  ${f.name}: failed: ${runs[f.name].error}`);
          continue;
        } finally {
          await tessera.terminate();
        }
        runs[f.name].seconds.push(report.wallSeconds);
        runs[f.name].heap.push(Math.max(0, ...(report.memory?.workerHeapHighWater ?? [])));
        runs[f.name].chi ??= chi;
        runs[f.name].plan ??= report.plan.patchDims?.join('×');
      }
    }
    const ref = runs.fp32;
    R.whole = { how, dims, plan: ref.plan, load: loadavg(), rows: {} };
    if (!ref.chi) throw new Error(`the fp32 run failed: ${ref.error}`);
    const voxels = ref.plan.split('×').map(Number).reduce((x, y) => x * y);
    console.log(`patch ${ref.plan} (${voxels} voxels)`);
    console.log('| variant | run s (each repeat) | fp32 ÷ variant (medians) | worker heap GB (B/patch voxel) | r vs fp32 χ | NRMSE vs fp32 χ | max |Δ| ppm | faithful (r ≥ 0.99, NRMSE ≤ 0.10) |');
    console.log('|---|---|---:|---:|---:|---:|---:|---|');
    for (const f of files) {
      const x = runs[f.name];
      if (!x.chi) {
        R.whole.rows[f.name] = { error: x.error };
        console.log(`| ${f.name} | failed: ${x.error} | - | - | - | - | - | - |`);
        continue;
      }
      const g = agreement(x.chi, ref.chi, mask);
      let maxd = 0;
      for (let i = 0; i < mask.length; i++) if (mask[i]) maxd = Math.max(maxd, Math.abs(x.chi[i] - ref.chi[i]));
      const ratio = median(ref.seconds) / median(x.seconds);
      const heap = Math.max(...x.heap);
      R.whole.rows[f.name] = { seconds: x.seconds, ratio, heap, r: g.r, nrmse: g.nrmse, maxAbs: maxd };
      console.log(`| ${f.name} | ${x.seconds.map((s) => s.toFixed(1)).join(' / ')} | ${ratio.toFixed(2)} | ${(heap / 2 ** 30).toFixed(2)} (${(heap / voxels).toFixed(0)}) | ${g.r.toFixed(5)} | ` +
        `${g.nrmse.toFixed(4)} | ${maxd.toFixed(4)} | ${f.name === 'fp32' ? '-' : g.r >= 0.99 && g.nrmse <= 0.1 ? 'yes' : 'no'} |`);
    }
  }
}
console.log(`load at end ${loadavg()}`);
if (a.json) fs.writeFileSync(a.json, JSON.stringify(results, null, 1));
process.exit(0);
