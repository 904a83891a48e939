// Result viewer: NiiVue panels (field, χ, and the phantom truth in the demo), all showing the same axial
// slice, with colormap and window controls. Volumes are handed to NiiVue as in-memory NIfTI bytes
// (no network request).
import { Niivue, NVImage } from '@niivue/niivue';
import { writeNifti } from '../bindings/js/index.js';

const NV_OPTIONS = {
  backColor: [0.02, 0.03, 0.045, 1],
  show3Dcrosshair: false,
  crosshairWidth: 0,
  isColorbar: true,
  isRadiologicalConvention: false,
  loadingText: '',
  dragAndDropEnabled: false,
  logLevel: 'error',
};

export class Viewer {
  /** panels: { field: canvas, chi: canvas, truth: canvas } */
  constructor(panels) {
    this.panels = panels;
    this.nv = {};
    this.ready = Promise.all(
      Object.entries(panels).map(async ([k, canvas]) => {
        const nv = new Niivue({ ...NV_OPTIONS });
        await nv.attachToCanvas(canvas);
        nv.setSliceType(nv.sliceTypeAxial);
        this.nv[k] = nv;
      }),
    );
    this.dims = null;
    this.loaded = new Set();
  }

  /** Colormap names NiiVue knows. */
  colormaps() {
    return Object.values(this.nv)[0]?.colormaps() ?? ['gray'];
  }

  /**
   * Show volumes: { field?, chi?, truth? } Float32Arrays over geometry `like` ({dims, voxelMm, affine?} or a
   * readNifti result); windows: { field: [lo, hi], chi: [lo, hi] }.
   */
  async show(volumes, like, windows, colormap = 'gray') {
    await this.ready;
    this.dims = like.dims;
    for (const [k, nv] of Object.entries(this.nv)) {
      for (const v of [...nv.volumes]) nv.removeVolume(v);
      const data = volumes[k];
      this.panels[k].closest('figure')?.toggleAttribute('hidden', !data);
      if (!data) {
        this.loaded.delete(k);
        continue;
      }
      const bytes = await writeNifti(data, like, { description: `tessera ${k}` });
      const win = k === 'field' ? windows.field : windows.chi;
      const img = await NVImage.loadFromUrl({
        url: `${k}.nii`,
        name: `${k}.nii`,
        buffer: bytes.buffer,
        colormap: k === 'field' ? 'gray' : colormap,
        cal_min: win[0],
        cal_max: win[1],
        trustCalMinMax: true,
      });
      nv.addVolume(img);
      this.loaded.add(k);
    }
    this.setSlice(Math.floor(like.dims[2] / 2));
  }

  /** Colormap and window of the χ panels (χ and truth). */
  setChiDisplay(colormap, lo, hi) {
    for (const k of ['chi', 'truth']) {
      const nv = this.nv[k];
      const v = nv?.volumes[0];
      if (!v) continue;
      v.colormap = colormap;
      v.cal_min = lo;
      v.cal_max = hi;
      nv.updateGLVolume();
    }
  }

  setFieldWindow(lo, hi) {
    const nv = this.nv.field;
    const v = nv?.volumes[0];
    if (!v) return;
    v.cal_min = lo;
    v.cal_max = hi;
    nv.updateGLVolume();
  }

  /** Axial slice z (voxels) in every panel. */
  setSlice(z) {
    if (!this.dims) return;
    const [nx, ny, nz] = this.dims;
    for (const nv of Object.values(this.nv)) {
      if (!nv.volumes.length) continue;
      nv.scene.crosshairPos = nv.vox2frac([Math.floor(nx / 2), Math.floor(ny / 2), Math.max(0, Math.min(nz - 1, z))]);
      nv.drawScene();
    }
  }
}
