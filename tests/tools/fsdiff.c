/* fsdiff: a differential tester. One seeded random sequence of file calls
 * runs on two trees, an sbfs mount (or a directory in one) and a local
 * directory, and every result is compared: return value and errno, data
 * read, file contents, the stat fields that apply (type, size, mode bits,
 * nlink) and whether mtime/ctime changed (only "did it change": the two
 * clocks need not agree). The names are few and nested, so calls collide:
 * renames over files and directories, rmdir of full directories, links
 * onto existing names. The first divergence is printed with the seed, the
 * step, both results and a replay (posixop syntax) of the calls that
 * touched the names involved, and the exit status is 1.
 *
 *   fsdiff [OPTIONS] SBFS_DIR LOCAL_DIR     both empty directories
 *   fsdiff --pattern START LEN              prints the data a replayed
 *                                           pwrite uses (see the replay)
 * Options:
 *   --seed N         PRNG seed (default 1); same seed, same calls
 *   --ops N          number of calls (default 2000; 200000 with --long)
 *   --long           a long run: more calls, no time cap
 *   --seconds S      stop (cleanly) after S seconds; 0: no cap (default 0)
 *   --disable LIST   comma list of call kinds and checks to leave out
 *                    (names: fsdiff --list)
 *   --drop-cmd CMD   allow cache drops between calls, made by sh -c CMD
 *   --drop-caches    allow cache drops, made by writing
 *                    /proc/sys/vm/drop_caches (root)
 *   --sbexec MOUNT   allow changes made in the sandbox between calls:
 *                    sbexec -m MOUNT -- sh -c SCRIPT sh PATHS... run in
 *                    SBFS_DIR, and the same script run by sh in LOCAL_DIR
 *   --verbose        print each call and its result
 *   --list           print the names --disable takes
 *
 * Prints "fsdiff: ops N seed S divergences 0 ..." on success. Exit 0
 * clean, 1 on a divergence, 2 on a usage or setup error. */
#include <dirent.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "tool_common.h"

enum { SLOTS = 4, MAX_FILE = 1 << 20, MAX_WRITE = 8192, MAX_OFF = 65536 };

/* The namespace: a handful of names over three levels. Whether "x" is a
 * file, a directory or a symlink is up to the calls. */
static const char *const names[] = {
	"a", "b", "x", "y", "x/a", "x/b", "x/y", "y/a", "y/x", "x/y/a", "x/y/b",
};
enum { NAMES = sizeof names / sizeof names[0] };
/* mkdir prefers these, so there are directories to fill */
static const char *const dir_names[] = { "x", "y", "x/y", "y/x" };

enum kind {
	K_CREATE, K_OPEN, K_CLOSE, K_WRITE, K_READ, K_TRUNCATE, K_FTRUNCATE,
	K_RENAME, K_LINK, K_LINK_QUIET, K_SYMLINK, K_UNLINK, K_RMDIR, K_MKDIR, K_CHMOD,
	K_UTIMENS, K_FSYNC, K_FSTAT, K_STAT, K_READDIR, K_DROP, K_EXT, KINDS
};

static const struct {
	const char *name;
	unsigned weight;
} kinds[KINDS] = {
	[K_CREATE] = { "create", 8 },   [K_OPEN] = { "open", 6 },
	[K_CLOSE] = { "close", 6 },     [K_WRITE] = { "write", 14 },
	[K_READ] = { "read", 8 },       [K_TRUNCATE] = { "truncate", 3 },
	[K_FTRUNCATE] = { "ftruncate", 3 }, [K_RENAME] = { "rename", 10 },
	[K_LINK] = { "link", 5 },       [K_LINK_QUIET] = { "quietlink", 5 },
	[K_SYMLINK] = { "symlink", 4 },
	[K_UNLINK] = { "unlink", 6 },   [K_RMDIR] = { "rmdir", 5 },
	[K_MKDIR] = { "mkdir", 8 },     [K_CHMOD] = { "chmod", 3 },
	[K_UTIMENS] = { "utimens", 3 }, [K_FSYNC] = { "fsync", 3 },
	[K_FSTAT] = { "fstat", 4 },     [K_STAT] = { "stat", 8 },
	[K_READDIR] = { "readdir", 4 }, [K_DROP] = { "drop", 1 },
	[K_EXT] = { "sbexec", 1 },
};

/* What is compared besides each call's result; each can be disabled. */
enum check {
	C_CONTENT, C_SIZE, C_MODE, C_NLINK, C_DIRNLINK, C_FNLINK, C_MTIME,
	C_CTIME, C_DIRMTIME, C_DIRCTIME, C_UTIME, CHECKS
};

static const char *const check_names[CHECKS] = {
	[C_CONTENT] = "content", [C_SIZE] = "size", [C_MODE] = "mode",
	[C_NLINK] = "nlink", [C_DIRNLINK] = "dirnlink", [C_FNLINK] = "fnlink",
	[C_MTIME] = "mtime", [C_CTIME] = "ctime", [C_DIRMTIME] = "dirmtime",
	[C_DIRCTIME] = "dirctime", [C_UTIME] = "utime",
};

static bool kind_on[KINDS];
static bool check_on[CHECKS];

/* One tree: its root, and the fds of the open-file slots. */
struct tree {
	const char *label;
	const char *path;
	int root;
	int fd[SLOTS];
};

enum { SB, LO, SIDES };
static struct tree trees[SIDES];

/* Per slot: open on both trees, and the name it was opened by. */
static bool slot_used[SLOTS];
static const char *slot_name[SLOTS];

