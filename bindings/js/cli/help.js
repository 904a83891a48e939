// The command line's help. The request's flags are described from the C++ schema (tessera.schema(): help, unit,
// range, choices, default); the CLI's own flags and the commands' prose are written here.
import { PIPELINE_OPTIONS, PHASE_NETWORKS, phaseNetworkWords } from '../request.js';
import { requestFlags, isSwitch, PHASE_OPTIONS } from './flags.js';
import { UNBOUNDED, LIST_OPTIONS, fmt } from './values.js';

// The forms of `invert`, shown in the main help and in `invert --help`.
const INVERT_USAGE = `  tessera-qsm invert --field f.nii[.gz] --mask m.nii[.gz] (--model ID [--weights FILE|URL ...] | --spec net.json --weights FILE)
                     [--core N --halo N [--stride N --blend B] --workers N --threads N | --whole] [--cores N] [--b0 T --units hz|ppm|rad/s]
                     --out chi.nii[.gz] [--report r.json] [--quiet]
  tessera-qsm invert --field f.nii[.gz] --mask m.nii[.gz] --method NAME [--param NAME=VALUE ...] [--magnitude mag.nii[.gz]]
                     [--cores N] [--b0 T --units hz|ppm|rad/s] --out chi.nii[.gz] [--report r.json] [--quiet]
  tessera-qsm invert --phase p.nii[.gz] --te S[,S...] --mask m.nii[.gz] --model ${PHASE_NETWORKS.join('|')} [--weights FILE|URL]
                     [--b0 T] [--magnitude mag.nii[.gz]] [--erode N] [--phase-sign +1|-1]
                     [--phase-units rad|deg|scanner | --phase-scale S] [--input-name ROLE=NAME ...]
                     --out chi.nii[.gz] [--report r.json] [--quiet]
`;

const PIPELINE_USAGE = `  tessera-qsm pipeline --phase p.nii[.gz] --te S,S,... [--magnitude mag.nii[.gz]] [--mask m.nii[.gz]] [--b0 T]
                       [--method NAME [--param N=V ...] | --model ID [--weights FILE|URL]] [--option N=V ...]
                       [--also swi,r2star] --out chi.nii[.gz] [--keep-intermediates DIR] [--report r.json|methods.md]
                       [--cores N] [--quiet]
  tessera-qsm pipeline --total-field map.nii[.gz] --units hz|rad/s|ppm [--magnitude mag.nii[.gz]] [--mask m.nii[.gz]]
                       [--b0 T] [--method NAME ... | --model ID ...] [--option N=V ...] --out chi.nii[.gz] [...]
  tessera-qsm pipeline --phase-difference pd.nii[.gz] (--te1 S --te2 S | --delta-te S) [--magnitude mag.nii[.gz]]
                       [--mask m.nii[.gz]] [--b0 T] [--method NAME ... | --model ID ...] --out chi.nii[.gz] [...]
`;

