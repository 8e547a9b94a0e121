#!/usr/bin/env node
// bench/ort_decode.js — greedy generation with a KV cache in ONNX Runtime
// (CPU execution provider, onnxruntime-node from bench/node_modules) over
// the GPT-2 step model bench/decode.py exports.
//
//   node bench/ort_decode.js STEP.onnx INPUTS.safetensors OUTPUTS.safetensors NEW RUNS [THREADS]
//
// STEP.onnx: (input_ids [1,T] i64, position_ids [1,T] i64, past.N.key /
// past.N.value [1,H,P,dh] f32) -> (logits [1,V] of the last position,
// present.N.key / present.N.value [1,H,P+T,dh]). The prompt (`tokens` in
// INPUTS) is one run with empty past tensors (P = 0, the prefill); every
// later id is one run of that id with the previous run's presents as the
// past (ORT returns them as new tensors, fed back as they are). The next id
// is the argmax of the logits (the first maximum, as torch.argmax). No eos:
// NEW ids are made.
//
// Session as bench/ort_bench.js: graph optimisation "all", THREADS (default
// 2) intra-op threads, one inter-op thread, sequential. RUNS = 0: one
// untimed generation (the cross-check); else a warm-up generation of
// WARMUP_IDS ids (as bench/decode.py's) and RUNS timed ones. Writes
// `generated` i64 [1,NEW] and `generated_lengths` i64 [1] to OUTPUTS and one JSON line on stdout: {"framework": "ort",
// "load_ms", "warmup_ms", "runs_ms" (whole generations), "prefill_ms",
// "token_ms" (decode time / (NEW - 1)), "intra_op_threads", ...}. Timing as
// tfmc's rt_generate: prefill is the prompt's run alone; the decode time
// runs from there to the last id, argmaxes included.
'use strict';

const { fail, readSafetensors, writeSafetensors, median } = require('./ort_bench.js');

const WARMUP_IDS = 16;

function argmax(a) {
  let best = 0;
  for (let i = 1; i < a.length; i++) if (a[i] > a[best]) best = i;
  return best;
}

async function generate(ort, session, past0, prompt, nNew) {
  const now = () => process.hrtime.bigint();
  const ms = (a, b) => Number(b - a) / 1e6;
  const ids = [];
  const t0 = now();
  const feeds = Object.assign({}, past0);
  const T = prompt.length;
  feeds.input_ids = new ort.Tensor('int64', BigInt64Array.from(prompt), [1, T]);
  feeds.position_ids = new ort.Tensor('int64', BigInt64Array.from(prompt.map((_, i) => BigInt(i))), [1, T]);
  let r = await session.run(feeds);
  const t1 = now();
  let pos = T;
  for (let i = 0; i < nNew; i++) {
    const id = argmax(r.logits.data);
    ids.push(id);
    if (i + 1 === nNew) break;
    const next = {
      input_ids: new ort.Tensor('int64', BigInt64Array.of(BigInt(id)), [1, 1]),
      position_ids: new ort.Tensor('int64', BigInt64Array.of(BigInt(pos)), [1, 1]),
    };
    for (const name of Object.keys(past0)) next[name] = r[name.replace(/^past/, 'present')];
    r = await session.run(next);
    pos++;
  }
  const t2 = now();
  return { ids, prefill_ms: ms(t0, t1), decode_ms: ms(t1, t2), total_ms: ms(t0, t2) };
}

async function main() {
  const argv = process.argv.slice(2);
  if (argv.length < 5 || argv.length > 6)
    fail('usage: node ort_decode.js STEP.onnx INPUTS.safetensors OUTPUTS.safetensors NEW RUNS [THREADS]');
  const [modelPath, inputsPath, outputsPath] = argv;
  const nNew = Number(argv[3]), runs = Number(argv[4]);
  const threads = argv.length > 5 ? Number(argv[5]) : 2;
  if (!Number.isInteger(nNew) || nNew < 1) fail('NEW must be a positive integer');
  if (!Number.isInteger(runs) || runs < 0) fail('RUNS must be an integer >= 0');
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
  const tok = inputs.tokens;
  if (!tok || tok.shape.length !== 2 || tok.shape[0] !== 1) fail(inputsPath + ': needs tokens [1,T]');
  const prompt = Array.from(tok.data, (x) => BigInt(x));
  // the empty past of the prefill: [1,H,0,dh] per past input, H and dh from
  // the model's metadata when ORT reports it, else GPT-2 small's 12 x 64
  const past0 = {};
  for (const name of session.inputNames) {
    if (!name.startsWith('past.')) continue;
    let dims = [1, 12, 0, 64];
    const meta = session.inputMetadata && session.inputMetadata.find &&
      session.inputMetadata.find((m) => m.name === name);
    if (meta && meta.shape && typeof meta.shape[1] === 'number' && typeof meta.shape[3] === 'number')
      dims = [1, meta.shape[1], 0, meta.shape[3]];
    past0[name] = new ort.Tensor('float32', new Float32Array(0), dims);
  }
  if (!Object.keys(past0).length) fail(modelPath + ' has no past.N.key / past.N.value inputs');
  // the warm-up: WARMUP_IDS ids when timed runs follow (bench/decode.py's
  // WARMUP_IDS), all of them for the untimed cross-check run
  const warm = await generate(ort, session, past0, prompt, runs ? Math.min(nNew, WARMUP_IDS) : nNew);
  const gens = [];
  for (let i = 0; i < runs; i++) gens.push(await generate(ort, session, past0, prompt, nNew));
  const ids = (gens.length ? gens[gens.length - 1] : warm).ids;
  writeSafetensors(outputsPath, {
    generated: { dims: [1, ids.length], data: BigInt64Array.from(ids.map(BigInt)) },
    generated_lengths: { dims: [1], data: BigInt64Array.of(BigInt(ids.length)) },
  });
  const runsMs = gens.map((g) => g.total_ms);
  process.stdout.write(JSON.stringify({
    framework: 'ort', version: ort.env.versions ? ort.env.versions.node : 'unknown',
    load_ms: loadMs, warmup_ms: warm.total_ms, runs_ms: runsMs,
    prefill_ms: gens.map((g) => g.prefill_ms),
    token_ms: gens.map((g) => g.decode_ms / Math.max(1, g.ids.length - 1)),
    new_tokens: ids.length, median_ms: runsMs.length ? median(runsMs) : null,
    intra_op_threads: threads, inter_op_threads: 1, allow_spinning: 'ORT default (spin)',
  }) + '\n');
}

main().catch((e) => fail(e && e.message ? e.message : String(e)));
