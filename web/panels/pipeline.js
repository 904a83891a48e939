// The "From phase" options panel: one input per pipeline option of the C++ schema (unwrap, fitResidualLimit,
// background, vsharp.*, pdf.*, lbv.*, ismv.*, sharp.*, resharp.*, brainMask.*, swi.*, r2star.*) at its default, with its unit, range and help; the background's
// parameters follow the background chosen, the brain mask's show only when no mask file is loaded; the optional outputs
// (the schema's `also`: checkboxes "also SWI + minIP", "also R2*/T2*") show their options when checked. A value that is not
// a number is said here; the C++ plan refuses the rest in its own words (shown here and as the plan's advice).
// Also the DICOM folder input (DicomInput): a folder chosen or dropped is converted in the page (web/dicom.js) and
// becomes the phase, magnitude, TE and B0. Published: each input's data-option; #pipelineParams' data-background and data-also;
// #dicomText's data-state (converting | done | cancelled | error) and the conversion's series, echoes, te, b0.
import { $, setData, clearData } from '../dom.js';
import { optionLabel, showOptionProblem } from '../schema.js';
import { GROUPS, ALSO_LABELS, alsoChoices, pipelineParams, readPipelineParams, pipelineWorkflow } from '../workflows/pipeline.js';
import { convertDicom, sortSeries, folderName, dropEntries, entryFiles } from '../dicom.js';

export class PipelinePanel {
  /** @param {import('../page.js').Page} page */
  constructor(page) {
    this.page = page;
    this.fields = [];
    this.also = []; // the optional outputs' checkboxes (input[data-also])
    this.maskGiven = false;
    this.dicom = new DicomInput(page);
  }

  /** Builds the inputs from the schema (once the runtime is up). */
  fill(schema) {
    const box = $('pipelineParams');
    box.textContent = '';
    this.fields = pipelineParams(schema);
    // The optional outputs (SWI + minIP, R2*/T2*): one checkbox per `also` choice; their options show when checked.
    const alsoOption = (schema instanceof Map ? schema.get('also') : schema.find((o) => o.name === 'also'));
    this.also = alsoChoices(schema).map((value) => {
      const label = document.createElement('label');
      label.title = alsoOption?.help ?? '';
      const el = document.createElement('input');
      el.type = 'checkbox';
      el.dataset.also = value;
      el.id = `also-${value}`;
      el.addEventListener('change', () => this.edited());
      label.append(el, ` ${ALSO_LABELS[value] ?? `also ${value}`}`);
      box.append(label);
      return el;
    });
    const groups = new Map([['', box]]);
    for (const g of GROUPS) {
      const fs = document.createElement('fieldset');
      fs.className = 'inline';
      fs.dataset.group = g.group;
      const legend = document.createElement('legend');
      legend.textContent = g.label;
      fs.append(legend);
      groups.set(g.group, fs);
    }
    for (const f of this.fields) groups.get(f.group).append(optionLabel(f, () => this.edited(), 'short'));
    for (const g of GROUPS) if (groups.get(g.group).children.length > 1) box.append(groups.get(g.group));
    this.sync();
  }

  /** The values as typed, by option name. */
  values() {
    return Object.fromEntries(this.fields.map((f) => [f.name, f.el.value]));
  }

  /** The optional outputs checked (['swi', 'r2star'], or []). */
  alsoChecked() {
    return this.also.filter((el) => el.checked).map((el) => el.dataset.also);
  }

  /** Sets options by name (the demo; `also`: the optional outputs, a list); the rest stay as they are. */
  set(values) {
    for (const f of this.fields) if (values[f.name] !== undefined) f.el.value = String(values[f.name]);
    if (values.also !== undefined) for (const el of this.also) el.checked = [].concat(values.also).includes(el.dataset.also);
    this.sync();
  }

  /** Back to the schema's defaults (no optional outputs). */
  reset() {
    for (const f of this.fields) f.el.value = f.value;
    for (const el of this.also) el.checked = false;
    this.sync();
  }

