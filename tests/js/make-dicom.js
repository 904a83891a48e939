// Test data: a multi-echo gradient-echo acquisition written as DICOM Part 10 files by dcmjs (classic MR Image Storage,
// one file per slice per echo per part, Siemens-style: phase stored 0…4095 with RescaleSlope 2, RescaleIntercept -4096).
//
//   writeDicomScan(dir, scan)  → { files, phaseStored, magnitudeStored, geometry }
//   dicomIndex(geometry, lps)  → the written voxel index [x, y, z] at a patient (LPS, mm) position
//
// Voxel order of the arrays given and returned: x fastest, then y, then z, echo after echo (the NIfTI order). In the files,
// x runs along a row (the column index) and y down the rows; slice z lies at origin + z · voxelMm[2] · normal.
import fs from 'node:fs';
import path from 'node:path';
import dcmjs from 'dcmjs';

const { DicomMetaDictionary, DicomDict } = dcmjs.data;

/** Classic MR Image Storage. */
const MR_IMAGE_STORAGE = '1.2.840.10008.5.1.4.1.1.4';
/** Explicit VR little endian. */
const EXPLICIT_LE = '1.2.840.10008.1.2.1';
/** Stored phase values: 12 bits, 0…4095 = one turn. */
const PHASE_LEVELS = 4096;
/** Siemens' phase rescale: value = 2 · stored − 4096 (−4096…4094). */
export const PHASE_RESCALE = { slope: 2, intercept: -4096 };
/** The largest stored magnitude value. */
const MAG_MAX = 4000;

/**
 * Writes the scan's DICOM files into dir (created when missing): for each part given (phase, magnitude), each echo,
 * each slice, one file named <part>_e<echo>_<slice>.dcm; each part is its own series (SeriesInstanceUID, SeriesNumber).
 * Precondition: scan.dims [nx, ny, nz], scan.voxelMm [vx, vy, vz] (mm), scan.te (s, one per echo), scan.b0 (T).
 * Precondition: scan.phase (rad, wrapped) and/or scan.magnitude (≥ 0): Float32Array of nx·ny·nz·echoes values; a part
 * may have its own echo count (scan.magnitudeEchoes) or dims (scan.magnitudeDims, with scan.magnitude sized to them).
 * Precondition: scan.rowDir, scan.colDir (unit, orthogonal; default x → [1,0,0], y → [0,1,0]), scan.origin (LPS mm).
 * Returns the files written, the stored phase and magnitude integers (same order as the input) and the geometry
 * (origin, rowDir, colDir, normal, voxelMm) for dicomIndex.
 */
