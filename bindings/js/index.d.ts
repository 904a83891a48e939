// Type declarations of tessera-qsm's public API (checked with `tsc --strict`: npm run typecheck).
// The values the wasm module reports (plans, registry entries, schema options) are generated from its Embind
// registrations into value-types.d.ts; the interfaces here that extend them add what the runtime adds in JavaScript.
import type {
  CalibrationFit,
  Limits,
  ModelInfo,
  PlanContext,
  PlannedB0Alignment,
  PlannedVerification,
  PredictedFidelity,
  RequestOption,
  TilePlan,
  TileRunReport,
} from './value-types.js';
export type {
  BoxSplit,
  CalibrationFit,
  CropBox,
  Dims3,
  Extent3,
  Limits,
  ModelInfo,
  Normalization,
  PlanContext,
  PlanGrid,
  PlannedB0Alignment,
  PlannedVerification,
  PlanTile,
  PlanTileConfig,
  PredictedFidelity,
  RequestOption,
  TilePlan,
  TileRunReport,
  Vec3,
  WeightsFile,
} from './value-types.js';

// The request types (each kind's keys, the option groups, the method names) are generated from the C++ schema into
// request-types.d.ts (scripts/request-surface.js); the aliases below name what the API has long called them.
import type {
  InvertRequest,
  MethodName,
  MethodPlanRequest,
  MethodRequest,
  PipelinePlanRequest,
  PipelineRequest,
  PlanRequest,
  R2starOptions,
  R2starRequest,
  SpecOptions,
  SwiRequest,
  TileOptions,
} from './request-types.js';
export type * from './request-types.js';

/** A tile config of a request: {core, halo, stride, blend} (the schema's tile.* options). */
export type TileConfig = TileOptions;
/** A network that is not in the registry (the schema's spec.* options): network input = (field − inputMean)/inputStd, χ = outputStd·output + outputMean. */
export type NetworkSpec = SpecOptions;
/** How overlapping cores combine (the schema's tile.blend). */
export type Blend = NonNullable<TileOptions['blend']>;
/** The auto-planner's fidelity target against the whole-volume run (the schema's quality). */
export type Quality = NonNullable<PlanRequest['quality']>;
/** b0Align: resample to a B0-aligned grid above the threshold (auto), at any tilt (on), never (off). */
export type B0Align = NonNullable<PlanRequest['b0Align']>;

export type Triple = [number, number, number];

/** Where a volume lies: dims (voxels, x-fastest storage), voxel size (mm), B0 direction (voxel axes). */
export interface Geometry {
  dims: Triple;
  voxelMm?: Triple;
  b0Dir?: Triple;
}



/** report.verify: the tiled result against the box run whole, and the data-consistency residual. */
export interface VerificationReport {
  possible: boolean;
  /** a whole-volume run: the result is the whole-volume run itself (r 1, nrmse 0) */
  exact?: boolean;
  message?: string;
  r?: number;
  nrmse?: number;
  /** ppm */
  maxAbs?: number;
  voxels?: number;
  box?: { lo: Triple; hi: Triple };
  compareLo?: Triple;
  compareHi?: Triple;
  margin?: number;
  /** the plan's predictedFidelity */
  predicted?: PredictedFidelity | null;
  /** ‖M(D∗χ − f)‖ / ‖M f‖ of the result */
  dataConsistency?: number;
  seconds?: number;
}



export type ModelKind = 'field-to-chi' | 'physics-loop' | 'native-patches' | 'whole-volume-only';

/** One calibration measurement: a fresh worker ran one patch of edge³. */
export interface CalibrationPoint {
  edge: number;
  voxels: number;
  /** the worker's wasm heap after the patch (its high-water) */
  heapBytes: number;
  /** the same heap after session creation, before the patch */
  afterSessionBytes: number;
  seconds: number;
}

/** calibrate(): a network's memory cost measured in ONNX Runtime Web, fitted and made safe in C++. */
export interface Calibration {
  /** safe: every measured heap lies under fixedBytes + bytesPerVoxel · voxels */
  fixedBytes: number;
  bytesPerVoxel: number;
  points: CalibrationPoint[];
  seconds: number;
  threads: number;
  divisor: number;
  fit: CalibrationFit;
}

/** The memory cost a plan used and where it came from. */
export interface PlanCost {
  readonly source: 'registry' | 'declared' | 'calibrated' | 'assumed';
  readonly fixedBytes: number;
  readonly bytesPerVoxel: number;
  /** registry: the figure is an estimate, not a measurement */
  readonly provisional?: boolean;
  /** calibrated: the measurements */
  readonly points?: CalibrationPoint[];
  readonly seconds?: number;
  readonly threads?: number;
  readonly note?: string;
}


/**
 * A plan as plan() returns it: a frozen view of the plan the runtime holds (the last 16 plans), with its id. Hand it
 * back to invert() with the same request and volume and the run obeys the held plan.
 */
