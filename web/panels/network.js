// The network panel: the network choice (the registry's, the bundled demo, or a custom .onnx with its spec),
// the selected network's description, licence and citation, and its weights (official URL through the
// weights cache, another URL, or local files) with download progress.
import { TesseraError, loadModel, loadWeightsCached, listCachedWeights, clearWeightsCache, sha256Hex } from '../../bindings/js/index.js';
import { $, addOption, checkedValue, clampInt, fmtBytes } from '../dom.js';
import { DEMO } from '../demo.js';
import { workflowFor } from '../workflows/index.js';

const GROUPS = { 'field-to-chi': 'Field → χ networks', 'physics-loop': 'Physics loops', 'native-patches': 'Native patching', 'whole-volume-only': 'Whole volume only' };

/** The key of a registry network's weights (its id and their sha256s: the weights are checked against them when loaded). */
const weightsKey = (m) => `${m.id}:${m.weights.map((w) => w.sha256).join(',')}`;

/**
 * The key of what was measured on a network's weights (its speed, its reach): a registry network's weightsKey, a custom
 * .onnx's own sha256, or null while the chosen file is still being read.
 * Precondition: `net` is NetworkPanel.selected()'s value.
 */
export const measuredKey = (net) => (net.kind === 'custom' ? (net.weightsSha ? `sha256:${net.weightsSha}` : null) : weightsKey(net.model));

export class NetworkPanel {
  /** @param {import('../page.js').Page} page */
  constructor(page) {
    this.page = page;
    this.memo = new Map(); // verified weights of this session, by network and sha256s
    /** Called after the selection changed (app.js wires the other panels to it). */
    this.onChange = () => {};
    $('model').addEventListener('change', () => this.changed());
    $('clearCache').addEventListener('click', async () => {
      await clearWeightsCache();
      this.memo.clear();
      this.refreshCacheInfo();
    });
    for (const id of ['customDivisor', 'customBpv']) $(id).addEventListener('input', () => page.schedulePlan());
    this.custom = { file: null, bytes: null, sha: null }; // the chosen custom .onnx, its bytes and their sha256
    this.reading = Promise.resolve(); // the chosen custom .onnx being read (readCustomFile)
    $('customFile').addEventListener('change', () => this.readCustomFile());
  }

  /**
   * Reads the chosen custom .onnx, then plans again: with its bytes the planner reads how far the network looks
   * from its graph (the run reads the same graph), instead of assuming a reach; their sha256 keys what is measured on
   * them (the same file chosen again, or on a later visit, keeps its measured speed and reach; another file has none).
   */
  readCustomFile() {
    const f = $('customFile').files[0] ?? null;
    this.custom = { file: f, bytes: null, sha: null };
    const read = async () => {
      if (f) {
        const bytes = new Uint8Array(await f.arrayBuffer());
        const sha = await sha256Hex(bytes);
        if (this.custom.file !== f) return; // another file was chosen meanwhile
        this.custom = { file: f, bytes, sha };
      }
      this.page.schedulePlan();
    };
    this.reading = read().catch(() => {}); // an unreadable file: the run reads it again and says why
    return this.reading;
  }

  /** Fills the network list from the registry (grouped by kind), the demo first, a custom network last. */
  fill(registry) {
    const sel = $('model');
    sel.textContent = '';
    addOption(sel, 'demo', 'Demo U-Net (bundled, field → χ, divisor 8)');
    for (const [kind, label] of Object.entries(GROUPS)) {
      const g = document.createElement('optgroup');
      g.label = label;
      for (const m of registry.filter((r) => r.kind === kind && r.id !== DEMO.id)) addOption(g, m.id, `${m.name}${m.tileable ? '' : ' (not tileable)'}`);
      if (g.children.length) sel.append(g);
    }
    addOption(sel, 'custom', 'Custom network (your .onnx)…');
    sel.value = 'demo';
  }

  /** Selects a network by its option value ('demo', 'custom' or a registry id) and updates the page. */
  select(value) {
    $('model').value = value;
    this.changed();
  }

  changed() {
    this.showInfo();
    this.onChange();
  }

  /**
   * The selected network: { kind: 'demo'|'registry'|'custom', id?, model? (registry entry), name, spec?,
   * planWeights?, planWeightsName?, weightsSha? (a custom network's chosen .onnx: its bytes, file name and sha256) }.
   */
  selected() {
    const v = $('model').value;
    const registry = this.page.registry;
    if (v === 'demo') return { kind: 'demo', id: DEMO.id, model: registry.find((r) => r.id === DEMO.id), name: 'Demo U-Net' };
    if (v === 'custom') {
      const num = (id, d) => ($(id).value !== '' && Number.isFinite(Number($(id).value)) ? Number($(id).value) : d);
      return {
        kind: 'custom',
        name: 'Custom network',
        planWeights: this.custom.bytes ?? undefined,
        planWeightsName: this.custom.file?.name,
        weightsSha: this.custom.sha ?? undefined,
        spec: {
          divisor: clampInt($('customDivisor').value, 1, 1024, 1),
          // Empty: the network is calibrated from its .onnx (tessera.calibrate) before it is planned.
          bytesPerVoxel: $('customBpv').value === '' ? undefined : num('customBpv', undefined),
          inputMean: num('customInMean', 0),
          inputStd: num('customInStd', 1),
          outputMean: num('customOutMean', 0),
          outputStd: num('customOutStd', 1),
        },
      };
    }
    const m = registry.find((r) => r.id === v);
    return { kind: 'registry', id: v, model: m, name: m?.name ?? v };
  }

