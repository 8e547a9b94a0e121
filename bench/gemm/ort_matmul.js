#!/usr/bin/env node
// bench/gemm/ort_matmul.js — GFLOP/s of ONNX Runtime's MatMul at gemm_bench.c's
// shapes, on the models bench/gemm/ort_matmul.py writes (C one-MatMul
// nodes on C copies of a [K, N] weight, x [M, K] with M dynamic).
//
//   node bench/gemm/ort_matmul.js DIR [--threads T] [--quick] [--label L] [--shape MxNxK]
//
// Run from anywhere; onnxruntime-node comes from bench/node_modules (the
// package bench/run.sh installs). Session options as bench/ort_bench.js:
// CPU EP, graph optimisation "all", T intra-op threads (default 2), one
// inter-op thread, sequential. Per (N, K) one session (weights prepacked by
// MLAS at creation, outside the timing); per M: one warm-up run, then runs
// until 0.4 s and at least 3 runs (2 when one run takes over 0.4 s: at
// M = 1024 a run is seconds); a run is C MatMuls, so the median run
// time / C is the time per MatMul. One JSON line per shape, in gemm_bench.c's
// format: {"label", "mode": "ort", "backend", "threads", "m", "n", "k",
// "calls" (MatMuls timed), "seconds" (per MatMul), "gflops", "weight_gbps"
// (bytes of one weight copy / seconds), "best_gflops" (the fastest run)}, and
// a last line {"label", "mode", "backend", "others_busy_cores"} (the cores the
// rest of the machine kept busy meanwhile, from /proc/stat and this
// process's CPU time). --quick drops M = 1024 and the LM head at M >= 128,
// as gemm_bench does. Errors: one line on stderr, exit status 1.
'use strict';

const fs = require('fs');
const path = require('path');

function fail(msg) {
  process.stderr.write('ort_matmul: ' + msg + '\n');
  process.exit(1);
}

function procStat() { // [busy, total] jiffies of all CPUs, steal counted busy
  const v = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9).map(Number);
  const total = v.reduce((a, x) => a + x, 0);
  return [total - v[3] - v[4], total];
}

function selfCpuSeconds() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

async function main() {
  const argv = process.argv.slice(2);
  if (argv.length < 1) fail('usage: ort_matmul.js DIR [--threads T] [--quick] [--label L] [--shape MxNxK]');
  const dir = argv[0];
  let threads = 2, quick = false, label = 'ort', only = null;
  for (let i = 1; i < argv.length; i++) {
    if (argv[i] === '--threads' && i + 1 < argv.length) threads = Number(argv[++i]);
    else if (argv[i] === '--quick') quick = true;
    else if (argv[i] === '--label' && i + 1 < argv.length) label = argv[++i];
    else if (argv[i] === '--shape' && i + 1 < argv.length) {
      only = argv[++i].split('x').map(Number);
      if (only.length !== 3 || !only.every((x) => Number.isInteger(x) && x > 0)) fail('--shape wants MxNxK');
    } else fail('unknown argument ' + argv[i]);
  }
  if (!Number.isInteger(threads) || threads < 1) fail('--threads must be a positive integer');
  let ort;
  try {
    ort = require(path.join(__dirname, '..', 'node_modules', 'onnxruntime-node'));
  } catch (e) {
    fail('cannot load onnxruntime-node (run npm ci in bench/): ' + e.message);
  }
  let models;
  try {
    models = JSON.parse(fs.readFileSync(path.join(dir, 'models.json'), 'utf8'));
  } catch (e) {
    fail('cannot read ' + path.join(dir, 'models.json') + ' (run ort_matmul.py first): ' + e.message);
  }
  const version = JSON.parse(fs.readFileSync(
    path.join(__dirname, '..', 'node_modules', 'onnxruntime-node', 'package.json'), 'utf8')).version;
  const backend = 'onnxruntime-node ' + version + ' MatMul (MLAS)';
  const order = [[768, 768], [2304, 768], [3072, 768], [768, 3072], [50257, 768]];
  const [busy0, total0] = procStat();
  const self0 = selfCpuSeconds();
  for (const [n, k] of order) {
    let ms = [1, 8, 128, 1024];
    if (only) {
      if (only[1] !== n || only[2] !== k) continue;
      ms = [only[0]];
    } else if (quick) ms = ms.filter((m) => m !== 1024 && !(n === 50257 && m >= 128));
    const e = models.find((x) => x.n === n && x.k === k);
    if (!e) fail('no model for N=' + n + ' K=' + k + ' in ' + dir);
    const session = await ort.InferenceSession.create(path.join(dir, e.file), {
      executionProviders: ['cpu'],
      graphOptimizationLevel: 'all',
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
    });
    for (const m of ms) {
      const x = new Float32Array(m * k);
      for (let i = 0; i < x.length; i++) x[i] = ((i * 2654435761 + 3) % 2001) * 1e-3 - 1;
      const feeds = { x: new ort.Tensor('float32', x, [m, k]) };
      await session.run(feeds); // warm-up
      const times = [];
      let all = 0;
      // at least 3 runs, or 2 when a run (C MatMuls) takes over 0.4 s by itself
      while (all < 0.4 || times.length < (times[0] > 0.4 ? 2 : 3)) {
        const a = process.hrtime.bigint();
        const r = await session.run(feeds);
        const s = Number(process.hrtime.bigint() - a) / 1e9;
        if (r.y.dims[0] !== e.copies || r.y.dims[1] !== n) fail('output shape ' + r.y.dims + ', expected ' + [e.copies, n]);
        times.push(s);
        all += s;
      }
      times.sort((a, b) => a - b);
      const per = times[times.length >> 1] / e.copies, best = times[0] / e.copies;
      const flop = 2 * m * n * k;
      process.stdout.write(JSON.stringify({
        label, mode: 'ort', backend, threads, m, n, k, calls: times.length * e.copies,
        copies: e.copies, seconds: per, gflops: flop / per * 1e-9,
        weight_gbps: n * k * 4 / per * 1e-9, best_gflops: flop / best * 1e-9,
      }) + '\n');
    }
    await session.release();
  }
  const [busy1, total1] = procStat();
  const hz = 100; // USER_HZ: /proc/stat counts in 1/100 s on Linux
  const ncpu = require('os').cpus().length;
  const wall = (total1 - total0) / hz / ncpu;
  const others = wall > 0 ? ((busy1 - busy0) / hz - (selfCpuSeconds() - self0)) / wall : 0;
  process.stdout.write(JSON.stringify({ label, mode: 'ort', backend, others_busy_cores: Math.max(0, others) }) + '\n');
}

main().catch((e) => fail(e && e.message ? e.message : String(e)));
