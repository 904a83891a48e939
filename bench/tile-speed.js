// Seconds per 64³ tile of a network in ONNX Runtime Web (wasm backend), through the WorkerPool the runtime
// uses (bindings/js/runtime/pool.js: one worker, one session, T intra-op threads), at 1 and 2 threads, in node.
// Per thread count: a fresh pool (its session-creation time = the planner's "worker start"), one warm-up run
// (not counted), then `repeats` runs of one [1,1,e,e,e] patch; median, min, max. The threads are interleaved
// (1,2,1,2,...) when --rounds > 1 so a change of machine load hits both alike.
// Also derived: Amdahl parallel fraction f from speed-up S = t1/t2 at T=2 (f = 2(1 − 1/S)), and seconds per
// patch voxel at 1 thread (what src/include/tessera/autoplan.h calls seconds_per_voxel).
//
// Usage:
//   node scripts/make_standins.js /tmp/standins        # once: /tmp/standins/xqsm-standin.onnx
//   node --no-experimental-fetch bench/tile-speed.js [--onnx /tmp/standins/xqsm-standin.onnx] [--edge 64]
//        [--threads 1,2] [--repeats 3] [--rounds 1] [--warm-edge 0] [--rewrite] [--rewrite-ops OPS] [--json out.json]
// --warm-edge E: three E³ patches before the first large run, so its code is warm while its heap still grows.
// --onnx deep: the benches' deep stand-in (bench/common.js deepStandin: 4 levels, 5³ kernels, base 8, random weights).
// --rewrite: time the graph as bindings/js/webgpu-graph.js rewrites it for WebGPU (same result to float rounding)
// instead of the graph as exported, on the same wasm backend; --rewrite-ops ConvTranspose (a comma list): only those
// operators rewritten (implies --rewrite).
// bench/browser-tile-speed.js runs the same measurement (measureTileSpeed below) in headless Chromium.
//
// Imported by the browser page of browser-tile-speed.js: no node import at the top level.

/** Deterministic smooth input patch (values ~ ±0.1 ppm, like a local field). */
export function patchInput(edge) {
  const n = edge * edge * edge;
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = 0.05 * Math.sin(0.013 * i) + 0.05 * Math.cos(0.0071 * i + 1);
  return x;
}

export const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

/**
 * One pool (1 worker, `threads` ORT threads): session seconds, warm-up seconds, `repeats` timed runs.
 * Times are measured around pool.run() on the caller's side (includes the copy in/out and the worker message),
 * and the worker's own session.run() time (res.seconds) is kept too.
 */
export async function measureTileSpeed({ WorkerPool, model, edge = 64, threads = 1, repeats = 3, warmEdge = 0, warmRuns = 3, poolOptions = {} }) {
  const pool = new WorkerPool({ model, workers: 1, threadsPerWorker: threads, ...poolOptions });
  try {
    const t0 = performance.now();
    await pool.ready();
    const sessionSeconds = (performance.now() - t0) / 1000;
    // Small patches first (warmEdge > 0): the code is warm before the first large run, whose heap still grows.
    const warmSeconds = [];
    const warmInput = warmEdge > 0 ? patchInput(warmEdge) : null;
    for (let r = 0; warmInput && r < warmRuns; r++) {
      const t = performance.now();
      await pool.run({ id: -1 - r, input: warmInput, dims: [1, 1, warmEdge, warmEdge, warmEdge] });
      warmSeconds.push((performance.now() - t) / 1000);
    }
    const input = patchInput(edge);
    const dims = [1, 1, edge, edge, edge];
    const tw = performance.now();
    await pool.run({ id: 0, input, dims });
    const warmupSeconds = (performance.now() - tw) / 1000;
    const seconds = [];
    const ortSeconds = [];
    for (let r = 0; r < repeats; r++) {
      const t = performance.now();
      const res = await pool.run({ id: r + 1, input, dims });
      seconds.push((performance.now() - t) / 1000);
      ortSeconds.push(res.seconds);
    }
    return { edge, threads, sessionSeconds, warmSeconds, warmupSeconds, seconds, ortSeconds, heapBytes: pool.stats().perWorker[0].heapHighWater };
  } finally {
    await pool.terminate();
  }
}

/** Summary per thread count + the Amdahl fit from the 1- and 2-thread medians. */
export function summarizeTileSpeed(points) {
  const byT = new Map();
  for (const p of points) {
    if (!byT.has(p.threads)) byT.set(p.threads, []);
    byT.get(p.threads).push(p);
  }
  const rows = [...byT.entries()].sort((a, b) => a[0] - b[0]).map(([threads, ps]) => {
    const s = ps.flatMap((p) => p.seconds);
    const edge = ps[0].edge;
    return {
      threads,
      edge,
      n: s.length,
      medianSeconds: median(s),
      minSeconds: Math.min(...s),
      maxSeconds: Math.max(...s),
      medianOrtSeconds: median(ps.flatMap((p) => p.ortSeconds)),
      sessionSeconds: median(ps.map((p) => p.sessionSeconds)),
      warmupSeconds: median(ps.map((p) => p.warmupSeconds)),
      voxelsPerSecond: edge ** 3 / median(s),
      secondsPerVoxel: median(s) / edge ** 3,
      heapBytes: Math.max(...ps.map((p) => p.heapBytes)),
    };
  });
  const r1 = rows.find((r) => r.threads === 1);
  const r2 = rows.find((r) => r.threads === 2);
  let fit = null;
  if (r1 && r2) {
    const speedup = r1.medianSeconds / r2.medianSeconds;
    fit = {
      speedup2: speedup,
      parallelFraction: Math.min(1, Math.max(0, 2 * (1 - 1 / speedup))),
      secondsPerVoxel1: r1.secondsPerVoxel,
      workerStartSeconds: median(rows.map((r) => r.sessionSeconds)),
    };
  }
  return { rows, fit };
}

