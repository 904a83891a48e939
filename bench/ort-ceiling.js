// The engine's ceiling: ONNX Runtime Web (wasm, in node) against onnxruntime-node (CPU EP) on the same network and
// patch, in µs per patch voxel, and ONNX Runtime Web's session options on one patch. Every (engine, threads) runs in a
// child process of its own (ORT Web fixes its thread count at the first session); each patch is run `--repeats` times
// after one untimed run (the first run of a session costs 1.1-2× a later one in both engines), the best is kept.
// This is the measurement behind bench/RESULTS.md §16 ("the engine's ceiling", "session options").
//
// Usage:
//   node --no-experimental-fetch bench/ort-ceiling.js [--onnx web/models/demo-unet.onnx] [--patches 64,96,160x160x128]
//        [--threads 1,2] [--repeats 2] [--options] [--options-patch 128x144x112] [--ort-node /tmp/ortnode]
// --options also times the session options on --options-patch (Web, the highest thread count): the default, memory
// pattern off, CPU arena off, graph level 'extended', and freeDimensionOverrides naming the patch's axes (when the
// graph's input has named dimensions). onnxruntime-node: see bench/common.js requireOrtNode for its one-line install.
import { parseArgs } from 'node:util';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadavg, requireOrtNode } from './common.js';

const { values: a } = parseArgs({
  options: {
    onnx: { type: 'string', default: 'web/models/demo-unet.onnx' },
    patches: { type: 'string', default: '64,96,160x160x128' },
    threads: { type: 'string', default: '1,2' },
    repeats: { type: 'string', default: '2' },
    options: { type: 'boolean', default: false },
    'options-patch': { type: 'string', default: '128x144x112' },
    'ort-node': { type: 'string', default: '/tmp/ortnode' },
    child: { type: 'string' }, // internal: 'web' or 'native'
    'child-threads': { type: 'string' },
    'child-variants': { type: 'string' },
  },
});

/** '64' → [64, 64, 64]; '160x160x128' → [160, 160, 128] (x, y, z). */
function dimsOf(text) {
  const d = text.split('x').map(Number);
  const dims = d.length === 1 ? [d[0], d[0], d[0]] : d;
  if (dims.length !== 3 || dims.some((x) => !Number.isInteger(x) || x < 1)) throw new Error(`a patch is an edge (64) or X×Y×Z (160x160x128), got '${text}'`);
  return dims;
}

/** A deterministic input of a patch: values like a normalised field (no effect on speed, but no denormals). */
function inputOf(dims) {
  const n = dims[0] * dims[1] * dims[2];
  const x = new Float32Array(n);
  let s = 12345;
  for (let i = 0; i < n; i++) {
    s = (1103515245 * s + 12345) >>> 0;
    x[i] = (s / 2 ** 32 - 0.5) * 0.2;
  }
  return x;
}

// ---------------------------------------------------------------- child: one engine, one thread count
async function child() {
  const threads = Number(a['child-threads']);
  const repeats = Math.max(1, Number(a.repeats));
  const bytes = new Uint8Array(fs.readFileSync(a.onnx));
  let ort;
  let base;
  if (a.child === 'web') {
    ort = await import('onnxruntime-web');
    ort.env.wasm.numThreads = threads;
    base = { executionProviders: ['wasm'], graphOptimizationLevel: 'all' };
  } else {
    ort = requireOrtNode(a['ort-node'], createRequire, path);
    base = { executionProviders: ['cpu'], intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all' };
  }
  const variants = JSON.parse(a['child-variants']); // [{name, patch: [x,y,z], options}]
  const out = [];
  for (const v of variants) {
    const session = await ort.InferenceSession.create(bytes, { ...base, ...v.options });
    const [X, Y, Z] = v.patch;
    // The network layout Tessera feeds: [1, C, X, Y, Z], z fastest (tessera/tiling.h).
    const feed = { [session.inputNames[0]]: new ort.Tensor('float32', inputOf(v.patch), [1, 1, X, Y, Z]) };
    const times = [];
    for (let i = 0; i <= repeats; i++) {
      const t0 = performance.now();
      const r = await session.run(feed);
      times.push((performance.now() - t0) / 1000);
      for (const t of Object.values(r)) t.dispose?.();
    }
    await session.release?.();
    const best = Math.min(...times.slice(1));
    out.push({ name: v.name, patch: v.patch, first: times[0], best, usPerVoxel: (1e6 * best) / (X * Y * Z) });
  }
  process.stdout.write(JSON.stringify(out));
}

// ---------------------------------------------------------------- parent
function runChild(engine, threads, variants) {
  const args = ['--no-experimental-fetch', fileURLToPath(import.meta.url), '--child', engine, '--child-threads', String(threads),
    '--child-variants', JSON.stringify(variants), '--onnx', a.onnx, '--repeats', a.repeats, '--ort-node', a['ort-node']];
  return JSON.parse(execFileSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 1 << 24, stdio: ['ignore', 'pipe', 'inherit'] }));
}

