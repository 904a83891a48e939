// `tessera-qsm swi` and `tessera-qsm r2star`: SWI and its minIP from a multi-echo scan's wrapped phase and magnitude,
// R2* and T2* from the magnitude, in the C++ core; every output a NIfTI with the input's header.
import { readEchoes, readMask, writeNifti } from '../index.js';
import { CliError, EXIT_OK, EXIT_ERROR, usageError } from './errors.js';
import { niftiName, checkWritable, removeStalePartials, writeAtomic, readBytes } from './files.js';
import { duration } from './format.js';
import { readInputs } from './read-inputs.js';
import { echoTimes, keyValues, wholeNumber } from './values.js';

/**
 * --option NAME=VALUE (swi.maskPower=4, unwrap=laplacian, brainMask.erosion=2) → the request's fields; NAME is one of
 * the schema's SWI options (swi.*, unwrap, brainMask.*; C++ checks the values). schema: tessera.schema().
 */
export function contrastOptions(list, schema) {
  const known = schema.filter((x) => ['swi', 'unwrap', 'brainMask'].includes(x.name.split('.')[0])).map((x) => x.name);
  const out = {};
  for (const [name, value] of Object.entries(keyValues(list, '--option'))) {
    if (!known.includes(name)) throw usageError(`--option ${name} is not an SWI option (options: ${known.join(', ')}; see \`tessera-qsm swi --help\`)`);
    const [group, key] = name.split('.');
    if (key === undefined) out[group] = value;
    else (out[group] ??= {})[key] = value;
  }
  return out;
}

function requireOut(o, flag, what) {
  if (o[flag] === undefined) return;
  if (!niftiName(o[flag])) throw usageError(`--${flag} must end with .nii or .nii.gz, got '${o[flag]}'`);
  checkWritable(o[flag], flag);
  removeStalePartials(o[flag]);
  return what;
}

/** `tessera-qsm swi`: wrapped multi-echo phase and magnitude → SWI (--out) and its minIP (--min-ip). */
export async function cmdSwi(o, ctx) {
  const t0 = performance.now();
  const see = 'see `tessera-qsm swi --help`';
  if (o.phase === undefined || o.magnitude === undefined) throw usageError(`--phase and --magnitude are required (every echo); ${see}`);
  const te = echoTimes(o.te);
  if (te === undefined) throw usageError('--te is required: the echo times in seconds, one per echo (e.g. --te 0.004,0.008,0.012)');
  if (o.out === undefined) throw usageError(`--out is required (the SWI); ${see}`);
  requireOut(o, 'out');
  requireOut(o, 'min-ip');
  const units = o['phase-units']?.toLowerCase();
  if (units !== undefined && !['rad', 'deg', 'scanner'].includes(units)) throw usageError(`--phase-units must be rad, deg or scanner, got '${o['phase-units']}'`);
  const scale = o['phase-scale'] === undefined ? undefined : Number(o['phase-scale']);
  const cores = wholeNumber(o.cores, 'cores', 1);
  const options = contrastOptions(o.option, ctx.schema);
  const { signal, progress } = ctx;
  const { like, phase, magnitude, geometry, mask, echoes, phaseInfo } = await readInputs(o, { needMask: false, phase: { te, units, scale }, convert: true }, signal);
  for (const note of phaseInfo?.notes ?? []) progress.line(note);
  const tessera = await ctx.start({ hardwareThreads: cores });
  progress.line(`swi: ${geometry.dims.join('×')}, ${echoes} echoes: ${mask ? '' : 'brain mask → '}echo fit → SWI → minIP`);
  const out = await tessera.swi({ geometry, phase, magnitude, mask, te, ...options, signal, onProgress: (p) => progress.tiles(p, 'steps') });
  progress.close();
  signal.throwIfAborted();
  const gz = (f) => /\.gz$/i.test(f);
  const outputs = [{ file: o.out, bytes: await writeNifti(out.swi.data, like, { gzip: gz(o.out), description: 'SWI, tessera-qsm swi' }) }];
  if (o['min-ip'] !== undefined) outputs.push({ file: o['min-ip'], bytes: await writeNifti(out.minIp.data, like, { gzip: gz(o['min-ip']), description: 'SWI minIP, tessera-qsm swi' }) });
  await writeAtomic(outputs, signal);
  progress.line(`wrote ${outputs.map((x) => x.file).join(' and ')} (${duration((performance.now() - t0) / 1000)})`);
  return EXIT_OK;
}