struct op {
	enum kind kind;
	int slot;
	const char *p1, *p2;    /* names[] entries or NULL (root) */
	int flags;              /* open or rename flags */
	mode_t mode;
	off_t off;
	size_t len;
	unsigned pattern;       /* start of the write pattern */
	struct timespec times[2];
	const char *target;     /* symlink */
	int ext;                /* which sbexec script */
	char text[256];         /* the call in posixop syntax */
};

struct result {
	long long r;
	int err;
	char *data;             /* what the call returned (read, stat...) */
};

/* ---------------------------------------------------------------- replay */

struct log_entry {
	long step;
	char *text;
	const char *p1, *p2;
	bool always;            /* cache drops matter to every name */
};

static struct log_entry *log_entries;
static size_t log_len, log_cap;

static void log_op(long step, const struct op *op)
{
	if (log_len == log_cap) {
		log_cap = log_cap ? log_cap * 2 : 1024;
		log_entries = realloc(log_entries, log_cap * sizeof *log_entries);
		if (!log_entries) {
			fprintf(stderr, "fsdiff: out of memory for the replay log\n");
			exit(2);
		}
	}
	struct log_entry *e = &log_entries[log_len++];
	e->step = step;
	e->text = strdup(op->text);
	e->p1 = op->p1;
	e->p2 = op->p2;
	if ((op->kind == K_CLOSE || op->kind == K_WRITE || op->kind == K_READ ||
	     op->kind == K_FTRUNCATE || op->kind == K_FSYNC || op->kind == K_FSTAT) &&
	    op->slot >= 0)
		e->p1 = slot_name[op->slot];
	e->always = op->kind == K_DROP;
}

/* A call on name a matters to name q: the same name, or one inside the
 * other (a rename of a directory moves what is in it). q NULL is the
 * root, whose own attributes only its direct children change. */
static bool related(const char *a, const char *q)
{
	if (!q)
		return !a || !strchr(a, '/');
	if (!a)
		return false;
	size_t la = strlen(a), lq = strlen(q);
	size_t n = la < lq ? la : lq;
	return !strncmp(a, q, n) && (la == lq || (la < lq ? q[n] : a[n]) == '/');
}

/* The calls that touched p1 or p2, from the start. Names reached through
 * symlinks are not followed, so a replay may need a call or two more. */
static void print_replay(const char *p1, const char *p2)
{
	printf("replay (posixop syntax, run in an empty directory; "
	       "calls that touched %s%s%s):\n", p1 ? p1 : ".", p2 ? " or " : "",
	       p2 ? p2 : "");
	for (size_t i = 0; i < log_len; i++) {
		const struct log_entry *e = &log_entries[i];
		bool hit = e->always || related(e->p1, p1) || (e->p2 && related(e->p2, p1)) ||
			   (p2 && (related(e->p1, p2) || (e->p2 && related(e->p2, p2))));
		if (hit)
			printf("  %6ld  %s\n", e->step, e->text);
	}
}

/* ------------------------------------------------------------ the calls */

static void pattern_fill(char *buf, size_t len, unsigned start)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)('a' + (start + i) % 26);
}

static const char *open_flag_text(int flags)
{
	static char s[64];
	int acc = flags & O_ACCMODE;
	snprintf(s, sizeof s, "%s%s%s%s%s", acc == O_RDONLY ? "r" : acc == O_WRONLY ? "w" : "rw",
		 flags & O_CREAT ? ",creat" : "", flags & O_EXCL ? ",excl" : "",
		 flags & O_TRUNC ? ",trunc" : "", flags & O_APPEND ? ",append" : "");
	return s;
}

static const char *pick_name(struct prng *p)
{
	return names[prng_below(p, NAMES)];
}

static const char *pick_dir_name(struct prng *p)
{
	return prng_percent(p, 80) ? dir_names[prng_below(p, 4)] : pick_name(p);
}

static int free_slot(struct prng *p)
{
	for (int i = 0; i < SLOTS; i++)
		if (!slot_used[i])
			return i;
	return (int)prng_below(p, SLOTS);
}

static int used_slot(struct prng *p)
{
	int n = 0, which[SLOTS];
	for (int i = 0; i < SLOTS; i++)
		if (slot_used[i])
			which[n++] = i;
	return n ? which[prng_below(p, (uint64_t)n)] : -1;
}

/* The sandbox-side changes: POSIX sh and utilities GNU and busybox share;
 * paths only as positional parameters. */
static const struct {
	const char *what;
	const char *script;
	int paths;
} ext_scripts[] = {
	{ "write", "printf '%s\\n' changed-in-sandbox >\"$1\"", 1 },
	{ "append", "printf '%s\\n' appended-in-sandbox >>\"$1\"", 1 },
	{ "empty", ": >\"$1\"", 1 },
	/* rm -f only of a name that is there: through a file (x/b, x a
	 * file) GNU rm fails with ENOTDIR where busybox's succeeds */
	{ "rm", "if [ -e \"$1\" ] || [ -L \"$1\" ]; then rm -f -- \"$1\"; fi", 1 },
	{ "mkdir", "mkdir -- \"$1\"", 1 },
	{ "rmdir", "rmdir -- \"$1\"", 1 },
	/* mv into a directory and mv of two names of one file differ
	 * between implementations: leave them out */
	{ "mv", "[ ! -d \"$2\" ] && ! [ \"$1\" -ef \"$2\" ] && mv -f -- \"$1\" \"$2\"", 2 },
};
enum { EXT_SCRIPTS = sizeof ext_scripts / sizeof ext_scripts[0] };
/* each can be left out as "sbexec-WHAT" */
static bool ext_on[EXT_SCRIPTS];

