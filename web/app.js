// Tessera's page: inputs, network and weights, tile settings with the C++ planner's live readout, the run
// with a live tile map, and the results in NiiVue. Heavy work never runs here: the runtime lives in a
// driver worker (bindings/js/index.js), NIfTI decoding and writing in web/io-worker.js.
import { createTessera, loadModel, TesseraError } from '../bindings/js/index.js';
import { TileMap, robustRange } from './tilemap.js';
import { Viewer } from './viewer.js';

const $ = (id) => document.getElementById(id);
const DEMO = {
  geometry: { dims: [128, 128, 96], voxelMm: [1.75, 1.75, 1.75], b0Dir: [0, 0, 1] },
  seed: 1,
  noise: 0,
  modelUrl: new URL('models/demo-unet.onnx', import.meta.url).href,
  id: 'demo-unet', // the registry entry: divisor, calibrated memory cost, masked input, size and sha256
};
const CACHE_NAME = 'tessera-weights-v1';
const GB = 1e9;

// Everything the tests (and a curious user in the console) may look at.
const T = (window.__tessera = {
  ready: false,
  state: 'starting', // starting | idle | loading | running | done | cancelled | error
  runs: 0,
  plan: null,
  progress: null,
  report: null,
  stats: null,
  tiles: null,
  errors: [],
  input: null,
  timings: {},
});

const ui = {
  tessera: null,
  runtimeKey: '',
  registry: [],
  limits: null,
  // The loaded input per kind of network; `input` is the one the selected network takes:
  //   field: { kind, source: 'demo'|'files', geometry, field, mask, truth?, like, name, display }
  //   phase: { kind, source: 'files', geometry, phase, echoes, magnitude?, mask, like, name, display (echo 1) }
  inputs: { field: null, phase: null },
  get input() {
    return this.inputs[inputKind()];
  },
  files: { field: null, mask: null, magnitude: null, phase: null },
  plan: null,
  planSeq: 0,
  controller: null,
  settling: Promise.resolve(), // the last run, settled (a cancelled run still tears its workers down)
  weightsMemo: new Map(),
  chi: null,
  result: null, // { chi, input, quantity, name } of the last run
};

const tileMap = new TileMap($('tilemap'), $('tileLayers'));
const viewer = new Viewer({ field: $('nvField'), chi: $('nvChi'), truth: $('nvTruth') });

// ------------------------------------------------------------------------------------------------
// Errors, in words

function showError(e) {
  const box = $('error');
  if (!e) {
    box.hidden = true;
    box.textContent = '';
    return;
  }
  const msg = friendly(e);
  T.errors.push(msg);
  box.textContent = msg;
  box.hidden = false;
}

function friendly(e) {
  if (typeof e === 'string') return e;
  const code = e?.code ?? '';
  const m = e?.message ?? String(e);
  switch (code) {
    case 'WeightsMismatch':
      return `The network weights do not match the registry: ${m}`;
    case 'DownloadFailed':
      return `The weights could not be downloaded: ${m}`;
    case 'BudgetExceeded':
      return inputKind() === 'phase' ? `The volume does not fit in memory: ${m}` : `This tile setting does not fit in memory: ${m}`;
    case 'ModelLoadFailed':
      return `The network could not be loaded: ${m}`;
    case 'NonFiniteInput':
      return inputKind() === 'phase' ? `The phase or magnitude holds invalid values: ${m}` : `The field map holds invalid values: ${m}`;
    default:
      return m;
  }
}

function err(message, code = 'InvalidArgument') {
  return new TesseraError(message, code);
}

// ------------------------------------------------------------------------------------------------
// File I/O worker

const io = (() => {
  const w = new Worker(new URL('./io-worker.js', import.meta.url), { type: 'module', name: 'tessera-io' });
  let next = 1;
  const pending = new Map();
  w.addEventListener('message', (e) => {
    const p = pending.get(e.data.id);
    if (!p) return;
    pending.delete(e.data.id);
    if (e.data.error) p.reject(err(e.data.error.message, e.data.error.code ?? 'ReadFailed'));
    else p.resolve(e.data.result);
  });
  w.addEventListener('error', (e) => {
    e.preventDefault();
    for (const p of pending.values()) p.reject(err(`the file worker failed: ${e.message}`, 'Internal'));
    pending.clear();
  });
  return (op, args, transfer = []) =>
    new Promise((resolve, reject) => {
      const id = next++;
      pending.set(id, { resolve, reject });
      w.postMessage({ id, op, args }, transfer);
    });
})();

// ------------------------------------------------------------------------------------------------
// Runtime

function runtimeOptions() {
  const workers = clampInt($('workers').value, 1, 16, 2);
  const threadsPerWorker = clampInt($('threads').value, 1, 16, 1);
  return { workers, threadsPerWorker };
}

function clampInt(v, lo, hi, dflt) {
  const n = Math.floor(Number(v));
  return Number.isFinite(n) ? Math.max(lo, Math.min(hi, n)) : dflt;
}

/** The runtime for the current workers/threads (they fix the module's thread pool): recreated on change. */
async function runtime() {
  const o = runtimeOptions();
  const key = `${o.workers}x${o.threadsPerWorker}`;
  if (ui.tessera && ui.runtimeKey === key) return ui.tessera;
  const old = ui.tessera;
  ui.tessera = null;
  if (old) await old.terminate();
  ui.tessera = await createTessera({ ...o, watchdogMs: 120000 });
  ui.runtimeKey = key;
  if (old) schedulePlan(); // a plan asked of the old runtime may have been cut short
  return ui.tessera;
}

// ------------------------------------------------------------------------------------------------
// Network choice

function selectedNetwork() {
  const v = $('model').value;
  if (v === 'demo') return { kind: 'demo', id: DEMO.id, model: ui.registry.find((r) => r.id === DEMO.id), name: 'Demo U-Net' };
  if (v === 'custom') {
    const num = (id, d) => (Number.isFinite(Number($(id).value)) && $(id).value !== '' ? Number($(id).value) : d);
    return {
      kind: 'custom',
      name: 'Custom network',
      spec: {
        divisor: clampInt($('customDivisor').value, 1, 1024, 1),
        bytesPerVoxel: num('customBpv', 1100),
        inputMean: num('customInMean', 0),
        inputStd: num('customInStd', 1),
        outputMean: num('customOutMean', 0),
        outputStd: num('customOutStd', 1),
      },
    };
  }
  const m = ui.registry.find((r) => r.id === v);
  return { kind: 'registry', id: v, model: m, name: m?.name ?? v };
}

/** The phase networks (iQSM, iQFM, iQSM+): they take the wrapped phase (role 'phase'), not a field map. */
function isPhaseModel(m) {
  return !!m && Array.isArray(m.inputs) && m.inputs.includes('phase');
}

/** What the selected network takes: 'phase' (wrapped phase, TE, B0) or 'field' (a local field map). */
function inputKind() {
  const n = selectedNetwork();
  return n.kind === 'registry' && isPhaseModel(n.model) ? 'phase' : 'field';
}

