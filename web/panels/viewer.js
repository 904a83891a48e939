// The viewer and the mask editor: one NiiVue canvas showing any volume of the loaded input (every echo of a phase or a
// magnitude) or of the last run (χ, every intermediate, and whatever other Volumes the result holds) in an axial,
// coronal, sagittal or multiplanar view with a linked crosshair, the value under it with its unit, a window and a
// colormap per volume, and the mask (or the tile map, or a run's mask) as an overlay. The mask is edited here (the
// magnitude's threshold, live; erode, dilate, fill holes, largest component; a brush that adds or removes a ball of a
// radius in mm; undo): the edited mask becomes the input's mask, which the plan and the run take, and is downloadable.
// Published on the DOM: #viewValue's data-* (vox, value, unit, volume, echo), #viewerCard's data-* (view, volume, echo,
// overlay, window, colormap), #maskInfo's data-* (voxels, added, removed, ops, source, edits).
import { Niivue, NVImage } from '@niivue/niivue';
import { writeNifti, thresholdMask } from '../../bindings/js/index.js';
import { colormapNames } from '../result-panels.js';
import { $, addOption, setData, clearData, cssColor } from '../dom.js';
import { catalog, echoOf, defaultWindow, valueText, tileLabels, tilesFit } from '../viewer-catalog.js';
import { MaskHistory, brush, countSet, dilate, erode, fillHoles, largestComponent } from '../mask-edit.js';

const NV_OPTIONS = {
  show3Dcrosshair: false,
  crosshairWidth: 1,
  crosshairColor: [0.35, 0.65, 1, 0.9],
  isColorbar: true,
  isRadiologicalConvention: false,
  multiplanarShowRender: 0, // NiiVue's SHOW_RENDER.NEVER: the three planes only
  loadingText: '',
  dragAndDropEnabled: false,
  logLevel: 'error',
};

/**
 * Shows `images` (NVImages; the first the background, the rest overlays) in place of nv's volumes, with one redraw.
 * NiiVue's addVolume and removeVolume each recompute every layer's textures; in software WebGL (a machine without a
 * GPU) that recomputation is most of the page's drawing, so the list is replaced at once and computed once.
 */
function setVolumes(nv, images) {
  nv.volumes = [...images];
  nv.back = nv.volumes[0] ?? null;
  nv.overlays = nv.volumes.slice(1);
  if (nv.volumes.length) nv.updateGLVolume();
  else nv.drawScene();
}

/** The header of a loaded input or a result, without its voxels (writeNifti's `like`). */
function header(like) {
  const { data, ...rest } = like;
  return rest;
}

/** Saves bytes as a download named `name`. */
function save(bytes, name) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([bytes], { type: 'application/gzip' }));
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

/** A file name's stem: no .nii(.gz), no " (+n)" of stacked echoes. */
const stem = (name) => name.replace(/ \(\+\d+\)$/, '').replace(/\.nii(\.gz)?$/i, '');

export class ViewerPanel {
  /**
   * @param {import('../page.js').Page} page
   * @param {(op: string, args: object) => Promise<any>} io the I/O worker client (writes NIfTI)
   */
  constructor(page, io) {
    this.page = page;
    this.io = io;
    this.nv = null;
    this.input = null; // the input shown and edited
    this.original = null; // the input's own mask (null: none), restored by Discard
    this.history = null; // the editing session (MaskHistory), null before the first edit
    this.entries = [];
    this.displays = new Map(); // catalog key → { cmap, min, max }: each volume keeps its window and colormap
    this.base = null; // { entry, echo, data: the 3D array shown, image: NVImage }
    this.overlay = null; // { key, image }
    this.stroke = null; // the brush stroke in progress: { open: whether its undo step exists }
    this.showing = Promise.resolve();
    this.attached = null; // Promise: NiiVue on the canvas, made by the first volume shown (attach())
    for (const name of colormapNames()) addOption($('viewCmap'), name);
    this.wire();
    this.syncControls();
  }

