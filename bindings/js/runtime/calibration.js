// calibrate(): the network's memory cost measured in fresh ONNX Runtime workers (calibrate.js; the fit in C++), kept
// per (weights sha256, model, divisor, threads) for the runtime's lifetime: calibrate() and the planning of a spec
// without bytesPerVoxel (plan(), invert(), the pipeline's network stage: network-plan.js) share it.
import { TesseraError } from '../errors.js';
import { calibrateNetwork } from '../calibrate.js';
import { rt, call, postProgress, heapGuardBytes, threadsPerWorker } from './context.js';
import { dropSessions } from './sessions.js';
import { firstWeights, weightsSha, weightsNeeded } from './graphs.js';

const kept = new Map(); // key → Promise<calibration>

/**
 * The calibration of a.weights (its first file) for a.model or a.spec and a.threadsPerWorker: the kept one, else
 * measured (calibrateNetwork) and kept. a.fresh: measure again (the kept one is replaced). progress: post the
 * measured points to request id. A failed or cancelled calibration is not kept; one cancelled by another request is
 * measured again for this one. a.weightsSha instead of a.weights: the kept one only (else weightsNeeded).
 */
export async function calibrated(a, id, { progress = false } = {}) {
  const w = firstWeights(a.weights);
  if (!w && a.weightsSha === undefined) throw new TesseraError('calibrate needs the network\'s weights (ONNX bytes)', 'InvalidArgument');
  const key = JSON.stringify([w ? await weightsSha(w) : a.weightsSha, a.model ?? '', a.spec?.divisor ?? '', a.threadsPerWorker ?? '']);
  const have = a.fresh ? undefined : kept.get(key);
  if (have) {
    try {
      return await have;
    } catch (e) {
      if (e?.name !== 'AbortError') throw e;
      // another request cancelled it: measured below for this one
    }
  }
  if (!w) throw weightsNeeded('the calibration');
  const p = calibrate({ ...a, weights: w }, id, { progress });
  kept.set(key, p);
  p.catch(() => kept.get(key) === p && kept.delete(key));
  return p;
}

/**
 * {fixedBytes, bytesPerVoxel, points, seconds, fit} of the weights a.weights (a.model: the registry's entry gives
 * the divisor, channels and inputs; else a.spec). Cancelled by request id; progress: each point posted to it.
 */
async function calibrate(a, id, { progress }) {
  const { M, options } = rt;
  const entry = a.model ? call(() => M.model(a.model)) : null;
  const divisor = entry?.divisor ?? a.spec?.divisor ?? 1;
  call(() => M.patchFit({ core: 1, halo: 0 }, { divisor, bytesPerVoxel: 1 })); // the schema checks the divisor
  if (!(a.weights?.byteLength > 0)) throw new TesseraError('calibrate needs the network\'s weights (ONNX bytes)', 'InvalidArgument');
  const controller = new AbortController();
  rt.running.set(id, controller);
  try {
    await dropSessions(); // its fresh workers measure the heap: no other worker holds memory meanwhile
    const threads = threadsPerWorker(a);
    const module = {
      calibrationEdges: (d, n) => call(() => M.calibrationEdges(d, n)),
      calibrationSlopeMeasured: (p) => call(() => M.calibrationSlopeMeasured(p)),
      fitCalibration: (p) => call(() => M.fitCalibration(p)),
    };
    let done = 0;
    const result = await calibrateNetwork({
      M: module,
      model: a.weights,
      divisor,
      threads,
      channels: entry?.inputChannels ?? 1,
      inputRoles: entry?.inputs?.length > 1 ? entry.inputs : undefined,
      poolOptions: { ortWasmPaths: options.ortWasmPaths, ortModuleUrl: options.ortModuleUrl, workerUrl: options.ortWorkerUrl, heapGuardBytes: heapGuardBytes() },
      signal: controller.signal,
      onPoint: (p) => progress && postProgress(id, { stage: 'calibrate', done: ++done, edge: p.edge, heapBytes: p.heapBytes }),
    });
    if (controller.signal.aborted) throw new DOMException('the calibration was cancelled', 'AbortError');
    return result;
  } catch (e) {
    if (controller.signal.aborted || e?.name === 'AbortError') throw new DOMException('the calibration was cancelled', 'AbortError');
    throw new TesseraError(`calibration failed: ${e?.message ?? e}`, e?.code ?? 'RunnerFailed');
  } finally {
    rt.running.delete(id);
  }
}
