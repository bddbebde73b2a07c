/* The shell operations that only look: read windows, listings, stat,
 * readlink, statfs. */
#include "shell_run.h"
#include "sandbox_limits.h"
#include "util/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STAT_OUT_MAX (64 * 1024)
#define LIST_OUT_MAX SB_LIMIT_LIST_BYTES
#define LIST_RETRIES 3

/* A read window's output: the identity line of the file the guest opened,
 * then per segment of the aligned window that lies before the file's end
 * (as that line gives its size) the segment's bytes and the identity line
 * again, which the guest prints only if the file still has it. */
struct read_win {
	const struct sb_read_sink *sink;
	enum { WIN_IDENT, WIN_DATA, WIN_CHECK, WIN_DONE } state;
	char ident[SB_IDENT_MAX];
	size_t ident_len;
	char check[SB_IDENT_MAX];
	size_t check_len;
	uint64_t size;   /* the file's, as its identity line gives it */
	uint64_t block;  /* the segment's first block */
	uint64_t block_end; /* the window's end, in blocks */
	uint64_t seg_end;   /* the segment's end, in blocks */
	size_t seg_left; /* bytes of the segment not yet received */
	off_t off;     /* file offset of the request */
	size_t skip;   /* bytes of the aligned window before the request */
	size_t len;    /* bytes wanted */
	size_t seen;   /* bytes of the window received so far */
	size_t window; /* the most dd can send */
	size_t got;
};

/* The next segment, as the script's loop picks it, or WIN_DONE. */
static void next_segment(struct read_win *w)
{
	if (w->block >= w->block_end || w->block * READ_BLOCK >= w->size) {
		w->state = WIN_DONE;
		return;
	}
	w->seg_end = w->block + READ_SEGMENT_BLOCKS < w->block_end
			     ? w->block + READ_SEGMENT_BLOCKS : w->block_end;
	uint64_t stop = w->seg_end * READ_BLOCK < w->size ? w->seg_end * READ_BLOCK
							  : w->size;
	w->seg_left = (size_t)(stop - w->block * READ_BLOCK);
	w->state = WIN_DATA;
}

/* "SIZE rest...": the size is the first field, the rest is compared as is. */
static int take_ident(struct read_win *w)
{
	const char *p = w->ident, *end = w->ident + w->ident_len;
	uint64_t size;
	if (shell_parse_u64(&p, end, 10, &size) < 0 || size > INT64_MAX ||
	    p == end || *p != ' ')
		return -EPROTO;
	for (const char *c = w->ident; c < end; c++)
		if ((unsigned char)*c < ' ')
			return -EPROTO;
	w->ident[w->ident_len] = '\0';
	w->size = size;
	next_segment(w);
	return w->sink->ident(w->sink->arg, w->ident, (off_t)size);
}

/* A segment's check line: the identity it ends with must be the one it
 * began with; then its bytes are of one version. Anything else is bytes
 * dd sent past the size the first line gave: the file grew while it was
 * read (the guest then exits 107 without a check line). */
static int take_check(struct read_win *w)
{
	if (w->check_len != w->ident_len ||
	    memcmp(w->check, w->ident, w->ident_len) != 0)
		return -EAGAIN;
	w->check_len = 0;
	w->block = w->seg_end;
	next_segment(w);
	if (!w->sink->checked)
		return 0;
	/* the requested bytes received so far */
	size_t upto = w->seen > w->skip ? w->seen - w->skip : 0;
	return w->sink->checked(w->sink->arg, w->off + (off_t)(upto < w->len ? upto : w->len));
}

/* Accumulates a line into buf; 1 when it is whole (the newline taken). */
static int take_line(char *buf, size_t *len, const char **d, size_t *n)
{
	while (*n > 0) {
		char c = **d;
		(*d)++, (*n)--;
		if (c == '\n')
			return 1;
		if (*len + 1 >= SB_IDENT_MAX)
			return -EPROTO;
		buf[(*len)++] = c;
	}
	return 0;
}

/* Hands on only the requested slice of the aligned window, and refuses
 * anything past the window dd was bounded to. */
static int take_data(struct read_win *w, const char *d, size_t n)
{
	if (w->seen + n > w->window)
		return -EFBIG;
	size_t start = w->seen, stop = w->seen + n;
	w->seen += n;
	size_t lo = start > w->skip ? start : w->skip;
	size_t hi = stop < w->skip + w->len ? stop : w->skip + w->len;
	if (lo < hi) {
		int r = w->sink->data(w->sink->arg, w->off + (off_t)(lo - w->skip),
				      d + (lo - start), hi - lo);
		if (r < 0)
			return r;
		w->got += hi - lo;
	}
	return 0;
}

