// A client of airlock's gRPC contract written from protos/ alone (issue 35): it loads the .proto
// files with @grpc/proto-loader, calls a runner and a controller the pytest started, and prints
// one JSON object of results (tests/integration/test_node_client.py asserts on it).
//
// env: AIRLOCK_PROTOS (protos/), AIRLOCK_GOOGLEAPIS (the dir holding google/rpc/*.proto),
//      AIRLOCK_RUNNER + AIRLOCK_RUNNER_TOKEN, AIRLOCK_CONTROLLER + AIRLOCK_CONTROLLER_TOKEN.
'use strict';

const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');
const path = require('path');

const env = process.env;
const includeDirs = [env.AIRLOCK_PROTOS, env.AIRLOCK_GOOGLEAPIS];
const options = { keepCase: true, longs: String, enums: String, defaults: false, oneofs: true, includeDirs };
const loaded = grpc.loadPackageDefinition(
  protoLoader.loadSync(['airlock/runner/v1/runner.proto', 'airlock/controller/v1/controller.proto'], options),
);
const Runner = loaded.airlock.runner.v1.Runner;
const Controller = loaded.airlock.controller.v1.Controller;

// google.rpc.Status and its details, for the grpc-status-details-bin trailer.
const rpcRoot = new protobuf.Root();
rpcRoot.resolvePath = (_origin, target) => path.join(env.AIRLOCK_GOOGLEAPIS, target);
rpcRoot.loadSync(['google/rpc/status.proto', 'google/rpc/error_details.proto']);
const StatusType = rpcRoot.lookupType('google.rpc.Status');

function decodeDetails(metadata) {
  const raw = metadata && metadata.get('grpc-status-details-bin');
  if (!raw || raw.length === 0) return null;
  const status = StatusType.decode(raw[0]);
  return status.details.map((any) => {
    const name = any.type_url.split('/').pop();
    const type = rpcRoot.lookupType(name);
    return { type: name, value: type.toObject(type.decode(any.value), { enums: String, longs: String }) };
  });
}

function failure(err) {
  const trailers = err.metadata;
  return {
    code: grpc.status[err.code],
    message: err.details,
    reason: trailers ? trailers.get('airlock-reason')[0] || null : null,
    details: decodeDetails(trailers),
  };
}

function auth(token) {
  const md = new grpc.Metadata();
  if (token !== undefined) md.set('authorization', `Bearer ${token}`);
  return md;
}

const deadline = () => Date.now() + 30000;

function unary(client, method, request, token) {
  return new Promise((resolve) => {
    client[method](request, auth(token), { deadline: deadline() }, (err, response) => {
      resolve(err ? { error: failure(err) } : { ok: response });
    });
  });
}

function stream(client, method, request, token, onEvent) {
  return new Promise((resolve) => {
    const events = [];
    const call = client[method](request, auth(token), { deadline: deadline() });
    call.on('data', (event) => {
      events.push(event);
      if (onEvent) onEvent(event, events.length);
    });
    call.on('error', (err) => resolve({ events, error: failure(err) }));
    call.on('end', () => resolve({ events }));
  });
}

const kinds = (events) => events.map((e) => e.event || e.kind || Object.keys(e)[0]);

// --- the runner --------------------------------------------------------------------------------

function scriptedAgent(texts) {
  const script = texts.map((text) => ({
    response: {
      content: [{ type: 'text', text }],
      stop_reason: 'end_turn',
      usage: { input_tokens: 3, output_tokens: 2 },
    },
  }));
  return {
    name: 'node-client',
    provider: { kind: 'PROVIDER_KIND_SCRIPTED', script: { text: JSON.stringify(script) } },
    system: 'A test agent driven from Node.',
  };
}

function executeRequest(text, extra) {
  return Object.assign(
    { agent: scriptedAgent([text]), input: { message: { text: 'hello from node' }, trigger: { user: {} } } },
    extra || {},
  );
}

// Upload two files (each chunk repeats its path), then download them as artifacts.
async function filesRoundTrip(runner, token) {
  const put = await new Promise((resolve) => {
    const call = runner.PutFiles(auth(token), { deadline: deadline() }, (err, response) =>
      resolve(err ? { error: failure(err) } : { ok: response }));
    call.write({ path: 'in/a.txt', data: Buffer.from('alpha ') });
    call.write({ path: 'in/a.txt', data: Buffer.from('beta'), last: true });
    call.write({ path: 'in/b.txt', data: Buffer.from('gamma'), last: true });
    call.end();
  });
  const limits = { max_files: 10, max_file_bytes: 1024, max_total_bytes: 4096 };
  const collected = await stream(runner, 'CollectArtifacts', Object.assign({ globs: ['in/*.txt'] }, limits), token);
  const files = {};
  for (const item of collected.events) {
    if (item.chunk) files[item.chunk.path] = (files[item.chunk.path] || '') + Buffer.from(item.chunk.data).toString();
  }
  return { put, files, error: collected.error || null };
}