  wire() {
    const fail = (e) => this.page.showError(e);
    $('viewType').addEventListener('change', () => this.setView());
    $('viewVolume').addEventListener('change', () => this.show().catch(fail));
    $('viewEcho').addEventListener('input', () => this.show().catch(fail));
    $('viewOverlay').addEventListener('change', () => this.show().catch(fail));
    $('viewCmap').addEventListener('change', () => this.restyle());
    for (const id of ['viewMin', 'viewMax']) $(id).addEventListener('input', () => this.restyle());
    $('viewDownload').addEventListener('click', () => this.downloadShown().catch(fail));
    $('maskThreshold').addEventListener('input', () => this.edit(() => this.threshold()));
    $('maskErode').addEventListener('click', () => this.edit(() => this.morph('erode')));
    $('maskDilate').addEventListener('click', () => this.edit(() => this.morph('dilate')));
    $('maskFill').addEventListener('click', () => this.edit(() => this.apply((m, d) => fillHoles(m, d), 'fill holes')));
    $('maskLargest').addEventListener('click', () => this.edit(() => this.apply((m, d) => largestComponent(m, d), 'largest component')));
    $('maskUndo').addEventListener('click', () => this.edit(() => this.history?.undo()));
    $('maskDiscard').addEventListener('click', () => this.discard());
    $('maskDownload').addEventListener('click', () => this.downloadMask().catch(fail));
    const canvas = $('nvMain');
    // A brush stroke: from the pointer going down on the canvas to it going up; NiiVue moves the crosshair between.
    canvas.addEventListener('pointerdown', () => {
      if (this.brushMode() !== 'off' && this.input) this.stroke = { open: false };
    });
    const end = () => setTimeout(() => {
      if (this.stroke?.open) this.edited();
      this.stroke = null;
    }, 0);
    canvas.addEventListener('pointerup', end);
    canvas.addEventListener('pointerleave', end);
  }

  brushMode() {
    return document.querySelector('input[name=brush]:checked')?.value ?? 'off';
  }

  /** A new input (or none) is loaded or selected: its volumes are listed, its own mask is the one edited. */
  setInput(input) {
    if (input === this.input) return;
    this.input = input;
    this.original = input?.mask ?? null;
    this.history = null;
    this.syncControls();
    this.refresh().catch((e) => this.page.showError(e));
  }

  /** A run finished: its volumes are listed, χ (or the first) shown. */
  async resultChanged() {
    await this.refresh('result.chi');
  }

  /** The mask the run will take: the edited one, else the input's own. */
  mask() {
    return this.history?.mask ?? this.input?.mask ?? null;
  }

  /** Lists the volumes and overlays; keeps the selections, or selects `prefer` (then the first) and `overlay`. */
  async refresh(prefer, overlay) {
    const sel = $('viewVolume');
    const before = sel.value;
    this.entries = catalog(this.input, this.page.result, this.mask());
    sel.textContent = '';
    for (const [group, label] of [['result', 'Result'], ['input', 'Input']]) {
      const items = this.entries.filter((e) => e.group === group);
      if (!items.length) continue;
      const og = document.createElement('optgroup');
      og.label = label;
      for (const e of items) addOption(og, e.key, `${e.label}${e.unit ? ` (${e.unit})` : ''}${e.echoes > 1 ? `, ${e.echoes} echoes` : ''}`);
      sel.append(og);
    }
    const keys = this.entries.map((e) => e.key);
    sel.value = (prefer && keys.includes(prefer) && prefer) || (keys.includes(before) && before) || keys[0] || '';
    const ov = $('viewOverlay');
    const beforeOv = ov.value;
    ov.textContent = '';
    addOption(ov, '', 'none');
    if (this.mask()) addOption(ov, 'input.mask', 'the mask (the run’s)');
    for (const e of this.entries) if (e.group === 'result' && e.kind === 'mask') addOption(ov, e.key, `${e.label} (last run)`);
    const tiles = this.input && tileLabels(this.page.plan, this.input.geometry.dims);
    if (tiles) addOption(ov, 'tiles', 'the tile map (the plan’s tile cores)');
    const ovKeys = [...ov.options].map((o) => o.value);
    ov.value = [overlay, beforeOv].find((k) => k !== undefined && ovKeys.includes(k)) ?? '';
    $('viewerCard').toggleAttribute('data-empty', !keys.length);
    await this.show();
  }

