// `tessera-qsm score`: QSM-CI's scores of a χ map against a reference inside an evaluation mask, on the same grid.
import { readNiftiAsync, maskFromValues } from '../io/nifti.js';
import { CliError, EXIT_OK, EXIT_ERROR, usageError } from './errors.js';
import { readBytes, niftiName } from './files.js';
import { wholeNumber } from './values.js';

/** A 3D NIfTI of the command line (a mask: with `mask`, 1 where its value is finite and nonzero), refusals naming the file. */
export async function readVolume(file, what, signal, asMask = false) {
  const bytes = await readBytes(file, what, signal);
  try {
    const v = await readNiftiAsync(bytes);
    return asMask ? { ...v, mask: maskFromValues(v.data) } : v;
  } catch (e) {
    throw new CliError(`the ${what} ${file} is not a 3D NIfTI volume Tessera reads: ${e?.message ?? e}`, EXIT_ERROR, 'InvalidNifti');
  }
}

const x = (a) => a.map((v) => String(+v.toPrecision(6))).join('×');

/** Whether two numbers agree to the precision a NIfTI header (float32) keeps. */
const close = (a, b) => Math.abs(a - b) <= 1e-4 * Math.max(1, Math.abs(a), Math.abs(b));

/**
 * Refuses a volume not on the grid of the first: other dims, voxel size, or voxel-to-world transform, in words.
 * a, b: {file, what, volume}.
 */
export function checkSameGrid(a, b) {
  const [va, vb] = [a.volume, b.volume];
  const fix = 'the scores compare voxel by voxel, so both must be on one grid (resample one onto the other first)';
  if (va.dims.some((d, i) => d !== vb.dims[i])) {
    throw new CliError(`the ${b.what} ${b.file} is ${vb.dims.join('×')} voxels but the ${a.what} ${a.file} is ${va.dims.join('×')}: ${fix}`, EXIT_ERROR, 'InvalidArgument');
  }
  if (va.voxelMm.some((v, i) => !close(v, vb.voxelMm[i]))) {
    throw new CliError(`the ${b.what} ${b.file} has ${x(vb.voxelMm)} mm voxels but the ${a.what} ${a.file} has ${x(va.voxelMm)} mm: ${fix}`, EXIT_ERROR, 'InvalidArgument');
  }
  if (va.affine.some((v, i) => !close(v, vb.affine[i]))) {
    const origin = (m) => `(${[m[3], m[7], m[11]].map((v) => String(+v.toPrecision(6))).join(', ')})`;
    throw new CliError(
      `the ${b.what} ${b.file} is placed differently in the scanner than the ${a.what} ${a.file} (voxel-to-world transforms ` +
        `differ: ${b.volume.affineSource} origin ${origin(vb.affine)} mm vs ${a.volume.affineSource} origin ${origin(va.affine)} mm): ${fix}`,
      EXIT_ERROR,
      'InvalidArgument',
    );
  }
}

/** The scores as the command line prints them. */
export function scoresText(s) {
  const pct = (v) => (Number.isFinite(v) ? `${v.toFixed(3)} %` : 'undefined (the reference has no high frequency inside the mask)');
  return [
    `NRMSE              ${pct(s.nrmse)}  (demeaned)`,
    `NRMSE detrended    ${pct(s.nrmseDetrended)}`,
    `HFEN               ${pct(s.hfen)}`,
    `CC                 ${s.cc.toFixed(6)}`,
    `XSIM               ${s.xsim.toFixed(6)}`,
    `voxels             ${s.voxels} in the mask`,
  ].join('\n') + '\n';
}

/** `tessera-qsm score`: see its --help. */
export async function cmdScore(o, ctx) {
  const see = 'see `tessera-qsm score --help`';
  for (const flag of ['chi', 'reference', 'mask']) {
    if (o[flag] === undefined) throw usageError(`--${flag} is required; ${see}`);
    if (!niftiName(o[flag])) throw usageError(`--${flag} must be a .nii or .nii.gz file, got '${o[flag]}'`);
  }
  const cores = wholeNumber(o.cores, 'cores', 1);
  const { signal } = ctx;
  const chi = { file: o.chi, what: 'χ', volume: await readVolume(o.chi, 'χ', signal) };
  const reference = { file: o.reference, what: 'reference', volume: await readVolume(o.reference, 'reference', signal) };
  const mask = { file: o.mask, what: 'mask', volume: await readVolume(o.mask, 'mask', signal, true) };
  checkSameGrid(chi, reference);
  checkSameGrid(chi, mask);
  const tessera = await ctx.start({ workers: 1, hardwareThreads: cores });
  const s = await tessera.score({ chi: chi.volume, reference: reference.volume, mask: mask.volume.mask });
  signal.throwIfAborted();
  if (o.json) {
    const value = (v) => (Number.isFinite(v) ? v : null);
    ctx.out(`${JSON.stringify({ nrmse: value(s.nrmse), nrmseDetrended: value(s.nrmseDetrended), hfen: value(s.hfen), cc: s.cc, xsim: s.xsim, voxels: s.voxels, chi: o.chi, reference: o.reference, mask: o.mask }, null, 2)}\n`);
  } else ctx.out(scoresText(s));
  return EXIT_OK;
}
