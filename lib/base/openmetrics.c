/* SPDX-License-Identifier: MIT */
/*
 * The OpenMetrics text writer of openmetrics.h: families, samples and
 * label values escaped.
 */
#include "lib/base/openmetrics.h"

#include "proto/base/buf.h"

void metrics_family(struct buf *b, const char *name, const char *type, const char *unit,
		    const char *help)
{
	buf_printf(b, "# TYPE %s %s\n", name, type);
	if (unit)
		buf_printf(b, "# UNIT %s %s\n", name, unit);
	buf_printf(b, "# HELP %s %s\n", name, help);
}

/* Writes a label value with \\, \" and \n escaped. */
static void put_label_value(struct buf *b, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			buf_putc(b, '\\'), buf_putc(b, *v);
		else if (*v == '\n')
			buf_puts(b, "\\n");
		else
			buf_putc(b, *v);
	}
}

static void put_name_labels(struct buf *b, const char *name, const char *const *labels)
{
	buf_puts(b, name);
	if (!labels || !labels[0])
		return;
	buf_putc(b, '{');
	for (size_t i = 0; labels[i]; i += 2) {
		if (i)
			buf_putc(b, ',');
		buf_puts(b, labels[i]);
		buf_puts(b, "=\"");
		put_label_value(b, labels[i + 1]);
		buf_putc(b, '"');
	}
	buf_putc(b, '}');
}

void metrics_u64(struct buf *b, const char *name, const char *const *labels, uint64_t v)
{
	put_name_labels(b, name, labels);
	buf_putc(b, ' ');
	buf_put_u64(b, v);
	buf_putc(b, '\n');
}

void metrics_real(struct buf *b, const char *name, const char *const *labels, double v)
{
	put_name_labels(b, name, labels);
	buf_printf(b, " %.9g\n", v);
}

void metrics_end(struct buf *b)
{
	buf_puts(b, "# EOF\n");
}

