// The result panels: field, χ, and the phantom truth in the demo, each slice z of its volume as stored (the same slice
// in all; axial for an axial acquisition) drawn on a 2D canvas through a colormap (NiiVue's tables) and a window, with
// a colour bar. No WebGL: a run's result shows at once on any machine (in software WebGL, where there is no GPU,
// NiiVue computes each volume it is given into 3D textures, seconds of CPU for a head); the viewer below the panels
// (panels/viewer.js) is NiiVue, for everything else.
import { cmapper } from '@niivue/niivue';
import { valueText } from './viewer-catalog.js';

const BAR = 12; // the colour bar's height, CSS px
const TEXT = '11px system-ui, sans-serif';

/** The colormap names NiiVue knows. */
export const colormapNames = () => cmapper.colormaps();

/**
 * How voxel axes 0 and 1 lie on the screen: { swap (voxel axis 0 runs down the screen), flipX, flipY }. Of the two,
 * the one nearer the superior (else the anterior) direction runs up, the other to the right, each toward its world
 * axis' positive end: an axial slice has right to the right and anterior up, as the viewer's NiiVue shows it with the
 * neurological convention.
 * affine: number[16], row-major voxel → world (RAS), or undefined (voxel axes are R, A, S).
 */
function layout(affine) {
  if (!affine) return { swap: false, flipX: false, flipY: true };
  // The world axis (0 R, 1 A, 2 S) each voxel axis runs along most, and its sign.
  const along = [0, 1].map((c) => {
    const col = [affine[c], affine[4 + c], affine[8 + c]];
    const w = [0, 1, 2].reduce((b, k) => (Math.abs(col[k]) > Math.abs(col[b]) ? k : b), 0);
    return { w, sign: Math.sign(col[w]) || 1 };
  });
  const swap = along[0].w > along[1].w;
  const [h, v] = swap ? [along[1], along[0]] : along;
  return { swap, flipX: h.sign < 0, flipY: v.sign > 0 };
}

/**
 * Slice z of `data` (dims [nx, ny, nz], x fastest) as RGBA pixels laid out as layout() says (axial: right to the right,
 * anterior up):
 * {width, height, swap (voxel axis 0 runs down), rgba (Uint8ClampedArray, row 0 at the top)}. A voxel maps through
 * `lut` (256 RGBA entries) from `win` [lo, hi]; a voxel that is not finite is left transparent.
 */
export function sliceRgba(data, dims, z, affine, lut, win) {
  const [nx, ny] = dims;
  const { swap, flipX, flipY } = layout(affine);
  const [w, h] = swap ? [ny, nx] : [nx, ny];
  const [lo, hi] = win;
  const scale = hi > lo ? 255 / (hi - lo) : 0;
  const rgba = new Uint8ClampedArray(4 * w * h);
  const base = z * nx * ny;
  for (let j = 0; j < ny; j++) {
    for (let i = 0; i < nx; i++) {
      const v = data[base + i + nx * j];
      if (!Number.isFinite(v)) continue;
      let c = swap ? j : i;
      let r = swap ? i : j;
      if (flipX) c = w - 1 - c;
      if (flipY) r = h - 1 - r;
      const o = 4 * (c + w * r);
      const t = 4 * Math.max(0, Math.min(255, Math.round((v - lo) * scale)));
      rgba[o] = lut[t];
      rgba[o + 1] = lut[t + 1];
      rgba[o + 2] = lut[t + 2];
      rgba[o + 3] = 255;
    }
  }
  return { width: w, height: h, swap, rgba };
}

export class ResultPanels {
  /** panels: { field: canvas, chi: canvas, truth: canvas } */
  constructor(panels) {
    this.panels = panels;
    this.like = null; // the shown volumes' geometry: {dims, voxelMm, affine?}
    this.z = 0;
    this.loaded = new Set();
    this.shown = {}; // panel → { data, win: [lo, hi], colormap }
    this.redraw = () => {
      for (const k of this.loaded) this.draw(k);
    };
    const ro = new ResizeObserver(this.redraw);
    for (const c of Object.values(panels)) ro.observe(c);
  }

