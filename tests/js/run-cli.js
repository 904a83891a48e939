// Runs the command-line tool (bindings/js/cli.js) in a child node process, as a user's shell would.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const CLI = fileURLToPath(new URL('../../bindings/js/cli.js', import.meta.url));

/**
 * Runs `node cli.js ...args` in cwd; resolves (never rejects) with its exit code, signal and output.
 * onStderr(stderrSoFar, child): called on every chunk of stderr (to interrupt the run at a point of its progress).
 */
export function runCli(args, { cwd, onStderr } = {}) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => {
      stderr += d;
      onStderr?.(stderr, child);
    });
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}
