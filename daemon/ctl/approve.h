/* SPDX-License-Identifier: MIT */
/*
 * toolcallctl approve: answering confirmation requests.
 */
#ifndef TC_CTL_APPROVE_H
#define TC_CTL_APPROVE_H

#include "daemon/ctl/client.h"

/* approve: answers confirmation requests from stdin, one line each. */
int run_approve(struct client *c, struct opts *o, char **args, int n);

#endif
