#!/usr/bin/env node
// External-client interop test for dpopt.v1 with Node.js
// (@grpc/grpc-js + @grpc/proto-loader, loading proto/ at run time).
//
// Same scenario as ../python/interop_client.py: health check, dataset listing
// and metadata, job estimate, a small DP-SGD job watched to completion, its
// result, and the error codes of malformed requests.
//
// Usage: node interop_client.js --proto-dir DIR --server HOST:PORT
//          --dataset NAME [--eval-dataset NAME] [--epsilon E] [--steps N]
//          [--tls-ca PEM [--tls-cert PEM --tls-key PEM]]   (TLS / mutual TLS)
// Exit status 0 only if every check passed.
'use strict';

const path = require('path');
const fs = require('fs');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const RPC_TIMEOUT_MS = 30000;
const JOB_TIMEOUT_MS = 300000;
const TERMINAL = new Set(['JOB_STATE_SUCCEEDED', 'JOB_STATE_FAILED', 'JOB_STATE_CANCELLED']);

function parseArgs(argv) {
  const out = { evalDataset: '', epsilon: 0.5, steps: 200, tlsCa: '', tlsCert: '', tlsKey: '' };
  const names = {
    '--proto-dir': 'protoDir', '--server': 'server', '--dataset': 'dataset',
    '--eval-dataset': 'evalDataset', '--epsilon': 'epsilon', '--steps': 'steps',
    '--tls-ca': 'tlsCa', '--tls-cert': 'tlsCert', '--tls-key': 'tlsKey',
  };
  for (let i = 0; i < argv.length; i++) {
    let [flag, value] = argv[i].split(/=(.*)/s, 2);
    if (!(flag in names)) throw new Error(`unknown argument ${argv[i]}`);
    if (value === undefined) value = argv[++i];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    out[names[flag]] = value;
  }
  for (const req of ['protoDir', 'server', 'dataset']) {
    if (!out[req]) throw new Error(`missing --${req.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase())}`);
  }
  out.epsilon = Number(out.epsilon);
  out.steps = Number(out.steps);
  return out;
}

function expect(cond, message) {
  if (!cond) throw new Error(message);
}

// Promisified unary call with a deadline.
function call(client, method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, { deadline: Date.now() + RPC_TIMEOUT_MS }, (err, reply) => {
      if (err) reject(err); else resolve(reply);
    });
  });
}

