// Calibrate a network's memory per patch voxel in ONNX Runtime Web (wasm backend), through the same WorkerPool
// the runtime uses. For each (repeat, edge): a FRESH pool (1 worker, T threads) creates its session, the heap is
// read (afterSessionBytes: runtime + weights), `runs` patches of edge³ are run, the heap is read again
// (heapBytes: the high-water; wasm memory never shrinks). Then heap = fixed + perVoxel·edge³ is fitted by least
// squares, and the worst (heap − afterSession)/edge³ is reported per edge.
//
// Usage (node):
//   node --no-experimental-fetch bench/calibrate.js --onnx /tmp/standins/xqsm-standin.onnx --network xqsm-standin \
//     --edges 32,48,64,80,96 --repeats 3 --threads 1 [--runs 2] [--out bench/calibration.json] [--merge]
// Multi-input (phase) networks: --inputs phase,mask,te,b0,border (the registry's roles; further inputs are made up).
// Multi-channel networks: --channels 2 (MoDL-QSM: [1,2,e,e,e] in and out; the points' voxels stay e³).
// --merge adds the points to the existing entry of the same network/runtime/threads (same model sha256) and refits.
// bench/calibrate-browser.js runs the same measurement (measurePoint/summarize below) in headless Chromium.
//
// This module is also imported by the browser page of calibrate-browser.js: no node import at the top level.
// The quick product calibration (tessera.calibrate) against this study's figures: bench/calibrate-quick.js.

// The measurement itself is the product's (bindings/js/calibrate.js: tessera.calibrate, `tessera-qsm calibrate`): one
// point = a fresh pool, the heap after session creation and after the patches. This study runs more edges and repeats.
import { measurePoint } from '../bindings/js/calibrate.js';

export { patchInput, phaseExtras, measurePoint } from '../bindings/js/calibrate.js';

/** Least squares y = a + b·x: {a, b, r2}. */
export function fitLinear(xs, ys) {
  const n = xs.length;
  const mx = xs.reduce((s, v) => s + v, 0) / n;
  const my = ys.reduce((s, v) => s + v, 0) / n;
  let sxx = 0, sxy = 0, syy = 0;
  for (let i = 0; i < n; i++) {
    sxx += (xs[i] - mx) ** 2;
    sxy += (xs[i] - mx) * (ys[i] - my);
    syy += (ys[i] - my) ** 2;
  }
  const b = sxy / sxx;
  const a = my - b * mx;
  let sse = 0;
  for (let i = 0; i < n; i++) sse += (ys[i] - a - b * xs[i]) ** 2;
  return { a, b, r2: syy > 0 ? 1 - sse / syy : 1 };
}

const mean = (v) => v.reduce((s, x) => s + x, 0) / v.length;
const sd = (v) => (v.length < 2 ? 0 : Math.sqrt(v.reduce((s, x) => s + (x - mean(v)) ** 2, 0) / (v.length - 1)));

/**
 * Fit and spread of a set of points (each with .repeat): overall fit, fit per repeat, per-edge statistics and the
 * worst (heap − afterSession)/voxels, i.e. what a per-voxel-only budget must cover at that edge.
 */
