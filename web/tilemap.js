// The live tile map: an axial slice with the plan's tiles drawn over it, each tile queued, running, done or
// skipped. Every rectangle comes from the C++ plan (plan.grid: tiles per axis, patch edge, and per tile its
// index, core [coreLo, coreHi), patch origin patchLo and whether it is skipped); the map does no tiling of its
// own, so it shows the tiles that run. A whole-volume plan is one tile covering the volume. Cores on a stride
// shorter than the core overlap: each is drawn whole, so the overlaps show as denser bands.
//
// States: progress events name the tiles by grid index (x fastest, then y, then z, as plan.grid lists them):
// runningTiles have a network call open, startedTiles not running are done (setTiles). Runs whose progress
// carries no tile ids get setProgress: the first `done` tiles to run done, the next `inFlight` running.

import { cssColor } from './dom.js';

export const STATES = ['queued', 'running', 'done', 'skipped'];
const Q = 0, RUN = 1, DONE = 2, SKIP = 3;

const COLORS = {
  [Q]: { fill: 'rgba(120,140,170,0.10)', stroke: 'rgba(170,190,220,0.55)' },
  [RUN]: { fill: 'rgba(255,170,40,0.45)', stroke: 'rgba(255,190,80,1)' },
  [DONE]: { fill: 'rgba(60,200,120,0.32)', stroke: 'rgba(90,220,140,0.9)' },
  [SKIP]: { fill: 'rgba(20,20,28,0.55)', stroke: 'rgba(90,90,100,0.5)' },
};
const LAYER_COLORS = { [Q]: '#4a5568', [RUN]: '#ffaa28', [DONE]: '#3cc878', [SKIP]: '#23252b' };

export class TileMap {
  /**
   * canvas: the slice view; layers (optional): a strip with every z layer of tiles as a small grid.
   * @param {HTMLCanvasElement} canvas
   * @param {HTMLCanvasElement} [layers]
   */
  constructor(canvas, layers = null) {
    this.canvas = canvas;
    this.ctx = canvas.getContext('2d');
    this.layers = layers;
    this.follow = true; // during a run, show the layer where tiles are running (until the user picks a slice)
    this.dims = null;
    this.tiles = [];
    this.counts3 = [0, 0, 0];
    this.state = new Uint8Array(0);
    this.order = []; // indices of the tiles to run, in grid order
    this.z = 0;
  }

  /**
   * A plan's tiles over a volume: grid is plan.grid (null or no tiles: the volume without tiles, e.g. an
   * infeasible plan), dims the volume's, mask (Uint8Array or null) and background (Float32Array or null) the
   * picture under the tiles; patchDims the plan's patch (x, y, z; default a cube of grid.patchEdge: a crop box's slabs
   * are not cubes).
   * Preconditions: grid.tiles are in grid order (tile i has index i) and lie inside dims.
   */
  setup({ grid, dims, mask = null, background = null, patchDims }) {
    this.dims = dims;
    this.tiles = grid?.tiles ?? [];
    this.counts3 = this.tiles.length ? grid.counts : [0, 0, 0];
    const edge = grid?.patchEdge ?? 0;
    this.patchDims = patchDims ?? [edge, edge, edge];
    this.state = Uint8Array.from(this.tiles, (t) => (t.skipped ? SKIP : Q));
    this.order = this.tiles.filter((t) => !t.skipped).map((t) => t.index);
    this.mask = mask;
    this.background = background;
    this.range = background ? robustRange(background, mask) : [0, 1];
    if (this.z >= dims[2] || this.z < 0) this.z = Math.floor(dims[2] / 2);
    this._bgCache = new Map();
    this.draw();
  }

  /** done tiles finished, inFlight running (see the note at the top: by grid order). */
  setProgress(done, inFlight) {
    const a = this.order.length;
    done = Math.max(0, Math.min(a, done));
    const run = Math.max(0, Math.min(a - done, inFlight));
    for (let i = 0; i < a; i++) this.state[this.order[i]] = i < done ? DONE : i < done + run ? RUN : Q;
    if (a) this._follow(this.order[Math.min(a - 1, done)]);
    this.draw();
  }

