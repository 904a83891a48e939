// The live tile map: an axial slice with the tile grid drawn over it, each tile queued, running, done
// or skipped.
//
// Geometry (for drawing only; every count the page shows comes from the C++ planner): tiles are
// core-aligned from voxel 0 on each axis, ceil(dim/core) per axis, the last one clamped at the volume's
// edge; a tile's input patch is its core grown by the halo on each side, clamped at the edges. A tile is
// skipped when its core holds no mask voxel. The planner's tile counts are exposed next to the drawn
// ones in the run panel so a disagreement is visible.
//
// States: progress events name the tiles (grid index, x fastest, then y, then z, as in the C++ core):
// runningTiles have a network call open, startedTiles not running are done (setTiles). Whole-volume runs
// and networks with their own patching carry no tile ids; for them setProgress marks the first `done`
// tiles done and the next `inFlight` running, by grid order.

export const STATES = ['queued', 'running', 'done', 'skipped'];
const Q = 0, RUN = 1, DONE = 2, SKIP = 3;

const COLORS = {
  [Q]: { fill: 'rgba(120,140,170,0.10)', stroke: 'rgba(170,190,220,0.55)' },
  [RUN]: { fill: 'rgba(255,170,40,0.45)', stroke: 'rgba(255,190,80,1)' },
  [DONE]: { fill: 'rgba(60,200,120,0.32)', stroke: 'rgba(90,220,140,0.9)' },
  [SKIP]: { fill: 'rgba(20,20,28,0.55)', stroke: 'rgba(90,90,100,0.5)' },
};

/** Tiles per axis for a core edge (whole volume: one tile). */
export function gridOf(dims, core, whole = false) {
  if (whole) return [1, 1, 1];
  return dims.map((d) => Math.max(1, Math.ceil(d / core)));
}

