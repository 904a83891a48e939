// `tessera-qsm qsm-ci`: a QSM-CI algorithm run. Reads the contract's inputs from a directory (phase.nii.gz: the wrapped
// phase of every echo in radians, 4D; magnitude.nii.gz; mask.nii.gz; params.json: TE in s, B0 in T, B0_dir,
// voxel_size in mm) and writes its outputs in ppm (totalfield.nii.gz, localfield.nii.gz, chimap.nii.gz, gzipped, with
// the phase's header) through the pipeline's stages with their defaults.
import fs from 'node:fs';
import path from 'node:path';
import { writeNifti } from '../index.js';
import { CliError, EXIT_OK, EXIT_ERROR, EXIT_USAGE, usageError } from './errors.js';
import { readBytes, checkWritable, removeStalePartials, writeAtomic } from './files.js';
import { duration, size } from './format.js';
import { defined } from './network.js';
import { readInputs } from './read-inputs.js';
import { wholeNumber, keyValues, fmt } from './values.js';

/** The contract's file names (QSM-CI stages.py ARTIFACT_FILE). */
export const QSMCI_INPUTS = { phase: 'phase.nii.gz', magnitude: 'magnitude.nii.gz', mask: 'mask.nii.gz', params: 'params.json' };
export const QSMCI_OUTPUTS = { totalField: 'totalfield.nii.gz', localField: 'localfield.nii.gz', chi: 'chimap.nii.gz' };


/** A list of numbers from params.json (a number alone is a list of one), or undefined when absent. */
function numbers(v) {
  if (v === undefined || v === null) return undefined;
  const list = Array.isArray(v) ? v : [v];
  return list.every((x) => typeof x === 'number' && Number.isFinite(x)) ? list : null;
}

/**
 * The acquisition from params.json: QSM-CI's keys (TE, B0, B0_dir, voxel_size), or a BIDS sidecar's (EchoTime,
 * MagneticFieldStrength). Refuses what is missing or not numbers, naming the key and the file.
 */
export function readParams(json, file) {
  const bad = (key, what) => new CliError(`${file}: ${key} must be ${what}, got ${JSON.stringify(json[key])}`, EXIT_ERROR, 'InvalidArgument');
  if (json === null || typeof json !== 'object' || Array.isArray(json)) throw new CliError(`${file} must hold a JSON object such as {"TE": [0.004, 0.008], "B0": 3, "B0_dir": [0, 0, 1], "voxel_size": [1, 1, 1]}`, EXIT_ERROR, 'InvalidArgument');
  const teKey = json.TE !== undefined ? 'TE' : 'EchoTime';
  const te = numbers(json[teKey]);
  if (te === undefined) throw new CliError(`${file} gives no echo times: add "TE": [seconds, one per echo]`, EXIT_ERROR, 'InvalidArgument');
  if (te === null || te.length === 0 || te.some((t) => !(t > 0))) throw bad(teKey, 'echo times in seconds > 0, one per echo');
  if (te.some((t) => t > 1)) throw bad(teKey, 'echo times in seconds (values above 1 look like milliseconds)');
  const b0Key = json.B0 !== undefined ? 'B0' : 'MagneticFieldStrength';
  const b0 = json[b0Key];
  if (b0 === undefined) throw new CliError(`${file} gives no field strength: add "B0": tesla`, EXIT_ERROR, 'InvalidArgument');
  if (typeof b0 !== 'number' || !(b0 > 0) || !Number.isFinite(b0)) throw bad(b0Key, 'the field strength in tesla, > 0');
  const b0Dir = numbers(json.B0_dir);
  if (b0Dir === null || (b0Dir && (b0Dir.length !== 3 || b0Dir.every((v) => v === 0)))) throw bad('B0_dir', 'three numbers, not all 0 (the B0 direction in the voxel axes)');
  const voxel = numbers(json.voxel_size);
  if (voxel === null || (voxel && (voxel.length !== 3 || voxel.some((v) => !(v > 0))))) throw bad('voxel_size', 'three numbers > 0 (mm)');
  return { te, b0, b0Dir, voxelMm: voxel };
}

