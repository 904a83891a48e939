// The background-removal study: every background removal (the pipeline schema's "background" choices, so a new one is
// studied as soon as the pipeline offers it) × inversion on varied phantom heads, to choose the pipeline's defaults.
//
// Each head is one run of the native worker build/native/tessera_background_study (bench/background_study.cpp):
// make_acquisition with head_variation(seed) (size, shape, asymmetry, skull, sinuses, mastoids, ear canals), the
// pipeline given the true brain mask (echo fit, then the background removal), each inversion on its local field and
// local mask. Native rather than the wasm API: the same C++ (the pipeline and methods the JS pipeline() runs), several
// times faster on the 2 shared cores, which is what lets six heads × every method run in minutes.
// Scores inside the pipeline's local_mask ∩ the true brain mask eroded by 5 voxels: local field r and demeaned NRMSE
// (%) against the true local field (the forward model of the brain's χ alone), χ r and demeaned NRMSE (%) against the
// brain's χ; seconds = pipeline up to the local field (echo fit + background removal) and the inversion's own.
//
// Command (the run reported):
//   cmake --build build/native -j2 --target tessera_background_study
//   node bench/background-study.js --json /tmp/background-study.json
// Options: [--heads h1,h2,...] [--backgrounds vsharp,pdf] (default: the schema's choices) [--methods rts,tv]
//          [--threads 2] [--bin build/native/tessera_background_study] [--json FILE]
import { parseArgs } from 'node:util';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';

// Seven heads: different variation seeds and noise seeds, voxel sizes (anisotropic ones too), one oblique slab (B0 30°
// off the volume's z in the y-z plane), SNR 40-200, 3-8 echoes, one at 160×192×144. A field of view smaller than a head
// shrinks the head uniformly to fit (phantom.h): the 0.8×0.8×1.2 mm head is a small one. h7 is a partial-coverage slab
// (AcquisitionOptions::slab): a 50 mm field of view along z cuts through a full-size head 10 mm above the brain's centre,
// so the brain mask is cut by the slab's top and bottom slices, as in a real slab acquisition.
const te = (n, first = 4, step = 4) => Array.from({ length: n }, (_, i) => first + i * step);
const HEADS = [
  { name: 'h1', dims: [96, 112, 80], voxel: [2, 2, 2], b0: [0, 0, 1], seed: 1, variation: 1, snr: 100, teMs: te(5) },
  { name: 'h2', dims: [112, 128, 80], voxel: [0.8, 0.8, 1.2], b0: [0, 0, 1], seed: 2, variation: 2, snr: 150, teMs: te(4, 5, 5) },
  { name: 'h3 oblique 30°', dims: [96, 112, 80], voxel: [2, 2, 2], b0: [0, 0.5, Math.sqrt(3) / 2], seed: 3, variation: 3, snr: 60, teMs: te(6, 3, 4) },
  { name: 'h4', dims: [112, 128, 96], voxel: [1.5, 1.5, 1.5], b0: [0, 0, 1], seed: 4, variation: 4, snr: 40, teMs: te(3, 5, 7) },
  { name: 'h5', dims: [96, 112, 72], voxel: [1.5, 1.5, 2.5], b0: [0, 0, 1], seed: 5, variation: 5, snr: 200, teMs: te(8, 3, 3) },
  { name: 'h6 160x192x144', dims: [160, 192, 144], voxel: [1, 1, 1], b0: [0, 0, 1], seed: 6, variation: 6, snr: 80, teMs: te(5) },
  { name: 'h7 slab 50mm', dims: [128, 144, 40], voxel: [1.5, 1.5, 1.25], b0: [0, 0, 1], seed: 7, variation: 7, snr: 80, teMs: te(4, 4, 5), slab: 10 },
];

const { values: args } = parseArgs({
  options: {
    heads: { type: 'string' },
    backgrounds: { type: 'string' },
    methods: { type: 'string', default: 'rts,tv' },
    threads: { type: 'string', default: '2' },
    bin: { type: 'string', default: 'build/native/tessera_background_study' },
    json: { type: 'string' },
  },
});
if (!fs.existsSync(args.bin)) {
  console.error(`${args.bin} not found: cmake --build build/native -j2 --target tessera_background_study`);
  process.exit(2);
}
const backgrounds = args.backgrounds ?? JSON.parse(execFileSync(args.bin, ['--list-backgrounds'], { encoding: 'utf8' })).join(',');
const heads = args.heads ? HEADS.filter((h) => args.heads.split(',').some((n) => h.name.split(' ')[0] === n)) : HEADS;
console.log(`backgrounds ${backgrounds} (the pipeline schema's choices unless --backgrounds), methods ${args.methods}, ` +
            `${args.threads} threads, load ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}`);

const results = [];
for (const h of heads) {
  const argv = ['--dims', ...h.dims.map(String), '--voxel', ...h.voxel.map(String), '--b0', ...h.b0.map(String),
                '--seed', String(h.seed), '--variation', String(h.variation), '--snr', String(h.snr),
                '--te-ms', h.teMs.join(','), '--backgrounds', backgrounds, '--methods', args.methods,
                '--erode', '5', '--mask', 'given', '--threads', args.threads, ...(h.slab === undefined ? [] : ['--slab', String(h.slab)])];
  console.error(`${h.name}: ${args.bin} ${argv.join(' ')}`);
  const t0 = performance.now();
  const out = execFileSync(args.bin, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 26 });
  const r = JSON.parse(out);
  r.name = h.name;
  r.teMs = h.teMs;
  r.wallSeconds = (performance.now() - t0) / 1000;
  results.push(r);
}

