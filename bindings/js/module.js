// Loads the Embind module: the CommonJS flavour in node (node-host.js), the ES-module flavour in browsers.
import { isNode, nodeHost } from './platform.js';

/**
 * Instantiate Tessera's wasm module.
 * pthreadPoolSize: the threads the C++ loops and FFTs may add to the calling one (fixed when the module starts; a
 * thread the full pool refuses is simply not used).
 * wasmBase, when given, is the folder (URL or path) holding tessera.js/.wasm/.worker.js of this platform.
 * @param {{pthreadPoolSize?: number, wasmBase?: string|URL}} [o]
 */
export async function loadTesseraModule({ pthreadPoolSize = 4, wasmBase } = {}) {
  if (isNode) return (await nodeHost()).loadNodeModule({ pthreadPoolSize, wasmBase });
  // Literal `new URL('…', import.meta.url)`s: bundlers copy these three files into the build and rewrite the URLs.
  // The ES module is loaded, not bundled: its pthread workers import it again by URL (mainScriptUrlOrBlob).
  // `?no-inline`: Vite would inline the 3 kB pthread worker as a data: URL, an opaque origin that cannot share the
  // module's memory (servers ignore the query).
  const here = import.meta.url; // a relative wasmBase resolves against this module (webpack warns on new URL(x, import.meta.url))
  const base = wasmBase === undefined ? null : new URL(wasmBase, here);
  const files = base
    ? { js: new URL('tessera.js', base), wasm: new URL('tessera.wasm', base), worker: new URL('tessera.worker.js', base) }
    : {
        js: new URL('../../dist/wasm/web/tessera.js', import.meta.url),
        wasm: new URL('../../dist/wasm/web/tessera.wasm', import.meta.url),
        worker: new URL('../../dist/wasm/web/tessera.worker.js?no-inline', import.meta.url),
      };
  const main = files.js.href;
  const { default: create } = await import(/* @vite-ignore */ /* webpackIgnore: true */ main);
  const locateFile = (p) => (p.endsWith('.wasm') ? files.wasm.href : p.endsWith('.worker.js') ? files.worker.href : new URL(p, main).href);
  return create({ pthreadPoolSize, locateFile, mainScriptUrlOrBlob: main });
}
