// A 2026-07-28 task client on the official requester library
// (@modelcontextprotocol/ext-tasks over @modelcontextprotocol/client 2.x):
// each fixture tool is called through a task session, input requests are
// answered, and one line per outcome is printed for the Go test
// (TestExtTasksClient) to check. The library leaves raw 2026-07-28 dispatch
// to the host; rawDispatch below is that host part: it frames the request
// with the routing headers and reads a JSON or SSE answer.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient, resultFromTaskOutcome } from '@modelcontextprotocol/ext-tasks/client';

const url = process.argv[2];
const caps = { elicitation: { form: {} }, extensions: { 'io.modelcontextprotocol/tasks': {} } };
const clientInfo = { name: 'ext-tasks-e2e', version: '1.0.0' };
const client = new Client(clientInfo, { capabilities: caps, versionNegotiation: { mode: 'auto' } });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
console.log('ERA', client.getProtocolEra?.());
let nextId = 1;
const rawDispatch = async (request) => {
  const req = { jsonrpc: '2.0', ...request, id: request.id ?? `raw-${nextId++}` };
  const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': req.method };
  const name = req.params?.name ?? req.params?.taskId;
  if (name) headers['Mcp-Name'] = name;
  if (process.env.DEBUG) console.log('RAW >', JSON.stringify(req).slice(0, 300));
  const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(req) });
  const text = await res.text();
  if (process.env.DEBUG) console.log('RAW <', res.status, text.slice(0, 300));
  if ((res.headers.get('content-type') || '').includes('text/event-stream')) {
    const datas = text.split(/\n\n/).map(e => e.split('\n').filter(l => l.startsWith('data:')).map(l => l.slice(5).trim()).join('\n')).filter(Boolean);
    for (const d of datas) { const m = JSON.parse(d); if (m.id !== undefined && (m.result || m.error)) return wrap(m); }
    throw new Error('no response in stream');
  }
  return wrap(JSON.parse(text));
};
const wrap = (m) => m.error ? { kind: 'error', error: m.error } : { kind: 'result', result: m.result };
const session = createTaskSessionFromClient(client, {
  endpointId: 'gateway',
  rawDispatch,
  v2RequestFraming: { protocolVersion: '2026-07-28', clientInfo, clientCapabilities: caps },
  onInputRequest: async (req) => { console.log('INPUT', req.kind, JSON.stringify(req.params?.message)); return { action: 'accept', content: { confirm: true, name: 'Ext', color: 'blue' } }; },
});
for (const [name, args] of [['greet', { name: 'ext' }], ['slow_compute', { seconds: 1.5, label: 'ext' }], ['failing_job', {}], ['confirm_delete', { filename: 'ext.txt' }], ['multi_input', {}], ['test_tool_with_task', {}], ['protocol_error_job', {}]]) {
  try {
    const execution = await session.callTool(name, args);
    const { outcome } = await execution.settle();
    console.log(name, 'OUTCOME', outcome.kind ?? outcome.status ?? '', JSON.stringify(resultFromTaskOutcome(outcome)).slice(0, 160));
  } catch (e) {
    console.log(name, 'ERROR', e?.code ?? '', (e?.message ?? String(e)).slice(0, 200), e?.cause?.message ?? '', JSON.stringify(e?.data ?? e?.details ?? '').slice(0,300));
  }
}
await session.close();
await client.close();
