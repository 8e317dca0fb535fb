/* SPDX-License-Identifier: MIT */
/*
 * The strict OpenMetrics text checker of openmetrics.h: one pass over the
 * lines, a table of the families seen, the samples seen (for duplicates)
 * and the state of each histogram label set.
 */
#include "tests/integ/openmetrics.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum om_type { OM_NONE, OM_COUNTER, OM_GAUGE, OM_HISTOGRAM, OM_UNKNOWN, OM_OTHER };

struct family {
	char name[256];
	enum om_type type;
	bool type_seen, help_seen, unit_seen, has_samples;
};

struct hist {
	char key[1400];		/* family + labels without le */
	double last_le, inf_count, last_count;
	bool any_bucket, inf_seen, count_seen, sum_seen;
	double count;
};

struct om {
	struct family fam[512];
	size_t n_fam;
	long cur;		/* index of the current family, -1 before any */
	char **samples;
	size_t n_samples;
	struct hist hist[1024];
	size_t n_hist;
	unsigned line;
	char *err;
	size_t errlen;
};

static int fail(struct om *o, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(o->err, o->errlen, "line %u: ", o->line);
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < o->errlen)
		vsnprintf(o->err + n, o->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static bool name_start(char c, bool colon)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
}

static bool name_char(char c, bool colon)
{
	return name_start(c, colon) || (c >= '0' && c <= '9');
}

/* Reads a metric name (colon true) or label name at *p into out. */
static int read_name(struct om *o, const char **p, char *out, size_t outlen, bool colon)
{
	const char *s = *p;
	if (!name_start(*s, colon))
		return fail(o, "expected a %s name at '%.20s'", colon ? "metric" : "label", s);
	size_t n = 0;
	while (name_char(s[n], colon))
		n++;
	if (n >= outlen)
		return fail(o, "name too long");
	memcpy(out, s, n);
	out[n] = '\0';
	*p = s + n;
	return 0;
}

/* Parses an OpenMetrics number (the whole of s..end). */
static int read_number(struct om *o, const char *s, size_t len, double *ret)
{
	char buf[64];
	if (len == 0 || len >= sizeof(buf))
		return fail(o, "bad number '%.*s'", (int)len, s);
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (!strcmp(buf, "+Inf") || !strcmp(buf, "Inf")) {
		*ret = INFINITY;
		return 0;
	}
	if (!strcmp(buf, "-Inf")) {
		*ret = -INFINITY;
		return 0;
	}
	if (!strcmp(buf, "NaN")) {
		*ret = NAN;
		return 0;
	}
	/* [-+]? digits [. digits] [(e|E) [-+]? digits], or [-+]? . digits ... */
	const char *q = buf;
	if (*q == '-' || *q == '+')
		q++;
	size_t digits = 0;
	while (*q >= '0' && *q <= '9')
		q++, digits++;
	if (*q == '.') {
		q++;
		while (*q >= '0' && *q <= '9')
			q++, digits++;
	}
	if (!digits)
		return fail(o, "bad number '%s'", buf);
	if (*q == 'e' || *q == 'E') {
		q++;
		if (*q == '-' || *q == '+')
			q++;
		if (!(*q >= '0' && *q <= '9'))
			return fail(o, "bad exponent in '%s'", buf);
		while (*q >= '0' && *q <= '9')
			q++;
	}
	if (*q)
		return fail(o, "bad number '%s'", buf);
	*ret = strtod(buf, NULL);
	return 0;
}

static enum om_type type_of(const char *s)
{
	if (!strcmp(s, "counter"))
		return OM_COUNTER;
	if (!strcmp(s, "gauge"))
		return OM_GAUGE;
	if (!strcmp(s, "histogram"))
		return OM_HISTOGRAM;
	if (!strcmp(s, "unknown"))
		return OM_UNKNOWN;
	if (!strcmp(s, "gaugehistogram") || !strcmp(s, "stateset") || !strcmp(s, "info") ||
	    !strcmp(s, "summary"))
		return OM_OTHER;
	return OM_NONE;
}