  /** The selected catalog entry and echo. */
  selected() {
    const entry = this.entries.find((e) => e.key === $('viewVolume').value);
    return { entry, echo: entry ? Math.min(entry.echoes, Number($('viewEcho').value) || 1) : 1 };
  }

  /** Voxels per echo of what is shown (the result's or the input's geometry). */
  voxels(entry) {
    const g = entry.group === 'result' ? this.page.result.input.geometry : this.input.geometry;
    return g.dims[0] * g.dims[1] * g.dims[2];
  }

  like(entry) {
    return header(entry.group === 'result' ? this.page.result.input.like : this.input.like);
  }

  /** Shows the selected volume and overlay in NiiVue (the crosshair stays where it was). */
  show() {
    this.showing = this.showing.then(() => this.render()).catch((e) => this.page.showError(e));
    return this.showing;
  }

  /**
   * NiiVue on the viewer's canvas, made once, when there is a first volume to show: a WebGL context that compiles
   * NiiVue's shaders, most of a page load's drawing where WebGL is software (a machine without a GPU).
   */
  attach() {
    this.attached ??= (async () => {
      const nv = new Niivue({ ...NV_OPTIONS, backColor: cssColor('--image-bg').rgba });
      await nv.attachToCanvas($('nvMain'));
      nv.onLocationChange = (loc) => this.located(loc);
      this.nv = nv;
      this.setView();
    })();
    return this.attached;
  }

  async render() {
    const { entry } = this.selected();
    const echoBox = $('viewEchoLabel');
    echoBox.hidden = !entry || entry.echoes < 2;
    if (entry) $('viewEcho').max = String(entry.echoes);
    const { echo } = this.selected();
    $('viewEchoText').textContent = entry && entry.echoes > 1 ? `${echo} of ${entry.echoes}` : '';
    const keep = this.nv?.volumes.length ? [...this.nv.scene.crosshairPos] : null;
    this.base = null;
    this.overlay = null;
    if (!entry) {
      if (this.nv) setVolumes(this.nv, []);
      this.publish();
      return;
    }
    await this.attach();
    const nv = this.nv;
    const n = this.voxels(entry);
    const data = Float32Array.from(echoOf(entry, n, echo));
    if (!this.displays.has(entry.key)) {
      const [lo, hi] = defaultWindow(entry.kind, data);
      this.displays.set(entry.key, { cmap: 'gray', min: +lo.toPrecision(3), max: +hi.toPrecision(3) });
    }
    const d = this.displays.get(entry.key);
    $('viewCmap').value = d.cmap;
    $('viewMin').value = String(d.min);
    $('viewMax').value = String(d.max);
    $('viewUnit').textContent = entry.unit;
    const like = this.like(entry);
    const image = await this.image(data, like, entry.key, { colormap: d.cmap, cal_min: d.min, cal_max: d.max });
    this.base = { entry, echo, data, image };
    const ovKey = $('viewOverlay').value;
    const ovData = this.overlayData(ovKey);
    if (ovData && ovData.length === n) {
      const tiles = ovKey === 'tiles';
      const ovImage = await this.image(ovData, like, 'overlay', tiles ? { colormap: 'hsv', cal_min: 0.5, cal_max: 8.5, opacity: 0.35 } : { colormap: 'red', cal_min: 0.5, cal_max: 1, opacity: 0.4 });
      this.overlay = { key: ovKey, image: ovImage, data: ovData };
    }
    if (keep) nv.scene.crosshairPos = keep;
    setVolumes(nv, this.overlay ? [image, this.overlay.image] : [image]);
    this.publish();
    this.located();
  }

  /** An overlay's voxels (Float32Array): the run's mask, a result's mask, the tile map; null for none. */
  overlayData(key) {
    if (!key) return null;
    if (key === 'input.mask') return this.mask() ? Float32Array.from(this.mask()) : null;
    if (key === 'tiles') return this.input ? tileLabels(this.page.plan, this.input.geometry.dims) : null;
    const e = this.entries.find((x) => x.key === key);
    return e ? Float32Array.from(e.data) : null;
  }