/** The help of the commands without request flags, and the main help (none reads the schema). */
export const STATIC_HELP = {
  main: `tessera-qsm: QSM from a scanner's phase or field map to a susceptibility map (χ, ppm), with classical methods or tiled deep networks

Usage:
${INVERT_USAGE}  tessera-qsm plan   (--field f.nii[.gz] | --phase p.nii[.gz] [--te S[,S...]]) [--mask m.nii[.gz]] (--model ID | --spec net.json)
                     [--core N --halo N --workers N | --whole] [--cores N] [--json]
  tessera-qsm plan   --method NAME --field f.nii[.gz] [--mask m.nii[.gz]] [--magnitude mag.nii[.gz]] [--param NAME=VALUE ...] [--json]
  tessera-qsm plan   --pipeline (--phase p.nii[.gz] --te S,S,... | --total-field f.nii[.gz] --units U) (--mask m.nii[.gz] | --magnitude mag.nii[.gz])
                     (--method NAME | --model ID) [--option NAME=VALUE ...] [--json]
  tessera-qsm models [--json]
  tessera-qsm methods [--json]
${PIPELINE_USAGE}  tessera-qsm swi --phase p.nii[.gz] --magnitude mag.nii[.gz] --te S,S,... --out swi.nii[.gz] [--min-ip minip.nii[.gz]]
  tessera-qsm r2star --magnitude mag.nii[.gz] --te S,S,... [--out r2star.nii[.gz]] [--t2star t2star.nii[.gz]] [--method M]
  tessera-qsm receptive-field (--model ID | --spec net.json) [--weights FILE|URL] [--probe] [--json]
  tessera-qsm calibrate --weights FILE|URL [--spec net.json | --model ID] [--threads N] [--json]
  tessera-qsm score --chi a.nii[.gz] --reference b.nii[.gz] --mask m.nii[.gz] [--cores N] [--json]
  tessera-qsm qsm-ci DIR | --in DIR [--out DIR] [--method NAME [--param N=V ...]] [--background NAME] [--cores N] [--quiet]
  tessera-qsm <command> --help     tessera-qsm --version

Exit codes: 0 success, 1 error (runtime, input files, weights), 2 usage error or a run the memory
planner refuses, 130 cancelled (Ctrl-C).
`,
  plan: `tessera-qsm plan: the memory budget of a run, from the C++ planner

Usage:
  tessera-qsm plan (--field f.nii[.gz] | --phase p.nii[.gz] [--te S[,S...]] [--erode N] [--b0 T])
                   [--mask m.nii[.gz]] (--model ID | --spec net.json) [--core N --halo N --workers N | --whole] [--cores N] [--json]
  tessera-qsm plan --method NAME --field f.nii[.gz] [--mask m.nii[.gz]] [--magnitude mag.nii[.gz]] [--param NAME=VALUE ...] [--json]
  tessera-qsm plan --pipeline (--phase p.nii[.gz] --te S,S,... | --total-field f.nii[.gz] --units hz|rad/s|ppm)
                   (--mask m.nii[.gz] | --magnitude mag.nii[.gz]) (--method NAME | --model ID) [--option NAME=VALUE ...] [--json]

--method (a classical method of \`invert --method\`) and --pipeline (a \`tessera-qsm pipeline\` run) plan from the input's
NIfTI header alone (its dims, echoes and voxel size; no image is read, so a scan of any size plans in a second): they
print the module heap the run needs (inputs, workspace, and the heap's growth slack), the limit of node's 32-bit
WebAssembly heap and whether it fits; when it does not (exit code 2), the largest crop of the volume's shape that fits.
\`tessera-qsm pipeline\` makes the same plan from the headers before it reads the data, and refuses a run that cannot fit.

For a network: prints the patch edge, MB per tile, tiles in flight, tiles total/active/skipped (skipped: no mask voxel
in the core), activation and peak memory against the runtime's limits, the predicted fidelity against the
whole-volume run and the network's reach, the memory cost and where it came from, or the planner's refusal and advice
(exit code 2). --weights FILE lets the planner read the network's reach from its graph (--probe: measure it;
--context FILE: a reach measured earlier) and
calibrates a --spec that declares no bytesPerVoxel (without --weights its cost is marked assumed). --json prints the plan object instead of the table.
With --phase (${phaseNetworkWords()}) the echo count comes from the file (one network call per echo); --te is optional here.
Options as for \`tessera-qsm invert --help\` (--weights-unverified too).
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
--weights defaults to the registry's official file(s) for --model; --spec needs --weights FILE; --weights-unverified
reads --weights of --model whose bytes differ from the registry's file (your own export), with a warning.
--json prints {graph, probe, weightsSha256}: the file plan and invert take as --context FILE (the probe's within[]
is the profile; the weights' sha256s let them refuse it for other weights).
`,
  score: `tessera-qsm score: QSM-CI's scores of a χ map against a reference

Usage:
  tessera-qsm score --chi a.nii[.gz] --reference b.nii[.gz] --mask m.nii[.gz] [--cores N] [--json]

The three volumes must share one grid (dims, voxel size and voxel-to-world transform); otherwise the command says
which differs. Inside the mask (nonzero = inside), with r the χ map and t the reference, as QSM-CI's scorer defines them:
  NRMSE              100 · ‖(r − mean r) − (t − mean t)‖ / ‖t − mean t‖ (%)
  NRMSE detrended    the same after fitting r = s · t + i (least squares on the demeaned values) and taking (r − i) / s
  HFEN               100 · ‖LoG(r) − LoG(t)‖ / ‖LoG(t)‖ (%), LoG a Laplacian of Gaussian of σ 1.5 voxels truncated at
                     5σ, filtered over the whole volumes (mirrored edges)
  CC                 Pearson's correlation
  XSIM               SSIM with 5×5×5 uniform windows (only voxels inside the volume), C1 1e-4, C2 1e-6 (ppm²),
                     averaged over the mask
Accumulated in double; the same numbers for any --cores. Every value of both maps must be finite. --json prints
{nrmse, nrmseDetrended, hfen, cc, xsim, voxels, chi, reference, mask}.
`,
  'qsm-ci': `tessera-qsm qsm-ci: a QSM-CI algorithm run (multi-echo phase to total field, local field and χ)

Usage:
  tessera-qsm qsm-ci DIR | --in DIR [--out DIR] [--method NAME [--param N=V ...]] [--background NAME] [--cores N] [--quiet]

Reads QSM-CI's inputs from DIR: phase.nii.gz (wrapped phase in radians, 4D with the echoes along the 4th dim),
magnitude.nii.gz (same dims and echoes; optional: without it the echoes weigh alike), mask.nii.gz, and params.json
({"TE": [s, ...], "B0": T, "B0_dir": [x, y, z], "voxel_size": [mm, mm, mm]}; a BIDS sidecar's EchoTime and
MagneticFieldStrength are read too; without B0_dir the phase header's B0 direction is used). Runs \`tessera-qsm pipeline\`'s
stages with their defaults and writes, gzipped, in ppm, with the phase's header, into --out (default DIR):
totalfield.nii.gz, localfield.nii.gz, chimap.nii.gz.
  --method NAME      the dipole inversion (default: the pipeline's default inversion, chosen on varied heads;
                     \`tessera-qsm methods\` lists them)
  --param N=V        a parameter of the --method (repeatable)
  --background B     background field removal (\`tessera-qsm pipeline --help\` lists the choices and the default)
  --cores N          threads of the C++ stages (default: the machine's)
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
give the divisor (default 1); --threads the ONNX Runtime threads (default 1, as invert's). --weights-unverified:
--weights of --model whose bytes differ from the registry's file (your own export) are read, with a warning.
--json prints {fixedBytes, bytesPerVoxel, points, seconds, fit}.
`,
};

