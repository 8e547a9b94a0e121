#!/usr/bin/env node
// bench/ort_bench.js — times one ONNX model in ONNX Runtime (CPU execution
// provider, from the onnxruntime-node package in bench/node_modules).
//
//   node bench/ort_bench.js MODEL.onnx INPUTS.safetensors OUTPUTS.safetensors RUNS [THREADS]
//
// Session: graph optimisation level "all", THREADS (default 2) intra-op
// threads, one inter-op thread, sequential execution. One warm-up run, then
// RUNS timed runs of session.run; the outputs of the last run are written to
// OUTPUTS.safetensors (F32) for the cross-check, and one JSON line goes to
// stdout: {"framework": "ort", "version", "load_ms", "warmup_ms", "runs_ms": [...],
// "intra_op_threads", "inter_op_threads", "allow_spinning"}.
//
// Invariants: inputs are fed under their safetensors names, with their
// stored dtype (the exported models take int64 ids); every model input
// must be present; only F32 outputs are accepted. Errors are one line on
// stderr and exit status 1.
'use strict';

const fs = require('fs');

function fail(msg) {
  process.stderr.write('ort_bench: ' + msg + '\n');
  process.exit(1);
}

const DTYPES = {
  F32: { type: 'float32', size: 4, make: (b) => new Float32Array(b) },
  F64: { type: 'float64', size: 8, make: (b) => new Float64Array(b) },
  I64: { type: 'int64', size: 8, make: (b) => new BigInt64Array(b) },
  I32: { type: 'int32', size: 4, make: (b) => new Int32Array(b) },
};

// {name: {dtype, shape, data (typed array, own aligned buffer)}}
function readSafetensors(path) {
  const buf = fs.readFileSync(path);
  if (buf.length < 8) fail(path + ': too short for a safetensors file');
  const n = Number(buf.readBigUInt64LE(0));
  if (8 + n > buf.length) fail(path + ': header length ' + n + ' beyond the file');
  let header;
  try {
    header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8'));
  } catch (e) {
    fail(path + ': bad header JSON: ' + e.message);
  }
  const out = {};
  for (const [name, info] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const dt = DTYPES[info.dtype];
    if (!dt) fail(path + ': ' + name + ': dtype ' + info.dtype + ' not supported here');
    const [b, e] = info.data_offsets;
    const count = info.shape.reduce((a, x) => a * x, 1);
    if (e - b !== count * dt.size || 8 + n + e > buf.length)
      fail(path + ': ' + name + ': offsets do not match its shape');
    const ab = buf.buffer.slice(buf.byteOffset + 8 + n + b, buf.byteOffset + 8 + n + e);
    out[name] = { dtype: info.dtype, shape: info.shape, data: dt.make(ab) };
  }
  return out;
}

// tensors: {name: {dims, data}}, F32 (Float32Array) or I64 (BigInt64Array)
function writeSafetensors(path, tensors) {
  const header = {};
  const parts = [];
  let off = 0;
  for (const name of Object.keys(tensors).sort()) {
    const t = tensors[name];
    const bytes = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    const dtype = t.data instanceof BigInt64Array ? 'I64' : 'F32';
    header[name] = { dtype, shape: t.dims, data_offsets: [off, off + bytes.length] };
    parts.push(bytes);
    off += bytes.length;
  }
  let text = JSON.stringify(header);
  while ((8 + Buffer.byteLength(text)) % 8) text += ' ';
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(text)));
  fs.writeFileSync(path, Buffer.concat([len, Buffer.from(text), ...parts]));
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

async function main() {
  const argv = process.argv.slice(2);
  if (argv.length < 4 || argv.length > 5)
    fail('usage: node ort_bench.js MODEL.onnx INPUTS.safetensors OUTPUTS.safetensors RUNS [THREADS]');
  const [modelPath, inputsPath, outputsPath] = argv;
  const runs = Number(argv[3]);
  const threads = argv.length > 4 ? Number(argv[4]) : 2;
  if (!Number.isInteger(runs) || runs < 1) fail('RUNS must be a positive integer');
  if (!Number.isInteger(threads) || threads < 1) fail('THREADS must be a positive integer');
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    fail('cannot load onnxruntime-node (run npm ci in bench/): ' + e.message);
  }
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(modelPath, {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  });
  const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const inputs = readSafetensors(inputsPath);
  const feeds = {};
  for (const name of session.inputNames) {
    const t = inputs[name];
    if (!t) fail(inputsPath + ' has no tensor ' + name + ' (the model takes ' + session.inputNames.join(', ') + ')');
    feeds[name] = new ort.Tensor(DTYPES[t.dtype].type, t.data, t.shape);
  }
  const timeRun = async () => {
    const a = process.hrtime.bigint();
    const r = await session.run(feeds);
    return [Number(process.hrtime.bigint() - a) / 1e6, r];
  };
  const [warmupMs] = await timeRun();
  const times = [];
  let last;
  for (let i = 0; i < runs; i++) {
    const [ms, r] = await timeRun();
    times.push(ms);
    last = r;
  }
  const outs = {};
  for (const name of session.outputNames) {
    const t = last[name];
    if (t.type !== 'float32') fail('output ' + name + ' is ' + t.type + ', expected float32');
    outs[name] = t;
  }
  writeSafetensors(outputsPath, outs);
  process.stdout.write(JSON.stringify({
    framework: 'ort', version: ort.env.versions ? ort.env.versions.node : 'unknown',
    load_ms: loadMs, warmup_ms: warmupMs, runs_ms: times, median_ms: median(times),
    // what the session ran with (the options above; spinning is ORT's default)
    intra_op_threads: threads, inter_op_threads: 1, allow_spinning: 'ORT default (spin)',
  }) + '\n');
}

// bench/ort_decode.js reuses the safetensors reader and writer
module.exports = { fail, DTYPES, readSafetensors, writeSafetensors, median };

if (require.main === module) main().catch((e) => fail(e && e.message ? e.message : String(e)));
