// What browsers (and browser bundles) get for the package's `#node-host` subpath import: the same names as
// node-host.js, none usable. platform.js only loads it under node, so nothing here runs in a working setup.
const nodeOnly = (what) => () => {
  throw new Error(`${what} is only available under node`);
};

export const fs = null;
export const http = null;
export const https = null;
export const fileURLToPath = nodeOnly('fileURLToPath');
export const pathToFileURL = nodeOnly('pathToFileURL');
export const loadNodeModule = nodeOnly('loading the node flavour of the wasm module');
export const ortDistFile = nodeOnly('locating onnxruntime-web on disk');
export const readFileBytes = nodeOnly('reading files');