/** The graph input's dimensions (names where the export gives them), read with onnxruntime-web's own parser. */
async function namedAxes() {
  const ort = await import('onnxruntime-web');
  ort.env.wasm.numThreads = 1;
  const s = await ort.InferenceSession.create(new Uint8Array(fs.readFileSync(a.onnx)), { executionProviders: ['wasm'] });
  const meta = s.inputMetadata?.[0];
  await s.release?.();
  return meta?.shape ?? null;
}

async function parent() {
  const patches = a.patches.split(',').map(dimsOf);
  const threads = a.threads.split(',').map(Number);
  const label = (d) => (d[0] === d[1] && d[1] === d[2] ? `${d[0]}³` : d.join('×'));
  console.log(`engine ceiling: ${a.onnx}, ${os.cpus()[0].model} × ${os.cpus().length}, node ${process.version}, best of ${a.repeats} after one untimed run; load ${loadavg()}`);
  const rows = [];
  for (const t of threads) {
    const variants = patches.map((p) => ({ name: 'default', patch: p, options: {} }));
    const web = runChild('web', t, variants);
    const native = runChild('native', t, variants);
    for (let i = 0; i < patches.length; i++) rows.push({ patch: label(patches[i]), threads: t, web: web[i], native: native[i] });
  }
  console.log('| patch | threads | Web µs/voxel | native µs/voxel | Web ÷ native speed |');
  console.log('|---|---:|---:|---:|---:|');
  for (const r of rows) {
    console.log(`| ${r.patch} | ${r.threads} | ${r.web.usPerVoxel.toFixed(2)} | ${r.native.usPerVoxel.toFixed(2)} | ${(r.native.usPerVoxel / r.web.usPerVoxel).toFixed(2)} |`);
  }
  console.log(`load ${loadavg()}`);
  if (!a.options) return;

  const p = dimsOf(a['options-patch']);
  const t = Math.max(...threads);
  const variants = [
    { name: 'default', patch: p, options: {} },
    { name: 'enableMemPattern: false', patch: p, options: { enableMemPattern: false } },
    { name: 'enableCpuMemArena: false', patch: p, options: { enableCpuMemArena: false } },
    { name: "graphOptimizationLevel: 'extended'", patch: p, options: { graphOptimizationLevel: 'extended' } },
  ];
  const shape = await namedAxes();
  if (shape && shape.slice(2).every((d) => typeof d === 'string')) {
    const names = shape.slice(2); // the axes of [1, C, X, Y, Z]
    variants.push({ name: `freeDimensionOverrides {${names.join(', ')}}`, patch: p, options: { freeDimensionOverrides: Object.fromEntries(names.map((n, i) => [n, p[i]])) } });
  } else {
    console.log(`(freeDimensionOverrides not timed: the graph's input dims are ${JSON.stringify(shape)}, not named)`);
  }
  // Twice, alternating order, so that a drift of the shared host shows as the spread of a row.
  const first = runChild('web', t, variants);
  const second = runChild('web', t, [...variants].reverse()).reverse();
  console.log(`\nsession options, ONNX Runtime Web, ${label(p)}, ${t} threads (first run / best of ${a.repeats}, twice):`);
  console.log('| option | run 1: first / best s | run 2: first / best s |');
  console.log('|---|---:|---:|');
  for (let i = 0; i < variants.length; i++) {
    const f = (r) => `${r.first.toFixed(2)} / ${r.best.toFixed(2)}`;
    console.log(`| ${variants[i].name} | ${f(first[i])} | ${f(second[i])} |`);
  }
  console.log(`load ${loadavg()}`);
}

if (a.child) await child();
else await parent();
