// Bare import specifiers for the unbundled dev page (scripts/serve.js). A page's import map does not reach its
// module workers (Chromium 156: a worker's `import 'nifti-reader-js'` fails while the page's resolves), and
// packages import each other by bare name (nifti-reader-js imports 'fflate'). So, like a bundler's dev server,
// serve.js rewrites the bare specifiers of the JavaScript it serves to the URLs of web/index.html's import map:
// the page's workers (web/io-worker.js → bindings/js/io/nifti.js → nifti-reader-js → fflate) load the same modules as
// the page. Only exact keys of the import map are rewritten; everything else is served byte for byte.
import fs from 'node:fs';
import path from 'node:path';

/**
 * The import map of an HTML file, each target made an absolute URL path.
 * Precondition: htmlFile lies under root; urlDir is the URL path of its folder (e.g. '/web/').
 * Returns {} when the file has no (valid) <script type="importmap">.
 * @param {string} htmlFile
 * @param {string} urlDir
 * @returns {Record<string, string>}
 */
export function importMapOf(htmlFile, urlDir) {
  let html;
  try {
    html = fs.readFileSync(htmlFile, 'utf8');
  } catch {
    return {};
  }
  const m = /<script\s+type=["']importmap["'][^>]*>([\s\S]*?)<\/script>/i.exec(html);
  if (!m) return {};
  let imports;
  try {
    imports = JSON.parse(m[1]).imports ?? {};
  } catch {
    return {};
  }
  const base = new URL(urlDir, 'http://dev.invalid');
  return Object.fromEntries(Object.entries(imports).map(([k, v]) => [k, new URL(v, base).pathname]));
}

/**
 * `source` with every static or dynamic import of a key of `map` pointed at its URL path.
 * Precondition: source is a JavaScript module's text; map as importMapOf returns it.
 * Returns null when nothing was rewritten.
 * @param {string} source
 * @param {Record<string, string>} map
 * @returns {string|null}
 */
export function rewriteBareImports(source, map) {
  let changed = false;
  const out = source.replace(/(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])([^'"\s]+)\2/g, (all, head, q, spec) => {
    if (!Object.hasOwn(map, spec)) return all;
    changed = true;
    return `${head}${q}${map[spec]}${q}`;
  });
  return changed ? out : null;
}

/**
 * For serve.js: a function from a served file to its rewritten text (a string), or null to serve it as it is.
 * Precondition: root is the served folder; the import map is web/index.html's (re-read when that file changes).
 * @param {string} root
 * @returns {(file: string) => string|null}
 */
export function bareImportRewriter(root) {
  const html = path.join(root, 'web', 'index.html');
  let cached = { mtimeMs: -1, map: {} };
  return (file) => {
    if (!/\.m?js$/i.test(file)) return null;
    let st;
    try {
      st = fs.statSync(html);
    } catch {
      return null;
    }
    if (st.mtimeMs !== cached.mtimeMs) cached = { mtimeMs: st.mtimeMs, map: importMapOf(html, '/web/') };
    const keys = Object.keys(cached.map);
    if (!keys.length) return null;
    const source = fs.readFileSync(file, 'utf8');
    if (!keys.some((k) => source.includes(k))) return null;
    return rewriteBareImports(source, cached.map);
  };
}
