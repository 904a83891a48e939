// node-host.js: the wasm module loaded on a script's own thread.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const DEBUG = new URL('./debug.js', import.meta.url).href;

test('a script that loads the module on its own thread ends when its work does: the thread pool does not keep node running', () => {
  // The module with its two pool threads started, one call, then nothing: node should end by itself.
  const script = `import { loadTesseraModule } from ${JSON.stringify(DEBUG)};
const M = await loadTesseraModule({ pthreadPoolSize: 2 });
console.log(M.PThread.unusedWorkers.length + M.PThread.runningWorkers.length, M.registry().length > 0);`;
  const r = spawnSync(process.execPath, ['--no-experimental-fetch', '--input-type=module', '-e', script], {
    encoding: 'utf8',
    cwd: fileURLToPath(new URL('.', import.meta.url)),
    timeout: 30000,
  });
  assert.equal(r.signal, null, `the script did not end within 30 s (killed by ${r.signal}): the module's threads kept node running`);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), '2 true', 'the module started its two pool threads and answered');
});
