// A 2025-11-25 client on the official TypeScript SDK (v1) that uses tools
// plainly: it connects, lists the tools, calls each named on the command
// line (name=JSON arguments) with client.callTool, pings and closes the
// session, printing one line per step for the Go test
// (TestFollowV2026TSSDKv1Client) to check.
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
for (const arg of process.argv.slice(3)) {
  const i = arg.indexOf('=');
  const name = arg.slice(0, i);
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