static int pick_ext(struct prng *p)
{
	int n = 0, which[EXT_SCRIPTS];
	for (int i = 0; i < EXT_SCRIPTS; i++)
		if (ext_on[i])
			which[n++] = i;
	return which[prng_below(p, (uint64_t)n)];
}

/* s in single quotes for a shell, so a printed replay can be pasted */
static const char *shell_quoted(const char *s)
{
	static char out[256];
	size_t o = 0;
	out[o++] = '\'';
	for (; *s && o < sizeof out - 6; s++) {
		if (*s == '\'') {
			memcpy(out + o, "'\\''", 4);
			o += 4;
		} else {
			out[o++] = *s;
		}
	}
	out[o++] = '\'';
	out[o] = 0;
	return out;
}

static enum kind pick_kind(struct prng *p)
{
	unsigned total = 0;
	for (int k = 0; k < KINDS; k++)
		total += kind_on[k] ? kinds[k].weight : 0;
	uint64_t x = prng_below(p, total);
	for (int k = 0; k < KINDS; k++) {
		if (!kind_on[k])
			continue;
		if (x < kinds[k].weight)
			return (enum kind)k;
		x -= kinds[k].weight;
	}
	return K_STAT;
}

static mode_t pick_mode(struct prng *p)
{
	/* the owner keeps rwx: the sandbox's user need not be root */
	static const mode_t modes[] = { 0700, 0755, 0750, 0711, 0775 };
	return modes[prng_below(p, 5)];
}

/* The local tree's file at name (lstat when nofollow), or false. */
static bool local_stat(const char *name, bool nofollow, struct stat *st)
{
	return fstatat(trees[LO].root, name, st, nofollow ? AT_SYMLINK_NOFOLLOW : 0) == 0;
}

/* Whether a slot has the local tree's file st open. */
static bool open_in_a_slot(const struct stat *st)
{
	for (int i = 0; i < SLOTS; i++) {
		struct stat o;
		if (slot_used[i] && trees[LO].fd[i] >= 0 && fstat(trees[LO].fd[i], &o) == 0 &&
		    o.st_dev == st->st_dev && o.st_ino == st->st_ino)
			return true;
	}
	return false;
}

/* quietlink: links only where no descriptor is open on the file, and no
 * name of a file with several is opened (link, with descriptors, has a
 * known divergence: what one name's descriptor wrote shows through the
 * others only once uploaded). The local tree, the reference, decides, so
 * a seed still draws the same calls. */
static bool quiet_links_only(void)
{
	return kind_on[K_LINK_QUIET] && !kind_on[K_LINK];
}

/* op becomes a stat of name, text in t (n bytes). */
static void make_stat(struct op *op, const char *name, char *t, size_t n)
{
	op->kind = K_STAT;
	op->slot = -1;
	op->p1 = name;
	op->p2 = NULL;
	snprintf(t, n, "stat %s  # lstat, and the contents", name);
}

