/* SPDX-License-Identifier: MIT */
/*
 * toolcallctl ps and kill: the background processes of the peer (every
 * uid's for root and the daemon's user).
 */
#ifndef TC_CTL_PS_H
#define TC_CTL_PS_H

#include "daemon/ctl/client.h"

/* ps: one line per process (--json: the answer). */
int run_ps(struct client *c, struct opts *o, char **args, int n);
/* kill ID [SIGNAL]: SIGNAL (default TERM), then KILL after the grace delay. */
int run_kill(struct client *c, struct opts *o, char **args, int n);

#endif
