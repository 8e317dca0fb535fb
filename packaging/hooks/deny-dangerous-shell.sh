#!/bin/sh
# SPDX-License-Identifier: MIT
#
# An example pre_call hook for toolcalld (see toolcalld.conf(5), "hooks"):
# refuses `shell` commands that would remove the root or the home directory
# recursively, or pipe a download into a shell, and lets everything else go
# on as the confirmation policy says (it prints nothing).
#
#   "hooks": {"pre_call": [{"match": "shell",
#       "command": ["/usr/share/toolcalld/hooks/deny-dangerous-shell.sh"]}]}
#
# The call arrives as one JSON object on stdin: {"hook": "pre_call", "tool",
# "arguments", "sessionId", "peer": {"uid", "pid"}, "workspace",
# "sideEffects", "callId"}. This script matches the raw JSON text, which is
# enough for an example; a real policy should parse it (jq, python3) since
# a command can be spelt many ways.

input=$(head -c 1048576)

deny() {
	# The reason goes back to the model in the permission_denied error.
	printf '{"decision":"deny","reason":"%s"}\n' "$1"
	exit 0
}

# "rm -rf /", "rm -fr ~", "rm -r -f /*" ...
if printf '%s' "$input" | grep -Eq 'rm([[:space:]]+-[[:alpha:]]+)+[[:space:]]+(/|~|\$HOME)(\*|/)?([[:space:];&|"]|$)'; then
	deny "recursive removal of / or the home directory is not allowed"
fi
# "curl ... | sh", "wget -O- ... | bash"
if printf '%s' "$input" | grep -Eq '(curl|wget)[^|]*\|[[:space:]]*(sudo[[:space:]]+)?(ba|z|da)?sh'; then
	deny "piping a download into a shell is not allowed"
fi
# No opinion: the policy decides.
exit 0
