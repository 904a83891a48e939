#!/usr/bin/env node
// Which registry networks could run on ONNX Runtime Web's WebGPU / WebNN EPs: the selection of
// bindings/js/execution-provider.js on each network's graph, as if the platform offered both (README table).
// Usage: node scripts/ep-table.js
// Graphs: the architecture-faithful stand-ins (scripts/standins*.js; the operators and kernel ranks are the real
// exports', the channel counts do not matter here, so they are built small) and the bundled demo network's real
// file. AutoQSM and QSMGAN have no stand-in: their rows are not printed (the README says them from the papers).
import { readFileSync } from 'node:fs';
import { ALL_STANDINS, smallStandin } from './standins-small.js';
import { graphOperators, selectExecutionProvider } from '../bindings/js/execution-provider.js';

const graphs = [];
for (const id of Object.keys(ALL_STANDINS)) graphs.push({ id, source: 'stand-in', bytes: smallStandin(id) });
graphs.push({ id: 'demo-unet', source: 'web/models/demo-unet.onnx', bytes: readFileSync(new URL('../web/models/demo-unet.onnx', import.meta.url)) });

const platform = { node: false, webgpu: true, webnn: true };
console.log('| network (graph) | 3D operators | WebGPU (ORT 1.30.0) | WebNN (ORT 1.30.0) |');
console.log('|---|---|---|---|');
for (const g of graphs) {
  const ops = graphOperators(g.bytes);
  const vol = [...new Set(ops.filter((o) => o.rank === 3).map((o) => o.op))].join(', '); // counts: of the small build
  const verdict = (ep) => {
    const sel = selectExecutionProvider({ preference: [ep, 'wasm'], platform, ops });
    return sel.provider === ep ? 'yes' : `no: ${sel.skipped[0].reason.replace(/^the network has operators it cannot run: /, '').replace(/ \(\d+ nodes?\)/g, '').replace(/: [^;]*/g, '')}`;
  };
  console.log(`| ${g.id} (${g.source}) | ${vol || '—'} | ${verdict('webgpu')} | ${verdict('webnn')} |`);
}
