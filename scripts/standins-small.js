// Every stand-in network (scripts/standins*.js), built small: the real exports' operators and kernel ranks with the
// fewest channels, for the checks where channel counts do not matter (the WebGPU rewrite, the execution-provider
// table, bench/same-chi.js).
import { STANDINS } from './standins.js';
import { IR2QSM_STANDINS } from './standins-ir2qsm.js';
import { LOOP_STANDINS } from './standins-loops.js';

/** Every stand-in by id: {build(options), divisor, ...} (standins.js, standins-ir2qsm.js, standins-loops.js). */
export const ALL_STANDINS = { ...STANDINS, ...IR2QSM_STANDINS, ...LOOP_STANDINS };

/** The small build's options, by stand-in id. */
export const SMALL_OPTIONS = {
  xqsm: { base: 4 },
  qsmnet: { base: 2 },
  iqsm: { base: 2 },
  'iqsm-plus': { base: 2 },
  ir2qsm: { base: 2 },
  lpcnn: { channels: 2, blocks: 1 },
  'modl-qsm': { channels: 2, blocks: 1 },
  'nextqsm-bf': { base: 2, maxFilters: 8 },
  'nextqsm-vjp': { base: 2, maxFilters: 8 },
};

/** The ONNX bytes of stand-in id, built small. */
export const smallStandin = (id) => ALL_STANDINS[id].build(SMALL_OPTIONS[id] ?? {});
