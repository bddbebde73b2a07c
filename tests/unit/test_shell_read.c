/* The in-guest read (shell_read) against a real local sandbox, running the
 * script every backend runs, and the local backend's native read, which
 * keeps the same promises: a window comes in segments, each handed on
 * and checked in order; a request off the block grid is sliced right; a
 * file that changes while it is read ends the read with -EAGAIN after the
 * segments checked before the change, and no check covers bytes of two
 * versions. */
#include "tests/unit/unit.h"
#include "backends/backend.h"
#include "backends/shell_run.h"
#include "tests/unit/local_sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1024 * 1024)
#define SEG ((off_t)READ_SEGMENT_BLOCKS * READ_BLOCK)

static char root[] = "/tmp/sbfs-shell-read-test-XXXXXX";

static unsigned char byte_at(off_t i)
{
	return (unsigned char)(i * 7 + i / 65536);
}

/* What a read brought, where checked() said its checks ended, and what to
 * do at the first check. */
struct got {
	off_t off;
	unsigned char *buf;
	size_t cap;
	bool bad_byte;
	off_t checks[16];
	int nchecks;
	char ident[SB_IDENT_MAX];
	const char *grow_at_first_check; /* a host path: appended to then */
};

static int on_ident(void *arg, const char *ident, off_t size)
{
	struct got *g = arg;
	(void)size;
	snprintf(g->ident, sizeof g->ident, "%s", ident);
	return 0;
}

static int on_data(void *arg, off_t off, const char *d, size_t n)
{
	struct got *g = arg;
	if (off < g->off || (size_t)(off - g->off) + n > g->cap)
		return -ERANGE;
	memcpy(g->buf + (off - g->off), d, n);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)d[i] != byte_at(off + (off_t)i))
			g->bad_byte = true;
	return 0;
}

static int on_checked(void *arg, off_t end)
{
	struct got *g = arg;
	if (g->nchecks < 16)
		g->checks[g->nchecks] = end;
	if (g->nchecks++ == 0 && g->grow_at_first_check) {
		/* the same file, the one the guest holds open, grows */
		int fd = open(g->grow_at_first_check, O_WRONLY | O_APPEND);
		CHECK(fd >= 0);
		CHECK_INT(write(fd, "more", 4), 4);
		close(fd);
	}
	return 0;
}

static int read_into(struct sb_backend *b, const char *path, off_t off,
		     size_t len, struct got *g, size_t *got)
{
	g->off = off;
	g->cap = len;
	g->buf = calloc(1, len);
	struct sb_read_sink sink = {.ident = on_ident, .data = on_data,
				    .checked = on_checked, .arg = g};
	int rc = sb_read_stream(b, path, off, len, &sink, got);
	free(g->buf);
	return rc;
}

/* Makes NAME in the workspace with SIZE bytes of byte_at(); its host path
 * in host. */
