/* SPDX-License-Identifier: MIT */
/*
 * String vectors: NULL-terminated arrays of malloc'd strings (argv, envp),
 * freed whole.
 */
#ifndef TC_STRV_H
#define TC_STRV_H

/* Frees every string of v and v itself; accepts NULL. Returns NULL. */
char **strv_free(char **v);

/* A copy of v (NULL-terminated, NULL for NULL): new strings, new array. */
char **strv_dup(const char *const *v);

static inline void strv_freep(char ***v)
{
	strv_free(*v);
}

#endif
