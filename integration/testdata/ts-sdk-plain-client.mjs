// A 2025-11-25 client on the official TypeScript SDK (v1): it connects,
// lists the tools, calls each named on the command line (name=JSON
// arguments) with client.callTool, or as a task with
// client.experimental.tasks.callToolStream when the name starts with
// "task:", pings and closes the session, printing one line per step for
// the Go test (TestFollowV2026TSSDKv1Client) to check.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const url = new URL(process.argv[2]);
const client = new Client({ name: 'ts-sdk-plain', version: '1.0.0' }, { capabilities: {} });
const transport = new StreamableHTTPClientTransport(url);
try {
  await client.connect(transport);
} catch (e) {
  console.log('CONNECT ERROR', e?.code ?? '', (e?.message ?? String(e)).slice(0, 300));
  process.exit(0);
}
console.log('CONNECTED', client.getServerVersion()?.name, 'session', transport.sessionId ? 'yes' : 'no');
const tools = await client.listTools();
console.log('TOOLS', tools.tools.map(t => t.name).sort().join(' '));
console.log('SERVER TASKS', JSON.stringify(client.getServerCapabilities()?.tasks ?? null));
for (const arg of process.argv.slice(3)) {
  const i = arg.indexOf('=');
  let name = arg.slice(0, i);
  if (name.startsWith('task:')) {
    name = name.slice(5);
    const stream = client.experimental.tasks.callToolStream({ name, arguments: JSON.parse(arg.slice(i + 1)) }, undefined, { task: { ttl: 60000 } });
    for await (const msg of stream) {
      if (msg.type === 'taskCreated') console.log('TASK', name, 'CREATED', msg.task.status);
      else if (msg.type === 'taskStatus') console.log('TASK', name, 'STATUS', msg.task.status);
      else if (msg.type === 'result') console.log('TASK', name, 'RESULT', JSON.stringify(msg.result.content?.[0]?.text ?? ''));
      else if (msg.type === 'error') console.log('TASK', name, 'ERROR', msg.error?.code, msg.error?.message);
    }
    continue;
  }
  try {
    const res = await client.callTool({ name, arguments: JSON.parse(arg.slice(i + 1)) });
    console.log('CALL', name, res.isError ? 'TOOL ERROR' : 'OK', JSON.stringify(res.content?.[0]?.text ?? ''));
  } catch (e) {
    console.log('CALL', name, 'ERROR', e?.code ?? '', (e?.message ?? String(e)).slice(0, 200));
  }
}
await client.ping();
console.log('PING OK');
await transport.terminateSession();
console.log('TERMINATED');
await client.close();
