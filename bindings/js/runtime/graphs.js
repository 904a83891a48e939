// The ONNX graph of a network's weights, read here in the driver worker once per weights sha256 and kept: how far the
// network looks (receptive-field.js: the planner's context), how much it computes per voxel (graph-cost.js: the
// planner's time estimate for a speed not measured here) and its operators (execution-provider.js: which execution
// provider runs it). The caller's thread reads no graph: plan(), invert(), pipeline() and receptiveField() post the
// weights (plan() their sha256 alone once the runtime has read them) and every planning step that needs the graph
// asks this module.
import { TesseraError } from '../errors.js';
import { sha256Hex } from '../model-loader.js';
import { readOnnxGraph } from '../onnx-graph.js';
import { graphReceptiveField } from '../receptive-field.js';
import { graphCost } from '../graph-cost.js';
import { graphOperators, prepareModel } from '../execution-provider.js';

/** Networks whose graph facts are kept at once (a new one drops the oldest). */
export const KEPT_GRAPHS = 16;

const kept = new Map(); // sha256 → facts, oldest first
let rewritten = null; // {key, prepared}: the last rewrite of a graph the pools loaded (one network's bytes at most)
const shas = new WeakMap(); // bytes → Promise<sha256>: one hash per buffer this worker holds

/** The weights' bytes as a Uint8Array over the same memory. Precondition: w is a Uint8Array, a view or an ArrayBuffer. */
export function weightsBytes(w) {
  return w instanceof Uint8Array ? w : new Uint8Array(w.buffer ?? w, w.byteOffset ?? 0, w.byteLength);
}

/** The first weights file of a request (NeXtQSM takes two) as a Uint8Array, or undefined when none is given. */
export function firstWeights(weights) {
  const w = Array.isArray(weights) ? weights[0] : weights;
  return w && w.byteLength > 0 ? weightsBytes(w) : undefined;
}

/** The lower-case hex sha256 of weights bytes, hashed once per buffer. Precondition: bytes is a Uint8Array. */
export function weightsSha(bytes) {
  let sha = shas.get(bytes);
  if (!sha) {
    sha = sha256Hex(bytes);
    shas.set(bytes, sha);
    sha.catch(() => shas.delete(bytes));
  }
  return sha;
}

/** Each fact of a graph, or the reason it cannot be given: {value} or {error}. */
function fact(f, graph) {
  try {
    return { value: f(graph) };
  } catch (e) {
    return { error: e?.message ?? String(e) };
  }
}

/**
 * What the graph of these weights says, read once per sha256: {receptiveField: graphReceptiveField's result or
 * {error}, cost: graphCost's or {error}, ops: graphOperators' or {error}} (each {value} when read). A file that is no
 * ONNX model gives the reader's error for each.
 * Precondition: sha is weightsSha(bytes).
 */
export function graphOf(sha, bytes) {
  let facts = kept.get(sha);
  if (facts) {
    kept.delete(sha); // the most recent last
    kept.set(sha, facts);
    return facts;
  }
  let graph = null;
  let unreadable = null;
  try {
    graph = readOnnxGraph(bytes);
  } catch (e) {
    unreadable = { error: e?.message ?? String(e) };
  }
  facts = unreadable
    ? { receptiveField: unreadable, cost: unreadable, ops: unreadable }
    : { receptiveField: fact(graphReceptiveField, graph), cost: fact(graphCost, graph), ops: fact(graphOperators, graph) };
  kept.set(sha, facts);
  for (const oldest of kept.keys()) {
    if (kept.size <= KEPT_GRAPHS) break;
    kept.delete(oldest);
  }
  return facts;
}

/** The kept facts of the weights with this sha256 (graphOf's), or undefined when they are not kept. */
export function keptGraph(sha) {
  return kept.get(sha);
}

/**
 * The refusal of a request that named its weights by sha256 alone (plan() posts no bytes the runtime has already
 * read) when what it needs of them is no longer kept here: the caller posts the request again with the bytes.
 * what: what was not kept, for the message.
 */
export function weightsNeeded(what) {
  return new TesseraError(`${what} of these weights is not kept by the runtime: post the request with the weights' bytes`, 'WeightsNeeded');
}

/** graphOf of the weights bytes, hashed here first. Precondition: bytes is a Uint8Array of ONNX bytes. */
export async function graphOfBytes(bytes) {
  return graphOf(await weightsSha(bytes), bytes);
}

/**
 * How far the network looks for the planner, from its graph: {radius} (at least 1); undefined when the graph is
 * global or cannot be followed (the planner then uses the registry's radius or assumes one, and says so).
 * Precondition: facts is graphOf's.
 */
export function graphContext(facts) {
  const rf = facts.receptiveField.value;
  return !rf || rf.global ? undefined : { radius: Math.max(1, rf.radiusMax) };
}

/** The multiply-accumulates per voxel from the graph (C++ kSecondsPerMac), undefined when unknown or 0. */
export function graphMacs(facts) {
  return facts.cost.value?.macsPerVoxel || undefined;
}

/**
 * The model a pool's workers load and the provider they run on (execution-provider.js prepareModel) for these weights,
 * the operators taken from the kept graph; a rewritten graph (for WebGPU, or on wasm the operators wasmRewriteOps
 * names) is kept for the next pool of the same weights and choice (the last one only: it is a copy of the network).
 * Precondition: bytes is a Uint8Array of ONNX bytes; preference, platform and wasmRewriteOps as prepareModel takes them.
 */
export async function preparedModel(bytes, { preference, platform, wasmRewriteOps }) {
  const sha = await weightsSha(bytes);
  const key = JSON.stringify([sha, preference, platform, wasmRewriteOps ?? []]);
  if (rewritten?.key === key) return rewritten.prepared;
  const ops = preference.some((p) => p !== 'wasm') ? graphOf(sha, bytes).ops.value ?? null : undefined;
  const prepared = prepareModel({ model: bytes, preference, platform, wasmRewriteOps, ops });
  if (prepared.bytes !== bytes) rewritten = { key, prepared }; // the model's own bytes are the request's: not kept
  return prepared;
}
