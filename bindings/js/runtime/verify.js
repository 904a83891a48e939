// The self-check of a run (verify: true): the plan's box cut from the volume and run whole on a fresh one-worker pool,
// compared with the tiled χ away from the box's inner faces; plus the data-consistency residual of χ.
import { runSteps } from './driver.js';
import { rt, call } from './context.js';
import { startPools, stopPools } from './sessions.js';

/**
 * report.verify of a run.
 * Precondition: the run's own pools are given back (the box's worker is the only one).
 * Precondition: volume is the grid the run went through, handle the held plan's run there (an M.Plan), plan the
 * plan's view and chi its χ there; threadsPerWorker the run's workers' threads (the box's worker gets as many).
 * @returns {Promise<object>}
 */
export async function verifyRun({ a, volume, handle, plan, chi, spec, threadsPerWorker, signal, onProgress }) {
  const v = plan.verify;
  const started = performance.now();
  if (!v) return { possible: false, message: 'the plan was made without verify: plan again with verify: true' };
  if (!v.possible) {
    const out = { possible: false, message: v.message };
    if (plan.wholeVolume) Object.assign(out, { exact: true, r: 1, nrmse: 0, maxAbs: 0 });
    return out;
  }
  const check = call(() => rt.M.startVerification(volume, handle));
  let pools = [];
  try {
    const box = check.box();
    const boxPlan = check.boxPlan();
    pools = await startPools([Array.isArray(a.weights) ? a.weights[0] : a.weights], { k: 1, threadsPerWorker, spec });
    await pools[0].ready();
    const progress = onProgress && ((p) => onProgress({ ...p, stage: 'verify' }));
    let boxChi;
    try {
      ({ chi: boxChi } = await runSteps(rt.M, { volume: box, plan: boxPlan, pools, signal, onProgress: progress }));
    } finally {
      box.delete();
      boxPlan.delete();
    }
    const agreement = call(() => check.compare(chi, boxChi));
    const dataConsistency = call(() => check.dataConsistency(chi));
    const boxHeap = Math.max(0, ...pools[0].stats().perWorker.map((w) => w.heapHighWater));
    return {
      possible: true,
      exact: false,
      box: { lo: v.lo, hi: v.hi },
      ...agreement,
      predicted: plan.predictedFidelity,
      dataConsistency,
      workerHeapVsPlan: boxHeap / v.plan.bytesPerTile,
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    check.delete();
    await stopPools(pools);
  }
}
