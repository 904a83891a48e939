#!/usr/bin/env node
// tessera-qsm: the command line. Reads a NIfTI field map (or, for the phase networks iQSM / iQFM / iQSM+,
// a wrapped phase, 3D or 4D with the echoes along the 4th dim) and a mask, runs a deep-learning QSM network
// through the Tessera runtime (C++ planner/tiler in wasm + ONNX Runtime worker pools) and writes χ (iQFM:
// the local field) as NIfTI with the input's 3D header; `plan` prints the memory budget of a run, `models`
// the registry.
//
// Exit codes: 0 success; 1 error (runtime, input files, weights); 2 usage error, or a run the
// memory planner refuses; 130 cancelled by Ctrl-C (SIGINT), 143 by SIGTERM.
import { parseArgs } from 'node:util';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const { createTessera, loadModel, sha256Hex, writeNifti } = await import('./index.js');
const { loadInputs, checkEchoTimes, InputError } = await import('./inputs.js');
const { phrasePhaseRefusal, isPhaseUnitsRefusal, PhaseRefusal } = await import('./phase-units.js');

const EXIT_OK = 0;
const EXIT_ERROR = 1;
const EXIT_USAGE = 2;

/** An error the user can fix: printed as "error: message", never with a stack. exit: the exit code. */
class CliError extends Error {
  constructor(message, exit = EXIT_ERROR, code = 'InvalidArgument') {
    super(message);
    this.code = code;
    this.exit = exit;
  }
}
const usageError = (message) => new CliError(message, EXIT_USAGE, 'Usage');

// ---------------------------------------------------------------------------------------------------
// Help

// The two forms of \`invert\`, shown in the main help and in \`invert --help\`.
const INVERT_USAGE = `  tessera-qsm invert --field f.nii[.gz] --mask m.nii[.gz] (--model ID [--weights FILE|URL ...] | --spec net.json --weights FILE)
                     [--core N --halo N --workers N --threads N | --whole] [--cores N] [--b0 T --units hz|ppm|rad/s]
                     --out chi.nii[.gz] [--report r.json] [--quiet]
  tessera-qsm invert --field f.nii[.gz] --mask m.nii[.gz] --method NAME [--param NAME=VALUE ...] [--magnitude mag.nii[.gz]]
                     [--cores N] [--b0 T --units hz|ppm|rad/s] --out chi.nii[.gz] [--report r.json] [--quiet]
  tessera-qsm invert --phase p.nii[.gz] --te S[,S...] --mask m.nii[.gz] --model iqsm|iqfm|iqsm-plus [--weights FILE|URL]
                     [--b0 T] [--magnitude mag.nii[.gz]] [--erode N] [--phase-sign +1|-1]
                     [--phase-units rad|deg|scanner | --phase-scale S] [--input-name ROLE=NAME ...]
                     --out chi.nii[.gz] [--report r.json] [--quiet]
`;

const HELP = {
  main: `tessera-qsm: memory-bounded, overlap-tiled deep-learning QSM inversion

Usage:
${INVERT_USAGE}  tessera-qsm plan   (--field f.nii[.gz] | --phase p.nii[.gz] [--te S[,S...]]) [--mask m.nii[.gz]] (--model ID | --spec net.json)
                     [--core N --halo N --workers N | --whole] [--cores N] [--json]
  tessera-qsm models [--json]
  tessera-qsm methods [--json]
  tessera-qsm pipeline --phase p.nii[.gz] --te S,S,... [--magnitude mag.nii[.gz]] [--mask m.nii[.gz]] [--b0 T]
                       (--method NAME [--param N=V ...] | --model ID [--weights FILE|URL]) [--option N=V ...]
                       --out chi.nii[.gz] [--keep-intermediates DIR] [--report r.json] [--cores N] [--quiet]
  tessera-qsm receptive-field (--model ID | --spec net.json) [--weights FILE|URL] [--probe] [--json]
  tessera-qsm calibrate --weights FILE|URL [--spec net.json | --model ID] [--threads N] [--json]
  tessera-qsm <command> --help     tessera-qsm --version

Exit codes: 0 success, 1 error (runtime, input files, weights), 2 usage error or a run the memory
planner refuses, 130 cancelled (Ctrl-C).
`,
  invert: `tessera-qsm invert: invert a local field map (or a wrapped phase) to susceptibility (χ, ppm)

Usage:
${INVERT_USAGE}
Input (one of --field or --phase)
  --field FILE       field map (NIfTI-1/2, .nii or .nii.gz); dims, voxel size and B0 direction come from its header
  --units U          field units: ppm (default), hz or rad/s; hz and rad/s need --b0
  --phase FILE       wrapped phase in rad for the phase networks (iqsm, iqfm, iqsm-plus): 3D, or 4D with the
                     echoes along the 4th dim; dims, voxel size and B0 direction come from its header
  --mask FILE        mask with the input's dims (nonzero = inside)
  --b0 T             main field strength in tesla (for --units hz|rad/s; with --phase default 3)
Phase networks (with --phase)
  --te S[,S...]      echo time(s) in seconds, one per echo (20 ms = 0.02); required
  --magnitude FILE   magnitude with the phase's dims and echoes: echoes are combined with (magnitude·TE)² weights
  --erode N          erode the mask by a sphere of N voxels before the network (default 3, the reference's)
  --phase-sign S     +1 or -1 (default -1: the reference negates the scanner's phase)
  --phase-units U    rad (default), deg, or scanner: integers whose stored range (e.g. Siemens -4096..4095)
                     spans 2π (the span rounded up to a power of two; any offset is re-wrapped)
  --phase-scale S    radians per stored unit (after the header's scl_slope/scl_inter), e.g. 0.000767 = π/4096
                     After the conversion the phase must lie in [-π, π] (a phase in [0, 2π] is re-wrapped to
                     (-π, π]); anything else, or integers stored without scl_slope, is refused with a hint
  --input-name R=N   the network's ONNX input name N for the role R (phase, mask, te, b0, b0_dir, border) when
                     the export's names are not recognised; repeat for several roles
Classical method (instead of a network)
  --method NAME      a dipole inversion in the C++ core, no weights (\`tessera-qsm methods\` lists them with their
                     parameters, units, defaults and ranges)
  --param N=V        a parameter of the method (repeatable), e.g. --param threshold=0.15; the rest keep their defaults
  --magnitude FILE   with --field: the magnitude (MEDI's edge prior)
  --cores N          threads of its loops and FFTs (default: the machine's)
Network (one of)
  --model ID         a registry network (see \`tessera-qsm models\`); --weights defaults to its official URL(s),
                     NeXtQSM takes two; byte size and sha256 are checked against the registry
  --spec FILE        a network not in the registry: JSON object with any of divisor (1), bytesPerVoxel, fixedBytes,
                     inputMean (0), inputStd (1), outputMean (0), outputStd (1); network input =
                     (field - inputMean) / inputStd, χ = outputStd · output + outputMean; needs --weights FILE.
                     Without bytesPerVoxel the network's memory cost is calibrated first (a few seconds; see
                     \`tessera-qsm calibrate --help\`)
  --weights SRC      ONNX file or URL (repeat for a model with several networks)
  --b0-align A       networks that assume B0 along the volume's third axis (field → χ): auto (default) resamples
                     the field to a grid rotated so that the header's B0 lies along it, runs the network there
                     and resamples χ back, when B0 is more than 12° off the third axis; on: at any tilt; off:
                     never; a warning above 2.5° (bench/b0-tilt.js measured where each loses less)
Tiling (field networks; the phase networks always run on the whole volume)
  --quality Q        the auto-planner's target against the whole-volume run: faithful (default: r ≥ 0.99,
                     NRMSE ≤ 0.10), balanced (r ≥ 0.97, NRMSE ≤ 0.20) or fast (speed only); it picks the fastest
                     core, halo, stride and blend predicted to meet it, or the whole volume when that fits and is
                     no slower, and warns when nothing within the memory budget does
  --core N --halo N  tile core and halo edge in voxels (default: the auto-planner chooses core, halo, stride,
                     workers and threads; a halo given alone is kept)
  --workers N        most networks running at once (the planner lowers it to fit the memory budget)
  --threads N        ONNX Runtime threads per worker (default 1)
  --cores N          cores the auto-planner may use for workers × threads (default: the cores this process may run
                     on); the same --cores gives the same plan on any machine
  --whole            run the whole volume at once (no tiling, no crop: the reference)
  --crop C           auto (default): an automatic plan may run only the mask's bounding box + 4 voxels, on the
                     network's pooling grid, as one patch (the field of view around it holds only zeros of the
                     input; bench/RESULTS.md §16 measures the difference); off: always the whole field of view
  --crop-margin N    voxels of context kept around the mask's bounding box before the grid rounding (default 4;
                     fewer run fewer voxels at a measured fidelity cost, bench/RESULTS.md §23)
  --verify           self-check: the largest box that runs whole, centred on the mask, is run whole and
                     compared with the tiled χ inside it (r, NRMSE, max |Δ| in the log and the report), plus the
                     data-consistency residual ‖M(D∗χ − f)‖/‖M f‖ of the result
  --probe            measure how far the network looks (two runs of a phantom patch) and plan with that
                     instead of the reach its ONNX graph allows
  --measure-speed    time a few patches of the network on this machine first and estimate the run's time with
                     that speed instead of the registry's or the default (needs the weights)
Output
  --out FILE         χ in ppm (iqfm: the local field in ppm) as float32 NIfTI with the input's 3D header and
                     affine (.gz: gzipped)
  --report FILE      run report as JSON (tiles, timings, memory, plan, command line, versions)
  --quiet            no progress on stderr

Progress goes to stderr: a bar on a terminal, one line per 10% otherwise. Ctrl-C cancels the run
(exit 130) without writing any output.
`,
  plan: `tessera-qsm plan: the memory budget of a run, from the C++ planner

Usage:
  tessera-qsm plan (--field f.nii[.gz] | --phase p.nii[.gz] [--te S[,S...]] [--erode N] [--b0 T])
                   [--mask m.nii[.gz]] (--model ID | --spec net.json) [--core N --halo N --workers N | --whole] [--cores N] [--json]

Prints the patch edge, MB per tile, tiles in flight, tiles total/active/skipped (skipped: no mask voxel
in the core), activation and peak memory against the runtime's limits, the predicted fidelity against the
whole-volume run and the network's reach, the memory cost and where it came from, or the planner's refusal and advice
(exit code 2). --weights FILE lets the planner read the network's reach from its graph (--probe: measure it) and
calibrates a --spec that declares no bytesPerVoxel (without --weights its cost is marked assumed). --json prints the plan object instead of the table. With --phase (iqsm, iqfm,
iqsm-plus) the echo count comes from the file (one network call per echo); --te is optional here.
Options as for \`tessera-qsm invert --help\`.
`,
  pipeline: `tessera-qsm pipeline: from a multi-echo scan's wrapped phase to susceptibility (χ, ppm)

Usage:
  tessera-qsm pipeline --phase p.nii[.gz] --te S,S,... [--magnitude mag.nii[.gz]] [--mask m.nii[.gz]] [--b0 T]
                       (--method NAME [--param N=V ...] | --model ID [--weights FILE|URL]) [--option N=V ...]
                       --out chi.nii[.gz] [--keep-intermediates DIR] [--report r.json] [--cores N] [--quiet]

Stages, in the C++ core: a brain mask from the first echo's magnitude (when --mask is not given), the echo fit
(each echo unwrapped, the receive-phase offset removed, a weighted line over TE: the total field in Hz and ppm),
background field removal, and the inversion of the local field by a classical method or a registry network.
  --phase FILE       wrapped phase, 4D with the echoes along the 4th dim (rad; --phase-units / --phase-scale as for
                     invert)
  --te S,S,...       echo times in seconds, one per echo (20 ms = 0.02)
  --magnitude FILE   magnitude with the phase's dims and echoes (the fit's weights; the mask is made from it)
  --mask FILE        brain mask (nonzero = inside); without it, one is made from the magnitude
  --b0 T             field strength in tesla (default 3)
  --method NAME      a classical inversion (\`tessera-qsm methods\`) with --param N=V, or
  --model ID         a registry network (with --weights as for invert)
  --option N=V       a pipeline option of the schema (repeatable), e.g. --option background=pdf or
                     --option vsharp.maxRadius=12: unwrap, background, fitResidualLimit, vsharp.*, pdf.*,
                     brainMask.* (their defaults, units and ranges: tessera.schema(); wrong ones are refused by name)
  --keep-intermediates DIR   also write mask, total field (Hz, ppm), fit residual and mask, receive-phase offset,
                     each echo's unwrapped phase, local field and local mask there (NIfTI, the input's header)
  --cores N          threads of the C++ stages (default: the machine's)
`,
  methods: `tessera-qsm methods: the classical dipole inversions Tessera runs without a network

Usage:
  tessera-qsm methods [--json]

Lists every method (invert --method NAME) with its parameters (--param NAME=VALUE): default, range and
unit, and what each does, as the C++ core's request schema defines them. --json prints the same as JSON.
`,
  models: `tessera-qsm models: the networks Tessera knows

Usage:
  tessera-qsm models [--json]

Lists id, kind, inputs (field, or the phase networks' input roles), divisor, reach (the theoretical
receptive radius in voxels), memory per worker (fixed part + bytes per patch voxel, provisional or
measured), weights and licence.
--json prints the full registry entries (URLs, sha256, citation, normalisation, inputs).
`,
  'receptive-field': `tessera-qsm receptive-field: how far a network looks

Usage:
  tessera-qsm receptive-field (--model ID | --spec net.json) [--weights FILE|URL] [--probe] [--json]

Prints the theoretical receptive radius per axis, derived from the ONNX graph (convolutions, poolings,
transposed convolutions, resizes; global operations and operations it cannot follow are named). --probe
also measures it: the network runs twice on a phantom field patch with the centre voxel raised and lowered,
and the response is summed by distance (the radius holding 90 % and 99 % of it, and the profile).
--weights defaults to the registry's official file(s) for --model; --spec needs --weights FILE.
--json prints {graph, probe} (the probe's within[] is the profile plan and invert take as context).
`,
  calibrate: `tessera-qsm calibrate: measure a network's memory cost in ONNX Runtime Web

Usage:
  tessera-qsm calibrate --weights FILE|URL [--spec net.json | --model ID] [--threads N] [--json]

For a few small patch edges (multiples of the network's divisor from 16³; more while the heap does not grow),
a fresh ONNX Runtime worker creates its session and runs one patch; its wasm heap is read after the session
and after the patch. The C++ core fits heap = fixed + bytes per voxel · edge³ and makes it safe: the steepest
slope the growth-stepped heaps allow, +20 % (a heap commits up to 20 % more than it holds), with every measured
heap under the line. Prints the points, the fit and the figures to declare in a --spec ("fixedBytes",
"bytesPerVoxel"); a --spec without bytesPerVoxel is calibrated this way by plan and invert. --spec or --model
give the divisor (default 1); --threads the ONNX Runtime threads (default 1, as invert's).
--json prints {fixedBytes, bytesPerVoxel, points, seconds, fit}.
`,
};

