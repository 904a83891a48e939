// The keys of a request for the API (index.js), the driver (runtime/requests.js) and the CLI (cli/), read from the
// request surface generated from the C++ schema (request-surface.js: `node scripts/request-surface.js`); nothing here
// lists an option.
import { OPTION_KINDS, REQUEST_KEYS, METHOD_NAMES, PHASE_NETWORKS } from './request-surface.js';

export { OTHER_KEYS, OPTION_KINDS, REQUEST_KEYS, METHOD_NAMES, PHASE_NETWORKS } from './request-surface.js';

/** The schema options (by first segment: tile.core → tile) that a network run takes; they go to the C++ planner as given. */
export const NETWORK_OPTIONS = Object.freeze(Object.keys(OPTION_KINDS).filter((t) => OPTION_KINDS[t].includes('network')));

/**
 * The schema options (by first segment) that only a pipeline takes: its stages (unwrapping, the echo fit, the brain
 * mask, background removal) and its optional outputs (also: SWI, R2*).
 */
export const PIPELINE_OPTIONS = Object.freeze(
  Object.keys(OPTION_KINDS).filter((t) => OPTION_KINDS[t].includes('pipeline') && !OPTION_KINDS[t].includes('network') && !OPTION_KINDS[t].includes('method')),
);

/** The keys of a network request (invert() and plan() of a network). */
export const NETWORK_KEYS = REQUEST_KEYS.network;

/** The keys of a classical method's request (invert() and plan() with method). */
export const METHOD_KEYS = REQUEST_KEYS.method;

/** The keys of a pipeline request (pipeline(), and plan() with pipeline: true). */
export const PIPELINE_KEYS = REQUEST_KEYS.pipeline;

/** The schema's classical method names (its `method` option's choices). schema: what tessera.schema() returns. */
export function methodNamesOf(schema) {
  return schema.find((o) => o.name === 'method').choices;
}

/** The phase networks' ids as a list in words: "iqsm, iqfm or iqsm-plus" (conjunction 'or'), "iqsm, iqfm, iqsm-plus" (''). */
export function phaseNetworkWords(conjunction = '') {
  const ids = [...PHASE_NETWORKS];
  if (!conjunction || ids.length < 2) return ids.join(', ');
  return `${ids.slice(0, -1).join(', ')} ${conjunction} ${ids.at(-1)}`;
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
