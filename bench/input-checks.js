// The plausibility bounds of tessera/common/input_checks.h and the pipeline's mask check, measured on many inputs: the
// generated heads of the background study (their JSON), the real multi-echo slab ../shared/data/romeo-small and the
// vendor field maps ../shared/data/dcm-fieldmaps (GE and Philips write B0 in Hz, Siemens a phase difference of two
// echoes), each through the pipeline with every background removal (build/native/tessera_background_study, real-scan
// mode: the brain mask made from the magnitude).
//
// Quantities: the total field's and the local field's 1st/99th percentiles inside the fit and local masks (ppm; the
// bounds kMaxTotalFieldPpm and kMaxLocalFieldPpm), the share of the mask at or below the magnitude's tissue threshold
// (kMaskBackgroundWarnShare / RefuseShare), the shares the echo fit and the background removal leave out
// (kLeftOutWarnShare); for a total field, its reach if it were rad/s declared as Hz (2π × its reach in ppm).
//
// Command (the run reported):
//   cmake --build build/native -j2 --target tessera_background_study
//   node bench/background-study.js --json bench/background-study.json
//   node bench/input-checks.js --study bench/background-study.json
// Options: [--data ../shared/data] [--bin build/native/tessera_background_study] [--threads 2] [--json FILE]
import { parseArgs } from 'node:util';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { values: args } = parseArgs({
  options: {
    study: { type: 'string', default: 'bench/background-study.json' },
    data: { type: 'string', default: '../shared/data' },
    bin: { type: 'string', default: 'build/native/tessera_background_study' },
    threads: { type: 'string', default: '2' },
    json: { type: 'string' },
  },
});

/** dcm2niix (its wasm build, as the page runs it) on a DICOM folder: { name: path } of its .nii outputs in dir. */
async function convert(folder, dir) {
  const { default: Module } = await import('../node_modules/@niivue/dcm2niix/dist/dcm2niix.js');
  const mod = await Module({ print: () => {}, printErr: () => {} });
  mod.FS.mkdir('/in');
  mod.FS.mkdir('/out');
  for (const f of fs.readdirSync(folder, { recursive: true })) {
    const p = path.join(folder, f);
    if (fs.statSync(p).isFile()) mod.FS.writeFile(`/in/${f.replaceAll('/', '_')}`, fs.readFileSync(p));
  }
  const rc = mod.callMain(['-o', '/out', '-z', 'n', '-b', 'y', '-f', 'series%s_%d', '/in']);
  if (rc !== 0) throw new Error(`dcm2niix exit code ${rc} on ${folder}`);
  const out = {};
  for (const f of mod.FS.readdir('/out')) {
    if (!f.endsWith('.nii')) continue;
    const p = path.join(dir, f);
    fs.writeFileSync(p, mod.FS.readFile(`/out/${f}`));
    out[f.replace(/\.nii$/, '')] = p;
  }
  return out;
}

const run = (argv) => JSON.parse(execFileSync(args.bin, [...argv, '--threads', args.threads],
  { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 26 }));

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'input-checks-'));
const real = [];
const romeo = path.join(args.data, 'romeo-small');
// ROMEO's Phase.nii stores radians (−π…π) under an scl_slope of 1/855 that leaves them scaled (its README): ×855
// undoes it; the TEs are not in the files (its README: any increasing ones serve).
real.push({ name: 'ROMEO slab (phase, 3 echoes)', kind: 'phase',
  ...run(['--phase', path.join(romeo, 'Phase.nii'), '--phase-scale', '855', '--magnitude', path.join(romeo, 'Mag.nii'), '--te-ms', '4,8,12']) });
