/* fsx: an fsx-style data check. Random writes, truncates, reads and
 * mapped reads and writes (mmap MAP_SHARED) on one file, against an
 * in-memory shadow of what the file must hold; every read is verified,
 * and every N calls the file is closed, the kernel's caches may be
 * dropped, and it is reopened and read back whole. The first mismatch
 * prints the seed, the call number, the first differing byte and the
 * last calls, and the exit status is 1.
 *
 *   fsx [OPTIONS] FILE          FILE is created (or emptied)
 * Options:
 *   --seed N         PRNG seed (default 1)
 *   --ops N          number of calls (default 10000; 1000000 with --long)
 *   --long           a long run: more calls, no time cap
 *   --seconds S      stop (cleanly) after S seconds; 0: no cap (default)
 *   --size BYTES     largest file size (default 262144)
 *   --reopen N       close and reopen every N calls (default 50; 0: never)
 *   --drop-cmd CMD   drop the kernel's caches at each reopen with sh -c CMD
 *   --drop-caches    ... by writing /proc/sys/vm/drop_caches (root)
 *   --no-mmap        no mapped reads or writes
 *
 * Prints "fsx: ops N seed S mismatches 0 ..." on success, including
 * whether the file system took shared writable mappings ("shared-mmap
 * yes"; FUSE does unless the file is opened with direct_io). Exit 0
 * clean, 1 on a mismatch or a failed call, 2 on a usage error. */
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "tool_common.h"

enum { MAX_IO = 16384, HISTORY = 40 };

static const char *path;
static uint64_t seed = 1;
static long op_no;
static int fd = -1;
static char *shadow, *buf;
static size_t max_size = 262144, file_len;
static long page;

static char history[HISTORY][96];

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *h = history[op_no % HISTORY];
	int n = snprintf(h, sizeof history[0], "%6ld  ", op_no);
	vsnprintf(h + n, sizeof history[0] - (size_t)n, fmt, ap);
	va_end(ap);
}

static void print_history(void)
{
	printf("last calls (seed %" PRIu64 "):\n", seed);
	for (long i = op_no - HISTORY + 1; i <= op_no; i++)
		if (i >= 0 && history[i % HISTORY][0])
			printf("  %s\n", history[i % HISTORY]);
}

static void failed(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void failed(const char *fmt, ...)
{
	fflush(stdout);
	printf("fsx: FAILED seed %" PRIu64 " op %ld: ", seed, op_no);
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	print_history();
	printf("fsx: ops %ld seed %" PRIu64 " mismatches 1\n", op_no, seed);
	exit(1);
}

/* data read at off must be what the shadow holds there */
static void verify(const char *what, const char *got, off_t off, size_t len)
{
	if (!memcmp(got, shadow + off, len))
		return;
	size_t i = 0;
	while (got[i] == shadow[off + (off_t)i])
		i++;
	failed("%s: byte %lld of the file is 0x%02x, the shadow says 0x%02x (file size %zu)",
	       what, (long long)(off + (off_t)i), (unsigned char)got[i],
	       (unsigned char)shadow[off + (off_t)i], file_len);
}

static void check_size(const char *when)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		failed("fstat %s: %s", when, errno_name(errno));
	if ((size_t)st.st_size != file_len)
		failed("size %lld %s, the shadow says %zu", (long long)st.st_size, when, file_len);
}

static void random_bytes(struct prng *p, char *dst, size_t len)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t x = prng_next(p);
		memcpy(dst + i, &x, len - i < 8 ? len - i : 8);
	}
}

static void do_write(struct prng *p)
{
	off_t off = (off_t)prng_below(p, max_size);
	size_t len = 1 + prng_below(p, MAX_IO);
	if ((size_t)off + len > max_size)
		len = max_size - (size_t)off;
	note("write %lld %zu", (long long)off, len);
	random_bytes(p, buf, len);
	ssize_t r = pwrite(fd, buf, len, off);
	if (r != (ssize_t)len)
		failed("pwrite %zu at %lld returned %zd (%s)", len, (long long)off, r,
		       r < 0 ? errno_name(errno) : "short");
	memcpy(shadow + off, buf, len);
	if ((size_t)off + len > file_len)
		file_len = (size_t)off + len;
}

