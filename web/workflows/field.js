// The field → χ workflow: a local field map (ppm, or Hz with B0) and a mask in, tiled (or whole-volume) runs,
// χ out. It owns its inputs (the field file, its units), the plan and invert requests built from the page, and
// its readouts (plan rows, progress, report). The wrapped-phase workflow (phase.js) has the same shape.
import { TesseraError } from '../../bindings/js/index.js';
import { $, checkedValue, clampInt, fmtBytes } from '../dom.js';
import { robustRange } from '../tilemap.js';
import { estimateText, reachText, plannedCheckText } from '../fidelity.js';
import { typedInt } from '../schema.js';

export const fieldWorkflow = {
  kind: 'field',
  /** Tile settings apply (core, halo, auto, whole, workers). */
  tiled: true,
  /** What the drop zone calls the main file; where the B0 input sits. */
  mainName: 'field map',
  /** The file input of the main file (its choice goes to page.files.field). */
  fileInput: 'fieldFile',
  b0Slot: 'b0FieldSlot',
  /** B0 converts a field map in Hz: changing it reloads the input. */
  b0Reloads: true,
  noInputText: 'No input loaded.',
  needInputText: 'Load a field map and a mask, or try the demo',
  infeasibleText: 'The tile setting does not fit: see the advice',
  errorWords: {
    BudgetExceeded: 'This tile setting does not fit in memory',
    NonFiniteInput: 'The field map holds invalid values',
  },
  barLabels: ['Tiles in flight vs budget', 'One tile vs single-patch limit'],

  /** Wires this workflow's own inputs: the field's units reload it. */
  wire({ reload }) {
    for (const r of document.querySelectorAll('input[name=units]')) r.addEventListener('change', reload);
  },

  /** The network description needs nothing beyond the registry's input / output line. */
  describeNetwork() {},

  /** The magnitude label's words and whether it shows, for a mask source ('file' | 'magnitude'). */
  magnitudeLabel(maskSource) {
    return { text: 'Magnitude', shown: maskSource === 'magnitude' };
  },

  /** A dropped magnitude image makes the mask. */
  magnitudeMakesMask() {
    return true;
  },

  /** The run's parameters beyond the files and the tile settings: none for a field map. */
  params() {
    return {};
  },

  /** Nothing beyond the files: the field map has no acquisition parameters to check. */
  problem() {
    return null;
  },

  /** Shows what keeps the workflow from running next to its inputs (nothing for a field map). */
  syncParams() {},

  /**
   * Reads the chosen field map and mask (or magnitude to threshold) in the I/O worker; returns the input, or a
   * string saying which file is still missing. Invalid values outside the mask become 0 (inside, the runtime
   * refuses them).
   * Preconditions: files.field is set; io is the I/O worker client.
   */
  async load(io, files) {
    const maskSource = checkedValue('maskSource');
    const units = checkedValue('units');
    const b0 = Number($('b0').value);
    if (units === 'hz' && !(b0 > 0)) throw new TesseraError('Give the field strength B0 in tesla to convert Hz to ppm.', 'InvalidArgument');
    if (maskSource === 'file' && !files.mask) return `Field map ${files.field.name} chosen: now choose its mask.`;
    if (maskSource === 'magnitude' && !files.magnitude) return `Field map ${files.field.name} chosen: now choose a magnitude image.`;
    const img = await io('read', { bytes: await files.field.arrayBuffer(), units, b0 });
    const m =
      maskSource === 'file'
        ? await io('mask', { bytes: await files.mask.arrayBuffer() })
        : await io('threshold', { bytes: await files.magnitude.arrayBuffer(), fraction: Number($('maskFraction').value) });
    if (m.dims.join() !== img.dims.join()) {
      throw new TesseraError(
        `The field map is ${img.dims.join('×')} but the ${maskSource === 'file' ? 'mask' : 'magnitude image'} is ${m.dims.join('×')}: they must have the same dimensions.`,
        'InvalidArgument',
      );
    }
    // A magnitude image chosen goes with the input too: a classical method that weights with it (MEDI) takes it.
    let magnitude;
    let magNote = '';
    if (files.magnitude) {
      try {
        const mag = await io('read', { bytes: await files.magnitude.arrayBuffer(), units: 'ppm' });
        if (mag.dims.join() === img.dims.join()) magnitude = mag.data.map((v) => (Number.isFinite(v) ? v : 0));
        else magNote = `${files.magnitude.name} is ${mag.dims.join('×')}, not the field's ${img.dims.join('×')}: not used as the magnitude`;
      } catch (e) {
        magNote = `${files.magnitude.name} not read as a magnitude image (${e.message})`;
      }
    }
    let fixed = 0;
    for (let i = 0; i < img.data.length; i++) {
      if (!m.mask[i] && !Number.isFinite(img.data[i])) {
        img.data[i] = 0;
        fixed++;
      }
    }
    const notes = [
      units === 'hz' ? `converted from Hz at ${b0} T` : '',
      maskSource === 'magnitude' ? `mask from ${files.magnitude.name} at ${$('maskFraction').value} of its robust max` : '',
      fixed ? `${fixed} invalid voxels outside the mask set to 0` : '',
      magnitude && maskSource === 'file' ? `magnitude ${files.magnitude.name} loaded` : '',
      magNote,
    ];
    return this.input({
      source: 'files',
      name: files.field.name,
      geometry: { dims: img.dims, voxelMm: img.voxelMm, b0Dir: img.b0Dir },
      field: img.data,
      mask: m.mask,
      magnitude,
      like: img,
      note: notes.filter(Boolean).join('; '),
    });
  },

  /**
   * Completes an input: { source, name, geometry, field, mask, like, note?, truth? } gains kind, display (what
   * the panels show under χ: the field), range (its display window) and summary (published on the page).
   */
  input(input) {
    input.kind = 'field';
    input.display = input.field;
    input.range = robustRange(input.field, input.mask);
    let maskVoxels = 0;
    let sum = 0;
    for (let i = 0; i < input.mask.length; i++) {
      if (!input.mask[i]) continue;
      maskVoxels++;
      sum += input.field[i];
    }
    input.maskVoxels = maskVoxels;
    input.summary = { kind: 'field', source: input.source, dims: input.geometry.dims, voxelMm: input.geometry.voxelMm, maskVoxels, sumInMask: sum };
    return input;
  },

  /** Extra words for the input line: counts after the B0 direction, notes at the end. */
  describe() {
    return { counts: '', notes: [] };
  },

  /**
   * The plan request for the page's settings (auto: the C++ auto-planner picks the core, halo, stride, workers and
   * threads for the quality chosen); with Verify, the self-check is planned too. A custom network's .onnx, once
   * chosen, goes with it (net.planWeights): the planner then knows how far the network looks from its graph.
   */
  planRequest(net, input, geometry, runtime) {
    // Auto: the planner chooses the halo too, unless the user typed one. Explicit tiles: the core and halo shown (the
    // last plan's, or typed); an empty one is the planner's (the network's default halo).
    const typedHalo = typedInt('halo', 0, 4096);
    const shown = (id, lo) => ($(id).value === '' ? undefined : clampInt($(id).value, lo, 4096, undefined));
    const autoTile = typedHalo === undefined ? 'auto' : { core: 'auto', halo: typedHalo };
    const core = shown('core', 1);
    const tile = $('auto').checked ? autoTile : core === undefined ? { core: 'auto', halo: shown('halo', 0) } : { core, halo: shown('halo', 0) };
    const req = {
      geometry,
      mask: input?.mask,
      tile,
      whole: $('whole').checked,
      workers: runtime.workers,
      threadsPerWorker: runtime.threadsPerWorker,
      quality: $('quality').value,
      verify: $('verify').checked,
      b0Align: $('b0Align').value,
      crop: $('crop').value,
      // A network that reads its field unmasked: an automatic plan's crop box holds every voxel where it is not zero
      // (a masked network's plan needs only the mask, so its field is not copied to the planner).
      field: (net.model?.maskedInput ?? net.spec?.maskedInput) ? undefined : input?.field,
    };
    if (net.kind === 'custom') req.spec = net.spec;
    else req.model = net.id;
    if (net.planWeights) req.weights = net.planWeights;
    return req;
  },

  /**
   * The invert request: the plan request with the field, the weights, the plan shown (the run obeys exactly it, as
   * the tile map draws it) and the run's controls (signal, onProgress).
   */
  invertRequest(req, input, params, weights, run, plan) {
    return { ...req, field: input.field, weights, plan, ...run };
  },

  /** The plan readout's rows (row(key, value)); hasInput false: the demo geometry stands in. */
  planRows(plan, net, hasInput, row) {
    if (!plan.feasible) {
      if (plan.patchDims) row('Patch', `${plan.patchDims.join('×')} voxels — ${fmtBytes(plan.bytesPerTile)} per tile`);
      return;
    }
    const onWhat = hasInput ? '' : ' (demo phantom geometry; no mask loaded yet, so every tile counts)';
    row('Estimate', estimateText(plan));
    row('Network reach', reachText(plan.context, this.reachSource(net)));
    const whole = plan.crop
      ? ` (the mask's bounding box + ${plan.crop.margin} voxels: x ${plan.crop.lo[0]}-${plan.crop.hi[0]}, y ${plan.crop.lo[1]}-${plan.crop.hi[1]}, z ${plan.crop.lo[2]}-${plan.crop.hi[2]}; the rest of the volume holds no input)`
      : ' (whole volume)';
    const split = plan.crop?.split;
    const slabs = !plan.wholeVolume && split?.pieces > 1
      ? ` (the mask's bounding box + ${plan.crop.margin} voxels in ${split.pieces} slabs along ${'xyz'[split.axis]}, halo ${split.halo} on the cut faces: it does not fit the single-patch limit at once)`
      : null;
    row('Patch', `${plan.patchDims?.join('×')} voxels${plan.wholeVolume ? whole : slabs ?? ` (edge ${plan.patchEdge})`}`);
    if (!plan.wholeVolume && plan.tile.stride < plan.tile.core) row('Stride', `${plan.tile.stride} (${plan.tile.blend} blend): the cores overlap and are blended`);
    row('Memory per tile', fmtBytes(plan.bytesPerTile));
    row('Tiles in flight', String(plan.tilesInFlight));
    row('Tiles', `${plan.tilesTotal} total, ${plan.tilesActive} to run, ${plan.tilesSkipped} skipped${onWhat}`);
    if (plan.verify) row('Self-check', plannedCheckText(plan.verify));
    if (plan.b0Align?.assumesZ) row('B0', plan.b0Align.summary);
  },

  /** Where the network's receptive radius comes from, in words: its .onnx graph, or the registry's source. */
  reachSource(net) {
    if (net.planWeights) return `from the graph of ${net.planWeightsName}`;
    return net.model?.receptiveSource ?? '';
  },

  /** The progress line while running; during the self-check (p.stage 'verify') it says so. */
  progressText(p, pct, eta, plan) {
    if (p.stage === 'verify') {
      const v = plan?.verify;
      const box = v?.possible ? ` the box [${v.lo.join(', ')}] to [${v.hi.join(', ')}]` : '';
      return `self-check:${box} runs whole · ${p.done}/${p.total} (${pct}%) · ETA ${eta}`;
    }
    const next = p.done === p.total && plan?.verify?.possible ? ' · the self-check follows' : '';
    return `${p.done}/${p.total} tiles (${pct}%) · ${p.tilesPerSecond.toFixed(2)} tiles/s · ETA ${eta} · ${p.inFlight} in flight${next}`;
  },

  /** The progress line once the network is loaded, before the first tile. */
  startText(plan) {
    return `0/${plan.tilesActive} tiles · starting ${plan.tilesInFlight} worker(s)…`;
  },

  /** The progress line at the end. */
  doneText(report, wall) {
    return `${report.tilesRun}/${report.tilesRun} tiles (100%) · ${wall}`;
  },

  /** The run report's workflow rows (row(key, value)). */
  reportRows(r, result, row, perCall) {
    if (perCall) row('Per tile', perCall);
    row('Tiles', `${r.tilesTotal} total, ${r.tilesRun} run, ${r.tilesSkipped} skipped; patch ${r.patchEdge}³, ${fmtBytes(r.bytesPerTile)} each`);
  },

  /** The caption of the input's panel in the results. */
  fieldCaption() {
    return 'Local field (ppm)';
  },
};