/** The selected network's output: 'chi', or 'local-field' (iQFM). */
function selectedQuantity() {
  const n = selectedNetwork();
  return n.model?.quantity === 'local-field' ? 'local-field' : 'chi';
}

const ROLE_WORDS = {
  phase: 'wrapped phase (rad, × phase sign)',
  mask: 'brain mask (eroded)',
  te: 'TE (s)',
  b0: 'B0 (T)',
  b0_dir: 'B0 direction (unit vector)',
  border: 'border shell',
  field: 'local field (ppm)',
};

function fillModels() {
  const sel = $('model');
  sel.textContent = '';
  const add = (parent, value, text) => {
    const o = document.createElement('option');
    o.value = value;
    o.textContent = text;
    parent.append(o);
  };
  add(sel, 'demo', 'Demo U-Net (bundled, field → χ, divisor 8)');
  const groups = { 'field-to-chi': 'Field → χ networks', 'physics-loop': 'Physics loops', 'native-patches': 'Native patching', 'whole-volume-only': 'Whole volume only' };
  for (const [kind, label] of Object.entries(groups)) {
    const g = document.createElement('optgroup');
    g.label = label;
    for (const m of ui.registry.filter((r) => r.kind === kind && r.id !== DEMO.id)) add(g, m.id, `${m.name}${m.tileable ? '' : ' (not tileable)'}`);
    if (g.children.length) sel.append(g);
  }
  add(sel, 'custom', 'Custom network (your .onnx)…');
  sel.value = 'demo';
}

function showModelInfo() {
  const n = selectedNetwork();
  const box = $('modelInfo');
  box.textContent = '';
  const line = (k, v) => {
    if (!v) return;
    const p = document.createElement('p');
    const b = document.createElement('b');
    b.textContent = `${k}: `;
    p.append(b, String(v));
    box.append(p);
  };
  $('weightsBox').hidden = n.kind !== 'registry';
  $('customBox').hidden = n.kind !== 'custom';
  if (n.kind === 'demo') {
    line('Kind', 'field → χ, a small 3D U-Net trained on synthetic patches (1 mm, B0 along z); input local field in ppm, output χ in ppm');
    line('Weights', 'web/models/demo-unet.onnx, served with this page');
    line('Licence', 'MIT (part of Tessera)');
    line('Citation', 'Tessera demo network — for demonstration only, not for clinical or research use');
  } else if (n.kind === 'registry' && n.model) {
    const m = n.model;
    line('Kind', `${m.kind}${m.tileable ? ', tileable' : ', not tileable'}; divisor ${m.divisor}; ${m.bytesPerVoxel} B/voxel${m.costProvisional ? ' (provisional)' : ''}`);
    if (isPhaseModel(m)) {
      line('Inputs', m.inputs.map((r) => ROLE_WORDS[r] ?? r).join(', '));
      line('Output', m.quantity === 'local-field' ? 'local field (ppm) — the tissue field, not χ' : 'χ (ppm)');
      line('Runs', `on the whole volume at once (not tileable), padded to a multiple of ${m.divisor}${m.cropMargin ? `; cropped to the eroded mask’s bounding box + ${m.cropMargin} voxels first` : ''}; one network call per echo, echoes combined with (magnitude·TE)² weights`);
    }
    line('Input / output', `${m.input} → ${m.output}`);
    line('Weights', m.weights.map((w) => `${w.file}${w.bytes ? ` (${(w.bytes / 1e6).toFixed(1)} MB)` : ''}`).join(', '));
    line('Licence', m.licence);
    line('Citation', m.citation);
    line('Notes', m.notes);
  }
  syncKind();
  schedulePlan();
}

/**
 * The page follows what the selected network takes: the input section (field map, or wrapped phase with TE,
 * B0, magnitude, erosion and sign), the tile settings (irrelevant for whole-volume phase networks), the
 * output's name. Each kind keeps its own loaded input.
 */
let shownKind = 'field';
function syncKind() {
  const kind = inputKind();
  const phase = kind === 'phase';
  const net = selectedNetwork();
  $('fieldFileLabel').hidden = phase;
  $('unitsBox').hidden = phase;
  $('phaseFileLabel').hidden = !phase;
  $('phaseBox').hidden = !phase;
  $('dropMain').textContent = phase ? 'wrapped phase' : 'field map';
  // One B0 input: next to Hz for field maps, in the acquisition box for the phase networks.
  $(phase ? 'b0PhaseSlot' : 'b0FieldSlot').append($('b0'));
  syncMaskInputs();
  if (phase) for (const id of ['core', 'halo', 'auto', 'whole', 'workers']) $(id).disabled = true; // the next plan keeps them so
  $('tileNote').hidden = !phase;
  $('tileNote').textContent = phase
    ? `${net.name} runs on the whole volume at once (it cannot be tiled): the tile settings do not apply; only the threads per worker do.`
    : '';
  if (!ui.result) setQuantityLabels(selectedQuantity());
  if (kind !== shownKind) {
    shownKind = kind;
    showError(null);
    T.input = { ...(ui.input?.summary ?? { kind, none: true }), seq: T.input?.seq ?? 0 };
    if (ui.input) showInput(ui.input);
    else if (phase && ui.files.phase) loadFiles(); // chosen earlier, not (yet) loaded: say what is missing
    else showInput(null);
  } else if (phase && ui.input) showInput(ui.input);
  updatePhaseState();
}

/** Output names: χ, or the local field (iQFM). */
function setQuantityLabels(quantity) {
  const lf = quantity === 'local-field';
  for (const e of document.querySelectorAll('.qty')) e.textContent = lf ? (e.hasAttribute('data-lower') ? 'local field' : 'Local field') : 'χ';
  $('capChi').textContent = lf ? 'Local field (ppm)' : 'χ (ppm)';
}

// ------------------------------------------------------------------------------------------------
// Weights: cache (Cache API, key `file:sha256`), download with progress, size + sha256 check

function cacheKey(file, sha256) {
  return new URL(`__tessera-weights/${encodeURIComponent(`${file}:${sha256 || 'unverified'}`)}`, location.href).href;
}

async function cacheGet(file, sha256) {
  if (!('caches' in self) || !sha256) return null;
  const c = await caches.open(CACHE_NAME);
  const r = await c.match(cacheKey(file, sha256));
  return r ? new Uint8Array(await r.arrayBuffer()) : null;
}

async function cachePut(file, sha256, bytes) {
  if (!('caches' in self) || !sha256) return;
  try {
    const c = await caches.open(CACHE_NAME);
    await c.put(cacheKey(file, sha256), new Response(bytes, { headers: { 'Content-Type': 'application/octet-stream' } }));
  } catch (e) {
    console.warn('weights not cached:', e?.message ?? e);
  }
  refreshCacheInfo();
}

async function refreshCacheInfo() {
  if (!('caches' in self)) {
    $('cacheInfo').textContent = 'no Cache API here';
    return;
  }
  const c = await caches.open(CACHE_NAME);
  const keys = await c.keys();
  $('cacheInfo').textContent = keys.length
    ? `cached: ${keys.map((k) => decodeURIComponent(k.url.split('/').pop()).split(':')[0]).join(', ')}`
    : 'cache empty';
}