export interface Plan extends TilePlan {
  /** the held plan's id; a plan from another runtime, or one no longer held, is refused by invert() in words */
  readonly id: string;
  /** off-design warning (physics loops tiled, native patching, B0 off the third axis), or empty */
  readonly warning: string;
  /** B0's tilt and whether the run goes through a B0-aligned grid */
  readonly b0Align: PlannedB0Alignment;
  /** network files the run needs (NeXtQSM: 2) */
  readonly networks: number;
  /** the network's memory cost the plan used: the registry's, a spec's declared or calibrated figure, or assumed */
  readonly cost: PlanCost;
}

export interface Progress {
  done: number;
  total: number;
  inFlight: number;
  tilesPerSecond: number;
  etaSeconds: number | null;
  elapsedSeconds: number;
  /** grid indices (x fastest, then y, then z) of the tiles whose network is running */
  runningTiles: number[];
  /** grid indices of every tile started so far */
  startedTiles: number[];
  /** 'verify' while the self-check's box runs (its own tiles); absent for the run's tiles */
  stage?: 'verify';
  /** the execution provider each network file runs on (RunReport.executionProvider[i].provider) */
  executionProvider?: string[];
}

/** An ONNX Runtime Web execution provider Tessera can ask for. */
export type ExecutionProvider = 'webgpu' | 'webnn' | 'wasm';

/** What a platform offers ONNX Runtime Web (platformProviders()). */
export interface PlatformProviders {
  node: boolean;
  webgpu: boolean;
  webnn: boolean;
}

/** One operator kind of a network graph that decides where it can run (graphOperators()). */
export interface GraphOperator {
  op: string;
  /** spatial axes of a conv / pool kernel; null when not a kernel op or unknown */
  rank: number | null;
  /** Resize / Upsample mode */
  mode?: string;
  /** MaxPool / AveragePool ceil_mode */
  ceilMode?: number;
  count: number;
}

/** The selection for one network: selectExecutionProvider()'s answer. */
export interface ExecutionProviderChoice {
  provider: ExecutionProvider;
  requested: ExecutionProvider[];
  /** every preferred provider passed over before the chosen one, with why */
  skipped: { provider: ExecutionProvider; reason: string }[];
}

/** Per network file of a run: which execution provider ran it and why the others did not. */
export interface ExecutionProviderReport {
  requested: ExecutionProvider[];
  /** what the platform and the graph allowed */
  selected: ExecutionProvider;
  /** what the workers' sessions ran on ('a+b' if they differ) */
  provider: string | null;
  skipped: { provider: ExecutionProvider; reason: string }[];
  /** why a worker's session fell back to wasm from the selected provider */
  fallback?: string;
  /** the graph was rewritten for WebGPU (webgpu-graph.js): each rewritten node and what replaced it */
  graphRewrite?: { op: string; node: string; as: string }[];
}

/** calibrate()'s progress: one event per measured patch. */
export interface CalibrationProgress {
  stage: 'calibrate';
  done: number;
  edge: number;
  heapBytes: number;
}

/** invert()'s report of a network run: the driver's counts with what the runtime measured around them. */
export interface RunReport extends TileRunReport {
  /** runs on a C++ driver thread (physics loops, native patching, phase networks): most network calls open at once */
  maxOpenRequests?: number;
  maxInFlightObserved: number;
  wallSeconds: number;
  /** what the run assumed, "; "-joined (empty when nothing) */
  warning: string;
  /** a registry network's run: per weights file the sha256 of the bytes that ran, the registry's, and whether they agree */
  weights?: { file: string; sha256: string | null; registrySha256: string | null; verified: boolean }[];
  /** the same, one sentence each */
  warnings: string[];
  /** a method's or a pipeline's run: the steps that ran (an iterative method that converged early ran fewer) */
  stepsRun?: number;
  /** the plan the run obeyed (its id when it was handed back) */
  plan: Omit<Plan, 'id'> & { readonly id?: string };
  memory: {
    moduleHeapBytes: number;
    workerHeapHighWater: number[];
    estimatedPeakBytes: number;
    /** the largest worker heap high-water / the planner's bytes per tile (above 1: the estimate was low) */
    workerHeapVsPlan: number;
    /** the module heap / the planner's module heap estimate */
    moduleHeapVsPlan: number;
    /** (largest worker heap − fixed bytes) / patch voxels, rounded up to 10 B: the per-voxel cost this run measured */
    measuredBytesPerVoxel: number;
    /** the cost the plan used (plan.cost) */
    cost: PlanCost;
    /** present when a measured heap exceeded its plan: the ratio and the figure to declare */
    warning?: string;
  };
  /** warmStart: the run's first worker was the one measureSpeed kept (no start-up of its own) */
  pool: { warmStart: boolean; maxInFlight: number; runs: number; retries: number; recycles: number; inputBinding?: Record<string, string> }[];
  /** the self-check, when the run was asked to verify (on the B0-aligned grid when the run was resampled) */
  verify?: VerificationReport;
  /** the plan's B0 decision (plan.b0Align) */
  b0Align: PlannedB0Alignment | null;
  /** per network file: the execution provider that ran it, and why the preferred ones did not */
  executionProvider: ExecutionProviderReport[];
}