  /**
   * Show volumes: { field?, chi?, truth? } Float32Arrays over geometry `like` ({dims, voxelMm, affine?} or a
   * readNifti result); windows: { field: [lo, hi], chi: [lo, hi] }.
   */
  show(volumes, like, windows, colormap = 'gray') {
    this.like = like;
    for (const k of Object.keys(this.panels)) {
      const data = volumes[k];
      this.panels[k].closest('figure')?.toggleAttribute('hidden', !data);
      if (!data) {
        delete this.shown[k];
        this.loaded.delete(k);
        continue;
      }
      const win = k === 'field' ? windows.field : windows.chi;
      this.shown[k] = { data, win: [win[0], win[1]], colormap: k === 'field' ? 'gray' : colormap };
      this.loaded.add(k);
    }
    this.setSlice(Math.floor(like.dims[2] / 2));
  }

  /** Colormap and window of the χ panels (χ and truth). */
  setChiDisplay(colormap, lo, hi) {
    for (const k of ['chi', 'truth']) {
      if (!this.shown[k]) continue;
      Object.assign(this.shown[k], { win: [lo, hi], colormap });
      this.draw(k);
    }
  }

  /** Slice z (voxels) in every panel. */
  setSlice(z) {
    if (!this.like) return;
    this.z = Math.max(0, Math.min(this.like.dims[2] - 1, Math.round(z)));
    this.redraw();
  }

  /** Draws panel k: the slice through its colormap and window, at the voxels' aspect, and the colour bar under it. */
  draw(k) {
    const s = this.shown[k];
    const canvas = this.panels[k];
    if (!s || !canvas.clientWidth) return;
    const lut = cmapper.colormap(s.colormap);
    const { width: w, height: h, swap, rgba } = sliceRgba(s.data, this.like.dims, this.z, this.like.affine, lut, s.win);
    const [lo, hi] = s.win;
    const [nx, ny] = this.like.dims;
    const dpr = globalThis.devicePixelRatio || 1;
    // Sizing the canvas clears it: around the slice (and under a voxel that is not finite) the panel's own background
    // shows (style.css, .panels .nv).
    canvas.width = Math.round(canvas.clientWidth * dpr);
    canvas.height = Math.round(canvas.clientHeight * dpr);
    const g = canvas.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    const cw = canvas.clientWidth;
    const ch = canvas.clientHeight;
    // The slice at its physical aspect, as large as fits above the bar.
    const mm = this.like.voxelMm;
    const [pw, ph] = swap ? [ny * mm[1], nx * mm[0]] : [nx * mm[0], ny * mm[1]];
    const room = ch - 2 * BAR - 6;
    const f = Math.min(cw / pw, room / ph);
    const tile = new OffscreenCanvas(w, h);
    tile.getContext('2d').putImageData(new ImageData(rgba, w, h), 0, 0);
    g.imageSmoothingEnabled = true;
    g.drawImage(tile, (cw - pw * f) / 2, (room - ph * f) / 2, pw * f, ph * f);
    // The colour bar: the colormap from the window's low end to its high end, both written beside it.
    const bar = new ImageData(256, 1);
    bar.data.set(lut);
    for (let i = 3; i < 1024; i += 4) bar.data[i] = 255;
    const strip = new OffscreenCanvas(256, 1);
    strip.getContext('2d').putImageData(bar, 0, 0);
    const by = ch - 2 * BAR - 2;
    g.drawImage(strip, 8, by, cw - 16, BAR);
    g.fillStyle = '#c8cdd6';
    g.font = TEXT;
    g.textBaseline = 'top';
    g.textAlign = 'left';
    g.fillText(valueText(lo), 8, by + BAR + 2);
    g.textAlign = 'right';
    g.fillText(valueText(hi), cw - 8, by + BAR + 2);
    canvas.dataset.slice = String(this.z);
  }
}