/** Whether a command's help describes request flags (and so needs the schema). */
export const helpNeedsSchema = (topic) => ['invert', 'pipeline', 'swi', 'r2star'].includes(topic);

const WIDTH = 118;
const COLUMN = 21;

/** "  --flag VALUE      text", the text wrapped at WIDTH and continued under the text's column. */
function line(head, text) {
  const words = text.split(' ');
  const rows = [];
  let row = `  ${head}`.padEnd(COLUMN - 1);
  let first = true;
  if (row.length >= COLUMN) {
    rows.push(row.trimEnd());
    row = ' '.repeat(COLUMN - 1);
  }
  for (const w of words) {
    if (!first && row.length + 1 + w.length > WIDTH) {
      rows.push(row);
      row = ' '.repeat(COLUMN - 1);
    }
    row += ` ${w}`;
    first = false;
  }
  rows.push(row);
  return `${rows.join('\n')}\n`;
}

/** A schema option's value as the help names it: its choices, N (whole), its one-letter unit, or X; a list repeats it. */
function metavar(option) {
  if (isSwitch(option)) return '';
  const one = option.choices.length ? option.choices.join('|') : option.integer ? 'N' : option.unit.length === 1 ? option.unit.toUpperCase() : 'X';
  return LIST_OPTIONS.includes(option.name) ? `${one}[,${one}...]` : one;
}

