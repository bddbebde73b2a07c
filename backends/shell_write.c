/* The shell operations that change the sandbox: uploads, mkdir, remove,
 * rename, chmod, truncate, utimens, symlink, chown, link, and the batch
 * remove of write-back mode. */
#include "shell_run.h"
#include "util/log.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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
	if (!shell_path_ok(path) || size < 0)
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
	int rc = shell_run(b, "write", script, args, sv[0], NULL, NULL);
	/* the command is gone: unblock a feeder stuck in send */
	shutdown(sv[0], SHUT_RDWR);
	pthread_join(th, NULL);
	close(sv[0]);
	if (rc == 0 && f.err)
		rc = f.err == -EPIPE ? -EIO : f.err;
	return rc;
}

int shell_mkdir(struct sb_backend *b, const char *path, mode_t mode)
{
	if (!shell_path_ok(path))
		return -EINVAL;
	char modes[16];
	snprintf(modes, sizeof(modes), "%o", (unsigned)(mode & 07777));
	static const char script[] = PRELUDE
		"need mkdir\n"
		"ex \"$1\" && exit 104\n"
		"p=$(dirname -- \"$1\"); [ -d \"$p\" ] || miss \"$p/x\"\n"
		"mkdir -m \"$2\" -- \"$1\" || exit 106\n";
	const char *args[] = {path, modes, NULL};
	return shell_run(b, "mkdir", script, args, -1, NULL, NULL);
}

int shell_remove(struct sb_backend *b, const char *path, bool is_dir)
{
	if (!shell_path_ok(path))
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
	return shell_run(b, "remove", script, args, -1, NULL, NULL);
}

int shell_rename(struct sb_backend *b, const char *from, const char *to,
		 bool noreplace)
{
	if (!shell_path_ok(from) || !shell_path_ok(to))
		return -EINVAL;
	/* mv would move *into* an existing directory (or a link to one), so
	 * the target is checked and cleared first as rename(2) would; and mv
	 * refuses a symlink onto the file it leads to ("the same file"),
	 * which rename(2) replaces, so that target goes first too. Not
	 * atomic: a fallback's price. */
	static const char script[] = PRELUDE
		"need mv rm rmdir\n"
		"ex \"$1\" || miss \"$1\"\n"
		"if ex \"$2\"; then\n"
		"  [ \"$3\" = noreplace ] && exit 104\n"
		"  sd=0; [ -d \"$1\" ] && [ ! -L \"$1\" ] && sd=1\n"
		"  if [ -L \"$2\" ]; then [ $sd = 1 ] && exit 103; rm -f -- \"$2\" || exit 106\n"
		"  elif [ -d \"$2\" ]; then [ $sd = 1 ] || exit 102; rmdir -- \"$2\" 2>/dev/null || exit 105\n"
		"  else [ $sd = 1 ] && exit 103\n"
		"    if [ -L \"$1\" ] && [ \"$1\" -ef \"$2\" ]; then rm -f -- \"$2\" || exit 106; fi\n"
		"  fi\n"
		"else p=$(dirname -- \"$2\"); [ -d \"$p\" ] || miss \"$p/x\"; fi\n"
		"mv -f -- \"$1\" \"$2\" || exit 106\n";
	const char *args[] = {from, to, noreplace ? "noreplace" : "replace", NULL};
	return shell_run(b, "rename", script, args, -1, NULL, NULL);
}

int shell_chmod(struct sb_backend *b, const char *path, mode_t mode)
{
	if (!shell_path_ok(path))
		return -EINVAL;
	char modes[16];
	snprintf(modes, sizeof(modes), "%o", (unsigned)(mode & 07777));
	static const char script[] = PRELUDE
		"need chmod\n"
		"ex \"$1\" || miss \"$1\"\n"
		"chmod \"$2\" \"$1\" || exit 106\n";
	const char *args[] = {path, modes, NULL};
	return shell_run(b, "chmod", script, args, -1, NULL, NULL);
}

int shell_truncate(struct sb_backend *b, const char *path, off_t size)
{
	if (!shell_path_ok(path) || size < 0)
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
	return shell_run(b, "truncate", script, args, -1, NULL, NULL);
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
	if (!shell_path_ok(path))
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
	return shell_run(b, "utimens", script, args, -1, NULL, NULL);
}

int shell_symlink(struct sb_backend *b, const char *target,
		  const char *linkpath)
{
	if (!target || !*target || !shell_path_ok(linkpath))
		return -EINVAL;
	static const char script[] = PRELUDE
		"need ln\n"
		"ex \"$2\" && exit 104\n"
		"p=$(dirname -- \"$2\"); [ -d \"$p\" ] || miss \"$p/x\"\n"
		"ln -s -- \"$1\" \"$2\" || exit 106\n";
	const char *args[] = {target, linkpath, NULL};
	return shell_run(b, "symlink", script, args, -1, NULL, NULL);
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
	if (!shell_path_ok(path))
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
	return shell_run(b, "chown", script, args, -1, NULL, NULL);
}

int shell_hardlink(struct sb_backend *b, const char *from, const char *to,
		   struct stat *st)
{
	(void)st;
	if (!shell_path_ok(from) || !shell_path_ok(to))
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
	return shell_run(b, "link", script, args, -1, NULL, NULL);
}

