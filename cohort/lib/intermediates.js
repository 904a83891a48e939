#!/usr/bin/env node
// The intermediates of a `tessera-qsm pipeline --keep-intermediates DIR` run as derivatives: each of DIR's files
// renamed to the name given (STAGE=DEST, STAGE the CLI's file name without .nii.gz), the echoes' unwrapped phases
// (unwrapped_phase_echo<n>) stacked into one 4D file (unwrapped_phase=DEST, echoes along the 4th dim, stored values
// kept byte for byte), the run report's "intermediates" set to {stage: file name}, and DIR removed. Every stage named
// must be in DIR (else exit 1, naming it). Writes go through temp files and renames.
//
//   node cohort/lib/intermediates.js --from DIR [--report r.json] mask=sub-01_desc-brain_mask.nii.gz ...
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { read, stack, StackError } from './stack-echoes.js';

class IntermediatesError extends Error {}

function writeAtomic(file, bytes) {
  const tmp = path.join(path.dirname(path.resolve(file)), `.${path.basename(file)}.${process.pid}.partial`);
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  try {
    fs.writeFileSync(tmp, bytes);
    fs.renameSync(tmp, file);
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

export function collect(from, pairs, report) {
  const names = {};
  for (const [stage, dest] of pairs) {
    if (stage === 'unwrapped_phase') {
      const echoes = fs.readdirSync(from).map((n) => /^unwrapped_phase_echo(\d+)\.nii\.gz$/.exec(n)).filter(Boolean).sort((a, b) => a[1] - b[1]);
      if (!echoes.length) throw new IntermediatesError(`${from} holds no unwrapped_phase_echo<n>.nii.gz`);
      writeAtomic(dest, zlib.gzipSync(stack(echoes.map((m) => read(path.join(from, m[0])))), { level: 6 }));
    } else {
      const src = path.join(from, `${stage}.nii.gz`);
      if (!fs.existsSync(src)) throw new IntermediatesError(`${from} holds no ${stage}.nii.gz (the pipeline's intermediates: ${fs.readdirSync(from).join(', ')})`);
      fs.mkdirSync(path.dirname(path.resolve(dest)), { recursive: true });
      fs.renameSync(src, dest);
    }
    names[stage] = path.basename(dest);
  }
  if (report) {
    const r = JSON.parse(fs.readFileSync(report, 'utf8'));
    r.intermediates = names;
    writeAtomic(report, `${JSON.stringify(r, null, 2)}\n`);
  }
  fs.rmSync(from, { recursive: true, force: true });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  let from;
  let report;
  const pairs = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--from') from = args[++i];
    else if (args[i] === '--report') report = args[++i];
    else pairs.push(args[i].split(/=(.*)/s).slice(0, 2));
  }
  let code = 0;
  try {
    if (!from || !pairs.length || pairs.some((p) => p.length !== 2 || !p[1])) throw new IntermediatesError('usage: intermediates.js --from DIR [--report r.json] STAGE=DEST ...');
    collect(from, pairs, report);
  } catch (e) {
    process.stderr.write(`error: ${e instanceof IntermediatesError || e instanceof StackError ? e.message : e.stack}\n`);
    code = 1;
  }
  process.exit(code);
}
