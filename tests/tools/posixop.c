/* posixop: runs a sequence of single system calls given on the command
 * line and prints one line per call: "NAME OK[ VALUE]" or "NAME ERRNO"
 * (the errno's symbolic name). The e2e suite uses it to check exact
 * errno values and the effect of fd-level calls on a mount, which shell
 * tools hide behind their own messages.
 *
 *   posixop OP ARGS... [OP ARGS...]...
 *
 * Open files live in numbered slots 0..9. Operations and arguments:
 *   open SLOT PATH FLAGS MODE   FLAGS: comma list of r w rw creat excl
 *                               trunc append directory nofollow; MODE octal
 *   close SLOT | fsync SLOT | fstat SLOT (prints size)
 *   fnlink SLOT                         (fstat; prints the link count)
 *   read SLOT N | pread SLOT N OFF      (prints the data, escaped)
 *   write SLOT DATA | pwrite SLOT OFF DATA (prints bytes written)
 *   lseek SLOT OFF set|cur|end          (prints the new offset)
 *   ftruncate SLOT LEN | truncate PATH LEN
 *   rename FROM TO -|noreplace | link FROM TO | symlink TARGET PATH
 *   readlink PATH (prints the target) | unlink PATH | rmdir PATH
 *   mkdir PATH MODE | chmod PATH MODE | stat PATH (prints size)
 *   chown PATH UID GID | lchown PATH UID GID   -1 leaves that id
 *   utimens PATH ATIME MTIME            each: now, omit or SEC[.NSEC]
 *   wait                                prints "wait", then reads one line
 *                                       of stdin (lets a test look at the
 *                                       sandbox while files are open)
 *
 * Exit status 0 when every call was made (whatever it returned), 2 on a
 * usage error. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { SLOTS = 10 };

static int slot_fd[SLOTS];

static void usage(const char *why)
{
	fprintf(stderr, "posixop: %s (see the comment at the top of posixop.c)\n", why);
	exit(2);
}

static long long num(const char *s, int base)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, base);
	if (errno || end == s || *end)
		usage("bad number");
	return v;
}

static int slot(const char *s)
{
	long long v = num(s, 10);
	if (v < 0 || v >= SLOTS)
		usage("slot must be 0..9");
	return (int)v;
}

static int open_flags(const char *spec)
{
	int flags = 0;
	char *copy = strdup(spec), *save = NULL;
	for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		if (!strcmp(w, "r")) flags |= O_RDONLY;
		else if (!strcmp(w, "w")) flags |= O_WRONLY;
		else if (!strcmp(w, "rw")) flags |= O_RDWR;
		else if (!strcmp(w, "creat")) flags |= O_CREAT;
		else if (!strcmp(w, "excl")) flags |= O_EXCL;
		else if (!strcmp(w, "trunc")) flags |= O_TRUNC;
		else if (!strcmp(w, "append")) flags |= O_APPEND;
		else if (!strcmp(w, "directory")) flags |= O_DIRECTORY;
		else if (!strcmp(w, "nofollow")) flags |= O_NOFOLLOW;
		else usage("unknown open flag");
	}
	free(copy);
	return flags;
}

static struct timespec time_arg(const char *s)
{
	struct timespec t = { 0, 0 };
	if (!strcmp(s, "now")) {
		t.tv_nsec = UTIME_NOW;
	} else if (!strcmp(s, "omit")) {
		t.tv_nsec = UTIME_OMIT;
	} else {
		char *end;
		t.tv_sec = strtoll(s, &end, 10);
		if (*end == '.')
			t.tv_nsec = strtol(end + 1, &end, 10);
		if (*end)
			usage("bad time");
	}
	return t;
}

/* Data as printable ASCII with everything else (and backslash) as \xHH,
 * so holes and binary bytes compare as text. */
static void print_data(const char *buf, ssize_t n)
{
	for (ssize_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)buf[i];
		if (c >= 0x20 && c < 0x7f && c != '\\')
			putchar(c);
		else
			printf("\\x%02x", c);
	}
}

static void result(const char *op, long long r)
{
	if (r < 0)
		printf("%s %s\n", op, strerrorname_np(errno) ? strerrorname_np(errno) : "E?");
	else
		printf("%s OK\n", op);
}

static void result_value(const char *op, long long r)
{
	if (r < 0)
		result(op, r);
	else
		printf("%s OK %lld\n", op, r);
}

static void result_data(const char *op, const char *buf, ssize_t r)
{
	if (r < 0) {
		result(op, r);
		return;
	}
	printf("%s OK ", op);
	print_data(buf, r);
	putchar('\n');
}