  /** An NVImage of a 3D volume, handed to NiiVue as in-memory NIfTI bytes. */
  async image(data, like, name, opts) {
    const bytes = await writeNifti(data, like, { description: `tessera ${name}` });
    return NVImage.loadFromUrl({ url: `${name}.nii`, name: `${name}.nii`, buffer: bytes.buffer, trustCalMinMax: true, ...opts });
  }

  /** The window and colormap typed: kept for the volume, applied at once. */
  restyle() {
    const b = this.base;
    if (!b) return;
    const d = { cmap: $('viewCmap').value, min: Number($('viewMin').value), max: Number($('viewMax').value) };
    this.displays.set(b.entry.key, d);
    b.image.colormap = d.cmap;
    b.image.cal_min = d.min;
    b.image.cal_max = d.max;
    this.nv.updateGLVolume();
    this.publish();
  }

  setView() {
    const nv = this.nv;
    if (!nv) return;
    const t = { axial: nv.sliceTypeAxial, coronal: nv.sliceTypeCoronal, sagittal: nv.sliceTypeSagittal, multiplanar: nv.sliceTypeMultiplanar }[$('viewType').value];
    nv.setSliceType(t);
    this.publish();
  }

  /** #viewerCard's data-*: what is shown. */
  publish() {
    const b = this.base;
    const card = $('viewerCard');
    setData(card, {
      view: $('viewType').value, volume: b?.entry.key ?? null, echo: b?.echo ?? null, echoes: b?.entry.echoes ?? null,
      overlay: this.overlay?.key ?? null, window: b ? [b.image.cal_min, b.image.cal_max] : null, colormap: b?.image.colormap ?? null,
      volumes: this.entries.map((e) => e.key),
    });
  }

  /** The crosshair moved (or the volume changed): the value under it in words; the brush paints there. */
  located(loc) {
    const b = this.base;
    const out = $('viewValue');
    if (!b) {
      out.textContent = '';
      clearData(out);
      return;
    }
    const nv = this.nv;
    const dims = b.entry.group === 'result' ? this.page.result.input.geometry.dims : this.input.geometry.dims;
    const raw = loc?.values?.[0]?.vox ?? b.image.mm2vox(nv.frac2mm(nv.scene.crosshairPos));
    const vox = [0, 1, 2].map((k) => Math.max(0, Math.min(dims[k] - 1, Math.round(raw[k]))));
    const i = vox[0] + dims[0] * (vox[1] + dims[1] * vox[2]);
    const value = b.data[i];
    const e = b.entry;
    const ov = this.overlay ? ` · overlay ${this.overlay.data[i]}` : '';
    out.textContent = `${e.label}${e.echoes > 1 ? `, echo ${b.echo}` : ''} at voxel (${vox.join(', ')}): ${valueText(value, e.unit)}${ov}`;
    setData(out, { vox, value, unit: e.unit, volume: e.key, echo: b.echo });
    if (loc && this.stroke && this.brushMode() !== 'off') this.paint(vox);
  }

  // ---- mask editing ----

