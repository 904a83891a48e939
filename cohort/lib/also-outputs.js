#!/usr/bin/env node
// The pipeline's optional outputs (`tessera-qsm pipeline --also swi,r2star`, written next to χ as <chi>_swi,
// <chi>_minIP, <chi>_R2starmap, <chi>_T2starmap) as BIDS derivatives: each renamed to the name given (KEY=DEST, KEY
// one of swi, minIP, R2starmap, T2starmap) with a JSON sidecar beside it (DEST's name with .json): what it is, its
// units, the step that made it with its parameters and references (the run report's methods text), and the sources.
// Every output named must be there (else exit 1, naming it). Writes go through temp files and renames.
//
//   node cohort/lib/also-outputs.js --chi sub-01_Chimap.nii.gz --report sub-01_Chimap.json swi=sub-01_swi.nii.gz ...
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ALSO_OUTPUTS as SHARED_OUTPUTS } from '../../bindings/js/io/derivatives.js';

class AlsoError extends Error {}

/** What each output is, by its BIDS suffix: its description, units, and the methods text's stage that made it. */
export const ALSO_OUTPUTS = Object.freeze(Object.fromEntries(
  SHARED_OUTPUTS.map((o) => [o.suffix, { description: o.description, units: o.units, stage: o.stage }])));

/** The file the CLI writes for key next to chi: <chi without .nii[.gz]>_<key><ext>. */
export function cliFile(chi, key) {
  const m = /^(.*?)(\.nii(?:\.gz)?)$/i.exec(chi);
  if (!m) throw new AlsoError(`${chi} is not a .nii or .nii.gz file`);
  return `${m[1]}_${key}${m[2]}`;
}

/** The sidecar of an output: its description and units, the step with its parameters and references, the sources. */
export function sidecar(key, report) {
  const what = ALSO_OUTPUTS[key];
  const methods = report?.methods;
  const step = methods?.steps?.find((s) => s.stage === what.stage);
  const out = { Description: `${what.description}, tessera-qsm pipeline`, Units: what.units };
  if (step) {
    out.Method = step.title;
    out.Parameters = step.parameters;
    out.MethodsText = step.sentence;
    out.References = step.references.map((n) => methods.references[n - 1]);
  }
  const inputs = report?.inputs;
  if (inputs) {
    out.Sources = [inputs.phase, inputs.magnitude, inputs.mask].filter(Boolean);
    out.EchoTime = inputs.te;
    out.MagneticFieldStrength = inputs.b0;
  }
  return out;
}

function writeAtomic(file, text) {
  const tmp = path.join(path.dirname(path.resolve(file)), `.${path.basename(file)}.${process.pid}.partial`);
  try {
    fs.writeFileSync(tmp, text);
    fs.renameSync(tmp, file);
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

/** Renames the CLI's outputs next to chi to their derivative names (pairs: [[key, dest]]) and writes each sidecar. */
export function collect(chi, pairs, reportFile) {
  const report = reportFile ? JSON.parse(fs.readFileSync(reportFile, 'utf8')) : null;
  for (const [key, dest] of pairs) {
    if (!ALSO_OUTPUTS[key]) throw new AlsoError(`unknown output '${key}' (outputs: ${Object.keys(ALSO_OUTPUTS).join(', ')})`);
    const src = cliFile(chi, key);
    if (!fs.existsSync(src)) throw new AlsoError(`${src} is missing: was the pipeline run with --also ${key === 'swi' || key === 'minIP' ? 'swi' : 'r2star'}?`);
    fs.mkdirSync(path.dirname(path.resolve(dest)), { recursive: true });
    writeAtomic(dest.replace(/\.nii(\.gz)?$/i, '.json'), `${JSON.stringify(sidecar(key, report), null, 2)}\n`);
    fs.renameSync(src, dest);
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  let chi;
  let report;
  const pairs = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--chi') chi = args[++i];
    else if (args[i] === '--report') report = args[++i];
    else pairs.push(args[i].split(/=(.*)/s).slice(0, 2));
  }
  let code = 0;
  try {
    if (!chi || !pairs.length || pairs.some((p) => p.length !== 2 || !p[1])) throw new AlsoError('usage: also-outputs.js --chi CHI.nii.gz [--report r.json] KEY=DEST ...');
    collect(chi, pairs, report);
  } catch (e) {
    process.stderr.write(`error: ${e instanceof AlsoError ? e.message : e.stack}\n`);
    code = 1;
  }
  process.exit(code);
}