  /** Exact states from the runtime: running tile indices, and every tile index started so far. */
  setTiles(started, running) {
    const run = new Set(running);
    const begun = new Set(started);
    for (const t of this.order) this.state[t] = run.has(t) ? RUN : begun.has(t) ? DONE : Q;
    if (running.length) this._follow(running[0]);
    this.draw();
  }

  /** While following, shows the middle slice of tile t's core when z is not inside it. */
  _follow(t) {
    const tile = this.tiles[t];
    if (!this.follow || !tile || this.tiles.length < 2) return;
    if (this.z < tile.coreLo[2] || this.z >= tile.coreHi[2]) this.z = Math.floor((tile.coreLo[2] + tile.coreHi[2] - 1) / 2);
  }

  /** After a cancel or an error: running tiles go back to queued. */
  settle() {
    for (const t of this.order) if (this.state[t] === RUN) this.state[t] = Q;
    this.draw();
  }

  setSlice(z) {
    if (!this.dims) return;
    this.z = Math.max(0, Math.min(this.dims[2] - 1, z | 0));
    this.draw();
  }

  /** How many tiles are in each state, and in all. */
  counts() {
    const c = { total: this.state.length, queued: 0, running: 0, done: 0, skipped: 0 };
    for (const s of this.state) c[STATES[s]]++;
    return c;
  }

  /** The layer of tiles (z index in the grid, from 0) whose cores hold slice z; -1 when none does. */
  layerAt(z) {
    const perLayer = this.counts3[0] * this.counts3[1];
    for (let k = 0; k < this.counts3[2]; k++) {
      const t = this.tiles[k * perLayer];
      if (z >= t.coreLo[2] && z < t.coreHi[2]) return k;
    }
    return -1;
  }

  draw() {
    const { canvas, ctx } = this;
    if (!this.dims) {
      ctx.clearRect(0, 0, canvas.width, canvas.height);
      return;
    }
    const [nx, ny] = this.dims;
    const scale = Math.max(1, Math.floor(Math.min(512 / nx, 512 / ny)));
    const W = nx * scale, H = ny * scale;
    if (canvas.width !== W || canvas.height !== H) {
      canvas.width = W;
      canvas.height = H;
    }
    ctx.imageSmoothingEnabled = false;
    ctx.fillStyle = cssColor('--image-bg').hex;
    ctx.fillRect(0, 0, W, H);
    const bg = this._background(this.z);
    if (bg) ctx.drawImage(bg, 0, 0, W, H);
    // y up: voxel row y is drawn at canvas row ny-1-y; rectangles clamped to the volume
    const rect = (x0, y0, x1, y1) => {
      const [a, b, c, d] = [Math.max(0, x0), Math.max(0, y0), Math.min(nx, x1), Math.min(ny, y1)];
      return [a * scale, (ny - d) * scale, (c - a) * scale, (d - b) * scale];
    };
    const k = this.layerAt(this.z);
    const perLayer = this.counts3[0] * this.counts3[1];
    const runningPatches = [];
    // Overlapping cores (a stride shorter than the core): skipped ones underneath, then queued, done, running on top.
    const layer = [];
    for (let i = k * perLayer; k >= 0 && i < (k + 1) * perLayer; i++) layer.push(i);
    const depth = { [SKIP]: 0, [Q]: 1, [DONE]: 2, [RUN]: 3 };
    layer.sort((a, b) => depth[this.state[a]] - depth[this.state[b]] || a - b);
    for (const i of layer) {
      const t = this.tiles[i];
      const s = this.state[i];
      const r = rect(t.coreLo[0], t.coreLo[1], t.coreHi[0], t.coreHi[1]);
      ctx.fillStyle = COLORS[s].fill;
      ctx.fillRect(...r);
      ctx.strokeStyle = COLORS[s].stroke;
      ctx.lineWidth = 1;
      ctx.strokeRect(r[0] + 0.5, r[1] + 0.5, r[2] - 1, r[3] - 1);
      if (s === RUN) {
        const p = rect(t.patchLo[0], t.patchLo[1], t.patchLo[0] + this.patchDims[0], t.patchLo[1] + this.patchDims[1]);
        if (p.some((v, j) => v !== r[j])) runningPatches.push(p);
      }
    }
    ctx.setLineDash([4, 3]);
    ctx.strokeStyle = 'rgba(255,200,90,0.9)';
    for (const r of runningPatches) ctx.strokeRect(r[0] + 0.5, r[1] + 0.5, r[2] - 1, r[3] - 1);
    ctx.setLineDash([]);
    ctx.fillStyle = 'rgba(230,235,245,0.9)';
    ctx.font = '12px system-ui, sans-serif';
    ctx.fillText(this.tiles.length ? `z = ${this.z}  (tile layer ${k + 1}/${this.counts3[2]})` : `z = ${this.z}  (no plan to draw)`, 6, 16);
    this.canvas.dataset.grid = this.counts3.join(',');
    this.canvas.dataset.layer = String(k);
    this._drawLayers(k);
  }

