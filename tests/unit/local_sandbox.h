/* A local-backend sandbox whose workspaces live under root, for the unit
 * tests that drive a real one. */
#ifndef SBFS_TESTS_LOCAL_SANDBOX_H
#define SBFS_TESTS_LOCAL_SANDBOX_H

#include "backends/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline struct sb_backend *local_sandbox(const char *root, bool shell_only)
{
	struct sb_spec spec;
	sb_spec_init(&spec);
	char opt[600];
	snprintf(opt, sizeof(opt), "local_root=%s", root);
	spec.options = calloc(2, sizeof(char *));
	spec.options[0] = strdup(opt);
	char err[512] = "";
	struct sb_backend *b = sb_backend_create(sb_backend_find("local"), &spec,
						 shell_only, err, sizeof(err));
	if (!b)
		fprintf(stderr, "create failed: %s\n", err);
	return b;
}

#endif