static int read_cb(void *arg, const char *d, size_t n)
{
	struct read_win *w = arg;
	while (n > 0) {
		int r = 0;
		switch (w->state) {
		case WIN_IDENT:
			r = take_line(w->ident, &w->ident_len, &d, &n);
			if (r > 0)
				r = take_ident(w);
			break;
		case WIN_DATA: {
			size_t k = n < w->seg_left ? n : w->seg_left;
			r = take_data(w, d, k);
			d += k, n -= k;
			w->seg_left -= k;
			if (w->seg_left == 0)
				w->state = WIN_CHECK;
			break;
		}
		case WIN_CHECK:
			r = take_line(w->check, &w->check_len, &d, &n);
			if (r < 0)
				r = -EAGAIN; /* as in take_check */
			if (r > 0)
				r = take_check(w);
			break;
		case WIN_DONE:
			r = -EFBIG; /* more than the window */
			break;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

int shell_read(struct sb_backend *b, const char *path, off_t off, size_t len,
	       const struct sb_read_sink *sink, size_t *got)
{
	*got = 0;
	if (!shell_path_ok(path) || off < 0)
		return -EINVAL;
	if (len == 0)
		return 0;
	/* The fs core asks for 64 KiB-aligned windows; anything else is
	 * rounded out to whole blocks and sliced here. */
	uint64_t first = (uint64_t)off / READ_BLOCK;
	uint64_t last = ((uint64_t)off + len + READ_BLOCK - 1) / READ_BLOCK;
	char skip[24], count[24], seg[24];
	snprintf(skip, sizeof(skip), "%" PRIu64, first);
	snprintf(count, sizeof(count), "%" PRIu64, last - first);
	snprintf(seg, sizeof(seg), "%d", READ_SEGMENT_BLOCKS);
	struct read_win w = {
		.sink = sink,
		.off = off,
		.block = first,
		.block_end = last,
		.skip = (size_t)((uint64_t)off - first * READ_BLOCK),
		.len = len,
		.window = (size_t)((last - first) * READ_BLOCK),
	};
	/* The file is opened once (fd 3) and its identity taken from the open
	 * file, before dd and after each segment: equal lines mean the bytes
	 * are of one version of it (a rename over it, a rewrite or a resize
	 * in between changes the inode, size or a timestamp). dd skips from
	 * where the one before stopped: the first to the window, the others
	 * none. The loop stops at the size the first line gives, as
	 * next_segment() does. */
	static const char script[] = PRELUDE
		"need dd stat\n"
		"ex \"$1\" || miss \"$1\"\n"
		"[ -d \"$1\" ] && exit 102\n"
		"[ -f \"$1\" ] || exit 101\n"
		"[ -r \"$1\" ] || exit 106\n"
		"exec 3<\"$1\"\n"
		"[ -f /proc/self/fd/3 ] || exit 101\n"
		"id(){ stat -L -c '%s %i %y %z' /proc/self/fd/3; }\n"
		"a=$(id) || exit 106\n"
		"printf '%s\\n' \"$a\"\n"
		"s=$2 e=$(($2 + $3)) k=$2 z=${a%% *}\n"
		"while [ \"$s\" -lt \"$e\" ] && [ $((s * 65536)) -lt \"$z\" ]; do\n"
		"n=$4; [ $((s + n)) -gt \"$e\" ] && n=$((e - s))\n"
		"dd ibs=65536 obs=1048576 skip=\"$k\" count=\"$n\" <&3 2>/dev/null || exit 106\n"
		"[ \"$a\" = \"$(id)\" ] || exit 107\n"
		"printf '%s\\n' \"$a\"\n"
		"s=$((s + n)) k=0\n"
		"done\n";
	const char *args[] = {path, skip, count, seg, NULL};
	int rc = shell_run(b, "read", script, args, -1, read_cb, &w);
	if (rc == 0 && w.state != WIN_DONE)
		rc = -EPROTO; /* it ended before the window did */
	*got = rc == 0 ? w.got : 0;
	return rc;
}

int shell_list_dir(struct sb_backend *b, const char *path,
		   struct sb_dirlist *out)
{
	if (!shell_path_ok(path))
		return -EINVAL;
	/* The `for f do shift ... set -- "$@" "$f"` loop keeps the glob
	 * results that exist (an unmatched glob stays literal). */
	static const char script[] = PRELUDE
		"need stat readlink xargs\n"
		"if [ ! -d \"$1\" ]; then ex \"$1\" || miss \"$1\"; exit 103; fi\n"
		"cd -- \"$1\" || exit 106\n"
		"set -- * .[!.]* ..?*\n"
		"for f do shift; if ex \"$f\"; then set -- \"$@\" \"$f\"; fi; done\n"
		"printf '%s\\n' $#\n"
		"[ $# = 0 ] && exit 0\n"
		"printf '%s\\0' \"$@\"\n"
		/* ./ keeps a file named "-" from meaning stdin to GNU stat */
		"printf './%s\\0' \"$@\" | xargs -0 stat -c '" STAT_FMT "' -- || exit 107\n"
		"for f do if [ -L \"$f\" ]; then " READ_LINK_INTO_T
		"printf '%s\\0' \"$t\"; fi; done\n";
	const char *args[] = {path, NULL};
	int rc = -EAGAIN;
	for (int attempt = 0; attempt < LIST_RETRIES && rc == -EAGAIN; attempt++) {
		struct output_capture c = {.limit = LIST_OUT_MAX};
		rc = shell_capture(b, "list", script, args, &c);
		if (rc == 0)
			rc = shell_parse_list(c.data ? c.data : "", c.len, out);
		/* a listing that does not parse is most likely a race with a
		 * change in the guest: try again */
		if (rc == -EPROTO && attempt + 1 < LIST_RETRIES)
			rc = -EAGAIN;
		output_capture_free(&c);
	}
	if (rc == -EFBIG)
		sb_warn("%s: listing of %s refused: more than %zu entries or %zu MiB (a cap against a hostile sandbox); look at it with sbexec",
			b->ops->name, path, SB_LIMIT_LIST_ENTRIES,
			SB_LIMIT_LIST_BYTES >> 20);
	return rc == -EAGAIN ? -EIO : rc;
}

int shell_stat(struct sb_backend *b, const char *path, struct stat *st,
	       char **link_target)
{
	if (link_target)
		*link_target = NULL;
	if (!shell_path_ok(path))
		return -EINVAL;
	static const char script[] = PRELUDE
		"need stat readlink\n"
		"f=$1; ex \"$f\" || miss \"$f\"\n"
		"stat -c '" STAT_FMT "' -- \"$f\" || exit 106\n"
		"if [ -L \"$f\" ]; then " READ_LINK_INTO_T "printf '%s' \"$t\"; fi\n";
	const char *args[] = {path, NULL};
	struct output_capture c = {.limit = STAT_OUT_MAX};
	int rc = shell_capture(b, "stat", script, args, &c);
	if (rc == 0) {
		const char *nl = c.data ? memchr(c.data, '\n', c.len) : NULL;
		rc = nl ? shell_parse_stat_line(c.data, (size_t)(nl - c.data), st)
			: -EPROTO;
		size_t rest = nl ? c.len - (size_t)(nl + 1 - c.data) : 0;
		if (rc == 0 && rest && !S_ISLNK(st->st_mode))
			rc = -EPROTO;
		if (rc == 0 && rest > SB_LIMIT_LINK_TARGET)
			rc = -ENAMETOOLONG;
		if (rc == 0 && rest && link_target &&
		    !(*link_target = strndup(nl + 1, rest)))
			rc = -ENOMEM;
	}
	output_capture_free(&c);
	return rc;
}

int shell_readlink(struct sb_backend *b, const char *path, char **target)
{
	*target = NULL;
	if (!shell_path_ok(path))
		return -EINVAL;
	static const char script[] = PRELUDE
		"need readlink\n"
		"f=$1; if [ ! -L \"$f\" ]; then ex \"$f\" && exit 101; miss \"$f\"; fi\n"
		READ_LINK_INTO_T "printf '%s' \"$t\"\n";
	const char *args[] = {path, NULL};
	struct output_capture c = {.limit = STAT_OUT_MAX};
	int rc = shell_capture(b, "readlink", script, args, &c);
	if (rc == 0 && (c.len == 0 || memchr(c.data, '\0', c.len)))
		rc = -EPROTO;
	if (rc == 0 && c.len > SB_LIMIT_LINK_TARGET)
		rc = -ENAMETOOLONG;
	if (rc == 0 && !(*target = strndup(c.data, c.len)))
		rc = -ENOMEM;
	output_capture_free(&c);
	return rc;
}

int shell_statfs(struct sb_backend *b, const char *path, struct statvfs *st)
{
	if (!shell_path_ok(path))
		return -EINVAL;
	static const char script[] = PRELUDE
		"need stat\n"
		"ex \"$1\" || miss \"$1\"\n"
		"stat -f -c '%b %a %f %S %c %d %l' -- \"$1\" || exit 106\n";
	const char *args[] = {path, NULL};
	struct output_capture c = {.limit = STAT_OUT_MAX};
	int rc = shell_capture(b, "statfs", script, args, &c);
	if (rc == 0)
		rc = shell_parse_statfs(c.data, c.len, st);
	output_capture_free(&c);
	return rc;
}
