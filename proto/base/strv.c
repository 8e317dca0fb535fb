/* SPDX-License-Identifier: MIT */
/*
 * String vectors (NULL-terminated arrays of malloc'd strings): the one
 * place they are freed.
 */
#include "proto/base/strv.h"

#include <stdlib.h>

#include "proto/base/util.h"

char **strv_free(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
	return NULL;
}

char **strv_dup(const char *const *v)
{
	if (!v)
		return NULL;
	size_t n = 0;
	while (v[n])
		n++;
	char **copy = xcalloc(n + 1, sizeof(*copy));
	for (size_t i = 0; i < n; i++)
		copy[i] = xstrdup(v[i]);
	return copy;
}