/** `tessera-qsm r2star`: multi-echo magnitude → R2* (s⁻¹, --out) and T2* (s, --t2star). */
export async function cmdR2star(o, ctx) {
  const t0 = performance.now();
  const see = 'see `tessera-qsm r2star --help`';
  if (o.magnitude === undefined) throw usageError(`--magnitude is required (every echo); ${see}`);
  const te = echoTimes(o.te);
  if (te === undefined) throw usageError('--te is required: the echo times in seconds, one per echo (e.g. --te 0.004,0.008,0.012)');
  if (o.out === undefined && o.t2star === undefined) throw usageError(`give --out (R2*) and/or --t2star; ${see}`);
  requireOut(o, 'out');
  requireOut(o, 't2star');
  const methods = ctx.schema.find((x) => x.name === 'r2star.method').choices;
  if (o.method !== undefined && !methods.includes(o.method)) throw usageError(`--method must be ${methods.join(' or ')}, got '${o.method}'`);
  const cores = wholeNumber(o.cores, 'cores', 1);
  const { signal, progress } = ctx;
  let mag;
  let mask;
  try {
    mag = readEchoes(await readBytes(o.magnitude, 'magnitude', signal));
    if (o.mask !== undefined) mask = readMask(await readBytes(o.mask, 'mask', signal));
  } catch (e) {
    if (e instanceof CliError) throw e;
    throw new CliError(`cannot read ${mask === undefined && mag ? o.mask : o.magnitude}: ${e.message}`, EXIT_ERROR, 'InvalidNifti');
  }
  if (mag.echoes !== te.length) throw usageError(`--te gives ${te.length} echo time(s) but the magnitude ${o.magnitude} holds ${mag.echoes} echo(es): give one TE per echo, in seconds`);
  if (mask && mask.dims.slice(0, 3).some((d, i) => d !== mag.dims[i])) throw new CliError(`the mask ${o.mask} is ${mask.dims.slice(0, 3).join('×')} but the magnitude is ${mag.dims.slice(0, 3).join('×')}`, EXIT_ERROR, 'InvalidArgument');
  const geometry = { dims: mag.dims.slice(0, 3), voxelMm: mag.voxelMm, b0Dir: mag.b0Dir };
  const magnitude = mag.data instanceof Float32Array ? mag.data : Float32Array.from(mag.data);
  const tessera = await ctx.start({ hardwareThreads: cores });
  progress.line(`r2star: ${geometry.dims.join('×')}, ${te.length} echoes, ${o.method ?? 'arlo'}`);
  const out = await tessera.r2star({ geometry, magnitude, mask: mask?.mask, te, r2star: o.method ? { method: o.method } : undefined, signal, onProgress: (p) => progress.tiles(p, 'steps') });
  progress.close();
  signal.throwIfAborted();
  const gz = (f) => /\.gz$/i.test(f);
  const outputs = [];
  if (o.out !== undefined) outputs.push({ file: o.out, bytes: await writeNifti(out.r2star.data, mag, { gzip: gz(o.out), description: `R2* 1/s, tessera-qsm r2star ${out.method}` }) });
  if (o.t2star !== undefined) outputs.push({ file: o.t2star, bytes: await writeNifti(out.t2star.data, mag, { gzip: gz(o.t2star), description: `T2* s, tessera-qsm r2star ${out.method}` }) });
  await writeAtomic(outputs, signal);
  progress.line(`wrote ${outputs.map((x) => x.file).join(' and ')} (${duration((performance.now() - t0) / 1000)})`);
  return EXIT_OK;
}