  /**
   * The options for the request: { options, problem } (readPipelineParams), only the groups that apply (the
   * background chosen; the brain mask's without a mask file).
   */
  read(maskGiven) {
    this.maskGiven = maskGiven;
    const v = this.values();
    const also = this.alsoChecked();
    const active = this.fields.filter((f) => !f.group || GROUPS.find((g) => g.group === f.group).when({ background: v.background, also }, maskGiven));
    const r = readPipelineParams(active, v);
    if (also.length) r.options.also = also;
    return r;
  }

  /** Shows the groups that apply. */
  sync() {
    const background = this.fields.find((f) => f.name === 'background')?.el.value;
    const also = this.alsoChecked();
    for (const g of GROUPS) {
      const fs = document.querySelector(`#pipelineParams fieldset[data-group="${g.group}"]`);
      if (fs) fs.hidden = !g.when({ background, also }, this.maskGiven);
    }
    $('pipelineParams').dataset.background = background ?? '';
    $('pipelineParams').dataset.also = also.join(',');
  }

  edited() {
    this.sync();
    this.showProblem(this.read(this.maskGiven).problem);
    this.page.refresh();
    this.page.schedulePlan();
  }

  /** After a plan: a typed value that is not a number (the page's words), else the plan's refusal (C++'s). */
  showPlan(plan) {
    this.sync();
    const typed = this.read(this.maskGiven).problem;
    this.showProblem(typed ?? (plan && !plan.feasible ? plan.message : null));
  }

  showProblem(text) {
    showOptionProblem($('pipelineMsg'), this.fields, text);
  }
}

/** What each stage of a conversion is called while it runs. */
const STAGE_WORDS = {
  starting: () => 'starting dcm2niix (WebAssembly)…',
  converting: (n) => `dcm2niix: converting ${n} files…`,
  reading: () => 'reading the converted series…',
};

/**
 * The From phase DICOM folder: #dicomDir (a webkitdirectory input), a folder dropped on #dicomBox or on the drop zone,
 * converted with progress and a Cancel (the converter's worker is terminated); the outputs sorted into phase and
 * magnitude fill TE and B0, and the input is loaded through the workflow (pipelineWorkflow.loadDicom).
 */
class DicomInput {
  /** @param {import('../page.js').Page} page */
  constructor(page) {
    this.page = page;
    this.controller = null; // the conversion running
    $('dicomDir').addEventListener('change', (e) => {
      const files = [...e.target.files];
      e.target.value = ''; // the same folder chosen again converts again
      if (files.length) this.convert(files);
    });
    $('dicomCancel').addEventListener('click', () => this.controller?.abort());
    const box = $('dicomBox');
    box.addEventListener('dragover', (e) => {
      e.preventDefault();
      e.stopPropagation();
    });
    box.addEventListener('drop', (e) => this.dropped(e));
    // A folder dropped anywhere on the drop zone in From phase is a DICOM folder (NIfTI files are dropped as files).
    $('drop').addEventListener('drop', (e) => this.page.workflow().pipeline && this.dropped(e, true), true);
    // No new folder while a run or a load is on.
    new MutationObserver(() => ($('dicomDir').disabled = this.page.running)).observe(document.body, { attributes: true, attributeFilter: ['data-state'] });
  }

  /** A drop: the folder's files (every level) are converted; onlyFolders leaves a drop of plain files to the drop zone. */
  dropped(e, onlyFolders = false) {
    const d = dropEntries(e.dataTransfer);
    if (onlyFolders && !d.folder) return;
    e.preventDefault();
    e.stopImmediatePropagation();
    $('drop').classList.remove('over');
    if (this.page.running) return;
    entryFiles(d).then((files) => this.convert(files), (err) => this.page.showError(err));
  }

