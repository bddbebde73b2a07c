/* A tiny assertion harness for the C unit tests: each CHECK failure prints
 * where and what, and the test exits non-zero at the end. */
#ifndef SBFS_UNIT_H
#define SBFS_UNIT_H

#include <stdio.h>
#include <string.h>

static int unit_failures;
static int unit_checks;

#define CHECK(cond)                                                        \
	do {                                                               \
		unit_checks++;                                             \
		if (!(cond)) {                                             \
			unit_failures++;                                   \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n",       \
				__FILE__, __LINE__, #cond);                \
		}                                                          \
	} while (0)

#define CHECK_INT(a, b)                                                    \
	do {                                                               \
		long long unit_a = (long long)(a), unit_b = (long long)(b); \
		unit_checks++;                                             \
		if (unit_a != unit_b) {                                    \
			unit_failures++;                                   \
			fprintf(stderr, "%s:%d: %s == %lld, expected %lld\n", \
				__FILE__, __LINE__, #a, unit_a, unit_b);   \
		}                                                          \
	} while (0)

#define CHECK_MEM(a, alen, b, blen)                                        \
	do {                                                               \
		unit_checks++;                                             \
		if ((size_t)(alen) != (size_t)(blen) ||                    \
		    memcmp((a), (b), (size_t)(alen)) != 0) {               \
			unit_failures++;                                   \
			fprintf(stderr, "%s:%d: %s differs from %s\n",     \
				__FILE__, __LINE__, #a, #b);               \
		}                                                          \
	} while (0)

static inline int unit_done(const char *name)
{
	printf("%s: %d checks, %d failed\n", name, unit_checks, unit_failures);
	return unit_failures ? 1 : 0;
}

#endif