/* Draws the next call. Calls on a slot that is not open become a create. */
static void make_op(struct prng *p, long step, struct op *op)
{
	memset(op, 0, sizeof *op);
	op->slot = -1;
	op->kind = pick_kind(p);
	bool slot_op = op->kind == K_CLOSE || op->kind == K_WRITE || op->kind == K_READ ||
		       op->kind == K_FTRUNCATE || op->kind == K_FSYNC || op->kind == K_FSTAT;
	if (slot_op && (op->slot = used_slot(p)) < 0)
		op->kind = kind_on[K_CREATE] ? K_CREATE : K_STAT;
	char *t = op->text;
	size_t n = sizeof op->text;
	switch (op->kind) {
	case K_CREATE:
	case K_OPEN: {
		op->slot = free_slot(p);
		op->p1 = pick_name(p);
		struct stat st;
		if (quiet_links_only() && local_stat(op->p1, false, &st) &&
		    S_ISREG(st.st_mode) && st.st_nlink > 1) {
			make_stat(op, op->p1, t, n);
			break;
		}
		static const int acc[] = { O_RDWR, O_RDWR, O_WRONLY, O_RDONLY };
		op->flags = acc[prng_below(p, 4)];
		if (op->kind == K_CREATE) {
			op->flags |= O_CREAT;
			if (prng_percent(p, 20))
				op->flags |= O_EXCL;
			op->mode = pick_mode(p);
		}
		if ((op->flags & O_ACCMODE) != O_RDONLY && prng_percent(p, 15))
			op->flags |= O_TRUNC;
		if ((op->flags & O_ACCMODE) != O_RDONLY && prng_percent(p, 10))
			op->flags |= O_APPEND;
		snprintf(t, n, "open %d %s %s %o", op->slot, op->p1, open_flag_text(op->flags),
			 (unsigned)op->mode);
		break;
	}
	case K_CLOSE:
		snprintf(t, n, "close %d", op->slot);
		break;
	case K_WRITE:
		op->off = prng_percent(p, 50) ? (off_t)prng_below(p, 4096) : (off_t)prng_below(p, MAX_OFF);
		op->len = prng_percent(p, 70) ? 1 + prng_below(p, 64) : 1 + prng_below(p, MAX_WRITE);
		op->pattern = (unsigned)(step % 26);
		if (op->len <= 40) {
			char data[41];
			pattern_fill(data, op->len, op->pattern);
			data[op->len] = 0;
			snprintf(t, n, "pwrite %d %lld %s", op->slot, (long long)op->off, data);
		} else {
			snprintf(t, n, "pwrite %d %lld \"$(fsdiff --pattern %u %zu)\"", op->slot,
				 (long long)op->off, op->pattern, op->len);
		}
		break;
	case K_READ:
		op->off = (off_t)prng_below(p, MAX_OFF + MAX_WRITE);
		if (prng_percent(p, 50))
			op->off = (off_t)prng_below(p, 4096);
		op->len = 1 + prng_below(p, 2 * MAX_WRITE);
		snprintf(t, n, "pread %d %zu %lld", op->slot, op->len, (long long)op->off);
		break;
	case K_TRUNCATE:
	case K_FTRUNCATE:
		op->off = prng_percent(p, 30) ? 0 : (off_t)prng_below(p, MAX_OFF);
		if (op->kind == K_TRUNCATE) {
			op->p1 = pick_name(p);
			snprintf(t, n, "truncate %s %lld", op->p1, (long long)op->off);
		} else {
			snprintf(t, n, "ftruncate %d %lld", op->slot, (long long)op->off);
		}
		break;
	case K_RENAME:
		op->p1 = prng_percent(p, 40) ? pick_dir_name(p) : pick_name(p);
		op->p2 = prng_percent(p, 40) ? pick_dir_name(p) : pick_name(p);
		op->flags = prng_percent(p, 15) ? RENAME_NOREPLACE : 0;
		snprintf(t, n, "rename %s %s %s", op->p1, op->p2, op->flags ? "noreplace" : "-");
		break;
	case K_LINK:
	case K_LINK_QUIET: {
		op->p1 = pick_name(p);
		op->p2 = pick_name(p);
		struct stat st;
		if (op->kind == K_LINK_QUIET && local_stat(op->p1, true, &st) &&
		    open_in_a_slot(&st)) {
			make_stat(op, op->p1, t, n);
			break;
		}
		snprintf(t, n, "link %s %s", op->p1, op->p2);
		break;
	}
	case K_SYMLINK:
		/* targets stay inside the tree: sbfs refuses links out of it */
		op->target = pick_name(p);
		op->p1 = pick_name(p);
		snprintf(t, n, "symlink %s %s", op->target, op->p1);
		break;
	case K_UNLINK:
		op->p1 = pick_name(p);
		snprintf(t, n, "unlink %s", op->p1);
		break;
	case K_RMDIR:
		op->p1 = pick_dir_name(p);
		snprintf(t, n, "rmdir %s", op->p1);
		break;
	case K_MKDIR:
		op->p1 = pick_dir_name(p);
		op->mode = pick_mode(p);
		snprintf(t, n, "mkdir %s %o", op->p1, (unsigned)op->mode);
		break;
	case K_CHMOD:
		op->p1 = pick_name(p);
		op->mode = pick_mode(p);
		snprintf(t, n, "chmod %s %o", op->p1, (unsigned)op->mode);
		break;
	case K_UTIMENS: {
		op->p1 = pick_name(p);
		op->times[0].tv_nsec = UTIME_OMIT;
		op->times[1].tv_sec = 1000000000 + (time_t)prng_below(p, 100000000);
		if (prng_percent(p, 30))
			op->times[1].tv_nsec = UTIME_NOW;
		char m[32];
		if (op->times[1].tv_nsec == UTIME_NOW)
			snprintf(m, sizeof m, "now");
		else
			snprintf(m, sizeof m, "%lld", (long long)op->times[1].tv_sec);
		snprintf(t, n, "utimens %s omit %s", op->p1, m);
		break;
	}
	case K_FSYNC:
		snprintf(t, n, "fsync %d", op->slot);
		break;
	case K_FSTAT:
		snprintf(t, n, "fstat %d", op->slot);
		break;
	case K_STAT:
		make_stat(op, pick_name(p), t, n);
		break;
	case K_READDIR:
		op->p1 = prng_percent(p, 25) ? NULL : pick_dir_name(p);
		snprintf(t, n, "# readdir %s", op->p1 ? op->p1 : ".");
		break;
	case K_DROP:
		snprintf(t, n, "# drop the kernel's caches (echo 2 >/proc/sys/vm/drop_caches)");
		break;
	case K_EXT:
		op->ext = pick_ext(p);
		op->p1 = pick_name(p);
		op->p2 = ext_scripts[op->ext].paths > 1 ? pick_name(p) : NULL;
		snprintf(t, n, "# sbexec -m MOUNT -- sh -c %s sh %s%s%s", shell_quoted(ext_scripts[op->ext].script),
			 op->p1, op->p2 ? " " : "", op->p2 ? op->p2 : "");
		break;
	case KINDS:
		break;
	}
}

/* -------------------------------------------------------- observations */

static char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

static uint64_t fnv1a(const char *buf, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)buf[i]) * 0x100000001b3ULL;
	return h;
}