function dlProgress(label, loaded, total) {
  const bar = $('dlProgress');
  bar.hidden = false;
  bar.max = total || 1;
  bar.value = total ? loaded : 0;
  if (!total) bar.removeAttribute('value');
  $('dlText').textContent = `${label}: ${(loaded / 1e6).toFixed(1)}${total ? ` / ${(total / 1e6).toFixed(1)}` : ''} MB`;
}

/** ONNX bytes for the selected network: an array (one per network file). */
async function weightsFor(net, signal) {
  if (net.kind === 'demo') {
    if (ui.weightsMemo.has('demo')) return ui.weightsMemo.get('demo');
    let bytes;
    try {
      const w = net.model?.weights?.[0];
      bytes = await loadModel(DEMO.modelUrl, {
        signal,
        expectedBytes: w?.bytes || undefined,
        sha256: w?.sha256 || undefined,
        onProgress: (p) => dlProgress('demo network', p.loaded, p.total),
      });
    } catch (e) {
      if (e?.name === 'AbortError') throw e;
      throw err(`The demo network (web/models/demo-unet.onnx) is not available on this server: ${e.message}`, 'DownloadFailed');
    }
    ui.weightsMemo.set('demo', [bytes]);
    return [bytes];
  }
  if (net.kind === 'custom') {
    const f = $('customFile').files[0];
    if (!f) throw err('Choose the custom network’s .onnx file first.');
    const bytes = await loadModel(f, { signal, onProgress: (p) => dlProgress(f.name, p.loaded, p.total) });
    return [bytes];
  }
  const m = net.model;
  const how = document.querySelector('input[name=weightsSource]:checked').value;
  const onProgress = (p) => dlProgress(`${p.file} (${p.index + 1}/${p.files})`, p.loaded, p.total);
  if (how === 'file') {
    const files = [...$('weightsFile').files];
    if (files.length !== m.weights.length) throw err(`${m.name} needs ${m.weights.length} weights file(s): ${m.weights.map((w) => w.file).join(', ')}.`);
    return ui.tessera.loadWeights(m.id, { sources: files, onProgress, signal });
  }
  if (how === 'url') {
    const urls = $('weightsUrl').value.split(',').map((s) => s.trim()).filter(Boolean);
    if (!urls.length) throw err('Type the URL of the weights, or choose the official URL.');
    return ui.tessera.loadWeights(m.id, { sources: urls, onProgress, signal });
  }
  // Official URL, through the cache.
  const memoKey = `${m.id}:${m.weights.map((w) => w.sha256).join(',')}`;
  if (ui.weightsMemo.has(memoKey)) return ui.weightsMemo.get(memoKey);
  const cached = await Promise.all(m.weights.map((w) => cacheGet(w.file, w.sha256)));
  let out;
  if (cached.every(Boolean)) {
    $('dlText').textContent = 'weights from the cache (checking sha256)…';
    out = await ui.tessera.loadWeights(m.id, { sources: cached, signal });
  } else {
    out = await ui.tessera.loadWeights(m.id, { onProgress, signal });
    await Promise.all(m.weights.map((w, i) => cachePut(w.file, w.sha256, out[i])));
  }
  ui.weightsMemo.set(memoKey, out);
  return out;
}

// ------------------------------------------------------------------------------------------------
// Input

function setInput(input) {
  input.kind ??= 'field';
  ui.inputs[input.kind] = input;
  const values = input.kind === 'phase' ? input.display : input.field;
  let inMask = 0;
  let fieldSum = 0;
  for (let i = 0; i < input.mask.length; i++) {
    if (!input.mask[i]) continue;
    inMask++;
    fieldSum += values[i];
  }
  input.maskVoxels = inMask;
  tileMap.follow = true;
  input.summary = {
    source: input.source,
    kind: input.kind,
    dims: input.geometry.dims,
    voxelMm: input.geometry.voxelMm,
    maskVoxels: inMask,
    fieldSumInMask: fieldSum,
    ...(input.kind === 'phase' && { echoes: input.echoes, phaseRange: input.phaseRange, magnitude: !!input.magnitude }),
  };
  T.input = { ...input.summary, seq: (T.input?.seq ?? 0) + 1 };
  input.range = input.kind === 'phase' ? [-Math.PI, Math.PI] : robustRange(input.field, input.mask);
  showInput(input);
}

/** The input line, the slice sliders and the plan for the loaded input (null: none for this network). */
function showInput(input) {
  if (!input) {
    $('inputInfo').textContent =
      inputKind() === 'phase'
        ? 'No phase loaded: choose a wrapped-phase NIfTI (3D, or 4D with the echoes along the 4th dimension), its mask (or a magnitude image to threshold), and type the echo time(s).'
        : 'No input loaded.';
    updatePhaseState();
    schedulePlan();
    return;
  }
  const [nx, ny, nz] = input.geometry.dims;
  const v = input.geometry.voxelMm ?? [1, 1, 1];
  const b = input.geometry.b0Dir;
  let text =
    `${input.name}: ${nx}×${ny}×${nz} voxels of ${v.map((x) => +x.toFixed(3)).join('×')} mm, ` +
    (input.kind === 'phase' ? `${input.echoes} echo${input.echoes > 1 ? 'es' : ''}, ` : '') +
    `B0 direction [${b.map((x) => +x.toFixed(3)).join(', ')}], ${input.maskVoxels.toLocaleString()} mask voxels`;
  const notes = input.note ? [input.note] : [];
  if (input.kind === 'phase') {
    // iQSM and iQFM assume B0 along the third voxel axis; iQSM+ takes the direction (input b0_dir).
    const net = selectedNetwork();
    const tilt = (Math.acos(Math.min(1, Math.abs(b[2]) / (Math.hypot(...b) || 1))) * 180) / Math.PI;
    if (tilt > 5 && !net.model?.inputs?.includes('b0_dir')) notes.push(`B0 is ${tilt.toFixed(0)}° off the third voxel axis: ${net.name} assumes B0 along it (iQSM+ takes any direction)`);
  }
  if (notes.length) text += ` — ${notes.join('; ')}`;
  $('inputInfo').textContent = text;
  for (const s of [$('tileSlice'), $('slice')]) {
    s.max = String(nz - 1);
    s.value = String(Math.floor(nz / 2));
  }
  tileMap.z = Math.floor(nz / 2);
  updatePhaseState();
  schedulePlan();
}

