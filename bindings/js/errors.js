// Tessera's JavaScript error class: every failure the runtime reports carries a code.

/** An error from Tessera: `code` names the kind (InvalidArgument, BudgetExceeded, RunnerFailed, ...). */
export class TesseraError extends Error {
  /**
   * @param {string} message what went wrong, in words a user understands (and the fix, where there is one)
   * @param {string} code stable machine-readable kind
   * @param {{cause?: unknown}} [options]
   */
  constructor(message, code, options) {
    super(message, options);
    this.name = 'TesseraError';
    this.code = code;
  }
}

/** Serialisable form of an error, for postMessage. */
export function errorToMessage(e) {
  if (e && typeof e === 'object') {
    const m = { name: e.name ?? 'Error', code: e.code ?? 'Internal', message: e.message ?? String(e) };
    if (e.intermediates) m.intermediates = e.intermediates; // a failed pipeline's finished stages (typed arrays)
    return m;
  }
  return { name: 'Error', code: 'Internal', message: String(e) };
}

/** Rebuilds an error posted by errorToMessage: AbortError stays a DOMException, the rest TesseraError. */
export function errorFromMessage(m) {
  if (m.name === 'AbortError') return new DOMException(m.message, 'AbortError');
  const e = new TesseraError(m.message, m.code ?? 'Internal');
  if (m.intermediates) e.intermediates = m.intermediates;
  return e;
}

/** A TesseraError from an error thrown by the wasm module (its name is "TesseraError" and it has a code). */
/** Runs f (a call into the wasm module); a thrown module error becomes a TesseraError. */
export function callModule(f) {
  try {
    return f();
  } catch (e) {
    throw fromModuleError(e);
  }
}

export function fromModuleError(e) {
  if (e instanceof TesseraError) return e;
  if (e && typeof e === 'object' && e.name === 'TesseraError') return new TesseraError(e.message, e.code ?? 'Internal');
  if (e && typeof e === 'object' && e.name === 'AbortError') return e;
  return new TesseraError(e?.message ?? String(e), e?.code ?? 'Internal', { cause: e });
}
