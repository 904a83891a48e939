// The documentation names only what exists: every relative link of README.md, docs/ and bench/README.md resolves (its
// #anchor included, when it points into a Markdown file), every backticked repository path exists, and the README
// stays a front door (at most 220 lines).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync, existsSync } from 'node:fs';
import { join, dirname, relative, basename } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const SKIP_DIRS = new Set(['.git', 'node_modules', 'build', 'dist', 'test-artifacts', '.cache', '.snakemake']);

/** Every file and folder of the repository (relative, '/'-separated; folders end in '/'), build outputs left out. */
function walk(dir = root, out = []) {
  for (const name of readdirSync(dir)) {
    if (SKIP_DIRS.has(name)) continue;
    const full = join(dir, name);
    const rel = relative(root, full).split('\\').join('/');
    if (statSync(full).isDirectory()) {
      out.push(`${rel}/`);
      walk(full, out);
    } else out.push(rel);
  }
  return out;
}

/** The Markdown files the checks cover. */
function docFiles() {
  const found = ['README.md', 'bench/README.md'];
  const docs = join(root, 'docs');
  if (existsSync(docs)) for (const p of walk(docs)) if (p.endsWith('.md')) found.push(p);
  return found.filter((f) => existsSync(join(root, f)));
}

/** Text outside fenced code blocks. */
const prose = (text) => text.replace(/^```[\s\S]*?^```/gm, '');

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
const slug = (heading) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[`*_]/g, '')
    .replace(/[^\p{L}\p{N} -]/gu, '')
    .replace(/ /g, '-');

/** The anchors a Markdown file defines: its headings' slugs and its <a id="..."> names. */
function anchors(file) {
  const text = readFileSync(join(root, file), 'utf8');
  const out = new Set();
  for (const m of prose(text).matchAll(/^#{1,6} (.+)$/gm)) out.add(slug(m[1]));
  for (const m of text.matchAll(/<a id="([^"]+)"/g)) out.add(m[1]);
  return out;
}

const PATH_TOKEN = /^[A-Za-z0-9_.\-/]+$/;
const CHECKED_EXT = /\.(h|cpp|md)$/; // a bare file name with one of these must exist somewhere in the tree
const EXTERNAL = /^(node_modules|dist|build)\//; // installed packages and build outputs

test('every relative link in README.md, docs/ and bench/README.md resolves, anchors included', () => {
  const problems = [];
  for (const file of docFiles()) {
    const text = prose(readFileSync(join(root, file), 'utf8'));
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1];
      if (/^[a-z]+:/.test(target)) continue; // http:, https:, mailto:
      const [path, anchor] = target.split('#');
      const resolved = path === '' ? file : relative(root, join(root, dirname(file), path)).split('\\').join('/');
      if (!existsSync(join(root, resolved))) {
        problems.push(`${file}: link to ${target}: ${resolved} does not exist`);
        continue;
      }
      if (anchor && resolved.endsWith('.md') && !anchors(resolved).has(anchor)) {
        problems.push(`${file}: link to ${target}: ${resolved} has no anchor #${anchor}`);
      }
    }
  }
  assert.deepEqual(problems, []);
});

test('every backticked repository path in README.md, docs/ and bench/README.md exists', () => {
  const tree = walk();
  const names = new Set(tree.map((p) => basename(p)));
  const top = new Set(tree.filter((p) => /^[^/]+\/$/.test(p)).map((p) => p.slice(0, -1)));
  const problems = [];
  for (const file of docFiles()) {
    const text = prose(readFileSync(join(root, file), 'utf8'));
    for (const m of text.matchAll(/`([^`\n]+)`/g)) {
      const token = m[1];
      if (!PATH_TOKEN.test(token) || EXTERNAL.test(token) || token.startsWith('.')) continue;
      if (token.includes('/')) {
        // A path from the root, or the tail of one (e.g. runtime/pool.js, tessera/engine/plan.h).
        const bare = token.replace(/\/$/, '');
        const ok = tree.some((p) => [bare, `${bare}/`].some((t) => p === t || p.endsWith(`/${t}`)));
        const looksLikePath = /\.[a-z]+$|\/$/.test(token) || top.has(token.split('/')[0]);
        if (!ok && looksLikePath) problems.push(`${file}: \`${token}\` is not a file or folder of the repository`);
      } else if (CHECKED_EXT.test(token) && !names.has(token)) {
        problems.push(`${file}: \`${token}\` is no file of the repository`);
      }
    }
  }
  assert.deepEqual(problems, []);
});

test('README.md is a front door: at most 220 lines, with npm install tessera-qsm in its first 40', () => {
  const lines = readFileSync(join(root, 'README.md'), 'utf8').split('\n');
  assert.ok(lines.length <= 220, `README.md has ${lines.length} lines; move the detail to docs/`);
  assert.ok(
    lines.slice(0, 40).some((l) => l.includes('npm install tessera-qsm')),
    'README.md: `npm install tessera-qsm` belongs on the first screen',
  );
});
