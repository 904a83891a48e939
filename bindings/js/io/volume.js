// The one volume type of Tessera (like ITK-Wasm's Image): what the NIfTI readers return, what the input
// loader (inputs.js) hands to the CLI and the page, and what the API's geometry is taken from.
//
//   makeVolume({ dims, voxelMm, affine?, b0Dir?, data, echoes?, description?, ...extra }) → Volume (checked)
//   geometryOf(volume)                                                                  → { dims, voxelMm, b0Dir }
//
// Voxel order is the NIfTI order: x fastest, then y, then z (index = x + nx·(y + ny·z)); several echoes lie one
// after the other (echo e at offset e·nx·ny·nz).

/**
 * @typedef {Object} Volume
 * @property {[number, number, number]} dims     voxels along x, y, z (whole numbers >= 1)
 * @property {[number, number, number]} voxelMm  voxel size in mm (finite, > 0)
 * @property {number[]} affine                   row-major 4×4 (16 numbers), voxel index → world (the file's units)
 * @property {[number, number, number]} b0Dir    the B0 direction in the voxel axes (finite, not all 0)
 * @property {Float32Array|Uint8Array|Int8Array|Int16Array|Uint16Array|Int32Array|Uint32Array|Float64Array} data
 *                                               nx·ny·nz·echoes values, x fastest
 * @property {number} echoes                     volumes along the 4th dimension (1 for a 3D volume)
 * @property {string} [description]              free text (a NIfTI descrip, say)
 */

/**
 * A checked Volume; extra fields (a reader's header, raw bytes, ...) are kept as they are.
 * Precondition: dims are three whole numbers >= 1; voxelMm three finite numbers > 0.
 * Precondition: affine, when given, is 16 finite numbers (row-major) or 4 rows of 4; default diag(voxelMm, 1).
 * Precondition: b0Dir, when given, is three finite numbers not all 0; default [0, 0, 1].
 * Precondition: data is a typed array of nx·ny·nz·echoes values; echoes (default 1) a whole number >= 1.
 * Throws a TypeError or RangeError naming the field that is wrong and what it should be.
 * @param {{dims: ArrayLike<number>, voxelMm: ArrayLike<number>, affine?: ArrayLike<number>|number[][], b0Dir?: ArrayLike<number>,
 *          data: ArrayBufferView, echoes?: number, description?: string, [k: string]: unknown}} fields
 * @returns {Volume & Record<string, unknown>}
 */
export function makeVolume(fields) {
  if (!fields || typeof fields !== 'object') throw new TypeError('makeVolume: expected { dims, voxelMm, data, ... }');
  const { dims, voxelMm, affine, b0Dir, data, echoes = 1, description, ...extra } = fields;
  const d = triple(dims, 'dims', (v) => Number.isInteger(v) && v >= 1, 'three whole numbers >= 1');
  const vox = triple(voxelMm, 'voxelMm', (v) => Number.isFinite(v) && v > 0, 'three finite numbers > 0 (mm)');
  const dir = b0Dir === undefined ? [0, 0, 1] : triple(b0Dir, 'b0Dir', Number.isFinite, 'three finite numbers');
  if (dir.every((v) => v === 0)) throw new RangeError('makeVolume: b0Dir is [0, 0, 0]: give the B0 direction in the voxel axes, e.g. [0, 0, 1]');
  if (!Number.isInteger(echoes) || echoes < 1) throw new RangeError(`makeVolume: echoes must be a whole number >= 1, got ${echoes}`);
  if (!ArrayBuffer.isView(data) || data instanceof DataView) throw new TypeError('makeVolume: data must be a typed array (x fastest), e.g. a Float32Array');
  const n = d[0] * d[1] * d[2] * echoes;
  if (data.length !== n) {
    const of = echoes > 1 ? ` × ${echoes} echoes` : '';
    throw new RangeError(`makeVolume: data holds ${data.length} values but dims ${d.join('×')}${of} need ${n}`);
  }
  if (description !== undefined && typeof description !== 'string') throw new TypeError('makeVolume: description must be a string');
  const volume = { ...extra, dims: d, voxelMm: vox, affine: affine16(affine, vox), b0Dir: dir, data, echoes };
  if (description !== undefined) volume.description = description;
  return volume;
}

/**
 * The geometry the API takes (createTessera's plan/invert `geometry`) of a volume.
 * Precondition: `volume` has dims, voxelMm and b0Dir (a Volume, or a readNifti result).
 * @param {{dims: number[], voxelMm: number[], b0Dir: number[]}} volume
 * @returns {{dims: [number, number, number], voxelMm: [number, number, number], b0Dir: [number, number, number]}}
 */
export function geometryOf(volume) {
  if (!volume || typeof volume !== 'object') throw new TypeError('geometryOf: expected a Volume');
  return {
    dims: /** @type {[number, number, number]} */ ([...volume.dims]),
    voxelMm: /** @type {[number, number, number]} */ ([...volume.voxelMm]),
    b0Dir: /** @type {[number, number, number]} */ ([...volume.b0Dir]),
  };
}

/** `v` as a plain array of three numbers that pass `ok`, else a named error. */
function triple(v, name, ok, what) {
  if (!Array.isArray(v) && !ArrayBuffer.isView(v)) throw new TypeError(`makeVolume: ${name} must be ${what}, got ${v === null ? 'null' : typeof v}`);
  const a = Array.from(/** @type {ArrayLike<number>} */ (v));
  if (a.length !== 3 || !a.every((x) => typeof x === 'number' && ok(x))) throw new RangeError(`makeVolume: ${name} must be ${what}, got [${a.join(', ')}]`);
  return a;
}

/** A row-major 4×4 as 16 numbers, from 16 numbers or 4 rows of 4; diag(voxelMm, 1) when absent. */
function affine16(affine, vox) {
  if (affine === undefined || affine === null) return [vox[0], 0, 0, 0, 0, vox[1], 0, 0, 0, 0, vox[2], 0, 0, 0, 0, 1];
  const rows = Array.isArray(affine) && affine.length === 4 && affine.every((r) => Array.isArray(r) || ArrayBuffer.isView(r));
  const flat = rows ? affine.flatMap((r) => (r.length === 4 ? Array.from(r) : [NaN])) : Array.isArray(affine) || ArrayBuffer.isView(affine) ? Array.from(affine) : [];
  if (flat.length !== 16 || !flat.every((x) => typeof x === 'number' && Number.isFinite(x))) {
    throw new RangeError('makeVolume: affine must be 16 finite numbers (row-major 4×4) or 4 rows of 4');
  }
  return flat;
}
