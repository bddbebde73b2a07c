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

/* A sequential read over a link whose calls take fixed_ms and then its
 * bytes at bytes_per_ms: windows as read_plan grows them, each under the
 * cap the last arrival left. The cap after n windows; *longest (if set)
 * the longest window's time after the first few. */
static size_t sequential_cap(long fixed_ms, double bytes_per_ms, int n,
			     long *longest)
{
	struct read_link link = READ_LINK_INIT;
	size_t cap = READ_WINDOW_MAX, w = READ_WINDOW_MIN;
	if (longest)
		*longest = 0;
	for (int i = 0; i < n; i++) {
		long ms = fixed_ms + (long)((double)w / bytes_per_ms);
		if (longest && i >= n / 2 && ms > *longest)
			*longest = ms;
		cap = read_window_cap_after(&link, cap, w, ms);
		w = read_window_next(w, 1);
		if (w > cap)
			w = cap;
	}
	return cap;
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

	/* The cap follows the link's throughput beyond each call's fixed
	 * cost, never past the bounds, on the alignment grid. */
	struct read_link l = READ_LINK_INIT;
	CHECK_INT(read_window_cap_after(&l, READ_WINDOW_MIN, 64 * K, 100000), READ_WINDOW_MIN);
	l = READ_LINK_INIT;
	CHECK_INT(read_window_cap_after(&l, READ_WINDOW_MAX, READ_WINDOW_MAX, 1), READ_WINDOW_MAX);
	/* a window of nothing but the fixed cost, at the cap, doubles it;
	 * not at the cap, it leaves it */
	l = READ_LINK_INIT;
	CHECK_INT(read_window_cap_after(&l, 4 * M, 4 * M, 3000), 8 * M);
	CHECK_INT(read_window_cap_after(&l, 4 * M, 1 * M, 3000), 4 * M);
	/* 3 MiB + 1 byte in 1.5 s beyond a 10 ms call: 2 s of it, aligned */
	l = READ_LINK_INIT;
	read_window_cap_after(&l, READ_WINDOW_MAX, 64 * K, 10);
	size_t c = read_window_cap_after(&l, READ_WINDOW_MAX, 3 * M + 1, 1510);
	CHECK_INT(c % READ_WINDOW_ALIGN, 0);
	CHECK(c >= 3 * M && c <= 5 * M);

	/* A slow engine: every call 3 s before its first byte, then 20 MiB/s
	 * (docker's exec at 50 ms). The windows keep growing to the largest:
	 * halving on a window's wall time took them to 128 KiB. */
	CHECK_INT(sequential_cap(3000, 20.0 * M / 1000, 24, NULL), READ_WINDOW_MAX);
	/* A fast link with a small fixed cost: the largest windows. */
	CHECK_INT(sequential_cap(1, 1000.0 * M / 1000, 24, NULL), READ_WINDOW_MAX);
	/* A slow link, 1 MiB/s at 50 ms: windows of about 2 s, never the
	 * 64 s a 64 MiB window would take */
	long longest = 0;
	c = sequential_cap(50, 1.0 * M / 1000, 24, &longest);
	CHECK(c >= 1 * M && c <= 4 * M);
	CHECK(longest <= 2 * READ_WINDOW_AIM_MS + 50);
	/* Slow on both counts (3 s a call, 256 KiB/s): the fixed cost kept a
	 * small part of a window, the window within READ_WINDOW_LONGEST_MS */
	c = sequential_cap(3000, 256.0 * K / 1000, 24, &longest);
	CHECK(c >= 2 * M && c <= 4 * M);
	CHECK(longest <= READ_WINDOW_LONGEST_MS + 3000 + 3000);
	/* A link too slow for the smallest window: the smallest */
	CHECK_INT(sequential_cap(50, 10.0 * K / 1000, 24, NULL), READ_WINDOW_MIN);

	CHECK_INT(read_window_next(READ_WINDOW_MAX, 1), READ_WINDOW_MAX);
	CHECK_INT(read_window_next(READ_WINDOW_MAX, 0), READ_WINDOW_MIN);
	CHECK_INT(read_window_next(0, 1), READ_WINDOW_MIN);

	range_set_free(&present);
	return unit_done("readahead");
}