// ---------------------------------------------------------------------------------------------------
// Arguments

const RUN_OPTIONS = {
  field: { type: 'string' },
  phase: { type: 'string' },
  te: { type: 'string' },
  b0: { type: 'string' },
  erode: { type: 'string' },
  mask: { type: 'string' },
  model: { type: 'string' },
  spec: { type: 'string' },
  core: { type: 'string' },
  halo: { type: 'string' },
  workers: { type: 'string' },
  cores: { type: 'string' },
  whole: { type: 'boolean' },
  quality: { type: 'string' },
  verify: { type: 'boolean' },
  probe: { type: 'boolean' },
  'b0-align': { type: 'string' },
  crop: { type: 'string' },
  'crop-margin': { type: 'string' },
  'measure-speed': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
};
const OPTIONS = {
  invert: {
    ...RUN_OPTIONS,
    weights: { type: 'string', multiple: true },
    threads: { type: 'string' },
    units: { type: 'string' },
    magnitude: { type: 'string' },
    method: { type: 'string' },
    param: { type: 'string', multiple: true },
    'phase-sign': { type: 'string' },
    'phase-units': { type: 'string' },
    'phase-scale': { type: 'string' },
    'input-name': { type: 'string', multiple: true },
    out: { type: 'string', short: 'o' },
    report: { type: 'string' },
    quiet: { type: 'boolean', short: 'q' },
  },
  plan: { ...RUN_OPTIONS, weights: { type: 'string', multiple: true }, json: { type: 'boolean' } },
  models: { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
  methods: { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
  pipeline: {
    phase: { type: 'string' },
    magnitude: { type: 'string' },
    mask: { type: 'string' },
    te: { type: 'string' },
    b0: { type: 'string' },
    method: { type: 'string' },
    param: { type: 'string', multiple: true },
    model: { type: 'string' },
    weights: { type: 'string', multiple: true },
    option: { type: 'string', multiple: true },
    'phase-units': { type: 'string' },
    'phase-scale': { type: 'string' },
    out: { type: 'string', short: 'o' },
    'keep-intermediates': { type: 'string' },
    report: { type: 'string' },
    cores: { type: 'string' },
    quiet: { type: 'boolean', short: 'q' },
    help: { type: 'boolean', short: 'h' },
  },
  calibrate: {
    model: { type: 'string' },
    spec: { type: 'string' },
    weights: { type: 'string', multiple: true },
    threads: { type: 'string' },
    json: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  },
  'receptive-field': {
    model: { type: 'string' },
    spec: { type: 'string' },
    weights: { type: 'string', multiple: true },
    probe: { type: 'boolean' },
    json: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  },
};
/** The auto-planner's fidelity targets (tessera.schema() 'quality'). */
const QUALITIES = ['faithful', 'balanced', 'fast'];
/** b0Align: resample to a B0-aligned grid above the threshold, at any tilt, never (tessera.schema() 'b0Align'). */
const B0_ALIGN = ['auto', 'on', 'off'];
/** crop: an automatic plan may run only the mask's bounding box (auto) or always the whole field of view (off). */
const CROPS = ['auto', 'off'];
/** Flags that only make sense with --phase (the phase networks). */
const PHASE_ONLY = ['te', 'magnitude', 'erode', 'phase-sign', 'phase-units', 'phase-scale'];

/** `--flag -1` → `--flag=-1`: parseArgs refuses a value that starts with a dash as ambiguous. */
function joinNegativeValues(command, args) {
  const out = [];
  for (let i = 0; i < args.length; i++) {
    const m = /^--([\w-]+)$/.exec(args[i]);
    if (m && OPTIONS[command][m[1]]?.type === 'string' && i + 1 < args.length && /^-(\d|\.\d)/.test(args[i + 1])) {
      out.push(`${args[i]}=${args[++i]}`);
    } else out.push(args[i]);
  }
  return out;
}

function parse(command, args) {
  try {
    return parseArgs({ args: joinNegativeValues(command, args), options: OPTIONS[command], strict: true, allowPositionals: false }).values;
  } catch (e) {
    if (!String(e.code).startsWith('ERR_PARSE_ARGS')) throw e;
    const hint = `see \`tessera-qsm ${command} --help\``;
    if (e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
      const m = /option '([^']+)'/i.exec(e.message);
      throw usageError(`unknown option ${m ? m[1] : ''} for \`tessera-qsm ${command}\`; ${hint}`);
    }
    if (e.code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
      const m = /argument '([^']*)'/i.exec(e.message);
      throw usageError(`unexpected argument ${m ? `'${m[1]}'` : ''} (every value belongs to a --flag); ${hint}`);
    }
    throw usageError(`${e.message.replace(/\.$/, '')}; ${hint}`);
  }
}

function wholeNumber(v, flag, min) {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v.trim()) || Number(v) < min) throw usageError(`--${flag} must be a whole number >= ${min}, got '${v}'`);
  return Number(v);
}

function positiveNumber(v, flag) {
  if (v === undefined) return undefined;
  const x = Number(v);
  if (v.trim() === '' || !Number.isFinite(x) || x <= 0) throw usageError(`--${flag} must be a number > 0, got '${v}'`);
  return x;
}

/** --te 0.01,0.02: echo times in seconds, each > 0 and at most 1 s (inputs.js checkEchoTimes: a larger value is milliseconds). */
function echoTimes(v) {
  if (v === undefined) return undefined;
  const parts = v.split(',').map((p) => p.trim());
  const te = parts.map((p) => (p === '' ? NaN : Number(p)));
  try {
    return checkEchoTimes(te);
  } catch (e) {
    if (e.code === 'TeInvalid') throw usageError(`--te takes echo times in seconds > 0, comma-separated (e.g. 0.01,0.02); '${parts[e.index]}' is not one`);
    if (e.code === 'TeMilliseconds') {
      throw usageError(`--te ${v}: ${e.values.join(', ')} s is implausible for an echo time; give TE in seconds, not milliseconds (20 ms = 0.02: --te ${e.seconds.join(',')})`);
    }
    throw e;
  }
}

/** --input-name role=name (repeatable) → {role: name}. */
function inputNames(list) {
  if (!list?.length) return undefined;
  const out = {};
  for (const item of list) {
    const m = /^\s*([^=\s]+)\s*=\s*(\S.*?)\s*$/.exec(item);
    if (!m) throw usageError(`--input-name takes ROLE=NAME (e.g. --input-name phase=wphs), got '${item}'`);
    if (m[1] in out) throw usageError(`--input-name gives the role '${m[1]}' twice`);
    out[m[1]] = m[2];
  }
  return out;
}

const niftiName = (p) => /\.nii(\.gz)?$/i.test(p);