export function writeDicomScan(dir, scan) {
  const { dims, voxelMm, te, b0, phase, magnitude } = scan;
  const rowDir = scan.rowDir ?? [1, 0, 0];
  const colDir = scan.colDir ?? [0, 1, 0];
  const origin = scan.origin ?? [-(dims[0] - 1) * voxelMm[0] / 2, -(dims[1] - 1) * voxelMm[1] / 2, -(dims[2] - 1) * voxelMm[2] / 2];
  const normal = cross(rowDir, colDir);
  fs.mkdirSync(dir, { recursive: true });
  const study = DicomMetaDictionary.uid();
  const frame = DicomMetaDictionary.uid();
  const files = [];
  const out = { phaseStored: null, magnitudeStored: null };
  const parts = [
    phase && { part: 'phase', data: phase, dims, echoes: te.length, series: 3, type: 'P', description: 'gre_qsm_phase' },
    magnitude && { part: 'magnitude', data: magnitude, dims: scan.magnitudeDims ?? dims, echoes: scan.magnitudeEchoes ?? te.length, series: 2, type: 'M', description: 'gre_qsm' },
  ].filter(Boolean);
  for (const p of parts) {
    const [nx, ny, nz] = p.dims;
    const n = nx * ny * nz;
    if (p.data.length !== n * p.echoes) throw new RangeError(`writeDicomScan: ${p.part} has ${p.data.length} values, ${p.dims.join('×')} × ${p.echoes} echoes needs ${n * p.echoes}`);
    const stored = new Uint16Array(p.data.length);
    let max = 0;
    for (const v of p.data) max = Math.max(max, v);
    for (let i = 0; i < stored.length; i++) {
      stored[i] = p.part === 'phase'
        ? (((Math.round(((p.data[i] + Math.PI) / (2 * Math.PI)) * PHASE_LEVELS) % PHASE_LEVELS) + PHASE_LEVELS) % PHASE_LEVELS)
        : Math.round((Math.max(0, p.data[i]) / (max || 1)) * MAG_MAX);
    }
    out[`${p.part}Stored`] = stored;
    const seriesUid = DicomMetaDictionary.uid();
    for (let e = 0; e < p.echoes; e++) {
      for (let z = 0; z < nz; z++) {
        const pixels = stored.slice(e * n + z * nx * ny, e * n + (z + 1) * nx * ny);
        const sop = DicomMetaDictionary.uid();
        const ds = {
          SOPClassUID: MR_IMAGE_STORAGE,
          SOPInstanceUID: sop,
          StudyInstanceUID: study,
          SeriesInstanceUID: seriesUid,
          FrameOfReferenceUID: frame,
          Modality: 'MR',
          Manufacturer: 'SIEMENS',
          ManufacturerModelName: 'Prisma',
          PatientName: 'Phantom^Tessera',
          PatientID: 'tessera-phantom',
          PatientPosition: 'HFS',
          StudyDate: '20240101',
          StudyTime: '120000',
          SeriesDate: '20240101',
          SeriesTime: '120000',
          AcquisitionTime: '120000',
          SeriesNumber: p.series,
          AcquisitionNumber: 1,
          InstanceNumber: e * nz + z + 1,
          SeriesDescription: p.description,
          ProtocolName: 'gre_qsm',
          ImageType: ['ORIGINAL', 'PRIMARY', p.type, 'ND'],
          ScanningSequence: 'GR',
          SequenceVariant: 'SP',
          MRAcquisitionType: '3D',
          RepetitionTime: 40,
          EchoTime: +(te[e] * 1000).toPrecision(10),
          EchoNumbers: e + 1,
          EchoTrainLength: p.echoes,
          FlipAngle: 15,
          MagneticFieldStrength: b0,
          ImagingFrequency: +(42.577478 * b0).toPrecision(8),
          SliceThickness: voxelMm[2],
          SpacingBetweenSlices: voxelMm[2],
          PixelSpacing: [voxelMm[1], voxelMm[0]], // DICOM: between rows (y), then between columns (x)
          ImagePositionPatient: origin.map((o, i) => o + z * voxelMm[2] * normal[i]),
          ImageOrientationPatient: [...rowDir, ...colDir],
          SliceLocation: z * voxelMm[2],
          Rows: ny,
          Columns: nx,
          SamplesPerPixel: 1,
          PhotometricInterpretation: 'MONOCHROME2',
          BitsAllocated: 16,
          BitsStored: 12,
          HighBit: 11,
          PixelRepresentation: 0,
          ...(p.part === 'phase' ? { RescaleSlope: PHASE_RESCALE.slope, RescaleIntercept: PHASE_RESCALE.intercept, RescaleType: 'US' } : {}),
          PixelData: [pixels.buffer],
          _vrMap: { PixelData: 'OW' },
        };
        const meta = {
          FileMetaInformationVersion: new Uint8Array([0, 1]).buffer,
          MediaStorageSOPClassUID: MR_IMAGE_STORAGE,
          MediaStorageSOPInstanceUID: sop,
          TransferSyntaxUID: EXPLICIT_LE,
          ImplementationClassUID: '1.2.826.0.1.3680043.10.1024',
        };
        const dict = new DicomDict(DicomMetaDictionary.denaturalizeDataset(meta));
        dict.dict = DicomMetaDictionary.denaturalizeDataset(ds);
        const file = path.join(dir, `${p.part}_e${e + 1}_${String(z).padStart(3, '0')}.dcm`);
        fs.writeFileSync(file, Buffer.from(dict.write()));
        files.push(file);
      }
    }
  }
  return { files, ...out, geometry: { origin, rowDir, colDir, normal, voxelMm } };
}

/**
 * The written voxel index [x, y, z] (fractional; round it) at a patient position (LPS, mm).
 * Precondition: geometry is writeDicomScan's.
 */
export function dicomIndex(geometry, lps) {
  const { origin, rowDir, colDir, normal, voxelMm } = geometry;
  const d = lps.map((v, i) => v - origin[i]);
  return [dot(d, rowDir) / voxelMm[0], dot(d, colDir) / voxelMm[1], dot(d, normal) / voxelMm[2]];
}

const dot = (a, b) => a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
const cross = (a, b) => [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
