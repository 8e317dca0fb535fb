/* SPDX-License-Identifier: MIT */
/*
 * What the test MCP server's "content" tool answers, for the tests to
 * compare byte for byte: an item of every MCP content type (text, image,
 * audio, an embedded text and blob resource, a resource link), with
 * annotations and _meta, its structuredContent and the result's _meta.
 */
#ifndef TC_TEST_MCP_SERVER_H
#define TC_TEST_MCP_SERVER_H

#define MCP_CONTENT_ITEMS \
	"[{\"type\":\"text\",\"text\":\"caf\\u00e9 \\\"quoted\\\"\",\"annotations\":{\"audience\":[\"user\"]," \
	"\"priority\":0.5},\"_meta\":{\"x/y\":1}}," \
	"{\"type\":\"image\",\"data\":\"iVBORw0KGgo=\",\"mimeType\":\"image/png\"}," \
	"{\"type\":\"audio\",\"data\":\"UklGRg==\",\"mimeType\":\"audio/wav\",\"annotations\":{\"priority\":1}}," \
	"{\"type\":\"resource\",\"resource\":{\"uri\":\"file:///notes.txt\",\"mimeType\":\"text/plain\"," \
	"\"text\":\"the notes\"},\"annotations\":{\"lastModified\":\"2025-01-01T00:00:00Z\"}}," \
	"{\"type\":\"resource\",\"resource\":{\"uri\":\"file:///b.bin\",\"blob\":\"AAEC\"}}," \
	"{\"type\":\"resource_link\",\"uri\":\"file:///big.log\",\"name\":\"big.log\",\"size\":12345," \
	"\"_meta\":{\"k\":[true,null]}}]"
#define MCP_CONTENT_STRUCTURED "{\"n\":1.50,\"list\":[1,2]}"
/* The result's _meta: its own members, and one that claims to be the daemon's. */
#define MCP_CONTENT_META "{\"x/trace\":\"t-1\",\"toolcalld/callId\":\"forged\"}"

#endif
