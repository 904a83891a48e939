// The command line's exit codes and its error: a message the user can fix, printed as "error: message".

export const EXIT_OK = 0;
export const EXIT_ERROR = 1;
/** A usage error, or a run the memory planner refuses. */
export const EXIT_USAGE = 2;

/** An error the user can fix: printed as "error: message", never with a stack. exit: the exit code. */
export class CliError extends Error {
  constructor(message, exit = EXIT_ERROR, code = 'InvalidArgument') {
    super(message);
    this.code = code;
    this.exit = exit;
  }
}

/** A usage error (exit 2). */
export const usageError = (message) => new CliError(message, EXIT_USAGE, 'Usage');
