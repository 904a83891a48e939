#!/usr/bin/env node
// Fetches one network weights file for cohort/Snakefile, once for the whole cohort: from a URL or a local file,
// checked against the byte size and sha256 the registry (or the config) gives, written as a temp file and renamed.
// A file whose registry entry has no sha256 (the iQSM family) is taken as it is, and its sha256 is printed so it
// can be pinned in the config (weights: {id: {source: ..., sha256: ...}}).
//
//   node cohort/lib/weights.js --source URL|FILE --out FILE [--bytes N] [--sha256 HEX]
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const { loadModel, sha256Hex } = await import(pathToFileURL(path.join(root, 'bindings/js/index.js')).href);

let code = 0;
try {
  const { values: o } = parseArgs({ options: { source: { type: 'string' }, out: { type: 'string' }, bytes: { type: 'string' }, sha256: { type: 'string' } } });
  if (!o.source || !o.out) throw Object.assign(new Error('usage: weights.js --source URL|FILE --out FILE [--bytes N] [--sha256 HEX]'), { code: 'Usage' });
  const expectedBytes = Number(o.bytes) > 0 ? Number(o.bytes) : undefined;
  const sha256 = o.sha256 || undefined;
  // loadModel takes a URL or, in node, a path; it checks the size and the sha256 when given.
  const bytes = await loadModel(/^[a-z]+:\/\//i.test(o.source) ? o.source : path.resolve(o.source), { expectedBytes, sha256 });
  const got = await sha256Hex(bytes);
  fs.mkdirSync(path.dirname(path.resolve(o.out)), { recursive: true });
  const tmp = path.join(path.dirname(path.resolve(o.out)), `.${path.basename(o.out)}.${process.pid}.partial`);
  try {
    fs.writeFileSync(tmp, bytes);
    fs.renameSync(tmp, o.out);
  } finally {
    fs.rmSync(tmp, { force: true });
  }
  const how = sha256 ? 'sha256 verified' : 'NOT verified: no sha256 known for it (pin one in the config: weights: {<id>: {source: ..., sha256: ...}})';
  process.stderr.write(`weights ${path.basename(o.out)}: ${bytes.byteLength} bytes from ${o.source}, sha256 ${got}, ${how}\n`);
} catch (e) {
  process.stderr.write(`error: ${e.message}\n`);
  code = 1;
}
process.exit(code);
