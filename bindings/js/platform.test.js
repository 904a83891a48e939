// platform.js on node: the runtime's worker threads start from any way node was started.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const INDEX = new URL('./index.js', import.meta.url).href;

test('a runtime starts from `node --input-type=module -e` (its workers do not take --input-type) and from `--input-type module`', () => {
  const script = `import { createTessera } from ${JSON.stringify(INDEX)};
const t = await createTessera({ workers: 1 });
const ids = (await t.registry()).map((m) => m.id);
await t.terminate();
console.log(ids.includes('demo-unet') ? 'ran' : 'no registry');`;
  for (const flags of [['--input-type=module'], ['--input-type', 'module']]) {
    const r = spawnSync(process.execPath, ['--no-experimental-fetch', ...flags, '-e', script], { encoding: 'utf8', cwd: fileURLToPath(new URL('.', import.meta.url)) });
    assert.equal(r.status, 0, `${flags.join(' ')}: ${r.stderr}`);
    assert.equal(r.stdout.trim(), 'ran', r.stderr);
  }
});
