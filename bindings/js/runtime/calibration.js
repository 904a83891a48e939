// calibrate(): the network's memory cost measured in fresh ONNX Runtime workers (calibrate.js; the fit in C++).
import { TesseraError } from '../errors.js';
import { calibrateNetwork } from '../calibrate.js';
import { rt, call, postProgress, heapGuardBytes, threadsPerWorker } from './context.js';
import { dropSessions } from './sessions.js';

/**
 * {fixedBytes, bytesPerVoxel, points, seconds, fit} of the weights a.weights (a.model: the registry's entry gives
 * the divisor, channels and inputs; else a.spec). Cancelled by request id.
 */
export async function calibrate(a, id) {
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
      onPoint: (p) => postProgress(id, { stage: 'calibrate', done: ++done, edge: p.edge, heapBytes: p.heapBytes }),
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
