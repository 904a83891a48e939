// Node-only helpers, reached through the package's `#node-host` subpath import (condition `node`), so browser
// bundles never see a node:* module (browsers get browser-host.js). Loaded with platform.js nodeHost().
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

export { fs, http, https, fileURLToPath, pathToFileURL };

const require = createRequire(import.meta.url);

/**
 * Instantiate the CommonJS flavour of Tessera's wasm module (dist/wasm/node).
 * pthreadPoolSize >= 1; wasmBase, when given, is a folder (file: URL or path) holding tessera.js/.wasm/.worker.js.
 */
export function loadNodeModule({ pthreadPoolSize, wasmBase }) {
  const base = wasmBase
    ? wasmBase instanceof URL ? wasmBase : pathToFileURL(String(wasmBase).replace(/\/?$/, '/'))
    : new URL('../../dist/wasm/node/', import.meta.url);
  const main = fileURLToPath(new URL('tessera.js', base));
  if (!fs.existsSync(main)) {
    throw new Error(`Tessera's wasm module is not built (${main} is missing): run \`npm run build\``);
  }
  const create = require(main);
  // Hand over the wasm bytes: with node's global fetch the loader would try to fetch a file path.
  const wasmBinary = fs.readFileSync(fileURLToPath(new URL('tessera.wasm', base)));
  // The pool's threads do not keep node running (Emscripten 3.1.6 leaves them referenced): a process that loads the
  // module on its own thread (a script, a test) ends when its work does. The C++ core joins every thread it starts
  // before its call returns, so nothing is left running when node ends.
  return create({ pthreadPoolSize, wasmBinary }).then((M) => {
    for (const w of [...M.PThread.unusedWorkers, ...M.PThread.runningWorkers]) w.unref();
    return M;
  });
}

/** file: URL of a file next to onnxruntime-web's node entry (its dist/ folder), e.g. 'ort-wasm-simd-threaded.wasm'. */
export function ortDistFile(name) {
  return new URL(name, pathToFileURL(require.resolve('onnxruntime-web'))).href;
}

/** The bytes of a file: URL. Precondition: url is a file: URL (string or URL). */
export function readFileBytes(url) {
  return fs.promises.readFile(new URL(url));
}
