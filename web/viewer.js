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

/**
 * Shows `images` (NVImages; the first the background, the rest overlays) in place of nv's volumes, with one redraw.
 * NiiVue's addVolume and removeVolume each recompute every layer's textures; in software WebGL (a machine without a
 * GPU) that recomputation is most of the page's drawing, so the list is replaced at once and computed once.
 */
export function setVolumes(nv, images) {
  nv.volumes = [...images];
  nv.back = nv.volumes[0] ?? null;
  nv.overlays = nv.volumes.slice(1);
  if (nv.volumes.length) nv.updateGLVolume();
  else nv.drawScene();
}

/** The colormap names NiiVue knows (its own list: no canvas needed). */
export const colormapNames = () => new Niivue({ ...NV_OPTIONS }).colormaps();

export class Viewer {
  /** panels: { field: canvas, chi: canvas, truth: canvas } */
  constructor(panels) {
    this.panels = panels;
    this.nv = {};
    this.attached = {}; // panel → Promise of its NiiVue, made by the first show() with a volume for it
    this.dims = null;
    this.loaded = new Set();
    this.shown = {}; // panel → { data, like, win, colormap } it shows
  }

  /**
   * NiiVue on panel k's canvas, made when the panel first has a volume to show: each is a WebGL context that compiles
   * NiiVue's shaders, most of a page load's drawing where WebGL is software (a machine without a GPU).
   */
  attach(k) {
    this.attached[k] ??= (async () => {
      const nv = new Niivue({ ...NV_OPTIONS });
      await nv.attachToCanvas(this.panels[k]);
      nv.setSliceType(nv.sliceTypeAxial);
      this.nv[k] = nv;
      return nv;
    })();
    return this.attached[k];
  }

  /**
   * Show volumes: { field?, chi?, truth? } Float32Arrays over geometry `like` ({dims, voxelMm, affine?} or a
   * readNifti result); windows: { field: [lo, hi], chi: [lo, hi] }.
   */
  async show(volumes, like, windows, colormap = 'gray') {
    this.dims = like.dims;
    for (const k of Object.keys(this.panels)) {
      const data = volumes[k];
      this.panels[k].closest('figure')?.toggleAttribute('hidden', !data);
      const nv = data ? await this.attach(k) : this.nv[k];
      if (!data) {
        if (nv) setVolumes(nv, []);
        delete this.shown[k];
        this.loaded.delete(k);
        continue;
      }
      const win = k === 'field' ? windows.field : windows.chi;
      const cmap = k === 'field' ? 'gray' : colormap;
      // A panel that already shows these voxels, so, is left as it is (another output of the same run changes χ's).
      const was = this.shown[k];
      if (was && was.data === data && was.like === like && was.win[0] === win[0] && was.win[1] === win[1] && was.colormap === cmap) continue;
      const bytes = await writeNifti(data, like, { description: `tessera ${k}` });
      const img = await NVImage.loadFromUrl({
        url: `${k}.nii`,
        name: `${k}.nii`,
        buffer: bytes.buffer,
        colormap: cmap,
        cal_min: win[0],
        cal_max: win[1],
        trustCalMinMax: true,
      });
      setVolumes(nv, [img]);
      this.shown[k] = { data, like, win: [win[0], win[1]], colormap: cmap };
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
      Object.assign(this.shown[k], { win: [lo, hi], colormap });
    }
  }

  setFieldWindow(lo, hi) {
    const nv = this.nv.field;
    const v = nv?.volumes[0];
    if (!v) return;
    v.cal_min = lo;
    v.cal_max = hi;
    nv.updateGLVolume();
    this.shown.field.win = [lo, hi];
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
