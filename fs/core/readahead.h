/* Which byte ranges of a file to fetch for a read, and how far ahead: pure
 * planning, no I/O, so it can be tested on its own.
 *
 * A read of [off, end) needs every byte the spool lacks there (present)
 * and that no fetch already in flight brings. On sequential access the
 * plan also reaches ahead, so several windows are fetched concurrently
 * and a long read is not a chain of round trips. */
#ifndef SBFS_READAHEAD_H
#define SBFS_READAHEAD_H

#include <stddef.h>
#include <sys/types.h>

#include "range_set.h"

/* Reads are fetched in windows aligned to this; the guest's dd uses it as
 * its block size. */
#define READ_WINDOW_ALIGN (64 * 1024)
#define READ_WINDOW_MIN (128 * 1024)
#define READ_WINDOW_MAX (64 * 1024 * 1024)
/* Fetches in flight per file (the one a reader waits for included); each
 * streams into the spool, so this bounds round trips, not memory. */
#define READ_INFLIGHT_MAX 8
/* The window cap follows the link's throughput, not the wall time of a
 * window: each call costs a fixed time (an exec's start: seconds on a
 * slow engine) plus its bytes at the link's rate. The cap is what the
 * link moves in READ_WINDOW_AIM_MS, or in READ_FIXED_SHARE times the fixed
 * cost where that is longer (so the fixed cost stays a small part of a
 * window's time: halving windows because a window took long, when most of
 * its time was the exec's start, shrank them toward READ_WINDOW_MIN and
 * made a 64 MiB read 550 calls), never past READ_WINDOW_LONGEST_MS, which
 * keeps a window well inside a call's deadline (60 s by default). */
#define READ_WINDOW_AIM_MS 2000
#define READ_WINDOW_LONGEST_MS 16000
#define READ_FIXED_SHARE 8

struct read_plan_in {
	const struct range_set *present; /* bytes the spool holds */
	const struct range *inflight;    /* fetches under way */
	size_t n_inflight;
	off_t off, end;                  /* the read, clipped to size */
	off_t size;                      /* the file's size */
	size_t window;                   /* bytes of the first fetch */
	size_t max_window;               /* 0: READ_WINDOW_MAX */
	unsigned ahead;                  /* read-ahead windows past end */
};

/* Fills out[0..max) with ranges to fetch, in file order: first those
 * [off, end) needs, then up to in->ahead windows after end. Every range
 * lies in one gap of present that nothing in flight covers, and ends on a
 * READ_WINDOW_ALIGN boundary unless it ends at a gap's end or at size. The
 * first is at most in->window long, each next one at most twice the one
 * before (read_window_next), and *window is left at the size the next
 * plan starts from. Returns how many. */
size_t read_plan(const struct read_plan_in *in, struct range *out, size_t max,
		 size_t *window);

/* The next window size: doubled on sequential access up to
 * READ_WINDOW_MAX, back to READ_WINDOW_MIN otherwise. */
size_t read_window_next(size_t window, int sequential);

/* What one file's windows have shown of the link: a line through their
 * (bytes, ms), recent ones weighing more, whose slope is the time per
 * byte and whose intercept the fixed cost of a call. Windows of one size
 * tell neither apart; sequential windows grow, so their sizes differ. */
struct read_link {
	double n, x, y, xx, xy; /* decayed sums over the windows */
};
#define READ_LINK_INIT ((struct read_link){0})

/* The window cap after a window of `bytes` arrived in `ms`, link updated
 * (see READ_WINDOW_AIM_MS): between READ_WINDOW_MIN and READ_WINDOW_MAX,
 * on the READ_WINDOW_ALIGN grid. A window whose time was nearly all the
 * fixed cost tells no throughput: at the cap it doubles the cap. */
size_t read_window_cap_after(struct read_link *link, size_t cap, size_t bytes,
			     long ms);

#endif
