/* A set of byte ranges [start, end): which parts of a spool file hold
 * valid data. Kept sorted, merged and non-overlapping. */
#ifndef SBFS_RANGE_SET_H
#define SBFS_RANGE_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct range {
	off_t start, end;
};

struct range_set {
	struct range *v;
	size_t n, cap;
};

void range_set_free(struct range_set *s);
void range_set_clear(struct range_set *s);
/* 0, or -ENOMEM */
int range_set_add(struct range_set *s, off_t start, off_t end);
/* Drops everything at or after off (a truncate). */
void range_set_clip(struct range_set *s, off_t off);
bool range_set_covers(const struct range_set *s, off_t start, off_t end);
/* The first gap inside [start, end), as [*gap_start, *gap_end); false when
 * [start, end) is fully covered. */
bool range_set_first_gap(const struct range_set *s, off_t start, off_t end,
			 off_t *gap_start, off_t *gap_end);

#endif
