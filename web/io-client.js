// The page's client of the file I/O worker (web/io-worker.js): NIfTI decoding and writing off the main thread,
// through a tiny request/response protocol ({id, op, args} → {id, result} | {id, error}).
import { TesseraError } from '../bindings/js/index.js';

/**
 * Starts the I/O worker and returns io(op, args, transfer) → Promise of the op's result.
 * Errors arrive as TesseraErrors (code from the worker, else 'ReadFailed'); a dead worker fails every pending call.
 * Preconditions: runs on a page (Worker with type 'module').
 */
export function createIoClient() {
  const w = new Worker(new URL('./io-worker.js', import.meta.url), { type: 'module', name: 'tessera-io' });
  let next = 1;
  const pending = new Map();
  w.addEventListener('message', (e) => {
    const p = pending.get(e.data.id);
    if (!p) return;
    pending.delete(e.data.id);
    if (e.data.error) p.reject(new TesseraError(e.data.error.message, e.data.error.code ?? 'ReadFailed'));
    else p.resolve(e.data.result);
  });
  w.addEventListener('error', (e) => {
    e.preventDefault();
    for (const p of pending.values()) p.reject(new TesseraError(`the file worker failed: ${e.message}`, 'Internal'));
    pending.clear();
  });
  return (op, args, transfer = []) =>
    new Promise((resolve, reject) => {
      const id = next++;
      pending.set(id, { resolve, reject });
      w.postMessage({ id, op, args }, transfer);
    });
}