static void do_truncate(struct prng *p)
{
	size_t len = prng_percent(p, 20) ? 0 : prng_below(p, max_size + 1);
	note("truncate %zu", len);
	if (ftruncate(fd, (off_t)len) < 0)
		failed("ftruncate %zu: %s", len, errno_name(errno));
	if (len > file_len)
		memset(shadow + file_len, 0, len - file_len);
	else
		memset(shadow + len, 0, file_len - len);
	file_len = len;
}

static void do_read(struct prng *p)
{
	off_t off = (off_t)prng_below(p, max_size);
	size_t len = 1 + prng_below(p, MAX_IO);
	note("read %lld %zu", (long long)off, len);
	ssize_t r = pread(fd, buf, len, off);
	size_t want = (size_t)off >= file_len ? 0 : file_len - (size_t)off < len ? file_len - (size_t)off : len;
	if (r < 0)
		failed("pread %zu at %lld: %s", len, (long long)off, errno_name(errno));
	if ((size_t)r != want)
		failed("pread %zu at %lld returned %zd bytes, want %zu (file size %zu)", len,
		       (long long)off, r, want, file_len);
	verify("pread", buf, off, want);
}

/* A mapping of [off, off+len) inside the file; NULL when the file is
 * empty. *base and *map_len describe the page-aligned mapping. */
static char *map_range(struct prng *p, int prot, off_t *off, size_t *len, void **base, size_t *map_len)
{
	if (file_len == 0)
		return NULL;
	*off = (off_t)prng_below(p, file_len);
	*len = 1 + prng_below(p, MAX_IO);
	if ((size_t)*off + *len > file_len)
		*len = file_len - (size_t)*off;
	off_t start = *off & ~(off_t)(page - 1);
	*map_len = (size_t)(*off - start) + *len;
	*base = mmap(NULL, *map_len, prot, MAP_SHARED, fd, start);
	if (*base == MAP_FAILED)
		failed("mmap %zu at %lld: %s", *map_len, (long long)start, errno_name(errno));
	return (char *)*base + (*off - start);
}

static void do_map_read(struct prng *p)
{
	off_t off;
	size_t len, map_len;
	void *base;
	char *at = map_range(p, PROT_READ, &off, &len, &base, &map_len);
	if (!at)
		return;
	note("mapread %lld %zu", (long long)off, len);
	verify("mapped read", at, off, len);
	munmap(base, map_len);
}

static void do_map_write(struct prng *p)
{
	off_t off;
	size_t len, map_len;
	void *base;
	char *at = map_range(p, PROT_READ | PROT_WRITE, &off, &len, &base, &map_len);
	if (!at)
		return;
	note("mapwrite %lld %zu", (long long)off, len);
	random_bytes(p, at, len);
	memcpy(shadow + off, at, len);
	if (msync(base, map_len, MS_SYNC) < 0)
		failed("msync %zu at %lld: %s", map_len, (long long)off, errno_name(errno));
	munmap(base, map_len);
}

static void open_file(int flags)
{
	fd = open(path, O_RDWR | flags, 0644);
	if (fd < 0)
		failed("open %s: %s", path, errno_name(errno));
}

/* Reads the whole file back through a fresh descriptor. */
static void verify_all(const char *when)
{
	check_size(when);
	for (size_t off = 0; off < file_len; off += MAX_IO) {
		size_t len = file_len - off < MAX_IO ? file_len - off : MAX_IO;
		ssize_t r = pread(fd, buf, len, (off_t)off);
		if (r != (ssize_t)len)
			failed("pread %zu at %zu %s returned %zd (%s)", len, off, when, r,
			       r < 0 ? errno_name(errno) : "short");
		verify(when, buf, (off_t)off, len);
	}
}

static struct cache_dropper dropper;

static void reopen(void)
{
	note("close, drop caches, reopen");
	if (close(fd) < 0)
		failed("close: %s", errno_name(errno));
	if (drop_caches(&dropper, "fsx") < 0)
		exit(2);
	open_file(0);
	verify_all("after reopening");
}