  /** Shows the conversion's state: data-state and facts on #dicomText, its words, the progress bar and Cancel. */
  status(state, text, facts = {}) {
    const el = $('dicomText');
    el.textContent = text;
    clearData(el);
    setData(el, { state, ...facts });
    $('dicomProgress').hidden = $('dicomCancel').hidden = state !== 'converting';
  }

  /**
   * Converts the files, sorts the outputs, fills TE and B0, and loads the input; a refusal is shown in the error box
   * and the From phase input is cleared (never run on an older one); a cancel leaves the input as it was.
   * Precondition: files is a non-empty File[] (webkitRelativePath or _webkitRelativePath set for a folder).
   */
  async convert(files) {
    const { page } = this;
    if (this.controller || page.running) return;
    const controller = (this.controller = new AbortController());
    const folder = folderName(files);
    const t0 = performance.now();
    const seconds = () => ((performance.now() - t0) / 1000).toFixed(1);
    let stage = 'starting';
    const tick = () => this.status('converting', `${STAGE_WORDS[stage](files.length)} ${seconds()} s`, { files: files.length, stage });
    tick();
    const timer = setInterval(tick, 250);
    page.showError(null);
    page.setState('loading');
    let sorted;
    try {
      const outputs = await convertDicom(files, { signal: controller.signal, onProgress: (p) => ((stage = p.stage), tick()) });
      sorted = sortSeries(outputs);
    } catch (e) {
      page.setState('idle');
      if (e?.name === 'AbortError') {
        this.status('cancelled', `conversion cancelled after ${seconds()} s`);
        return;
      }
      this.status('error', `${folder ?? 'the DICOM files'}: not converted (see the message above)`);
      page.files.pipeline = page.files.dicom = null;
      page.panels.inputs.pending(pipelineWorkflow, `${folder ?? 'The DICOM files'}: not loaded (see the message above).`);
      page.showError(e);
      return;
    } finally {
      clearInterval(timer);
      this.controller = null;
    }
    const { te, b0, phaseSeries: ps, magnitudeSeries: ms, kind } = sorted;
    // A phase difference's one "echo time" is ΔTE = TE2 − TE1; a B0 map in Hz needs none.
    const shownTe = kind === 'phasediff' ? [sorted.deltaTE] : te;
    $('te').value = shownTe ? shownTe.map((t) => +t.toPrecision(6)).join(', ') : '';
    if (b0) $('b0').value = String(b0);
    const series = (s) => `series ${s.number}${s.description ? ` “${s.description}”` : ''}`;
    const ms3 = (t) => +(t * 1000).toPrecision(4);
    const what = {
      phase: () => `phase ${series(ps)} (${ps.echoes} echo${ps.echoes > 1 ? 'es' : ''})`,
      phasediff: () => `phase difference ${series(ps)} (TE1 ${ms3(sorted.te1)} ms, TE2 ${ms3(sorted.te2)} ms: ΔTE ${ms3(sorted.deltaTE)} ms)`,
      fieldmap: () => `field map in Hz ${series(sorted.fieldSeries)}`,
    }[kind]();
    this.status(
      'done',
      `converted in ${seconds()} s: ${what}${ms ? `, magnitude ${series(ms)}` : ', no magnitude'}` +
        `${kind === 'phase' && te ? `, TE ${$('te').value} s` : ''}${b0 ? `, B0 ${b0} T` : ''}`,
      {
        files: files.length, kind, phaseSeries: ps?.number ?? null, fieldSeries: sorted.fieldSeries?.number ?? null, magnitudeSeries: ms?.number ?? null,
        echoes: ps?.echoes ?? 1, te: te ?? null, deltaTe: sorted.deltaTE ?? null, b0,
      },
    );
    const phaseFiles = kind === 'fieldmap' ? [sorted.fieldMap.nii] : sorted.phase.map((o) => o.nii);
    page.files.dicom = { ...sorted, folder, files: files.length, phaseFiles };
    page.files.pipeline = phaseFiles;
    page.setState('idle');
    await page.panels.inputs.load();
  }
}
