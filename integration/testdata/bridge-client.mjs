// A 2026-07-28 client pinned to that version (@modelcontextprotocol/client
// 2.x with versionNegotiation pin: no fallback to initialize), in front of
// a 2025-11-25-only server behind the gateway's version bridge. It
// discovers, lists and calls tools; the server's elicitation and sampling
// arrive as input_required and are answered by the client's own handlers
// (multi-round-trip); then the ext-tasks requester runs calls as tasks,
// among them the server's own task tool, simulate-research-query.
// One line per outcome is printed for the Go test (TestBridgeOfficialClient).
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient, resultFromTaskOutcome } from '@modelcontextprotocol/ext-tasks/client';

const url = process.argv[2];
const text = (r) => (r?.content ?? []).map((c) => c.text ?? '').join(' ').replace(/\s+/g, ' ').slice(0, 200);
const clientInfo = { name: 'bridge-e2e', version: '1.0.0' };
const caps = { elicitation: { form: {} }, sampling: {} };
const client = new Client(clientInfo, { capabilities: caps, versionNegotiation: { mode: { pin: '2026-07-28' } } });
client.setRequestHandler('elicitation/create', async (req) => {
  console.log('ELICIT', JSON.stringify(req.params.message));
  return { action: 'accept', content: { name: 'Pinned' } };
});
client.setRequestHandler('sampling/createMessage', async () => {
  console.log('SAMPLE');
  return { role: 'assistant', content: { type: 'text', text: 'pinned sample' }, model: 'e2e', stopReason: 'endTurn' };
});
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
console.log('ERA', client.getProtocolEra?.());
const discover = client.getDiscoverResult?.();
console.log('DISCOVER', JSON.stringify(discover?.supportedVersions), Object.keys(discover?.capabilities?.extensions ?? {}).join(','));
const tools = await client.listTools();
console.log('TOOLS', tools.tools.map((t) => t.name).filter((n) => n.startsWith('echo') || n.startsWith('trigger-')).sort().join(','));
for (const [name, args] of [['echo', { message: 'pinned hello' }], ['trigger-elicitation-request', {}], ['trigger-sampling-request', { prompt: 'hi', maxTokens: 10 }]]) {
  try {
    console.log(name, 'RESULT', text(await client.callTool({ name, arguments: args })));
  } catch (e) {
    console.log(name, 'ERROR', e?.code ?? '', (e?.message ?? String(e)).slice(0, 300));
  }
}

// Tasks through the bridge, with the official requester library.
const taskCaps = { ...caps, extensions: { 'io.modelcontextprotocol/tasks': {} } };
let nextId = 1;
const rawDispatch = async (request) => {
  const req = { jsonrpc: '2.0', ...request, id: request.id ?? `raw-${nextId++}` };
  const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': req.method };
  const name = req.params?.name ?? req.params?.taskId;
  if (name) headers['Mcp-Name'] = name;
  const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(req) });
  const body = await res.text();
  if (process.env.DEBUG) console.log('RAW', JSON.stringify(req).slice(0, 300), '=>', res.status, body.slice(0, 400));
  if ((res.headers.get('content-type') || '').includes('text/event-stream')) {
    const datas = body.split(/\n\n/).map(e => e.split('\n').filter(l => l.startsWith('data:')).map(l => l.slice(5).trim()).join('\n')).filter(Boolean);
    for (const d of datas) { const m = JSON.parse(d); if (m.id !== undefined && (m.result || m.error)) return wrap(m); }
    throw new Error('no response in stream');
  }
  return wrap(JSON.parse(body));
};
const wrap = (m) => m.error ? { kind: 'error', error: m.error } : { kind: 'result', result: m.result };
const session = createTaskSessionFromClient(client, {
  endpointId: 'bridge',
  rawDispatch,
  v2RequestFraming: { protocolVersion: '2026-07-28', clientInfo, clientCapabilities: taskCaps },
  onInputRequest: async (req) => {
    console.log('TASK INPUT', req.kind);
    // simulate-research-query asks which interpretation of its topic.
    if (req.params?.requestedSchema?.properties?.interpretation) return { action: 'accept', content: { interpretation: 'comedy' } };
    return { action: 'accept', content: { name: 'Tasked' } };
  },
});
// simulate-research-query is a task the server runs itself (taskSupport
// required): the gateway follows it there; ambiguous asks for clarification.
for (const [name, args] of [['trigger-long-running-operation', { duration: 2, steps: 2 }], ['trigger-elicitation-request', {}],
  ['simulate-research-query', { topic: 'tides' }], ['simulate-research-query', { topic: 'python', ambiguous: true }]]) {
  try {
    const execution = await session.callTool(name, args);
    const { outcome } = await execution.settle();
    console.log(name, 'TASK', outcome.kind ?? outcome.status ?? '', text(resultFromTaskOutcome(outcome)));
  } catch (e) {
    console.log(name, 'TASK ERROR', e?.code ?? '', (e?.message ?? String(e)).slice(0, 300));
  }
}
await session.close();
await client.close();
