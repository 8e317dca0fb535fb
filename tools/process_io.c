/* SPDX-License-Identifier: MIT */
/*
 * The process_io tool: input to a background process, its new output
 * back (lib/process/).
 */
#include "lib/process/process.h"
#include "tools/tools.h"

static const char process_io_schema[] =
	"{\"type\":\"object\","
	"\"properties\":{"
	"\"process_id\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"
	"\"description\":\"The id shell returned for the background process\"},"
	"\"input\":{\"type\":\"string\",\"maxLength\":65536,"
	"\"description\":\"Text written to its stdin (or terminal) first; include \\\"\\\\n\\\" to end a line. Taken whole or not at all: what the process does not read at once waits in its queue (at most 256 KiB, input_pending) and is written as it reads\"},"
	"\"eof\":{\"type\":\"boolean\","
	"\"description\":\"After the input, end its input (close stdin; on a terminal, send the end-of-file character)\"},"
	"\"wait_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":300000,"
	"\"description\":\"The longest to wait for output before returning (default 1000; 0: return at once)\"},"
	"\"until\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096,"
	"\"description\":\"Return as soon as the output new to this session matches this regular expression (ECMAScript syntax without lookaround or backreferences); with input, only output that comes after the input\"},"
	"\"max_bytes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":16777216,"
	"\"description\":\"The most output bytes returned (default 65536); the rest stays for the next call\"},"
	"\"cols\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000,"
	"\"description\":\"Resize its terminal to this many columns (tty processes)\"},"
	"\"rows\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000,"
	"\"description\":\"Resize its terminal to this many rows (tty processes)\"}},"
	"\"required\":[\"process_id\"],"
	"\"additionalProperties\":false}";

const struct tool_def tool_process_io = {
	.name = "process_io",
	.description = "Send input to a background process started by shell (background: true) and read its "
		       "output that this session has not read yet. Returns once until matches, the process "
		       "ends, or wait_ms passes; says whether it runs, how it ended (exit code or signal), "
		       "whether it is waiting for input, and how many bytes the buffer dropped unread. Once it "
		       "has ended by a signal or a non-zero exit, the result has isError: true, as with shell.",
	.input_schema = process_io_schema,
	.side_effects = SIDE_EXECUTE,
	.idempotent = false,
	.exec = process_io_exec,
	.cancel = process_call_cancel,
};