export function summarize(points) {
  const f = fitLinear(points.map((p) => p.voxels), points.map((p) => p.heapBytes));
  const fitsPerRepeat = [];
  for (const rep of [...new Set(points.map((p) => p.repeat))]) {
    const ps = points.filter((p) => p.repeat === rep);
    if (new Set(ps.map((p) => p.edge)).size < 2) continue;
    const g = fitLinear(ps.map((p) => p.voxels), ps.map((p) => p.heapBytes));
    fitsPerRepeat.push({ repeat: rep, fixedBytes: Math.round(g.a), bytesPerVoxel: +g.b.toFixed(1), r2: +g.r2.toFixed(5) });
  }
  const perEdge = [];
  for (const edge of [...new Set(points.map((p) => p.edge))].sort((a, b) => a - b)) {
    const ps = points.filter((p) => p.edge === edge);
    const heaps = ps.map((p) => p.heapBytes);
    const excess = ps.map((p) => (p.heapBytes - p.afterSessionBytes) / p.voxels);
    perEdge.push({
      edge,
      n: ps.length,
      heapMinBytes: Math.min(...heaps),
      heapMaxBytes: Math.max(...heaps),
      heapMeanBytes: Math.round(mean(heaps)),
      heapSdBytes: Math.round(sd(heaps)),
      afterSessionMaxBytes: Math.max(...ps.map((p) => p.afterSessionBytes)),
      worstHeapPerVoxel: +Math.max(...ps.map((p) => p.heapBytes / p.voxels)).toFixed(1),
      worstExcessPerVoxel: +Math.max(...excess).toFixed(1),
      bestExcessPerVoxel: +Math.min(...excess).toFixed(1),
      fitResidualMaxBytes: Math.round(Math.max(...heaps.map((h) => h - (f.a + f.b * edge ** 3)))),
      secondsMean: +mean(ps.map((p) => p.seconds)).toFixed(2),
      heapGrewAfterFirstRun: ps.some((p) => p.heapBytes > p.firstRunHeapBytes),
    });
  }
  const slopes = fitsPerRepeat.map((g) => g.bytesPerVoxel);
  // Points whose run grew the heap past its after-session size: below that, activations fit in heap that session
  // creation freed and the heap is flat (QSMnet-shaped up to 96³), which would drag a straight-line fit down.
  const growing = points.filter((p) => p.heapBytes > p.afterSessionBytes);
  let fitGrowing = null;
  if (new Set(growing.map((p) => p.edge)).size >= 2) {
    const g = fitLinear(growing.map((p) => p.voxels), growing.map((p) => p.heapBytes));
    fitGrowing = { fixedBytes: Math.round(g.a), bytesPerVoxel: +g.b.toFixed(1), r2: +g.r2.toFixed(5), edges: [...new Set(growing.map((p) => p.edge))] };
  }
  return {
    fit: { fixedBytes: Math.round(f.a), bytesPerVoxel: +f.b.toFixed(1), r2: +f.r2.toFixed(5) },
    fitGrowing,
    fitsPerRepeat,
    spread: {
      bytesPerVoxelMin: slopes.length ? Math.min(...slopes) : null,
      bytesPerVoxelMax: slopes.length ? Math.max(...slopes) : null,
      afterSessionMinBytes: Math.min(...points.map((p) => p.afterSessionBytes)),
      afterSessionMaxBytes: Math.max(...points.map((p) => p.afterSessionBytes)),
      perEdge,
    },
  };
}

const MB = (b) => (b / 1e6).toFixed(1);

/** Human-readable table of a summarize() result (one line per edge). */
export function table(s) {
  const lines = [];
  lines.push(' edge    voxels  n  heap min–max (MB)   sd (MB)  after session (MB)  worst heap/vox  worst (heap−session)/vox  fit resid (MB)  s/run');
  for (const e of s.spread.perEdge) {
    lines.push(
      `${String(e.edge).padStart(5)} ${String(e.edge ** 3).padStart(9)} ${String(e.n).padStart(2)}  ` +
        `${`${MB(e.heapMinBytes)}–${MB(e.heapMaxBytes)}`.padStart(17)}  ${MB(e.heapSdBytes).padStart(8)}  ` +
        `${MB(e.afterSessionMaxBytes).padStart(18)}  ${e.worstHeapPerVoxel.toFixed(1).padStart(14)}  ${e.worstExcessPerVoxel.toFixed(1).padStart(24)}  ` +
        `${MB(e.fitResidualMaxBytes).padStart(14)}  ${e.secondsMean.toFixed(2).padStart(5)}`,
    );
  }
  const f = s.fit;
  lines.push(`fit: heap = ${MB(f.fixedBytes)} MB + ${f.bytesPerVoxel} B × edge³   (r² ${f.r2})`);
  const g = s.fitGrowing;
  if (g) lines.push(`fit over the points that grew the heap (edges ${g.edges.join(',')}): ${MB(g.fixedBytes)} MB + ${g.bytesPerVoxel} B × edge³ (r² ${g.r2})`);
  if (s.fitsPerRepeat.length)
    lines.push(
      `per repeat: ${s.fitsPerRepeat.map((g) => `${MB(g.fixedBytes)} MB + ${g.bytesPerVoxel} B/vox (r² ${g.r2})`).join('; ')}`,
    );
  return lines.join('\n');
}

/**
 * Safe figures for the planner, from the measured points.
 *  - perVoxelOnly: for a budget of bytes_per_voxel × edge³ with NOTHING else counted (today's planner): the worst
 *    heap/voxels at edges ≥ minEdge, + margin, rounded up to 10 B. Largest at the smallest patch (the per-worker
 *    runtime + weights are spread over fewer voxels), so it is safe for patches of at least minEdge³ only.
 *  - withFixed: for a budget of fixedBytes + bytes_per_voxel × edge³ per worker: bytes_per_voxel = fitted slope +
 *    margin (rounded up to 10 B), fixedBytes = the smallest value (rounded up to 1 MiB) that puts every measured
 *    point, at every edge, under the line. Safe at all measured edges.
 *  - worstIncrementPerVoxel: the worst (heap − afterSession)/voxels at edges ≥ minEdge, for comparison (NOT safe:
 *    activations reuse heap that session creation freed, e.g. the copy of the model bytes).
 */
