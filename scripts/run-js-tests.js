#!/usr/bin/env node
// Runs the JavaScript test files in the order given (node --test sorts them by path; scripts/test.sh starts the longest
// first so that none is left running alone at the end), N at a time, each in its own process: TAP on stdout, and each
// file's wall time appended to TIMES as it ends, a line a file: "start end seconds file", in seconds from the run's
// start (start: when the runner takes the file from its queue). Exit 1 when a test fails.
// Usage: node scripts/run-js-tests.js --concurrency N --times TIMES FILE...
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { run } from 'node:test';
import { tap } from 'node:test/reporters';

const { values, positionals: files } = parseArgs({ options: { concurrency: { type: 'string', default: '3' }, times: { type: 'string' } }, allowPositionals: true });
const concurrency = Number(values.concurrency);
if (!Number.isInteger(concurrency) || concurrency < 1) {
  console.error(`run-js-tests: --concurrency must be a whole number >= 1, got ${values.concurrency}`);
  process.exit(2);
}
const stream = run({ files, concurrency, forceExit: true });
stream.on('test:fail', () => {
  process.exitCode = 1;
});
stream.compose(tap).pipe(process.stdout);
if (values.times) {
  // From the runner's events as they happen, written at once: forceExit may end the process before a reporter's last words.
  const t0 = Date.now();
  const started = new Map();
  const entry = (type) => (data) => {
    if (!data.file || path.resolve(data.name) !== data.file) return; // the file's own entry (named as given), not one of its tests
    const now = (Date.now() - t0) / 1000;
    if (type === 'dequeue') return void started.set(data.file, now);
    const first = started.get(data.file) ?? now;
    const cols = [first, now, now - first].map((s) => s.toFixed(0).padStart(4)).join(' ');
    fs.appendFileSync(values.times, `${cols} ${data.file.replace(`${process.cwd()}/`, '')}\n`);
  };
  stream.on('test:dequeue', entry('dequeue'));
  stream.on('test:complete', entry('complete'));
}