/* FUSE takes shared writable mappings unless a file is in direct_io. */
static bool shared_mmap_works(void)
{
	if (ftruncate(fd, page) < 0)
		failed("ftruncate %ld: %s", page, errno_name(errno));
	void *m = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	bool ok = m != MAP_FAILED;
	if (!ok)
		printf("fsx: %s does not take shared writable mappings (%s); mapped I/O left out\n",
		       path, errno_name(errno));
	else
		munmap(m, (size_t)page);
	if (ftruncate(fd, 0) < 0)
		failed("ftruncate 0: %s", errno_name(errno));
	return ok;
}

static void usage(const char *why)
{
	fprintf(stderr, "fsx: %s (see the comment at the top of tests/tools/fsx.c)\n", why);
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "seed", required_argument, NULL, 's' }, { "ops", required_argument, NULL, 'n' },
		{ "long", no_argument, NULL, 'L' },       { "seconds", required_argument, NULL, 't' },
		{ "size", required_argument, NULL, 'z' }, { "reopen", required_argument, NULL, 'r' },
		{ "drop-cmd", required_argument, NULL, 'D' }, { "drop-caches", no_argument, NULL, 'P' },
		{ "no-mmap", no_argument, NULL, 'M' },    { NULL, 0, NULL, 0 },
	};
	long ops = -1, reopen_every = 50;
	double seconds = 0;
	bool long_mode = false, use_mmap = true;
	int o;
	while ((o = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (o) {
		case 's': seed = (uint64_t)tool_number("fsx", optarg, "--seed"); break;
		case 'n': ops = (long)tool_number("fsx", optarg, "--ops"); break;
		case 'L': long_mode = true; break;
		case 't': seconds = (double)tool_number("fsx", optarg, "--seconds"); break;
		case 'z': max_size = (size_t)tool_number("fsx", optarg, "--size"); break;
		case 'r': reopen_every = (long)tool_number("fsx", optarg, "--reopen"); break;
		case 'D': dropper.cmd = optarg; dropper.enabled = 1; break;
		case 'P': dropper.enabled = 1; break;
		case 'M': use_mmap = false; break;
		default: usage("unknown option");
		}
	}
	if (argc - optind != 1)
		usage("needs one FILE");
	if (max_size < 1)
		usage("--size must be at least 1");
	if (ops < 0)
		ops = long_mode ? 1000000 : 10000;
	path = argv[optind];
	page = sysconf(_SC_PAGESIZE);
	shadow = calloc(1, max_size);
	buf = malloc(MAX_IO);
	if (!shadow || !buf)
		usage("out of memory for the shadow copy");

	open_file(O_CREAT | O_TRUNC);
	bool mmap_ok = shared_mmap_works();
	use_mmap = use_mmap && mmap_ok;
	struct prng prng = { seed };
	double start = monotonic_seconds();
	bool capped = false;
	long reopens = 0;
	for (op_no = 1; op_no <= ops; op_no++) {
		if (seconds > 0 && monotonic_seconds() - start > seconds) {
			capped = true;
			break;
		}
		uint64_t k = prng_below(&prng, 100);
		if (k < 35)
			do_write(&prng);
		else if (k < 45)
			do_truncate(&prng);
		else if (k < 70)
			do_read(&prng);
		else if (k < 85)
			use_mmap ? do_map_read(&prng) : do_read(&prng);
		else
			use_mmap ? do_map_write(&prng) : do_write(&prng);
		check_size("after the call");
		if (reopen_every && op_no % reopen_every == 0) {
			reopen();
			reopens++;
		}
	}
	op_no--;
	reopen();
	if (close(fd) < 0)
		failed("close: %s", errno_name(errno));
	printf("fsx: ops %ld seed %" PRIu64 " mismatches 0 reopens %ld drops %ld shared-mmap %s "
	       "time %.1fs%s\n", op_no, seed, reopens + 1, dropper.count, mmap_ok ? "yes" : "no",
	       monotonic_seconds() - start, capped ? " (stopped at the time cap)" : "");
	return 0;
}
