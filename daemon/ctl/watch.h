/* SPDX-License-Identifier: MIT */
/*
 * toolcallctl watch: subscribing to events and printing them; the event
 * helpers approve shares.
 */
#ifndef TC_CTL_WATCH_H
#define TC_CTL_WATCH_H

#include "daemon/ctl/client.h"

/* Opens an MCP session and subscribes to the given event types. */
int subscribe(struct client *c, struct opts *o, char **types, int n);
/* The params of a notifications/event message, or NULL. */
const struct json *event_of(const struct json *msg);
/* Prints an event as a line (or as compact JSON with --json). */
void print_event(const struct opts *o, const struct json *event);
/* watch: checks the patterns. */
int check_watch(struct opts *o, char **args, int n);
/* watch [PATTERN...]: one line per event until interrupted. */
int run_watch(struct client *c, struct opts *o, char **args, int n);

#endif
