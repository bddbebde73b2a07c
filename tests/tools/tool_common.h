/* What the randomised test tools (fsdiff, fsx) share: a seeded PRNG that
 * gives the same sequence on every machine, and the cache drop, which the
 * e2e suite serialises through one helper (a command the caller names). */
#ifndef SBFS_TOOL_COMMON_H
#define SBFS_TOOL_COMMON_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* splitmix64: tiny, and its output depends only on the seed, not on libc. */
struct prng {
	uint64_t state;
};

static inline uint64_t prng_next(struct prng *p)
{
	uint64_t z = (p->state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* A number in [0, n); n > 0. The modulo bias is irrelevant here. */
static inline uint64_t prng_below(struct prng *p, uint64_t n)
{
	return prng_next(p) % n;
}

static inline int prng_percent(struct prng *p, unsigned pct)
{
	return prng_below(p, 100) < pct;
}

static inline double monotonic_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline const char *errno_name(int e)
{
	const char *n = strerrorname_np(e);
	return n ? n : "E?";
}

/* How a tool drops the kernel's caches: through the caller's command
 * (sh -c CMD; the e2e suite passes one that goes through its
 * drop_kernel_caches helper, which serialises drops against tests that
 * need warm caches), or by writing /proc itself when allowed to. */
struct cache_dropper {
	const char *cmd;  /* NULL: write /proc/sys/vm/drop_caches */
	int enabled;
	long count;
};

/* Returns 0, or -1 with a line on stderr saying why the drop failed. */
static inline int drop_caches(struct cache_dropper *d, const char *tool)
{
	if (!d->enabled)
		return 0;
	d->count++;
	if (d->cmd) {
		fflush(stdout);
		int st = system(d->cmd);
		if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "%s: the drop command failed (status %d): %s\n",
				tool, st, d->cmd);
			return -1;
		}
		return 0;
	}
	sync();
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (fd < 0 || write(fd, "2", 1) != 1) {
		fprintf(stderr, "%s: cannot write /proc/sys/vm/drop_caches: %s "
			"(run as root, or pass --drop-cmd)\n", tool, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* An option's value: a whole number >= 0, or one line from PROG and exit
 * 2 (a usage error). */
static inline long long tool_number(const char *prog, const char *s,
				    const char *what)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < 0) {
		fprintf(stderr, "%s: %s must be a number >= 0, not '%s'\n", prog, what, s);
		exit(2);
	}
	return v;
}

#endif