/** A schema option's range and unit in words: "a whole number in [1, 4096] voxels", "in (0, 30] T", or ''. */
export function rangeText(option) {
  if (option.choices.length || isSwitch(option)) return '';
  const low = option.min > -UNBOUNDED ? option.min : null;
  const high = option.max < UNBOUNDED ? option.max : null;
  const unit = option.unit ? ` ${option.unit}` : '';
  const kind = option.integer ? 'a whole number ' : '';
  // C++'s own words for a bounded range (range_text: the bounds it checks, 2/3 as the fraction).
  if (low !== null && high !== null) return option.range ? `${option.range}${unit}` : `${kind}in ${option.minExclusive ? '(' : '['}${fmt(low)}, ${fmt(high)}${option.maxExclusive ? ')' : ']'}${unit}`;
  if (low !== null) return `${kind}${option.minExclusive ? '>' : '≥'} ${fmt(low)}${unit}`;
  return `${kind || 'a number '}`.trim() + unit;
}

/** A schema option's default in words: the number, the rule ("auto", "the core (no overlap)"), or '' for a switch. */
export function defaultText(option) {
  if (isSwitch(option)) return '';
  return typeof option.default === 'number' ? fmt(option.default) : option.default;
}

/** A schema option's help line for its flag: its help, then its range and default. */
function optionLine(flag, option) {
  const facts = [rangeText(option), defaultText(option) && `default ${defaultText(option)}`].filter(Boolean);
  return line(`--${flag} ${metavar(option)}`.trim(), `${option.help}${facts.length ? ` (${facts.join('; ')})` : ''}`);
}

/** The invert help's section of each request flag's option; the rest are planning options (Tiling). */
const SECTION_OF = { b0: 'input', method: 'method', b0Align: 'network', ...Object.fromEntries(PHASE_OPTIONS.map((k) => [k, 'phase'])) };

/** The request flags of a command's section, as help lines. */
function section(command, schema, name) {
  return requestFlags(command, schema)
    .filter(({ option }) => (SECTION_OF[option.name] ?? 'tiling') === name)
    .map(({ flag, option }) => optionLine(flag, option))
    .join('');
}

/** The spec keys and their numeric defaults: "divisor (1), bytesPerVoxel, …" (the schema's spec.* options). */
function specKeys(schema) {
  return schema
    .filter((o) => o.name.startsWith('spec.'))
    .map((o) => `${o.name.slice(5)}${typeof o.default === 'number' ? ` (${fmt(o.default)})` : ''}`)
    .join(', ');
}

function invertHelp(schema) {
  const s = (name) => section('invert', schema, name);
  return `tessera-qsm invert: invert a local field map (or a wrapped phase) to susceptibility (χ, ppm)

Usage:
${INVERT_USAGE}
Input (one of --field or --phase)
  --field FILE       field map (NIfTI-1/2, .nii or .nii.gz); dims, voxel size and B0 direction come from its header
  --units U          field units: ppm (default), hz or rad/s; hz and rad/s need --b0
  --phase FILE       wrapped phase in rad for the phase networks (${phaseNetworkWords()}): 3D, or 4D with the
                     echoes along the 4th dim; dims, voxel size and B0 direction come from its header
  --mask FILE        mask with the input's dims (nonzero = inside)
${s('input')}Phase networks (with --phase)
${s('phase')}  --magnitude FILE   magnitude with the phase's dims and echoes: echoes are combined with (magnitude·TE)² weights
  --phase-units U    rad (default), deg, or scanner: integers whose stored range (e.g. Siemens -4096..4095)
                     spans 2π (the span rounded up to a power of two; any offset is re-wrapped)
  --phase-scale S    radians per stored unit (after the header's scl_slope/scl_inter), e.g. 0.000767 = π/4096
                     After the conversion the phase must lie in [-π, π] (a phase in [0, 2π] is re-wrapped to
                     (-π, π]); anything else, or integers stored without scl_slope, is refused with a hint
  --input-name R=N   the network's ONNX input name N for the role R (phase, mask, te, b0, b0_dir, border) when
                     the export's names are not recognised; repeat for several roles
Classical method (instead of a network)
${s('method')}  --param N=V        a parameter of the method (repeatable), e.g. --param threshold=0.15; the rest keep their
                     defaults (\`tessera-qsm methods\` lists them with their units, defaults and ranges)
  --magnitude FILE   with --field: the magnitude (MEDI's and TFI's edge prior)
  --cores N          threads of its loops and FFTs (default: the machine's)
Network (one of)
  --model ID         a registry network (see \`tessera-qsm models\`); --weights defaults to its official URL(s),
                     NeXtQSM takes two; byte size and sha256 are checked against the registry
${line('--spec FILE', `a network not in the registry: JSON object with any of ${specKeys(schema)}; network input = (field - inputMean) / inputStd, χ = outputStd · output + outputMean; needs --weights FILE. Without bytesPerVoxel the network's memory cost is calibrated first (a few seconds; see \`tessera-qsm calibrate --help\`)`)}  --weights SRC      ONNX file or URL (repeat for a model with several networks)
  --weights-unverified  run --weights whose bytes differ from the registry's file (your own export of --model):
                     the run warns and the report records their sha256; without it they are refused
${s('network')}Tiling (field networks; the phase networks always run on the whole volume)
  Without --core the auto-planner chooses core, halo, stride, blend, workers and threads (a halo given alone is
  kept); --stride and --blend shape a tiling with --core.
${s('tiling')}  --cores N          cores the auto-planner may use for workers × threads (default: the cores this process may run
                     on); the same --cores gives the same plan on any machine
  --verify           self-check: the largest box that runs whole, centred on the mask, is run whole and
                     compared with the tiled χ inside it (r, NRMSE, max |Δ| in the log and the report), plus the
                     data-consistency residual ‖M(D∗χ − f)‖/‖M f‖ of the result
  --probe            measure how far the network looks (two runs of a phantom patch) and plan with that
                     instead of the reach its ONNX graph allows
  --context FILE     plan with a reach measured earlier: what \`tessera-qsm receptive-field --probe\` prints as JSON
                     (measure once, run a cohort); refused when it was measured on other weights
  --measure-speed    time a few patches of the network on this machine first and estimate the run's time with
                     that speed instead of the registry's or the default (needs the weights)
Output
  --out FILE         χ in ppm (iqfm: the local field in ppm) as float32 NIfTI with the input's 3D header and
                     affine (.gz: gzipped)
  --report FILE      run report as JSON (tiles, timings, memory, plan, command line, versions)
  --quiet            no progress on stderr

Progress goes to stderr: a bar on a terminal, one line per 10% otherwise. Ctrl-C cancels the run
(exit 130) without writing any output.
`;
}

