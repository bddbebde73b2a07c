/* Generic file operations over a backend's raw exec slot: one POSIX sh
 * command per operation, paths only as positional parameters, tools limited
 * to what GNU coreutils and busybox share.
 *
 * Exit codes reserved by the scripts (mapped in status_to_errno):
 *   100 missing path -> ENOENT      101 not a regular file -> EINVAL
 *   102 is a directory -> EISDIR    103 not a directory -> ENOTDIR
 *   104 exists -> EEXIST            105 not empty -> ENOTEMPTY
 *   106 the tool refused -> the errno its message names (util/tool_errno.h),
 *       else EACCES                 107 raced with a change -> retried/EAGAIN
 *   108 not permitted -> EPERM
 *   126/127 tool missing or not runnable -> ENOTSUP (tool named in the log)
 */
#include "shell_ops.h"
#include "output_capture.h"
#include "sandbox_limits.h"
#include "util/log.h"
#include "util/tool_errno.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define SHELL_TIMEOUT_S 120.0
#define READ_BLOCK 65536
#define STAT_OUT_MAX (64 * 1024)
#define LIST_OUT_MAX SB_LIMIT_LIST_BYTES
#define ERR_OUT_MAX 2048
#define LIST_RETRIES 3

/* Shared by every script: `need` names a missing tool, `miss` tells a
 * missing path from one whose parent is not a directory. */
#define PRELUDE                                                               \
	"need(){ for t do command -v \"$t\" >/dev/null 2>&1 || "              \
	"{ printf 'sbfs: tool missing in sandbox: %s\\n' \"$t\" >&2; exit 127; }; done; }\n" \
	"miss(){ p=$(dirname -- \"$1\"); if [ -e \"$p\" ] && [ ! -d \"$p\" ]; " \
	"then exit 103; fi; exit 100; }\n"                                     \
	"ex(){ [ -e \"$1\" ] || [ -L \"$1\" ]; }\n"                            \
	"need dirname\n"

/* Exact copy of a link target: $(...) strips trailing newlines, so add a
 * sentinel and cut it and readlink's own newline back off. */
#define READ_LINK_INTO_T                                                      \
	"t=$(readlink -- \"$f\"; echo x); t=${t%x}; t=${t%?}\n"

static int status_to_errno(int code)
{
	switch (code) {
	case 0: return 0;
	case 100: return -ENOENT;
	case 101: return -EINVAL;
	case 102: return -EISDIR;
	case 103: return -ENOTDIR;
	case 104: return -EEXIST;
	case 105: return -ENOTEMPTY;
	case 106: return -EACCES;
	case 107: return -EAGAIN;
	case 108: return -EPERM;
	case 126: case 127: return -ENOTSUP;
	default: return -EPROTO;
	}
}

/* exec has one cb_arg for both streams; this routes them. */
struct route {
	sb_output_fn out_fn;
	void *out_arg;
	struct output_capture err;
};

static int route_out(void *arg, const char *d, size_t n)
{
	struct route *r = arg;
	return r->out_fn ? r->out_fn(r->out_arg, d, n) : 0;
}

static int route_err(void *arg, const char *d, size_t n)
{
	struct route *r = arg;
	return output_capture_cb(&r->err, d, n);
}

/* Runs `sh -c PRELUDE+script sh args...` in the guest through the raw exec
 * slot (not sb_exec: these are not user commands), stdout going to on_out,
 * and maps the outcome to 0 or a negative errno. */
static int run_script_argv(struct sb_backend *b, const char *what,
			   const char *const *argv, int stdin_fd,
			   sb_output_fn on_out, void *out_arg);