async function loadFiles() {
  if (inputKind() === 'phase') return loadPhaseFiles();
  const f = ui.files;
  if (!f.field) return;
  const maskSource = document.querySelector('input[name=maskSource]:checked').value;
  const units = document.querySelector('input[name=units]:checked').value;
  const b0 = Number($('b0').value);
  if (units === 'hz' && !(b0 > 0)) return showError('Give the field strength B0 in tesla to convert Hz to ppm.');
  if (maskSource === 'file' && !f.mask) return ($('inputInfo').textContent = `Field map ${f.field.name} chosen: now choose its mask.`);
  if (maskSource === 'magnitude' && !f.magnitude) return ($('inputInfo').textContent = `Field map ${f.field.name} chosen: now choose a magnitude image.`);
  setBusy('loading');
  showError(null);
  try {
    const img = await io('read', { bytes: await f.field.arrayBuffer(), units, b0 });
    let m;
    if (maskSource === 'file') m = await io('mask', { bytes: await f.mask.arrayBuffer() });
    else m = await io('threshold', { bytes: await f.magnitude.arrayBuffer(), fraction: Number($('maskFraction').value) });
    if (m.dims.join() !== img.dims.join()) {
      throw err(`The field map is ${img.dims.join('×')} but the ${maskSource === 'file' ? 'mask' : 'magnitude image'} is ${m.dims.join('×')}: they must have the same dimensions.`);
    }
    // Invalid values outside the mask do not matter: make them 0 (inside, the runtime refuses them).
    let fixed = 0;
    for (let i = 0; i < img.data.length; i++) {
      if (!m.mask[i] && !Number.isFinite(img.data[i])) {
        img.data[i] = 0;
        fixed++;
      }
    }
    setInput({
      source: 'files',
      name: f.field.name,
      geometry: { dims: img.dims, voxelMm: img.voxelMm, b0Dir: img.b0Dir },
      field: img.data,
      mask: m.mask,
      like: img,
      note: [units === 'hz' ? `converted from Hz at ${b0} T` : '', maskSource === 'magnitude' ? `mask from ${f.magnitude.name} at ${$('maskFraction').value} of its robust max` : '', fixed ? `${fixed} invalid voxels outside the mask set to 0` : '']
        .filter(Boolean)
        .join('; '),
    });
    setBusy('idle');
  } catch (e) {
    setBusy('idle');
    showError(e);
  }
}

let phaseLoads = 0;
/** The phase networks' input: wrapped phase (3D/4D), optional magnitude, the mask; decoded and checked in the I/O worker. */
async function loadPhaseFiles() {
  const f = ui.files;
  if (!f.phase) return;
  const seq = ++phaseLoads;
  const maskSource = document.querySelector('input[name=maskSource]:checked').value;
  const pending = (text) => {
    ui.inputs.phase = null; // never run on a phase other than the one chosen
    T.input = { kind: 'phase', none: true, seq: T.input?.seq ?? 0 };
    $('inputInfo').textContent = text;
    updatePhaseState();
    schedulePlan();
  };
  if (maskSource === 'file' && !f.mask) return pending(`Phase ${f.phase.name} chosen: now choose its mask (or threshold a magnitude image).`);
  if (maskSource === 'magnitude' && !f.magnitude) return pending(`Phase ${f.phase.name} chosen: now choose a magnitude image to threshold.`);
  setBusy('loading');
  showError(null);
  try {
    const fraction = Number($('maskFraction').value);
    const bytes = {
      phase: await f.phase.arrayBuffer(),
      magnitude: f.magnitude ? await f.magnitude.arrayBuffer() : undefined,
      mask: maskSource === 'file' ? await f.mask.arrayBuffer() : undefined,
    };
    const r = await io(
      'phase',
      { ...bytes, maskSource, fraction, units: $('phaseUnits').value, names: { phase: f.phase.name, magnitude: f.magnitude?.name } },
      Object.values(bytes).filter(Boolean),
    );
    if (seq !== phaseLoads) return; // a newer choice of files is loading
    const nvox = r.mask.length;
    const mag = f.magnitude?.name;
    const notes = [...r.notes];
    if (r.echoes > 1) notes.push(r.magnitude ? `echoes combined with (magnitude·TE)² weights from ${mag}` : mag ? `${mag} is 3D: mask only, echoes combined with TE² weights` : 'no magnitude: echoes combined with TE² weights');
    if (maskSource === 'magnitude') notes.push(`mask from ${mag}${r.magEchoes > 1 ? ' (echo 1)' : ''} at ${$('maskFraction').value} of its robust max`);
    if (r.fixed) notes.push(`${r.fixed} invalid voxels outside the mask set to 0`);
    setInput({
      kind: 'phase',
      source: 'files',
      name: f.phase.name,
      geometry: { dims: r.dims, voxelMm: r.voxelMm, b0Dir: r.b0Dir },
      phase: r.phase,
      echoes: r.echoes,
      magnitude: r.magnitude ?? undefined,
      mask: r.mask,
      like: r.like,
      display: r.phase.subarray(0, nvox),
      phaseRange: r.range,
      note: notes.join('; '),
    });
    setBusy('idle');
  } catch (e) {
    if (seq !== phaseLoads) return;
    pending(`${f.phase.name}: not loaded (see the message above).`);
    setBusy('idle');
    showError(e);
  }
}

/**
 * The phase networks' settings from the page, checked: te (s, one per echo), b0 (T), erodeRadius, phaseSign;
 * problem: what is wrong, in words (null when all is well).
 */
function phaseParams(input = ui.inputs.phase) {
  const echoes = input?.echoes ?? null;
  const text = $('te').value.trim();
  const parts = text ? text.split(/[\s,;]+/).filter(Boolean) : [];
  const ms = parts.map(Number);
  const example = (n) => [20, 30, 40, 50, 60, 70, 80, 90].slice(0, n).join(', ');
  let problem = null;
  let te = null;
  const bad = parts.findIndex((p, i) => !/^[+]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(p) || !(ms[i] > 0));
  if (!parts.length) {
    problem = `Type the echo time${echoes > 1 ? 's' : ''} TE in ms${echoes > 1 ? `, one per echo (${echoes} echoes), comma-separated, e.g. ${example(echoes)}` : ', e.g. 20'}.`;
  } else if (bad >= 0) {
    problem = `“${parts[bad]}” is not an echo time: type TE in ms, e.g. 20, or ${example(3)} for three echoes.`;
  } else if (ms.some((t) => t < 1)) {
    problem = `TE is in milliseconds: ${ms.find((t) => t < 1)} ms is implausibly short (for 20 ms type 20, not 0.02).`;
  } else if (ms.some((t) => t > 1000)) {
    problem = `TE ${ms.find((t) => t > 1000)} ms is implausibly long: type the echo time in milliseconds.`;
  } else if (echoes !== null && ms.length !== echoes) {
    const given = `${ms.length} echo time${ms.length > 1 ? 's were' : ' was'} given`;
    problem = `The phase holds ${echoes} echo${echoes > 1 ? 'es' : ''} but ${given}: give one TE per echo, in ms, comma-separated${echoes > 1 ? ` (e.g. ${example(echoes)})` : ' (e.g. 20)'}.`;
  } else {
    te = ms.map((t) => t / 1000);
  }
  const b0 = Number($('b0').value);
  if (!problem && !(b0 > 0 && b0 <= 30)) problem = 'Give the field strength B0 in tesla (e.g. 3).';
  const erode = Number($('erode').value);
  if (!problem && !(Number.isInteger(erode) && erode >= 0 && erode <= 20)) problem = 'The mask erosion is a whole number of voxels from 0 to 20 (the reference uses 3).';
  return { te, b0, erodeRadius: erode, phaseSign: Number($('phaseSign').value) < 0 ? -1 : 1, echoes, problem };
}

