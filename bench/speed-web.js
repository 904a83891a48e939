// The ONNX Runtime Web half of bench/speed.js, the same code in node and in Chromium (no node:* imports): plain ONNX
// Runtime Web on the whole volume (invert({whole: true}), where it fits the single-patch limit) and Tessera's default
// (quality faithful, the planner chooses), each in a fresh pool, with the fidelity of the default against a reference χ.
// Each runtime starts SETTLE_SECONDS after the one before it ended: Chromium spends about a core for 2-3 s after a
// runtime whose workers held gigabytes ends, and a speed probe started in that time ran at half speed (RESULTS §36).

/** Seconds between one runtime's end and the next one's start (outside every timed span). */
const SETTLE_SECONDS = 5;
const settle = () => new Promise((resolve) => setTimeout(resolve, SETTLE_SECONDS * 1000));

/** Pearson r and NRMSE = ‖x − ref‖ / ‖ref‖ of x against ref inside the mask. */
export function agreement(x, ref, mask) {
  let n = 0, sx = 0, sr = 0;
  for (let i = 0; i < mask.length; i++) if (mask[i]) (n++, (sx += x[i]), (sr += ref[i]));
  const mx = sx / n, mr = sr / n;
  let xx = 0, rr = 0, xr = 0, e = 0, ee = 0;
  for (let i = 0; i < mask.length; i++) {
    if (!mask[i]) continue;
    const dx = x[i] - mx, dr = ref[i] - mr;
    xx += dx * dx, rr += dr * dr, xr += dx * dr, e += (x[i] - ref[i]) ** 2, ee += ref[i] * ref[i];
  }
  return { r: xr / Math.sqrt(xx * rr), nrmse: Math.sqrt(e / ee) };
}

/** Voxels the plan runs through the network: every active patch's (a crop box, its slabs, the tiles). */
export function voxelsRun(p) {
  if (Number.isFinite(p.voxelsRun)) return p.voxelsRun; // the planner's exact count, where it reports one
  const patch = p.wholeVolume || p.crop ? p.patchDims.reduce((x, y) => x * y) : p.patchEdge ** 3;
  return patch * Math.max(1, p.tilesActive);
}

/** "mask box 128×144×112 (63% of the volume), 1 × 2 threads", "whole volume" or the tiling, as the tables say it. */
export function planText(p, voxels) {
  if (p.wholeVolume && p.crop) {
    const share = (100 * p.patchDims.reduce((x, y) => x * y) / voxels).toFixed(0);
    return `mask box ${p.patchDims.join('×')} (${share}% of the volume), 1 × ${p.threadsPerWorker} threads`;
  }
  if (p.wholeVolume) return 'whole volume';
  if (p.crop?.split?.pieces > 1) {
    const s = p.crop.split;
    return `mask box in ${s.pieces} slabs along ${'xyz'[s.axis]} (halo ${s.halo}), ${p.tilesActive} × ${p.patchDims.join('×')}, 1 × ${p.threadsPerWorker} threads`;
  }
  const stride = p.tile.stride < p.tile.core ? ` stride ${p.tile.stride} ${p.tile.blend}` : '';
  return `core ${p.tile.core} halo ${p.tile.halo}${stride}, ${p.tilesActive} × ${p.patchEdge}³, ${p.workers ?? 1} × ${p.threadsPerWorker} threads`;
}

/**
 * Plain ONNX Runtime Web whole-volume (null when it does not fit) and Tessera's default on one volume: run cold with
 * the estimate of a runtime that never measured the network, and run again after the speed probe sized to it
 * (plan({measureSpeed: true}), whose worker the run takes) with the probed estimate.
 * createTessera is bindings/js/index.js's; network is {model} (a registry network) or {spec} (a custom one); reference
 * is the χ the default is compared with (the native whole run).
 * @returns {Promise<{web: {seconds: number, wall: number} | null, tessera: number, wall: number, plan: string,
 *   estimated: number, unprobedSource: string, probedEstimate: number, probe: number, warmWall: number, warmStart: boolean,
 *   probedPlan: string, r: number, nrmse: number, share: number, memory: {workerHeapVsPlan: number, moduleHeapVsPlan: number}}>}
 *   share: voxels the default ran ÷ the volume's voxels; wall: seconds around the cold run; estimated: its plan's seconds
 *   (no probe); probe: seconds of the probed plan() call; warmWall: seconds around the run after it.
 */
export async function webSpeed({ createTessera, geometry, field, mask, network, weights, reference, threads }) {
  const voxels = geometry.dims[0] * geometry.dims[1] * geometry.dims[2];
  let web = null;
  await settle(); // after the runtimes of the volume before
  const plain = await createTessera({ workers: threads, hardwareThreads: threads, threadsPerWorker: 1 });
  try {
    if ((await plain.plan({ geometry, mask, ...network, whole: true })).feasible) {
      const t0 = performance.now();
      const { report } = await plain.invert({ keepInputs: true, field, mask, geometry, ...network, weights, whole: true, threadsPerWorker: threads });
      web = { seconds: report.wallSeconds, wall: (performance.now() - t0) / 1000 };
    }
  } finally {
    await plain.terminate();
  }
  await settle();
  // Tessera's default on a runtime that never measured this network: the first estimate (registry or default speed)
  // and the run, cold (the run starts its own worker).
  const cold = await createTessera({ workers: threads, hardwareThreads: threads, threadsPerWorker: 1 });
  let out;
  try {
    const t0 = performance.now();
    const { chi: { data: chi }, report } = await cold.invert({ keepInputs: true, field, mask, geometry, ...network, weights });
    const wall = (performance.now() - t0) / 1000;
    const p = report.plan;
    const g = agreement(chi, reference, mask);
    // The run against its plan (1 = as planned; the runtime's own check).
    const memory = { workerHeapVsPlan: report.memory?.workerHeapVsPlan, moduleHeapVsPlan: report.memory?.moduleHeapVsPlan };
    out = {
      web, tessera: report.wallSeconds, wall, plan: planText(p, voxels), r: g.r, nrmse: g.nrmse, share: voxelsRun(p) / voxels, memory,
      estimated: p.estimatedSeconds, unprobedSource: p.estimateSource, // the plan this run made for itself
    };
  } finally {
    await cold.terminate();
  }
  await settle();
  // The same on a fresh runtime with the speed probe sized to the run (plan({measureSpeed: true})); the run takes the
  // probe's worker. The probe's cost: (probe + this run) − the cold run, both from the request to χ.
  const probed = await createTessera({ workers: threads, hardwareThreads: threads, threadsPerWorker: 1 });
  try {
    const t0 = performance.now();
    const plan = await probed.plan({ geometry, mask, ...network, weights, measureSpeed: true });
    const probe = (performance.now() - t0) / 1000;
    const t1 = performance.now();
    const { report } = await probed.invert({ keepInputs: true, field, mask, geometry, ...network, weights, plan });
    const warmWall = (performance.now() - t1) / 1000;
    // The probe plan() ran (kept per weights and threads: this is the same measurement, not another).
    const measured = await probed.measureSpeed({ weights, ...network, threads: report.plan.threadsPerWorker });
    return {
      ...out, probedEstimate: plan.estimatedSeconds, probe, warmWall, warmStart: !!report.pool?.[0]?.warmStart,
      probePoints: measured.points.map((p) => [p.edge, p.seconds]), probeRuns: measured.runs,
      probedPlan: planText(report.plan, voxels),
    };
  } finally {
    await probed.terminate();
  }
}