/** Checks the flags shared by invert and plan; returns the run options. */
function runOptions(command, o) {
  const see = `see \`tessera-qsm ${command} --help\``;
  if (o.field === undefined && o.phase === undefined) {
    throw usageError(`--field (a local field map) or --phase (wrapped phase, for iqsm, iqfm, iqsm-plus) is required; ${see}`);
  }
  if (o.field !== undefined && o.phase !== undefined) {
    throw usageError(`--field and --phase exclude each other: field networks take a local field map, the phase networks (iqsm, iqfm, iqsm-plus) a wrapped phase; ${see}`);
  }
  if ((o.model === undefined) === (o.spec === undefined)) {
    throw usageError(`give exactly one of --model ID or --spec net.json; ${see}`);
  }
  const core = wholeNumber(o.core, 'core', 1);
  const halo = wholeNumber(o.halo, 'halo', 0);
  const workers = wholeNumber(o.workers, 'workers', 1);
  const cores = wholeNumber(o.cores, 'cores', 1);
  if (o.whole && (core !== undefined || halo !== undefined)) throw usageError('--whole runs the volume at once: it takes no --core or --halo');
  const b0 = positiveNumber(o.b0, 'b0');
  let phase;
  if (o.phase !== undefined) {
    if (o.spec !== undefined) {
      throw usageError('--phase needs a phase network (--model iqsm, iqfm or iqsm-plus); --spec describes a field-to-χ network, which takes --field');
    }
    if (o.units !== undefined) throw usageError('--units is for --field; the phase is in radians (see --phase-units and --phase-scale)');
    if (core !== undefined || halo !== undefined) {
      throw usageError('the phase networks (iqsm, iqfm, iqsm-plus) run on the whole volume (they cannot be tiled): they take no --core or --halo');
    }
    const te = echoTimes(o.te);
    if (te === undefined && command === 'invert') {
      throw usageError('--phase needs --te: the echo time in seconds, one per echo (e.g. --te 0.02, or --te 0.01,0.02 for two echoes)');
    }
    const signText = o['phase-sign'];
    if (signText !== undefined && !/^\s*[+-]?1(\.0*)?\s*$/.test(signText)) throw usageError(`--phase-sign must be +1 or -1, got '${signText}'`);
    const units = o['phase-units']?.toLowerCase();
    if (units !== undefined && !['rad', 'deg', 'scanner'].includes(units)) throw usageError(`--phase-units must be rad, deg or scanner, got '${o['phase-units']}'`);
    let scale;
    if (o['phase-scale'] !== undefined) {
      if (units !== undefined) throw usageError('give --phase-units or --phase-scale, not both');
      scale = Number(o['phase-scale']);
      if (o['phase-scale'].trim() === '' || !Number.isFinite(scale) || scale === 0) {
        throw usageError(`--phase-scale must be a nonzero number (radians per stored unit, e.g. 0.000767 = π/4096), got '${o['phase-scale']}'`);
      }
    }
    phase = {
      te,
      b0,
      erodeRadius: wholeNumber(o.erode, 'erode', 0),
      phaseSign: signText === undefined ? undefined : Number(signText),
      units,
      scale,
    };
  } else {
    const given = PHASE_ONLY.filter((k) => o[k] !== undefined);
    if (given.length) {
      throw usageError(`${given.map((k) => `--${k}`).join(', ')} ${given.length > 1 ? 'are' : 'is'} for --phase (the phase networks iqsm, iqfm, iqsm-plus), not --field`);
    }
  }
  // Without --core the C++ auto-planner chooses the core (and, unless given, the halo, stride, workers and threads).
  const tile = o.whole || phase ? undefined : core !== undefined ? { core, ...(halo !== undefined && { halo }) } : halo !== undefined ? { core: 'auto', halo } : 'auto';
  const quality = o.quality?.toLowerCase();
  if (quality !== undefined && !QUALITIES.includes(quality)) throw usageError(`--quality must be ${QUALITIES.join(', ')}, got '${o.quality}'`);
  if (quality !== undefined && (core !== undefined || o.whole || phase)) {
    throw usageError('--quality steers the auto-planner: it takes no --core, --whole or --phase (those fix the run)');
  }
  if ((o.verify || o.probe || o['measure-speed']) && phase) {
    throw usageError('--verify, --probe and --measure-speed are for the field networks (the phase networks run on the whole volume)');
  }
  const b0Align = o['b0-align']?.toLowerCase();
  if (b0Align !== undefined && !B0_ALIGN.includes(b0Align)) throw usageError(`--b0-align must be ${B0_ALIGN.join(', ')}, got '${o['b0-align']}'`);
  if (b0Align !== undefined && phase) throw usageError('--b0-align is for the field networks (iQSM+ takes the B0 direction itself; iQSM and iQFM warn)');
  const crop = o.crop?.toLowerCase();
  if (crop !== undefined && !CROPS.includes(crop)) throw usageError(`--crop must be ${CROPS.join(', ')}, got '${o.crop}'`);
  if (crop !== undefined && (phase || o.whole || core !== undefined)) throw usageError('--crop steers the auto-planner of the field networks: it takes no --whole, --core or --phase');
  const cropMargin = wholeNumber(o['crop-margin'], 'crop-margin', 0);
  if (cropMargin !== undefined && (phase || o.whole || core !== undefined || crop === 'off')) {
    throw usageError('--crop-margin sizes the auto-planner\'s crop to the mask: it takes no --whole, --core, --phase or --crop off');
  }
  return { tile, whole: !!o.whole, workers, cores, b0, phase, quality, verify: !!o.verify, b0Align, crop, cropMargin, inputNames: inputNames(o['input-name']) };
}

// ---------------------------------------------------------------------------------------------------
// Files

/** A file's bytes as a plain Uint8Array: readNifti misreads node Buffers (Buffer#slice is a view, not a copy). */
async function readBytes(file, what, signal) {
  try {
    const b = await fs.promises.readFile(file, { signal });
    return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new CliError(`could not read the ${what} ${file}: ${e.code === 'ENOENT' ? 'no such file' : e.message}`, EXIT_ERROR, 'ReadFailed');
  }
}

/** Reads a --spec file: a JSON object (its keys and values are checked against the request schema by checkSpec). */
async function readSpec(file, signal) {
  const text = new TextDecoder().decode(await readBytes(file, 'network spec', signal));
  let spec;
  try {
    spec = JSON.parse(text);
  } catch (e) {
    throw new CliError(`the network spec ${file} is not valid JSON: ${e.message}`, EXIT_ERROR, 'InvalidSpec');
  }
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) {
    throw new CliError(`the network spec ${file} must be a JSON object such as {"divisor": 8, "bytesPerVoxel": 1100}`, EXIT_ERROR, 'InvalidSpec');
  }
  return spec;
}

/**
 * A --spec against the request schema (C++, tessera.schema()): known keys only, finite numbers, the schema's
 * defaults filled in. schema is what tessera.schema() returned.
 */
function checkSpec(spec, schema, file) {
  if (spec === undefined) return undefined;
  const options = schema.filter((x) => x.name.startsWith('spec.'));
  const known = options.map((x) => x.name.slice(5));
  for (const [k, v] of Object.entries(spec)) {
    if (!known.includes(k)) {
      throw new CliError(`the network spec ${file} has an unknown key '${k}' (allowed: ${known.join(', ')})`, EXIT_ERROR, 'InvalidSpec');
    }
    if (typeof v !== 'number' || !Number.isFinite(v)) {
      throw new CliError(`the network spec ${file}: '${k}' must be a finite number, got ${JSON.stringify(v)}`, EXIT_ERROR, 'InvalidSpec');
    }
  }
  // Only numeric defaults are filled in: an option whose default is a rule ("derived from the ONNX graph") stays absent.
  const defaults = options.filter((x) => typeof x.default === 'number').map((x) => [x.name.slice(5), x.default]);
  return { ...Object.fromEntries(defaults), ...spec };
}

/** Fails early (before a long run) when a file cannot be created in its directory. */
function checkWritable(file, flag) {
  const dir = path.dirname(path.resolve(file));
  try {
    fs.accessSync(dir, fs.constants.W_OK);
  } catch (e) {
    const why = { ENOENT: 'does not exist', EROFS: 'is on a read-only file system', EACCES: 'is not writable (permission denied)' }[e.code] ?? `is not writable (${e.code})`;
    throw new CliError(`cannot write --${flag} ${file}: the directory ${dir} ${why}`, EXIT_ERROR, 'WriteFailed');
  }
}

// Output files are written next to their target as `.<name>.<pid>.partial` and renamed into place, so a
// target is either absent, its old version, or complete. The temp files of this process are tracked: a hard
// exit (a second Ctrl-C) removes them; one left by a killed process (SIGKILL, power loss) is removed by the
// next run that writes the same target (removeStalePartials), once its process is gone.
const partials = new Set();
const partialName = (file) => path.join(path.dirname(path.resolve(file)), `.${path.basename(file)}.${process.pid}.partial`);

/** Whether the process pid is alive (EPERM: alive, another user's). */
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
}

/** Removes `.<name>.<pid>.partial` files of this target left by processes that no longer run. */
function removeStalePartials(file) {
  const dir = path.dirname(path.resolve(file));
  const prefix = `.${path.basename(file)}.`;
  let names = [];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith(prefix) || !name.endsWith('.partial')) continue;
    const pid = name.slice(prefix.length, -'.partial'.length);
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid || alive(Number(pid))) continue;
    fs.rmSync(path.join(dir, name), { force: true });
  }
}

/** Removes this process's temp files at once (before a hard exit). */
function removeOwnPartials() {
  for (const tmp of partials) fs.rmSync(tmp, { force: true });
  partials.clear();
}

/**
 * Writes several outputs all or nothing: every temp file first, then the renames, the first entry (the main
 * output) last, after removing its old version, so a main output on disk always comes with the files named
 * before it in this call (never an old χ beside a new report, nor the reverse).
 * A cancel (signal) that arrives before the renames removes the temp files and throws the AbortError: a cancelled run
 * writes nothing.
 * @param {{file: string, bytes: Uint8Array|string}[]} outputs main output first
 * @param {AbortSignal} [signal]
 */
async function writeAtomic(outputs, signal) {
  const tmps = outputs.map(({ file }) => partialName(file));
  let current = outputs[0].file;
  try {
    for (let i = 0; i < outputs.length; i++) {
      current = outputs[i].file;
      partials.add(tmps[i]);
      await fs.promises.writeFile(tmps[i], outputs[i].bytes);
    }
    signal?.throwIfAborted();
    if (outputs.length > 1) await fs.promises.rm(outputs[0].file, { force: true });
    for (let i = outputs.length - 1; i >= 0; i--) {
      current = outputs[i].file;
      await fs.promises.rename(tmps[i], outputs[i].file);
      partials.delete(tmps[i]);
    }
  } catch (e) {
    for (const tmp of tmps) {
      await fs.promises.rm(tmp, { force: true }).catch(() => {});
      partials.delete(tmp);
    }
    if (e?.name === 'AbortError') throw e;
    const fix = { ENOSPC: 'free space there or write elsewhere', EDQUOT: 'free space there or write elsewhere', EROFS: 'write elsewhere', EACCES: 'write elsewhere', EPERM: 'write elsewhere' }[e?.code];
    throw new CliError(`could not write ${current}: ${e.message}${fix ? ` (${fix})` : ''}`, EXIT_ERROR, 'WriteFailed');
  }
}