async function runnerCases(token) {
  const runner = new Runner(env.AIRLOCK_RUNNER, grpc.credentials.createInsecure());
  const out = {};
  const executed = await stream(runner, 'Execute', executeRequest('done in node'), token);
  const last = executed.events[executed.events.length - 1] || {};
  out.execute = { kinds: kinds(executed.events), last, error: executed.error || null };

  // Paused at the start: stepped (the one-step script ends the turn), or resumed to the end.
  for (const control of ['Step', 'Resume']) {
    const id = `node-paused-${control}`;
    const answers = [];
    const request = executeRequest(`after ${control}`, { execution_id: id, start_paused: true });
    const paused = await stream(runner, 'Execute', request, token, async (_event, n) => {
      if (n === 1) answers.push(await unary(runner, control, { execution_id: id }, token));
    });
    out[`paused_${control.toLowerCase()}`] = { kinds: kinds(paused.events), answers, error: paused.error || null };
  }

  // Paused at the start, sent a signal, then cancelled.
  {
    const id = 'node-signal-cancel';
    const answers = [];
    const request = executeRequest('never said', { execution_id: id, start_paused: true });
    const run = await stream(runner, 'Execute', request, token, async (_event, n) => {
      if (n !== 1) return;
      const data = { text: JSON.stringify({ from: 'node' }) };
      answers.push(['Signal', await unary(runner, 'Signal', { execution_id: id, signal_type: 'note', data }, token)]);
      answers.push(['Cancel', await unary(runner, 'Cancel', { execution_id: id }, token)]);
    });
    out.signal_cancel = { kinds: kinds(run.events), last: run.events[run.events.length - 1] || null, answers, error: run.error || null };
  }

  out.files = await filesRoundTrip(runner, token);

  for (const method of ['Cancel', 'Pause', 'Resume', 'Step']) {
    out[`${method.toLowerCase()}_unknown`] = await unary(runner, method, { execution_id: 'no-such-execution' }, token);
  }
  out.signal_unknown = await unary(runner, 'Signal', { execution_id: 'no-such-execution' }, token);

  out.malformed = {
    empty_execute: (await stream(runner, 'Execute', {}, token)).error,
    unknown_provider_kind: (await stream(runner, 'Execute',
      { agent: { name: 'x', provider: { kind: 77 } }, input: { message: { text: 'x' } } }, token)).error,
    bad_json_metadata: (await stream(runner, 'Execute',
      executeRequest('x', { input: { message: { text: 'x' }, trigger: { user: {} }, metadata: { text: '{not json' } } }), token)).error,
    no_token: (await stream(runner, 'Execute', executeRequest('x'), undefined)).error,
    wrong_token: (await stream(runner, 'Execute', executeRequest('x'), 'wrong')).error,
    cancel_without_id: (await unary(runner, 'Cancel', {}, token)).error || null,
    step_without_id: (await unary(runner, 'Step', {}, token)).error || null,
    unknown_tool_choice: (await stream(runner, 'Execute', executeRequest('x', {
      agent: Object.assign(scriptedAgent(['x']), {
        provider: { kind: 'PROVIDER_KIND_SCRIPTED', script: { text: '[]' }, tool_choice_first: 9, timeout: { seconds: 30 } },
      }),
    }), token)).error,
  };
  runner.close();
  return out;
}

// --- the controller ----------------------------------------------------------------------------

async function controllerCases(token) {
  const controller = new Controller(env.AIRLOCK_CONTROLLER, grpc.credentials.createInsecure());
  const out = {};
  out.agents = await unary(controller, 'ListAgents', {}, token);
  const submitted = await unary(controller, 'SubmitJob', { agent: 'a', input: { message: { text: 'from node' }, trigger: { user: {} } } }, token);
  out.submit = submitted;
  const jobId = submitted.ok && submitted.ok.id;
  out.get = await unary(controller, 'GetJob', { id: jobId }, token);
  out.list = await unary(controller, 'ListJobs', {}, token);
  out.artifacts = await unary(controller, 'ListArtifacts', { id: jobId }, token);
  out.cancel = await unary(controller, 'CancelJob', { id: jobId }, token);
  const watched = await stream(controller, 'WatchJob', { id: jobId }, token);
  out.watch = { kinds: kinds(watched.events), error: watched.error || null };
  out.approve_not_waiting = await unary(controller, 'ApproveJob', { id: jobId }, token);
  out.malformed = {
    empty_submit: (await unary(controller, 'SubmitJob', {}, token)).error,
    unknown_agent: (await unary(controller, 'SubmitJob', { agent: 'nope', input: { message: { text: 'x' }, trigger: { user: {} } } }, token)).error,
    unknown_job: (await unary(controller, 'GetJob', { id: 'no-such-job' }, token)).error,
    no_token: (await unary(controller, 'ListJobs', {}, undefined)).error,
  };
  controller.close();
  return out;
}

async function main() {
  const result = {};
  if (env.AIRLOCK_RUNNER) result.runner = await runnerCases(env.AIRLOCK_RUNNER_TOKEN);
  if (env.AIRLOCK_CONTROLLER) result.controller = await controllerCases(env.AIRLOCK_CONTROLLER_TOKEN);
  process.stdout.write(JSON.stringify(result) + '\n');
}

main().catch((err) => {
  process.stderr.write(`${err.stack || err}\n`);
  process.exit(2);
});
