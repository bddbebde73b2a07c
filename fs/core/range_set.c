#include "range_set.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void range_set_free(struct range_set *s)
{
	free(s->v);
	s->v = NULL;
	s->n = s->cap = 0;
}

void range_set_clear(struct range_set *s) { s->n = 0; }

int range_set_add(struct range_set *s, off_t start, off_t end)
{
	if (start >= end)
		return 0;
	/* First range that ends at or after start: it may touch the new one. */
	size_t i = 0;
	while (i < s->n && s->v[i].end < start)
		i++;
	size_t j = i;
	while (j < s->n && s->v[j].start <= end) {
		if (s->v[j].start < start)
			start = s->v[j].start;
		if (s->v[j].end > end)
			end = s->v[j].end;
		j++;
	}
	if (i == j) {
		/* No overlap: insert at i. */
		if (s->n == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 4;
			struct range *v = realloc(s->v, cap * sizeof *v);
			if (!v)
				return -ENOMEM;
			s->v = v;
			s->cap = cap;
		}
		memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof *s->v);
		s->n++;
	} else if (j - i > 1) {
		/* Ranges i..j-1 merge into i. */
		memmove(&s->v[i + 1], &s->v[j], (s->n - j) * sizeof *s->v);
		s->n -= j - i - 1;
	}
	s->v[i].start = start;
	s->v[i].end = end;
	return 0;
}

void range_set_clip(struct range_set *s, off_t off)
{
	while (s->n > 0 && s->v[s->n - 1].start >= off)
		s->n--;
	if (s->n > 0 && s->v[s->n - 1].end > off)
		s->v[s->n - 1].end = off;
}

bool range_set_first_gap(const struct range_set *s, off_t start, off_t end,
			 off_t *gap_start, off_t *gap_end)
{
	off_t pos = start;
	for (size_t i = 0; i < s->n && pos < end; i++) {
		if (s->v[i].end <= pos)
			continue;
		if (s->v[i].start > pos) {
			*gap_start = pos;
			*gap_end = s->v[i].start < end ? s->v[i].start : end;
			return true;
		}
		pos = s->v[i].end;
	}
	if (pos < end) {
		*gap_start = pos;
		*gap_end = end;
		return true;
	}
	return false;
}

bool range_set_covers(const struct range_set *s, off_t start, off_t end)
{
	off_t a, b;
	return start >= end || !range_set_first_gap(s, start, end, &a, &b);
}
