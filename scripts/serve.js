#!/usr/bin/env node
// Static server for Tessera's browser page: serves the repository root with the headers that make the
// page cross-origin isolated (COOP/COEP, needed for SharedArrayBuffer, wasm threads and ONNX Runtime
// Web's multi-threading), correct MIME types, no directory listing and no path outside the root.
//
//   node scripts/serve.js [--port 8080] [--host 127.0.0.1]      (PORT / HOST env work too)
//   import { startServer } from './scripts/serve.js';           (tests: port 0 = ephemeral)
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { bareImportRewriter } from './bare-imports.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export const MIME = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.cjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.onnx': 'application/octet-stream',
  '.nii': 'application/octet-stream',
  '.gz': 'application/gzip',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.svg': 'image/svg+xml',
  '.ico': 'image/x-icon',
  '.txt': 'text/plain; charset=utf-8',
  '.md': 'text/markdown; charset=utf-8',
};

const ISOLATION = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'X-Content-Type-Options': 'nosniff',
};

function send(res, status, body, headers = {}) {
  res.writeHead(status, { ...ISOLATION, 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store', ...headers });
  res.end(body);
}

/**
 * Resolves a request path to a file under root, or null when it would leave the root (.., encoded
 * separators, NUL) or names a dotfile folder such as .git.
 */
export function resolveInside(root, urlPath) {
  let p;
  try {
    p = decodeURIComponent(urlPath);
  } catch {
    return null;
  }
  if (p.includes('\0') || p.includes('\\')) return null;
  const parts = p.split('/').filter(Boolean);
  if (parts.some((s) => s === '..' || s.startsWith('.'))) return null;
  const full = path.resolve(root, ...parts);
  if (full !== root && !full.startsWith(root + path.sep)) return null;
  return full;
}

/**
 * Request handler. overrides: { '/url/path': '/file/on/disk' } served in place of the repository's file
 * (tests use it to serve a stand-in network while web/models/demo-unet.onnx does not exist yet).
 */
export function handler({ root = ROOT, overrides = {}, log = null } = {}) {
  const rewrite = bareImportRewriter(root); // bare imports → the page's import map (workers see none)
  return (req, res) => {
    const started = Date.now();
    res.on('finish', () => log?.(`${req.method} ${req.url} ${res.statusCode} ${Date.now() - started} ms`));
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, 'method not allowed\n', { Allow: 'GET, HEAD' });
    let url;
    try {
      url = new URL(req.url, 'http://localhost');
    } catch {
      return send(res, 400, 'bad request\n');
    }
    if (url.pathname === '/' || url.pathname === '/web') return send(res, 302, '', { Location: '/web/' + url.search });
    // Pages without an icon (the benchmarks' and tests') make the browser ask for one: no content, not a 404 error.
    if (url.pathname === '/favicon.ico' && !overrides[url.pathname]) return send(res, 204, '');
    let file = overrides[url.pathname] ?? resolveInside(root, url.pathname);
    if (!file) return send(res, 404, 'not found\n');
    fs.stat(file, (err, st) => {
      if (!err && st.isDirectory()) {
        if (!url.pathname.endsWith('/')) return send(res, 301, '', { Location: url.pathname + '/' + url.search });
        file = path.join(file, 'index.html');
        return fs.stat(file, (e2, st2) => (e2 || !st2.isFile() ? send(res, 404, 'not found\n') : stream(file, st2)));
      }
      if (err || !st.isFile()) return send(res, 404, 'not found\n');
      stream(file, st);
    });
    function stream(f, st) {
      const type = MIME[path.extname(f).toLowerCase()] ?? 'application/octet-stream';
      const text = rewrite(f);
      if (text !== null) return send(res, 200, req.method === 'HEAD' ? undefined : text, { 'Content-Type': type, 'Cache-Control': 'no-cache' });
      res.writeHead(200, { ...ISOLATION, 'Content-Type': type, 'Content-Length': st.size, 'Cache-Control': 'no-cache' });
      if (req.method === 'HEAD') return res.end();
      fs.createReadStream(f)
        .on('error', () => res.destroy())
        .pipe(res);
    }
  };
}

/**
 * Starts the server. port 0 picks a free port. Resolves to { server, url, port, close() }.
 * @param {{port?: number, host?: string, root?: string, overrides?: Record<string,string>, log?: (line: string) => void}} [o]
 */
export function startServer({ port = 0, host = '127.0.0.1', root = ROOT, overrides = {}, log = null } = {}) {
  const server = http.createServer(handler({ root: path.resolve(root), overrides, log }));
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const a = server.address();
      const url = `http://${host.includes(':') ? `[${host}]` : host}:${a.port}`;
      resolve({
        server,
        url,
        port: a.port,
        close: () =>
          new Promise((r) => {
            server.closeAllConnections?.();
            server.close(() => r());
          }),
      });
    });
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const args = process.argv.slice(2);
  const opt = (name) => {
    const i = args.findIndex((a) => a === `--${name}` || a.startsWith(`--${name}=`));
    if (i < 0) return undefined;
    return args[i].includes('=') ? args[i].split('=').slice(1).join('=') : args[i + 1];
  };
  const port = Number(opt('port') ?? process.env.PORT ?? 8080);
  const host = opt('host') ?? process.env.HOST ?? '127.0.0.1';
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`serve.js: bad port '${opt('port') ?? process.env.PORT}'`);
    process.exit(2);
  }
  const quiet = args.includes('--quiet');
  startServer({ port, host, log: quiet ? null : (l) => console.log(l) }).then(
    ({ url }) => console.log(`Tessera is served at ${url}/web/  (Ctrl-C to stop)`),
    (e) => {
      console.error(`serve.js: cannot listen on ${host}:${port}: ${e.message}`);
      process.exit(1);
    },
  );
}