const fmt = (v) => String(+v.toPrecision(6));

/** How phrasePhaseRefusal names the command line's options in its refusals. */
const PHASE_WORDS = {
  verb: 'give',
  names: { rad: '--phase-units rad', deg: '--phase-units deg', scanner: '--phase-units scanner', scale: '--phase-scale', field: '--field with a field-to-χ network' },
};

/** The file given for an input role. */
const fileOf = (o, role) => ({ field: o.field, phase: o.phase, mask: o.mask, magnitude: o.magnitude })[role];

/**
 * An input refusal (inputs.js InputError, phase-units.js PhaseRefusal) in the command line's words, as a CliError:
 * phase units and TE are usage errors (exit 2), the files' contents errors (exit 1).
 */
function cliError(e, o) {
  if (e instanceof PhaseRefusal) {
    const message = phrasePhaseRefusal(e, { subject: `the phase ${o.phase}`, ...PHASE_WORDS });
    return new CliError(message, isPhaseUnitsRefusal(e) ? EXIT_USAGE : EXIT_ERROR, 'InvalidArgument');
  }
  if (!(e instanceof InputError)) return e;
  const x = (d) => d.join('×');
  const echoes = (n) => `${n} echo(es)`;
  switch (e.code) {
    case 'NotNifti':
      return new CliError(`the ${e.role} ${fileOf(o, e.role)} is not a NIfTI volume Tessera reads: ${e.reason}`, EXIT_ERROR, 'InvalidNifti');
    case 'DimsMismatch':
    case 'EchoesMismatch': {
      const [file, input] = [fileOf(o, e.role), fileOf(o, e.inputRole)];
      const message =
        e.role === 'magnitude'
          ? `the magnitude ${file} is ${x(e.dims)} with ${echoes(e.echoes)} but the phase ${input} is ${x(e.inputDims)} with ${e.inputEchoes}: magnitude and phase must have the same dims and echoes`
          : `the ${e.role} ${file} has dims ${x(e.dims)} but the ${e.inputRole} ${input} has ${x(e.inputDims)}: ${e.inputRole} and ${e.role} must have the same dims`;
      return new CliError(message, EXIT_ERROR, 'InvalidArgument');
    }
    case 'TeCount':
      return usageError(
        `--te gives ${e.given} echo time(s) but the phase ${o.phase} holds ${echoes(e.echoes)} ` +
          `(${e.echoes > 1 ? `4D, ${e.echoes} volumes along the 4th dim` : '3D'}): give one TE per echo, in seconds`,
      );
    case 'NeedB0':
      return usageError(`--units ${e.units} needs --b0 (the field strength in tesla) to convert to ppm`);
    case 'NeedMask':
      return usageError('--mask is required; see `tessera-qsm invert --help`');
    case 'NonFiniteInput':
      return new CliError(`the ${e.role} ${fileOf(o, e.role)} holds ${e.count} NaN or infinite value${e.count > 1 ? 's' : ''} inside the mask: fix the file or the mask`, EXIT_ERROR, 'NonFiniteInput');
    default:
      return new CliError(e.message, EXIT_USAGE, 'InvalidArgument');
  }
}

/**
 * The input and mask from the command line through the shared input loader (inputs.js loadInputs): geometry from
 * the input's (3D) header; with `convert`, a field in ppm, or a phase (all echoes) in radians with its magnitude.
 */
async function readInputs(o, { needMask, units, b0, phase: phaseOpts, convert = false }, signal) {
  const files = {};
  for (const role of ['field', 'phase', 'magnitude', 'mask']) {
    if (fileOf(o, role) !== undefined) files[role] = await readBytes(fileOf(o, role), role, signal);
  }
  let r;
  try {
    r = await loadInputs(files, {
      units, b0, te: phaseOpts?.te, phaseUnits: phaseOpts?.units, phaseScale: phaseOpts?.scale, maskFrom: 'file', needMask, convert,
    });
  } catch (e) {
    throw cliError(e, o);
  }
  signal.throwIfAborted();
  if (r.phaseInfo?.units === 'scanner') r.phaseInfo.notes[0] += ' (--phase-scale to override)';
  return {
    like: r.input, // the 3D image whose header and affine the output keeps
    field: r.field?.data,
    phase: r.phase?.data,
    magnitude: r.magnitude?.data,
    echoes: r.echoes,
    phaseInfo: r.phaseInfo,
    geometry: r.geometry,
    mask: r.mask?.data,
  };
}

// ---------------------------------------------------------------------------------------------------
// Output helpers

const GB = (b) => `${(b / 1e9).toFixed(2)} GB`;
/** Bytes in GB from 1 GB up, else in MB. */
const size = (b) => (b >= 1e9 ? GB(b) : `${(b / 1e6).toFixed(1)} MB`);
const MB = (b) => `${(b / 1e6).toFixed(1)} MB`;
const pct = (a, b) => `${Math.round((100 * a) / b)}%`;

function duration(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return '?';
  if (s < 60) return `${Math.round(s)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(Math.round(s - 60 * m)).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, '0')}m`;
}

function table(rows) {
  const w = Math.max(...rows.map((r) => r[0].length));
  return rows.map(([k, v]) => `  ${k.padEnd(w)}  ${v}`).join('\n');
}

/** Progress on stderr: a redrawn bar on a terminal, one line per 10% otherwise, nothing when quiet. */
class Progress {
  constructor({ quiet, stream = process.stderr }) {
    this.quiet = quiet;
    this.stream = stream;
    this.tty = !!stream.isTTY;
    this.open = false; // a bar line is on screen without its newline
    this.lastDraw = 0;
    this.lastDecile = 0;
  }
  /** A message line (closing any bar first). */
  line(text) {
    if (this.quiet) return;
    this.close();
    this.stream.write(`${text}\n`);
  }
  close() {
    if (this.open) this.stream.write('\n');
    this.open = false;
  }
  bar(fraction, text) {
    const width = 24;
    const n = Math.max(0, Math.min(width, Math.round(fraction * width)));
    this.stream.write(`\r\x1b[K[${'#'.repeat(n)}${'.'.repeat(width - n)}] ${text}`);
    this.open = true;
  }
  /** Tile progress from invert's onProgress: {done, total, tilesPerSecond, etaSeconds}. */
  tiles(p, unit = 'tiles') {
    if (this.quiet || !(p.total > 0)) return;
    const rate = p.tilesPerSecond > 0 ? `${p.tilesPerSecond.toFixed(p.tilesPerSecond < 10 ? 2 : 1)} ${unit}/s` : `- ${unit}/s`;
    const eta = p.done >= p.total ? `done in ${duration(p.elapsedSeconds)}` : `ETA ${duration(p.etaSeconds)}`;
    const text = `${p.stage ? `${p.stage}: ` : ''}${p.done}/${p.total} ${unit}  ${rate}  ${eta}`;
    if (this.tty) {
      const now = Date.now();
      if (p.done < p.total && now - this.lastDraw < 100) return;
      this.lastDraw = now;
      this.bar(p.done / p.total, text);
      if (p.done >= p.total) this.close();
      return;
    }
    const decile = Math.floor((10 * p.done) / p.total);
    if (decile > this.lastDecile) {
      this.lastDecile = decile;
      this.stream.write(`progress ${String(decile * 10).padStart(3)}%  ${text}\n`);
    }
  }
  /** Weights download/read progress: {loaded, total, file}. */
  bytes(p) {
    if (this.quiet || !this.tty) return;
    const now = Date.now();
    const finished = p.total !== undefined && p.loaded >= p.total;
    if (!finished && now - this.lastDraw < 100) return;
    this.lastDraw = now;
    this.bar(p.total ? p.loaded / p.total : 0, `${p.file}  ${MB(p.loaded)}${p.total ? ` / ${MB(p.total)}` : ''}`);
    if (finished) this.close();
  }
}

function versions() {
  const out = { node: process.versions.node, v8: process.versions.v8 };
  try {
    const pkg = JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    out.tessera = pkg.version;
  } catch {
    out.tessera = null;
  }
  try {
    let dir = path.dirname(fileURLToPath(import.meta.resolve('onnxruntime-web')));
    for (; dir !== path.dirname(dir); dir = path.dirname(dir)) {
      const f = path.join(dir, 'package.json');
      if (fs.existsSync(f)) {
        const pkg = JSON.parse(fs.readFileSync(f, 'utf8'));
        if (pkg.name === 'onnxruntime-web') {
          out.onnxruntimeWeb = pkg.version;
          break;
        }
      }
    }
  } catch {
    /* not resolvable: leave it out */
  }
  return out;
}

/** The network of a run, for messages: registry entry or the spec with its defaults filled in. */
function describeNetwork(o, entry, spec) {
  if (entry) {
    const fixed = entry.fixedBytes ? `${MB(entry.fixedBytes)} + ` : '';
    return `${entry.id} (${entry.kind}, divisor ${entry.divisor}, ${fixed}${entry.bytesPerVoxel} B/voxel${entry.costProvisional ? ' provisional' : ' measured'})`;
  }
  return `spec ${o.spec} (divisor ${spec.divisor})`;
}

/** The memory cost a plan used and where it came from (plan.cost). */
function costText(c) {
  if (!c) return '?';
  const line = `${c.fixedBytes ? `${size(c.fixedBytes)} + ` : ''}${c.bytesPerVoxel} B/voxel per worker`;
  if (c.source === 'calibrated') {
    const edges = c.points.map((p) => p.edge);
    return `${line}, calibrated (${edges.length} patches ${edges[0]}–${edges.at(-1)}³ measured in ${c.seconds.toFixed(1)} s)`;
  }
  if (c.source === 'declared') return `${line}, declared in the spec`;
  if (c.source === 'assumed') return `${line}, ASSUMED: the spec declares no bytesPerVoxel; give --weights net.onnx to calibrate it`;
  return `${line}, the registry's (${c.provisional ? 'provisional' : 'measured'})`;
}

/** "r 0.995, NRMSE 0.061 against the whole-volume run (predicted)". */
function fidelityText(plan) {
  const f = plan.predictedFidelity;
  if (plan.wholeVolume && plan.crop) return 'the whole-volume answer up to the network\'s response to the zeros left out around the mask\'s box (--crop off runs the whole volume)';
  if (plan.wholeVolume) return 'exact (the whole volume runs at once)';
  return `r ${f.r.toFixed(3)}, NRMSE ${f.nrmse.toFixed(3)} against the whole-volume run`;
}