static long find_family(const struct om *o, const char *name)
{
	for (size_t i = 0; i < o->n_fam; i++)
		if (!strcmp(o->fam[i].name, name))
			return (long)i;
	return -1;
}

/* Makes name the current family; metadata of a family must come together,
 * before its samples, and a family cannot come back once left. */
static int enter_family(struct om *o, const char *name)
{
	if (o->cur >= 0 && !strcmp(o->fam[o->cur].name, name)) {
		if (o->fam[o->cur].has_samples)
			return fail(o, "metadata of %s after its samples", name);
		return 0;
	}
	if (find_family(o, name) >= 0)
		return fail(o, "family %s appears twice (interleaved)", name);
	if (o->n_fam == sizeof(o->fam) / sizeof(o->fam[0]))
		return fail(o, "too many families");
	struct family *f = &o->fam[o->n_fam];
	memset(f, 0, sizeof(*f));
	snprintf(f->name, sizeof(f->name), "%s", name);
	o->cur = (long)o->n_fam++;
	return 0;
}

/* Checks HELP text escapes: only \\, \n and \" after a backslash. */
static int check_escapes(struct om *o, const char *s, size_t len, bool quote_ends)
{
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '\\') {
			if (i + 1 >= len || (s[i + 1] != '\\' && s[i + 1] != 'n' && s[i + 1] != '"'))
				return fail(o, "bad escape in '%.*s'", (int)len, s);
			i++;
		} else if (quote_ends && s[i] == '"') {
			return fail(o, "unescaped quote");
		}
	}
	return 0;
}

static int metadata(struct om *o, const char *line, size_t len)
{
	const char *kind = line + 2;
	const char *p;
	if (!strncmp(kind, "TYPE ", 5) || !strncmp(kind, "HELP ", 5) || !strncmp(kind, "UNIT ", 5))
		p = kind + 5;
	else
		return fail(o, "a comment that is not # TYPE, # HELP, # UNIT or # EOF: '%.*s'", (int)len, line);
	char name[256];
	if (read_name(o, &p, name, sizeof(name), true) < 0)
		return -1;
	if (*p != ' ')
		return fail(o, "expected a space after %s", name);
	p++;
	size_t rest = len - (size_t)(p - line);
	if (enter_family(o, name) < 0)
		return -1;
	struct family *f = &o->fam[o->cur];
	if (kind[0] == 'T') {
		if (f->type_seen)
			return fail(o, "second # TYPE for %s", name);
		char t[32];
		snprintf(t, sizeof(t), "%.*s", (int)rest, p);
		f->type = type_of(t);
		if (f->type == OM_NONE || strlen(t) != rest)
			return fail(o, "unknown type '%.*s'", (int)rest, p);
		f->type_seen = true;
		if (f->type == OM_COUNTER && rest && strlen(name) > 6 &&
		    !strcmp(name + strlen(name) - 6, "_total"))
			return fail(o, "counter family %s must not end in _total", name);
	} else if (kind[0] == 'H') {
		if (f->help_seen)
			return fail(o, "second # HELP for %s", name);
		f->help_seen = true;
		return check_escapes(o, p, rest, false);
	} else {
		if (f->unit_seen)
			return fail(o, "second # UNIT for %s", name);
		f->unit_seen = true;
		size_t nl = strlen(name);
		if (rest == 0 || nl <= rest + 1 || name[nl - rest - 1] != '_' ||
		    strncmp(name + nl - rest, p, rest))
			return fail(o, "family %s does not end in its unit '%.*s'", name, (int)rest, p);
	}
	return 0;
}

/* Which sample names the current family allows; returns the suffix. */
static const char *sample_suffix(const struct family *f, const char *name)
{
	size_t fl = strlen(f->name);
	if (strncmp(name, f->name, fl))
		return NULL;
	const char *suffix = name + fl;
	static const char *const counter[] = { "_total", "_created", NULL };
	static const char *const histogram[] = { "_bucket", "_count", "_sum", "_created", NULL };
	static const char *const plain[] = { "", NULL };
	const char *const *allowed = f->type == OM_COUNTER ? counter :
				     f->type == OM_HISTOGRAM ? histogram : plain;
	for (size_t i = 0; allowed[i]; i++)
		if (!strcmp(suffix, allowed[i]))
			return suffix;
	return NULL;
}

