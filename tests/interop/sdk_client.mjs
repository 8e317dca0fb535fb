// SPDX-License-Identifier: MIT
//
// An off-the-shelf MCP client (the official TypeScript SDK) talking to
// toolcalld as a host would: through `toolcallctl mcp` (the stdio bridge,
// which asks for tool errors as results) or through
// `socat STDIO UNIX-CONNECT:sock` (the socket as it is). Usage:
//   node sdk_client.mjs bridge|socket|down SOCKET [TOOLCALLCTL]
// ("down": no daemon listens at SOCKET; the bridge must say so.)
// Exits non-zero at the first answer that is not what the contract says.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import assert from "node:assert/strict";

const [mode, sock, ctl] = process.argv.slice(2);
const bridge = mode === "bridge" || mode === "down";
const transport = bridge
	? new StdioClientTransport({ command: ctl, args: ["mcp", "-s", sock] })
	: new StdioClientTransport({ command: "socat", args: ["STDIO", `UNIX-CONNECT:${sock}`] });
const client = new Client({ name: "toolcalld-interop", version: "1.0.0" },
	{ capabilities: { elicitation: {} } });
// Elicitation: the user (this handler) allows what it is asked about.
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (req) => {
	asked.push(req.params);
	return { action: "accept", content: { decision: "allow" } };
});
if (mode === "down") {
	// No daemon at sock: initialize is answered with an error naming it.
	await assert.rejects(client.connect(transport), (e) => e.message.includes(sock));
	console.log("interop (down): the bridge names the socket it tried when the daemon is down");
	process.exit(0);
}
await client.connect(transport);

assert.equal(client.getServerVersion().name, "toolcalld");
assert.equal(client.getServerCapabilities().tools.listChanged, true);

// list
const { tools } = await client.listTools();
const names = tools.map((t) => t.name);
for (const want of ["list_dir", "read_file", "write_file", "patch_file", "shell", "search", "glob"])
	assert.ok(names.includes(want), `tools/list lacks ${want}: ${names}`);

// call
const r = await client.callTool({ name: "read_file", arguments: { path: "hello.txt" } });
assert.equal(r.isError, false);
assert.equal(r.content[0].text, "     1\thello from the workspace\n");
assert.equal(r.structuredContent.size, 25);

// errors: an unknown tool stays a JSON-RPC error; the others are isError
// results the model sees through the bridge (toolErrors "result"), and
// JSON-RPC errors on the bare socket (the default, "envelope").
await assert.rejects(client.callTool({ name: "red_file", arguments: {} }), (e) => e.code === -32601);
if (bridge) {
	const esc = await client.callTool({ name: "read_file", arguments: { path: "../../etc/passwd" } });
	assert.equal(esc.isError, true);
	assert.match(esc.content[0].text, /escapes the workspace/);
	assert.equal(esc.structuredContent.error.kind, "permission_denied");
	const bad = await client.callTool({ name: "read_file", arguments: { path: 5 } });
	assert.equal(bad.isError, true);
	assert.equal(bad.structuredContent.error.kind, "validation_error");
} else {
	await assert.rejects(client.callTool({ name: "read_file", arguments: { path: "../../etc/passwd" } }),
		(e) => e.code === -32603 && /escapes the workspace/.test(e.message));
	await assert.rejects(client.callTool({ name: "read_file", arguments: { path: 5 } }), (e) => e.code === -32602);
}

const sh = await client.callTool({ name: "shell", arguments: { command: "echo hi; exit 2" } });
assert.equal(sh.isError, true);
assert.equal(sh.structuredContent.exit_code, 2);
assert.equal(sh.structuredContent.stdout, "hi\n");

// elicitation: write_file needs confirmation and no approver is connected;
// a daemon that asks through elicitation/create gets this client's
// "allow". A daemon built without elicitation refuses the call
// (user_denied): the case is then skipped, saying so.
let w;
try {
	w = await client.callTool({ name: "write_file", arguments: { path: "elicited.txt", content: "yes\n" } });
} catch (e) {
	w = { isError: true, content: [{ text: e.message }] };
}
if (asked.length === 0) {
	assert.equal(w.isError, true);
	console.log(`interop (${mode}): SKIP elicitation: this daemon does not ask through elicitation/create ` +
		`(not in this build); the call was refused: ${w.content[0].text.slice(0, 80)}...`);
} else {
	assert.equal(w.isError, false, JSON.stringify(w));
	assert.match(JSON.stringify(asked[0]), /write_file/);
	const back = await client.callTool({ name: "read_file", arguments: { path: "elicited.txt" } });
	assert.equal(back.content[0].text, "     1\tyes\n");
	console.log(`interop (${mode}): elicitation answered by the SDK's handler`);
}

await client.ping();
await client.close();
console.log(`interop (${mode}): the MCP TypeScript SDK works with toolcalld through ` +
	(bridge ? "toolcallctl mcp" : "socat"));