export interface RuntimeOptions {
  /**
   * networks running at once for a fixed tile whose request names none (the core lowers it to fit the 1.5 GB budget);
   * default half the cores, 1 to 4 (C++ defaults::workers_for). Automatic tiles: the planner chooses.
   */
  workers?: number;
  /** ONNX Runtime intra-op threads per worker */
  threadsPerWorker?: number;
  /** folder holding tessera.js/.wasm/.worker.js for this platform */
  wasmBase?: string | URL;
  /** onnxruntime-web's env.wasm.wasmPaths inside the pool workers */
  ortWasmPaths?: string | Record<string, string>;
  /** module specifier or URL of onnxruntime-web for the pool workers */
  ortModuleUrl?: string;
  /** per-tile stall limit (ms) */
  watchdogMs?: number;
  /** recycle a pool worker once its wasm heap passes this many bytes */
  recycleHeapBytes?: number;
  /** the heap guard (default limits().workerHeapGuardBytes, 3.5 GB): a worker passing it fails its tile (MemoryCeiling) */
  workerHeapGuardBytes?: number;
  /** how long measureSpeed's worker is kept for the next run of the same weights before it is given back (ms, default 300000) */
  warmIdleMs?: number;
  /** cores the auto-planner may use (default: the machine's) */
  hardwareThreads?: number;
  /** URL of driver-worker.js (bundlers) */
  driverUrl?: string | URL;
  /** URL of ort-worker.js for the pool workers when it is served from elsewhere than beside this module (a CDN, a bundler's output) */
  ortWorkerUrl?: string | URL;
  /**
   * preferred ONNX Runtime execution providers, first first (default ['wasm']); each network runs on the first
   * the platform offers and its graph allows, else wasm; a session that fails on it falls back to wasm
   */
  executionProviders?: ExecutionProvider[];
  /** URL of an onnxruntime-web build with WebGPU/WebNN (ort.webgpu.min.mjs / ort.all.min.mjs) for those workers */
  ortGpuModuleUrl?: string | URL;
}


/** measureSpeed()'s result: whole-patch wall times on this machine, and a worker's start-up (s). */
export interface SpeedMeasurement {
  points: { edge: number; threads: number; seconds: number }[];
  startSeconds?: number;
  threads?: number;
  seconds?: number;
  /** every run the probe timed (s), each edge's fastest being its point, and the untimed first run of the larger */
  runs?: { untimed: number; small: number[]; large: number[] };
  /** set when the probe's worker is kept for the next run of these weights (its sha256) */
  warmKey?: string;
  /** how long the kept worker waits for that run before it is given back (s) */
  warmIdleSeconds?: number;
  /** workers kept (1) */
  keptWorkers?: number;
}


/** A method's parameters, by the schema's `<method>.<param>` names without the prefix (tessera.schema() lists them). */
export type MethodParams = Record<string, number | string>;



/** plan() of a method request: its memory in the module's heap, or the refusal with the largest volume that fits. */
export interface MethodPlan {
  /** the held plan's id (see Plan) */
  readonly id: string;
  readonly feasible: boolean;
  readonly message: string;
  /** why it is not feasible: 'BudgetExceeded' (over the module's heap) or 'InvalidArgument' (an input missing) */
  readonly refusal: string;
  readonly method: MethodName;
  readonly title: string;
  /** steps planned (iterations; an upper bound) */
  readonly methodSteps: number;
  readonly threads: number;
  readonly inputBytes: number;
  readonly workspaceBytes: number;
  readonly moduleHeapBytes: number;
  readonly peakBytes: number;
  readonly largestVoxels: number;
  /** the volume's dims scaled alike to hold at most largestVoxels: the largest crop that fits the module heap */
  readonly largestDims: readonly [number, number, number];
  readonly wholeVolume: true;
  readonly networks: 0;
  readonly tilesInFlight: 0;
  readonly warning: string;
}



/** plan() of a pipeline request: its stages and the module heap they need, or the refusal. */
export interface PipelinePlan {
  /** the held plan's id (see Plan) */
  readonly id: string;
  /** the classical method that inverts (the request's, or 'tv' when neither a method nor a network is given); '' for a network */
  readonly method: MethodName | '';
  readonly feasible: boolean;
  readonly message: string;
  readonly pipeline: true;
  readonly stages: readonly string[];
  readonly inputBytes: number;
  readonly workspaceBytes: number;
  readonly moduleHeapBytes: number;
  readonly peakBytes: number;
  readonly largestVoxels: number;
  /** the volume's dims scaled alike to hold at most largestVoxels: the largest crop that fits the module heap */
  readonly largestDims: readonly [number, number, number];
  readonly threads: number;
  readonly networks: 0;
  readonly tilesInFlight: 0;
  readonly warning: string;
}

/** score()'s result: QSM-CI's scores of a χ map against a reference. */
export interface Scores {
  /** 100 · ‖(chi − mean chi) − (reference − mean reference)‖ / ‖reference − mean reference‖ over the mask (%) */
  nrmse: number;
  /** the same after fitting chi = s · reference + i and replacing chi by (chi − i) / s (%) */
  nrmseDetrended: number;
  /** 100 · ‖LoG(chi) − LoG(reference)‖ / ‖LoG(reference)‖ over the mask, LoG σ 1.5 voxels (%) */
  hfen: number;
  /** Pearson's correlation over the mask */
  cc: number;
  /** SSIM with 5×5×5 uniform windows, C1 1e-4, C2 1e-6 (ppm²), averaged over the mask */
  xsim: number;
  /** voxels in the mask */
  voxels: number;
}

