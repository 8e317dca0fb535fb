/* SPDX-License-Identifier: MIT */
/* The proxy tests' fixture (see net_fixture.h). */
#include "tests/unit/net_fixture.h"

#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "proto/json.h"
#include "tests/unit/loop_spin.h"


static void on_done(void *ctx, const struct net_conn_record *r)
{
	struct fx *f = ctx;
	unsigned i = atomic_load(&f->n_rec);

	ck_assert_uint_lt(i, MAX_RECORDS);
	struct record *x = &f->rec[i];
	x->proto = r->proto;
	snprintf(x->host, sizeof(x->host), "%s", r->host);
	x->port = r->port;
	snprintf(x->address, sizeof(x->address), "%s", r->address);
	x->decision = r->decision;
	snprintf(x->rule, sizeof(x->rule), "%s", r->rule);
	snprintf(x->error, sizeof(x->error), "%s", r->error ? r->error : "");
	x->up = r->bytes_up;
	x->down = r->bytes_down;
	atomic_store(&f->n_rec, i + 1);
}

static void on_ask(void *ctx, const char *host, uint16_t port, struct net_ask *ask)
{
	struct fx *f = ctx;
	ck_assert_ptr_null(f->ask);
	f->ask = ask;
	snprintf(f->ask_host, sizeof(f->ask_host), "%s", host);
	f->ask_port = port;
	f->asks++;
}

static void on_ask_cancel(void *ctx, struct net_ask *ask)
{
	struct fx *f = ctx;
	ck_assert_ptr_eq(f->ask, ask);
	f->ask = NULL;
	f->cancels++;
}

static const struct net_proxy_ops ops = {
	.ask = on_ask,
	.ask_cancel = on_ask_cancel,
	.connection_done = on_done,
};

void start(struct fx *f, struct net_limits *lim)
{
	char text[1024];
	struct json_doc *doc = NULL;
	struct json_err jerr;
	struct net_policy *pol = NULL;
	struct net_limits def;

	memset(f, 0, sizeof(*f));
	signal(SIGPIPE, SIG_IGN);	/* as the daemon does: splice(2) raises it */
	net_origin_start(&f->origin);
	net_echo_start(&f->echo);
	snprintf(text, sizeof(text),
		 "{\"allow\": [\"origin.test\", \"echo.test:%u\", \"meta.test\", \"ten.test\", \"localhost\", \"*.invalid\", \"::1\"],"
		 " \"deny\": [\"*.evil.test\"], \"unknown\": \"ask\", \"allow_private\": [\"127.0.0.0/8\"],"
		 " \"hosts\": {\"origin.test\": \"127.0.0.1\", \"echo.test\": \"127.0.0.1\","
		 " \"ask.test\": \"127.0.0.1\", \"meta.test\": \"169.254.169.254\", \"ten.test\": \"::ffff:10.0.0.1\"}}",
		 f->echo.port);
	ck_assert_int_eq(json_parse(text, strlen(text), 0, 0, &doc, &jerr), 0);
	ck_assert_int_eq(net_policy_parse(json_doc_root(doc), "network", &pol, NULL), 0);
	json_doc_unref(doc);
	f->ev = ev_loop_new(EVFLAG_AUTO);
	f->loop = tc_loop_ev_new(f->ev);
	if (!lim) {
		net_limits_default(&def);
		lim = &def;
	}
	struct net_proxy_config cfg = {
		.loop = f->loop,
		.policy = pol,
		.limits = *lim,
		.http_fd = net_test_listen(&f->http_port),
		.socks_fd = net_test_listen(&f->socks_port),
		.ops = &ops,
		.ctx = f,
	};
	ck_assert_int_eq(net_proxy_new(&cfg, &f->proxy), 0);
	net_policy_unref(pol);
}

void stop(struct fx *f)
{
	f->proxy = net_proxy_free(f->proxy);
	tc_loop_ev_free(f->loop);
	ev_loop_destroy(f->ev);
	net_origin_stop(&f->origin);
	net_echo_stop(&f->echo);
}

void *client_main(void *arg)
{
	struct fx *f = arg;
	f->client(f);
	atomic_store(&f->client_done, true);
	return NULL;
}

bool client_finished(void *arg)
{
	struct fx *f = arg;
	struct net_proxy_stats st;
	if (f->proxy) {
		net_proxy_stats(f->proxy, &st);
		atomic_store(&f->active, st.active);
	}
	return atomic_load(&f->client_done);
}

/* Runs fn in a client thread while the loop turns, until it returns. */
void run_client(struct fx *f, void (*fn)(struct fx *f))
{
	pthread_t t;
	f->client = fn;
	atomic_store(&f->client_done, false);
	pthread_create(&t, NULL, client_main, f);
	ck_assert_msg(loop_spin(f->ev, client_finished, f, 30000), "client did not finish");
	pthread_join(t, NULL);
}

static bool records_at_least(void *arg)
{
	struct fx *f = arg;
	client_finished(f);
	return atomic_load(&f->n_rec) >= (unsigned)atomic_load(&f->stage);
}

/* Waits (loop turning) until n records are in. */
void wait_records(struct fx *f, unsigned n)
{
	atomic_store(&f->stage, (int)n);
	ck_assert_msg(loop_spin(f->ev, records_at_least, f, 30000), "only %u records", atomic_load(&f->n_rec));
}

/* Waits from the client thread until cond holds (the loop's thread sets it). */
bool client_wait(_Atomic unsigned *v, unsigned want)
{
	struct timespec ts = { 0, 2 * 1000 * 1000 };
	for (int i = 0; i < 10000; i++) {
		if (atomic_load(v) == want)
			return true;
		nanosleep(&ts, NULL);
	}
	return false;
}


struct record *find_record(struct fx *f, const char *host, const char *error)
{
	for (unsigned i = 0; i < atomic_load(&f->n_rec); i++)
		if (strcmp(f->rec[i].host, host) == 0 && (!error || strcmp(f->rec[i].error, error) == 0))
			return &f->rec[i];
	return NULL;
}

struct record *find_rule(struct fx *f, const char *rule)
{
	for (unsigned i = 0; i < atomic_load(&f->n_rec); i++)
		if (strcmp(f->rec[i].rule, rule) == 0)
			return &f->rec[i];
	return NULL;
}
