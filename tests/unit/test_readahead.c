#include "fs/core/readahead.h"
#include "unit.h"

#define K ((off_t)1024)
#define M (1024 * K)

static size_t plan(const struct range_set *present, const struct range *inflight,
		   size_t n_inflight, off_t off, off_t end, off_t size,
		   size_t window, unsigned ahead, struct range *out, size_t *next)
{
	struct read_plan_in in = {
		.present = present, .inflight = inflight, .n_inflight = n_inflight,
		.off = off, .end = end, .size = size, .window = window, .ahead = ahead,
	};
	return read_plan(&in, out, READ_INFLIGHT_MAX, next);
}

int main(void)
{
	struct range_set present = {0};
	struct range out[READ_INFLIGHT_MAX];
	size_t next = 0, n;

	/* A cold small file: one window, clipped to the file's end. */
	n = plan(&present, NULL, 0, 0, 4 * K, 10 * K, READ_WINDOW_MIN, 0, out, &next);
	CHECK_INT(n, 1);
	CHECK_INT(out[0].start, 0);
	CHECK_INT(out[0].end, 10 * K);

	/* A random read: one window of the given size, no read-ahead; the next
	 * window would be twice as large. */
	n = plan(&present, NULL, 0, 1 * M, 1 * M + 4 * K, 64 * M, READ_WINDOW_MIN, 0, out, &next);
	CHECK_INT(n, 1);
	CHECK_INT(out[0].start, 1 * M);
	CHECK_INT(out[0].end, 1 * M + 128 * K);
	CHECK_INT(next, 256 * K);

	/* Sequential: the needed window and three ahead, each twice the one
	 * before, back to back and aligned. */
	n = plan(&present, NULL, 0, 128 * K, 256 * K, 64 * M, 256 * K, 3, out, &next);
	CHECK_INT(n, 4);
	CHECK_INT(out[0].start, 128 * K);
	CHECK_INT(out[0].end, 384 * K);
	CHECK_INT(out[1].start, 384 * K);
	CHECK_INT(out[1].end, 896 * K);
	CHECK_INT(out[2].end, 1920 * K);
	CHECK_INT(out[3].end, 3968 * K);
	CHECK_INT(next, 4 * M);
	for (size_t i = 0; i < n; i++)
		CHECK_INT(out[i].end % READ_WINDOW_ALIGN, 0);

	/* Windows stop growing at the maximum. */
	n = plan(&present, NULL, 0, 0, 1 * M, 256 * M, READ_WINDOW_MAX, 3, out, &next);
	CHECK_INT(n, 4);
	for (size_t i = 0; i < n; i++)
		CHECK_INT(out[i].end - out[i].start, READ_WINDOW_MAX);
	CHECK_INT(next, READ_WINDOW_MAX);

	/* What the spool has and what is in flight is never planned again. */
	range_set_add(&present, 0, 1 * M);
	struct range inflight[] = {{1 * M, 2 * M}, {3 * M, 4 * M}};
	n = plan(&present, inflight, 2, 512 * K, 5 * M, 64 * M, 4 * M, 0, out, &next);
	CHECK_INT(n, 2);
	CHECK_INT(out[0].start, 2 * M);
	CHECK_INT(out[0].end, 3 * M); /* up to the fetch in flight */
	CHECK_INT(out[1].start, 4 * M);
	CHECK_INT(out[1].end, 12 * M); /* a whole window (grown to 8M) */

	/* Everything needed in flight, no read-ahead: nothing to plan. */
	n = plan(&present, inflight, 2, 1 * M, 2 * M, 64 * M, 4 * M, 0, out, &next);
	CHECK_INT(n, 0);

	/* A gap left by a local write that ended mid-block: the window starts
	 * there and ends aligned. */
	range_set_clear(&present);
	range_set_add(&present, 0, 100 * K + 5);
	n = plan(&present, NULL, 0, 0, 200 * K, 1 * M, READ_WINDOW_MIN, 0, out, &next);
	CHECK_INT(n, 2);
	CHECK_INT(out[0].start, 100 * K + 5);
	CHECK_INT(out[0].end, 192 * K);
	CHECK_INT(out[1].start, 192 * K);

	/* Read-ahead stops at the file's end. */
	range_set_clear(&present);
	n = plan(&present, NULL, 0, 0, 64 * K, 300 * K, READ_WINDOW_MIN, 3, out, &next);
	CHECK_INT(n, 2);
	CHECK_INT(out[0].end, 128 * K);
	CHECK_INT(out[1].start, 128 * K);
	CHECK_INT(out[1].end, 300 * K);

	/* A slow link's cap: windows no larger, read-ahead no further. */
	range_set_clear(&present);
	struct read_plan_in capped = {
		.present = &present, .off = 0, .end = 1 * M, .size = 1024 * M,
		.window = 16 * M, .max_window = 2 * M, .ahead = 3,
	};
	n = read_plan(&capped, out, READ_INFLIGHT_MAX, &next);
	CHECK_INT(n, 4);
	for (size_t i = 0; i < n; i++)
		CHECK_INT(out[i].end - out[i].start, 2 * M);
	CHECK_INT(next, 2 * M);

	/* The cap follows how long windows take to arrive: halved by a slow
	 * one, doubled by a quick one at the cap, never past the bounds. */
	CHECK_INT(read_window_cap_after(READ_WINDOW_MAX, 8 * M, READ_WINDOW_SLOW_MS + 1), 4 * M);
	CHECK_INT(read_window_cap_after(4 * M, 4 * M, 10), 8 * M);
	CHECK_INT(read_window_cap_after(4 * M, 1 * M, 10), 4 * M); /* not at the cap */
	CHECK_INT(read_window_cap_after(4 * M, 4 * M, READ_WINDOW_SLOW_MS), 4 * M);
	CHECK_INT(read_window_cap_after(READ_WINDOW_MAX, READ_WINDOW_MAX, 1), READ_WINDOW_MAX);
	CHECK_INT(read_window_cap_after(READ_WINDOW_MIN, 64 * K, 100000), READ_WINDOW_MIN);
	CHECK_INT(read_window_cap_after(READ_WINDOW_MAX, 3 * M + 1, 100000) % READ_WINDOW_ALIGN, 0);

	CHECK_INT(read_window_next(READ_WINDOW_MAX, 1), READ_WINDOW_MAX);
	CHECK_INT(read_window_next(READ_WINDOW_MAX, 0), READ_WINDOW_MIN);
	CHECK_INT(read_window_next(0, 1), READ_WINDOW_MIN);

	range_set_free(&present);
	return unit_done("readahead");
}