static struct hist *hist_of(struct om *o, const char *key)
{
	for (size_t i = 0; i < o->n_hist; i++)
		if (!strcmp(o->hist[i].key, key))
			return &o->hist[i];
	if (o->n_hist == sizeof(o->hist) / sizeof(o->hist[0]))
		return NULL;
	struct hist *h = &o->hist[o->n_hist++];
	memset(h, 0, sizeof(*h));
	snprintf(h->key, sizeof(h->key), "%s", key);
	h->last_le = -INFINITY;
	return h;
}

static int sample(struct om *o, const char *line, size_t len)
{
	const char *p = line, *end = line + len;
	char name[256];
	if (read_name(o, &p, name, sizeof(name), true) < 0)
		return -1;
	if (o->cur < 0)
		return fail(o, "sample %s before any # TYPE", name);
	struct family *f = &o->fam[o->cur];
	const char *suffix = sample_suffix(f, name);
	if (!suffix)
		return fail(o, "sample %s does not belong to family %s (%s)", name, f->name,
			    f->type_seen ? "wrong suffix for its type" : "no # TYPE");
	if (!f->type_seen || !f->help_seen)
		return fail(o, "family %s has no # TYPE or no # HELP", f->name);
	f->has_samples = true;

	/* Labels: the text as written, and the same without le. */
	char labels[1024] = "", nole[1024] = "";
	double le = NAN;
	bool has_le = false;
	if (*p == '{') {
		const char *start = p++;
		char seen[32][64];
		size_t n_seen = 0;
		if (*p == '}')
			return fail(o, "empty label set '{}'");
		for (;;) {
			const char *item = p;
			char lname[64];
			if (read_name(o, &p, lname, sizeof(lname), false) < 0)
				return -1;
			for (size_t i = 0; i < n_seen; i++)
				if (!strcmp(seen[i], lname))
					return fail(o, "label %s twice", lname);
			if (n_seen < 32)
				snprintf(seen[n_seen++], sizeof(seen[0]), "%s", lname);
			if (*p++ != '=' || *p++ != '"')
				return fail(o, "expected =\" after label %s", lname);
			const char *v = p;
			while (p < end && *p != '"') {
				if (*p == '\\')
					p++;
				p++;
			}
			if (p >= end)
				return fail(o, "unterminated label value");
			if (check_escapes(o, v, (size_t)(p - v), true) < 0)
				return -1;
			size_t vlen = (size_t)(p - v);
			p++;
			if (!strcmp(lname, "le")) {
				if (read_number(o, v, vlen, &le) < 0)
					return -1;
				has_le = true;
			} else {
				size_t used = strlen(nole);
				snprintf(nole + used, sizeof(nole) - used, "%s%.*s", used ? "," : "",
					 (int)(p - item), item);
			}
			if (*p == ',') {
				p++;
				continue;
			}
			if (*p != '}')
				return fail(o, "expected , or } in the labels");
			p++;
			break;
		}
		snprintf(labels, sizeof(labels), "%.*s", (int)(p - start), start);
	}
	if (*p != ' ')
		return fail(o, "expected a space before the value of %s", name);
	p++;
	const char *v = p;
	while (p < end && *p != ' ')
		p++;
	double value;
	if (read_number(o, v, (size_t)(p - v), &value) < 0)
		return -1;
	if (p < end) {
		double ts;
		p++;
		if (read_number(o, p, (size_t)(end - p), &ts) < 0)
			return -1;
	}

	char key[1400];
	snprintf(key, sizeof(key), "%s%s", name, labels);
	for (size_t i = 0; i < o->n_samples; i++)
		if (!strcmp(o->samples[i], key))
			return fail(o, "sample %s twice", key);
	o->samples = realloc(o->samples, (o->n_samples + 1) * sizeof(*o->samples));
	o->samples[o->n_samples++] = strdup(key);

	if (f->type == OM_COUNTER && !strcmp(suffix, "_total") && !(value >= 0))
		return fail(o, "counter %s is %g", key, value);
	if (f->type != OM_HISTOGRAM) {
		if (has_le)
			return fail(o, "le label outside a histogram bucket");
		return 0;
	}
	char hkey[1400];
	snprintf(hkey, sizeof(hkey), "%s{%s}", f->name, nole);
	struct hist *h = hist_of(o, hkey);
	if (!h)
		return fail(o, "too many histograms");
	if (!strcmp(suffix, "_bucket")) {
		if (!has_le)
			return fail(o, "bucket %s without le", key);
		if (h->inf_seen || h->count_seen || h->sum_seen)
			return fail(o, "bucket %s after the +Inf bucket, _count or _sum", key);
		if (!(le > h->last_le))
			return fail(o, "bucket le=%g not above the previous le=%g", le, h->last_le);
		if (!(value >= h->last_count))
			return fail(o, "bucket le=%g counts %g, fewer than the one before (%g)", le, value,
				    h->last_count);
		h->last_le = le;
		h->last_count = value;
		h->any_bucket = true;
		if (isinf(le) && le > 0) {
			h->inf_seen = true;
			h->inf_count = value;
		}
		return 0;
	}
	if (has_le)
		return fail(o, "le label on %s", key);
	if (!strcmp(suffix, "_count")) {
		if (h->count_seen)
			return fail(o, "%s twice", key);
		h->count_seen = true;
		h->count = value;
	} else if (!strcmp(suffix, "_sum")) {
		h->sum_seen = true;
	}
	return 0;
}

