#include "readahead.h"

#include <stdbool.h>

/* The end of the run of covered bytes (present or in flight) starting at
 * pos, or pos when pos is not covered. */
static off_t covered_until(const struct read_plan_in *in, off_t pos)
{
	bool moved = true;
	while (moved) {
		moved = false;
		for (size_t i = 0; i < in->present->n; i++) {
			const struct range *r = &in->present->v[i];
			if (r->start <= pos && pos < r->end) {
				pos = r->end;
				moved = true;
			}
		}
		for (size_t i = 0; i < in->n_inflight; i++) {
			const struct range *r = &in->inflight[i];
			if (r->start <= pos && pos < r->end) {
				pos = r->end;
				moved = true;
			}
		}
	}
	return pos;
}

/* The first covered byte after pos (pos itself not covered), or limit. */
static off_t gap_until(const struct read_plan_in *in, off_t pos, off_t limit)
{
	off_t next = limit;
	for (size_t i = 0; i < in->present->n; i++)
		if (in->present->v[i].start > pos && in->present->v[i].start < next)
			next = in->present->v[i].start;
	for (size_t i = 0; i < in->n_inflight; i++)
		if (in->inflight[i].start > pos && in->inflight[i].start < next)
			next = in->inflight[i].start;
	return next;
}

size_t read_plan(const struct read_plan_in *in, struct range *out, size_t max,
		 size_t *next_window)
{
	size_t n = 0, ahead = 0;
	size_t cap = in->max_window ? in->max_window : READ_WINDOW_MAX;
	size_t w = in->window ? in->window : READ_WINDOW_MIN;
	if (w > cap)
		w = cap;
	off_t window = (off_t)w;
	/* Read-ahead reaches at most this far: a bound on what is fetched
	 * for a reader that stops. */
	off_t horizon = in->end + (off_t)in->ahead * (off_t)cap;
	if (horizon > in->size)
		horizon = in->size;
	off_t pos = in->off;
	while (n < max && pos < horizon) {
		pos = covered_until(in, pos);
		if (pos >= horizon)
			break;
		bool needed = pos < in->end;
		if (!needed && ahead >= in->ahead)
			break;
		off_t stop = pos + window;
		/* End on an aligned boundary, so the next window starts on one. */
		off_t aligned = stop - stop % READ_WINDOW_ALIGN;
		if (aligned > pos)
			stop = aligned;
		off_t gap_end = gap_until(in, pos, in->size);
		if (stop > gap_end)
			stop = gap_end;
		out[n].start = pos;
		out[n].end = stop;
		n++;
		if (!needed)
			ahead++;
		pos = stop;
		w = read_window_next(w, 1);
		if (w > cap)
			w = cap;
		window = (off_t)w;
	}
	if (next_window)
		*next_window = w;
	return n;
}

size_t read_window_next(size_t window, int sequential)
{
	if (!sequential)
		return READ_WINDOW_MIN;
	if (window < READ_WINDOW_MIN)
		return READ_WINDOW_MIN;
	return window >= READ_WINDOW_MAX / 2 ? READ_WINDOW_MAX : window * 2;
}

/* Each window weighs this much more than the one before it. */
#define READ_LINK_DECAY 0.75

/* The link's ms per byte and fixed ms per call, from the windows so far
 * (ms: the latest one's time); false while their sizes tell them not
 * apart. A fixed cost is never below 0 nor above a window's time. */
static bool link_line(const struct read_link *l, double ms, double *per_byte,
		      double *fixed)
{
	double spread = l->n * l->xx - l->x * l->x;
	if (l->n < 1.5 || spread <= 1e-6 * l->n * l->xx)
		return false;
	*per_byte = (l->n * l->xy - l->x * l->y) / spread;
	*fixed = (l->y - *per_byte * l->x) / l->n;
	if (*fixed < 0)
		*fixed = 0;
	if (*fixed > ms)
		*fixed = ms;
	return true;
}

size_t read_window_cap_after(struct read_link *link, size_t cap, size_t bytes,
			     long ms)
{
	double x = (double)bytes, y = ms > 0 ? (double)ms : 0;
	link->n = link->n * READ_LINK_DECAY + 1;
	link->x = link->x * READ_LINK_DECAY + x;
	link->y = link->y * READ_LINK_DECAY + y;
	link->xx = link->xx * READ_LINK_DECAY + x * x;
	link->xy = link->xy * READ_LINK_DECAY + x * y;
	double per_byte = 0, fixed = y;
	bool known = link_line(link, y, &per_byte, &fixed);
	if (!known || per_byte * x * READ_FIXED_SHARE <= y) {
		/* the bytes took next to nothing, or nothing is known yet: a
		 * window at the cap lets the next be larger */
		if (bytes >= cap)
			cap = cap >= READ_WINDOW_MAX / 2 ? READ_WINDOW_MAX : cap * 2;
	} else {
		double aim = fixed * READ_FIXED_SHARE;
		if (aim < READ_WINDOW_AIM_MS)
			aim = READ_WINDOW_AIM_MS;
		if (aim > READ_WINDOW_LONGEST_MS)
			aim = READ_WINDOW_LONGEST_MS;
		double want = aim / per_byte;
		cap = want >= (double)READ_WINDOW_MAX ? READ_WINDOW_MAX : (size_t)want;
	}
	cap -= cap % READ_WINDOW_ALIGN;
	return cap < READ_WINDOW_MIN ? READ_WINDOW_MIN : cap;
}