/** pipeline()'s result: every intermediate as a Volume with the input's geometry. */
export interface PipelineResult {
  mask: Volume<Uint8Array>;
  /** every echo's unwrapped phase (rad); null from a total field */
  unwrappedPhase: Volume<Float32Array> | null;
  /** the receive-phase offset removed (rad); null from a total field */
  offset: Volume<Float32Array> | null;
  fieldHz: Volume<Float32Array>;
  /** the total field (ppm) */
  totalField: Volume<Float32Array>;
  /** null from a total field */
  fitResidual: Volume<Float32Array> | null;
  /** from a total field, the mask */
  fitMask: Volume<Uint8Array>;
  /** the local field (ppm) after background removal; null for a total-field method (tfi: no background removal runs) */
  localField: Volume<Float32Array> | null;
  /** where the local field and χ are defined (V-SHARP erodes the mask; the fit mask for a total-field method) */
  localMask: Volume<Uint8Array>;
  /** χ (ppm); null when neither a method nor a network was asked for */
  chi: Volume<Float32Array> | null;
  /** also 'swi' (else null): the SWI (RSS magnitude × phase mask^power), as swi()'s swi */
  swi: Volume<Float32Array> | null;
  /** also 'swi': the SWI's minimum-intensity projection over the slab (swi.minIpSlab mm) */
  minIp: Volume<Float32Array> | null;
  /** also 'swi': the echoes' root-sum-of-squares magnitude */
  swiMagnitude: Volume<Float32Array> | null;
  /** also 'swi': the high-passed combined phase at the longest TE (rad) */
  swiPhase: Volume<Float32Array> | null;
  /** also 'swi': the phase mask in [0, 1] before the power */
  swiPhaseMask: Volume<Float32Array> | null;
  /** also 'r2star' (else null): R2* (s⁻¹) in [0, 2000] on the brain mask, 0 outside */
  r2star: Volume<Float32Array> | null;
  /** also 'r2star': T2* (s) = 1/R2*, 1 where R2* < 1 s⁻¹, 0 outside the mask */
  t2star: Volume<Float32Array> | null;
  /** also 'r2star': the fitted signal at TE 0 */
  s0: Volume<Float32Array> | null;
  /** also 'r2star': the goodness-of-fit map: RMS residual of the fitted decay over the mean signal */
  r2starResidual: Volume<Float32Array> | null;
  report: {
    plan: { feasible: boolean; stages: string[]; moduleHeapBytes: number; peakBytes: number };
    wallSeconds: number;
    memory: { moduleHeapBytes: number; estimatedPeakBytes: number };
    /** the methods text of the run (tessera.methodsText() lays it out as Markdown with the command) */
    methods: MethodsText;
  };
  /** the network's run report when a network inverted the local field */
  networkReport?: RunReport;
}

/**
 * A pipeline run's methods text (pipeline()'s report.methods), made in C++ from the request it ran with: every step in
 * order with its parameters and the paper of each method, cited from the C++ registry of methods and networks.
 */
export interface MethodsText {
  /** the paragraph: the steps' sentences in order, papers cited as [n] */
  text: string;
  /** the numbered references (references[0] is [1]), in order of first citation */
  references: string[];
  steps: Array<{
    /** 'acquisition' | 'brain mask' | 'unwrapping' | 'echo fit' | 'background removal' | 'inversion' | 'SWI' | 'minIP' | 'R2*' */
    stage: string;
    /** the method as people read it: 'V-SHARP', 'RTS', 'CLEAR-SWI', 'ARLO' ('' for the acquisition) */
    title: string;
    /** the step's sentence in text */
    sentence: string;
    /** the parameters it ran with, defaults filled in: schema name → value with its unit ('vsharp.maxRadius': '18 voxels') */
    parameters: Record<string, string>;
    /** the numbers of its references in references (1-based) */
    references: number[];
  }>;
  /** the request's options the command restates (no volumes) */
  request: Record<string, unknown>;
  /** the `tessera-qsm pipeline` command that reruns the run, files as placeholders ('<phase.nii.gz>'): methodsText() names them */
  command: string;
}

/** The files a reproducing command names (methodsText()); placeholders for those not given. */
export interface CommandFiles {
  /** holding the phase in radians as pipeline() was given it (the command reads it with --phase-units rad) */
  phase?: string;
  totalField?: string;
  magnitude?: string;
  mask?: string;
  /** the network's ONNX file (with model) */
  weights?: string;
  /** χ's file (.nii or .nii.gz); the optional outputs go next to it as <out>_swi, _minIP, _R2starmap, _T2starmap */
  out?: string;
}