static int run_script(struct sb_backend *b, const char *what,
		      const char *script, const char *const *args,
		      int stdin_fd, sb_output_fn on_out, void *out_arg)
{
	const char *argv[16];
	size_t n = 0;
	argv[n++] = "sh";
	argv[n++] = "-c";
	argv[n++] = script;
	argv[n++] = "sh";
	for (size_t i = 0; args[i] && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	return run_script_argv(b, what, argv, stdin_fd, on_out, out_arg);
}

/* run_script with the whole argv given (sh -c script sh args...). */
static int run_script_argv(struct sb_backend *b, const char *what,
			   const char *const *argv, int stdin_fd,
			   sb_output_fn on_out, void *out_arg)
{
	static const char *const env[] = {"LC_ALL=C", NULL};
	struct route r = {
		.out_fn = on_out, .out_arg = out_arg,
		.err = {.limit = ERR_OUT_MAX, .keep_head = true},
	};
	struct sb_exec_req req = {
		.argv = argv,
		.cwd = "/",
		.env = env,
		.stdin_fd = stdin_fd,
		.timeout_s = SHELL_TIMEOUT_S,
		.on_stdout = route_out,
		.on_stderr = route_err,
		.cb_arg = &r,
		.cancel_fd = -1,
	};
	struct sb_exec_result res;
	memset(&res, 0, sizeof(res));
	int rc = b->ops->exec(b, &req, &res);
	if (rc == 0) {
		if (res.sandbox_terminated)
			rc = -EIO;
		else if (res.timed_out)
			rc = -ETIMEDOUT;
		else if (res.term_signal)
			rc = -EPROTO;
		else
			rc = status_to_errno(res.exit_code);
		/* "The tool refused": its own words say why (a full disk
		 * is ENOSPC, not EACCES). */
		if (res.exit_code == 106 && rc == -EACCES)
			rc = -sb_tool_errno(r.err.data, EACCES);
	}
	if (rc == -ENOTSUP || rc == -EPROTO || rc == -ETIMEDOUT)
		sb_warn("%s: shell %s failed (exit %d%s%s): %.*s", b->ops->name,
			what, res.exit_code, res.timed_out ? ", timed out" : "",
			res.term_signal ? ", signalled" : "",
			(int)strcspn(r.err.data ? r.err.data : "", "\n"),
			r.err.data ? r.err.data : "");
	output_capture_free(&r.err);
	return rc;
}

static int run_capture(struct sb_backend *b, const char *what,
		       const char *script, const char *const *args,
		       struct output_capture *out)
{
	return run_script(b, what, script, args, -1, output_capture_cb, out);
}

/* Paths must be absolute guest paths: that also keeps any of them from
 * being read as an option by a tool that lacks `--`. */
static bool path_ok(const char *p)
{
	return p && p[0] == '/';
}

/* ---- parsers ---- */

static int parse_u64(const char **p, const char *end, int base, uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;
	int digits = 0;
	while (s < end) {
		int d;
		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (base == 16 && *s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (base == 16 && *s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			break;
		if (x > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
			return -EPROTO;
		x = x * (uint64_t)base + (uint64_t)d;
		s++;
		digits++;
	}
	if (!digits || digits > 20)
		return -EPROTO;
	*p = s;
	*v = x;
	return 0;
}

/* Fields separated by single spaces, nothing before, nothing after. */
static int parse_fields(const char *line, size_t len, const int *bases,
			uint64_t *v, size_t n)
{
	const char *p = line, *end = line + len;
	for (size_t i = 0; i < n; i++) {
		if (i) {
			if (p >= end || *p != ' ')
				return -EPROTO;
			p++;
		}
		if (parse_u64(&p, end, bases[i], &v[i]) < 0)
			return -EPROTO;
	}
	return p == end ? 0 : -EPROTO;
}

#define STAT_FMT "%f %s %Y %X %Z %h %i %u %g"

int shell_parse_stat_line(const char *line, size_t len, struct stat *st)
{
	static const int bases[9] = {16, 10, 10, 10, 10, 10, 10, 10, 10};
	uint64_t v[9];
	if (!line || parse_fields(line, len, bases, v, 9) < 0)
		return -EPROTO;
	if (v[0] > 0xffff || v[1] > INT64_MAX || v[2] > INT64_MAX ||
	    v[3] > INT64_MAX || v[4] > INT64_MAX || v[7] > UINT32_MAX ||
	    v[8] > UINT32_MAX)
		return -EPROTO;
	switch (v[0] & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFIFO:
	case S_IFSOCK: case S_IFCHR: case S_IFBLK:
		break;
	default:
		return -EPROTO;
	}
	memset(st, 0, sizeof(*st));
	st->st_mode = (mode_t)v[0];
	st->st_size = (off_t)v[1];
	st->st_mtim.tv_sec = (time_t)v[2];
	st->st_atim.tv_sec = (time_t)v[3];
	st->st_ctim.tv_sec = (time_t)v[4];
	st->st_nlink = (nlink_t)v[5];
	st->st_ino = (ino_t)v[6];
	st->st_uid = (uid_t)v[7];
	st->st_gid = (gid_t)v[8];
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((v[1] + 511) / 512);
	return 0;
}

int shell_parse_statfs(const char *out, size_t len, struct statvfs *st)
{
	static const int bases[7] = {10, 10, 10, 10, 10, 10, 10};
	uint64_t v[7];
	if (!out || len == 0 || out[len - 1] != '\n' ||
	    parse_fields(out, len - 1, bases, v, 7) < 0)
		return -EPROTO;
	if (v[3] == 0 || v[3] > (1u << 30) || v[1] > v[0] || v[2] > v[0])
		return -EPROTO;
	memset(st, 0, sizeof(*st));
	st->f_blocks = v[0];
	st->f_bavail = v[1];
	st->f_bfree = v[2];
	st->f_bsize = st->f_frsize = (unsigned long)v[3];
	st->f_files = v[4];
	st->f_ffree = st->f_favail = v[5];
	st->f_namemax = (unsigned long)v[6];
	return 0;
}

static bool name_ok(const char *s, size_t len)
{
	if (len == 0 || len > SB_LIMIT_NAME || memchr(s, '/', len))
		return false;
	return !(len == 1 && s[0] == '.') &&
	       !(len == 2 && s[0] == '.' && s[1] == '.');
}

/* List framing (all produced by one command):
 *   "<N>\n"
 *   N names, each followed by NUL
 *   N stat lines (STAT_FMT), each followed by "\n", same order
 *   one link target per symlink among them, in order, each followed by NUL
 * and nothing after. */
int shell_parse_list(const char *out, size_t len, struct sb_dirlist *list)
{
	const char *p = out, *end = out + len;
	uint64_t n;
	if (!out || parse_u64(&p, end, 10, &n) < 0 || p >= end || *p++ != '\n')
		return -EPROTO;
	if (n > len)
		return -EPROTO;
	if (n > SB_LIMIT_LIST_ENTRIES)
		return -EFBIG;
	struct sb_dirlist tmp = {0};
	int rc = -EPROTO;
	for (uint64_t i = 0; i < n; i++) {
		const char *nul = memchr(p, '\0', (size_t)(end - p));
		if (!nul || !name_ok(p, (size_t)(nul - p)))
			goto fail;
		if (!sb_dirlist_add(&tmp, p)) {
			rc = -ENOMEM;
			goto fail;
		}
		p = nul + 1;
	}
	for (uint64_t i = 0; i < n; i++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl || shell_parse_stat_line(p, (size_t)(nl - p), &tmp.v[i].st) < 0)
			goto fail;
		p = nl + 1;
	}
	for (uint64_t i = 0; i < n; i++) {
		if (!S_ISLNK(tmp.v[i].st.st_mode))
			continue;
		const char *nul = memchr(p, '\0', (size_t)(end - p));
		if (!nul || nul - p > SB_LIMIT_LINK_TARGET)
			goto fail;
		if (nul > p && !(tmp.v[i].link_target = strdup(p))) {
			rc = -ENOMEM;
			goto fail;
		}
		p = nul + 1;
	}
	if (p != end)
		goto fail;
	for (size_t i = 0; i < tmp.n; i++) {
		struct sb_dirent *e = sb_dirlist_add(list, tmp.v[i].name);
		if (!e) {
			rc = -ENOMEM;
			goto fail;
		}
		e->st = tmp.v[i].st;
		e->link_target = tmp.v[i].link_target;
		tmp.v[i].link_target = NULL;
	}
	sb_dirlist_free(&tmp);
	return 0;
fail:
	sb_dirlist_free(&tmp);
	return rc;
}

/* ---- operations ---- */

/* A read window's output: the identity line of the file the guest opened,
 * then the bytes of the aligned window dd was bounded to. */
struct read_win {
	const struct sb_read_sink *sink;
	char ident[SB_IDENT_MAX];
	size_t ident_len;
	bool have_ident;
	off_t off;     /* file offset of the request */
	size_t skip;   /* bytes of the aligned window before the request */
	size_t len;    /* bytes wanted */
	size_t seen;   /* bytes of the window received so far */
	size_t window; /* the most dd can send */
	size_t got;
};

/* "SIZE rest...": the size is the first field, the rest is compared as is. */
static int take_ident(struct read_win *w)
{
	const char *p = w->ident, *end = w->ident + w->ident_len;
	uint64_t size;
	if (parse_u64(&p, end, 10, &size) < 0 || size > INT64_MAX ||
	    p == end || *p != ' ')
		return -EPROTO;
	for (const char *c = w->ident; c < end; c++)
		if ((unsigned char)*c < ' ')
			return -EPROTO;
	w->ident[w->ident_len] = '\0';
	w->have_ident = true;
	return w->sink->ident(w->sink->arg, w->ident, (off_t)size);
}

/* Hands on only the requested slice of the aligned window, and refuses
 * anything past the window dd was bounded to. */
static int read_cb(void *arg, const char *d, size_t n)
{
	struct read_win *w = arg;
	while (!w->have_ident && n > 0) {
		if (*d == '\n') {
			int r = take_ident(w);
			d++, n--;
			if (r < 0)
				return r;
			break;
		}
		if (w->ident_len + 1 >= sizeof w->ident)
			return -EPROTO;
		w->ident[w->ident_len++] = *d++;
		n--;
	}
	if (n == 0)
		return 0;
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

int shell_read(struct sb_backend *b, const char *path, off_t off, size_t len,
	       const struct sb_read_sink *sink, size_t *got)
{
	*got = 0;
	if (!path_ok(path) || off < 0)
		return -EINVAL;
	if (len == 0)
		return 0;
	/* The fs core asks for 64 KiB-aligned windows; anything else is
	 * rounded out to whole blocks and sliced here. */
	uint64_t first = (uint64_t)off / READ_BLOCK;
	uint64_t last = ((uint64_t)off + len + READ_BLOCK - 1) / READ_BLOCK;
	char skip[24], count[24];
	snprintf(skip, sizeof(skip), "%" PRIu64, first);
	snprintf(count, sizeof(count), "%" PRIu64, last - first);
	struct read_win w = {
		.sink = sink,
		.off = off,
		.skip = (size_t)((uint64_t)off - first * READ_BLOCK),
		.len = len,
		.window = (size_t)((last - first) * READ_BLOCK),
	};
	/* The file is opened once (fd 3) and its identity taken from the open
	 * file, before and after dd: equal lines mean the bytes are of one
	 * version of it (a rename over it, a rewrite or a resize in between
	 * changes the inode, size or a timestamp). */
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
		"dd bs=65536 skip=\"$2\" count=\"$3\" <&3 2>/dev/null || exit 106\n"
		"[ \"$a\" = \"$(id)\" ] || exit 107\n";
	const char *args[] = {path, skip, count, NULL};
	int rc = run_script(b, "read", script, args, -1, read_cb, &w);
	if (rc == 0 && !w.have_ident)
		rc = -EPROTO;
	*got = rc == 0 ? w.got : 0;
	return rc;
}

/* Feeds exactly size bytes of fd (by pread from 0, so the caller's offset
 * is untouched) into a socket that is the command's stdin. A socket, not a
 * pipe, so an early exit of the command is EPIPE without SIGPIPE. */
struct feeder {
	int src, sock;
	off_t size;
	int err;
};

static void *feed_thread(void *arg)
{
	struct feeder *f = arg;
	char *buf = malloc(READ_BLOCK);
	off_t pos = 0;
	if (!buf)
		f->err = -ENOMEM;
	while (buf && pos < f->size) {
		size_t want = (size_t)(f->size - pos) < READ_BLOCK ?
			(size_t)(f->size - pos) : READ_BLOCK;
		ssize_t n = pread(f->src, buf, want, pos);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			f->err = n < 0 ? -errno : -EIO; /* file shrank */
			break;
		}
		for (ssize_t done = 0; done < n;) {
			ssize_t w = send(f->sock, buf + done, (size_t)(n - done),
					 MSG_NOSIGNAL);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0) {
				f->err = -errno;
				goto out;
			}
			done += w;
		}
		pos += n;
	}
out:
	free(buf);
	close(f->sock);
	return NULL;
}

int shell_write_file(struct sb_backend *b, const char *path, int fd,
		     off_t size, mode_t mode)
{
	if (!path_ok(path) || size < 0)
		return -EINVAL;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	struct feeder f = {.src = fd, .sock = sv[1], .size = size};
	pthread_t th;
	int e = pthread_create(&th, NULL, feed_thread, &f);
	if (e) {
		close(sv[0]);
		close(sv[1]);
		return -e;
	}
	char modes[16];
	snprintf(modes, sizeof(modes), "%o", (unsigned)(mode & 07777));
	static const char script[] = PRELUDE
		"need cat mkdir chmod\n"
		"d=$(dirname -- \"$1\")\n"
		"if [ ! -d \"$d\" ]; then mkdir -p -- \"$d\" 2>/dev/null || "
		"{ ex \"$d\" && exit 103; exit 106; }; fi\n"
		"[ -d \"$1\" ] && exit 102\n"
		"new=0; ex \"$1\" || new=1\n"
		"cat > \"$1\" || exit 106\n"
		"if [ $new = 1 ]; then chmod \"$2\" \"$1\" || exit 106; fi\n";
	const char *args[] = {path, modes, NULL};
	int rc = run_script(b, "write", script, args, sv[0], NULL, NULL);
	/* the command is gone: unblock a feeder stuck in send */
	shutdown(sv[0], SHUT_RDWR);
	pthread_join(th, NULL);
	close(sv[0]);
	if (rc == 0 && f.err)
		rc = f.err == -EPIPE ? -EIO : f.err;
	return rc;
}

int shell_list_dir(struct sb_backend *b, const char *path,
		   struct sb_dirlist *out)
{
	if (!path_ok(path))
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
		rc = run_capture(b, "list", script, args, &c);
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
	if (!path_ok(path))
		return -EINVAL;
	static const char script[] = PRELUDE
		"need stat readlink\n"
		"f=$1; ex \"$f\" || miss \"$f\"\n"
		"stat -c '" STAT_FMT "' -- \"$f\" || exit 106\n"
		"if [ -L \"$f\" ]; then " READ_LINK_INTO_T "printf '%s' \"$t\"; fi\n";
	const char *args[] = {path, NULL};
	struct output_capture c = {.limit = STAT_OUT_MAX};
	int rc = run_capture(b, "stat", script, args, &c);
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

int shell_mkdir(struct sb_backend *b, const char *path, mode_t mode)
{
	if (!path_ok(path))
		return -EINVAL;
	char modes[16];
	snprintf(modes, sizeof(modes), "%o", (unsigned)(mode & 07777));
	static const char script[] = PRELUDE
		"need mkdir\n"
		"ex \"$1\" && exit 104\n"
		"p=$(dirname -- \"$1\"); [ -d \"$p\" ] || miss \"$p/x\"\n"
		"mkdir -m \"$2\" -- \"$1\" || exit 106\n";
	const char *args[] = {path, modes, NULL};
	return run_script(b, "mkdir", script, args, -1, NULL, NULL);
}

int shell_remove(struct sb_backend *b, const char *path, bool is_dir)
{
	if (!path_ok(path))
		return -EINVAL;
	static const char script[] = PRELUDE
		"need rm rmdir\n"
		"ex \"$1\" || miss \"$1\"\n"
		"isdir=0; [ -d \"$1\" ] && [ ! -L \"$1\" ] && isdir=1\n"
		"if [ \"$2\" = dir ]; then\n"
		"  [ $isdir = 1 ] || exit 103\n"
		"  rmdir -- \"$1\" 2>/dev/null && exit 0\n"
		"  set -- \"$1\"/* \"$1\"/.[!.]* \"$1\"/..?*\n"
		"  for f do ex \"$f\" && exit 105; done; exit 106\n"
		"fi\n"
		"[ $isdir = 1 ] && exit 102\n"
		"rm -f -- \"$1\" || exit 106\n";
	const char *args[] = {path, is_dir ? "dir" : "file", NULL};
	return run_script(b, "remove", script, args, -1, NULL, NULL);
}

int shell_rename(struct sb_backend *b, const char *from, const char *to,
		 bool noreplace)
{
	if (!path_ok(from) || !path_ok(to))
		return -EINVAL;
	/* mv would move *into* an existing directory (or a link to one), so
	 * the target is checked and cleared first as rename(2) would. Not
	 * atomic: a fallback's price. */
	static const char script[] = PRELUDE
		"need mv rm rmdir\n"
		"ex \"$1\" || miss \"$1\"\n"
		"if ex \"$2\"; then\n"
		"  [ \"$3\" = noreplace ] && exit 104\n"
		"  sd=0; [ -d \"$1\" ] && [ ! -L \"$1\" ] && sd=1\n"
		"  if [ -L \"$2\" ]; then [ $sd = 1 ] && exit 103; rm -f -- \"$2\" || exit 106\n"
		"  elif [ -d \"$2\" ]; then [ $sd = 1 ] || exit 102; rmdir -- \"$2\" 2>/dev/null || exit 105\n"
		"  else [ $sd = 1 ] && exit 103; fi\n"
		"else p=$(dirname -- \"$2\"); [ -d \"$p\" ] || miss \"$p/x\"; fi\n"
		"mv -f -- \"$1\" \"$2\" || exit 106\n";
	const char *args[] = {from, to, noreplace ? "noreplace" : "replace", NULL};
	return run_script(b, "rename", script, args, -1, NULL, NULL);
}

int shell_chmod(struct sb_backend *b, const char *path, mode_t mode)
{
	if (!path_ok(path))
		return -EINVAL;
	char modes[16];
	snprintf(modes, sizeof(modes), "%o", (unsigned)(mode & 07777));
	static const char script[] = PRELUDE
		"need chmod\n"
		"ex \"$1\" || miss \"$1\"\n"
		"chmod \"$2\" \"$1\" || exit 106\n";
	const char *args[] = {path, modes, NULL};
	return run_script(b, "chmod", script, args, -1, NULL, NULL);
}

int shell_truncate(struct sb_backend *b, const char *path, off_t size)
{
	if (!path_ok(path) || size < 0)
		return -EINVAL;
	char sz[24];
	snprintf(sz, sizeof(sz), "%lld", (long long)size);
	static const char script[] = PRELUDE
		"need truncate\n"
		"ex \"$1\" || miss \"$1\"\n"
		"[ -d \"$1\" ] && exit 102\n"
		"[ -f \"$1\" ] || exit 101\n"
		"truncate -s \"$2\" -- \"$1\" || exit 106\n";
	const char *args[] = {path, sz, NULL};
	return run_script(b, "truncate", script, args, -1, NULL, NULL);
}

/* "omit", "now" or "@SECONDS": the fallback keeps whole seconds, which
 * both GNU and busybox touch -d accept. */
static void time_arg(char *out, size_t n, const struct timespec *ts)
{
	if (ts->tv_nsec == UTIME_OMIT)
		snprintf(out, n, "omit");
	else if (ts->tv_nsec == UTIME_NOW)
		snprintf(out, n, "now");
	else
		snprintf(out, n, "@%lld", (long long)ts->tv_sec);
}

int shell_utimens(struct sb_backend *b, const char *path,
		  const struct timespec ts[2])
{
	if (!path_ok(path))
		return -EINVAL;
	char at[32], mt[32];
	time_arg(at, sizeof(at), &ts[0]);
	time_arg(mt, sizeof(mt), &ts[1]);
	static const char script[] = PRELUDE
		"need touch\n"
		"ex \"$1\" || miss \"$1\"\n"
		"t(){ case $1 in omit) ;; now) touch -c $2 -- \"$3\" || exit 106;;"
		" *) touch -c $2 -d \"$1\" -- \"$3\" || exit 106;; esac; }\n"
		"t \"$2\" -a \"$1\"; t \"$3\" -m \"$1\"\n";
	const char *args[] = {path, at, mt, NULL};
	return run_script(b, "utimens", script, args, -1, NULL, NULL);
}

int shell_symlink(struct sb_backend *b, const char *target,
		  const char *linkpath)
{
	if (!target || !*target || !path_ok(linkpath))
		return -EINVAL;
	static const char script[] = PRELUDE
		"need ln\n"
		"ex \"$2\" && exit 104\n"
		"p=$(dirname -- \"$2\"); [ -d \"$p\" ] || miss \"$p/x\"\n"
		"ln -s -- \"$1\" \"$2\" || exit 106\n";
	const char *args[] = {target, linkpath, NULL};
	return run_script(b, "symlink", script, args, -1, NULL, NULL);
}

/* "UID:GID", "UID" or ":GID" for chown; -1 leaves that id alone. */
static void owner_arg(char *out, size_t n, uid_t uid, gid_t gid)
{
	bool u = uid != (uid_t)-1, g = gid != (gid_t)-1;
	if (u && g)
		snprintf(out, n, "%u:%u", (unsigned)uid, (unsigned)gid);
	else if (u)
		snprintf(out, n, "%u", (unsigned)uid);
	else
		snprintf(out, n, ":%u", (unsigned)gid);
}

int shell_chown(struct sb_backend *b, const char *path, uid_t uid, gid_t gid)
{
	if (!path_ok(path))
		return -EINVAL;
	if (uid == (uid_t)-1 && gid == (gid_t)-1)
		return 0;
	char owner[32];
	owner_arg(owner, sizeof owner, uid, gid);
	/* -h: a symlink itself, as lchown(2); a refusal is EPERM as there */
	static const char script[] = PRELUDE
		"need chown\n"
		"ex \"$1\" || miss \"$1\"\n"
		"chown -h -- \"$2\" \"$1\" || exit 108\n";
	const char *args[] = {path, owner, NULL};
	return run_script(b, "chown", script, args, -1, NULL, NULL);
}

int shell_hardlink(struct sb_backend *b, const char *from, const char *to)
{
	if (!path_ok(from) || !path_ok(to))
		return -EINVAL;
	/* link(2) checks first: no source, a directory source (EPERM), an
	 * existing target, a missing target parent */
	static const char script[] = PRELUDE
		"need ln\n"
		"ex \"$1\" || miss \"$1\"\n"
		"[ -d \"$1\" ] && [ ! -L \"$1\" ] && exit 108\n"
		"ex \"$2\" && exit 104\n"
		"p=$(dirname -- \"$2\"); [ -d \"$p\" ] || miss \"$p/x\"\n"
		"ln -- \"$1\" \"$2\" || exit 108\n";
	const char *args[] = {from, to, NULL};
	return run_script(b, "link", script, args, -1, NULL, NULL);
}

int shell_readlink(struct sb_backend *b, const char *path, char **target)
{
	*target = NULL;
	if (!path_ok(path))
		return -EINVAL;
	static const char script[] = PRELUDE
		"need readlink\n"
		"f=$1; if [ ! -L \"$f\" ]; then ex \"$f\" && exit 101; miss \"$f\"; fi\n"
		READ_LINK_INTO_T "printf '%s' \"$t\"\n";
	const char *args[] = {path, NULL};
	struct output_capture c = {.limit = STAT_OUT_MAX};
	int rc = run_capture(b, "readlink", script, args, &c);
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
	if (!path_ok(path))
		return -EINVAL;
	static const char script[] = PRELUDE
		"need stat\n"
		"ex \"$1\" || miss \"$1\"\n"
		"stat -f -c '%b %a %f %S %c %d %l' -- \"$1\" || exit 106\n";
	const char *args[] = {path, NULL};
	struct output_capture c = {.limit = STAT_OUT_MAX};
	int rc = run_capture(b, "statfs", script, args, &c);
	if (rc == 0)
		rc = shell_parse_statfs(c.data, c.len, st);
	output_capture_free(&c);
	return rc;
}

/* ---- batch remove ----
 * One guest command for many removes: the positional parameters are pairs
 * (kind, path), kind "d" for rmdir and "f" for unlink, done in order. The
 * script goes on after a failure, printing "FAIL <index> <exit code>" per
 * failed entry (codes as in the table at the top), then "DONE <count>". */

#define REMOVE_CHUNK_BYTES (96 * 1024)   /* well under any ARG_MAX */
#define REMOVE_CHUNK_ENTRIES 2048
#define REMOVE_OUT_MAX (64 * 1024)

int shell_parse_remove_report(const char *out, size_t len,
			      struct sb_remove *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		v[i].rc = 0;
	bool done = false;
	const char *p = out, *end = out + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			break; /* a line cut short: not a complete report */
		char line[64];
		size_t l = (size_t)(nl - p);
		if (l >= sizeof line || done)
			return -EPROTO;
		memcpy(line, p, l);
		line[l] = '\0';
		p = nl + 1;
		unsigned long idx, code, count;
		char tail;
		if (sscanf(line, "FAIL %lu %lu%c", &idx, &code, &tail) == 2) {
			if (idx >= n || code == 0)
				return -EPROTO;
			int e = status_to_errno((int)code);
			v[idx].rc = e ? e : -EPROTO;
		} else if (sscanf(line, "DONE %lu%c", &count, &tail) == 1) {
			if (count != n)
				return -EPROTO;
			done = true;
		} else {
			return -EPROTO;
		}
	}
	return done && p == end ? 0 : -EPROTO;
}

static int remove_chunk(struct sb_backend *b, struct sb_remove *v, size_t n)
{
	static const char script[] = PRELUDE
		"need rm rmdir\n"
		"full(){ for f in \"$1\"/* \"$1\"/.[!.]* \"$1\"/..?*; do ex \"$f\" && return 0; done; return 1; }\n"
		"i=0\n"
		"while [ $# -ge 2 ]; do\n"
		"  k=$1; p=$2; shift 2; e=0\n"
		"  if [ -d \"$p\" ] && [ ! -L \"$p\" ]; then\n"
		"    if [ \"$k\" = d ]; then\n"
		"      rmdir -- \"$p\" 2>/dev/null || { if full \"$p\"; then e=105; else e=106; fi; }\n"
		"    else e=102; fi\n"
		"  elif ex \"$p\"; then\n"
		"    if [ \"$k\" = d ]; then e=103; else rm -f -- \"$p\" 2>/dev/null || e=106; fi\n"
		"  else\n"
		"    q=$(dirname -- \"$p\"); if [ -e \"$q\" ] && [ ! -d \"$q\" ]; then e=103; else e=100; fi\n"
		"  fi\n"
		"  [ $e = 0 ] || printf 'FAIL %d %d\\n' $i $e\n"
		"  i=$((i+1))\n"
		"done\n"
		"printf 'DONE %d\\n' $i\n";
	const char **argv = calloc(4 + 2 * n + 1, sizeof *argv);
	if (!argv)
		return -ENOMEM;
	size_t a = 0;
	argv[a++] = "sh";
	argv[a++] = "-c";
	argv[a++] = script;
	argv[a++] = "sh";
	for (size_t i = 0; i < n; i++) {
		argv[a++] = v[i].is_dir ? "d" : "f";
		argv[a++] = v[i].path;
	}
	argv[a] = NULL;
	struct output_capture c = {.limit = REMOVE_OUT_MAX};
	int rc = run_script_argv(b, "remove", argv, -1, output_capture_cb, &c);
	free(argv);
	if (rc == 0) {
		rc = shell_parse_remove_report(c.data ? c.data : "", c.len, v, n);
		if (rc < 0)
			sb_warn("%s: shell batch remove gave an unreadable report",
				b->ops->name);
	}
	output_capture_free(&c);
	return rc;
}

int shell_remove_many(struct sb_backend *b, struct sb_remove *v, size_t n)
{
	size_t i = 0;
	while (i < n) {
		size_t k = 0, bytes = 0;
		while (i + k < n && k < REMOVE_CHUNK_ENTRIES) {
			size_t l = strlen(v[i + k].path) + 3;
			if (k > 0 && bytes + l > REMOVE_CHUNK_BYTES)
				break;
			bytes += l;
			k++;
		}
		/* A path the script could read as an option never goes. */
		size_t bad = 0;
		for (size_t j = i; j < i + k; j++)
			if (!path_ok(v[j].path))
				bad++;
		int rc;
		if (bad) {
			for (size_t j = i; j < i + k; j++)
				v[j].rc = path_ok(v[j].path) ? -EIO : -EINVAL;
			rc = 0;
			/* the good ones go on their own, in order */
			for (size_t j = i; j < i + k && rc == 0; j++)
				if (path_ok(v[j].path))
					rc = remove_chunk(b, &v[j], 1);
		} else {
			rc = remove_chunk(b, v + i, k);
		}
		if (rc < 0)
			return rc;
		i += k;
	}
	return 0;
}
