/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the config file parser: any bytes must give either
 * a config or one located error message, never a crash or a leak. A loaded
 * config is also run through the confirmation policy.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "daemon/config.h"
#include "lib/policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config c;
	char *err = NULL;

	config_init(&c);
	int r = config_load_text(&c, "fuzz.json", "/fuzz", (const char *)data, size, &err);
	if (r < 0) {
		/* Every failure explains itself. */
		if (!err)
			abort();
		free(err);
	} else {
		for (int cls = 0; cls < SIDE_MAX; cls++)
			(void)policy_decide(&c.confirmation, "shell", (enum side_effect)cls, "/fuzz/ws");
	}
	config_free(&c);
	return 0;
}