async function expectCode(promiseFn, code, what) {
  try {
    await promiseFn();
  } catch (err) {
    expect(err.code === code,
      `${what}: expected ${grpc.status[code]}, got ${grpc.status[err.code]}: ${err.details}`);
    expect(err.details, `${what}: ${grpc.status[code]} without a message`);
    return err.details;
  }
  throw new Error(`${what}: expected ${grpc.status[code]}, call succeeded`);
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const loaderOptions = {
    keepCase: true, longs: String, enums: String, defaults: true, oneofs: true,
    includeDirs: [args.protoDir, '/usr/include'],
  };
  const api = grpc.loadPackageDefinition(protoLoader.loadSync(
    ['dpopt/v1/dpopt.proto', 'dpopt/v1/job_spec.proto', 'grpc/health/v1/health.proto'],
    loaderOptions));
  // TLS (and mutual TLS with a client certificate) when --tls-ca is given.
  const creds = args.tlsCa
    ? grpc.credentials.createSsl(
      fs.readFileSync(args.tlsCa),
      args.tlsKey ? fs.readFileSync(args.tlsKey) : null,
      args.tlsCert ? fs.readFileSync(args.tlsCert) : null)
    : grpc.credentials.createInsecure();
  // Every call carries "authorization: Bearer TOKEN".
  const token = process.env.DPOPT_TOKEN || '';
  const bearer = (options, nextCall) => new grpc.InterceptingCall(nextCall(options), {
    start: (metadata, listener, next) => {
      if (token) metadata.add('authorization', `Bearer ${token}`);
      next(metadata, listener);
    },
  });
  const opts = { interceptors: [bearer] };
  const health = new api.grpc.health.v1.Health(args.server, creds);
  const datasets = new api.dpopt.v1.DatasetService(args.server, creds, opts);
  const budget = new api.dpopt.v1.BudgetService(args.server, creds, opts);
  const jobs = new api.dpopt.v1.JobService(args.server, creds, opts);

  const spec = (over = {}) => {
    const s = {
      dataset: over.dataset || args.dataset,
      model: { logistic_regression: { l2: 1e-4 } },
      privacy: { epsilon: over.epsilon === undefined ? args.epsilon : over.epsilon, delta: 1e-6 },
      algorithm: { dp_sgd: { sampling_rate: 0.01, steps: args.steps, clip_norm: 1.0, learning_rate: 0.5 } },
      label: 'node-interop',
    };
    if (args.evalDataset) s.evaluate_on = args.evalDataset;
    return s;
  };
  const charges = async () =>
    Number((await call(budget, 'GetBudget', { dataset: args.dataset })).charges);

  const state = {};
  let passed = 0;
  let failed = 0;
  async function check(name, fn) {
    const start = Date.now();
    try {
      await fn();
    } catch (err) {
      failed++;
      const what = err.code !== undefined && err.details !== undefined
        ? `RPC failed: ${grpc.status[err.code]}: ${err.details}` : err.message;
      console.log(`FAIL ${name}: ${what}`);
      return false;
    }
    passed++;
    console.log(`ok   ${name} (${((Date.now() - start) / 1000).toFixed(2)}s)`);
    return true;
  }

  await check('health: grpc.health.v1 Check is SERVING', async () => {
    const r = await call(health, 'Check', { service: '' });
    expect(r.status === 'SERVING', `health status ${r.status}`);
  });

  await check('ListDatasets lists the imported datasets', async () => {
    const r = await call(datasets, 'ListDatasets', {});
    const names = r.datasets.map((d) => d.name);
    expect(names.includes(args.dataset), `${args.dataset} not in ${names}`);
    if (args.evalDataset) expect(names.includes(args.evalDataset), `${args.evalDataset} not in ${names}`);
  });

  await check('GetDataset / GetBudget: public metadata and budget', async () => {
    const d = await call(datasets, 'GetDataset', { name: args.dataset });
    expect(d.name === args.dataset, `name ${d.name}`);
    expect(Number(d.rows) > 0, `rows ${d.rows}`);
    expect(Number(d.dimension) > 0, `dimension ${d.dimension}`);
    expect(!d.public, 'private dataset reported as public');
    expect(d.budget, 'private dataset without budget');
    expect(d.budget.epsilon_total > 0, `epsilon_total ${d.budget.epsilon_total}`);
    state.dimension = Number(d.dimension);
    const b = await call(budget, 'GetBudget', { dataset: args.dataset });
    expect(b.dataset === args.dataset, `budget for ${b.dataset}`);
    expect(Math.abs(b.epsilon_total - d.budget.epsilon_total) < 1e-12,
      'GetBudget and GetDataset disagree on epsilon_total');
    expect(b.accounting, 'budget without accounting description');
    if (args.evalDataset) {
      const e = await call(datasets, 'GetDataset', { name: args.evalDataset });
      expect(e.public, `${args.evalDataset} not public`);
      expect(!e.budget, 'public dataset with a budget');
    }
  });

  await check('EstimateJob calibrates and charges nothing', async () => {
    const before = await charges();
    const r = await call(jobs, 'EstimateJob', { spec: spec() });
    const c = r.calibration;
    expect(c.noise_multiplier > 0 && Number.isFinite(c.noise_multiplier), `noise_multiplier ${c.noise_multiplier}`);
    expect(Number(c.steps) === args.steps, `steps ${c.steps} != ${args.steps}`);
    expect(Math.abs(c.sampling_rate - 0.01) < 1e-12, `sampling_rate ${c.sampling_rate}`);
    expect(r.cost.epsilon > 0 && r.cost.epsilon <= args.epsilon * (1 + 1e-9),
      `cost epsilon ${r.cost.epsilon} not in (0, ${args.epsilon}]`);
    expect(r.admissible, `not admissible: ${r.message}`);
    expect(r.budget_after.epsilon_remaining < r.budget_before.epsilon_remaining,
      'estimate does not lower the remaining budget');
    expect((await charges()) === before, 'EstimateJob charged the ledger');
  });

  const submitted = await check('SubmitJob charges the ledger once', async () => {
    const before = await charges();
    const job = await call(jobs, 'SubmitJob', { spec: spec() });
    expect(job.id, 'job without id');
    expect(job.cost && job.cost.charged, 'job on a private dataset not marked charged');
    expect((await charges()) === before + 1, 'SubmitJob did not add one ledger charge');
    state.job = job.id;
  });

  const watched = submitted && await check('WatchJob streams to SUCCEEDED', async () => {
    const events = await new Promise((resolve, reject) => {
      const got = [];
      const stream = jobs.WatchJob({ id: state.job }, { deadline: Date.now() + JOB_TIMEOUT_MS });
      stream.on('data', (ev) => got.push(ev));
      stream.on('error', reject);
      stream.on('end', () => resolve(got));
    });
    expect(events.length > 0, 'no events');
    expect(events[0].event === 'job', `first event is ${events[0].event}, not the job`);
    const jobEvents = events.filter((e) => e.event === 'job').map((e) => e.job);
    const final = jobEvents.reverse().find((j) => TERMINAL.has(j.state));
    expect(final, 'stream ended without a terminal state');
    expect(final.id === state.job, `event for job ${final.id}`);
    expect(final.state === 'JOB_STATE_SUCCEEDED', `job ended ${final.state}: ${final.message}`);
    const steps = events.filter((e) => e.event === 'trace').map((e) => Number(e.trace.step));
    expect(steps.every((s, i) => i === 0 || steps[i - 1] <= s), 'trace steps out of order');
    const j = await call(jobs, 'GetJob', { id: state.job });
    expect(j.state === final.state, 'GetJob state differs from WatchJob');
    expect(Number(j.steps_done) === args.steps, `steps_done ${j.steps_done}`);
    const listed = await call(jobs, 'ListJobs', { dataset: args.dataset });
    expect(listed.jobs.some((x) => x.id === state.job), 'job missing from ListJobs');
  });

  if (watched) {
    await check('GetJobResult returns the privatized model', async () => {
      const r = await call(jobs, 'GetJobResult', { id: state.job });
      expect(r.job_id === state.job, `result for ${r.job_id}`);
      const w = r.model.weights;
      expect(w.length === state.dimension, `${w.length} weights for dimension ${state.dimension}`);
      expect(w.every(Number.isFinite), 'non-finite weights');
      expect(w.some((x) => x !== 0), 'all-zero model');
      expect(r.cost.epsilon > 0 && r.cost.epsilon <= args.epsilon * (1 + 1e-9), `cost ${r.cost.epsilon}`);
      if (args.evalDataset) {
        expect(r.evaluation && r.evaluation.dataset === args.evalDataset,
          `evaluated on ${r.evaluation && r.evaluation.dataset}`);
        expect(r.evaluation.accuracy > 0.5 && r.evaluation.accuracy <= 1,
          `accuracy ${r.evaluation.accuracy} (no better than chance)`);
        console.log(`     accuracy on ${args.evalDataset}: ${r.evaluation.accuracy.toFixed(4)}`);
      }
    });
  }

  await check('negative epsilon -> INVALID_ARGUMENT, nothing charged', async () => {
    const before = await charges();
    await expectCode(() => call(jobs, 'EstimateJob', { spec: spec({ epsilon: -1 }) }),
      grpc.status.INVALID_ARGUMENT, 'EstimateJob with epsilon=-1');
    await expectCode(() => call(jobs, 'SubmitJob', { spec: spec({ epsilon: -1 }) }),
      grpc.status.INVALID_ARGUMENT, 'SubmitJob with epsilon=-1');
    expect((await charges()) === before, 'a refused job was charged');
  });

  await check('unknown dataset / job -> NOT_FOUND', async () => {
    const missing = 'no-such-dataset-interop';
    await expectCode(() => call(datasets, 'GetDataset', { name: missing }),
      grpc.status.NOT_FOUND, 'GetDataset(unknown)');
    await expectCode(() => call(jobs, 'SubmitJob', { spec: spec({ dataset: missing }) }),
      grpc.status.NOT_FOUND, 'SubmitJob(unknown dataset)');
    await expectCode(() => call(jobs, 'GetJob', { id: 'no-such-job' }),
      grpc.status.NOT_FOUND, 'GetJob(unknown)');
  });

  for (const c of [health, datasets, budget, jobs]) c.close();
  console.log(`node interop: ${passed} passed, ${failed} failed`);
  return failed === 0 ? 0 : 1;
}

main().then((code) => process.exit(code), (err) => {
  console.error(`node interop: ${err.stack || err}`);
  process.exit(2);
});