/** How far the network looks, and how Tessera knows. */
function reachText(c) {
  if (c.assumed) return `unknown: assumed ${c.radius} voxels (give --weights, or spec receptiveRadius, or --probe)`;
  if (c.measured) return `measured by probe: 90 % within ${c.radius90} voxels, 99 % within ${c.radius99}`;
  return `receptive radius ${c.radius} voxels (theoretical; 99 % of a dipole-like reach within ${c.radius99})`;
}

const boxText = (v) => `${v.lo.map((l, i) => `${l}-${v.hi[i]}`).join(' × ')}`;
/** "2 slabs along y, halo 20": a crop box run as slabs (plan.crop.split). */
const splitText = (s) => `${s.pieces} slabs along ${'xyz'[s.axis]}, halo ${s.halo}`;
const isSplit = (plan) => !plan.wholeVolume && plan.crop?.split?.pieces > 1;

/** Whose speed the time estimate used (plan.estimateSource), or '' when there is no estimate. */
function speedText(plan) {
  const from = { measured: 'this machine\'s measured speed (--measure-speed)', registry: 'the registry\'s speed for this network, measured on another machine: --measure-speed times this one', default: 'the default speed (not this network\'s: --measure-speed measures it)' };
  return plan.estimatedSeconds > 0 && from[plan.estimateSource] ? ` (time from ${from[plan.estimateSource]})` : '';
}

function planTable(plan, limits, { o, run, entry, spec, geometry, maskVoxels, echoes }) {
  const mode = plan.wholeVolume
    ? plan.crop
      ? `the mask's bounding box as one patch (${boxText(plan.crop)}), chosen by the auto-planner: ${plan.explanation}${speedText(plan)}`
      : 'whole volume'
    : isSplit(plan)
      ? `the mask's bounding box (${boxText(plan.crop)}) in ${splitText(plan.crop.split)}, chosen by the auto-planner: ${plan.explanation}${speedText(plan)}`
      : plan.explanation
      ? `tiled, chosen by the auto-planner: ${plan.explanation}${speedText(plan)}`
      : `tiled (core ${plan.tile?.core ?? run.tile?.core}, halo ${plan.tile?.halo ?? run.tile?.halo})`;
  const rows = [
    ['volume', `${geometry.dims.join('×')} voxels, ${geometry.voxelMm.map((v) => +v.toFixed(3)).join('×')} mm${maskVoxels !== undefined ? `, ${maskVoxels} voxels in the mask` : ''}`],
    ['network', describeNetwork(o, entry, spec)],
    ['memory cost', costText(plan.cost)],
    ...(o.phase !== undefined ? [['input', `wrapped phase, ${echoes} echo${echoes > 1 ? 'es' : ''} (one network call each)`]] : []),
    ['mode', mode],
    ['patch edge', plan.patchDims ? `${plan.patchEdge} (${plan.patchDims.join('×')})` : String(plan.patchEdge)],
    ['MB per tile', `${MB(plan.bytesPerTile)} of activations (single-patch limit ${GB(limits.maxPatchActivationBytes)}, ${pct(plan.bytesPerTile, limits.maxPatchActivationBytes)})`],
  ];
  if (plan.feasible) {
    rows.push(
      ['tiles in flight', String(plan.tilesInFlight)],
      ['tiles', `${plan.tilesTotal} total, ${plan.tilesActive} active, ${plan.tilesSkipped} skipped`],
      ['activation memory', `${size(plan.activationBytes)} of the ${GB(limits.tileActivationBudget)} budget for tiles in flight (${pct(plan.activationBytes, limits.tileActivationBudget)})`],
      ['peak memory', `${size(plan.peakBytes)} estimated (${size(plan.moduleHeapBytes)} wasm heap) of the ${GB(limits.heapCeilingBytes)} heap ceiling (${pct(plan.peakBytes, limits.heapCeilingBytes)})`],
    );
    if (plan.networks > 1) rows.push(['networks', String(plan.networks)]);
    if (plan.predictedFidelity) rows.push(['predicted fidelity', fidelityText(plan)]);
    if (plan.context) rows.push(['network reach', reachText(plan.context)]);
    if (plan.verify) rows.push(['self-check', plan.verify.possible ? `box ${boxText(plan.verify)}, compared ${plan.verify.margin} voxels away from its inner faces` : plan.verify.message]);
    if (plan.b0Align?.assumesZ) rows.push(['B0', plan.b0Align.summary]);
    if (plan.fidelityWarning) rows.push(['warning', plan.fidelityWarning]);
    if (plan.warning) rows.push(['warning', plan.warning]);
  }
  const head = plan.feasible ? 'plan: feasible' : 'plan: REFUSED';
  return `${head}\n${table(rows)}${plan.feasible ? '' : `\nrefused: ${plan.message}`}\n`;
}

// ---------------------------------------------------------------------------------------------------
// Commands

/** `tessera-qsm methods`: the classical methods and their parameters, from the C++ schema. */
async function cmdMethods(o, ctx) {
  const tessera = await ctx.start({});
  const schema = await tessera.schema();
  const names = schema.find((x) => x.name === 'method').choices;
  const list = names.map((m) => ({ method: m, params: schema.filter((x) => x.name.startsWith(`${m}.`)).map((x) => ({ ...x, name: x.name.slice(m.length + 1) })) }));
  if (o.json) {
    ctx.out(`${JSON.stringify(list, null, 2)}\n`);
    return EXIT_OK;
  }
  const range = (x) => (x.choices.length ? x.choices.join('|') : `${x.minExclusive ? '(' : '['}${x.min}, ${x.max}]${x.unit ? ` ${x.unit}` : ''}`);
  const lines = [];
  for (const { method, params } of list) {
    lines.push(`${method}`);
    for (const x of params) lines.push(`  --param ${`${x.name}=${x.default}`.padEnd(28)} ${range(x).padEnd(22)} ${x.help}`);
  }
  ctx.out(`${lines.join('\n')}\n`);
  return EXIT_OK;
}

async function cmdModels(o, ctx) {
  const tessera = await ctx.start({});
  const models = await tessera.registry();
  if (o.json) {
    ctx.out(`${JSON.stringify(models, null, 2)}\n`);
    return EXIT_OK;
  }
  const rows = [['id', 'kind', 'inputs', 'divisor', 'reach', 'memory per worker', 'weights', 'licence']];
  for (const m of models) {
    rows.push([
      m.id,
      m.kind,
      m.inputs.join(','),
      String(m.divisor),
      m.receptiveRadius ? `±${m.receptiveRadius}` : '-',
      `${m.fixedBytes ? `${MB(m.fixedBytes)} + ` : ''}${m.bytesPerVoxel} B/voxel ${m.costProvisional ? '(provisional)' : '(measured)'}`,
      m.weights.map((w) => (w.bytes ? `${w.file} ${MB(w.bytes)}` : w.file)).join(' + '),
      m.licence,
    ]);
  }
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  ctx.out(`${rows.map((r) => r.map((v, c) => (c === r.length - 1 ? v : v.padEnd(widths[c]))).join('  ')).join('\n')}\n`);
  return EXIT_OK;
}

/**
 * The input flag matches the network: --phase for the phase networks (registry inputs name 'phase'),
 * --field for the rest. Returns whether the network is a phase network.
 */
async function checkInputKind(o, entry, run, tessera) {
  const phaseNet = !!entry?.inputs?.includes('phase');
  if (o.phase !== undefined && !phaseNet) {
    const ids = (await tessera.registry()).filter((m) => m.inputs?.includes('phase')).map((m) => m.id);
    throw usageError(`--phase is the input of the phase networks (${ids.join(', ')}); ${entry.id} (${entry.kind}) inverts a local field map: give --field`);
  }
  if (o.field !== undefined && phaseNet) {
    throw usageError(`${entry.name} (${entry.id}) reconstructs from the wrapped phase: give --phase p.nii --te S[,S...] instead of --field`);
  }
  if (phaseNet && run.inputNames) {
    const unknown = Object.keys(run.inputNames).filter((r) => !entry.inputs.includes(r));
    if (unknown.length) throw usageError(`--input-name: ${entry.name} has no input role ${unknown.map((r) => `'${r}'`).join(', ')} (roles: ${entry.inputs.join(', ')})`);
  }
  return phaseNet;
}

/** Drops the keys whose value is undefined. */
const defined = (obj) => Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined));

/**
 * The network's weights: a registry network's from --weights or its official URL(s) (size and sha256 checked), a
 * --spec network's from its one --weights. Returns {weights, weightsInfo}.
 */
async function loadNetworkWeights(o, entry, tessera, ctx) {
  const { signal, progress } = ctx;
  const weightSources = o.weights ?? [];
  const onBytes = (p) => progress.bytes(p);
  if (entry) {
    const sources = weightSources.length ? weightSources : undefined;
    (sources ?? entry.weights.map((w) => w.url)).forEach((src, i) => progress.line(`weights ${entry.weights[i].file}: ${src}`));
    const weights = await tessera.loadWeights(entry.id, { sources, signal, onProgress: onBytes });
    signal.throwIfAborted();
    const weightsInfo = entry.weights.map((w, i) => ({ source: sources?.[i] ?? w.url, file: w.file, bytes: weights[i].byteLength, sha256: w.sha256 || null, verified: !!w.sha256 }));
    return { weights, weightsInfo };
  }
  if (weightSources.length !== 1) throw usageError(`--spec needs exactly one --weights FILE (the ONNX network), got ${weightSources.length}`);
  const bytes = await loadModel(weightSources[0], { signal, onProgress: (p) => onBytes({ ...p, file: path.basename(weightSources[0]) }) });
  signal.throwIfAborted();
  return { weights: bytes, weightsInfo: [{ source: weightSources[0], bytes: bytes.byteLength, sha256: await sha256Hex(bytes), verified: false }] };
}

/** --probe: the network's measured context (two runs of a phantom patch), logged; the plan takes it. */
async function probeContext(o, entry, spec, weights, tessera, ctx) {
  if (entry && !entry.tileable) throw usageError(`--probe measures a field network's reach; ${entry.id} is ${entry.kind}`);
  ctx.progress.line('probe: running the network twice on a phantom patch to measure how far it looks');
  const rf = await tessera.receptiveField({ weights, model: entry?.id, spec, probe: true, signal: ctx.signal });
  ctx.progress.line(`probe: ${rf.probe.edge}³ patch, ${rf.probe.seconds.toFixed(1)} s: 90 % of the response within ${rf.probe.radius90} voxels, 99 % within ${rf.probe.radius99} (graph: ±${rf.graph.radiusMax})`);
  return rf.probe;
}

