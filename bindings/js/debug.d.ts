// tessera-qsm/debug: test and benchmark hooks, not the package's API (bindings/js/debug.js).
import type { Tessera } from './index.js';

/** The wasm module itself (Embind): its functions are internal and may change with any release. */
export declare function loadTesseraModule(options?: { pthreadPoolSize?: number; wasmBase?: string | URL }): Promise<any>;
/** The requests the runtime's C++ core has read (parsed) since it started. */
export declare function counters(tessera: Tessera): Promise<{ requestParses: number; graphReads: number }>;
/** Calls made to the runtime and not yet answered. */
export declare function pendingCalls(tessera: Tessera): number;
/** The runtime forgets its measured speeds: the next measureSpeed measures again. */
export declare function forgetSpeeds(tessera: Tessera): Promise<void>;
