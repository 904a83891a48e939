// The inputs panel: the files (chosen or dropped), the mask source, and the selected workflow's own inputs
// (index.html marks each workflow-specific element with data-workflow="field" or "phase"). Loading goes through
// the workflow (decoding in the I/O worker); the loaded input is described in words and published as
// #inputInfo's data-* attributes (seq, kind, source, dims, voxel-mm, mask-voxels, sum-in-mask, echoes, ...).
import { $, checkedValue, setRadio, setData, clearData } from '../dom.js';
import { WORKFLOWS } from '../workflows/index.js';

export class InputsPanel {
  /**
   * @param {import('../page.js').Page} page
   * @param {(op: string, args: object, transfer?: Transferable[]) => Promise<any>} io the I/O worker client
   */
  constructor(page, io) {
    this.page = page;
    this.io = io;
    this.loads = 0; // the latest load wins
    this.shownKind = null;
    this.wire();
  }

  wire() {
    const { page } = this;
    const file = (id, slot, clear = false) =>
      $(id).addEventListener('change', (e) => {
        // A multiple input (From phase: one 3D file per echo) keeps every file chosen, in the order given.
        page.files[slot] = e.target.multiple ? (e.target.files.length ? [...e.target.files] : null) : e.target.files[0] ?? null;
        if (clear && !page.files[slot]) {
          page.inputs[slot] = null; // the main file removed: no input of that workflow any more
          if (page.workflow().kind === slot) this.show(null);
        }
        this.load();
      });
    for (const wf of WORKFLOWS) file(wf.fileInput, wf.kind, true);
    file('maskFile', 'mask');
    file('magFile', 'magnitude');
    $('maskFraction').addEventListener('change', () => this.load());
    for (const r of document.querySelectorAll('input[name=maskSource]')) r.addEventListener('change', () => (this.syncMask(), this.load()));
    // B0 converts Hz field maps (reload) or is a parameter of the network (check and re-plan).
    $('b0').addEventListener('change', () => (page.workflow().b0Reloads ? this.load() : this.paramsChanged()));
    $('b0').addEventListener('input', () => !page.workflow().b0Reloads && this.syncParams());
    const actions = { reload: () => this.load(), paramsChanged: () => this.paramsChanged(), syncParams: () => this.syncParams() };
    for (const wf of WORKFLOWS) wf.wire(actions);
    const drop = $('drop');
    drop.addEventListener('dragover', (e) => {
      e.preventDefault();
      drop.classList.add('over');
    });
    drop.addEventListener('dragleave', () => drop.classList.remove('over'));
    drop.addEventListener('drop', (e) => {
      e.preventDefault();
      drop.classList.remove('over');
      if (page.state !== 'running') this.take([...e.dataTransfer.files]);
    });
  }

  /**
   * Follows the selected network's workflow: its inputs shown, the other's hidden, B0 where the workflow wants
   * it; each workflow keeps its own loaded input.
   */
  syncWorkflow() {
    const wf = this.page.workflow();
    for (const el of document.querySelectorAll('[data-workflow]')) el.hidden = !el.dataset.workflow.split(' ').includes(wf.kind);
    $('dropMain').textContent = wf.mainName;
    $(wf.b0Slot).append($('b0'));
    this.syncMask();
    if (wf.kind !== this.shownKind) {
      this.shownKind = wf.kind;
      this.page.showError(null);
      const input = this.page.input;
      if (input) this.show(input);
      else if (this.page.files[wf.kind]) this.load(); // chosen earlier, not (yet) loaded: say what is missing
      else this.show(null);
    } else if (this.page.input) this.describe(this.page.input); // words that depend on the network
    this.syncParams();
  }

  /** The mask inputs for the mask source (a mask file, or a magnitude image to threshold). */
  syncMask() {
    const wf = this.page.workflow();
    if (wf.pipeline) {
      // From phase: a mask file and a magnitude, both optional (the pipeline makes the mask from the magnitude).
      $('maskFileLabel').hidden = $('magFileLabel').hidden = false;
      $('fractionBox').hidden = true;
      $('magText').textContent = wf.magnitudeLabel().text;
      return;
    }
    const src = checkedValue('maskSource');
    const mag = wf.magnitudeLabel(src);
    $('maskFileLabel').hidden = src !== 'file';
    $('magFileLabel').hidden = !mag.shown;
    $('fractionBox').hidden = src !== 'magnitude';
    $('magText').textContent = mag.text;
  }

  /** The workflow's acquisition parameters changed: check them and plan again. */
  paramsChanged() {
    this.syncParams();
    this.page.schedulePlan();
  }