/** swi()'s result: Volumes with the input's geometry. */
export interface SwiResult {
  /** the RSS magnitude × phase mask^power */
  swi: Volume<Float32Array>;
  /** the minimum-intensity projection of swi over the slab */
  minIp: Volume<Float32Array>;
  /** the echoes' root-sum-of-squares magnitude */
  magnitude: Volume<Float32Array>;
  /** the high-passed combined phase at the longest TE (rad) */
  phase: Volume<Float32Array>;
  /** the phase mask in [0, 1] before the power */
  phaseMask: Volume<Float32Array>;
  mask: Volume<Uint8Array>;
  /** every echo's unwrapped phase (rad) */
  unwrappedPhase: Volume<Float32Array>;
  report: ContrastReport;
}

/** swi()'s and r2star()'s report: the memory plan the run was made under (refused up front, BudgetExceeded, when over it) and the heap it used. */
export interface ContrastReport {
  wallSeconds: number;
  /** stages ('brain mask', 'echo fit', 'SWI', 'minIP'; or 'R2*'), inputBytes, workspaceBytes, moduleHeapBytes, largestVoxels */
  plan: Omit<PipelinePlan, 'id' | 'pipeline'> & { pipeline: true };
  /** moduleHeapVsPlan: the module's heap after the run over the plan's (<= 1 in a fresh runtime) */
  memory: { moduleHeapBytes: number; estimatedPeakBytes: number; moduleHeapVsPlan: number };
}

/** r2star()'s result: Volumes with the input's geometry. */
export interface R2starResult {
  /** s⁻¹, in [0, 2000]; 0 outside the mask */
  r2star: Volume<Float32Array>;
  /** s: 1/R2*, 1 where R2* < 1 s⁻¹; 0 outside the mask */
  t2star: Volume<Float32Array>;
  /** the fitted signal at TE 0 */
  s0: Volume<Float32Array>;
  /** RMS residual of the fitted decay over the mean signal */
  residual: Volume<Float32Array>;
  method: NonNullable<R2starOptions['method']>;
  report: ContrastReport;
}

/** phantomScan()'s result: the phantom head scanned as multi-echo gradient echo, with its truths. */
export interface PhantomScan {
  chi: Float32Array;
  mask: Uint8Array;
  headMask: Uint8Array;
  phase: Float32Array;
  magnitude: Float32Array;
  totalField: Float32Array;
  localField: Float32Array;
  backgroundField: Float32Array;
  te: number[];
  b0: number;
}

export interface Status {
  running: number;
  liveWorkers: number;
  /** workers measureSpeed kept for the next run (counted in liveWorkers) */
  warmWorkers: number;
  moduleHeapBytes: number;
  /** the allocator's break: every byte the module's malloc took (its high-water), below moduleHeapBytes */
  moduleHeapBreakBytes: number;
}

export interface DownloadProgress {
  loaded: number;
  total: number | null;
}

export declare class Tessera {
  registry(): Promise<ModelInfo[]>;
  model(id: string): Promise<ModelInfo>;
  limits(): Promise<Limits>;
  /** the request schema: every option with its unit, default and range (defined once, in C++) */
  schema(): Promise<RequestOption[]>;
  plan(request: PlanRequest): Promise<Plan>;
  plan(request: MethodPlanRequest): Promise<MethodPlan>;
  plan(request: PipelinePlanRequest): Promise<PipelinePlan>;
  loadWeights(
    id: string,
    options?: {
      sources?: string | URL | Blob | ArrayBuffer | Uint8Array | (string | URL | Blob | ArrayBuffer | Uint8Array)[];
      onProgress?: (p: DownloadProgress & { file: string; index: number; files: number }) => void;
      signal?: AbortSignal;
      /** false: skip the registry's size and sha256 checks (your own export of the network; a differing sha256 is warned) */
      verifyWeights?: boolean;
    },
  ): Promise<Uint8Array[]>;
  /**
   * chi holds the result as a Volume with the input's geometry (the affine of the input Volume it came from); for iQFM
   * (quantity 'local-field') it is the local field, also given as localField (the same Volume)
   */
  invert(request: InvertRequest): Promise<{ chi: Volume<Float32Array>; report: RunReport; quantity: 'chi' | 'local-field'; localField?: Volume<Float32Array> }>;
  invert(request: MethodRequest): Promise<{ chi: Volume<Float32Array>; report: { method: MethodName; wallSeconds: number; plan: Omit<MethodPlan, 'id'> & { readonly id?: string }; memory: { moduleHeapBytes: number; estimatedPeakBytes: number; moduleHeapVsPlan: number } }; quantity: 'chi' }>;
  pipeline(request: PipelineRequest): Promise<PipelineResult>;
  /** a pipeline() run's methods text as Markdown (paragraph, references, parameters, command) and its reproducing command on files */
  methodsText(report: PipelineResult['report'], options?: { files?: CommandFiles }): { markdown: string; command: string; args: string[] };
  swi(request: SwiRequest): Promise<SwiResult>;
  r2star(request: R2starRequest): Promise<R2starResult>;
  phantomScan(request: { geometry: Geometry; seed?: number; te?: number[]; b0?: number; snr?: number }): Promise<PhantomScan>;
  phantom(request: { geometry: Geometry; seed?: number; noise?: number }): Promise<{ chi: Float32Array; field: Float32Array; mask: Uint8Array }>;
  tkd(request: { field: Float32Array | Volume<VoxelArray>; mask?: ArrayLike<number> | Volume<VoxelArray>; geometry?: Geometry; threshold?: number; keepInputs?: boolean }): Promise<Volume<Float32Array>>;
  /**
   * QSM-CI's scores of chi against reference inside mask (all voxels without one): nrmse (demeaned, %),
   * nrmseDetrended (%), hfen (%; NaN when the reference has no high frequency in the mask), cc (Pearson), xsim
   * (SSIM, 5×5×5 windows, C1 1e-4, C2 1e-6); voxels: the mask's count. Arrays need geometry (its dims).
   */
  score(request: {
    chi: ArrayLike<number> | Volume<VoxelArray>;
    reference: ArrayLike<number> | Volume<VoxelArray>;
    mask?: ArrayLike<number> | Volume<VoxelArray>;
    geometry?: Geometry;
  }): Promise<Scores>;
  /** a field resampled to its B0-aligned grid and back (what b0Align does around the network) */
  b0Resample(request: {
    field: Float32Array | Volume<VoxelArray>;
    mask?: ArrayLike<number> | Volume<VoxelArray>;
    geometry?: Geometry;
    interpolation?: 'spline' | 'cubic' | 'linear';
    masked?: boolean;
  }): Promise<{ tiltDegrees: number; rotation: number[]; geometry: Geometry; field: Float32Array; mask: Uint8Array; back: Float32Array }>;
  /**
   * How far a network looks: its ONNX graph's receptive field, and with probe: true the measured profile (pass
   * probe as a request's context).
   */
  receptiveField(request: {
    weights: Uint8Array | ArrayBuffer | (Uint8Array | ArrayBuffer)[];
    model?: string;
    spec?: NetworkSpec;
    probe?: boolean;
    epsilon?: number;
    maxEdge?: number;
    signal?: AbortSignal;
    onProgress?: (p: Progress) => void;
  }): Promise<ReceptiveField>;
  /**
   * A network's memory cost measured in fresh ONNX Runtime workers (a few small patches, seconds), fitted in C++ so
   * that every measured heap lies under fixedBytes + bytesPerVoxel · voxels. Remembered per weights array.
   */
  calibrate(request: {
    weights: Uint8Array | ArrayBuffer | (Uint8Array | ArrayBuffer)[];
    spec?: NetworkSpec;
    model?: string;
    threadsPerWorker?: number;
    signal?: AbortSignal;
    onProgress?: (p: CalibrationProgress) => void;
  }): Promise<Calibration>;

