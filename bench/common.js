// Helpers shared by the benchmark scripts.
import fs from 'node:fs';
import os from 'node:os';

/** The stand-in network's path; exits with the command that makes it when the file is missing. */
export function requireStandin(path) {
  if (!fs.existsSync(path)) {
    console.error(`${path} not found: run  node scripts/make_standins.js /tmp/standins  first`);
    process.exit(2);
  }
  return path;
}

/** The stand-in network's bytes (see requireStandin). */
export function readStandin(path) {
  return new Uint8Array(fs.readFileSync(requireStandin(path)));
}

/** The 1, 5 and 15 minute load averages, for the record of a run on a shared machine. */
export const loadavg = () => os.loadavg().map((x) => x.toFixed(2)).join(' ');
