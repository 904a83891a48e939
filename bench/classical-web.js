// The wasm half of bench/classical.js, the same code in node and in Chromium (no node:* imports): one classical method
// (or the demo network) on the phantom head in a FRESH runtime (createTessera per run, so the module heap ÷ plan is the
// run's own: the module heap never shrinks), the phantom's volumes handed to that runtime only by invert() itself, and
// its χ scored against the truth the way bench/methods_bench.cpp scores the native χ (tessera/fidelity.h compare_maps:
// Pearson r, NRMSE, HFEN with a LoG of σ = 1.5 voxels truncated at 5 voxels then the 6-neighbour Laplacian), both maps
// DEMEANED inside the mask first (raw NRMSE / HFEN beside them).

/** v minus its mean inside the mask, zero outside (Float64Array). */
function demean(v, mask) {
  let s = 0, n = 0;
  for (let i = 0; i < mask.length; i++) if (mask[i]) (s += v[i]), n++;
  const m = s / n, out = new Float64Array(mask.length);
  for (let i = 0; i < mask.length; i++) if (mask[i]) out[i] = v[i] - m;
  return out;
}

/** compare_maps' LoG: separable Gaussian σ = 1.5 voxels (radius 5, zero outside the volume), then the 6-neighbour Laplacian. */
export function logFilter(dims, v) {
  const [nx, ny, nz] = dims, r = 5, sigma = 1.5;
  const k = new Float64Array(2 * r + 1);
  let sum = 0;
  for (let i = -r; i <= r; i++) sum += (k[i + r] = Math.exp((-0.5 * i * i) / (sigma * sigma)));
  for (let i = 0; i < k.length; i++) k[i] /= sum;
  let a = Float64Array.from(v), b = new Float64Array(a.length);
  const n = [nx, ny, nz], stride = [1, nx, nx * ny];
  for (let axis = 0; axis < 3; axis++) {
    const len = n[axis], st = stride[axis];
    for (let z = 0; z < nz; z++)
      for (let y = 0; y < ny; y++)
        for (let x = 0; x < nx; x++) {
          const p = axis === 0 ? x : axis === 1 ? y : z, i = x + nx * (y + ny * z);
          let s = 0;
          const lo = Math.max(-r, -p), hi = Math.min(r, len - 1 - p);
          for (let d = lo; d <= hi; d++) s += k[d + r] * a[i + d * st];
          b[i] = s;
        }
    [a, b] = [b, a];
  }
  for (let z = 0; z < nz; z++)
    for (let y = 0; y < ny; y++)
      for (let x = 0; x < nx; x++) {
        const i = x + nx * (y + ny * z);
        let s = -6 * a[i];
        if (x > 0) s += a[i - 1];
        if (x + 1 < nx) s += a[i + 1];
        if (y > 0) s += a[i - nx];
        if (y + 1 < ny) s += a[i + nx];
        if (z > 0) s += a[i - nx * ny];
        if (z + 1 < nz) s += a[i + nx * ny];
        b[i] = s;
      }
  return b;
}

/** The truth's demeaned and raw maps and their LoGs, computed once per phantom and reused for every run's score. */
export function truthOf(dims, chi, mask) {
  const dm = demean(chi, mask);
  return { dims, mask, raw: chi, dm, logRaw: logFilter(dims, chi), logDm: logFilter(dims, dm) };
}

/** r, NRMSE and HFEN of x against the truth inside the mask (as compare_maps). */
function agreement(x, ref, lx, lref, mask) {
  let n = 0, st = 0, sr = 0, stt = 0, srr = 0, str = 0, see = 0, hn = 0, hd = 0;
  for (let i = 0; i < mask.length; i++) {
    if (!mask[i]) continue;
    const t = x[i], r = ref[i], e = t - r, h = lx[i] - lref[i];
    n++, (st += t), (sr += r), (stt += t * t), (srr += r * r), (str += t * r), (see += e * e), (hn += h * h), (hd += lref[i] * lref[i]);
  }
  const cov = str / n - (st / n) * (sr / n), vt = stt / n - (st / n) ** 2, vr = srr / n - (sr / n) ** 2;
  return { r: cov / Math.sqrt(vt * vr), nrmse: Math.sqrt(see / srr), hfen: Math.sqrt(hn / hd) };
}

/** The χ of a run scored against truthOf(): {r, nrmse, hfen} demeaned, rawNrmse and rawHfen not. */
export function score(chi, truth) {
  const dm = demean(chi, truth.mask);
  const a = agreement(dm, truth.dm, logFilter(truth.dims, dm), truth.logDm, truth.mask);
  const raw = agreement(chi, truth.raw, logFilter(truth.dims, chi), truth.logRaw, truth.mask);
  return { ...a, rawNrmse: raw.nrmse, rawHfen: raw.hfen };
}

/**
 * One run in a fresh runtime: method ('tkd', ..., or 'demo' for the demo network with weights) at threads threads.
 * timeLimit (s): a run still going is cancelled and its seconds projected from the steps done (complete: false).
 * @returns {Promise<{seconds: number, wall: number, complete: boolean, steps?: number, planned?: number, r?: number,
 *   nrmse?: number, hfen?: number, rawNrmse?: number, rawHfen?: number, memory: object, plan: object}>}
 */
export async function runOne({ createTessera, geometry, field, mask, magnitude, method, weights, threads, truth, timeLimit = 600 }) {
  const demo = method === 'demo';
  const tessera = await createTessera(demo ? { workers: threads, hardwareThreads: threads, threadsPerWorker: 1 } : { workers: 1, hardwareThreads: threads });
  const controller = new AbortController();
  let last = null;
  const timer = setTimeout(() => controller.abort(), timeLimit * 1000);
  const t0 = performance.now();
  try {
    const request = demo
      ? { field, mask, geometry, model: 'demo-unet', weights }
      : { field, mask, geometry, method, ...(method === 'medi' ? { magnitude } : {}) };
    const out = await tessera.invert({ keepInputs: true, ...request, signal: controller.signal, onProgress: (p) => (last = { ...p, t: performance.now() }) });
    const wall = (performance.now() - t0) / 1000;
    const s = score(out.chi.data, truth);
    const p = out.report.plan ?? {};
    return {
      seconds: out.report.wallSeconds ?? wall, wall, complete: true, ...s, memory: out.report.memory,
      plan: { moduleHeapBytes: p.moduleHeapBytes, peakBytes: p.peakBytes, bytesPerTile: p.bytesPerTile, steps: p.methodSteps },
      steps: last?.done, planned: last?.total,
    };
  } catch (e) {
    if (!controller.signal.aborted || !last?.done) throw e;
    const measured = (last.t - t0) / 1000;
    return { seconds: (measured / last.done) * last.total, wall: measured, complete: false, steps: last.done, planned: last.total, memory: null, plan: null };
  } finally {
    clearTimeout(timer);
    await tessera.terminate();
  }
}
