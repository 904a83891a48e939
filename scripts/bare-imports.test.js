// scripts/bare-imports.js: the dev server's bare-import rewriting for the page's module workers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { importMapOf, rewriteBareImports, bareImportRewriter } from './bare-imports.js';
import { startServer } from './serve.js';

test('rewriteBareImports: static, side-effect and dynamic imports of import-map keys only', () => {
  const map = { 'nifti-reader-js': '/node_modules/nifti-reader-js/dist/nifti.js', fflate: '/node_modules/fflate/esm/browser.js' };
  const src = [
    "import { readHeader } from 'nifti-reader-js';",
    'import "fflate";',
    "export { x } from './local.js';",
    "const m = await import( 'nifti-reader-js' );",
    "import other from 'other-package';",
    "const s = 'nifti-reader-js';",
  ].join('\n');
  assert.equal(
    rewriteBareImports(src, map),
    [
      "import { readHeader } from '/node_modules/nifti-reader-js/dist/nifti.js';",
      'import "/node_modules/fflate/esm/browser.js";',
      "export { x } from './local.js';",
      "const m = await import( '/node_modules/nifti-reader-js/dist/nifti.js' );",
      "import other from 'other-package';",
      "const s = 'nifti-reader-js';",
    ].join('\n'),
  );
  assert.equal(rewriteBareImports("import x from './x.js';", map), null);
});

test('importMapOf: targets resolved against the page folder; the server serves nifti.js with them', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-bare-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.mkdirSync(path.join(dir, 'web'));
  fs.writeFileSync(path.join(dir, 'web', 'index.html'), '<script type="importmap">{"imports": {"a": "../node_modules/a/index.js", "b": "./b.js"}}</script>');
  assert.deepEqual(importMapOf(path.join(dir, 'web', 'index.html'), '/web/'), { a: '/node_modules/a/index.js', b: '/web/b.js' });
  fs.writeFileSync(path.join(dir, 'm.js'), "import 'a';\n");
  fs.writeFileSync(path.join(dir, 'n.txt'), "import 'a';\n");
  const rewrite = bareImportRewriter(dir);
  assert.equal(rewrite(path.join(dir, 'm.js')), "import '/node_modules/a/index.js';\n");
  assert.equal(rewrite(path.join(dir, 'n.txt')), null);
  assert.deepEqual(importMapOf(path.join(dir, 'missing.html'), '/web/'), {});

  // the repository's page: its workers get nifti.js and nifti-reader-js with resolvable imports
  const srv = await startServer();
  try {
    const nifti = await (await fetch(`${srv.url}/bindings/js/io/nifti.js`)).text();
    assert.match(nifti, /from '\/node_modules\/nifti-reader-js\/dist\/nifti\.js'/);
    const lib = await (await fetch(`${srv.url}/node_modules/nifti-reader-js/dist/nifti.js`)).text();
    assert.match(lib, /from '\/node_modules\/fflate\/esm\/browser\.js'/);
    const res = await fetch(`${srv.url}/bindings/js/io/volume.js`);
    assert.equal(res.headers.get('cross-origin-embedder-policy'), 'require-corp');
    assert.equal(Number(res.headers.get('content-length')), fs.statSync(new URL('../bindings/js/io/volume.js', import.meta.url)).size);
  } finally {
    await srv.close();
  }
});
