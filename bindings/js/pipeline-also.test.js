// pipeline()'s optional outputs (also: SWI, minIP, R2*, T2*), its methods text and the command that reproduces a run,
// and the memory plans of swi() and r2star(): through the public API and the CLI in node, on the phantom head scan.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTessera, readNifti, readEchoes, readMask, writeNifti } from './index.js';
import { helpText, defaultText } from './cli/help.js';
import { contrastOptions } from './cli/contrast.js';
import { defaultBackgroundTitle } from '../../tests/js/background-titles.js';

const here = path.dirname(fileURLToPath(import.meta.url));
let tessera;
let scan;
const geometry = { dims: [64, 64, 48], voxelMm: [3, 3, 3], b0Dir: [0, 0, 1] };
const te = [0.004, 0.008, 0.012, 0.016];
const n = geometry.dims[0] * geometry.dims[1] * geometry.dims[2];
before(async () => {
  tessera = await createTessera({ workers: 1, hardwareThreads: 2 });
  scan = await tessera.phantomScan({ geometry, te, snr: 100 });
});
after(async () => {
  await tessera?.terminate();
});

/** A 4D float32 NIfTI: writeNifti's 3D file of nz·echoes slices with dim[0] = 4, dim[3] = nz, dim[4] = echoes. */
async function writeNifti4d(data, g, echoes) {
  const b = await writeNifti(data, { dims: [g.dims[0], g.dims[1], g.dims[2] * echoes], voxelMm: g.voxelMm });
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  dv.setInt16(40, 4, true);
  dv.setInt16(46, g.dims[2], true);
  dv.setInt16(48, echoes, true);
  return b;
}

const same = (a, b) => a.length === b.length && a.every((v, i) => Object.is(v, b[i]));

test('pipeline also swi, r2star: the same maps as swi() and r2star() on the pipeline\'s mask, with the input\'s geometry, in the plan', async () => {
  const request = { phase: scan.phase, magnitude: scan.magnitude, geometry, te, b0: 3, method: 'tkd', also: ['swi', 'r2star'], keepInputs: true };
  const plan = await tessera.plan({ ...request, pipeline: true, phase: undefined, magnitude: true });
  const without = await tessera.plan({ ...request, also: undefined, pipeline: true, phase: undefined, magnitude: true });
  assert.deepEqual(plan.stages, ['brain mask', 'echo fit', await defaultBackgroundTitle(tessera), 'TKD', 'SWI', 'minIP', 'R2*']);
  // The stages run one after another: SWI and R2* come after χ, so the plan grows only where their own peak (what the
  // earlier stages kept, χ, their workspace and maps) is the highest; the heap test below measures the run against it.
  assert.ok(plan.workspaceBytes >= without.workspaceBytes, `${plan.workspaceBytes} vs ${without.workspaceBytes}`);
  const events = [];
  const out = await tessera.pipeline({ ...request, plan, onProgress: (p) => events.push(p) });
  for (const k of ['swi', 'minIp', 'r2star', 't2star', 'r2starResidual', 'chi']) {
    assert.deepEqual(out[k].dims, geometry.dims, k);
    assert.deepEqual(out[k].voxelMm, geometry.voxelMm, k);
  }
  assert.ok(events.at(-1).done === events.at(-1).total && events.length > 10);
  // swi() makes the same brain mask and unwraps alike: its maps are the pipeline's, bit for bit.
  const alone = await tessera.swi({ keepInputs: true, phase: scan.phase, magnitude: scan.magnitude, geometry, te });
  assert.ok(same(alone.mask.data, out.mask.data), 'the same brain mask');
  assert.ok(same(alone.swi.data, out.swi.data), 'SWI as swi()');
  assert.ok(same(alone.minIp.data, out.minIp.data), 'minIP as swi()');
  const fit = await tessera.r2star({ keepInputs: true, magnitude: scan.magnitude, geometry, te, mask: out.mask });
  assert.ok(same(fit.r2star.data, out.r2star.data) && same(fit.t2star.data, out.t2star.data) && same(fit.residual.data, out.r2starResidual.data), 'R2* as r2star() on the mask');
  // The rest of the pipeline is untouched by also: χ is the one without it.
  const plain = await tessera.pipeline({ ...request, also: undefined });
  assert.ok(same(plain.chi.data, out.chi.data), 'χ with and without also');
  assert.equal(plain.swi, null);
  assert.equal(plain.r2star, null);
});