/** Per tile (x fastest): 1 when its core holds at least one mask voxel. */
export function activeTiles(dims, core, mask, whole = false) {
  const g = gridOf(dims, core, whole);
  const n = g[0] * g[1] * g[2];
  const active = new Uint8Array(n);
  if (!mask) return active.fill(1);
  if (whole) {
    active[0] = mask.some((v) => v) ? 1 : 0;
    return active;
  }
  const [nx, ny, nz] = dims;
  const tx = new Int32Array(nx);
  for (let x = 0; x < nx; x++) tx[x] = Math.floor(x / core);
  let i = 0;
  for (let z = 0; z < nz; z++) {
    const kz = Math.floor(z / core) * g[0] * g[1];
    for (let y = 0; y < ny; y++) {
      const ky = kz + Math.floor(y / core) * g[0];
      for (let x = 0; x < nx; x++, i++) if (mask[i]) active[ky + tx[x]] = 1;
    }
  }
  return active;
}

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
    this.state = new Uint8Array(0);
    this.order = []; // active tile indices in grid order
    this.z = 0;
    this.bg = null; // ImageData cache per z
  }

  /**
   * New geometry: dims, core, halo, whole, mask (Uint8Array or null) and a background volume (Float32Array
   * or null) drawn in grey under the grid.
   */
  setup({ dims, core, halo, whole = false, mask = null, background = null }) {
    this.dims = dims;
    this.core = whole ? Math.max(...dims) : core;
    this.halo = whole ? 0 : halo;
    this.whole = whole;
    this.grid = gridOf(dims, core, whole);
    const active = activeTiles(dims, core, mask, whole);
    this.state = new Uint8Array(active.length);
    this.order = [];
    for (let t = 0; t < active.length; t++) {
      if (active[t]) this.order.push(t);
      else this.state[t] = SKIP;
    }
    this.mask = mask;
    this.background = background;
    this.range = background ? robustRange(background, mask) : [0, 1];
    if (this.z >= dims[2] || this.z < 0) this.z = Math.floor(dims[2] / 2);
    this._bgCache = new Map();
    this.draw();
  }

  /** done active tiles finished, inFlight running (see the note at the top: an approximation by order). */
  setProgress(done, inFlight) {
    const a = this.order.length;
    done = Math.max(0, Math.min(a, done));
    const run = Math.max(0, Math.min(a - done, inFlight));
    for (let i = 0; i < a; i++) this.state[this.order[i]] = i < done ? DONE : i < done + run ? RUN : Q;
    if (this.follow && !this.whole && a) {
      const t = this.order[Math.min(a - 1, done)];
      const kz = Math.floor(t / (this.grid[0] * this.grid[1]));
      if (Math.floor(this.z / this.core) !== kz) this.z = Math.min(this.dims[2] - 1, kz * this.core + Math.floor(this.core / 2));
    }
    this.draw();
  }

  /** Exact states from the runtime: running tile ids, and every tile id started so far. */
  setTiles(started, running) {
    const run = new Set(running);
    const begun = new Set(started);
    for (const t of this.order) this.state[t] = run.has(t) ? RUN : begun.has(t) ? DONE : Q;
    if (this.follow && !this.whole && running.length) {
      const kz = Math.floor(running[0] / (this.grid[0] * this.grid[1]));
      if (Math.floor(this.z / this.core) !== kz) this.z = Math.min(this.dims[2] - 1, kz * this.core + Math.floor(this.core / 2));
    }
    this.draw();
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

  counts() {
    const c = { queued: 0, running: 0, done: 0, skipped: 0, total: this.state.length };
    for (const s of this.state) c[STATES[s]]++;
    return c;
  }

  /** The map as data: grid, core, halo, every tile's state and the counts. */
  snapshot() {
    return { grid: this.grid, core: this.core, halo: this.halo, states: Array.from(this.state, (s) => STATES[s]), counts: this.counts() };
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
    ctx.fillStyle = '#05070b';
    ctx.fillRect(0, 0, W, H);
    const bg = this._background(this.z);
    if (bg) ctx.drawImage(bg, 0, 0, W, H);
    // y up: voxel row y is drawn at canvas row ny-1-y
    const kz = this.whole ? 0 : Math.floor(this.z / this.core);
    const [gx, gy] = this.grid;
    const c = this.core, h = this.halo;
    const rect = (x0, y0, x1, y1) => [x0 * scale, (ny - y1) * scale, (x1 - x0) * scale, (y1 - y0) * scale];
    const runningHalos = [];
    for (let j = 0; j < gy; j++) {
      for (let i = 0; i < gx; i++) {
        const t = i + gx * (j + gy * kz);
        const s = this.state[t];
        const x0 = this.whole ? 0 : i * c, x1 = this.whole ? nx : Math.min(nx, (i + 1) * c);
        const y0 = this.whole ? 0 : j * c, y1 = this.whole ? ny : Math.min(ny, (j + 1) * c);
        const r = rect(x0, y0, x1, y1);
        ctx.fillStyle = COLORS[s].fill;
        ctx.fillRect(...r);
        ctx.strokeStyle = COLORS[s].stroke;
        ctx.lineWidth = 1;
        ctx.strokeRect(r[0] + 0.5, r[1] + 0.5, r[2] - 1, r[3] - 1);
        if (s === RUN && h > 0) runningHalos.push(rect(Math.max(0, x0 - h), Math.max(0, y0 - h), Math.min(nx, x1 + h), Math.min(ny, y1 + h)));
      }
    }
    ctx.setLineDash([4, 3]);
    ctx.strokeStyle = 'rgba(255,200,90,0.9)';
    for (const r of runningHalos) ctx.strokeRect(r[0] + 0.5, r[1] + 0.5, r[2] - 1, r[3] - 1);
    ctx.setLineDash([]);
    ctx.fillStyle = 'rgba(230,235,245,0.9)';
    ctx.font = '12px system-ui, sans-serif';
    ctx.fillText(`z = ${this.z}  (tile layer ${kz + 1}/${this.grid[2]})`, 6, 16);
    this._drawLayers(kz);
  }

  /** Every z layer of tiles as a small grid (y up), the shown layer outlined. */
  _drawLayers(current) {
    const cv = this.layers;
    if (!cv) return;
    const [gx, gy, gz] = this.grid;
    const cell = Math.max(3, Math.min(12, Math.floor(300 / (gz * (gx + 1)))));
    const W = gz * (gx + 1) * cell, H = gy * cell + 4;
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
          const s = this.state[i + gx * (j + gy * k)];
          g.fillStyle = s === SKIP ? '#23252b' : s === DONE ? '#3cc878' : s === RUN ? '#ffaa28' : '#4a5568';
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
