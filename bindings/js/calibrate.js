// A network's memory cost measured in ONNX Runtime Web, in seconds: for a few small patch edges, a FRESH WorkerPool
// (1 worker, the run's threads) creates its session, its wasm heap is read (afterSessionBytes: runtime + weights), one
// patch of edge³ runs, and the heap is read again (heapBytes: the high-water; wasm memory never shrinks). The C++ core
// (src/calibration.cpp) chooses the edges and fits the safe line heap = fixedBytes + bytesPerVoxel · edge³ over the
// points; here only the heaps are measured. bench/calibrate.js (the careful study, many edges and repeats) and
// bench/calibrate-browser.js measure their points with measurePoint below.
//
// This module is also imported by the browser page of bench/calibrate-browser.js: no node import at the top level.
import { WorkerPool as DefaultPool } from './runtime/pool.js';

/** Deterministic smooth input patch (values ~ ±0.1 ppm, like a local field), `channels` planes of edge³. */
export function patchInput(edge, channels = 1) {
  const n = channels * edge * edge * edge;
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = 0.05 * Math.sin(0.013 * i) + 0.05 * Math.cos(0.0071 * i + 1);
  return x;
}

/**
 * The further inputs of a multi-input (phase) network for an edge³ patch, by role: a full mask, TE 20 ms, 3 T,
 * the border shell, B0 along z.
 */
export function phaseExtras(roles, edge) {
  const dims = [1, 1, edge, edge, edge];
  const n = edge ** 3;
  const shell = new Float32Array(n);
  for (let x = 1; x < edge - 1; x++) for (let y = 1; y < edge - 1; y++) for (let z = 1; z < edge - 1; z++) shell[(x * edge + y) * edge + z] = 1;
  const make = {
    mask: () => ({ input: new Float32Array(n).fill(1), dims }),
    border: () => ({ input: shell, dims }),
    te: () => ({ input: Float32Array.of(0.02), dims: [1] }),
    b0: () => ({ input: Float32Array.of(3), dims: [1] }),
    b0_dir: () => ({ input: Float32Array.of(0, 0, 1), dims: [1, 1, 3] }),
  };
  return roles.slice(1).map((role) => {
    if (!make[role]) throw new Error(`no calibration input for role '${role}'`);
    return { role, ...make[role]() };
  });
}

/**
 * One measurement point in a fresh pool.
 * @param {object} o
 * @param {Function} [o.WorkerPool] the pool class (bindings/js/runtime/pool.js)
 * @param {Uint8Array} o.model ONNX bytes
 * @param {number} o.edge patch edge (a multiple of the network's divisor)
 * @param {number} o.threads ORT threads in the worker
 * @param {number} [o.runs=2] patches run in the same session (the high-water must not keep growing)
 * @param {number} [o.channels=1] input channels of the network
 * @param {object} [o.poolOptions] extra WorkerPool options (browser: ortModuleUrl, ortWasmPaths; workerUrl)
 * @param {string[]} [o.inputRoles] multi-input networks: the input roles (phaseExtras makes the further inputs)
 * @param {AbortSignal} [o.signal] cancels the point (the worker is terminated)
 */
export async function measurePoint({ WorkerPool = DefaultPool, model, edge, threads, runs = 2, channels = 1, poolOptions = {}, inputRoles, signal }) {
  const pool = new WorkerPool({ model, workers: 1, threadsPerWorker: threads, inputRoles, ...poolOptions });
  try {
    const t0 = performance.now();
    await pool.ready();
    const sessionSeconds = (performance.now() - t0) / 1000;
    const afterSessionBytes = pool.stats().perWorker[0].heapHighWater;
    const input = patchInput(edge, channels);
    const dims = [1, channels, edge, edge, edge];
    const extras = inputRoles ? phaseExtras(inputRoles, edge) : [];
    const perRun = [];
    for (let r = 0; r < runs; r++) {
      const res = await pool.run({ id: r, input, dims, extras, signal });
      if (res.dims.slice(2).join(',') !== dims.slice(2).join(',')) throw new Error(`edge ${edge}: output dims [${res.dims}] do not match the input's [${dims}]`);
      perRun.push({ seconds: res.seconds, heapBytes: res.heapBytes });
    }
    const heapBytes = pool.stats().perWorker[0].heapHighWater;
    return {
      edge,
      voxels: edge ** 3,
      heapBytes,
      afterSessionBytes,
      firstRunHeapBytes: perRun[0].heapBytes,
      seconds: perRun[0].seconds,
      secondsPerRun: perRun.map((p) => +p.seconds.toFixed(3)),
      sessionSeconds: +sessionSeconds.toFixed(3),
    };
  } finally {
    await pool.terminate();
  }
}

/**
 * Calibrates a network: heaps measured at the C++ core's edges for its divisor (three; more, up to maxEdges, while
 * the heap has not grown with the patch at two sizes), then the core's safe fit.
 * M is a loaded Tessera module (calibrationEdges, calibrationSlopeMeasured, fitCalibration); model ONNX bytes;
 * divisor >= 1.
 * @returns {Promise<{fixedBytes: number, bytesPerVoxel: number, points: object[], seconds: number, fit: object,
 *   threads: number, divisor: number}>}
 */
export async function calibrateNetwork({ M, model, divisor = 1, threads = 1, channels = 1, inputRoles, poolOptions, WorkerPool, signal, onPoint, maxEdges = 6 }) {
  const started = performance.now();
  const points = [];
  const measure = async (edge) => {
    signal?.throwIfAborted?.();
    const p = await measurePoint({ WorkerPool, model, edge, threads, runs: 1, channels, poolOptions, inputRoles, signal });
    points.push({
      edge: p.edge, voxels: p.voxels, heapBytes: p.heapBytes, afterSessionBytes: p.afterSessionBytes,
      seconds: +(p.sessionSeconds + p.seconds).toFixed(3),
    });
    onPoint?.(points.at(-1));
  };
  let count = 3;
  for (const edge of M.calibrationEdges(divisor, count)) await measure(edge);
  while (!M.calibrationSlopeMeasured(points) && count < maxEdges) {
    count++;
    await measure(M.calibrationEdges(divisor, count).at(-1));
  }
  const fit = M.fitCalibration(points);
  return {
    fixedBytes: fit.fixedBytes,
    bytesPerVoxel: fit.bytesPerVoxel,
    points,
    seconds: (performance.now() - started) / 1000,
    fit,
    threads,
    divisor,
  };
}