const f3 = (x) => x.toFixed(3);
const f1 = (x) => x.toFixed(1);
const pad = (s, n) => String(s).padEnd(n);
const lpad = (s, n) => String(s).padStart(n);
console.log('\nPer head (eval mask = local_mask ∩ brain mask eroded by 5 voxels; NRMSE demeaned, %):');
console.log(`${pad('head', 16)} ${pad('geometry', 28)} ${pad('SNR/echoes', 11)} ${pad('background', 10)} ${pad('inversion', 9)} ` +
            `${lpad('local r', 8)} ${lpad('local NRMSE', 11)} ${lpad('chi r', 7)} ${lpad('chi NRMSE', 9)} ${lpad('bg s', 7)} ${lpad('inv s', 7)}`);
for (const r of results) {
  const geom = `${r.dims.join('x')} ${r.voxelMm.join('x')}mm`;
  for (const run of r.runs) {
    console.log(`${pad(r.name, 16)} ${pad(geom, 28)} ${pad(`${r.snr}/${r.echoes}`, 11)} ${pad(run.background, 10)} ${pad(run.method, 9)} ` +
                `${lpad(f3(run.localR), 8)} ${lpad(f1(run.localNrmse), 11)} ${lpad(f3(run.chiR), 7)} ${lpad(f1(run.chiNrmse), 9)} ` +
                `${lpad(f1(run.backgroundSeconds), 7)} ${lpad(f1(run.methodSeconds), 7)}`);
  }
}

// Mean and worst case per background × inversion over the heads (worst: lowest r, highest NRMSE).
const summary = [];
const keys = [...new Set(results.flatMap((r) => r.runs.map((x) => `${x.background}+${x.method}`)))];
for (const key of keys) {
  const rows = results.flatMap((r) => r.runs.filter((x) => `${x.background}+${x.method}` === key));
  const mean = (f) => rows.reduce((s, x) => s + f(x), 0) / rows.length;
  const min = (f) => Math.min(...rows.map(f));
  const max = (f) => Math.max(...rows.map(f));
  summary.push({
    background: rows[0].background, method: rows[0].method, heads: rows.length,
    localR: { mean: mean((x) => x.localR), worst: min((x) => x.localR) },
    localNrmse: { mean: mean((x) => x.localNrmse), worst: max((x) => x.localNrmse) },
    chiR: { mean: mean((x) => x.chiR), worst: min((x) => x.chiR) },
    chiNrmse: { mean: mean((x) => x.chiNrmse), worst: max((x) => x.chiNrmse) },
    backgroundSeconds: { mean: mean((x) => x.backgroundSeconds), worst: max((x) => x.backgroundSeconds) },
    methodSeconds: { mean: mean((x) => x.methodSeconds), worst: max((x) => x.methodSeconds) },
  });
}
console.log('\nPer method over the heads: mean / worst');
console.log(`${pad('background', 10)} ${pad('inversion', 9)} ${lpad('heads', 5)} ${lpad('local r', 13)} ${lpad('local NRMSE', 13)} ` +
            `${lpad('chi r', 13)} ${lpad('chi NRMSE', 13)} ${lpad('bg s', 11)} ${lpad('inv s', 11)}`);
for (const s of summary) {
  const mw = (m, f) => `${f(m.mean)} / ${f(m.worst)}`;
  console.log(`${pad(s.background, 10)} ${pad(s.method, 9)} ${lpad(s.heads, 5)} ${lpad(mw(s.localR, f3), 13)} ` +
              `${lpad(mw(s.localNrmse, f1), 13)} ${lpad(mw(s.chiR, f3), 13)} ${lpad(mw(s.chiNrmse, f1), 13)} ` +
              `${lpad(mw(s.backgroundSeconds, f1), 11)} ${lpad(mw(s.methodSeconds, f1), 11)}`);
}

// The plausibility checks' quantities (tessera/common/input_checks.h, the pipeline's mask check) on each head: the
// total field's and each local field's 1st/99th percentiles (ppm), the shares of the mask each stage leaves out, the
// share of the true brain mask at or below the magnitude's tissue threshold.
console.log('\nPlausibility quantities per head (ppm: 1st / 99th percentile; shares in %):');
console.log(`${pad('head', 16)} ${lpad('total field', 17)} ${lpad('mask dark', 9)} ${lpad('fit left out', 12)}  per background: local field [p1, p99], left out`);
for (const r of results) {
  const first = r.runs[0];
  const perBg = r.runs.filter((x) => x.method === r.runs[0].method)
    .map((x) => `${x.background} [${x.localP1.toFixed(3)}, ${x.localP99.toFixed(3)}] ${(100 * x.backgroundLeftOut).toFixed(1)}`);
  console.log(`${pad(r.name, 16)} ${lpad(`[${first.totalP1.toFixed(2)}, ${first.totalP99.toFixed(2)}]`, 17)} ` +
              `${lpad((100 * r.maskDarkShare).toFixed(1), 9)} ${lpad((100 * first.fitLeftOut).toFixed(1), 12)}  ${perBg.join('; ')}`);
}
const warned = results.flatMap((r) => r.runs.filter((x) => x.method === r.runs[0].method && x.warnings.length)
  .map((x) => `${r.name} ${x.background}: ${x.warnings.join(' | ')}`));
if (warned.length) console.log(`\nWarnings:\n${warned.join('\n')}`);

if (args.json) {
  fs.writeFileSync(args.json, JSON.stringify({ backgrounds: backgrounds.split(','), methods: args.methods.split(','),
    threads: Number(args.threads), load: os.loadavg(), heads: results, summary }, null, 1));
  console.log(`\nwrote ${args.json}`);
}
