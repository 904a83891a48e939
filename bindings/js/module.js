// Loads the Embind module: the CommonJS flavour in node, the ES-module flavour in browsers.
import { isNode } from './platform.js';

/**
 * Instantiate Tessera's wasm module.
 * pthreadPoolSize >= driver thread + tiles in flight (the pool is fixed when the module starts).
 * wasmBase, when given, is the folder (URL or path) holding tessera.js/.wasm/.worker.js of this platform.
 * @param {{pthreadPoolSize?: number, wasmBase?: string|URL}} [o]
 */
export async function loadTesseraModule({ pthreadPoolSize = 4, wasmBase } = {}) {
  if (isNode) {
    const { createRequire } = await import('node:module');
    const { fileURLToPath, pathToFileURL } = await import('node:url');
    const fs = await import('node:fs');
    const base = wasmBase
      ? wasmBase instanceof URL ? wasmBase : pathToFileURL(String(wasmBase).replace(/\/?$/, '/'))
      : new URL('../../dist/wasm/node/', import.meta.url);
    const main = fileURLToPath(new URL('tessera.js', base));
    if (!fs.existsSync(main)) {
      throw new Error(`Tessera's wasm module is not built (${main} is missing): run \`npm run build\``);
    }
    const create = createRequire(import.meta.url)(main);
    // Hand over the wasm bytes: with node's global fetch the loader would try to fetch a file path.
    const wasmBinary = fs.readFileSync(fileURLToPath(new URL('tessera.wasm', base)));
    return create({ pthreadPoolSize, wasmBinary });
  }
  const base = new URL(wasmBase ?? '../../dist/wasm/web/', import.meta.url);
  const main = new URL('tessera.js', base).href;
  const { default: create } = await import(main);
  return create({ pthreadPoolSize, locateFile: (p) => new URL(p, base).href, mainScriptUrlOrBlob: main });
}