/** Shows what keeps a phase network from running (TE, B0, erosion) next to the inputs; Run follows. */
function updatePhaseState() {
  const phase = inputKind() === 'phase';
  const p = phase ? phaseParams() : null;
  // Before a phase is loaded only a TE that is wrong in itself is worth a word.
  const show = !!p?.problem && (!!ui.inputs.phase || $('te').value.trim() !== '');
  $('phaseMsg').hidden = !show;
  $('phaseMsg').textContent = show ? p.problem : '';
  T.phaseProblem = p?.problem ?? null;
  updateButtons();
}

function takeFiles(list) {
  for (const file of list) {
    const n = file.name.toLowerCase();
    if (/\.onnx$/.test(n)) {
      $('model').value = 'custom';
      const dt = new DataTransfer();
      dt.items.add(file);
      $('customFile').files = dt.files;
      showModelInfo();
      continue;
    }
    const phase = inputKind() === 'phase';
    if (/mask|brain|roi/.test(n)) {
      ui.files.mask = file;
      setRadio('maskSource', 'file');
    } else if (/mag/.test(n)) {
      ui.files.magnitude = file;
      // For the phase networks the magnitude also weights the echoes: it makes the mask only without a mask file.
      if (!phase || !ui.files.mask) setRadio('maskSource', 'magnitude');
    } else if (phase) ui.files.phase = file;
    else ui.files.field = file;
  }
  syncMaskInputs();
  loadFiles();
}

function setRadio(name, value) {
  const r = document.querySelector(`input[name=${name}][value=${value}]`);
  if (r) r.checked = true;
}

function syncMaskInputs() {
  const src = document.querySelector('input[name=maskSource]:checked').value;
  const phase = inputKind() === 'phase';
  $('maskFileLabel').hidden = src !== 'file';
  // The phase networks take an optional magnitude (echo weights) whatever makes the mask.
  $('magFileLabel').hidden = src !== 'magnitude' && !phase;
  $('fractionBox').hidden = src !== 'magnitude';
  $('magText').textContent = phase ? `Magnitude (optional, weights the echoes${src === 'magnitude' ? '; thresholded for the mask' : ''})` : 'Magnitude';
}

// ------------------------------------------------------------------------------------------------
// Plan readout (every number from the C++ planner)

let planTimer = 0;
function schedulePlan() {
  clearTimeout(planTimer);
  planTimer = setTimeout(updatePlan, 120);
}

function planRequest() {
  const net = selectedNetwork();
  const geometry = ui.input?.geometry ?? DEMO.geometry;
  if (inputKind() === 'phase') {
    // The whole volume (cropped by iQSM+), one network call per echo. A TE that is missing or does not
    // match the echoes is the page's own message (Run stays disabled); the plan still shows the volume.
    const p = phaseParams();
    const echoes = ui.input?.echoes ?? p.te?.length ?? 1;
    return {
      geometry,
      mask: ui.input?.mask,
      model: net.id,
      te: p.te ?? Array(echoes).fill(0.02),
      b0: p.b0 > 0 && p.b0 <= 30 ? p.b0 : 3,
      erodeRadius: Number.isInteger(p.erodeRadius) && p.erodeRadius >= 0 && p.erodeRadius <= 20 ? p.erodeRadius : 3,
      workers: runtimeOptions().workers,
      threadsPerWorker: runtimeOptions().threadsPerWorker,
    };
  }
  const req = {
    geometry,
    mask: ui.input?.mask,
    // Auto: the C++ auto-planner picks the core (and workers/threads up to this page's runtime).
    tile: $('auto').checked
      ? { core: 'auto', halo: clampInt($('halo').value, 0, 4096, 8) }
      : { core: clampInt($('core').value, 1, 4096, 32), halo: clampInt($('halo').value, 0, 4096, 8) },
    whole: $('whole').checked,
    workers: runtimeOptions().workers,
    threadsPerWorker: runtimeOptions().threadsPerWorker,
  };
  if (net.kind === 'registry' || net.kind === 'demo') req.model = net.id;
  else req.spec = net.spec;
  return req;
}

async function updatePlan() {
  if (!ui.tessera) return;
  const seq = ++ui.planSeq;
  const req = planRequest();
  let plan;
  try {
    plan = await ui.tessera.plan(req);
  } catch (e) {
    plan = { feasible: false, message: friendly(e), warning: '' };
  }
  if (seq !== ui.planSeq) return;
  ui.plan = plan;
  T.plan = plan;
  renderPlan(plan, req);
  if (ui.input && !ui.controller) {
    tileMap.setup({ dims: req.geometry.dims, core: plan.tile?.core ?? req.tile?.core ?? 32, halo: plan.tile?.halo ?? req.tile?.halo ?? 0, whole: !!plan.wholeVolume || !req.tile, mask: ui.input.mask, background: backgroundOf(ui.input) });
    renderTiles();
  }
  updateButtons();
}

/** What the tile map draws under the grid: the field map, or the first echo's wrapped phase. */
function backgroundOf(input) {
  return input.kind === 'phase' ? input.display : input.field;
}

function fmtBytes(b) {
  if (!(b >= 0)) return '—';
  return b >= GB ? `${(b / GB).toFixed(2)} GB` : `${(b / 1e6).toFixed(0)} MB`;
}