  /** this machine's speed of a network (a few whole patches at two edges), for plan()'s time estimate */
  measureSpeed(request: {
    weights: Uint8Array | ArrayBuffer | (Uint8Array | ArrayBuffer)[];
    model?: string;
    spec?: NetworkSpec;
    threads?: number;
    repeats?: number;
    /** the run's patch voxels (a plan's voxelsRun): the probe's patches are then sized to a few % of that run */
    runVoxels?: number;
    signal?: AbortSignal;
    onProgress?: (p: Progress) => void;
  }): Promise<SpeedMeasurement>;
  /** gives back the worker measureSpeed kept for the next run, if any */
  release(): Promise<void>;
  status(): Promise<Status>;
  terminate(): Promise<void>;
}

/** A network's receptive field: from its ONNX graph, and (probe) measured. */
export interface ReceptiveField {
  graph: {
    /** per axis, the larger of below and above; null when global */
    radius: Triple | null;
    below: Triple | null;
    above: Triple | null;
    radiusMax: number;
    /** an operation mixes the whole extent (instance normalisation, global pooling, a spatial reduction) */
    global: boolean;
    /** operations the derivation could not follow (the radius may be larger) */
    unknownOps: string[];
    ops: Record<string, number>;
  };
  probe?: {
    /** fraction of the response within each radius 0, 1, …: pass the probe as a request's context */
    within: number[];
    radius90: number;
    radius99: number;
    outsideFraction: number;
    total: number;
    edge: number;
    epsilon: number;
    seconds: number;
  };
}

/** The receptive field of ONNX bytes, from the graph (no runtime needed). */
export declare function graphReceptiveField(bytes: Uint8Array | ArrayBuffer): ReceptiveField['graph'];
/** The probe's profile from the outputs for the centre voxel raised (plus) and lowered (minus). */
export declare function contextProfile(
  plus: ArrayLike<number>,
  minus: ArrayLike<number>,
  dims: Triple,
  centre: Triple,
): { within: number[]; radius90: number; radius99: number; outsideFraction: number; total: number };

export declare function createTessera(options?: RuntimeOptions): Promise<Tessera>;

/** The execution providers Tessera can ask for, fastest first. */
export declare const EXECUTION_PROVIDERS: readonly ExecutionProvider[];
/** The operators of ONNX bytes that decide where the network can run (weights skipped). */
export declare function graphOperators(bytes: Uint8Array | ArrayBuffer): GraphOperator[];
/** Why an execution provider cannot run these operators (ONNX Runtime Web 1.30.0); empty when it can. */
export declare function unsupportedOperators(provider: ExecutionProvider, ops: GraphOperator[]): string[];
/** What this JS realm offers: navigator.gpu → webgpu, navigator.ml → webnn; node has neither. */
export declare function platformProviders(globalObject?: object): PlatformProviders;
/** The execution provider for a network: the first preferred one the platform offers and the graph allows, else wasm. */
export declare function selectExecutionProvider(a: {
  preference: ExecutionProvider[];
  platform: PlatformProviders;
  ops: GraphOperator[] | null;
}): ExecutionProviderChoice;

