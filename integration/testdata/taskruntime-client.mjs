// The official 2026-07-28 requester (@modelcontextprotocol/ext-tasks over
// @modelcontextprotocol/client 2.x) against the task runtime fixture,
// directly (TestTaskRuntimeExtTasksClient) or through the gateway
// (TestFollowV2026ExtTasksClient*). It creates tasks and polls them to
// completion, answers input requests, cancels one, and checks the plain
// (no extension) paths with a second client. One line per outcome is
// printed for the Go test to check.
//
// Arguments: the MCP endpoint URL; a mode; the fixture's observer API
// (optional). Modes:
//   full       every flow above;
//   omit-name  tasks/get, tasks/update and tasks/cancel go without Mcp-Name,
//              as FastMCP's tasks client sends them; the steps, interview
//              and cancel flows only.
// With an observer URL, the client itself releases the steps task the Go
// test holds at step 2, once it has seen "step 2 of 4": the status message
// a poll reports is then certain, whoever stands between.
//
// rawDispatch is the host part the library leaves to the application: it
// frames the request with Mcp-Method and takes the library's own headers
// (Mcp-Name on tasks/get, tasks/update and tasks/cancel); it adds Mcp-Name
// on tools/call only. The fixture rejects a missing or wrong one.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient, resultFromTaskOutcome } from '@modelcontextprotocol/ext-tasks/client';

const url = process.argv[2];
const mode = process.argv[3] ?? 'full';
const control = process.argv[4];
if (!['full', 'omit-name'].includes(mode)) throw new Error(`unknown mode ${mode}`);
const caps = { elicitation: { form: {} }, extensions: { 'io.modelcontextprotocol/tasks': {} } };
const clientInfo = { name: 'taskruntime-e2e', version: '1.0.0' };
const pin = { mode: { pin: '2026-07-28' } };
const client = new Client(clientInfo, { capabilities: caps, versionNegotiation: pin });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
console.log('ERA', client.getProtocolEra?.());
console.log('TOOLS', (await client.listTools()).tools.map(t => t.name).join(','));

let nextId = 1;
const libNames = new Set();
const refused = new Set();
const rawDispatch = async (request, options) => {
  const req = { jsonrpc: '2.0', ...request, id: request.id ?? `raw-${nextId++}` };
  const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': req.method, ...(options?.context?.headers ?? {}) };
  if (req.method.startsWith('tasks/') && headers['Mcp-Name'] === req.params.taskId) libNames.add(req.method);
  if (req.method.startsWith('tasks/') && mode === 'omit-name') delete headers['Mcp-Name'];
  if (req.method === 'tools/call') headers['Mcp-Name'] = req.params.name;
  const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(req) });
  const text = await res.text();
  if (process.env.DEBUG) console.log('RAW', req.method, res.status, text.slice(0, 300));
  if (res.status >= 400) {
    // One line per kind of refusal (the library may retry).
    const line = `HTTP ${res.status} ${req.method} ${JSON.parse(text)?.error?.code}`;
    if (!refused.has(line)) console.log(line);
    refused.add(line);
  }
  if ((res.headers.get('content-type') || '').includes('text/event-stream')) {
    const datas = text.split(/\n\n/).map(e => e.split('\n').filter(l => l.startsWith('data:')).map(l => l.slice(5).trim()).join('\n')).filter(Boolean);
    for (const d of datas) { const m = JSON.parse(d); if (m.id !== undefined && (m.result || m.error)) return wrap(m); }
    throw new Error('no response in stream');
  }
  return wrap(JSON.parse(text));
};
const wrap = (m) => m.error ? { kind: 'error', error: m.error } : { kind: 'result', result: m.result };
const answers = { name: 'Lin', color: 'green', save: true };
const session = createTaskSessionFromClient(client, {
  endpointId: 'taskruntime',
  rawDispatch,
  v2RequestFraming: { protocolVersion: '2026-07-28', clientInfo, clientCapabilities: caps },
  onInputRequest: async (req, ctx) => {
    const prop = Object.keys(req.params?.requestedSchema?.properties ?? {})[0];
    console.log('INPUT', prop, req.kind, JSON.stringify(req.params?.message), 'KEY', ctx.inputId);
    return { action: 'accept', content: { [prop]: answers[prop] } };
  },
});

// release lets the held steps task go on, once, after the client saw it held.
let released;
const release = () => released ??= (async () => {
  for (const path of ['/unhold?tool=steps', '/release?tool=steps']) {
    const res = await fetch(control + path, { method: 'POST' });
    if (!res.ok) throw new Error(`observer ${path}: ${res.status}`);
  }
})();

const run = async (name, args) => {
  const seen = [];
  try {
    const execution = await session.callTool(name, args);
    console.log(name, 'TASK', execution.handle?.taskId ?? '-');
    const { outcome } = await execution.settle({ onEvent: (e) => {
      const m = e.type === 'task' ? e.task.statusMessage : undefined;
      if (m && !seen.includes(m)) seen.push(m);
      if (control && name === 'steps' && m === 'step 2 of 4') release();
    } });
    console.log(name, 'KIND', execution.kind, 'OUTCOME', outcome.status, JSON.stringify(resultFromTaskOutcome(outcome)).slice(0, 200));
  } catch (e) {
    console.log(name, 'ERROR', e?.code ?? '', (e?.message ?? String(e)).slice(0, 200));
  }
  console.log(name, 'STATUS MESSAGES', JSON.stringify(seen));
};
await run('steps', { steps: 4, stepMs: 20, label: 'ts' });
await released;
await run('interview', { stepMs: 10 });
if (mode === 'full') {
  await run('fail_job', { kind: 'rpc', steps: 1, stepMs: 0 });
  await run('fail_job', { kind: 'tool', steps: 1, stepMs: 0 });
  await run('echo', { text: 'hi' });
}

// Cancel: a long task, cancelled as soon as it exists.
try {
  const long = await session.callTool('steps', { steps: 1000, stepMs: 1000, label: 'long' });
  console.log('CANCEL KIND', long.kind, 'TASK', long.handle?.taskId);
  await long.cancel();
  const after = await long.result().then(o => `OUTCOME ${o.status}`, e => `ERROR ${e?.constructor?.name}`);
  console.log('CANCEL RESULT', after);
} catch (e) {
  console.log('CANCEL ERROR', e?.code ?? '', (e?.message ?? String(e)).slice(0, 200));
}
console.log('LIB MCP-NAME', [...libNames].sort().join(','));
await session.close();
await client.close();
if (mode !== 'full') process.exit(0);

// Without the extension: the required tool is refused with -32021 by the
// fixture (the gateway answers it with the result of the task it makes
// upstream); an optional one answers plainly.
const plain = new Client(clientInfo, { capabilities: {}, versionNegotiation: pin });
await plain.connect(new StreamableHTTPClientTransport(new URL(url)));
try {
  const r = await plain.callTool({ name: 'steps', arguments: { steps: 1, stepMs: 0, label: 'plain' } });
  console.log('PLAIN steps RESULT', JSON.stringify(r).slice(0, 200));
} catch (e) {
  console.log('PLAIN steps ERROR', e?.code ?? '', (e?.message ?? String(e)).slice(0, 200));
}
const r = await plain.callTool({ name: 'fail_job', arguments: { kind: 'tool', steps: 1, stepMs: 0 } });
console.log('PLAIN fail_job RESULT', JSON.stringify(r).slice(0, 200));
await plain.close();