  /** Shows what keeps the workflow from running next to its inputs; Run follows. */
  syncParams() {
    this.page.workflow().syncParams(this.page.input);
    this.page.refresh();
  }

  /** Files dropped on the page: .onnx → custom network; names with mask/brain/roi → mask, mag → magnitude. */
  take(list) {
    const { page } = this;
    let phases = null;
    for (const file of list) {
      const n = file.name.toLowerCase();
      if (/\.onnx$/.test(n)) {
        const dt = new DataTransfer();
        dt.items.add(file);
        $('customFile').files = dt.files;
        page.panels.network.select('custom');
        page.panels.network.readCustomFile();
        continue;
      }
      if (/mask|brain|roi/.test(n)) {
        page.files.mask = file;
        setRadio('maskSource', 'file');
      } else if (/mag/.test(n)) {
        page.files.magnitude = file;
        if (page.workflow().magnitudeMakesMask(page.files)) setRadio('maskSource', 'magnitude');
      } else if (page.workflow().pipeline) {
        // From phase: every other file dropped at once is an echo of the phase (in the order dropped).
        (phases ??= []).push(file);
        page.files.pipeline = [...phases];
      } else page.files[page.workflow().kind] = file;
    }
    this.syncMask();
    this.load();
  }

  /** Loads the chosen files through the selected workflow (the latest choice wins). */
  async load() {
    const { page } = this;
    const wf = page.workflow();
    if (!page.files[wf.kind]) return;
    const seq = ++this.loads;
    page.setState('loading');
    page.showError(null);
    try {
      const r = await wf.load(this.io, page.files);
      if (seq !== this.loads) return; // a newer choice of files is loading
      if (typeof r === 'string') this.pending(wf, r);
      else this.set(r);
      page.setState('idle');
      // Before the first run of a network on this machine its speed is measured by itself (a few % of the run).
      if (typeof r !== 'string') page.panels.settings.measureByItself();
    } catch (e) {
      if (seq !== this.loads) return;
      const main = page.files[wf.kind];
      this.pending(wf, `${Array.isArray(main) ? main.map((f) => f.name).join(', ') : main.name}: not loaded (see the message above).`);
      page.setState('idle');
      page.showError(e);
    }
  }

  /** Files chosen but no input loaded (one is missing, or they were refused): never run on an older input. */
  pending(wf, text) {
    this.page.inputs[wf.kind] = null;
    this.publish(null);
    $('inputInfo').textContent = text;
    this.syncParams();
    this.page.schedulePlan();
  }

  /**
   * A loaded input becomes the workflow's.
   * Preconditions: `input` was completed by its workflow's input() (kind, display, range, summary).
   */
  set(input) {
    this.page.inputs[input.kind] = input;
    this.page.inputSeq++;
    this.page.panels.run.follow();
    this.show(input);
  }

  /** The input line, the slice sliders and the plan for the loaded input (null: none for this network). */
  show(input) {
    this.publish(input);
    if (!input) {
      $('inputInfo').textContent = this.page.workflow().noInputText;
    } else {
      this.describe(input);
      const nz = input.geometry.dims[2];
      this.page.panels.run.setDepth(nz);
      this.page.panels.results.setDepth(nz);
    }
    this.syncParams();
    this.page.schedulePlan();
    this.page.panels.viewer?.setInput(input);
  }

  /** The input in words: dims, voxel size, echoes, B0 direction, mask voxels and the load's notes. */
  describe(input) {
    const [nx, ny, nz] = input.geometry.dims;
    const v = input.geometry.voxelMm ?? [1, 1, 1];
    const b = input.geometry.b0Dir;
    const extra = this.page.workflow().describe(input, this.page.network());
    let text =
      `${input.name}: ${nx}×${ny}×${nz} voxels of ${v.map((x) => +x.toFixed(3)).join('×')} mm, ${extra.counts}` +
      `B0 direction [${b.map((x) => +x.toFixed(3)).join(', ')}], ${input.mask ? `${input.maskVoxels.toLocaleString()} mask voxels` : 'no mask'}`;
    const notes = [...(input.note ? [input.note] : []), ...extra.notes];
    if (notes.length) text += ` — ${notes.join('; ')}`;
    $('inputInfo').textContent = text;
  }

  /** #inputInfo's data-*: the loaded input's summary and a load counter (seq), or loaded=false. */
  publish(input) {
    const el = $('inputInfo');
    clearData(el);
    setData(el, { seq: this.page.inputSeq, kind: this.page.workflow().kind, loaded: !!input, ...(input?.summary ?? {}) });
  }
}
