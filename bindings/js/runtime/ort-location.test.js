// Where the pool's workers find ONNX Runtime Web (ort-location.js), in node.
import test from 'node:test';
import assert from 'node:assert/strict';
import { ortModuleUrlOf, sharedOrtWasm, gpuBuildBeside } from './ort-location.js';

test('node: the workers import onnxruntime-web themselves unless told a URL; its wasm is compiled once for all', async () => {
  assert.equal(await ortModuleUrlOf(undefined), undefined);
  assert.equal(await ortModuleUrlOf('https://cdn.example/ort.wasm.min.mjs'), 'https://cdn.example/ort.wasm.min.mjs');
  const a = await sharedOrtWasm(ortModuleUrlOf(undefined));
  assert.ok(a instanceof WebAssembly.Module);
  assert.strictEqual(await sharedOrtWasm(Promise.resolve('onnxruntime-web')), a, 'one compilation per wasm URL');
  assert.ok(WebAssembly.Module.exports(a).length > 0);
});

test('a build whose wasm URL is unknown, or that fails to load, is compiled by each worker (null)', async () => {
  assert.equal(await sharedOrtWasm(Promise.resolve('https://cdn.example/ort.webgpu.min.mjs')), null);
  assert.equal(await sharedOrtWasm(Promise.resolve('file:///nonexistent/dist/ort.wasm.min.mjs')), null);
  assert.equal(await sharedOrtWasm(Promise.reject(new Error('no module'))), null);
});

test('the GPU build beside a plain ort.wasm*.mjs URL; none beside a bare name or another build', () => {
  assert.equal(gpuBuildBeside('https://x.test/dist/ort.wasm.min.mjs'), 'https://x.test/dist/ort.all.min.mjs');
  assert.equal(gpuBuildBeside('/node_modules/onnxruntime-web/dist/ort.wasm.mjs'), '/node_modules/onnxruntime-web/dist/ort.all.min.mjs');
  assert.equal(gpuBuildBeside('onnxruntime-web'), undefined);
  assert.equal(gpuBuildBeside('https://x.test/dist/ort.webgpu.min.mjs'), undefined);
  assert.equal(gpuBuildBeside(undefined), undefined);
});