/* ---- namespace batch ----
 * One guest command for many mkdirs and removes: the positional
 * parameters are pairs (kind, path), kind "d" for rmdir, "f" for unlink
 * and "m" then the octal mode for mkdir, done in order. The script goes
 * on after a failure, printing "FAIL <index> <exit code>" per failed
 * entry (codes as in shell_run.h), then "DONE <count>". */

#define NS_CHUNK_BYTES (96 * 1024)   /* well under any ARG_MAX */
#define NS_CHUNK_ENTRIES 2048
#define NS_OUT_MAX (64 * 1024)

int shell_parse_ns_report(const char *out, size_t len,
			  struct sb_ns_change *v, size_t n)
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
			int e = shell_status_to_errno((int)code);
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

static int ns_chunk(struct sb_backend *b, struct sb_ns_change *v, size_t n)
{
	static const char script[] = PRELUDE
		"need rm rmdir mkdir\n"
		"full(){ for f in \"$1\"/* \"$1\"/.[!.]* \"$1\"/..?*; do ex \"$f\" && return 0; done; return 1; }\n"
		"i=0\n"
		"while [ $# -ge 2 ]; do\n"
		"  k=$1; p=$2; shift 2; e=0\n"
		"  case $k in\n"
		"  m*)\n"
		"    q=$(dirname -- \"$p\")\n"
		"    if ex \"$p\"; then e=104\n"
		"    elif [ -d \"$q\" ]; then mkdir -m \"${k#m}\" -- \"$p\" 2>/dev/null || e=106\n"
		"    elif ex \"$q\"; then e=103; else e=100; fi;;\n"
		"  *)\n"
		"    if [ -d \"$p\" ] && [ ! -L \"$p\" ]; then\n"
		"      if [ \"$k\" = d ]; then\n"
		"        rmdir -- \"$p\" 2>/dev/null || { if full \"$p\"; then e=105; else e=106; fi; }\n"
		"      else e=102; fi\n"
		"    elif ex \"$p\"; then\n"
		"      if [ \"$k\" = d ]; then e=103; else rm -f -- \"$p\" 2>/dev/null || e=106; fi\n"
		"    else\n"
		"      q=$(dirname -- \"$p\"); if [ -e \"$q\" ] && [ ! -d \"$q\" ]; then e=103; else e=100; fi\n"
		"    fi;;\n"
		"  esac\n"
		"  [ $e = 0 ] || printf 'FAIL %d %d\\n' $i $e\n"
		"  i=$((i+1))\n"
		"done\n"
		"printf 'DONE %d\\n' $i\n";
	const char **argv = calloc(4 + 2 * n + 1, sizeof *argv);
	char (*modes)[8] = calloc(n, sizeof *modes);
	if (!argv || !modes) {
		free(argv);
		free(modes);
		return -ENOMEM;
	}
	size_t a = 0;
	argv[a++] = "sh";
	argv[a++] = "-c";
	argv[a++] = script;
	argv[a++] = "sh";
	for (size_t i = 0; i < n; i++) {
		snprintf(modes[i], sizeof modes[i], "m%o", (unsigned)(v[i].mode & 07777));
		argv[a++] = v[i].make ? modes[i] : v[i].is_dir ? "d" : "f";
		argv[a++] = v[i].path;
	}
	argv[a] = NULL;
	struct output_capture c = {.limit = NS_OUT_MAX};
	int rc = shell_run_argv(b, v[0].make ? "mkdir" : "remove", argv, -1,
				output_capture_cb, &c);
	free(argv);
	free(modes);
	if (rc == 0) {
		rc = shell_parse_ns_report(c.data ? c.data : "", c.len, v, n);
		if (rc < 0)
			sb_warn("%s: shell batch of mkdirs and removes gave an unreadable report",
				b->ops->name);
	}
	output_capture_free(&c);
	return rc;
}

int shell_ns_many(struct sb_backend *b, struct sb_ns_change *v, size_t n)
{
	size_t i = 0;
	while (i < n) {
		size_t k = 0, bytes = 0;
		while (i + k < n && k < NS_CHUNK_ENTRIES) {
			size_t l = strlen(v[i + k].path) + 3;
			if (k > 0 && bytes + l > NS_CHUNK_BYTES)
				break;
			bytes += l;
			k++;
		}
		/* A path the script could read as an option never goes. */
		size_t bad = 0;
		for (size_t j = i; j < i + k; j++)
			if (!shell_path_ok(v[j].path))
				bad++;
		int rc;
		if (bad) {
			for (size_t j = i; j < i + k; j++)
				v[j].rc = shell_path_ok(v[j].path) ? -EIO : -EINVAL;
			rc = 0;
			/* the good ones go on their own, in order */
			for (size_t j = i; j < i + k && rc == 0; j++)
				if (shell_path_ok(v[j].path))
					rc = ns_chunk(b, &v[j], 1);
		} else {
			rc = ns_chunk(b, v + i, k);
		}
		if (rc < 0)
			return rc;
		i += k;
	}
	return 0;
}