  /** Every z layer of tiles as a small grid (y up), the shown layer outlined. */
  _drawLayers(current) {
    const cv = this.layers;
    if (!cv) return;
    const [gx, gy, gz] = this.counts3;
    const cell = Math.max(3, Math.min(12, Math.floor(300 / Math.max(1, gz * (gx + 1)))));
    const W = Math.max(1, gz * (gx + 1) * cell), H = gy * cell + 4;
    if (cv.width !== W || cv.height !== H) {
      cv.width = W;
      cv.height = H;
    }
    const g = cv.getContext('2d');
    g.clearRect(0, 0, W, H);
    for (let k = 0; k < gz; k++) {
      const ox = k * (gx + 1) * cell;
      for (let j = 0; j < gy; j++) {
        for (let i = 0; i < gx; i++) {
          g.fillStyle = LAYER_COLORS[this.state[i + gx * (j + gy * k)]];
          g.fillRect(ox + i * cell, 2 + (gy - 1 - j) * cell, cell - 1, cell - 1);
        }
      }
      if (k === current) {
        g.strokeStyle = '#e6edf3';
        g.strokeRect(ox - 0.5, 1.5, gx * cell, gy * cell);
      }
    }
  }

  _background(z) {
    if (!this.background && !this.mask) return null;
    if (this._bgCache.has(z)) return this._bgCache.get(z);
    const [nx, ny] = this.dims;
    const img = new ImageData(nx, ny);
    const [lo, hi] = this.range;
    const off = z * nx * ny;
    for (let y = 0; y < ny; y++) {
      for (let x = 0; x < nx; x++) {
        const i = off + x + nx * y;
        const o = 4 * (x + nx * (ny - 1 - y));
        let g;
        if (this.background) {
          const v = this.background[i];
          g = Number.isFinite(v) ? Math.round(255 * Math.min(1, Math.max(0, (v - lo) / (hi - lo || 1)))) : 0;
          if (this.mask && !this.mask[i]) g = g >> 2;
        } else g = this.mask[i] ? 110 : 0;
        img.data[o] = img.data[o + 1] = img.data[o + 2] = g;
        img.data[o + 3] = 255;
      }
    }
    const c = new OffscreenCanvas(nx, ny);
    c.getContext('2d').putImageData(img, 0, 0);
    this._bgCache.set(z, c);
    return c;
  }
}

/** 1st and 99th percentile of a volume (inside the mask when given), from a strided sample. */
export function robustRange(data, mask = null) {
  const step = Math.max(1, Math.floor(data.length / 200000));
  const s = [];
  for (let i = 0; i < data.length; i += step) if ((!mask || mask[i]) && Number.isFinite(data[i])) s.push(data[i]);
  if (!s.length) return [0, 1];
  s.sort((a, b) => a - b);
  const lo = s[Math.floor(0.01 * (s.length - 1))], hi = s[Math.floor(0.99 * (s.length - 1))];
  return hi > lo ? [lo, hi] : [lo - 1, lo + 1];
}