/** The pipeline's stage options (--option NAME=VALUE), one line each, from the schema. */
function stageOptions(schema) {
  return schema
    .filter((o) => PIPELINE_OPTIONS.includes(o.name.split('.')[0]))
    .map((o) => {
      const facts = [o.choices.length ? o.choices.join('|') : rangeText(o), `default ${defaultText(o)}`].filter(Boolean);
      return line(`    ${o.name}`, `${o.help} (${facts.join('; ')})`);
    })
    .join('');
}

/** The schema's options whose names start with one of prefixes ('swi.', 'unwrap'), one line each (--option N=V). */
function schemaOptionLines(schema, prefixes) {
  return schema
    .filter((o) => prefixes.some((p) => o.name === p || o.name.startsWith(`${p}.`)))
    .map((o) => {
      const facts = [o.choices.length ? o.choices.join('|') : [rangeText(o), o.unit].filter(Boolean).join(' '), `default ${defaultText(o)}`].filter(Boolean);
      return line(`    ${o.name}`, `${o.help} (${facts.join('; ')})`);
    })
    .join('');
}

function swiHelp(schema) {
  return `tessera-qsm swi: susceptibility-weighted imaging and its minimum-intensity projection
  tessera-qsm swi --phase p.nii[.gz] --magnitude mag.nii[.gz] --te S,S,... --out swi.nii[.gz] [--min-ip minip.nii[.gz]]
The wrapped phase of every echo is unwrapped (as the pipeline's echo fit, inside a brain mask made from the magnitude
unless --mask is given), combined into one frequency and high-passed (CLEAR-SWI, Eckstein 2021); Haacke's phase mask
raised to a power weights the echoes' root-sum-of-squares magnitude (Haacke 2004); the minIP takes the minimum over a
sliding slab along the slice axis. Outputs keep the input's header.
  --phase-units U    rad, deg or scanner (as the pipeline; a phase that is not radians is refused in words)
  --mask FILE        where the phase is unwrapped and high-passed (default: a brain mask made from the magnitude)
  --option N=V       an SWI option (repeatable):
${schemaOptionLines(schema, ['swi', 'unwrap', 'brainMask'])}  --cores N          threads of the C++ stages (default 1)
`;
}