int om_check(const char *text, char *err, size_t errlen)
{
	static struct om o;
	memset(&o, 0, sizeof(o));
	o.cur = -1;
	o.err = err;
	o.errlen = errlen;
	int r = 0;
	bool eof = false;
	const char *p = text;
	while (*p) {
		o.line++;
		const char *nl = strchr(p, '\n');
		if (!nl) {
			r = fail(&o, "the text does not end with a newline");
			break;
		}
		size_t len = (size_t)(nl - p);
		if (eof) {
			r = fail(&o, "text after # EOF");
			break;
		}
		if (len == 0)
			r = fail(&o, "an empty line");
		else if (len == 5 && !memcmp(p, "# EOF", 5))
			eof = true;
		else if (p[0] == '#')
			r = len > 2 && p[1] == ' ' ? metadata(&o, p, len) : fail(&o, "bad comment");
		else
			r = sample(&o, p, len);
		if (r < 0)
			break;
		for (size_t i = 0; i < len; i++)
			if ((unsigned char)p[i] < 0x20) {
				r = fail(&o, "a control character");
				break;
			}
		if (r < 0)
			break;
		p = nl + 1;
	}
	if (r == 0 && !eof)
		r = fail(&o, "no # EOF at the end");
	for (size_t i = 0; r == 0 && i < o.n_hist; i++) {
		const struct hist *h = &o.hist[i];
		if (!h->inf_seen)
			r = fail(&o, "histogram %s has no +Inf bucket", h->key);
		else if (!h->count_seen || !h->sum_seen)
			r = fail(&o, "histogram %s lacks _count or _sum", h->key);
		else if (h->count != h->inf_count)
			r = fail(&o, "histogram %s: _count %g but the +Inf bucket %g", h->key, h->count,
				 h->inf_count);
	}
	for (size_t i = 0; i < o.n_fam && r == 0; i++)
		if (!o.fam[i].type_seen || !o.fam[i].help_seen)
			r = fail(&o, "family %s has no # TYPE or no # HELP", o.fam[i].name);
	for (size_t i = 0; i < o.n_samples; i++)
		free(o.samples[i]);
	free(o.samples);
	return r;
}

double om_value(const char *text, const char *name, const char *labels)
{
	size_t nl = strlen(name), ll = strlen(labels);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (!strncmp(p, name, nl) && !strncmp(p + nl, labels, ll) && p[nl + ll] == ' ')
			return strtod(p + nl + ll + 1, NULL);
	}
	return -1;
}