static void make_file(const char *name, off_t size, char *host, size_t hostlen)
{
	/* the local backend's workspace: the directory under root that holds
	 * the marker made through the sandbox */
	char cmd[700];
	snprintf(cmd, sizeof cmd, "find %s -type f -name .marker -print -quit", root);
	FILE *p = popen(cmd, "r");
	char marker[600] = "";
	CHECK(p && fgets(marker, sizeof marker, p));
	pclose(p);
	marker[strcspn(marker, "\n")] = '\0';
	char *slash = strrchr(marker, '/');
	CHECK(slash != NULL);
	*slash = '\0';
	snprintf(host, hostlen, "%s/%s", marker, name);
	int fd = open(host, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	unsigned char *buf = malloc(MIB);
	for (off_t at = 0; at < size; at += MIB) {
		size_t n = size - at < MIB ? (size_t)(size - at) : MIB;
		for (size_t i = 0; i < n; i++)
			buf[i] = byte_at(at + (off_t)i);
		CHECK_INT(pwrite(fd, buf, n, at), (ssize_t)n);
	}
	free(buf);
	close(fd);
	/* readable by the sandbox's user, which the workspace's owner is */
	struct stat st;
	CHECK_INT(stat(marker, &st), 0);
	CHECK_INT(chown(host, st.st_uid, st.st_gid), 0);
}

static void segments(struct sb_backend *b)
{
	char host[700];
	off_t size = 2 * SEG + SEG / 4 + 1000;
	make_file("seg", size, host, sizeof host);

	/* the whole file and past its end: whole segments, the last short */
	struct got g = {0};
	size_t got = 0;
	CHECK_INT(read_into(b, "/workspace/seg", 0, (size_t)size + 65536, &g, &got), 0);
	CHECK_INT(got, (size_t)size);
	CHECK(!g.bad_byte);
	CHECK_INT(g.nchecks, 3);
	CHECK_INT(g.checks[0], SEG);
	CHECK_INT(g.checks[1], 2 * SEG);
	CHECK_INT(g.checks[2], size);
	CHECK_INT(strtoll(g.ident, NULL, 10), size);

	/* off the block grid: the window is rounded out to whole blocks,
	 * the segments count from its first block, the slice is exact */
	struct got h = {0};
	off_t off = SEG - 100;
	CHECK_INT(read_into(b, "/workspace/seg", off, SEG + 200, &h, &got), 0);
	CHECK_INT(got, SEG + 200);
	CHECK(!h.bad_byte);
	CHECK_INT(h.nchecks, 2);
	CHECK_INT(h.checks[0], 2 * SEG - READ_BLOCK);
	CHECK_INT(h.checks[1], off + SEG + 200);

	/* an empty file: its identity, no segment */
	char host0[700];
	make_file("empty", 0, host0, sizeof host0);
	struct got e = {0};
	CHECK_INT(read_into(b, "/workspace/empty", 0, 65536, &e, &got), 0);
	CHECK_INT(got, 0);
	CHECK_INT(e.nchecks, 0);
	CHECK_INT(strtoll(e.ident, NULL, 10), 0);
}

/* The file grows while its second segment is read: the first stays
 * checked, the read fails as changed, and nothing after the change is
 * checked. Once in a middle segment, once in a last, short one (where dd
 * sends more than the size the first line gave). The guest is still in
 * the second segment when the first one's check is taken only because
 * that segment is larger than the pipe (1 MiB): the check callback holds
 * the pipe unread while it appends. */
static void changed_between_segments(struct sb_backend *b)
{
	const off_t sizes[] = {2 * SEG + SEG / 4, SEG + 3 * SEG / 4 + 10};
	for (int i = 0; i < 2; i++) {
		char host[700];
		make_file("grows", sizes[i], host, sizeof host);
		struct got g = {.grow_at_first_check = host};
		size_t got = 1;
		CHECK_INT(read_into(b, "/workspace/grows", 0, (size_t)sizes[i], &g, &got), -EAGAIN);
		CHECK_INT(got, 0);
		CHECK_INT(g.nchecks, 1);
		CHECK_INT(g.checks[0], SEG);
	}
}

int main(void)
{
	CHECK(mkdtemp(root) != NULL);
	/* the guest's read, then the local backend's own, which must hand
	 * on and check the same segments */
	for (int native = 0; native < 2; native++) {
		struct sb_backend *b = local_sandbox(root, !native);
		CHECK(b != NULL);
		if (!b)
			return 1;
		const char *argv[] = {"sh", "-c", ": > /workspace/.marker", NULL};
		struct sb_exec_req req = {.argv = argv, .stdin_fd = -1, .cancel_fd = -1};
		struct sb_exec_result res;
		CHECK_INT(sb_exec(b, &req, &res), 0);
		CHECK_INT(res.exit_code, 0);
		uint64_t shell0 = atomic_load(&b->counters.shell_fallbacks);
		segments(b);
		changed_between_segments(b);
		if (native)
			CHECK_INT(atomic_load(&b->counters.shell_fallbacks), shell0);
		CHECK_INT(sb_backend_destroy(b), 0);
	}
	char cmd[200];
	snprintf(cmd, sizeof cmd, "rm -rf %s", root);
	CHECK_INT(system(cmd), 0);
	return unit_done("shell_read");
}
