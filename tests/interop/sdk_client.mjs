// SPDX-License-Identifier: MIT
//
// An off-the-shelf MCP client (the official TypeScript SDK) talking to
// toolcalld through `socat STDIO UNIX-CONNECT:sock`, unchanged. Exits
// non-zero at the first answer that is not what the contract says.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import assert from "node:assert/strict";

const sock = process.argv[2];
const transport = new StdioClientTransport({ command: "socat", args: ["STDIO", `UNIX-CONNECT:${sock}`] });
const client = new Client({ name: "toolcalld-interop", version: "1.0.0" });
await client.connect(transport);

assert.equal(client.getServerVersion().name, "toolcalld");
assert.equal(client.getServerCapabilities().tools.listChanged, true);

const { tools } = await client.listTools();
assert.deepEqual(tools.map((t) => t.name), ["list_dir", "patch_file", "read_file", "shell", "write_file"]);

const r = await client.callTool({ name: "read_file", arguments: { path: "hello.txt" } });
assert.equal(r.isError, false);
assert.equal(r.content[0].text, "hello from the workspace\n");
assert.equal(r.structuredContent.size, 25);

await assert.rejects(client.callTool({ name: "red_file", arguments: {} }), (e) => e.code === -32601);
await assert.rejects(client.callTool({ name: "read_file", arguments: { path: "../../etc/passwd" } }),
	(e) => e.code === -32603 && /escapes the workspace/.test(e.message));
await assert.rejects(client.callTool({ name: "read_file", arguments: { path: 5 } }), (e) => e.code === -32602);

const sh = await client.callTool({ name: "shell", arguments: { command: "echo hi; exit 2" } });
assert.equal(sh.isError, true);
assert.equal(sh.structuredContent.exit_code, 2);
assert.equal(sh.structuredContent.stdout, "hi\n");

await client.ping();
await client.close();
console.log("interop: the MCP TypeScript SDK works with toolcalld through socat");