/** `tessera-qsm qsm-ci`: see its --help. */
export async function cmdQsmCi(o, ctx) {
  const t0 = performance.now();
  const see = 'see `tessera-qsm qsm-ci --help`';
  if (o.in === undefined) throw usageError(`give the input directory: \`tessera-qsm qsm-ci DIR\` or --in DIR; ${see}`);
  const inDir = o.in;
  const outDir = o.out ?? inDir;
  // Without --method the pipeline's default inversion runs (C++ kDefaultPipelineMethod; the plan names it).
  const asked = o.method?.toLowerCase();
  const background = o.background?.toLowerCase();
  // The pipeline's C++ schema checks the choice and refuses another in words naming the choices.
  const params = keyValues(o.param);
  const cores = wholeNumber(o.cores, 'cores', 1);
  const files = Object.fromEntries(Object.entries(QSMCI_INPUTS).map(([k, name]) => [k, path.join(inDir, name)]));
  // The magnitude is optional in the contract (QSM-CI params.py OPTIONAL_ARTIFACTS): without it the echoes weigh alike.
  for (const [k, file] of Object.entries(files)) {
    if (k !== 'magnitude' && !fs.existsSync(file)) throw new CliError(`the QSM-CI input directory ${inDir} has no ${QSMCI_INPUTS[k]} (it needs ${Object.values(QSMCI_INPUTS).filter((n) => n !== QSMCI_INPUTS.magnitude).join(', ')}, and ${QSMCI_INPUTS.magnitude} when there is one)`, EXIT_ERROR, 'ReadFailed');
  }
  const withMagnitude = fs.existsSync(files.magnitude);
  if (!withMagnitude) ctx.progress.line(`${inDir} has no ${QSMCI_INPUTS.magnitude}: the echo fit weighs every echo alike`);
  const { signal, progress } = ctx;
  let json;
  try {
    json = JSON.parse(new TextDecoder().decode(await readBytes(files.params, 'parameters', signal)));
  } catch (e) {
    if (e instanceof CliError || e?.name === 'AbortError') throw e;
    throw new CliError(`${files.params} is not valid JSON: ${e.message}`, EXIT_ERROR, 'InvalidArgument');
  }
  const acq = readParams(json, files.params);
  fs.mkdirSync(outDir, { recursive: true });
  const outputs = Object.fromEntries(Object.entries(QSMCI_OUTPUTS).map(([k, name]) => [k, path.join(outDir, name)]));
  for (const file of Object.values(outputs)) {
    checkWritable(file, 'out');
    removeStalePartials(file);
  }
  let inputs;
  try {
    inputs = await readInputs({ phase: files.phase, magnitude: withMagnitude ? files.magnitude : undefined, mask: files.mask }, { needMask: true, b0: acq.b0, phase: { te: acq.te, units: 'rad' }, convert: true }, signal);
  } catch (e) {
    // readInputs names the command line's --te; here the echo times come from params.json.
    if (e instanceof CliError && e.message.startsWith('--te gives')) throw new CliError(e.message.replace(/^--te gives/, `${files.params} gives`).replace(/: give one TE per echo.*$/, ': give one TE per echo, in seconds'), EXIT_ERROR, 'InvalidArgument');
    throw e;
  }
  const { like, phase, magnitude, mask, echoes } = inputs;
  const geometry = { ...inputs.geometry };
  if (acq.b0Dir) geometry.b0Dir = acq.b0Dir;
  else progress.line(`${files.params} gives no B0_dir: B0 taken as [${geometry.b0Dir.map(fmt).join(', ')}] in the voxel axes, from the phase's header`);
  if (acq.voxelMm) {
    if (acq.voxelMm.some((v, i) => Math.abs(v - geometry.voxelMm[i]) > 1e-4 * v)) {
      progress.line(`${files.params} gives voxel_size ${acq.voxelMm.map(fmt).join('×')} mm, the phase's header ${geometry.voxelMm.map(fmt).join('×')} mm: the run uses voxel_size`);
    }
    geometry.voxelMm = acq.voxelMm;
  }
  const tessera = await ctx.start({ hardwareThreads: cores });
  const base = defined({ geometry, phase, magnitude, mask, te: acq.te, b0: acq.b0, background, method: asked });
  // --param without --method: the default method's parameters (its name from a plan of the request without them).
  const method = asked ?? (await tessera.plan({ ...base, pipeline: true, phase: undefined })).method;
  const request = defined({ ...base, method, [method]: Object.keys(params).length ? params : undefined });
  const plan = await tessera.plan({ ...request, pipeline: true, phase: undefined });
  if (!plan.feasible) throw new CliError(plan.message, EXIT_USAGE, 'BudgetExceeded');
  progress.line(`qsm-ci: ${geometry.dims.join('×')}, ${echoes} echoes (TE ${acq.te.map((t) => fmt(t * 1000)).join(', ')} ms), B0 ${fmt(acq.b0)} T: ${plan.stages.join(' → ')}, estimated peak ${size(plan.peakBytes)}`);
  const out = await tessera.pipeline({ ...request, plan, signal, onProgress: (p) => progress.tiles(p, 'steps') });
  progress.close();
  signal.throwIfAborted();
  const written = [];
  for (const [k, what] of [['chi', `chi ppm, tessera-qsm qsm-ci ${method}`], ['totalField', 'total field ppm, tessera-qsm qsm-ci'], ['localField', `local field ppm, tessera-qsm qsm-ci ${background ?? ''}`]]) {
    written.push({ file: outputs[k], bytes: await writeNifti(out[k].data, like, { gzip: true, description: what.trim().slice(0, 79) }) });
  }
  await writeAtomic(written, signal);
  progress.line(`wrote ${Object.values(QSMCI_OUTPUTS).join(', ')} (ppm) in ${outDir} (${duration((performance.now() - t0) / 1000)})`);
  return EXIT_OK;
}