export function tileSpeedTable(s) {
  const L = [];
  L.push('threads  edge  n  median s/tile  min–max (s)     ORT run s  session s  warm-up s  voxels/s   s/voxel   heap MB');
  for (const r of s.rows) {
    L.push(`${String(r.threads).padStart(7)}  ${String(r.edge).padStart(4)}  ${String(r.n).padStart(1)}  ${r.medianSeconds.toFixed(2).padStart(13)}  ` +
      `${`${r.minSeconds.toFixed(2)}–${r.maxSeconds.toFixed(2)}`.padStart(13)}  ${r.medianOrtSeconds.toFixed(2).padStart(9)}  ` +
      `${r.sessionSeconds.toFixed(2).padStart(9)}  ${r.warmupSeconds.toFixed(2).padStart(9)}  ${Math.round(r.voxelsPerSecond).toString().padStart(8)}  ` +
      `${r.secondsPerVoxel.toExponential(2).padStart(8)}  ${(r.heapBytes / 1e6).toFixed(1).padStart(8)}`);
  }
  if (s.fit) {
    L.push(`speed-up 1→2 threads ${s.fit.speedup2.toFixed(3)} ⇒ Amdahl parallel fraction ${s.fit.parallelFraction.toFixed(3)}; ` +
      `seconds per patch voxel at 1 thread ${s.fit.secondsPerVoxel1.toExponential(3)}; worker start (session create) ${s.fit.workerStartSeconds.toFixed(2)} s`);
  }
  return L.join('\n');
}

/** The command-line options of this script and bench/browser-tile-speed.js (which adds --chromium). */
export const TILE_SPEED_OPTIONS = {
  onnx: { type: 'string', default: '/tmp/standins/xqsm-standin.onnx' },
  edge: { type: 'string', default: '64' },
  threads: { type: 'string', default: '1,2' },
  repeats: { type: 'string', default: '3' },
  rounds: { type: 'string', default: '1' },
  'warm-edge': { type: 'string', default: '0' },
  rewrite: { type: 'boolean', default: false },
  'rewrite-ops': { type: 'string' },
  json: { type: 'string' },
};

/** The model bytes parsed TILE_SPEED_OPTIONS name: the --onnx file (or 'deep'), or its WebGPU rewrite with --rewrite
 * or --rewrite-ops (node only; exits naming the command that makes a missing stand-in). */
export async function tileSpeedModel(a) {
  const { readStandin, deepStandin } = await import('./common.js');
  const model = a.onnx === 'deep' ? deepStandin() : readStandin(a.onnx);
  if (!a.rewrite && !a['rewrite-ops']) return model;
  const { rewriteForWebGpu } = await import('../bindings/js/webgpu-graph.js');
  return rewriteForWebGpu(model, a['rewrite-ops'] ? { ops: a['rewrite-ops'].split(',') } : {}).bytes;
}

/** How the header names the model: the --onnx file, and which rewrite. */
export function tileSpeedModelName(a) {
  return `${a.onnx}${a['rewrite-ops'] ? ` (${a['rewrite-ops']} rewritten)` : a.rewrite ? ' (rewritten)' : ''}`;
}

/** The measurement settings of parsed TILE_SPEED_OPTIONS values. */
export function tileSpeedConfig(a) {
  return { edge: Number(a.edge), threads: a.threads.split(',').map(Number), repeats: Number(a.repeats), rounds: Number(a.rounds), warmEdge: Number(a['warm-edge']) };
}

/** One measurement in one line (node and Chromium print the same). */
export function progressLine(p, load) {
  const warm = p.warmSeconds?.length ? `small patches ${p.warmSeconds.map((x) => x.toFixed(2)).join('/')} s, ` : '';
  return `  ${p.threads} thread(s): session ${p.sessionSeconds.toFixed(2)} s, ${warm}warm-up ${p.warmupSeconds.toFixed(2)} s, ` +
    `runs ${p.seconds.map((x) => x.toFixed(2)).join('/')} s, heap ${(p.heapBytes / 2 ** 30).toFixed(2)} GiB; load ${load}`;
}

async function main() {
  const { parseArgs } = await import('node:util');
  const fs = await import('node:fs');
  const os = await import('node:os');
  const { WorkerPool } = await import('../bindings/js/runtime/pool.js');
  const { values: a } = parseArgs({ options: TILE_SPEED_OPTIONS });
  const model = await tileSpeedModel(a);
  const cfg = tileSpeedConfig(a);
  console.log(`tile speed, node ${process.version}, ${os.cpus()[0].model} × ${os.cpus().length}, ${tileSpeedModelName(a)}, ` +
    `edge ${cfg.edge}, threads ${cfg.threads.join(',')}, ${cfg.repeats} repeats × ${cfg.rounds} round(s); load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  const points = [];
  for (let round = 0; round < cfg.rounds; round++) {
    for (const t of cfg.threads) {
      const p = await measureTileSpeed({ WorkerPool, model, edge: cfg.edge, threads: t, repeats: cfg.repeats, warmEdge: cfg.warmEdge });
      points.push(p);
      console.log(progressLine(p, os.loadavg()[0].toFixed(2)));
    }
  }
  const s = summarizeTileSpeed(points);
  console.log(tileSpeedTable(s));
  console.log(`load average at end ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  if (a.json) fs.writeFileSync(a.json, JSON.stringify({ runtime: 'node', node: process.version, loadavg: os.loadavg(), points, ...s }, null, 2));
}

const isMain = typeof process === 'object' && process.argv?.[1] && import.meta.url === (await import('node:url')).pathToFileURL(process.argv[1]).href;
if (isMain) await main();
