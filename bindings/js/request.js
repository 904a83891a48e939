// The keys of a request, listed once for the API (index.js), the driver (driver-worker.js) and the CLI (cli/):
// which options of the C++ request schema (tessera.schema()) each kind of request takes, and the keys that are no
// schema option. schema-agreement.test.js checks these lists against the schema, the CLI's flags and index.d.ts.

/**
 * Schema options of a network run (field → χ networks and phase networks), by the first segment of their names
 * (tile.core → tile, spec.divisor → spec); they go to the C++ planner as given.
 */
export const NETWORK_OPTIONS = Object.freeze([
  'tile', 'quality', 'whole', 'crop', 'cropMargin', 'workers', 'threadsPerWorker', 'spec', 'te', 'b0', 'erodeRadius',
  'phaseSign', 'b0Align',
]);

/** Schema options of the pipeline's stages (unwrapping, the echo fit, the brain mask, background removal) and its optional outputs (also: SWI, R2*). */
export const PIPELINE_OPTIONS = Object.freeze([
  'unwrap', 'fitResidualLimit', 'fitOffset', 'fitOffsetSigma', 'background', 'vsharp', 'pdf', 'lbv', 'ismv', 'sharp', 'resharp', 'brainMask',
  'also', 'swi', 'r2star',
]);

/**
 * The keys that are no schema option, each with what it holds: the volumes, the network's identity and weights, a
 * plan handed back, run controls and measurements (the schema holds the options C++ checks by range or choice).
 */
export const OTHER_KEYS = Object.freeze({
  field: 'the local field (ppm), a Float32Array or a Volume',
  fieldUnits: "the field's units: 'ppm' states it is ppm (a local field beyond ±1 ppm, a total-field network's beyond ±5 ppm, is otherwise refused as Hz or rad/s)",
  verifyWeights: "false: run a registry network's weights whose bytes differ from the registry's (your own export): the run warns and its report records their sha256",
  phase: 'wrapped phase (rad), every echo, a Float32Array or a Volume',
  totalField: "pipeline(): a total field map (a vendor B0 map), one 3D Float32Array or Volume, instead of phase and te",
  totalFieldUnits: "pipeline(): the units of totalField, 'hz' | 'rad/s' | 'ppm'",
  phaseDifference: 'pipeline(): a phase difference of two echoes (a Siemens field map), one 3D wrapped phase (rad), instead of phase and te',
  deltaTE: 'pipeline(): TE2 − TE1 of phaseDifference, seconds',
  magnitude: 'magnitude, the size of the field or the phase, or a Volume',
  mask: 'the mask (nonzero = inside), or a Volume',
  geometry: '{dims, voxelMm, b0Dir} when no Volume carries it',
  model: 'a registry network id (tessera.registry())',
  weights: 'ONNX bytes (an array for a network with several files)',
  plan: 'the object plan() returned for this request: the run obeys it',
  inputNames: '{role: ONNX input name} where a multi-input export names its inputs otherwise',
  context: 'how far the network looks: receptiveField()\'s probe, or {radius}',
  verify: 'run the self-check (a box run whole, compared with the tiled result)',
  executionProviders: 'this run\'s ONNX Runtime execution providers, first first',
  speed: 'this machine\'s measured speed of the network (measureSpeed()\'s result)',
  measureSpeed: 'measure the speed first (needs weights)',
  network: 'pipeline(): further invert() options of the network that inverts the local field',
  pipeline: 'plan(): true to plan a pipeline() request',
  keepInputs: "true: a run copies its input volumes to the runtime and they stay the caller's; by default they are transferred (the caller's arrays are left empty)",
  signal: 'an AbortSignal that cancels the call',
  onProgress: 'called with the run\'s progress',
});

/** Keys every call takes whatever the request. */
const CALL_KEYS = ['signal', 'onProgress'];

/** The keys of a network request (invert() and plan() of a network). */
export const NETWORK_KEYS = Object.freeze([
  ...NETWORK_OPTIONS, 'field', 'fieldUnits', 'phase', 'magnitude', 'mask', 'geometry', 'model', 'weights', 'verifyWeights', 'plan', 'inputNames', 'context', 'verify',
  'executionProviders', 'speed', 'measureSpeed', 'keepInputs', ...CALL_KEYS,
]);

/**
 * The keys of a classical method's request (invert() and plan() with method).
 * methodNames: the schema's method choices (each method's parameters are an object under its name).
 */
export function methodKeys(methodNames) {
  return ['method', ...methodNames, 'field', 'fieldUnits', 'mask', 'magnitude', 'geometry', 'plan', 'keepInputs', ...CALL_KEYS];
}

/**
 * The keys of a pipeline request (pipeline(), and plan() with pipeline: true).
 * methodNames: the schema's method choices.
 */
export function pipelineKeys(methodNames) {
  return ['te', 'b0', ...PIPELINE_OPTIONS, 'method', ...methodNames, 'spec', 'phase', 'totalField', 'totalFieldUnits', 'phaseDifference', 'deltaTE', 'magnitude', 'mask', 'geometry', 'model', 'weights', 'network', 'plan', 'pipeline', 'keepInputs', ...CALL_KEYS];
}

/** The schema's classical method names (its `method` option's choices). schema: what tessera.schema() returns. */
export function methodNamesOf(schema) {
  return schema.find((o) => o.name === 'method').choices;
}

/**
 * The request's keys that `known` lacks, as a refusal's words, or '' when there are none.
 * what: the call ("invert", "plan", "pipeline"), named in the message with the known keys.
 */
export function unknownKeysMessage(request, known, what) {
  const unknown = Object.keys(request).filter((k) => !known.includes(k));
  if (!unknown.length) return '';
  return `${what}: unknown option(s) ${unknown.join(', ')} (known: ${known.join(', ')})`;
}