export declare class TesseraError extends Error {
  constructor(message: string, code: string, options?: { cause?: unknown });
  code: string;
}

export declare function loadModel(
  source: string | URL | Blob | ArrayBuffer | Uint8Array,
  options?: { expectedBytes?: number; sha256?: string; onProgress?: (p: DownloadProgress) => void; signal?: AbortSignal },
): Promise<Uint8Array>;

export declare function sha256Hex(bytes: ArrayBuffer | Uint8Array): Promise<string>;

/** Typed arrays a Volume's voxels may be held in. */
export type VoxelArray = Float32Array | Float64Array | Uint8Array | Int8Array | Int16Array | Uint16Array | Int32Array | Uint32Array;

/**
 * The one volume type (bindings/js/volume.js, like ITK-Wasm's Image): what the NIfTI readers return and the
 * input loader hands out. Voxels x fastest; several echoes one after the other.
 */
export interface Volume<D extends VoxelArray = Float32Array> {
  dims: Triple;
  /** mm */
  voxelMm: Triple;
  /** row-major 4×4, voxel index → world (the file's units) */
  affine: number[];
  /** the B0 direction in the voxel axes */
  b0Dir: Triple;
  /** nx·ny·nz·echoes values */
  data: D;
  /** volumes along the 4th dimension (1 for 3D) */
  echoes: number;
  description?: string;
}

/** A NIfTI reader's Volume, with the header and raw bytes writeNifti keeps. */
export interface NiftiImage extends Volume<Float32Array> {
  header: Record<string, unknown>;
  datatype: number;
  affineSource: 'sform' | 'qform' | 'pixdim';
  b0DirSource: string;
  raw: ArrayBuffer;
}

/** A checked Volume (named TypeError / RangeError otherwise); extra fields are kept. */
export declare function makeVolume<D extends VoxelArray>(fields: {
  dims: ArrayLike<number>;
  voxelMm: ArrayLike<number>;
  affine?: ArrayLike<number> | number[][];
  b0Dir?: ArrayLike<number>;
  data: D;
  echoes?: number;
  description?: string;
  [k: string]: unknown;
}): Volume<D>;
/** {dims, voxelMm, b0Dir} of a Volume. */
export declare function geometryOf(volume: { dims: ArrayLike<number>; voxelMm: ArrayLike<number>; b0Dir: ArrayLike<number> }): Geometry;
/** A refusal of the input loader: code + the numbers behind it. */
export declare class InputError extends Error {
  code: string;
  [k: string]: unknown;
}
/** Echo times in seconds, one per echo (TE above 1 s refused as milliseconds); an InputError otherwise. */
export declare function checkEchoTimes(te: number | string | number[], echoes?: number): number[];
/** NaN or infinite values of an input in words (inside the mask: the refusal and its fix; outside: set to 0), as the API, CLI and page say them. */
export declare function nonFiniteText(role: string, count: number, where: 'inside' | 'outside'): string;
/** The one input loader of the CLI and the page: NIfTI bytes in, checked Volumes out (see inputs.js). */
export declare function loadInputs(
  files: { field?: ArrayBuffer | Uint8Array; phase?: ArrayBuffer | Uint8Array; mask?: ArrayBuffer | Uint8Array; magnitude?: ArrayBuffer | Uint8Array },
  options?: {
    units?: 'ppm' | 'hz' | 'rad/s';
    b0?: number;
    te?: number[];
    phaseUnits?: string;
    phaseScale?: number;
    maskFrom?: 'file' | 'magnitude';
    fraction?: number;
    needMask?: boolean;
    convert?: boolean;
  },
): Promise<{
  kind: 'field' | 'phase';
  field?: Volume;
  phase?: Volume;
  input: NiftiImage;
  geometry: Geometry;
  echoes: number;
  te?: number[];
  mask: Volume<Uint8Array> | null;
  magnitude: Volume | null;
  notes: string[];
  [k: string]: unknown;
}>;

