// Which files the `tessera-qsm pipeline` command of a From phase run names (plain JS, no DOM): the user's own NIfTI
// files where the page ran on them as they are (one phase file in radians with no voxel changed, the magnitude file,
// the mask file), else NIfTI files the page writes from what it ran on (a DICOM folder's conversion, the demo's scan,
// a phase in other units or stacked from several files, a field map or phase difference, a mask made or edited in the page), offered as
// downloads beside the command. χ's file is the name the page's χ download gets.

/** A file name's stem: no .nii(.gz), no " (+n)" of stacked echoes. */
export const stem = (name) => name.replace(/ \(\+\d+\)$/, '').replace(/\.nii(\.gz)?$/i, '');

/**
 * The command's files and the downloads it needs: { files: {phase | totalField, magnitude, mask, out}, offer: [{ role,
 * file, data, echoes, what }] } — each offered file is data (Float32Array or Uint8Array, echoes × the volume) written
 * as NIfTI with the input's header.
 * Preconditions: input is the run's input (source 'files' | 'dicom' | 'demo', phase, echoes, magnitude, mask, from,
 * fixed: voxels the loader changed, phaseUnitsRead: the units the loader read the phase file in, maskEdit when
 * edited in the page); files is page.files at the run (pipeline: File[], magnitude, mask: File | null).
 */
export function commandFiles(input, files) {
  const base = stem(input.name);
  const fromFiles = input.source === 'files';
  const out = { out: `${base}_chi.nii.gz` };
  const offer = [];
  const echoes = (d) => Math.max(1, Math.round(d.length / (input.geometry.dims[0] * input.geometry.dims[1] * input.geometry.dims[2])));
  if (input.from === 'fieldmap') {
    out.totalField = `${base}_fieldmap_Hz.nii`;
    offer.push({ role: 'totalField', file: out.totalField, data: input.phase, echoes: 1, what: 'the field map (Hz) the run started from' });
  } else if (input.from === 'phasediff') {
    out.phase = `${base}_phasediff_rad.nii`;
    offer.push({ role: 'phase', file: out.phase, data: input.phase, echoes: 1, what: 'the phase difference (rad) the run was given' });
  } else if (fromFiles && files.pipeline?.length === 1 && input.phaseUnitsRead === 'rad' && !input.fixed) {
    out.phase = files.pipeline[0].name;
  } else {
    out.phase = `${base}_phase_rad.nii`;
    offer.push({ role: 'phase', file: out.phase, data: input.phase, echoes: input.echoes, what: `the wrapped phase (rad, ${input.echoes} echo${input.echoes > 1 ? 'es' : ''}) the run was given` });
  }
  if (input.magnitude) {
    if (fromFiles && files.magnitude) out.magnitude = files.magnitude.name;
    else {
      out.magnitude = `${base}_magnitude.nii`;
      offer.push({ role: 'magnitude', file: out.magnitude, data: input.magnitude, echoes: echoes(input.magnitude), what: 'the magnitude the run was given' });
    }
  }
  if (input.mask) {
    if (files.mask && !input.maskEdit) out.mask = files.mask.name;
    else {
      // The viewer's mask download has this name too.
      out.mask = `${base}_mask.nii.gz`;
      offer.push({ role: 'mask', file: out.mask, data: input.mask, echoes: 1, what: input.maskEdit ? 'the mask as edited in this page' : 'the mask the run used' });
    }
  }
  return { files: out, offer };
}

/** A NIfTI-1 file of `echoes` volumes (dim 4) from the bytes of a 3D .nii (uncompressed) of its first volume. */
export function stackNifti(first3d, data, echoes) {
  const dv0 = new DataView(first3d.buffer, first3d.byteOffset, first3d.byteLength);
  const offset = Math.round(dv0.getFloat32(108, true));
  const bytes = new Uint8Array(offset + data.byteLength);
  bytes.set(first3d.subarray(0, offset));
  bytes.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), offset);
  const dv = new DataView(bytes.buffer);
  if (echoes > 1) {
    dv.setInt16(40, 4, true);
    dv.setInt16(48, echoes, true);
  }
  return bytes;
}