/* Reads a whole file (up to MAX_FILE); returns its length or -errno. */
static ssize_t read_file(struct tree *tr, const char *name, char *buf)
{
	int fd = openat(tr->root, name, O_RDONLY | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	ssize_t total = 0, r;
	while (total < MAX_FILE && (r = read(fd, buf + total, (size_t)(MAX_FILE - total))) > 0)
		total += r;
	int e = errno;
	close(fd);
	return r < 0 ? -e : total;
}

static const char *type_name(mode_t m)
{
	return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : "other";
}

/* What a name is, as text that should be the same on both trees. */
static char *describe_stat(const struct stat *st, bool fd_level)
{
	char size[32] = "", mode[16] = "", nlink[32] = "";
	if (check_on[C_SIZE] && !S_ISDIR(st->st_mode))
		snprintf(size, sizeof size, " size %lld", (long long)st->st_size);
	if (check_on[C_MODE] && !S_ISLNK(st->st_mode))
		snprintf(mode, sizeof mode, " mode %o", (unsigned)(st->st_mode & 07777));
	bool want_nlink = S_ISDIR(st->st_mode) ? check_on[C_DIRNLINK]
			: fd_level ? check_on[C_FNLINK] : check_on[C_NLINK];
	if (want_nlink)
		snprintf(nlink, sizeof nlink, " nlink %lu", (unsigned long)st->st_nlink);
	return xasprintf("%s%s%s%s", type_name(st->st_mode), size, mode, nlink);
}

/* Contents are read by stat calls and the sweeps, not after every call:
 * on a remote sandbox each read is a round trip or more. */
static bool read_contents;

static char *describe_name(struct tree *tr, const char *name, struct stat *st_out)
{
	static char buf[MAX_FILE];
	struct stat st;
	const char *n = name ? name : ".";
	if (fstatat(tr->root, n, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (st_out)
			memset(st_out, 0, sizeof *st_out);
		return xasprintf("absent (%s)", errno_name(errno));
	}
	if (st_out)
		*st_out = st;
	char *base = describe_stat(&st, false), *out = base;
	if (S_ISREG(st.st_mode) && check_on[C_CONTENT] && read_contents) {
		ssize_t len = read_file(tr, n, buf);
		out = len < 0 ? xasprintf("%s, read %s", base, errno_name((int)-len))
			      : xasprintf("%s, contents %zd bytes fnv %016" PRIx64, base, len,
					  fnv1a(buf, (size_t)len));
		free(base);
	} else if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t len = readlinkat(tr->root, n, target, sizeof target - 1);
		target[len < 0 ? 0 : len] = 0;
		out = len < 0 ? xasprintf("%s, readlink %s", base, errno_name(errno))
			      : xasprintf("%s -> %s", base, target);
		free(base);
	}
	return out;
}

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted names in a directory, or "-ERRNO". */
static char *list_dir(struct tree *tr, const char *name, int *err)
{
	int fd = openat(tr->root, name ? name : ".", O_RDONLY | O_DIRECTORY);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		*err = errno;
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	char *entries[64];
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)) && n < 64)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			entries[n++] = strdup(de->d_name);
	closedir(d);
	qsort(entries, n, sizeof entries[0], compare_names);
	char *out = strdup("[");
	for (size_t i = 0; i < n; i++) {
		char *next = xasprintf("%s%s%s", out, i ? " " : "", entries[i]);
		free(out);
		free(entries[i]);
		out = next;
	}
	char *done = xasprintf("%s]", out);
	free(out);
	*err = 0;
	return done;
}

/* --------------------------------------------------------- applying */

static char write_buf[MAX_WRITE];
static char read_buf[SIDES][2 * MAX_WRITE];

static int full_path(const struct tree *tr, const char *name, char *buf, size_t n)
{
	return snprintf(buf, n, "%s/%s", tr->path, name) >= (int)n ? -1 : 0;
}

