// The runs of bench/sweep.js, the same code in node and in Chromium (no node:* imports): each K workers × T threads
// × core of the grid in a fresh runtime (hardwareThreads 2), wall time around invert() (worker start and session
// creation included, as the planner's estimate does), then the auto-planner's own choice run as planned.
// Configs whose in-flight count the planner caps below K (a tile over half the 1.5 GB budget, or a single tile) run
// exactly as K = 1 with the same threads and are not run again: their row repeats that measurement.

/**
 * Runs the grid and the planner's choice on one phantom.
 * createTessera is bindings/js/index.js's; field and mask are the phantom's; weights the network's ONNX bytes.
 * wts lists [K, T] pairs; cores the core edges; log(text) receives one line per run.
 * @returns {Promise<{rows: object[], auto: object, autoRow: object}>}
 */
export async function sweepRuns({ createTessera, geometry, field, mask, model, weights, cores, halo, wts, log }) {
  const measured = new Map(); // `${core}|${in flight}|${T}` → the run
  async function runConfig(core, K, T) {
    const t = await createTessera({ workers: K, threadsPerWorker: T, hardwareThreads: 2 });
    try {
      const tile = { core, halo };
      const plan = await t.plan({ geometry, mask, model, tile, workers: K });
      const row = { core, K, T, patchEdge: plan.patchEdge, active: plan.tilesActive, inFlight: plan.tilesInFlight, feasible: plan.feasible };
      if (!plan.feasible) return { ...row, message: plan.message };
      const key = `${core}|${plan.tilesInFlight}|${T}`;
      if (measured.has(key)) return { ...row, ...measured.get(key), repeated: true };
      const t0 = performance.now();
      const { report } = await t.invert({ keepInputs: true, field, mask, geometry, model, weights, tile, workers: K, threadsPerWorker: T });
      const wall = (performance.now() - t0) / 1000;
      measured.set(key, { wall, run: report.wallSeconds });
      await log(`core ${core} ${K}×${T}: ${report.tilesRun} tiles of ${plan.patchEdge}³, in flight ${plan.tilesInFlight}, wall ${wall.toFixed(1)} s (run ${report.wallSeconds.toFixed(1)} s)`);
      return { ...row, wall, run: report.wallSeconds };
    } finally {
      await t.terminate();
    }
  }
  // A choice that is not a cubic tiling (the whole volume, the mask's box, its slabs) runs as planned.
  async function runPlan(plan) {
    const t = await createTessera({ workers: plan.workers, threadsPerWorker: plan.threadsPerWorker, hardwareThreads: 2 });
    try {
      const t0 = performance.now();
      const { report } = await t.invert({ keepInputs: true, field, mask, geometry, model, weights, plan });
      const wall = (performance.now() - t0) / 1000;
      const kind = plan.wholeVolume ? (plan.crop ? 'mask box' : 'whole volume') : 'slabs';
      await log(`the planner's plan (${kind} ${plan.patchDims.join('×')}, ${report.tilesRun} patch(es), ${plan.workers}×${plan.threadsPerWorker}): wall ${wall.toFixed(1)} s`);
      return { core: plan.tile?.core ?? null, K: plan.workers, T: plan.threadsPerWorker, patchEdge: plan.patchEdge, active: plan.tilesActive, inFlight: plan.tilesInFlight, feasible: true, wall, run: report.wallSeconds, notCubic: true, kind };
    } finally {
      await t.terminate();
    }
  }

  const rows = [];
  for (const [K, T] of wts) for (const core of cores) rows.push(await runConfig(core, K, T));
  const tp = await createTessera({ hardwareThreads: 2 });
  const auto = await tp.plan({ geometry, mask, model, tile: 'auto' });
  await tp.terminate();
  await log(`plan({tile: 'auto'}): ${auto.explanation}`);
  const cubic = !auto.wholeVolume && !auto.crop;
  let autoRow = cubic ? rows.find((r) => r.core === auto.tile.core && r.K === auto.workers && r.T === auto.threadsPerWorker) : undefined;
  if (!autoRow) {
    autoRow = cubic ? await runConfig(auto.tile.core, auto.workers, auto.threadsPerWorker) : await runPlan(auto);
    autoRow.extra = true;
    rows.push(autoRow);
  }
  const strip = ({ tile, workers, threadsPerWorker, estimatedSeconds, explanation, wholeVolume, crop, patchDims }) =>
    ({ tile, workers, threadsPerWorker, estimatedSeconds, explanation, wholeVolume, crop: crop ?? null, patchDims });
  return { rows, auto: strip(auto), autoRow };
}