  /** What the selected network outputs: 'chi', or 'local-field' (iQFM). */
  quantity() {
    return this.selected().model?.quantity === 'local-field' ? 'local-field' : 'chi';
  }

  /** The description, licence and citation of the selected network; its weights or custom-spec inputs. */
  showInfo() {
    const n = this.selected();
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
      workflowFor(m).describeNetwork(m, line);
      line('Input / output', `${m.input} → ${m.output}`);
      line('Weights', m.weights.map((w) => `${w.file}${w.bytes ? ` (${fmtBytes(w.bytes)})` : ''}`).join(', '));
      line('Licence', m.licence);
      line('Citation', m.citation);
      line('Notes', m.notes);
    }
    box.dataset.network = n.id ?? n.kind;
  }

  /** The download progress bar and its words. */
  progress(label, loaded, total) {
    const bar = $('dlProgress');
    bar.hidden = false;
    bar.max = total || 1;
    bar.value = total ? loaded : 0;
    if (!total) bar.removeAttribute('value');
    $('dlText').textContent = `${label}: ${fmtBytes(loaded)}${total ? ` of ${fmtBytes(total)}` : ''}`;
  }

  hideProgress() {
    $('dlProgress').hidden = true;
  }

  /**
   * The ONNX bytes of a network (one array per network file), verified: the demo from this server and a registry
   * network from its official URL through the weights cache, a custom .onnx as chosen, a registry network from
   * local files or another URL as given.
   * Preconditions: `net` is selected()'s value; the page's runtime is up.
   */
  async weights(net, signal) {
    const tessera = this.page.tessera;
    if (net.kind === 'demo') {
      try {
        return await this.throughCache(net.model, signal);
      } catch (e) {
        if (e?.name === 'AbortError') throw e;
        throw new TesseraError(`The demo network (web/models/demo-unet.onnx) is not available on this server: ${e.message}`, e?.code ?? 'DownloadFailed');
      }
    }
    if (net.kind === 'custom') {
      const f = $('customFile').files[0];
      if (!f) throw new TesseraError('Choose the custom network’s .onnx file first.', 'InvalidArgument');
      return [await loadModel(f, { signal, onProgress: (p) => this.progress(f.name, p.loaded, p.total) })];
    }
    const m = net.model;
    const how = checkedValue('weightsSource');
    const onProgress = (p) => this.progress(`${p.file} (${p.index + 1}/${p.files})`, p.loaded, p.total);
    if (how === 'file') {
      const files = [...$('weightsFile').files];
      if (files.length !== m.weights.length) throw new TesseraError(`${m.name} needs ${m.weights.length} weights file(s): ${m.weights.map((w) => w.file).join(', ')}.`, 'InvalidArgument');
      return tessera.loadWeights(m.id, { sources: files, onProgress, signal });
    }
    if (how === 'url') {
      const urls = $('weightsUrl').value.split(',').map((s) => s.trim()).filter(Boolean);
      if (!urls.length) throw new TesseraError('Type the URL of the weights, or choose the official URL.', 'InvalidArgument');
      return tessera.loadWeights(m.id, { sources: urls, onProgress, signal });
    }
    return this.throughCache(m, signal);
  }

  /** Whether the network's weights are here without a download: the demo's (served with the page), a chosen file, or fetched this session. */
  weightsAtHand(net) {
    if (net.kind === 'custom') return !!$('customFile').files[0];
    if (net.kind === 'demo') return true;
    if (checkedValue('weightsSource') === 'file') return $('weightsFile').files.length === net.model.weights.length;
    return this.memo.has(weightsKey(net.model));
  }

  /**
   * A registry network's weights from its registry URLs (the demo's: served with this page) through the weights
   * cache, verified against the registry's size and sha256; kept for the session.
   */
  async throughCache(m, signal) {
    const memoKey = weightsKey(m);
    if (this.memo.has(memoKey)) return this.memo.get(memoKey);
    const onProgress = (p) => this.progress(`${p.file} (${p.index + 1}/${p.files})`, p.loaded, p.total);
    const load = (sources) => {
      if (sources) $('dlText').textContent = 'weights from the cache (checking sha256)…';
      return this.page.tessera.loadWeights(m.id, sources ? { sources, signal } : { onProgress, signal });
    };
    const { bytes, fromCache } = await loadWeightsCached(m.weights, load);
    if (!fromCache) this.refreshCacheInfo();
    this.memo.set(memoKey, bytes);
    return bytes;
  }

  /** Says what the weights cache holds. */
  async refreshCacheInfo() {
    const held = await listCachedWeights().catch(() => null);
    $('cacheInfo').textContent = held === null ? 'no Cache API here' : held.length ? `cached: ${held.map((w) => w.file).join(', ')}` : 'cache empty';
  }
}