  /** Enables the editing controls for the input (the threshold needs a magnitude). */
  syncControls() {
    const input = this.input;
    const running = this.page.running;
    for (const id of ['maskErode', 'maskDilate', 'maskFill', 'maskLargest', 'maskRadius', 'maskBrushRadius']) $(id).disabled = !input || running;
    $('maskThreshold').disabled = !input?.magnitude || running;
    $('maskUndo').disabled = !this.history || this.history.stack.length < 2 || running;
    $('maskDiscard').disabled = !this.history || running;
    $('maskDownload').disabled = !this.mask();
    for (const r of document.querySelectorAll('input[name=brush]')) r.disabled = !input || running;
    $('viewDownload').disabled = !this.base;
    // The tile map is an overlay while the plan has tiles on the input's grid (plans come and go with the settings).
    const ov = $('viewOverlay');
    const tiles = [...ov.options].find((o) => o.value === 'tiles');
    const fit = !!input && tilesFit(this.page.plan, input.geometry.dims);
    if (fit && !tiles) addOption(ov, 'tiles', 'the tile map (the plan’s tile cores)');
    if (!fit && tiles && ov.value !== 'tiles') tiles.remove();
    const info = $('maskInfo');
    clearData(info);
    if (!input) {
      info.textContent = 'Load an input (or run the demo) to view it and edit its mask.';
      return;
    }
    const m = this.mask();
    if (!this.history) {
      // Counted once per mask (this runs on every refresh of the page's controls).
      if (m && this.counted?.mask !== m) this.counted = { mask: m, n: countSet(m) };
      const count = m ? this.counted.n : 0;
      info.textContent = m
        ? `The mask: ${count.toLocaleString('en')} voxels (${input.maskEdit ? 'edited' : 'as loaded'}); edit it with the tools above.`
        : 'No mask yet: the pipeline makes one from the magnitude. Move the threshold (or use a tool) to make and edit one here.';
      setData(info, { voxels: count, edits: 0 });
      return;
    }
    if (this.counted?.mask !== this.history.mask) this.counted = { mask: this.history.mask, n: countSet(this.history.mask), changes: this.history.changes() };
    const c = this.counted.changes ?? this.history.changes();
    const voxels = this.counted.n;
    info.textContent = `The mask the run takes: ${voxels.toLocaleString('en')} voxels — from ${this.history.source}` +
      `${this.history.ops.length ? `, then ${this.history.ops.join(' → ')}` : ''}: ${c.added.toLocaleString('en')} added, ${c.removed.toLocaleString('en')} removed.`;
    setData(info, { voxels, added: c.added, removed: c.removed, ops: this.history.ops.join('|'), source: this.history.source, edits: this.history.stack.length - 1 });
  }

  /** Runs an edit, then hands the mask to the input (and the plan); an edit's error shows in the page's box. */
  edit(fn) {
    if (!this.input || this.page.running) return;
    try {
      fn();
      this.edited();
    } catch (e) {
      this.page.showError(e);
    }
  }

  /** The first echo of the magnitude above the slider's fraction of its robust maximum (the package's rule). */
  thresholded() {
    const n = this.input.geometry.dims.reduce((a, b) => a * b, 1);
    const f = Number($('maskThreshold').value);
    $('maskThresholdText').textContent = f.toFixed(3);
    return { mask: thresholdMask(this.input.magnitude.subarray(0, n), f), op: `magnitude > ${f} × its robust maximum` };
  }

  /** The session, started on the input's mask, else the last run's brain mask of this input, else the threshold. */
  session() {
    if (this.history) return this.history;
    const res = this.page.result;
    if (this.input.mask) this.history = new MaskHistory(this.input.mask, 'the input’s mask');
    else if (res?.input === this.input && res.outputs?.mask) this.history = new MaskHistory(Uint8Array.from(res.outputs.mask.data), 'the last run’s brain mask');
    else if (this.input.magnitude) {
      const t = this.thresholded();
      this.history = new MaskHistory(t.mask, t.op);
      this.history.fromThreshold = true;
    } else throw new Error('No mask to edit: load a mask or a magnitude first.');
    return this.history;
  }

  /** The threshold slider moved: a session begun from a threshold is re-based; otherwise one undoable step, updated live. */
  threshold() {
    if (!this.input.magnitude) return;
    const t = this.thresholded();
    if (!this.history || (this.history.fromThreshold && this.history.stack.length === 1)) {
      this.history = new MaskHistory(t.mask, t.op);
      this.history.fromThreshold = true;
    } else if (this.history.stack.at(-1).op.startsWith('magnitude >')) this.history.replace(t.mask, t.op);
    else this.history.push(t.mask, t.op);
  }

  morph(kind) {
    const r = Number($('maskRadius').value);
    if (!(r > 0)) throw new RangeError(`The ${kind} radius must be > 0 mm, got ${$('maskRadius').value}`);
    this.apply((m, d, v) => (kind === 'erode' ? erode : dilate)(m, d, v, r), `${kind} ${r} mm`);
  }

  apply(fn, op) {
    const h = this.session();
    const g = this.input.geometry;
    h.push(fn(h.mask, g.dims, g.voxelMm), op);
  }

  /** The brush at voxel `vox`: a ball of the brush radius added or removed; one undo step per stroke. */
  paint(vox) {
    const h = this.session();
    const g = this.input.geometry;
    const r = Number($('maskBrushRadius').value);
    if (!(r >= 0)) return;
    const mode = this.brushMode();
    const { mask, changed } = brush(h.mask, g.dims, g.voxelMm, vox, r, mode === 'add' ? 1 : 0);
    const op = `brush ${mode} ${r} mm`;
    if (!this.stroke.open) {
      if (!changed) return;
      h.push(mask, op);
      this.stroke.open = true;
    } else h.replace(mask, op);
    this.updateMaskImages();
  }

