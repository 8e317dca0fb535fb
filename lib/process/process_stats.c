/* SPDX-License-Identifier: MIT */
/*
 * The table's counters for admin/stats ("processes") and admin/metrics
 * (toolcalld_processes_*).
 */
#include "lib/process/process_internal.h"

#include "lib/base/openmetrics.h"
#include "proto/json.h"

void process_table_write_stats(const struct process_table *t, struct jgen *g)
{
	struct process_stats st = {0};
	if (t)
		process_table_stats(t, &st);
	jgen_key(g, "processes");
	jgen_obj_open(g);
	jgen_kv_int(g, "running", st.running);
	jgen_kv_int(g, "listed", st.listed);
	jgen_kv_int(g, "started", (int64_t)st.started);
	jgen_kv_int(g, "exited", (int64_t)st.exited);
	jgen_kv_int(g, "killed", (int64_t)st.killed);
	jgen_kv_int(g, "idleEnded", (int64_t)st.idle_ended);
	jgen_kv_int(g, "lifetimeEnded", (int64_t)st.lifetime_ended);
	jgen_kv_int(g, "refused", (int64_t)st.refused);
	jgen_kv_int(g, "forgotten", (int64_t)st.evicted);
	jgen_kv_int(g, "outputBytes", (int64_t)st.bytes);
	jgen_kv_int(g, "droppedBytes", (int64_t)st.dropped);
	jgen_obj_close(g);
}

void process_table_write_metrics(const struct process_table *t, struct buf *b)
{
	struct process_stats st = {0};
	if (t)
		process_table_stats(t, &st);
	metrics_family(b, "toolcalld_processes_running", "gauge", NULL, "Background processes running.");
	metrics_u64(b, "toolcalld_processes_running", NULL, st.running);
	metrics_family(b, "toolcalld_processes_started", "counter", NULL, "Background processes started.");
	metrics_u64(b, "toolcalld_processes_started_total", NULL, st.started);
	metrics_family(b, "toolcalld_processes_exited", "counter", NULL,
		       "Background processes ended, by reason (exit, killed, idle, lifetime).");
	const char *exit_l[] = { "reason", "exit", NULL }, *killed_l[] = { "reason", "killed", NULL };
	const char *idle_l[] = { "reason", "idle", NULL }, *life_l[] = { "reason", "lifetime", NULL };
	uint64_t other = st.exited - st.killed - st.idle_ended - st.lifetime_ended;
	metrics_u64(b, "toolcalld_processes_exited_total", exit_l, other);
	metrics_u64(b, "toolcalld_processes_exited_total", killed_l, st.killed);
	metrics_u64(b, "toolcalld_processes_exited_total", idle_l, st.idle_ended);
	metrics_u64(b, "toolcalld_processes_exited_total", life_l, st.lifetime_ended);
	metrics_family(b, "toolcalld_processes_refused", "counter", NULL,
		       "Background processes refused over limits.per_uid_processes.");
	metrics_u64(b, "toolcalld_processes_refused_total", NULL, st.refused);
	metrics_family(b, "toolcalld_processes_output_bytes", "counter", "bytes", "Output of background processes.");
	metrics_u64(b, "toolcalld_processes_output_bytes_total", NULL, st.bytes);
	metrics_family(b, "toolcalld_processes_dropped_bytes", "counter", "bytes",
		       "Output of background processes their rings let go before any session read it.");
	metrics_u64(b, "toolcalld_processes_dropped_bytes_total", NULL, st.dropped);
}