/** The self-check's result in one line. */
function verifyText(v) {
  if (!v.possible) return v.exact ? 'exact (the whole volume ran at once)' : `not made: ${v.message}`;
  const p = v.predicted ? ` (predicted r ${v.predicted.r.toFixed(3)}, NRMSE ${v.predicted.nrmse.toFixed(3)})` : '';
  return `r ${v.r.toFixed(4)}, NRMSE ${v.nrmse.toFixed(3)}, max |Δ| ${v.maxAbs.toFixed(4)} ppm against the whole-volume run of box ${boxText(v.box)} ` +
    `over ${v.voxels} mask voxels${p}; data consistency ‖M(D∗χ − f)‖/‖M f‖ = ${v.dataConsistency.toFixed(3)} (${duration(v.seconds)})`;
}

/** A spec read from a file that declares no bytesPerVoxel: its cost is calibrated before planning. */
function uncosted(rawSpec) {
  return rawSpec !== undefined && rawSpec.bytesPerVoxel === undefined;
}

/** Calibrates a spec network (tessera.calibrate, remembered for these weights: plan and invert use it), logged. */
async function calibrateSpec(tessera, weights, spec, ctx) {
  ctx.progress.line('calibrate: the spec declares no bytesPerVoxel: measuring the network\'s memory in ONNX Runtime workers');
  const c = await tessera.calibrate({ weights, spec });
  ctx.signal.throwIfAborted();
  ctx.progress.line(`calibrate: ${size(c.fixedBytes)} + ${c.bytesPerVoxel} B/voxel per worker (${c.points.length} patches ${c.points.map((p) => p.edge).join(', ')}³, ${c.seconds.toFixed(1)} s)`);
  return c;
}

async function cmdCalibrate(o, ctx) {
  const see = 'see `tessera-qsm calibrate --help`';
  if (o.model !== undefined && o.spec !== undefined) throw usageError(`give at most one of --model ID or --spec net.json; ${see}`);
  if (!o.weights?.length) throw usageError(`calibrate needs --weights FILE|URL (the ONNX network); ${see}`);
  const threads = wholeNumber(o.threads, 'threads', 1);
  const rawSpec = o.spec !== undefined ? await readSpec(o.spec, ctx.signal) : undefined;
  const tessera = await ctx.start({ workers: 1, threadsPerWorker: threads });
  const spec = checkSpec(rawSpec, await tessera.schema(), o.spec);
  const entry = o.model !== undefined ? await tessera.model(o.model) : undefined;
  const { weights } = await loadNetworkWeights(o, entry, tessera, ctx);
  const c = await tessera.calibrate({
    weights, spec, model: entry?.id, threadsPerWorker: threads, signal: ctx.signal,
    onProgress: (p) => ctx.progress.line(`calibrate: patch ${p.edge}³: heap ${size(p.heapBytes)}`),
  });
  if (o.json) {
    ctx.out(`${JSON.stringify(c, null, 2)}\n`);
    return EXIT_OK;
  }
  const f = c.fit;
  const rows = c.points.map((p) => [`patch ${p.edge}³`, `heap ${size(p.heapBytes)} (after session ${size(p.afterSessionBytes)}), ${p.seconds.toFixed(2)} s`]);
  rows.push(
    ['fit', f.slopeMeasured ? `${size(f.fittedFixedBytes)} + ${f.fittedBytesPerVoxel.toFixed(1)} B/voxel (least squares, r² ${f.r2.toFixed(4)})` : 'no slope: the heap did not grow with the patch'],
    ['cost', `${size(c.fixedBytes)} + ${c.bytesPerVoxel} B/voxel per worker (${c.threads} thread${c.threads > 1 ? 's' : ''}; every measured heap under it)`],
    ['how', f.note],
    ['declare', `"fixedBytes": ${c.fixedBytes}, "bytesPerVoxel": ${c.bytesPerVoxel}   (in a --spec file; or leave them out and plan/invert calibrate)`],
    ['time', `${c.seconds.toFixed(1)} s`],
  );
  ctx.out(`${table(rows)}\n`);
  return EXIT_OK;
}

async function cmdReceptiveField(o, ctx) {
  if ((o.model === undefined) === (o.spec === undefined)) throw usageError('give exactly one of --model ID or --spec net.json; see `tessera-qsm receptive-field --help`');
  const rawSpec = o.spec !== undefined ? await readSpec(o.spec, ctx.signal) : undefined;
  const tessera = await ctx.start({ workers: 1 });
  const spec = checkSpec(rawSpec, await tessera.schema(), o.spec);
  const entry = o.model !== undefined ? await tessera.model(o.model) : undefined;
  const { weights } = await loadNetworkWeights(o, entry, tessera, ctx);
  const first = Array.isArray(weights) ? weights[0] : weights;
  const rf = o.probe
    ? await tessera.receptiveField({ weights: first, model: entry?.id, spec, probe: true, signal: ctx.signal })
    : await tessera.receptiveField({ weights: first, model: entry?.id, spec });
  if (o.json) {
    ctx.out(`${JSON.stringify(rf, null, 2)}\n`);
    return EXIT_OK;
  }
  const g = rf.graph;
  const rows = [
    ['graph', g.global ? 'global: an operation mixes the whole extent (no finite radius)' : `receptive radius ${g.radius.join(' × ')} voxels (below ${g.below.join(', ')}; above ${g.above.join(', ')})`],
    ['operations', Object.entries(g.ops).map(([k, v]) => `${k} ${v}`).join(', ')],
  ];
  if (g.unknownOps.length) rows.push(['not followed', `${g.unknownOps.join(', ')}: the radius may be larger`]);
  if (rf.probe) {
    const p = rf.probe;
    rows.push(['probe', `${p.edge}³ phantom patch, ±${p.epsilon} ppm at the centre, ${p.seconds.toFixed(1)} s`]);
    rows.push(['measured', `90 % of the response within ${p.radius90} voxels, 99 % within ${p.radius99}`]);
  }
  ctx.out(`${table(rows)}\n`);
  return EXIT_OK;
}

async function cmdPlan(o, ctx) {
  const run = runOptions('plan', o);
  const { signal } = ctx;
  const rawSpec = o.spec !== undefined ? await readSpec(o.spec, signal) : undefined;
  const { geometry, mask, echoes } = await readInputs(o, { needMask: false, phase: run.phase }, signal);
  const tessera = await ctx.start({ workers: run.workers, hardwareThreads: run.cores });
  const spec = checkSpec(rawSpec, await tessera.schema(), o.spec);
  const entry = o.model !== undefined ? await tessera.model(o.model) : undefined;
  const phaseNet = await checkInputKind(o, entry, run, tessera);
  const limits = await tessera.limits();
  // The echo times do not change the plan, only their number: without --te, one placeholder per echo.
  const phase = phaseNet ? { te: run.phase.te ?? new Array(echoes).fill(0.02), b0: run.b0, erodeRadius: run.phase.erodeRadius } : {};
  // With --weights (or --probe) the planner knows the network's reach from its graph (or the probe).
  let weights;
  let context;
  if (o.weights?.length || o.probe || o['measure-speed']) {
    if (o.spec !== undefined && !o.weights?.length) throw usageError('--probe and --measure-speed with --spec need --weights FILE (the ONNX network)');
    ({ weights } = await loadNetworkWeights(o, entry, tessera, ctx));
    if (uncosted(rawSpec)) await calibrateSpec(tessera, weights, spec, ctx);
    if (o.probe) context = await probeContext(o, entry, spec, weights, tessera, ctx);
  }
  const request = { geometry, mask, model: o.model, spec, tile: run.tile, whole: run.whole, workers: run.workers, quality: run.quality, verify: run.verify || undefined, b0Align: run.b0Align, crop: run.crop, cropMargin: run.cropMargin, weights, context, measureSpeed: o['measure-speed'] || undefined, ...phase };
  const plan = await tessera.plan(defined(request));
  if (o.json) ctx.out(`${JSON.stringify(plan, null, 2)}\n`);
  else {
    const maskVoxels = mask ? mask.reduce((a, b) => a + b, 0) : undefined;
    ctx.out(planTable(plan, limits, { o, run, entry, spec, geometry, maskVoxels, echoes }));
  }
  return plan.feasible ? EXIT_OK : EXIT_USAGE;
}

/** --param NAME=VALUE (repeatable) → {NAME: number | word}, checked by the C++ schema when the method plans. */
function methodParams(list, flag = '--param') {
  const out = {};
  for (const item of list ?? []) {
    const m = /^\s*([A-Za-z][\w]*)\s*=\s*(\S+)\s*$/.exec(item);
    if (!m) throw usageError(`${flag} takes NAME=VALUE (e.g. ${flag === '--param' ? '--param threshold=0.15' : '--option background=pdf'}), got '${item}'`);
    if (m[1] in out) throw usageError(`${flag} gives ${m[1]} twice`);
    out[m[1]] = Number.isFinite(Number(m[2])) ? Number(m[2]) : m[2];
  }
  return out;
}

/** Flags of the network runs that a classical method does not take. */
const NETWORK_ONLY = ['model', 'spec', 'weights', 'core', 'halo', 'whole', 'workers', 'threads', 'quality', 'verify', 'probe', 'b0-align', 'crop', 'crop-margin', 'measure-speed', 'phase', 'te', 'erode', 'phase-sign', 'phase-units', 'phase-scale', 'input-name'];

/** `invert --method M`: a classical dipole inversion in the C++ core (no network, no weights). */
async function cmdInvertMethod(o, ctx) {
  const t0 = performance.now();
  const startedAt = new Date().toISOString();
  const see = 'see `tessera-qsm invert --help`';
  const given = NETWORK_ONLY.filter((k) => o[k] !== undefined && o[k] !== false);
  if (given.length) throw usageError(`${given.map((k) => `--${k}`).join(', ')} ${given.length > 1 ? 'are' : 'is'} for the networks; --method ${o.method} takes --param NAME=VALUE; ${see}`);
  if (o.field === undefined) throw usageError(`--method inverts a local field map: give --field (from phase: \`tessera-qsm pipeline\`); ${see}`);
  if (o.mask === undefined) throw usageError(`--mask is required; ${see}`);
  if (o.out === undefined) throw usageError(`--out is required; ${see}`);
  if (!niftiName(o.out)) throw usageError(`--out must end with .nii or .nii.gz, got '${o.out}'`);
  const b0 = positiveNumber(o.b0, 'b0');
  const units = (o.units ?? 'ppm').toLowerCase();
  if (!['ppm', 'hz', 'rad/s'].includes(units)) throw usageError(`--units must be ppm, hz or rad/s, got '${o.units}'`);
  if (units !== 'ppm' && b0 === undefined) throw usageError(`--units ${units} needs --b0 (the field strength in tesla) to convert to ppm`);
  const params = methodParams(o.param);
  const cores = wholeNumber(o.cores, 'cores', 1);
  checkWritable(o.out, 'out');
  if (o.report !== undefined) checkWritable(o.report, 'report');
  removeStalePartials(o.out);
  const { signal, progress } = ctx;
  const { like, field, magnitude, geometry, mask } = await readInputs(o, { needMask: true, units, b0, convert: true }, signal);
  const tessera = await ctx.start({ hardwareThreads: cores });
  const request = defined({ geometry, mask, field, magnitude, method: o.method, [o.method]: Object.keys(params).length ? params : undefined });
  const plan = await tessera.plan(request);
  if (!plan.feasible) throw new CliError(plan.message, EXIT_USAGE, 'BudgetExceeded');
  progress.line(`${plan.title}: whole volume ${geometry.dims.join('×')}, at most ${plan.methodSteps} step${plan.methodSteps > 1 ? 's' : ''}, ${plan.threads} thread${plan.threads > 1 ? 's' : ''}, estimated peak ${size(plan.peakBytes)}`);
  const { chi, report } = await tessera.invert({ ...request, plan, signal, onProgress: (p) => progress.tiles(p, 'steps') });
  progress.close();
  signal.throwIfAborted();
  const bytes = await writeNifti(chi, like, { gzip: /\.gz$/i.test(o.out), description: `chi ppm, tessera-qsm ${o.method}`.slice(0, 79) });
  const outputs = [{ file: o.out, bytes }];
  if (o.report !== undefined) {
    const full = { ...report, plan, command: ['tessera-qsm', ...ctx.args], cwd: process.cwd(), versions: versions(), startedAt, totalWallSeconds: (performance.now() - t0) / 1000, quantity: 'chi', method: o.method, params, inputs: { field: { path: o.field, dims: geometry.dims, voxelMm: geometry.voxelMm, b0Dir: geometry.b0Dir, units }, mask: { path: o.mask } }, output: o.out };
    outputs.push({ file: o.report, bytes: `${JSON.stringify(full, null, 2)}\n` });
  }
  await writeAtomic(outputs, signal);
  progress.line(`wrote ${o.out}: χ (ppm) by ${plan.title} (${report.methodStepsRun ?? plan.methodSteps} steps, ${duration(report.wallSeconds)})`);
  return EXIT_OK;
}

