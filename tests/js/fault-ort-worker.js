// A test stand-in for bindings/js/runtime/ort-worker.js: the real pool worker, plus faults injected on chosen tiles, so the
// shipped worker and pool carry no test hooks. Node only (the tests that need faults run in node).
//
// Use: faultWorkerUrl({ crashOnTile, stallOnTile, failOnTile, oomOnTile, heapOnTile, heapBytes, crashTimes }) → the URL of a small worker
// module (written to a temp folder: node's Worker drops a URL's query) for the pool's `workerUrl` (WorkerPool) or the
// runtime's `ortWorkerUrl` (createTessera). That module calls install(config) here, then loads the real worker.
// Tiles are the pool's run ids (1, 2, … in the order tiles start). Each fault hits a tile at most crashTimes times
// (default: every time), counted across workers (a retry runs on a fresh worker) in a file of that temp folder.
//   crash: the worker dies after accepting the tile; stall: it never answers (only terminate() ends it);
//   fail: ONNX Runtime reports an error; oom: ONNX Runtime runs out of memory;
//   heap: the worker reports its heap at heapBytes (default 3.6 GB) mid-run, then never answers (a run creeping
//   towards the 4 GiB ceiling, where it would stall).
import { parentPort } from 'node:worker_threads';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const FAULTS = ['crash', 'stall', 'fail', 'oom', 'heap'];

// The temp folders faultWorkerUrl made in this process, removed when it exits.
const made = [];

/** A worker module injecting these faults (call from the test's thread). */
export function faultWorkerUrl(hooks = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-faults-'));
  if (made.push(dir) === 1) process.on('exit', () => made.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));
  const config = { times: hooks.crashTimes ?? null, state: path.join(dir, 'hits'), heapBytes: hooks.heapBytes ?? 3.6e9 };
  for (const kind of FAULTS) config[kind] = [hooks[`${kind}OnTile`] ?? []].flat();
  const file = path.join(dir, 'worker.mjs');
  fs.writeFileSync(
    file,
    `import { install } from ${JSON.stringify(import.meta.url)};\ninstall(${JSON.stringify(config)});\n` +
      `await import(${JSON.stringify(new URL('../../bindings/js/runtime/ort-worker.js', import.meta.url).href)});\n`,
  );
  return pathToFileURL(file);
}

/** Worker side: puts the faults in front of the real worker's message listener (the caller imports it next). */
export function install(config) {
  const ids = Object.fromEntries(FAULTS.map((k) => [k, new Set(config[k])]));
  const times = config.times ?? Infinity;
  const state = config.state;
  let slots = null;
  let slotIndex = 0;

  // How often tile `id` was hit so far, across workers; counts this hit when it is below `times`.
  const hit = (id) => {
    const n = fs.existsSync(state) ? fs.readFileSync(state, 'utf8').split('\n').filter((l) => l === String(id)).length : 0;
    if (n >= times) return false;
    fs.appendFileSync(state, `${id}\n`);
    return true;
  };
  // The pool counts the runs in flight in shared slots (its maxInFlight): a faulted run is in flight too.
  const markRunning = () => {
    // (the real worker's markRunning(true), ort-worker.js)
    if (!slots) return;
    Atomics.store(slots, 1 + slotIndex, 1);
    let n = 0;
    for (let i = 1; i < slots.length; i++) n += Atomics.load(slots, i);
    for (;;) {
      const cur = Atomics.load(slots, 0);
      if (n <= cur || Atomics.compareExchange(slots, 0, cur, n) === cur) break;
    }
  };

  // Wraps the real worker's message listener (registered when it is imported next): a faulted run never reaches
  // it, and no message arrives before it listens.
  const faulted = (msg) => {
    if (msg?.type === 'init' && msg.slots) {
      slots = new Int32Array(msg.slots);
      slotIndex = msg.slotIndex ?? 0;
    }
    if (msg?.type !== 'run') return false;
    const kind = FAULTS.find((k) => ids[k].has(msg.tile));
    if (!kind || !hit(msg.tile)) return false;
    markRunning();
    parentPort.postMessage({ type: 'start', seq: msg.seq, t: performance.timeOrigin + performance.now() });
    if (kind === 'crash') process.exit(1);
    if (kind === 'heap') parentPort.postMessage({ type: 'heap', seq: msg.seq, heapBytes: config.heapBytes });
    if (kind === 'stall' || kind === 'heap') Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
    const oom = kind === 'oom';
    if (slots) Atomics.store(slots, 1 + slotIndex, 0); // no longer running, as the real worker does before an error
    parentPort.postMessage({
      type: 'error',
      seq: msg.seq,
      message: oom ? 'test fault: WebAssembly.Memory(): could not allocate memory' : `test fault: ONNX Runtime error on tile ${msg.tile}`,
      name: oom ? 'RangeError' : 'Error',
      oom,
      heapBytes: 0,
      t: performance.timeOrigin + performance.now(),
    });
    return true;
  };
  const on = parentPort.on.bind(parentPort);
  parentPort.on = (type, listener) => on(type, type === 'message' ? (msg) => faulted(msg) || listener(msg) : listener);
}