function renderPlan(plan, req) {
  const t = $('planReadout');
  t.textContent = '';
  const row = (k, v) => {
    const tr = t.insertRow();
    tr.insertCell().textContent = k;
    tr.insertCell().textContent = v;
  };
  const onWhat = ui.input ? '' : ' (demo phantom geometry; no mask loaded yet, so every tile counts)';
  const phase = !req.tile; // the phase networks: whole volume, one network call per echo
  const m = selectedNetwork().model;
  if (phase && plan.feasible) {
    const how = m?.cropMargin ? `cropped to the eroded mask’s box + ${m.cropMargin} voxels, ` : '';
    row('Patch', `${plan.patchDims?.join('×')} voxels (whole volume, ${how}padded to a multiple of ${m?.divisor ?? 16})${ui.input ? '' : ' — for a 128×128×96 example: load a phase for its own plan'}`);
    row('Memory per network call', fmtBytes(plan.bytesPerTile));
    row('Network calls', `${plan.tilesTotal} (one per echo), ${plan.tilesInFlight} at a time`);
    row('Estimated peak', `${fmtBytes(plan.peakBytes)} (activations ${fmtBytes(plan.activationBytes)} + module heap ${fmtBytes(plan.moduleHeapBytes)})`);
  } else if (plan.feasible) {
    row('Patch', `${plan.patchDims?.join('×')} voxels${plan.wholeVolume ? ' (whole volume)' : ` (edge ${plan.patchEdge})`}`);
    row('Memory per tile', fmtBytes(plan.bytesPerTile));
    row('Tiles in flight', String(plan.tilesInFlight));
    row('Tiles', `${plan.tilesTotal} total, ${plan.tilesActive} to run, ${plan.tilesSkipped} skipped${onWhat}`);
    row('Estimated peak', `${fmtBytes(plan.peakBytes)} (activations ${fmtBytes(plan.activationBytes)} + module heap ${fmtBytes(plan.moduleHeapBytes)})`);
  } else if (plan.patchDims) {
    row('Patch', `${plan.patchDims.join('×')} voxels — ${fmtBytes(plan.bytesPerTile)} per tile`);
  }
  const L = ui.limits;
  const bars = $('memBars');
  bars.textContent = '';
  if (L && plan.feasible) {
    const bar = (label, value, limit) => {
      const d = document.createElement('div');
      d.className = 'membar';
      const frac = Math.min(1, value / limit);
      d.innerHTML = `<span class="lbl"></span><span class="track"><span class="fill"></span></span><span class="val mono"></span>`;
      d.querySelector('.lbl').textContent = label;
      d.querySelector('.fill').style.width = `${(100 * frac).toFixed(1)}%`;
      d.querySelector('.fill').classList.toggle('hot', frac > 0.85);
      d.querySelector('.val').textContent = `${fmtBytes(value)} / ${fmtBytes(limit)}`;
      bars.append(d);
    };
    bar(phase ? 'Activations vs budget' : 'Tiles in flight vs budget', plan.activationBytes, L.tileActivationBudget);
    bar(phase ? 'Whole volume vs single-patch limit' : 'One tile vs single-patch limit', plan.bytesPerTile, L.maxPatchActivationBytes);
    bar('Estimated peak vs heap ceiling', plan.peakBytes, L.heapCeilingBytes);
  }
  $('planAdvice').hidden = plan.feasible;
  $('planAdvice').textContent = plan.feasible ? '' : plan.message;
  $('planWarning').hidden = !plan.warning;
  $('planWarning').textContent = plan.warning || '';
  $('core').disabled = $('halo').disabled = $('whole').checked;
  $('auto').disabled = $('whole').checked;
  if (phase) {
    // Whole volume only: no tile setting applies (the note above the settings says so).
    for (const id of ['core', 'halo', 'auto', 'whole']) $(id).disabled = true;
  } else if ($('auto').checked) {
    $('core').disabled = true;
    if (plan.feasible && plan.tile) $('core').value = String(plan.tile.core);
  }
  $('planExplain').hidden = !plan.explanation;
  $('planExplain').textContent = plan.explanation ? `Auto-planner: ${plan.explanation}.` : '';
}

// ------------------------------------------------------------------------------------------------
// Run

function setBusy(state) {
  T.state = state;
  updateButtons();
}

function updateButtons() {
  const running = T.state === 'running' || T.state === 'loading';
  const feasible = !!ui.plan?.feasible;
  const ready = !!ui.tessera && T.ready;
  const phase = inputKind() === 'phase';
  const problem = phase ? phaseParams().problem : null;
  $('run').disabled = !ready || running || !feasible || !ui.input || !!problem;
  $('run').title = !ui.input
    ? phase
      ? 'Load a wrapped phase and its mask'
      : 'Load a field map and a mask, or try the demo'
    : problem || (!feasible ? (phase ? 'The volume does not fit: see the advice' : 'The tile setting does not fit: see the advice') : '');
  // The demo switches to the demo network, whatever the phase network's plan says.
  $('demo').disabled = !ready || running || (!feasible && !phase);
  $('cancel').disabled = T.state !== 'running';
  $('download').disabled = running || !ui.chi;
  for (const id of ['workers', 'threads', 'fieldFile', 'maskFile', 'magFile', 'model', 'phaseFile']) $(id).disabled = running;
  if (phase) $('workers').disabled = true; // one network call at a time (echo after echo)
}

function renderTiles() {
  T.tiles = { ...tileMap.snapshot(), planSkipped: ui.plan?.tilesSkipped ?? null, planTotal: ui.plan?.tilesTotal ?? null };
  const c = T.tiles.counts;
  $('tileCounts').textContent = `${c.total} tiles: ${c.done} done · ${c.running} running · ${c.queued} queued · ${c.skipped} skipped`;
}

