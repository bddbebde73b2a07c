#include "size_parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <strings.h>

#define SIZE_MAX_MIB (1ULL << 40)

/* log2 of the unit in KiB steps below MiB: K = -1, M = 0, G = 1, T = 2;
 * 99 for an unknown one. */
static int unit_shift(const char *u)
{
	if (!*u)
		return 0; /* a bare number is MiB */
	int shift;
	switch (toupper((unsigned char)*u)) {
	case 'K': shift = -1; break;
	case 'M': shift = 0; break;
	case 'G': shift = 1; break;
	case 'T': shift = 2; break;
	default: return 99;
	}
	u++;
	if (!*u || !strcasecmp(u, "B") || !strcasecmp(u, "iB"))
		return shift;
	return 99;
}

int sb_parse_size_mib(const char *s, uint64_t *mib)
{
	if (!s || !isdigit((unsigned char)*s))
		return -1;
	char *end;
	errno = 0;
	unsigned long long n = strtoull(s, &end, 10);
	if (errno || n == 0)
		return -1;
	int shift = unit_shift(end);
	if (shift == 99)
		return -1;
	unsigned long long v;
	if (shift < 0) {
		v = (n + 1023) / 1024; /* KiB, rounded up to whole MiB */
	} else {
		unsigned bits = 10u * (unsigned)shift;
		if (n > (SIZE_MAX_MIB >> bits))
			return -1;
		v = n << bits;
	}
	if (v > SIZE_MAX_MIB)
		return -1;
	*mib = v;
	return 0;
}