/** --option name=value (repeatable) → the pipeline request's fields ({unwrap: 'pdf', vsharp: {maxRadius: 12}}). */
function pipelineOptions(list) {
  const out = {};
  for (const [name, value] of Object.entries(methodParams(list?.map((x) => x.replace(/^([\w]+)\.([\w]+)=/, '$1__$2=')), '--option'))) {
    const [group, key] = name.split('__');
    if (key === undefined) out[group] = value;
    else (out[group] ??= {})[key] = value;
  }
  return out;
}

/** `tessera-qsm pipeline`: wrapped multi-echo phase → mask → total field → local field → χ, in the C++ core. */
async function cmdPipeline(o, ctx) {
  const t0 = performance.now();
  const startedAt = new Date().toISOString();
  const see = 'see `tessera-qsm pipeline --help`';
  if (o.phase === undefined) throw usageError(`--phase is required (the wrapped phase of every echo); ${see}`);
  const te = echoTimes(o.te);
  if (te === undefined) throw usageError('--te is required: the echo times in seconds, one per echo (e.g. --te 0.004,0.008,0.012)');
  if (o.out === undefined) throw usageError(`--out is required; ${see}`);
  if (!niftiName(o.out)) throw usageError(`--out must end with .nii or .nii.gz, got '${o.out}'`);
  if ((o.method === undefined) === (o.model === undefined)) throw usageError(`give one inversion: --method NAME (classical) or --model ID (a network); ${see}`);
  if (o.param !== undefined && o.method === undefined) throw usageError('--param sets a classical method\'s parameter: it needs --method');
  if (o.weights !== undefined && o.model === undefined) throw usageError('--weights belongs to --model');
  if (o.mask === undefined && o.magnitude === undefined) throw usageError('give --mask, or --magnitude to make the mask from');
  const b0 = positiveNumber(o.b0, 'b0') ?? 3;
  const cores = wholeNumber(o.cores, 'cores', 1);
  const units = o['phase-units']?.toLowerCase();
  if (units !== undefined && !['rad', 'deg', 'scanner'].includes(units)) throw usageError(`--phase-units must be rad, deg or scanner, got '${o['phase-units']}'`);
  const scale = o['phase-scale'] === undefined ? undefined : Number(o['phase-scale']);
  const params = methodParams(o.param);
  const options = pipelineOptions(o.option);
  const dir = o['keep-intermediates'];
  checkWritable(o.out, 'out');
  if (o.report !== undefined) checkWritable(o.report, 'report');
  removeStalePartials(o.out);
  const { signal, progress } = ctx;
  const { like, phase, magnitude, geometry, mask, echoes, phaseInfo } = await readInputs(o, { needMask: false, b0, phase: { te, units, scale }, convert: true }, signal);
  for (const note of phaseInfo?.notes ?? []) progress.line(note);
  const tessera = await ctx.start({ hardwareThreads: cores });
  let weights;
  if (o.model !== undefined) {
    const entry = await tessera.model(o.model);
    ({ weights } = await loadNetworkWeights(o, entry, tessera, ctx));
  }
  const request = defined({
    geometry, phase, magnitude, mask, te, b0, ...options, method: o.method, [o.method ?? '-']: o.method && Object.keys(params).length ? params : undefined, model: o.model, weights,
  });
  delete request['-'];
  const plan = await tessera.plan({ ...request, pipeline: true, phase: undefined });
  if (!plan.feasible) throw new CliError(plan.message, EXIT_USAGE, 'BudgetExceeded');
  progress.line(`pipeline: ${geometry.dims.join('×')}, ${echoes} echoes (TE ${te.map((t) => fmt(t * 1000)).join(', ')} ms), B0 ${b0} T: ${plan.stages.join(' → ')}${o.model ? ` → ${o.model}` : ''}, estimated peak ${size(plan.peakBytes)}`);
  const out = await tessera.pipeline({ ...request, signal, onProgress: (p) => progress.tiles(p, 'steps') });
  progress.close();
  signal.throwIfAborted();
  const gzip = /\.gz$/i.test(o.out);
  const outputs = [{ file: o.out, bytes: await writeNifti(out.chi.data, like, { gzip, description: `chi ppm, tessera-qsm pipeline ${o.method ?? o.model}`.slice(0, 79) }) }];
  if (dir !== undefined) {
    fs.mkdirSync(dir, { recursive: true });
    const f32 = (v) => (v.data instanceof Float32Array ? v.data : Float32Array.from(v.data));
    const write = async (name, data, description) => outputs.push({ file: path.join(dir, `${name}.nii.gz`), bytes: await writeNifti(data, like, { gzip: true, description }) });
    await write('mask', f32(out.mask), 'brain mask');
    await write('fit_mask', f32(out.fitMask), 'echo fit reliable (residual <= limit)');
    await write('fit_residual', out.fitResidual.data, 'echo fit RMS phase residual rad');
    await write('offset', out.offset.data, 'receive phase offset rad');
    await write('total_field_hz', out.fieldHz.data, 'total field Hz');
    await write('total_field_ppm', out.totalField.data, 'total field ppm');
    await write('local_field_ppm', out.localField.data, 'local field ppm');
    await write('local_mask', f32(out.localMask), 'local field mask');
    const n = geometry.dims[0] * geometry.dims[1] * geometry.dims[2];
    for (let e = 0; e < echoes; e++) await write(`unwrapped_phase_echo${e + 1}`, out.unwrappedPhase.data.subarray(e * n, (e + 1) * n), `unwrapped phase echo ${e + 1} rad`);
  }
  if (o.report !== undefined) {
    const full = { ...out.report, networkReport: out.networkReport, command: ['tessera-qsm', ...ctx.args], cwd: process.cwd(), versions: versions(), startedAt, totalWallSeconds: (performance.now() - t0) / 1000, inputs: { phase: o.phase, magnitude: o.magnitude ?? null, mask: o.mask ?? null, te, b0, echoes }, options, inversion: o.method ? { method: o.method, params } : { model: o.model }, output: o.out, intermediates: dir ?? null };
    outputs.push({ file: o.report, bytes: `${JSON.stringify(full, null, 2)}\n` });
  }
  await writeAtomic(outputs, signal);
  progress.line(`wrote ${o.out}: χ (ppm)${dir !== undefined ? ` and the intermediates in ${dir}` : ''} (${duration((performance.now() - t0) / 1000)})`);
  return EXIT_OK;
}

