/* SPDX-License-Identifier: MIT */
/*
 * String vectors (NULL-terminated arrays of malloc'd strings): the one
 * place they are freed.
 */
#include "proto/base/strv.h"

#include <stdlib.h>

char **strv_free(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
	return NULL;
}
