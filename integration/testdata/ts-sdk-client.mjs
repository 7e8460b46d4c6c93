// A 2025-11-25 task client on the official TypeScript SDK (v1): it runs each
// fixture tool as a task through client.experimental.tasks.callToolStream,
// answers elicitations, and prints one line per event for the Go test
// (TestTypeScriptSDKClient, TestFollowV2026TSSDKv1Client) to check.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const url = new URL(process.argv[2]);
const client = new Client({ name: 'ts-sdk-e2e', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  console.log('ELICIT', JSON.stringify(req.params.message));
  return { action: 'accept', content: { confirm: true } };
});
try {
  await client.connect(new StreamableHTTPClientTransport(url));
} catch (e) {
  // A server that does not speak 2025-11-25 (a 2026-07-28-only task
  // runtime) refuses initialize: say how, for the Go test to check.
  console.log('CONNECT ERROR', e?.code ?? '', (e?.message ?? String(e)).slice(0, 300));
  process.exit(0);
}
console.log('SERVER CAPS', JSON.stringify(client.getServerCapabilities().tasks));
const tools = await client.listTools();
console.log('TOOLS', tools.tools.map(t => `${t.name}:${t.execution?.taskSupport}`).join(' '));
for (const [name, args] of [['slow_compute', { seconds: 1.5, label: 'ts' }], ['failing_job', {}], ['confirm_delete', { filename: 'ts.txt' }], ['protocol_error_job', {}]]) {
  const stream = client.experimental.tasks.callToolStream({ name, arguments: args }, undefined, { task: { ttl: 60000 } });
  for await (const msg of stream) {
    if (msg.type === 'taskCreated') console.log(name, 'CREATED', msg.task.taskId, msg.task.status);
    else if (msg.type === 'taskStatus') console.log(name, 'STATUS', msg.task.status);
    else if (msg.type === 'result') console.log(name, 'RESULT', JSON.stringify(msg.result).slice(0, 150));
    else if (msg.type === 'error') console.log(name, 'ERROR', msg.error?.code, msg.error?.message);
  }
}
const list = await client.experimental.tasks.listTasks?.().catch(e => ({ err: e.message }));
console.log('LIST', JSON.stringify(list)?.slice(0, 200));
await client.close();