function fmtSeconds(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return '—';
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

function onProgress(p) {
  T.progress = p;
  $('progress').max = p.total || 1;
  $('progress').value = p.done;
  const pct = p.total ? Math.round((100 * p.done) / p.total) : 0;
  $('progressText').textContent =
    ui.runKind === 'phase'
      ? `${p.done}/${p.total} echo${p.total > 1 ? 'es' : ''} (${pct}%) · ETA ${fmtSeconds(p.etaSeconds)} · whole volume`
      : `${p.done}/${p.total} tiles (${pct}%) · ${p.tilesPerSecond.toFixed(2)} tiles/s · ETA ${fmtSeconds(p.etaSeconds)} · ${p.inFlight} in flight`;
  if (p.runningTiles && p.startedTiles?.length) {
    tileMap.setTiles(p.startedTiles, p.runningTiles); // exact: the runtime names the tiles
  } else {
    const active = tileMap.order.length;
    const done = p.total === active ? p.done : Math.round((p.done / (p.total || 1)) * active);
    tileMap.setProgress(done, p.inFlight);
  }
  $('tileSlice').value = String(tileMap.z);
  renderTiles();
}

async function run() {
  if (ui.controller) return;
  const input = ui.input;
  if (!input) return;
  showError(null);
  const plan = ui.plan;
  if (!plan?.feasible) return showError(plan?.message || 'This tile setting does not fit.');
  const req = planRequest();
  const net = selectedNetwork();
  const phase = input.kind === 'phase';
  const pp = phase ? phaseParams(input) : null;
  if (pp?.problem) return showError(pp.problem);
  const controller = new AbortController();
  ui.controller = controller;
  const previous = ui.settling;
  ui.chi = null;
  ui.result = null;
  ui.runKind = input.kind;
  setQuantityLabels(selectedQuantity());
  T.report = null;
  T.stats = null;
  T.progress = null;
  T.runs++;
  setBusy('running');
  $('progress').value = 0;
  $('progressText').textContent = 'loading the network…';
  tileMap.setup({ dims: req.geometry.dims, core: plan.tile?.core ?? req.tile?.core ?? 32, halo: plan.tile?.halo ?? req.tile?.halo ?? 0, whole: !!plan.wholeVolume || phase, mask: input.mask, background: backgroundOf(input) });
  renderTiles();
  const body = (async () => {
    await previous;
    const tessera = await runtime();
    let t = performance.now();
    const weights = await weightsFor(net, controller.signal);
    T.timings.weightsSeconds = (performance.now() - t) / 1000;
    if (controller.signal.aborted) throw new DOMException('cancelled', 'AbortError');
    $('progressText').textContent = phase
      ? `0/${plan.tilesTotal} echo${plan.tilesTotal > 1 ? 'es' : ''} · starting the network on the whole volume…`
      : `0/${plan.tilesActive} tiles · starting ${plan.tilesInFlight} worker(s)…`;
    tileMap.setProgress(0, 0); // every tile queued until the runtime names the running ones
    renderTiles();
    const t0 = performance.now();
    const progress = (p) => ui.controller === controller && onProgress(p);
    const { chi, report, quantity } = phase
      ? await tessera.invert({
          model: req.model,
          geometry: req.geometry,
          mask: input.mask,
          phase: input.phase,
          magnitude: input.magnitude,
          te: pp.te,
          b0: pp.b0,
          erodeRadius: pp.erodeRadius,
          phaseSign: pp.phaseSign,
          workers: req.workers,
          threadsPerWorker: req.threadsPerWorker,
          weights,
          signal: controller.signal,
          onProgress: progress,
        })
      : await tessera.invert({ ...req, field: input.field, weights, signal: controller.signal, onProgress: progress });
    return { chi, report, quantity: quantity ?? 'chi', seconds: (performance.now() - t0) / 1000 };
  })();
  ui.settling = body.catch(() => {});
  try {
    const { chi, report, quantity, seconds } = await body;
    if (controller.signal.aborted) return;
    tileMap.setProgress(tileMap.order.length, 0);
    if (tileMap.follow) tileMap.setSlice(Math.floor(input.geometry.dims[2] / 2));
    renderTiles();
    $('progress').max = 1;
    $('progress').value = 1;
    ui.chi = chi;
    ui.result = { chi, input, quantity, name: net.name, params: pp };
    setQuantityLabels(quantity);
    T.report = report;
    T.result = { quantity, network: net.name, kind: input.kind };
    T.stats = stats(chi, input);
    renderReport(report, seconds, T.stats, ui.result);
    $('progressText').textContent = phase
      ? `${report.tilesRun}/${report.tilesRun} echo${report.tilesRun > 1 ? 'es' : ''} (100%) · ${fmtSeconds(report.wallSeconds)}`
      : `${report.tilesRun}/${report.tilesRun} tiles (100%) · ${fmtSeconds(report.wallSeconds)}`;
    const tv = performance.now();
    await showResults(chi, input);
    T.timings.invertSeconds = seconds;
    T.timings.viewerSeconds = (performance.now() - tv) / 1000;
    setBusy('done');
  } catch (e) {
    if (ui.controller !== controller) return; // a cancel already settled the page
    if (e?.name === 'AbortError') {
      T.state = 'cancelled';
    } else {
      tileMap.settle();
      renderTiles();
      $('progressText').textContent = 'failed';
      showError(e);
      setBusy('error');
    }
  } finally {
    if (ui.controller === controller) {
      ui.controller = null;
      updateButtons();
    }
  }
}

function cancel() {
  const c = ui.controller;
  if (!c) return;
  // Settle the page at once; the runtime stops its workers in the background.
  ui.controller = null;
  c.abort();
  tileMap.settle();
  renderTiles();
  $('progressText').textContent = `cancelled at ${T.progress?.done ?? 0}/${T.progress?.total ?? '?'} tiles`;
  $('dlProgress').hidden = true;
  setBusy('cancelled');
}

function stats(chi, input) {
  let n = 0, s = 0, ss = 0, sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0, outside = 0;
  const t = input.truth;
  for (let i = 0; i < chi.length; i++) {
    const x = chi[i];
    if (!input.mask[i]) {
      if (x !== 0) outside++;
      continue;
    }
    n++;
    s += x;
    ss += x * x;
    if (t) {
      const y = t[i];
      sx += x; sy += y; sxx += x * x; syy += y * y; sxy += x * y;
    }
  }
  const mean = s / n;
  const out = { maskVoxels: n, mean, std: Math.sqrt(Math.max(0, ss / n - mean * mean)), nonzeroOutside: outside, finite: chi.every(Number.isFinite) };
  if (t) {
    out.r = (n * sxy - sx * sy) / Math.sqrt((n * sxx - sx * sx) * (n * syy - sy * sy));
    let e = 0, tt = 0;
    for (let i = 0; i < chi.length; i++) if (input.mask[i]) { e += (chi[i] - t[i]) ** 2; tt += t[i] ** 2; }
    out.nrmse = Math.sqrt(e / tt);
  }
  return out;
}

function renderReport(r, seconds, st, res) {
  const t = $('report');
  t.textContent = '';
  const row = (k, v) => {
    const tr = t.insertRow();
    tr.insertCell().textContent = k;
    tr.insertCell().textContent = v;
  };
  row('Wall time', `${fmtSeconds(r.wallSeconds)} (driver ${fmtSeconds(r.driverSeconds)}, page ${fmtSeconds(seconds)})`);
  const ts = [...r.tileSeconds].sort((a, b) => a - b);
  if (ts.length) row(res?.input.kind === 'phase' ? 'Per network call' : 'Per tile', `median ${fmtSeconds(ts[Math.floor(ts.length / 2)])}, max ${fmtSeconds(ts.at(-1))}`);
  const phase = res?.input.kind === 'phase';
  if (phase) {
    const p = res.params;
    row('Network', `${res.name}: TE ${p.te.map((t) => +(t * 1000).toPrecision(6)).join(', ')} ms, B0 ${p.b0} T, mask eroded by ${p.erodeRadius} voxel${p.erodeRadius === 1 ? '' : 's'}, phase sign ${p.phaseSign < 0 ? '−1' : '+1'}${res.input.magnitude ? ', magnitude-weighted echoes' : ''}`);
    row('Network calls', `${r.tilesRun} (one per echo) on the whole volume, ${r.plan?.patchDims?.join('×') ?? r.patchEdge} voxels, ${fmtBytes(r.bytesPerTile)} each`);
  } else row('Tiles', `${r.tilesTotal} total, ${r.tilesRun} run, ${r.tilesSkipped} skipped; patch ${r.patchEdge}³, ${fmtBytes(r.bytesPerTile)} each`);
  row('Concurrency', `${r.concurrency} planned, ${r.maxInFlightObserved} observed in flight; pool max ${r.pool.map((p) => p.maxInFlight).join(', ')}, runs ${r.pool.map((p) => p.runs).join(', ')}, retries ${r.pool.map((p) => p.retries).join(', ')}, recycles ${r.pool.map((p) => p.recycles).join(', ')}`);
  row('Memory', `module heap ${fmtBytes(r.memory.moduleHeapBytes)}; ONNX Runtime worker heaps high-water ${r.memory.workerHeapHighWater.map(fmtBytes).join(', ') || '—'}; planner estimate ${fmtBytes(r.memory.estimatedPeakBytes)}`);
  if (r.warning) row('Warning', r.warning);
  row(`${res?.quantity === 'local-field' ? 'Local field' : 'χ'} in the mask`, `mean ${st.mean.toFixed(4)} ppm, std ${st.std.toFixed(4)} ppm over ${st.maskVoxels.toLocaleString()} voxels`);
  if (st.r !== undefined) row('Against the phantom truth', `r = ${st.r.toFixed(3)}, NRMSE = ${(100 * st.nrmse).toFixed(1)} %`);
  $('corr').textContent = st.r !== undefined ? `r vs truth = ${st.r.toFixed(3)}` : '';
}

async function showResults(chi, input) {
  if (!ui.windowSet) {
    // A symmetric χ window from the data (the truth in the demo), once; the user's window is kept after.
    const [a, z] = robustRange(input.truth ?? chi, input.mask);
    const w = Math.max(Math.abs(a), Math.abs(z)) || 0.1;
    $('winMin').value = String(-+w.toPrecision(2));
    $('winMax').value = String(+w.toPrecision(2));
  }
  const [lo, hi] = [Number($('winMin').value), Number($('winMax').value)];
  $('capField').textContent = input.kind === 'phase' ? `Wrapped phase (rad${input.echoes > 1 ? ', echo 1' : ''})` : 'Local field (ppm)';
  await viewer.show({ field: backgroundOf(input), chi, truth: input.truth }, input.like, { field: input.range, chi: [lo, hi] }, $('cmap').value || 'gray');
  syncSlice(Number($('slice').value));
  T.viewer = { shown: [...viewer.loaded] };
}

function syncSlice(z) {
  $('slice').value = String(z);
  $('tileSlice').value = String(z);
  $('sliceText').textContent = `z = ${z}`;
  viewer.setSlice(z);
  tileMap.setSlice(z);
}

async function download() {
  const res = ui.result; // what was run on which input, whatever is selected now
  if (!ui.chi || !res) return;
  const lf = res.quantity === 'local-field';
  const bytes = await io('write', { data: res.chi.slice(), like: stripForClone(res.input.like), gzip: true, description: lf ? `Tessera ${res.name} local field (ppm)` : undefined });
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([bytes], { type: 'application/gzip' }));
  a.download = `${res.input.name.replace(/\.nii(\.gz)?$/i, '')}_${lf ? 'localfield' : 'chi'}.nii.gz`;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

/** The NIfTI header part of a readNifti result (no voxel data) for writeNifti in the worker. */
function stripForClone(like) {
  const { data, ...rest } = like;
  return rest;
}

// ------------------------------------------------------------------------------------------------
// Demo

async function demo() {
  if (ui.controller) return;
  showError(null);
  setBusy('loading');
  $('progressText').textContent = 'making the phantom…';
  try {
    const tessera = await runtime();
    const tp = performance.now();
    const p = await tessera.phantom({ geometry: DEMO.geometry, seed: DEMO.seed, noise: DEMO.noise });
    T.timings.phantomSeconds = (performance.now() - tp) / 1000;
    $('model').value = 'demo';
    showModelInfo();
    setInput({
      source: 'demo',
      name: 'phantom',
      geometry: DEMO.geometry,
      field: p.field,
      mask: p.mask,
      truth: p.chi,
      like: { dims: DEMO.geometry.dims, voxelMm: DEMO.geometry.voxelMm },
      note: 'numerical head phantom, local field from the dipole model',
    });
    clearTimeout(planTimer);
    await updatePlan();
    setBusy('idle');
    await run();
  } catch (e) {
    setBusy('error');
    showError(e);
  }
}

// ------------------------------------------------------------------------------------------------
// Wiring

function wire() {
  $('demo').addEventListener('click', demo);
  $('run').addEventListener('click', run);
  $('cancel').addEventListener('click', cancel);
  $('download').addEventListener('click', () => download().catch(showError));
  $('model').addEventListener('change', showModelInfo);
  for (const id of ['core', 'halo', 'auto', 'whole', 'workers', 'customDivisor', 'customBpv']) $(id).addEventListener('input', schedulePlan);
  $('fieldFile').addEventListener('change', (e) => {
    ui.files.field = e.target.files[0] ?? null;
    loadFiles();
  });
  $('maskFile').addEventListener('change', (e) => {
    ui.files.mask = e.target.files[0] ?? null;
    loadFiles();
  });
  $('magFile').addEventListener('change', (e) => {
    ui.files.magnitude = e.target.files[0] ?? null;
    loadFiles();
  });
  $('maskFraction').addEventListener('change', loadFiles);
  for (const r of document.querySelectorAll('input[name=maskSource]')) r.addEventListener('change', () => (syncMaskInputs(), loadFiles()));
  for (const r of document.querySelectorAll('input[name=units]')) r.addEventListener('change', loadFiles);
  // B0 converts Hz field maps (reload) and is a parameter of the phase networks (check and re-plan).
  $('b0').addEventListener('change', () => (inputKind() === 'phase' ? (updatePhaseState(), schedulePlan()) : loadFiles()));
  $('b0').addEventListener('input', () => inputKind() === 'phase' && updatePhaseState());
  $('phaseFile').addEventListener('change', (e) => {
    ui.files.phase = e.target.files[0] ?? null;
    if (!ui.files.phase) {
      ui.inputs.phase = null;
      showInput(null);
    }
    loadFiles();
  });
  $('phaseUnits').addEventListener('change', loadFiles);
  for (const id of ['te', 'erode']) {
    $(id).addEventListener('input', () => {
      updatePhaseState();
      schedulePlan();
    });
  }
  $('phaseSign').addEventListener('change', updatePhaseState);
  const drop = $('drop');
  drop.addEventListener('dragover', (e) => {
    e.preventDefault();
    drop.classList.add('over');
  });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    drop.classList.remove('over');
    if (T.state !== 'running') takeFiles([...e.dataTransfer.files]);
  });
  $('clearCache').addEventListener('click', async () => {
    if ('caches' in self) await caches.delete(CACHE_NAME);
    ui.weightsMemo.clear();
    refreshCacheInfo();
  });
  const userSlice = (e) => {
    tileMap.follow = false; // the user's slice wins over following the running tiles
    syncSlice(Number(e.target.value));
  };
  $('tileSlice').addEventListener('input', userSlice);
  $('slice').addEventListener('input', userSlice);
  const chiDisplay = () => viewer.setChiDisplay($('cmap').value, Number($('winMin').value), Number($('winMax').value));
  for (const id of ['cmap', 'winMin', 'winMax']) $(id).addEventListener('input', chiDisplay);
  for (const id of ['winMin', 'winMax']) $(id).addEventListener('input', () => (ui.windowSet = true));
}

async function main() {
  wire();
  syncMaskInputs();
  const iso = globalThis.crossOriginIsolated === true;
  $('env').textContent = `${iso ? 'Cross-origin isolated' : 'NOT cross-origin isolated (threads unavailable: serve with COOP/COEP, e.g. npm start)'} · ${navigator.hardwareConcurrency} logical cores`;
  $('workers').value = String(Math.max(1, Math.min(4, navigator.hardwareConcurrency || 2)));
  try {
    const tessera = await runtime();
    [ui.registry, ui.limits] = await Promise.all([tessera.registry(), tessera.limits()]);
    fillModels();
    await viewer.ready;
    const cm = $('cmap');
    for (const name of viewer.colormaps()) {
      const o = document.createElement('option');
      o.value = o.textContent = name;
      cm.append(o);
    }
    cm.value = 'gray';
    T.ready = true;
    setBusy('idle');
    showModelInfo();
    await updatePlan();
    refreshCacheInfo();
    $('env').textContent += ' · runtime ready';
  } catch (e) {
    setBusy('error');
    showError(e);
  }
}

main();