test('pipeline also: refused up front without a magnitude, from a total field, or for an unknown output', async () => {
  await assert.rejects(tessera.pipeline({ keepInputs: true, phase: scan.phase, mask: scan.mask, geometry, te, method: 'tkd', also: 'swi' }), /SWI \(also\) needs the magnitude of every echo/);
  await assert.rejects(tessera.pipeline({ keepInputs: true, phase: scan.phase, magnitude: scan.magnitude, geometry, te, method: 'tkd', also: ['swi', 'qsm'] }), /also: the pipeline's optional outputs are swi and r2star, got 'qsm'/);
  await assert.rejects(tessera.pipeline({ keepInputs: true, phase: scan.phase, magnitude: scan.magnitude, geometry, te: [0.004, 0.008, 0.013, 0.016], method: 'tkd', also: 'r2star' }), /ARLO needs equally spaced echoes/);
  await assert.rejects(tessera.pipeline({ keepInputs: true, totalField: scan.totalField, totalFieldUnits: 'ppm', magnitude: scan.magnitude.subarray(0, n), mask: scan.mask, geometry, method: 'tkd', also: 'swi' }), /SWI \(also\) needs every echo's phase and magnitude, not a total field map/);
});

test('the CLI\'s swi and r2star read their options from the schema: help, --option names and --method choices', async () => {
  const schema = await tessera.schema();
  const swiHelp = helpText('swi', schema).replace(/\n {21}/g, ' ');
  for (const o of schema.filter((x) => x.name.startsWith('swi.'))) {
    assert.ok(swiHelp.includes(`    ${o.name}`) && swiHelp.includes(o.help), `swi --help: ${o.name}`);
    assert.ok(swiHelp.includes(`default ${defaultText(o)}`), `swi --help: ${o.name}'s default`);
  }
  const method = schema.find((x) => x.name === 'r2star.method');
  assert.ok(helpText('r2star', schema).includes(method.choices.join('|')));
  assert.throws(() => contrastOptions(['swi.maskpower=3'], schema), /--option swi\.maskpower is not an SWI option \(options: .*swi\.maskPower/);
  assert.deepEqual(contrastOptions(['swi.maskPower=3', 'unwrap=laplacian'], schema), { swi: { maskPower: 3 }, unwrap: 'laplacian' });
  const bad = spawnSync(process.execPath, [path.join(here, 'cli.js'), 'r2star', '--magnitude', 'm.nii', '--te', '0.004,0.008,0.012', '--method', 'arl0', '--out', 'r.nii'], { encoding: 'utf8' });
  assert.equal(bad.status, 2, bad.stderr);
  assert.match(bad.stderr, new RegExp(`--method must be ${method.choices.join(' or ')}, got 'arl0'`));
});

test('swi() and r2star() plan their memory: the heap of a fresh runtime stays within the plan; a volume over it is refused before any input is copied', async () => {
  const fresh = await createTessera({ workers: 1, hardwareThreads: 2 });
  try {
    const s = await fresh.swi({ keepInputs: true, phase: scan.phase, magnitude: scan.magnitude, geometry, te });
    assert.deepEqual(s.report.plan.stages, ['brain mask', 'echo fit', 'SWI', 'minIP']);
    assert.ok(s.report.memory.moduleHeapVsPlan <= 1, `SWI: module heap ${s.report.memory.moduleHeapBytes} B is ${s.report.memory.moduleHeapVsPlan} of its plan`);
    // The heap never shrinks: R2* in a runtime of its own.
    const own = await createTessera({ workers: 1, hardwareThreads: 2 });
    const r = await own.r2star({ keepInputs: true, magnitude: scan.magnitude, geometry, te }).finally(() => own.terminate());
    assert.ok(r.report.memory.moduleHeapVsPlan <= 1, `R2*: module heap ${r.report.memory.moduleHeapBytes} B is ${r.report.memory.moduleHeapVsPlan} of its plan`);
    assert.ok(r.report.plan.moduleHeapBytes < s.report.plan.moduleHeapBytes, 'R2* reads no phase and unwraps nothing');
    // 512 × 512 × 400 voxels of 8 echoes: 4 GB of phase and magnitude alone.
    const big = { dims: [512, 512, 400], voxelMm: [0.5, 0.5, 0.5], b0Dir: [0, 0, 1] };
    const t8 = [1, 2, 3, 4, 5, 6, 7, 8].map((k) => k * 0.004);
    const before = (await fresh.status()).moduleHeapBytes;
    for (const kind of ['swi', 'r2star']) {
      // One value each (an empty array is refused by name first): the plan refuses before the inputs are read.
      const err = await fresh[kind]({ geometry: big, te: t8, magnitude: new Float32Array(1), phase: new Float32Array(1) }).then(() => null, (e) => e);
      assert.equal(err?.code, 'BudgetExceeded', `${kind}: ${err?.message}`);
      assert.match(err.message, /the largest volume that fits holds \d+ voxels/);
    }
    assert.equal((await fresh.status()).moduleHeapBytes, before, 'nothing was allocated for the refused runs');
  } finally {
    await fresh.terminate();
  }
});

test('methods text: every step in order with its parameters and papers; its command, run in node on the same files, gives χ byte-identical to the API\'s', { timeout: 300000 }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-methods-'));
  try {
    fs.writeFileSync(path.join(dir, 'phase.nii'), await writeNifti4d(scan.phase, geometry, te.length));
    fs.writeFileSync(path.join(dir, 'mag.nii'), await writeNifti4d(scan.magnitude, geometry, te.length));
    fs.writeFileSync(path.join(dir, 'mask.nii'), await writeNifti(Float32Array.from(scan.mask), { dims: geometry.dims, voxelMm: geometry.voxelMm }));
    const phase = readEchoes(new Uint8Array(fs.readFileSync(path.join(dir, 'phase.nii'))));
    const magnitude = readEchoes(new Uint8Array(fs.readFileSync(path.join(dir, 'mag.nii'))));
    const mask = readMask(new Uint8Array(fs.readFileSync(path.join(dir, 'mask.nii'))));
    const out = await tessera.pipeline({
      keepInputs: true,
      // PDF at 5 iterations (its default 30): a parameter given, to be found in the text and the command.
      phase, magnitude, mask, te, b0: 3, method: 'tkd', tkd: { threshold: 0.15 }, background: 'pdf', pdf: { maxIterations: 5 }, also: ['swi', 'r2star'], swi: { maskPower: 3 },
    });
    const m = out.report.methods;
    assert.deepEqual(m.steps.map((s) => s.stage), ['acquisition', 'brain mask', 'unwrapping', 'echo fit', 'background removal', 'inversion', 'SWI', 'minIP', 'R2*']);
    assert.deepEqual(m.steps.map((s) => s.title).slice(4), ['PDF', 'TKD', 'CLEAR-SWI', 'minimum-intensity projection', 'ARLO']);
    // The parameters it ran with: the ones given, and the schema's defaults for the rest.
    const schema = await tessera.schema();
    const def = (name) => schema.find((o) => o.name === name).default;
    const params = Object.assign({}, ...m.steps.map((s) => s.parameters));
    assert.equal(params['tkd.threshold'], '0.15');
    assert.equal(params['pdf.maxIterations'], '5');
    assert.equal(params['pdf.padVoxels'], `${def('pdf.padVoxels')} voxels`);
    assert.equal(params['swi.maskPower'], '3');
    assert.equal(params['swi.minIpSlab'], `${def('swi.minIpSlab')} mm`);
    assert.equal(params['r2star.method'], def('r2star.method'));
    assert.equal(params.unwrap, def('unwrap'));
    // Every step's sentence is in the paragraph, in order; every reference is cited and numbered in order of citation.
    let at = -1;
    for (const s of m.steps) {
      const i = m.text.indexOf(s.sentence);
      assert.ok(i > at, `${s.stage}: its sentence in order`);
      at = i;
      for (const k of s.references) assert.ok(s.sentence.includes(`[${k}]`), `${s.stage} cites [${k}]`);
    }
    const cited = [...m.text.matchAll(/\[(\d+)\]/g)].map((x) => Number(x[1]));
    assert.deepEqual([...new Set(cited)], m.references.map((_, i) => i + 1));
    // The papers by their first authors: PDF (Liu), TKD (Shmueli, Wharton), SWI (Haacke), CLEAR-SWI (Eckstein), ARLO (Pei), ROMEO (Dymerska), Otsu.
    for (const author of ['Liu T', 'Shmueli K', 'Wharton S', 'Haacke EM', 'Eckstein K', 'Pei M', 'Dymerska B']) {
      assert.ok(m.references.some((r) => r.startsWith(author)), `a reference by ${author}`);
    }
    assert.ok(!m.references.some((r) => r.startsWith('Otsu')), 'no mask was made: Otsu is not cited');
    // The Markdown and the command on the same files, run in node: χ byte-identical; SWI and R2* written next to it.
    const files = { phase: 'phase.nii', magnitude: 'mag.nii', mask: 'mask.nii', out: 'chi.nii.gz' };
    const { markdown, args } = tessera.methodsText(out.report, { files });
    assert.match(markdown, /### References\n\n1\. /);
    assert.ok(markdown.includes(m.text));
    assert.equal(args[0], 'tessera-qsm');
    const run = spawnSync(process.execPath, [path.join(here, 'cli.js'), ...args.slice(1), '--report', 'methods.md', '--quiet'], { cwd: dir, encoding: 'utf8', timeout: 240000 });
    assert.equal(run.status, 0, run.stderr);
    const chi = readNifti(new Uint8Array(fs.readFileSync(path.join(dir, 'chi.nii.gz')))).data;
    assert.equal(Buffer.compare(Buffer.from(chi.buffer, chi.byteOffset, chi.byteLength), Buffer.from(out.chi.data.buffer, out.chi.data.byteOffset, out.chi.data.byteLength)), 0, 'the command\'s χ is the API\'s, byte for byte');
    for (const [file, key] of [['chi_swi.nii.gz', 'swi'], ['chi_minIP.nii.gz', 'minIp'], ['chi_R2starmap.nii.gz', 'r2star'], ['chi_T2starmap.nii.gz', 't2star']]) {
      const v = readNifti(new Uint8Array(fs.readFileSync(path.join(dir, file))));
      assert.deepEqual(v.dims.slice(0, 3), geometry.dims, file);
      assert.ok(same(Float32Array.from(v.data), out[key].data), `${file} is the API's ${key}`);
    }
    // The CLI's methods.md: the same paragraph, and the command as it was typed.
    const md = fs.readFileSync(path.join(dir, 'methods.md'), 'utf8');
    assert.ok(md.includes(m.text), 'methods.md holds the paragraph');
    assert.match(md, /```sh\ntessera-qsm pipeline --phase phase\.nii .*--also swi,r2star --out chi\.nii\.gz --report methods\.md --quiet\n```/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
