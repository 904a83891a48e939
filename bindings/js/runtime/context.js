// The driver worker's state, shared by its modules (driver-worker.js routes the messages to them): the Tessera wasm
// module, createTessera's options, the runs in progress and the pools holding live ONNX Runtime workers.
import { hardwareConcurrency } from '../platform.js';
import { callModule } from '../errors.js';

export const rt = {
  M: null, // the Tessera module (init)
  options: {}, // createTessera's options (init)
  port: null, // the port to the main thread (driver-worker.js)
  running: new Map(), // request id → AbortController (cancel)
  livePools: new Set(), // pools of runs in progress (status())
};

/** Runs f (a call into the module); a module error becomes a TesseraError. */
export const call = callModule;

/** Posts a progress event of request id to the main thread. */
export function postProgress(id, progress) {
  rt.port.post({ id, progress });
}

/** The cores this runtime may use: createTessera's hardwareThreads, else the machine's. */
export function hardwareThreads() {
  return Math.max(1, rt.options.hardwareThreads ?? hardwareConcurrency());
}

/** The heap guard of the ONNX Runtime workers: createTessera's workerHeapGuardBytes, else the C++ core's. */
export function heapGuardBytes() {
  return rt.options.workerHeapGuardBytes ?? call(() => rt.M.limits()).workerHeapGuardBytes;
}

/** ONNX Runtime threads of a worker outside a plan (probes, calibration): a's, createTessera's, else the schema's default. */
export function threadsPerWorker(a = {}) {
  return a.threadsPerWorker ?? rt.options.threadsPerWorker ?? call(() => rt.M.schema()).find((o) => o.name === 'threadsPerWorker').default;
}
