/* Sizes given on the command line: "512" (MiB), "512M", "2G", "2GiB",
 * "100K", "1T"; binary units, case-insensitive, optional "iB"/"B". */
#ifndef SBFS_SIZE_PARSE_H
#define SBFS_SIZE_PARSE_H

#include <stdint.h>

/* Parses s into whole MiB, rounding a size that is not a whole number of
 * MiB up. 0 on success; -1 for anything else (empty, negative, unknown
 * unit, zero, or past 2^40 MiB). */
int sb_parse_size_mib(const char *s, uint64_t *mib);

#endif
