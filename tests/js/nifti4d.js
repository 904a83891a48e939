// A 4D NIfTI for the tests' multi-echo inputs (the package reads 4D files and writes 3D ones): writeNifti's 3D header
// with dim[0] = 4 and dim[4] = echoes, then every echo's volume, x-fastest.
import { writeNifti } from '../../bindings/js/io/nifti.js';

/**
 * The file's bytes (a Buffer, for fs and for playwright's setInputFiles).
 * data: echoes × the volume of like.dims, echo after echo; like: writeNifti's {dims, voxelMm, affine?}.
 */
export async function nifti4d(data, echoes, like) {
  const n = like.dims[0] * like.dims[1] * like.dims[2];
  const one = await writeNifti(data.subarray(0, n), like);
  const out = new Uint8Array(352 + 4 * n * echoes);
  out.set(one.subarray(0, 352));
  out.set(new Uint8Array(data.buffer, data.byteOffset, 4 * n * echoes), 352);
  const dv = new DataView(out.buffer);
  dv.setInt16(40, 4, true);
  dv.setInt16(48, echoes, true);
  return Buffer.from(out);
}