export function recommend(s, points, { minEdge = 64, margin = 0.1 } = {}) {
  const used = points.filter((p) => p.edge >= minEdge);
  const basis = used.length ? used : points.filter((p) => p.edge === Math.max(...points.map((q) => q.edge)));
  const ceil10 = (v) => Math.ceil(v / 10) * 10;
  const worstTotal = Math.max(...basis.map((p) => p.heapBytes / p.voxels));
  const slope = s.fitGrowing ? s.fitGrowing.bytesPerVoxel : s.fit.bytesPerVoxel;
  const bpv = ceil10(slope * (1 + margin));
  const fixed = Math.max(0, ...points.map((p) => p.heapBytes - bpv * p.voxels));
  return {
    minEdge,
    margin,
    fittedBytesPerVoxel: slope,
    perVoxelOnly: { bytesPerVoxel: ceil10(worstTotal * (1 + margin)), worstHeapPerVoxel: +worstTotal.toFixed(1), validFromEdge: minEdge },
    withFixed: { bytesPerVoxel: bpv, fixedBytes: Math.ceil(fixed / 1048576) * 1048576 },
    worstIncrementPerVoxel: +Math.max(...basis.map((p) => (p.heapBytes - p.afterSessionBytes) / p.voxels)).toFixed(1),
    afterSessionMaxBytes: s.spread.afterSessionMaxBytes,
  };
}

/** Merge one entry into calibration.json (keyed by network + runtime + threads). */
export async function mergeJson(file, entry) {
  const fs = await import('node:fs');
  let doc = { description: 'ONNX Runtime Web memory calibration (bench/CALIBRATION.md)', entries: [] };
  if (fs.existsSync(file)) doc = JSON.parse(fs.readFileSync(file, 'utf8'));
  const key = (e) => `${e.network}|${e.runtime}|${e.threads}`;
  doc.entries = doc.entries.filter((e) => key(e) !== key(entry));
  doc.entries.push(entry);
  doc.entries.sort((a, b) => key(a).localeCompare(key(b)));
  fs.writeFileSync(file, JSON.stringify(doc, null, 2) + '\n');
}

export const METHOD =
  'WorkerPool (bindings/js/runtime/pool.js), 1 worker, fresh pool per point; heap = the ORT wasm instance memory size ' +
  '(ort-worker.js wraps WebAssembly.Memory; memory.buffer.byteLength, which never shrinks) = high-water; ' +
  'afterSessionBytes read after InferenceSession.create (graphOptimizationLevel all), heapBytes after `runs` runs of ' +
  'one [1,1,e,e,e] patch; least-squares fit heap = fixed + perVoxel·e³ over all points. The heap grows by ' +
  'max(request, min(1.2×current, request+96 MiB)) rounded to 64 KiB (emscripten growth in ort-wasm-simd-threaded.mjs), ' +
  'so it over-states live usage by up to 20 % / 96 MiB, and ORT\'s CPU arena may keep freed blocks: the figures are ' +
  'what the browser commits, not the live tensors.';

