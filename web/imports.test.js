// The page is a user of the package: its modules reach bindings/js only through the package's entry (index.js),
// so everything the page needs is exported (and typed) for any web app, and nothing internal is a hidden API.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

const WEB = path.dirname(new URL(import.meta.url).pathname);
const ENTRY = path.resolve(WEB, '../bindings/js/index.js');
const PACKAGE = path.resolve(WEB, '../bindings/js');

/** The page's own modules (tests excluded), paths relative to web/. */
function pageModules(dir = WEB) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'models' ? [] : pageModules(p);
    return e.name.endsWith('.js') && !e.name.endsWith('.test.js') ? [p] : [];
  });
}

/** The specifiers a module imports: static `from '…'`, side-effect `import '…'`, `import('…')` and `new URL('…', import.meta.url)`. */
function specifiers(source) {
  const out = [];
  for (const re of [/\bfrom\s+'([^']+)'/g, /\bimport\s+'([^']+)'/g, /\bimport\(\s*'([^']+)'/g, /new URL\(\s*'([^']+)',\s*import\.meta\.url/g]) {
    for (const m of source.matchAll(re)) out.push(m[1]);
  }
  return out;
}

test('the page imports the package only through its entry, bindings/js/index.js', () => {
  const modules = pageModules();
  assert.ok(modules.length > 10, `found the page's modules (${modules.length})`);
  const wrong = [];
  let throughEntry = 0;
  for (const file of modules) {
    for (const s of specifiers(fs.readFileSync(file, 'utf8'))) {
      const target = s.startsWith('/') ? path.resolve(WEB, '..', `.${s}`) : s.startsWith('.') ? path.resolve(path.dirname(file), s) : null;
      if (!target || !target.startsWith(PACKAGE + path.sep)) continue;
      if (target === ENTRY) throughEntry++;
      else wrong.push(`${path.relative(WEB, file)} imports ${s}`);
    }
  }
  assert.deepEqual(wrong, [], 'import these from bindings/js/index.js (export them there if they are missing)');
  assert.ok(throughEntry > 3, `the page uses the package (${throughEntry} imports of index.js)`);
});

test('what the page takes from the entry is exported by it', async () => {
  const entry = await import('../bindings/js/index.js');
  const missing = [];
  for (const file of pageModules()) {
    const source = fs.readFileSync(file, 'utf8');
    for (const m of source.matchAll(/import\s*\{([^}]+)\}\s*from\s*'([^']+)'/g)) {
      if (path.resolve(path.dirname(file), m[2]) !== ENTRY) continue;
      for (const name of m[1].split(',').map((n) => n.trim().split(/\s+as\s+/)[0]).filter(Boolean)) {
        if (!(name in entry)) missing.push(`${path.relative(WEB, file)}: ${name}`);
      }
    }
  }
  assert.deepEqual(missing, []);
});