export declare function readNifti(bytes: ArrayBuffer | Uint8Array): NiftiImage;
export declare function readMask(bytes: ArrayBuffer | Uint8Array): NiftiImage & { mask: Uint8Array };
export declare function writeNifti(
  data: Float32Array,
  like: NiftiImage | { dims: Triple; voxelMm: Triple; affine?: number[] },
  options?: { gzip?: boolean; description?: string },
): Promise<Uint8Array>;
export declare function hzToPpm(data: Float32Array, b0Tesla: number): Float32Array;
export declare function thresholdMask(magnitude: Float32Array, fraction?: number, percentile?: number): Uint8Array;
export declare function readNiftiAsync(bytes: ArrayBuffer | Uint8Array): Promise<NiftiImage>;
export declare function radPerSecToPpm(data: Float32Array, b0Tesla: number): Float32Array;
export declare const GAMMA_BAR_MHZ_PER_T: number;
/** A 3D or 4D (echoes along the 4th dim) NIfTI: the 3D image plus every echo's data, echo after echo. */
export declare function readEchoes(bytes: ArrayBuffer | Uint8Array): NiftiImage & { echoes: number };
export declare function readEchoesAsync(bytes: ArrayBuffer | Uint8Array): Promise<NiftiImage & { echoes: number }>;
/** 1 where the value is finite and not 0, else 0 (the mask rule of readMask). */
export declare function maskFromValues(data: ArrayLike<number>): Uint8Array;
/** A refusal of a phase's units (phaseToRadians, loadInputs): a code and the numbers behind it, no words of the caller's. */
export declare class PhaseRefusal extends Error {
  code: string;
  min?: number;
  max?: number;
  whole?: boolean;
  datatype?: string;
  units?: string;
  scale?: number;
  lo?: number;
  hi?: number;
}
/**
 * A PhaseRefusal in words, the advice naming the caller's own options (words.names: rad, deg, scanner, field,
 * unwrapped?, scale?; leave out one the caller does not offer).
 */
export declare function phrasePhaseRefusal(
  e: { code: string; [k: string]: unknown },
  words?: { subject: string; verb: string; names: Record<string, string> },
): string;
/** Where the browser weights cache lives: a CacheStorage (default: the page's caches). */
export interface WeightsCacheOptions {
  caches?: CacheStorage;
}
/** A registry weights file as the cache keys it. */
export interface CachedWeightsFile {
  file: string;
  sha256: string;
}
/** The cached bytes of every file (null when one is missing or there is no cache); verify them (loadModel with sha256). */
export declare function readCachedWeights(files: CachedWeightsFile[], o?: WeightsCacheOptions): Promise<Uint8Array[] | null>;
/** Stores verified weights; how many files were stored (0 without a cache). */
export declare function cacheWeights(files: CachedWeightsFile[], bytes: Uint8Array[], o?: WeightsCacheOptions): Promise<number>;
/** What the cache holds, in storage order, or null when there is no cache. */
export declare function listCachedWeights(o?: WeightsCacheOptions): Promise<CachedWeightsFile[] | null>;
/** Empties the weights cache; true when there was one to empty. */
export declare function clearWeightsCache(o?: WeightsCacheOptions): Promise<boolean>;
/**
 * A registry network's weights through the cache: the cached copies when all are there and pass load's checks, else
 * load() from the official source (sources undefined), stored once verified.
 */
export declare function loadWeightsCached(
  files: Array<CachedWeightsFile & { bytes?: number }>,
  load: (sources?: Uint8Array[]) => Promise<Uint8Array[]>,
  o?: WeightsCacheOptions,
): Promise<{ bytes: Uint8Array[]; fromCache: boolean }>;
/** A byte count as the package words it: GB (2 decimals) from 1 GB up, else MB (1 decimal). */
export declare function bytesText(bytes: number): string;
/** Phase to radians in (-π, π]: units checked (degrees, scanner integers, unwrapped refused with advice unless chosen). */
export declare function phaseToRadians(
  img: { data: Float32Array; datatype?: number; header?: Record<string, unknown> },
  options?: {
    units?: 'rad' | 'deg' | 'scanner' | 'unwrapped';
    scale?: number;
    inPlace?: boolean;
  },
): {
  phase: Float32Array;
  units: 'rad' | 'deg' | 'scanner' | 'unwrapped' | 'scale';
  scale: number;
  rewrapped: boolean;
  range: [number, number];
  nonFinite: number;
  notes: string[];
};

/** The `tessera-qsm pipeline` arguments that rerun a pipeline request (report.methods.request) on files. */
export declare function pipelineArgs(request: MethodsText['request'], files?: CommandFiles): string[];
/** Arguments as one shell line (words quoted where needed). */
export declare function commandLine(args: string[]): string;
/** A methods text as Markdown with the command (default: methods.command). */
export declare function methodsMarkdown(methods: MethodsText, command?: string): string;
/**
 * A phase difference of two echoes (a Siemens field map, one 3D volume) to radians: integers spanning at least 4π are
 * read as scanner integers with a warning in notes; anything else as phaseToRadians reads a phase.
 */
export declare function phaseDifferenceToRadians(
  img: { data: Float32Array; datatype?: number; header?: Record<string, unknown> },
  options?: { units?: 'rad' | 'deg' | 'scanner' | 'unwrapped'; scale?: number; inPlace?: boolean },
): ReturnType<typeof phaseToRadians>;

/** The pipeline's optional outputs as files: pipeline()'s result key, the BIDS derivative suffix, the `also` choice that makes it, units, what it is, the methods text's stage. */
export interface AlsoOutput {
  key: 'swi' | 'minIp' | 'r2star' | 't2star';
  suffix: string;
  also: 'swi' | 'r2star';
  units: string;
  stage: string;
  label: string;
  description: string;
}
export declare const ALSO_OUTPUTS: readonly AlsoOutput[];
/** The optional output of this result key, or undefined. */
export declare function alsoOutput(key: string): AlsoOutput | undefined;