const fm = path.join(args.data, 'dcm-fieldmaps');
const ge = await convert(path.join(fm, 'GE/6_CV_Neuro'), fs.mkdtempSync(path.join(tmp, 'ge-')));
const geMap = Object.entries(ge).find(([k]) => /fieldmaphz/i.test(k))[1];
const geMag = Object.entries(ge).find(([k]) => !/fieldmaphz/i.test(k))[1];
real.push({ name: 'GE B0 map (Hz)', kind: 'total', ...run(['--total-field', geMap, '--units', 'hz', '--magnitude', geMag]) });
const ph = await convert(path.join(fm, 'Philips/fmap'), fs.mkdtempSync(path.join(tmp, 'philips-')));
const phMap = Object.entries(ph).find(([k]) => /fieldmaphz/i.test(k))[1];
const phMag = Object.entries(ph).find(([k]) => !/fieldmaphz/i.test(k))[1];
real.push({ name: 'Philips B0 map (Hz)', kind: 'total', ...run(['--total-field', phMap, '--units', 'hz', '--magnitude', phMag]) });
// Siemens: the phase difference (scanner integers −4096…4094 = −π…π) of echoes at 5.19 and 7.65 ms: one "echo" at ΔTE.
const si = await convert(path.join(fm, 'Siemens'), fs.mkdtempSync(path.join(tmp, 'siemens-')));
const siPhase = Object.entries(si).find(([k]) => /_ph$/i.test(k))[1];
const siMag = Object.entries(si).find(([k]) => !/_ph$/i.test(k))[1];
real.push({ name: 'Siemens phase difference (ΔTE 2.46 ms)', kind: 'phase',
  ...run(['--phase', siPhase, '--phase-scale', String(Math.PI / 4096), '--magnitude', siMag, '--te-ms', '2.46']) });
fs.rmSync(tmp, { recursive: true, force: true });

const study = JSON.parse(fs.readFileSync(args.study, 'utf8'));
const rows = [];
for (const h of study.heads) {
  const first = h.runs[0];
  rows.push({ name: `${h.name} (phantom)`, totalP1: first.totalP1, totalP99: first.totalP99, maskDarkShare: h.maskDarkShare,
    fitLeftOut: first.fitLeftOut, runs: h.runs.filter((x) => x.method === first.method) });
}
for (const r of real) {
  const ok = r.runs.find((x) => !x.error);
  rows.push({ name: r.name, totalP1: r.totalP1 ?? ok?.totalP1, totalP99: r.totalP99 ?? ok?.totalP99, maskDarkShare: r.maskDarkShare,
    fitLeftOut: ok?.fitLeftOut, runs: r.runs, total: r.kind === 'total' });
}

const f = (x, d = 3) => (x === undefined || x === null ? '—' : x.toFixed(d));
const pct = (x) => (x === undefined || x === null ? '—' : (100 * x).toFixed(1));
const reach = (r) => Math.max(Math.abs(r.totalP1), Math.abs(r.totalP99));
console.log('Total field (ppm, 1st / 99th percentile in the fit mask), its reach ×2π (rad/s declared as Hz), mask shares (%):');
console.log(['input', 'total p1', 'total p99', 'reach', '×2π', 'mask dark', 'fit left out'].join(' | '));
for (const r of rows) {
  console.log([r.name, f(r.totalP1), f(r.totalP99), f(reach(r)), f(2 * Math.PI * reach(r)), pct(r.maskDarkShare), pct(r.fitLeftOut)].join(' | '));
}
console.log('\nLocal field (ppm, 1st / 99th percentile in the local mask) and the share the removal leaves out (%), per background:');
const backgrounds = [...new Set(rows.flatMap((r) => r.runs.map((x) => x.background)))];
console.log(['input', ...backgrounds].join(' | '));
for (const r of rows) {
  console.log([r.name, ...backgrounds.map((b) => {
    const x = r.runs.find((y) => y.background === b);
    if (!x) return '—';
    if (x.error) return `refused: ${x.error.slice(0, 60)}…`;
    return `[${f(x.localP1)}, ${f(x.localP99)}] ${pct(x.backgroundLeftOut)}`;
  })].join(' | '));
}
const all = rows.flatMap((r) => r.runs.filter((x) => !x.error));
const maxLocal = Math.max(...all.map((x) => Math.max(Math.abs(x.localP1), Math.abs(x.localP99))));
const maxTotal = Math.max(...rows.map(reach));
const minTotal2pi = Math.min(...rows.filter((r) => r.total).map((r) => 2 * Math.PI * reach(r)));
console.log(`\nlargest local-field reach ${f(maxLocal)} ppm; largest total-field reach ${f(maxTotal)} ppm; ` +
            `smallest ×2π reach of a real Hz map ${f(minTotal2pi)} ppm`);
if (args.json) {
  fs.writeFileSync(args.json, JSON.stringify({ rows, real, maxLocal, maxTotal, minTotal2pi }, null, 1));
  console.log(`wrote ${args.json}`);
}
