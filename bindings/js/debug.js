// tessera-qsm/debug: the hooks the tests and benchmarks use, kept out of the package's API (index.js). Nothing here is
// needed to run Tessera, and none of it is stable: the raw Embind module and a runtime's internals.
//
//   loadTesseraModule(o)  → the wasm module itself (Embind): forwardField, valueTypes, requestParses, the FieldRun, ...
//   counters(tessera)     → {requestParses, graphReads}: the requests its C++ core and the ONNX graphs its worker have read
//   pendingCalls(tessera) → calls made to the runtime and not yet answered
//   forgetSpeeds(tessera) → the runtime forgets its measured speeds (measureSpeed measures again)
export { loadTesseraModule } from './module.js';

/**
 * The runtime's own counters since it started: requestParses, how many requests its C++ core has read (parsed);
 * graphReads, how many ONNX graphs its driver worker has read. tessera: a runtime from createTessera().
 * @returns {Promise<{requestParses: number, graphReads: number}>}
 */
export function counters(tessera) {
  return tessera._call('counters');
}

/** Calls made to the runtime and not yet answered (a run, a plan, ...). tessera: a runtime from createTessera(). */
export function pendingCalls(tessera) {
  return tessera._pending.size;
}

/**
 * Forgets the speeds the runtime measured (measureSpeed keeps them for the runtime's lifetime), so that the next
 * measureSpeed, or a plan or run with measureSpeed: true, measures again. tessera: a runtime from createTessera().
 */
export function forgetSpeeds(tessera) {
  return tessera._call('forgetSpeeds');
}