/* Runs the operation at argv[0]; returns how many arguments it took. */
static int run_one(int argc, char **argv)
{
	const char *op = argv[0];
	struct { const char *name; int args; } arity[] = {
		{ "open", 4 }, { "close", 1 }, { "fsync", 1 }, { "fstat", 1 },
		{ "fnlink", 1 },
		{ "read", 2 }, { "pread", 3 }, { "write", 2 }, { "pwrite", 3 },
		{ "lseek", 3 }, { "ftruncate", 2 }, { "truncate", 2 },
		{ "rename", 3 }, { "link", 2 }, { "symlink", 2 },
		{ "readlink", 1 }, { "unlink", 1 }, { "rmdir", 1 },
		{ "mkdir", 2 }, { "chmod", 2 }, { "stat", 1 }, { "utimens", 3 },
		{ "wait", 0 }, { "chown", 3 }, { "lchown", 3 },
	};
	int need = -1;
	for (size_t i = 0; i < sizeof arity / sizeof arity[0]; i++)
		if (!strcmp(op, arity[i].name))
			need = arity[i].args;
	if (need < 0)
		usage("unknown operation");
	if (argc - 1 < need)
		usage("missing arguments");
	char **a = argv + 1;
	fflush(stdout);

	if (!strcmp(op, "open")) {
		int s = slot(a[0]);
		int fd = open(a[1], open_flags(a[2]), (mode_t)num(a[3], 8));
		if (fd >= 0)
			slot_fd[s] = fd;
		result(op, fd);
	} else if (!strcmp(op, "close")) {
		result(op, close(slot_fd[slot(a[0])]));
	} else if (!strcmp(op, "fsync")) {
		result(op, fsync(slot_fd[slot(a[0])]));
	} else if (!strcmp(op, "fstat")) {
		struct stat st;
		int r = fstat(slot_fd[slot(a[0])], &st);
		result_value(op, r < 0 ? r : (long long)st.st_size);
	} else if (!strcmp(op, "fnlink")) {
		struct stat st;
		int r = fstat(slot_fd[slot(a[0])], &st);
		result_value(op, r < 0 ? r : (long long)st.st_nlink);
	} else if (!strcmp(op, "read") || !strcmp(op, "pread")) {
		long long n = num(a[1], 10);
		if (n < 0 || n > 1 << 20)
			usage("read size must be 0..1048576");
		char *buf = malloc((size_t)n + 1);
		ssize_t r = op[0] == 'p'
			? pread(slot_fd[slot(a[0])], buf, (size_t)n, (off_t)num(a[2], 10))
			: read(slot_fd[slot(a[0])], buf, (size_t)n);
		result_data(op, buf, r);
		free(buf);
	} else if (!strcmp(op, "write")) {
		result_value(op, write(slot_fd[slot(a[0])], a[1], strlen(a[1])));
	} else if (!strcmp(op, "pwrite")) {
		result_value(op, pwrite(slot_fd[slot(a[0])], a[2], strlen(a[2]),
					(off_t)num(a[1], 10)));
	} else if (!strcmp(op, "lseek")) {
		int whence = !strcmp(a[2], "set") ? SEEK_SET
			   : !strcmp(a[2], "cur") ? SEEK_CUR
			   : !strcmp(a[2], "end") ? SEEK_END : -1;
		if (whence < 0)
			usage("lseek whence must be set, cur or end");
		result_value(op, lseek(slot_fd[slot(a[0])], (off_t)num(a[1], 10), whence));
	} else if (!strcmp(op, "ftruncate")) {
		result(op, ftruncate(slot_fd[slot(a[0])], (off_t)num(a[1], 10)));
	} else if (!strcmp(op, "truncate")) {
		result(op, truncate(a[0], (off_t)num(a[1], 10)));
	} else if (!strcmp(op, "rename")) {
		unsigned flags = 0;
		if (!strcmp(a[2], "noreplace"))
			flags = RENAME_NOREPLACE;
		else if (strcmp(a[2], "-"))
			usage("rename flag must be - or noreplace");
		result(op, renameat2(AT_FDCWD, a[0], AT_FDCWD, a[1], flags));
	} else if (!strcmp(op, "link")) {
		result(op, link(a[0], a[1]));
	} else if (!strcmp(op, "symlink")) {
		result(op, symlink(a[0], a[1]));
	} else if (!strcmp(op, "readlink")) {
		char buf[PATH_MAX];
		ssize_t r = readlink(a[0], buf, sizeof buf);
		result_data(op, buf, r);
	} else if (!strcmp(op, "unlink")) {
		result(op, unlink(a[0]));
	} else if (!strcmp(op, "rmdir")) {
		result(op, rmdir(a[0]));
	} else if (!strcmp(op, "mkdir")) {
		result(op, mkdir(a[0], (mode_t)num(a[1], 8)));
	} else if (!strcmp(op, "chmod")) {
		result(op, chmod(a[0], (mode_t)num(a[1], 8)));
	} else if (!strcmp(op, "chown")) {
		result(op, chown(a[0], (uid_t)num(a[1], 10), (gid_t)num(a[2], 10)));
	} else if (!strcmp(op, "lchown")) {
		result(op, lchown(a[0], (uid_t)num(a[1], 10), (gid_t)num(a[2], 10)));
	} else if (!strcmp(op, "stat")) {
		struct stat st;
		int r = stat(a[0], &st);
		result_value(op, r < 0 ? r : (long long)st.st_size);
	} else if (!strcmp(op, "utimens")) {
		struct timespec ts[2] = { time_arg(a[1]), time_arg(a[2]) };
		result(op, utimensat(AT_FDCWD, a[0], ts, 0));
	} else if (!strcmp(op, "wait")) {
		printf("wait\n");
		fflush(stdout);
		char line[64];
		if (!fgets(line, sizeof line, stdin))
			usage("wait: stdin closed");
	}
	fflush(stdout);
	return need + 1;
}

int main(int argc, char **argv)
{
	for (int i = 0; i < SLOTS; i++)
		slot_fd[i] = -1;
	if (argc < 2)
		usage("no operation given");
	for (int i = 1; i < argc;)
		i += run_one(argc - i, argv + i);
	return 0;
}