  /** The edited mask becomes the input's: the input line, the plan and Run follow; the overlay shows it. */
  edited() {
    const input = this.input;
    const h = this.history;
    if (!input || !h) return;
    input.mask = h.mask;
    input.maskVoxels = countSet(h.mask);
    const c = h.changes();
    input.maskEdit = { source: h.source, ops: h.ops, added: c.added, removed: c.removed, voxels: input.maskVoxels };
    // The load's note said how the mask would be made: it now says the mask was edited here.
    input.loadNote ??= input.note ?? '';
    input.note = [input.loadNote.replace(/(^|; )no mask[^;]*/, ''), 'the mask edited in this page'].filter(Boolean).join('; ');
    if (input.summary) {
      input.summary.maskVoxels = input.maskVoxels;
      if ('maskGiven' in input.summary) input.summary.maskGiven = true;
    }
    const inputs = this.page.panels.inputs;
    inputs.publish(input);
    inputs.describe(input);
    inputs.syncParams();
    this.page.schedulePlan();
    this.syncControls();
    if (![...$('viewOverlay').options].some((o) => o.value === 'input.mask')) {
      this.refresh(undefined, 'input.mask').catch((e) => this.page.showError(e));
    } else {
      if ($('viewOverlay').value !== 'input.mask' && !this.stroke) {
        $('viewOverlay').value = 'input.mask';
        this.show();
      }
      this.updateMaskImages();
    }
  }

  /** The mask changed: the overlay (and the mask volume when shown) redraw at once, without reloading NiiVue. */
  updateMaskImages() {
    const m = this.mask();
    if (!m || !this.nv) return;
    let changed = false;
    for (const x of [this.overlay?.key === 'input.mask' ? this.overlay : null, this.base?.entry.key === 'input.mask' ? this.base : null]) {
      if (!x) continue;
      for (let i = 0; i < m.length; i++) x.data[i] = m[i];
      x.image.img.set(x.data);
      changed = true;
    }
    if (changed) this.nv.updateGLVolume();
    const e = this.entries.find((x) => x.key === 'input.mask');
    if (e) e.data = m;
    this.located();
  }

  /** Back to the input's own mask (none: the pipeline makes it from the magnitude). */
  discard() {
    const input = this.input;
    if (!input) return;
    this.history = null;
    input.mask = this.original;
    input.maskVoxels = this.original ? countSet(this.original) : 0;
    delete input.maskEdit;
    if (input.loadNote !== undefined) input.note = input.loadNote;
    if (input.summary) {
      input.summary.maskVoxels = this.original ? input.maskVoxels : undefined;
      if ('maskGiven' in input.summary) input.summary.maskGiven = !!this.original;
    }
    const inputs = this.page.panels.inputs;
    inputs.publish(input);
    inputs.describe(input);
    inputs.syncParams();
    this.page.schedulePlan();
    this.syncControls();
    this.refresh().catch((e) => this.page.showError(e));
  }

  async downloadMask() {
    const m = this.mask();
    if (!m) return;
    const bytes = await this.io('write', { data: Float32Array.from(m), like: header(this.input.like), gzip: true, description: 'Tessera mask (edited in the page)' });
    save(bytes, `${stem(this.input.name)}_mask.nii.gz`);
  }

  /** The volume shown (the echo shown of a multi-echo one) as .nii.gz with the input's header. */
  async downloadShown() {
    const b = this.base;
    if (!b) return;
    const e = b.entry;
    const name = e.group === 'result' ? this.page.result.input.name : this.input.name;
    const bytes = await this.io('write', { data: Float32Array.from(b.data), like: this.like(e), gzip: true, description: `Tessera ${e.label}${e.unit ? ` (${e.unit})` : ''}` });
    save(bytes, `${stem(name)}_${e.file}${e.echoes > 1 ? `_echo${b.echo}` : ''}.nii.gz`);
  }
}