function r2starHelp(schema) {
  const method = schema.find((o) => o.name === 'r2star.method');
  return `tessera-qsm r2star: R2* (1/s) and T2* (s) maps from the multi-echo magnitude
  tessera-qsm r2star --magnitude mag.nii[.gz] --te S,S,... [--out r2star.nii[.gz]] [--t2star t2star.nii[.gz]]
${line('  --method M', `${method.help} (${method.choices.join('|')}; default ${defaultText(method)})`)}  --mask m.nii       the voxels fitted (default: every voxel whose first echo is > 0)
T2* = 1/R2*, 1 s where R2* < 1/s; R2* is kept in [0, 2000] 1/s. Outputs keep the input's header.
`;
}

function pipelineHelp(schema) {
  const flags = requestFlags('pipeline', schema).map(({ flag, option }) => optionLine(flag, option)).join('');
  return `tessera-qsm pipeline: from a multi-echo scan's wrapped phase, or a total field map, to susceptibility (χ, ppm)

Usage:
${PIPELINE_USAGE}
Stages, in the C++ core: a brain mask from the first echo's magnitude (when --mask is not given), the echo fit
(each echo unwrapped, the receive-phase offset removed, a weighted line over TE: the total field in Hz and ppm),
background field removal, and the inversion of the local field by a classical method or a registry network; a
total-field method (--method tfi) inverts the total field itself, with no background removal before it.
  --phase FILE       wrapped phase, 4D with the echoes along the 4th dim (rad; --phase-units / --phase-scale as for
                     invert)
  --total-field FILE a total field map instead of --phase and --te (a scanner's B0 map, 3D): no echo fit runs, the
                     field is converted to ppm at --b0 and the mask is its fit mask; NaN inside the mask, or values
                     implausible for --units (a Hz map given as ppm), are refused
  --units U          the total field's units: hz (GE's and Philips' B0 maps), rad/s or ppm
  --phase-difference FILE  a phase difference of two echoes instead of --phase and --te (a Siemens field map,
                     φ(TE2) − φ(TE1), 3D): unwrapped as one echo at TE = ΔTE with no receive offset; scanner
                     integers (−4096…4094) are read as such with a warning
  --te1 S, --te2 S   its two echo times in seconds (EchoTime1, EchoTime2 of the sidecar); or --delta-te S (TE2 − TE1)
  --magnitude FILE   magnitude with the phase's dims and echoes (the fit's weights; the mask is made from it); with
                     --total-field, one 3D volume
  --mask FILE        brain mask (nonzero = inside); without it, one is made from the magnitude
${flags}  --param N=V        a parameter of the --method (repeatable; \`tessera-qsm methods\` lists them)
  --model ID         a registry network (with --weights and --weights-unverified as for invert)
  --option N=V       a stage option (repeatable), e.g. --option background=pdf or --option vsharp.maxRadius=12:
${stageOptions(schema)}  --also LIST        optional outputs from the same echoes, comma-separated: swi (SWI and its minIP, options swi.*)
                     and r2star (R2* and T2*, option r2star.method), written next to --out as <out>_swi, <out>_minIP,
                     <out>_R2starmap and <out>_T2starmap (.nii or .nii.gz as --out)
  --report FILE      a .md file: the methods text (every step, its parameters and papers, with references) and this
                     command; any other name: the run's report as JSON
  --keep-intermediates DIR   also write mask, total field (Hz, ppm), fit residual and mask, receive-phase offset,
                     each echo's unwrapped phase, local field and local mask there (NIfTI, the input's header)
  --cores N          threads of the C++ stages (default: the machine's)
`;
}

/**
 * A command's help text (or the main help's).
 * schema: tessera.schema(), needed where helpNeedsSchema(topic).
 */
export function helpText(topic, schema) {
  if (topic === 'invert') return invertHelp(schema);
  if (topic === 'pipeline') return pipelineHelp(schema);
  if (topic === 'swi') return swiHelp(schema);
  if (topic === 'r2star') return r2starHelp(schema);
  return STATIC_HELP[topic];
}