async function cmdInvert(o, ctx) {
  if (o.method !== undefined) return cmdInvertMethod(o, ctx);
  if (o.param !== undefined) throw usageError('--param sets a classical method\'s parameter: it needs --method; see `tessera-qsm invert --help`');
  const t0 = performance.now();
  const startedAt = new Date().toISOString();
  const run = runOptions('invert', o);
  const threads = wholeNumber(o.threads, 'threads', 1);
  if (o.out === undefined) throw usageError('--out is required; see `tessera-qsm invert --help`');
  if (!niftiName(o.out)) throw usageError(`--out must end with .nii or .nii.gz, got '${o.out}'`);
  if (o.mask === undefined) throw usageError('--mask is required; see `tessera-qsm invert --help`');
  const { b0 } = run;
  let units;
  if (o.phase === undefined) {
    units = (o.units ?? 'ppm').toLowerCase();
    if (!['ppm', 'hz', 'rad/s'].includes(units)) throw usageError(`--units must be ppm, hz or rad/s, got '${o.units}'`);
    if (units !== 'ppm' && b0 === undefined) throw usageError(`--units ${units} needs --b0 (the field strength in tesla) to convert to ppm`);
  }
  const weightSources = o.weights ?? [];
  if (o.spec !== undefined && weightSources.length !== 1) {
    throw usageError(`--spec needs exactly one --weights FILE (the ONNX network), got ${weightSources.length}`);
  }
  checkWritable(o.out, 'out');
  if (o.report !== undefined) checkWritable(o.report, 'report');
  if (o.report !== undefined && path.resolve(o.report) === path.resolve(o.out)) throw usageError('--report and --out name the same file');
  removeStalePartials(o.out);
  if (o.report !== undefined) removeStalePartials(o.report);
  const { signal, progress } = ctx;

  const rawSpec = o.spec !== undefined ? await readSpec(o.spec, signal) : undefined;
  const inputs = await readInputs(o, { needMask: true, units, b0, phase: run.phase, convert: true }, signal);
  const { like, field, phase, magnitude, echoes, phaseInfo, geometry, mask } = inputs;
  const tessera = await ctx.start({ workers: run.workers, threadsPerWorker: threads, hardwareThreads: run.cores });
  const spec = checkSpec(rawSpec, await tessera.schema(), o.spec);
  const entry = o.model !== undefined ? await tessera.model(o.model) : undefined;
  const phaseNet = await checkInputKind(o, entry, run, tessera);
  if (entry && weightSources.length > 0 && weightSources.length !== entry.weights.length) {
    throw usageError(
      `${entry.name} needs ${entry.weights.length} --weights (${entry.weights.map((w) => w.file).join(', ')}), got ${weightSources.length}`,
    );
  }
  const phaseSettings = phaseNet ? { te: run.phase.te, b0, erodeRadius: run.phase.erodeRadius } : {};
  const request = defined({
    geometry, mask, field: phaseNet ? undefined : field, model: o.model, spec, tile: run.tile, whole: run.whole, workers: run.workers, threadsPerWorker: threads,
    quality: run.quality, verify: run.verify || undefined, b0Align: run.b0Align, crop: run.crop, cropMargin: run.cropMargin, ...phaseSettings,
  });
  // A spec without bytesPerVoxel: its (local) weights are read and the network calibrated before any plan.
  const early = uncosted(rawSpec) ? await loadNetworkWeights(o, entry, tessera, ctx) : null;
  if (early) await calibrateSpec(tessera, early.weights, spec, ctx);
  // Refused before anything is downloaded.
  const gate = await tessera.plan(early ? { ...request, weights: early.weights } : request);
  if (!gate.feasible) throw new CliError(gate.message, EXIT_USAGE, 'BudgetExceeded');
  signal.throwIfAborted();

  // Weights: after the plan, so a refused run downloads nothing.
  const { weights, weightsInfo } = early ?? (await loadNetworkWeights(o, entry, tessera, ctx));
  // The run's plan: with the reach the weights' graph gives (or the probe measures), handed to the run as it is.
  const context = o.probe ? await probeContext(o, entry, spec, weights, tessera, ctx) : undefined;
  const plan = await tessera.plan(defined({ ...request, weights, context, measureSpeed: o['measure-speed'] || undefined }));
  if (!plan.feasible) throw new CliError(plan.message, EXIT_USAGE, 'BudgetExceeded');
  signal.throwIfAborted();

  const localField = entry?.quantity === 'local-field';
  const what = localField ? 'local field (ppm)' : 'χ (ppm)';
  for (const note of phaseInfo?.notes ?? []) progress.line(note);
  const mode = plan.wholeVolume
    ? (plan.crop ? `the mask's bounding box (${boxText(plan.crop)})` : 'whole volume')
    : isSplit(plan) ? `the mask's bounding box (${boxText(plan.crop)}) in ${splitText(plan.crop.split)}` : `${plan.tilesActive} of ${plan.tilesTotal} tiles`;
  const phaseText = phaseNet
    ? `, ${echoes} echo${echoes > 1 ? 'es' : ''} (TE ${run.phase.te.map((t) => fmt(t * 1000)).join(', ')} ms), B0 ${b0 ?? 3} T${b0 === undefined ? ' (default; --b0 to change)' : ''}`
    : '';
  progress.line(
    `${o.model ?? `spec ${o.spec}`}: ${mode}${phaseText}, patch ${plan.patchDims?.join('×') ?? plan.patchEdge}, ` +
      `${plan.tilesInFlight} in flight, estimated peak ${size(plan.peakBytes)}`,
  );
  if (plan.explanation) progress.line(`plan: ${plan.explanation}${speedText(plan)}`);
  if (plan.b0Align?.resampled) progress.line(`B0: ${plan.b0Align.summary}`);
  if (plan.predictedFidelity && !plan.wholeVolume) progress.line(`predicted fidelity: ${fidelityText(plan)}; network reach: ${reachText(plan.context)}`);
  if (localField) progress.line(`${o.model}: the output is the local field (ppm), not χ`);
  if (plan.fidelityWarning) progress.line(`warning: ${plan.fidelityWarning}`);
  if (plan.warning) progress.line(`warning: ${plan.warning}`);
  const data = phaseNet
    ? defined({ phase, magnitude, phaseSign: run.phase.phaseSign, inputNames: run.inputNames })
    : defined({ field, inputNames: run.inputNames });
  let result;
  try {
    const onProgress = (p) => (p.stage === 'verify' ? null : progress.tiles(p));
    if (run.verify) progress.line('self-check: after the tiles, the largest box that runs whole is run and compared');
    result = await tessera.invert({ ...request, ...data, weights, context, plan, signal, onProgress });
  } catch (e) {
    // The runtime names the API option; say the flag.
    if (e?.code === 'ModelLoadFailed' && /inputNames/.test(e.message ?? '')) e.message += ' (on the command line: --input-name ROLE=NAME, repeatable)';
    throw e;
  }
  const { chi, report } = result;
  progress.close();
  signal.throwIfAborted();
  if (report.verify) progress.line(`self-check: ${verifyText(report.verify)}`);
  // A heap over its plan is said even with --quiet: the next, larger run may stall.
  if (report.memory?.warning) process.stderr.write(`warning: ${report.memory.warning}\n`);

  const quantity = result.quantity ?? (localField ? 'local-field' : 'chi');
  const description = `${quantity === 'local-field' ? 'local field' : 'chi'} ppm, tessera-qsm ${o.model ?? 'spec'}`.slice(0, 79);
  const bytes = await writeNifti(chi, like, { gzip: /\.gz$/i.test(o.out), description });
  signal.throwIfAborted();
  const outputs = [{ file: o.out, bytes }];
  if (o.report !== undefined) {
    const input = phaseNet
      ? {
          phase: {
            path: o.phase, dims: geometry.dims, echoes, voxelMm: geometry.voxelMm, b0Dir: geometry.b0Dir, b0DirSource: like.b0DirSource,
            te: run.phase.te, b0Tesla: b0 ?? 3, units: phaseInfo.units, radPerUnit: phaseInfo.scale, rewrapped: phaseInfo.rewrapped,
            storedRange: phaseInfo.range, phaseSign: run.phase.phaseSign ?? -1, erodeRadius: run.phase.erodeRadius ?? 3,
          },
          ...(o.magnitude !== undefined && { magnitude: { path: o.magnitude } }),
        }
      : { field: { path: o.field, dims: geometry.dims, voxelMm: geometry.voxelMm, b0Dir: geometry.b0Dir, b0DirSource: like.b0DirSource, units, b0Tesla: b0 ?? null } };
    const full = {
      ...report,
      plan,
      command: ['tessera-qsm', ...ctx.args],
      cwd: process.cwd(),
      versions: versions(),
      startedAt,
      totalWallSeconds: (performance.now() - t0) / 1000,
      quantity,
      inputs: { ...input, mask: { path: o.mask, voxelsInside: mask.reduce((a, b) => a + b, 0) }, ...(run.inputNames && { inputNames: run.inputNames }) },
      network: entry ? { model: entry.id, name: entry.name, kind: entry.kind } : { spec, specFile: o.spec },
      weights: weightsInfo,
      options: {
        tile: run.tile ?? null, whole: run.whole, workers: run.workers ?? null, threads: threads ?? null, cores: run.cores ?? null,
        quality: run.quality ?? null, verify: run.verify, probe: !!o.probe, b0Align: run.b0Align ?? null,
      },
      output: o.out,
    };
    outputs.push({ file: o.report, bytes: `${JSON.stringify(full, null, 2)}\n` });
  }
  await writeAtomic(outputs, signal);
  if (phaseNet) progress.line(`wrote ${o.out}: ${what} (${echoes} echo${echoes > 1 ? 'es' : ''}, ${duration(report.wallSeconds)})`);
  else progress.line(`wrote ${o.out} (${report.tilesRun} tiles run, ${report.tilesSkipped} skipped, ${duration(report.wallSeconds)})`);
  return EXIT_OK;
}

// ---------------------------------------------------------------------------------------------------
// Main

const COMMANDS = { invert: cmdInvert, pipeline: cmdPipeline, plan: cmdPlan, models: cmdModels, methods: cmdMethods, 'receptive-field': cmdReceptiveField, calibrate: cmdCalibrate };

async function main(args) {
  const controller = new AbortController();
  let tessera = null;
  let cancelCode = 0;
  let progress = new Progress({ quiet: true });
  const onSignal = (sig, code) => () => {
    if (cancelCode) {
      // A second Ctrl-C: stop at once (output files are only ever renamed into place, never partial).
      removeOwnPartials();
      progress.close();
      process.stderr.write('cancelled\n');
      process.exit(code);
    }
    cancelCode = code;
    controller.abort(new DOMException(`cancelled by ${sig}`, 'AbortError'));
  };
  const sigint = onSignal('SIGINT', 130);
  const sigterm = onSignal('SIGTERM', 143);
  process.on('SIGINT', sigint);
  process.on('SIGTERM', sigterm);

  const out = (text) => process.stdout.write(text);
  let code = EXIT_OK;
  try {
    const [command, ...rest] = args;
    if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
      const topic = command === 'help' && COMMANDS[rest[0]] ? rest[0] : 'main';
      if (command === undefined) {
        process.stderr.write(HELP.main);
        return EXIT_USAGE;
      }
      out(HELP[topic]);
      return EXIT_OK;
    }
    if (command === '--version' || command === '-v') {
      out(`tessera-qsm ${versions().tessera ?? 'unknown'}\n`);
      return EXIT_OK;
    }
    if (!COMMANDS[command]) throw usageError(`unknown command '${command}' (commands: invert, pipeline, plan, models, methods, receptive-field, calibrate); see \`tessera-qsm --help\``);
    if (rest.includes('--help') || rest.includes('-h')) {
      out(HELP[command]);
      return EXIT_OK;
    }
    const o = parse(command, rest);
    progress = new Progress({ quiet: !!o.quiet });
    const ctx = {
      args,
      out,
      signal: controller.signal,
      progress,
      async start(opts) {
        tessera = await createTessera(opts);
        controller.signal.throwIfAborted();
        return tessera;
      },
    };
    code = await COMMANDS[command](o, ctx);
  } catch (e) {
    progress.close();
    if (cancelCode || e?.name === 'AbortError') {
      process.stderr.write('cancelled\n');
      code = cancelCode || 130;
    } else if (e instanceof CliError) {
      process.stderr.write(`error: ${e.message}\n`);
      code = e.exit;
    } else if (e && typeof e === 'object' && e.code) {
      // TesseraError from the runtime, loader errors (WeightsMismatch, DownloadFailed, ...).
      process.stderr.write(`error: ${e.message}\n`);
      code = EXIT_ERROR;
    } else {
      // Not a known kind: still no stack unless asked for (TESSERA_DEBUG=1).
      process.stderr.write(`error: ${e?.message ?? String(e)}\n`);
      if (process.env.TESSERA_DEBUG && e?.stack) process.stderr.write(`${e.stack}\n`);
      code = EXIT_ERROR;
    }
  } finally {
    if (tessera) {
      await Promise.race([tessera.terminate().catch(() => {}), new Promise((r) => setTimeout(r, 5000).unref())]);
    }
  }
  process.off('SIGINT', sigint);
  process.off('SIGTERM', sigterm);
  return code;
}

// `tessera-qsm models | head`: a closed pipe ends the process quietly.
process.stdout.on('error', (e) => process.exit(e.code === 'EPIPE' ? EXIT_OK : EXIT_ERROR));
const code = await main(process.argv.slice(2));
// Let stdout drain (pipes) before exiting.
await new Promise((r) => process.stdout.write('', r));
process.exit(code);
