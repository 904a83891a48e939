#!/usr/bin/env node
// tessera-qsm: the command line. Reads a NIfTI field map (or, for the phase networks iQSM / iQFM / iQSM+,
// a wrapped phase, 3D or 4D with the echoes along the 4th dim) and a mask, runs a deep-learning QSM network
// through the Tessera runtime (C++ planner/tiler in wasm + ONNX Runtime worker pools) and writes χ (iQFM:
// the local field) as NIfTI with the input's 3D header; `plan` prints the memory budget of a run, `models`
// the registry; `score` QSM-CI's scores of a χ map against a reference; `qsm-ci` a QSM-CI algorithm run on a directory.
//
// Exit codes: 0 success; 1 error (runtime, input files, weights); 2 usage error, or a run the
// memory planner refuses; 130 cancelled by Ctrl-C (SIGINT), 143 by SIGTERM.
import { createTessera } from './index.js';
import { CliError, EXIT_OK, EXIT_ERROR, EXIT_USAGE, usageError } from './cli/errors.js';
import { removeOwnPartials } from './cli/files.js';
import { parse } from './cli/flags.js';
import { versions } from './cli/format.js';
import { helpText, helpNeedsSchema } from './cli/help.js';
import { cmdMethods, cmdModels, cmdCalibrate, cmdReceptiveField } from './cli/info.js';
import { cmdInvert } from './cli/invert.js';
import { cmdPipeline } from './cli/pipeline.js';
import { cmdSwi, cmdR2star } from './cli/contrast.js';
import { cmdPlan } from './cli/plan.js';
import { cmdQsmCi } from './cli/qsm-ci.js';
import { cmdScore } from './cli/score.js';
import { Progress } from './cli/progress.js';
import { SCHEMA } from './cli/schema.js';

const COMMANDS = { invert: cmdInvert, pipeline: cmdPipeline, swi: cmdSwi, r2star: cmdR2star, plan: cmdPlan, models: cmdModels, methods: cmdMethods, 'receptive-field': cmdReceptiveField, calibrate: cmdCalibrate, score: cmdScore, 'qsm-ci': cmdQsmCi };

/** Commands whose flags include the request's options (from the schema). */
const REQUEST_COMMANDS = ['invert', 'plan', 'pipeline', 'swi', 'r2star'];


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
        process.stderr.write(helpText('main'));
        return EXIT_USAGE;
      }
      out(helpText(topic, helpNeedsSchema(topic) ? SCHEMA : undefined));
      return EXIT_OK;
    }
    if (command === '--version' || command === '-v') {
      out(`tessera-qsm ${versions().tessera ?? 'unknown'}\n`);
      return EXIT_OK;
    }
    if (!COMMANDS[command]) throw usageError(`unknown command '${command}' (commands: invert, pipeline, swi, r2star, plan, models, methods, receptive-field, calibrate, score, qsm-ci); see \`tessera-qsm --help\``);
    if (rest.includes('--help') || rest.includes('-h')) {
      out(helpText(command, helpNeedsSchema(command) ? SCHEMA : undefined));
      return EXIT_OK;
    }
    // The request schema (tessera.schema()'s, generated from C++ into cli/schema.js).
    const schema = REQUEST_COMMANDS.includes(command) ? SCHEMA : undefined;
    controller.signal.throwIfAborted();
    // `qsm-ci DIR`: the input directory may come first, without its flag.
    const argv = command === 'qsm-ci' && rest.length && !rest[0].startsWith('-') ? ['--in', ...rest] : rest;
    const { o, values } = parse(command, argv, schema);
    progress = new Progress({ quiet: !!o.quiet });
    const ctx = {
      args,
      out,
      signal: controller.signal,
      progress,
      schema,
      values,
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
