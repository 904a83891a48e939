#!/usr/bin/env node
// Write the architecture-faithful stand-in networks (scripts/standins.js) as .onnx files.
// Usage: node scripts/make_standins.js OUT_DIR [--only ID] [--base N] [--seed S]
//   default: every net of STANDINS at its published size (xQSM-shaped ~21 MB, QSMnet-shaped ~400 MB,
//   iQSM- and iQSM+-shaped ~17 MB each; the last two take wrapped phase: inputs STANDINS[id].inputs), then the
//   IR2QSM-shaped net (scripts/standins-ir2qsm.js, ~40 MB) and the physics-loop nets (scripts/standins-loops.js:
//   lpcnn and modl-qsm ~1.8 MB, nextqsm-bf ~113 MB, nextqsm-vjp ~42 MB; modl-qsm takes and gives 2 channels).
// The files are generated data: keep them out of git (e.g. OUT_DIR=/tmp/standins).
import { parseArgs } from 'node:util';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { STANDINS as BASE_STANDINS, inspectModel } from './standins.js';
import { IR2QSM_STANDINS } from './standins-ir2qsm.js';
import { LOOP_STANDINS } from './standins-loops.js';

const STANDINS = { ...BASE_STANDINS, ...IR2QSM_STANDINS, ...LOOP_STANDINS };

const { values: a, positionals } = parseArgs({
  allowPositionals: true,
  options: { only: { type: 'string' }, base: { type: 'string' }, seed: { type: 'string' } },
});
if (positionals.length !== 1) {
  console.error(`usage: node scripts/make_standins.js OUT_DIR [--only ${Object.keys(STANDINS).join('|')}] [--base N] [--seed S]`);
  process.exit(2);
}
const outDir = positionals[0];
mkdirSync(outDir, { recursive: true });
const ids = a.only ? [a.only] : Object.keys(STANDINS);
for (const id of ids) {
  const s = STANDINS[id];
  if (!s) throw new Error(`unknown stand-in '${id}' (known: ${Object.keys(STANDINS).join(', ')})`);
  const opts = {};
  if (a.base) opts.base = Number(a.base);
  if (a.seed) opts.seed = Number(a.seed);
  const t0 = performance.now();
  const bytes = s.build(opts);
  const info = inspectModel(bytes);
  const formula = s.params(opts);
  const file = path.join(outDir, a.base ? s.file.replace('.onnx', `-base${a.base}.onnx`) : s.file);
  writeFileSync(file, bytes);
  const sha = createHash('sha256').update(bytes).digest('hex');
  console.log(
    `${file}: ${bytes.byteLength} bytes, sha256 ${sha}, ${info.nodes} nodes, ` +
      `params trainable ${info.trainable} (formula ${formula.trainable}), stored ${info.stored} (formula ${formula.stored}), ` +
      `divisor ${s.divisor}, ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
  console.log(`  ops: ${JSON.stringify(info.ops)}`);
}