async function main() {
  const { parseArgs } = await import('node:util');
  const fs = await import('node:fs');
  const os = await import('node:os');
  const { createHash } = await import('node:crypto');
  const { WorkerPool } = await import('../bindings/js/runtime/pool.js');
  const { values: a } = parseArgs({
    options: {
      onnx: { type: 'string' },
      network: { type: 'string' },
      edges: { type: 'string', default: '32,48,64' },
      repeats: { type: 'string', default: '3' },
      threads: { type: 'string', default: '1' },
      runs: { type: 'string', default: '2' },
      'min-edge': { type: 'string', default: '64' },
      out: { type: 'string' },
      note: { type: 'string' },
      merge: { type: 'boolean', default: false },
      inputs: { type: 'string' },
      channels: { type: 'string', default: '1' },
    },
  });
  const channels = Number(a.channels);
  if (!Number.isInteger(channels) || channels < 1) {
    console.error(`--channels must be a whole number of at least 1 (got '${a.channels}'); MoDL-QSM takes --channels 2`);
    process.exit(2);
  }
  const inputRoles = a.inputs ? a.inputs.split(',') : undefined;
  if (!a.onnx) {
    console.error('usage: node --no-experimental-fetch bench/calibrate.js --onnx NET.onnx [--network NAME] [--edges 32,48,64] ' +
      '[--repeats 3] [--threads 1] [--runs 2] [--min-edge 64] [--out bench/calibration.json] [--note TEXT] [--merge] [--inputs phase,mask,te,b0,border] [--channels 2]');
    process.exit(2);
  }
  const model = new Uint8Array(fs.readFileSync(a.onnx));
  const edges = a.edges.split(',').map(Number);
  const repeats = Number(a.repeats);
  const threads = Number(a.threads);
  const runs = Number(a.runs);
  const network = a.network ?? a.onnx.split('/').pop().replace(/\.onnx$/, '');
  const sha256 = createHash('sha256').update(model).digest('hex');
  const ortVersion = JSON.parse(fs.readFileSync(new URL('../node_modules/onnxruntime-web/package.json', import.meta.url))).version;
  console.log(`${network}: ${a.onnx} (${model.byteLength} B), ${os.cpus()[0].model} × ${os.cpus().length}, node ${process.version}, ` +
    `onnxruntime-web ${ortVersion}, ${threads} thread(s), edges ${edges.join(',')}, ${repeats} repeat(s), ${runs} run(s)/pool; ` +
    `load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  const loadStart = os.loadavg().map((l) => +l.toFixed(2));
  const points = [];
  const failures = [];
  const t0 = performance.now();
  for (let rep = 1; rep <= repeats; rep++) {
    for (const edge of edges) {
      let p;
      try {
        p = await measurePoint({ WorkerPool, model, edge, threads, runs, inputRoles, channels });
      } catch (e) {
        // e.g. out of memory near the 4 GiB wasm ceiling: record it, keep the other points
        failures.push({ repeat: rep, edge, error: String(e?.message ?? e) });
        console.log(`  repeat ${rep} edge ${edge}: FAILED: ${e?.message ?? e}`);
        continue;
      }
      points.push({ repeat: rep, ...p, loadAverage1m: +os.loadavg()[0].toFixed(2) });
      console.log(
        `  repeat ${rep} edge ${edge}: heap ${MB(p.heapBytes)} MB (after first run ${MB(p.firstRunHeapBytes)}), ` +
          `after session ${MB(p.afterSessionBytes)} MB, (heap−session)/vox ${((p.heapBytes - p.afterSessionBytes) / p.voxels).toFixed(1)} B, ` +
          `runs ${p.secondsPerRun.join('/')} s, session ${p.sessionSeconds} s`,
      );
    }
  }
  let notes = a.note ? [a.note] : [];
  if (a.merge && a.out && fs.existsSync(a.out)) {
    // --merge: add these points to an existing entry (same network, runtime, threads) and refit everything
    const old = JSON.parse(fs.readFileSync(a.out, 'utf8')).entries.find((e) => e.network === network && e.runtime === 'node' && e.threads === threads);
    if (old) {
      if (old.model.sha256 !== sha256) throw new Error('--merge: the existing entry was measured on a different model file');
      points.unshift(...old.points);
      failures.unshift(...(old.failures ?? []));
      notes = [...(Array.isArray(old.note) ? old.note : old.note ? [old.note] : []), ...notes];
    }
  }
  const s = summarize(points);
  const rec = recommend(s, points, { minEdge: Number(a['min-edge']) });
  console.log(table(s));
  console.log(`safe, per-voxel only (patches ≥ ${rec.minEdge}³, +${rec.margin * 100} %): ${rec.perVoxelOnly.bytesPerVoxel} B/voxel; ` +
    `with a fixed part: ${MB(rec.withFixed.fixedBytes)} MB + ${rec.withFixed.bytesPerVoxel} B/voxel; ` +
    `worst (heap−session)/voxel ${rec.worstIncrementPerVoxel}; total ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  const entry = {
    network,
    runtime: 'node',
    method: METHOD,
    date: new Date().toISOString().slice(0, 10),
    machine: { cpu: os.cpus()[0].model, cores: os.cpus().length, os: `${os.type()} ${os.release()}`, node: process.version, onnxruntimeWeb: ortVersion,
      loadAverageStart: loadStart, loadAverageEnd: os.loadavg().map((l) => +l.toFixed(2)) },
    model: { file: a.onnx.split('/').pop(), bytes: model.byteLength, sha256 },
    threads,
    inputs: inputRoles,
    channels: channels > 1 ? channels : undefined,
    runsPerPool: runs,
    repeats,
    note: notes.length > 1 ? notes : notes[0],
    points,
    failures,
    ...s,
    recommendation: rec,
  };
  if (a.out) {
    await mergeJson(a.out, entry);
    console.log(`written to ${a.out}`);
  }
}

const isMain = typeof process === 'object' && process.argv?.[1] && import.meta.url === (await import('node:url')).pathToFileURL(process.argv[1]).href;
if (isMain) await main();