/* The local side of a sandbox change: the same script, run by sh. */
static int run_script(struct tree *tr, const struct op *op, const char *sbexec_mount)
{
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		const char *argv[12];
		int i = 0;
		if (sbexec_mount) {
			argv[i++] = "sbexec";
			argv[i++] = "-m";
			argv[i++] = sbexec_mount;
			argv[i++] = "--";
		}
		argv[i++] = "sh";
		argv[i++] = "-c";
		argv[i++] = ext_scripts[op->ext].script;
		argv[i++] = "sh";
		argv[i++] = op->p1;
		if (op->p2)
			argv[i++] = op->p2;
		argv[i] = NULL;
		int devnull = open("/dev/null", O_RDWR);
		if (devnull >= 0) {
			dup2(devnull, 0);
			dup2(devnull, 1);
			dup2(devnull, 2);
		}
		if (chdir(tr->path) < 0)
			_exit(126);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static const char *sbexec_mount;
static struct cache_dropper dropper;

static void apply(int side, const struct op *op, struct result *res)
{
	struct tree *tr = &trees[side];
	int fd = op->slot >= 0 ? tr->fd[op->slot] : -1;
	long long r = 0;
	res->data = NULL;
	errno = 0;
	switch (op->kind) {
	case K_CREATE:
	case K_OPEN:
		r = openat(tr->root, op->p1, op->flags, op->mode);
		if (r >= 0) {
			tr->fd[op->slot] = (int)r;
			r = 0;
		}
		break;
	case K_CLOSE:
		r = close(fd);
		tr->fd[op->slot] = -1;
		break;
	case K_WRITE:
		pattern_fill(write_buf, op->len, op->pattern);
		r = pwrite(fd, write_buf, op->len, op->off);
		break;
	case K_READ:
		r = pread(fd, read_buf[side], op->len, op->off);
		if (r > 0)
			res->data = xasprintf("fnv %016" PRIx64, fnv1a(read_buf[side], (size_t)r));
		break;
	case K_TRUNCATE: {
		char path[PATH_MAX];
		r = full_path(tr, op->p1, path, sizeof path) < 0 ? (errno = ENAMETOOLONG, -1)
								 : truncate(path, op->off);
		break;
	}
	case K_FTRUNCATE:
		r = ftruncate(fd, op->off);
		break;
	case K_RENAME:
		r = renameat2(tr->root, op->p1, tr->root, op->p2, (unsigned)op->flags);
		break;
	case K_LINK:
	case K_LINK_QUIET:
		r = linkat(tr->root, op->p1, tr->root, op->p2, 0);
		break;
	case K_SYMLINK:
		r = symlinkat(op->target, tr->root, op->p1);
		break;
	case K_UNLINK:
		r = unlinkat(tr->root, op->p1, 0);
		break;
	case K_RMDIR:
		r = unlinkat(tr->root, op->p1, AT_REMOVEDIR);
		break;
	case K_MKDIR:
		r = mkdirat(tr->root, op->p1, op->mode);
		break;
	case K_CHMOD:
		r = fchmodat(tr->root, op->p1, op->mode, 0);
		break;
	case K_UTIMENS:
		r = utimensat(tr->root, op->p1, op->times, 0);
		break;
	case K_FSYNC:
		r = fsync(fd);
		break;
	case K_FSTAT: {
		struct stat st;
		r = fstat(fd, &st);
		if (r == 0)
			res->data = describe_stat(&st, true);
		break;
	}
	case K_STAT:
		read_contents = true;
		res->data = describe_name(tr, op->p1, NULL);
		read_contents = false;
		break;
	case K_READDIR: {
		int err;
		res->data = list_dir(tr, op->p1, &err);
		if (!res->data) {
			r = -1;
			errno = err;
		}
		break;
	}
	case K_DROP:
		break;
	case K_EXT:
		r = run_script(tr, op, side == SB ? sbexec_mount : NULL);
		if (r == 127 || r == 126) {
			fprintf(stderr, "fsdiff: cannot run %s in %s (status %lld): put sbexec and sh in PATH\n",
				side == SB ? "sbexec" : "sh", tr->path, r);
			exit(2);
		}
		/* a failure's status is the shell's own (dash says 2 where
		 * busybox says 1); 125 is sbexec refusing to run */
		if (r != 0 && r != 125)
			r = 1;
		break;
	case KINDS:
		break;
	}
	res->r = r;
	res->err = r < 0 ? errno : 0;
}

static char *result_text(const struct result *res)
{
	if (res->r < 0)
		return xasprintf("%s", errno_name(res->err));
	if (res->data)
		return xasprintf("OK %lld %s", res->r, res->data);
	return xasprintf("OK %lld", res->r);
}

/* ------------------------------------------------------- the run */

static long step_no;
static uint64_t seed = 1;
static long checks_made;

static void diverged(const struct op *op, const char *what, const char *sb_text,
		     const char *lo_text, const char *p1, const char *p2)
{
	fflush(stdout);
	printf("fsdiff: DIVERGENCE seed %" PRIu64 " step %ld: %s\n", seed, step_no, op->text);
	printf("  %s\n  sbfs:  %s\n  local: %s\n", what, sb_text, lo_text);
	print_replay(p1, p2);
	printf("fsdiff: ops %ld seed %" PRIu64 " divergences 1\n", step_no, seed);
	fflush(stdout);
	exit(1);
}

struct snapshot {
	const char *name;
	struct stat st[SIDES];
	bool present[SIDES];
	bool is_parent;
};

static void add_snap(struct snapshot *s, int *n, const char *name, bool is_parent)
{
	for (int i = 0; i < *n; i++)
		if ((s[i].name == name) || (s[i].name && name && !strcmp(s[i].name, name)))
			return;
	s[*n].name = name;
	s[*n].is_parent = is_parent;
	(*n)++;
}

static const char *parent_of(const char *name)
{
	/* every parent is itself in names[] (or the root) */
	const char *slash = strrchr(name, '/');
	if (!slash)
		return NULL;
	for (int i = 0; i < NAMES; i++)
		if (strlen(names[i]) == (size_t)(slash - name) && !strncmp(names[i], name, (size_t)(slash - name)))
			return names[i];
	return NULL;
}

static bool mutates(enum kind k)
{
	return k != K_READ && k != K_FSTAT && k != K_STAT && k != K_READDIR && k != K_DROP;
}

/* The names a call may change, and their parents. */
static int involved(const struct op *op, struct snapshot *s)
{
	int n = 0;
	const char *direct[3] = { op->p1, op->p2, op->slot >= 0 ? slot_name[op->slot] : NULL };
	for (int i = 0; i < 3; i++) {
		if (!direct[i])
			continue;
		add_snap(s, &n, direct[i], false);
		add_snap(s, &n, parent_of(direct[i]), true);
	}
	return n;
}

static void take(struct snapshot *s, int n)
{
	for (int i = 0; i < n; i++)
		for (int side = 0; side < SIDES; side++)
			s[i].present[side] = fstatat(trees[side].root, s[i].name ? s[i].name : ".",
						     &s[i].st[side], AT_SYMLINK_NOFOLLOW) == 0;
}

static bool same_time(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* "Did it change" for mtime and ctime, where the same object was at the
 * name before and after the call on both trees. */
static void compare_times(const struct op *op, struct snapshot *before, struct snapshot *after, int n)
{
	for (int i = 0; i < n; i++) {
		bool same = true;
		for (int side = 0; side < SIDES; side++)
			same = same && before[i].present[side] && after[i].present[side] &&
			       before[i].st[side].st_ino == after[i].st[side].st_ino &&
			       (before[i].st[side].st_mode & S_IFMT) == (after[i].st[side].st_mode & S_IFMT);
		if (!same)
			continue;
		bool dir = S_ISDIR(after[i].st[SB].st_mode);
		bool want_m = dir ? check_on[C_DIRMTIME] : check_on[C_MTIME];
		bool want_c = dir ? check_on[C_DIRCTIME] : check_on[C_CTIME];
		const char *name = before[i].name ? before[i].name : ".";
		for (int which = 0; which < 2; which++) {
			if (which == 0 ? !want_m : !want_c)
				continue;
			bool changed[SIDES];
			for (int side = 0; side < SIDES; side++)
				changed[side] = which == 0
					? !same_time(before[i].st[side].st_mtim, after[i].st[side].st_mtim)
					: !same_time(before[i].st[side].st_ctim, after[i].st[side].st_ctim);
			checks_made++;
			if (changed[SB] != changed[LO]) {
				char what[128];
				snprintf(what, sizeof what, "%s of %s %s", which == 0 ? "mtime" : "ctime", name,
					 "changed on one tree only");
				diverged(op, what, changed[SB] ? "changed" : "unchanged",
					 changed[LO] ? "changed" : "unchanged", before[i].name, NULL);
			}
		}
	}
}

static void compare_names_state(const struct op *op, struct snapshot *s, int n)
{
	for (int i = 0; i < n; i++) {
		char *a = describe_name(&trees[SB], s[i].name, NULL);
		char *b = describe_name(&trees[LO], s[i].name, NULL);
		checks_made++;
		if (strcmp(a, b)) {
			char what[96];
			snprintf(what, sizeof what, "after the call, %s is", s[i].name ? s[i].name : ".");
			diverged(op, what, a, b, s[i].name, op->p2 && s[i].name != op->p2 ? op->p2 : op->p1);
		}
		free(a);
		free(b);
	}
}

static void check_utime(const struct op *op, struct snapshot *after, int n)
{
	if (op->kind != K_UTIMENS || op->times[1].tv_nsec == UTIME_NOW || !check_on[C_UTIME])
		return;
	for (int i = 0; i < n; i++) {
		if (after[i].name != op->p1 || !after[i].present[SB] || !after[i].present[LO] ||
		    S_ISLNK(after[i].st[SB].st_mode))
			continue;
		checks_made++;
		if (after[i].st[SB].st_mtim.tv_sec != after[i].st[LO].st_mtim.tv_sec) {
			char a[32], b[32];
			snprintf(a, sizeof a, "%lld", (long long)after[i].st[SB].st_mtim.tv_sec);
			snprintf(b, sizeof b, "%lld", (long long)after[i].st[LO].st_mtim.tv_sec);
			diverged(op, "mtime set by utimens", a, b, op->p1, NULL);
		}
	}
}

static void close_slot(int slot, long step);

static void run_op(struct op *op, long step)
{
	if (op->kind == K_DROP) {
		log_op(step, op);
		if (drop_caches(&dropper, "fsdiff") < 0)
			exit(2);
		return;
	}
	if (op->kind == K_EXT) {
		/* a sandbox change lands while no file is open, as when a user
		 * saves and then runs a command */
		for (int s = 0; s < SLOTS; s++)
			if (slot_used[s])
				close_slot(s, step);
	}
	if ((op->kind == K_CREATE || op->kind == K_OPEN) && slot_used[op->slot])
		close_slot(op->slot, step);
	log_op(step, op);

	struct snapshot before[6], after[6];
	int n = mutates(op->kind) ? involved(op, before) : 0;
	take(before, n);

	struct result res[SIDES];
	for (int side = 0; side < SIDES; side++)
		apply(side, op, &res[side]);

	char *a = result_text(&res[SB]), *b = result_text(&res[LO]);
	checks_made++;
	if (strcmp(a, b))
		diverged(op, "the call's result differs", a, b, op->p1 ? op->p1 : op->slot >= 0 ? slot_name[op->slot] : NULL, op->p2);
	if (getenv("FSDIFF_VERBOSE"))
		printf("%6ld  %-50s %s\n", step, op->text, a);
	free(a);
	free(b);
	free(res[SB].data);
	free(res[LO].data);

	if (op->kind == K_CREATE || op->kind == K_OPEN) {
		if (res[SB].r == 0) {
			slot_used[op->slot] = true;
			slot_name[op->slot] = op->p1;
		}
	} else if (op->kind == K_CLOSE) {
		slot_used[op->slot] = false;
	}
	if (!n)
		return;
	memcpy(after, before, sizeof after);
	take(after, n);
	compare_times(op, before, after, n);
	check_utime(op, after, n);
	compare_names_state(op, after, n);
}

static void close_slot(int slot, long step)
{
	struct op c = { .kind = K_CLOSE, .slot = slot };
	snprintf(c.text, sizeof c.text, "close %d", slot);
	run_op(&c, step);
}

/* Every name and every directory listing, compared. */
static void compare_everything(long step)
{
	struct op sweep = { .kind = K_STAT, .slot = -1 };
	snprintf(sweep.text, sizeof sweep.text, "# compare every name (after step %ld)", step);
	struct snapshot s[NAMES + 1];
	int n = 0;
	add_snap(s, &n, NULL, true);
	for (int i = 0; i < NAMES; i++)
		add_snap(s, &n, names[i], false);
	read_contents = true;
	compare_names_state(&sweep, s, n);
	read_contents = false;
	for (int i = 0; i < n; i++) {
		struct op ls = { .kind = K_READDIR, .slot = -1, .p1 = s[i].name };
		snprintf(ls.text, sizeof ls.text, "# readdir %s (after step %ld)", s[i].name ? s[i].name : ".", step);
		struct result r[SIDES];
		for (int side = 0; side < SIDES; side++)
			apply(side, &ls, &r[side]);
		char *a = result_text(&r[SB]), *b = result_text(&r[LO]);
		checks_made++;
		if (strcmp(a, b))
			diverged(&ls, "the directory lists differ", a, b, s[i].name, NULL);
		free(a);
		free(b);
		free(r[SB].data);
		free(r[LO].data);
	}
}

/* ------------------------------------------------------------ options */

static void usage(const char *why)
{
	fprintf(stderr, "fsdiff: %s (see the comment at the top of tests/tools/fsdiff.c)\n", why);
	exit(2);
}

static void disable(const char *list)
{
	char *copy = strdup(list), *save = NULL;
	for (char *w = strtok_r(copy, ", ", &save); w; w = strtok_r(NULL, ", ", &save)) {
		bool found = false;
		for (int k = 0; k < KINDS; k++)
			if (!strcmp(w, kinds[k].name))
				kind_on[k] = false, found = true;
		for (int c = 0; c < CHECKS; c++)
			if (!strcmp(w, check_names[c]))
				check_on[c] = false, found = true;
		for (int e = 0; e < EXT_SCRIPTS; e++)
			if (!strncmp(w, "sbexec-", 7) && !strcmp(w + 7, ext_scripts[e].what))
				ext_on[e] = false, found = true;
		if (!found) {
			fprintf(stderr, "fsdiff: --disable: no call kind or check named '%s' (fsdiff --list)\n", w);
			exit(2);
		}
	}
	free(copy);
}

static void open_tree(struct tree *tr, const char *label, const char *path)
{
	tr->label = label;
	tr->path = path;
	tr->root = open(path, O_RDONLY | O_DIRECTORY);
	if (tr->root < 0) {
		fprintf(stderr, "fsdiff: cannot open the %s directory %s: %s\n", label, path, strerror(errno));
		exit(2);
	}
	int err;
	char *ls = list_dir(tr, NULL, &err);
	if (!ls || strcmp(ls, "[]")) {
		fprintf(stderr, "fsdiff: the %s directory %s must be empty\n", label, path);
		exit(2);
	}
	free(ls);
	for (int i = 0; i < SLOTS; i++)
		tr->fd[i] = -1;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "seed", required_argument, NULL, 's' }, { "ops", required_argument, NULL, 'n' },
		{ "long", no_argument, NULL, 'L' },       { "seconds", required_argument, NULL, 't' },
		{ "disable", required_argument, NULL, 'x' }, { "drop-cmd", required_argument, NULL, 'D' },
		{ "drop-caches", no_argument, NULL, 'P' }, { "sbexec", required_argument, NULL, 'e' },
		{ "verbose", no_argument, NULL, 'v' },    { "list", no_argument, NULL, 'l' },
		{ "pattern", no_argument, NULL, 'p' },    { NULL, 0, NULL, 0 },
	};
	for (int k = 0; k < KINDS; k++)
		kind_on[k] = true;
	for (int c = 0; c < CHECKS; c++)
		check_on[c] = true;
	for (int e = 0; e < EXT_SCRIPTS; e++)
		ext_on[e] = true;
	long ops = -1;
	bool long_mode = false;
	double seconds = 0;
	int o;
	while ((o = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (o) {
		case 's': seed = (uint64_t)tool_number("fsdiff", optarg, "--seed"); break;
		case 'n': ops = (long)tool_number("fsdiff", optarg, "--ops"); break;
		case 'L': long_mode = true; break;
		case 't': seconds = (double)tool_number("fsdiff", optarg, "--seconds"); break;
		case 'x': disable(optarg); break;
		case 'D': dropper.cmd = optarg; dropper.enabled = 1; break;
		case 'P': dropper.enabled = 1; break;
		case 'e': sbexec_mount = optarg; break;
		case 'v': setenv("FSDIFF_VERBOSE", "1", 1); break;
		case 'l':
			printf("calls:");
			for (int k = 0; k < KINDS; k++)
				printf(" %s", kinds[k].name);
			printf("\nchecks:");
			for (int c = 0; c < CHECKS; c++)
				printf(" %s", check_names[c]);
			printf("\nsandbox changes:");
			for (int e = 0; e < EXT_SCRIPTS; e++)
				printf(" sbexec-%s", ext_scripts[e].what);
			printf("\n");
			return 0;
		case 'p': {
			if (argc - optind != 2)
				usage("--pattern takes START LEN");
			size_t len = (size_t)tool_number("fsdiff", argv[optind + 1], "LEN");
			char *buf = malloc(len + 1);
			pattern_fill(buf, len, (unsigned)tool_number("fsdiff", argv[optind], "START"));
			fwrite(buf, 1, len, stdout);
			return 0;
		}
		default: usage("unknown option");
		}
	}
	if (argc - optind != 2)
		usage("needs SBFS_DIR and LOCAL_DIR");
	if (ops < 0)
		ops = long_mode ? 200000 : 2000;
	if (!dropper.enabled)
		kind_on[K_DROP] = false;
	bool any_ext = false;
	for (int e = 0; e < EXT_SCRIPTS; e++)
		any_ext = any_ext || ext_on[e];
	if (!sbexec_mount || !any_ext)
		kind_on[K_EXT] = false;
	open_tree(&trees[SB], "sbfs", argv[optind]);
	open_tree(&trees[LO], "local", argv[optind + 1]);

	struct prng prng = { seed };
	double start = monotonic_seconds();
	bool capped = false;
	for (step_no = 1; step_no <= ops; step_no++) {
		if (seconds > 0 && monotonic_seconds() - start > seconds) {
			capped = true;
			break;
		}
		struct op op;
		make_op(&prng, step_no, &op);
		run_op(&op, step_no);
		if (step_no % 100 == 0)
			compare_everything(step_no);
	}
	long done = step_no - 1;
	for (int s = 0; s < SLOTS; s++)
		if (slot_used[s])
			close_slot(s, done);
	compare_everything(done);
	if (dropper.enabled) {
		if (drop_caches(&dropper, "fsdiff") < 0)
			return 2;
		compare_everything(done);
	}
	printf("fsdiff: ops %ld seed %" PRIu64 " divergences 0 checks %ld drops %ld%s time %.1fs%s\n",
	       done, seed, checks_made, dropper.count, sbexec_mount ? " with sbexec changes" : "",
	       monotonic_seconds() - start, capped ? " (stopped at the time cap)" : "");
	return 0;
}
