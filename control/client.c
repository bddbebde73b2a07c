#include "client.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "frame.h"
#include "server.h"

void control_mountinfo_unescape(char *s)
{
	char *out = s;
	for (char *p = s; *p;) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' &&
		    p[2] <= '7' && p[3] >= '0' && p[3] <= '7') {
			*out++ = (char)((p[1] - '0') << 6 | (p[2] - '0') << 3 | (p[3] - '0'));
			p += 4;
		} else {
			*out++ = *p++;
		}
	}
	*out = '\0';
}

bool control_path_within(const char *dir, const char *path, const char **rest)
{
	size_t n = strlen(dir);
	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (n == 1 && dir[0] == '/') {
		*rest = path + (path[0] == '/');
		return path[0] == '/';
	}
	if (strncmp(dir, path, n) != 0 || (path[n] != '\0' && path[n] != '/'))
		return false;
	*rest = path + n + (path[n] == '/');
	return true;
}

const char *control_mountinfo_path = "/proc/self/mountinfo";

/* One mountinfo line's mountpoint, fstype and source (the mountpoint and
 * source unescaped, in place); false for a line it cannot read. */
static bool mount_line(char *line, char **mp, char **fstype, char **source)
{
	/* id parent major:minor root mountpoint opts [optional...] - fstype source superopts */
	char *save = NULL;
	int i = 0;
	bool after_sep = false;
	*mp = *fstype = *source = NULL;
	for (char *tok = strtok_r(line, " \n", &save); tok;
	     tok = strtok_r(NULL, " \n", &save), i++) {
		if (i == 4)
			*mp = tok;
		else if (i > 5 && !after_sep && !strcmp(tok, "-"))
			after_sep = true;
		else if (after_sep && !*fstype)
			*fstype = tok;
		else if (after_sep) {
			*source = tok;
			break;
		}
	}
	if (!*mp || !*fstype)
		return false;
	control_mountinfo_unescape(*mp);
	if (*source)
		control_mountinfo_unescape(*source);
	return true;
}

static bool is_sbfs(const char *fstype) { return !strcmp(fstype, "fuse.sbfs"); }

/* The mount dir is in: the longest mountpoint that contains it, of any
 * type (a folder mounted over part of an sbfs mount is not in it); with
 * sbfs_only, the longest sbfs mountpoint that contains it, whatever is
 * mounted below that. */
static int mountinfo_scan(FILE *mi, const char *dir, bool sbfs_only, char *out,
			  size_t outlen, char *src, size_t srclen)
{
	char *line = NULL, *mp, *fstype, *source;
	size_t cap = 0;
	size_t best = 0;
	bool found = false, sbfs = false;
	while (getline(&line, &cap, mi) > 0) {
		if (!mount_line(line, &mp, &fstype, &source) ||
		    (sbfs_only && !is_sbfs(fstype)))
			continue;
		const char *rest;
		size_t len = strlen(mp);
		/* >= so that of two mounts on one point the later, visible one wins */
		if (!control_path_within(mp, dir, &rest) || len < best)
			continue;
		best = len;
		found = true;
		sbfs = is_sbfs(fstype) && len < outlen;
		if (sbfs) {
			memcpy(out, mp, len + 1);
			if (src)
				snprintf(src, srclen, "%s", source ? source : "");
		}
	}
	free(line);
	return found && sbfs ? 0 : -1;
}

char **control_sbfs_mounts(void)
{
	FILE *mi = fopen(control_mountinfo_path, "re");
	char **v = calloc(1, sizeof *v);
	if (!mi || !v) {
		if (mi)
			fclose(mi);
		return v;
	}
	char *line = NULL, *mp, *fstype, *source;
	size_t cap = 0, n = 0;
	while (getline(&line, &cap, mi) > 0) {
		if (!mount_line(line, &mp, &fstype, &source) || !is_sbfs(fstype))
			continue;
		char **nv = realloc(v, (n + 2) * sizeof *nv);
		if (!nv)
			break;
		v = nv;
		v[n] = strdup(mp);
		v[n + 1] = NULL;
		if (v[n])
			n++;
	}
	free(line);
	fclose(mi);
	return v;
}

int control_mountinfo_find(FILE *mi, const char *dir, char *out, size_t outlen,
			   char *src, size_t srclen)
{
	return mountinfo_scan(mi, dir, false, out, outlen, src, srclen);
}

int control_mountinfo_sbfs_ancestor(FILE *mi, const char *dir, char *out,
				    size_t outlen)
{
	return mountinfo_scan(mi, dir, true, out, outlen, NULL, 0);
}

static int find_in_mountinfo(const char *dir, char *out, size_t outlen,
			     char *src, size_t srclen)
{
	FILE *mi = fopen(control_mountinfo_path, "re");
	if (!mi)
		return -1;
	int rc = mountinfo_scan(mi, dir, false, out, outlen, src, srclen);
	fclose(mi);
	return rc;
}

/* getcwd, or $PWD when it names the same directory: the kernel's getcwd
 * fails with ENOENT once a FUSE daemon has invalidated the cwd's dentry,
 * even though the directory is still there. */
static int current_dir(char *buf, size_t len)
{
	if (getcwd(buf, len))
		return 0;
	int e = errno;
	const char *pwd = getenv("PWD");
	struct stat a, b;
	if (pwd && pwd[0] == '/' && strlen(pwd) < len && stat(pwd, &a) == 0 &&
	    stat(".", &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
		memcpy(buf, pwd, strlen(pwd) + 1);
		return 0;
	}
	errno = e;
	return -1;
}

/* The daemon names its control socket in the mount's source,
 * "sbfs:/DIR/NAME.sock", so that finding it costs the mount no request:
 * the xattr on the root it used before made the kernel ask every file's
 * xattrs on every `ls -l`, answers it could not cache. A daemon older than
 * that wrote "sbfs:NAME"; its socket is looked for where
 * control_socket_path puts it. */
static bool socket_from_source(const char *source, char *out, size_t len)
{
	size_t plen = strlen(SBFS_MOUNT_SOURCE_PREFIX);
	if (strncmp(source, SBFS_MOUNT_SOURCE_PREFIX, plen) != 0 || !source[plen])
		return false;
	const char *rest = source + plen;
	if (rest[0] == '/') {
		if (strlen(rest) >= len)
			return false;
		memcpy(out, rest, strlen(rest) + 1);
		return true;
	}
	if (strchr(rest, '/') || strlen(rest) > 255)
		return false;
	const char *name = rest;
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char cand[3][PATH_MAX];
	int n = 0;
	if (xdg && xdg[0] == '/')
		snprintf(cand[n++], PATH_MAX, "%s/sbfs/%.255s.sock", xdg, name);
	if (geteuid() == 0)
		snprintf(cand[n++], PATH_MAX, "/run/sbfs/%.255s.sock", name);
	snprintf(cand[n++], PATH_MAX, "/tmp/sbfs-%u/%.255s.sock", (unsigned)geteuid(), name);
	for (int i = 0; i < n; i++) {
		struct stat st;
		if (stat(cand[i], &st) == 0 && S_ISSOCK(st.st_mode) &&
		    strlen(cand[i]) < len) {
			memcpy(out, cand[i], strlen(cand[i]) + 1);
			return true;
		}
	}
	return false;
}

/* Whether path is an sbfs mountpoint spelled exactly as mountinfo lists
 * it. Then no realpath is needed, and none is done: its lstat of the mount
 * root would be a request to that mount, which hangs while the daemon is
 * stopped and, while it is in flight, makes a concurrent unmount fail
 * with EBUSY (`sbfs list` used to do that to every mount it listed). */
static bool is_listed_mountpoint(const char *path, struct control_target *t,
				 char *source, size_t srclen)
{
	return path[0] == '/' &&
	       find_in_mountinfo(path, t->mount, sizeof t->mount, source, srclen) == 0 &&
	       !strcmp(t->mount, path);
}

int control_find_mount(const char *prog, const char *explicit_mount,
		       const char *dir, struct control_target *t, char *err,
		       size_t errlen)
{
	memset(t, 0, sizeof *t);
	char cwd[PATH_MAX];
	if (!dir) {
		if (current_dir(cwd, sizeof cwd) == 0)
			dir = cwd;
		else if (!explicit_mount) {
			snprintf(err, errlen, "%s: cannot tell the current directory: %s",
				 prog, strerror(errno));
			return -1;
		}
	}

	char source[PATH_MAX + 16] = "";
	if (explicit_mount && is_listed_mountpoint(explicit_mount, t, source,
						   sizeof source)) {
		/* named as mountinfo has it: found without a path walk */
	} else if (explicit_mount) {
		char real[PATH_MAX];
		if (!realpath(explicit_mount, real)) {
			snprintf(err, errlen, "%s: %s: %s", prog, explicit_mount,
				 strerror(errno));
			return -1;
		}
		/* -m may name a folder inside the mount */
		if (find_in_mountinfo(real, t->mount, sizeof t->mount, source,
				      sizeof source) < 0) {
			snprintf(err, errlen, "%s: %s is not an sbfs mount", prog,
				 explicit_mount);
			return -1;
		}
	} else {
		if (find_in_mountinfo(dir, t->mount, sizeof t->mount, source,
				      sizeof source) < 0) {
			snprintf(err, errlen,
				 "%s: not inside an sbfs mount (cd into one or %s)", prog,
				 strcmp(prog, "sbexec") ? "name the mount" : "use -m MOUNT");
			return -1;
		}
	}
	if (!socket_from_source(source, t->socket, sizeof t->socket)) {
		snprintf(err, errlen,
			 "%s: the sbfs mount %s does not say where its daemon listens (its source is '%s')",
			 prog, t->mount, source);
		return -1;
	}
	const char *rest;
	if (dir && control_path_within(t->mount, dir, &rest))
		snprintf(t->rel, sizeof t->rel, "%s", rest);
	return 0;
}

int control_connect(const char *prog, const struct control_target *t,
		    char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(t->socket) >= sizeof sa.sun_path) {
		snprintf(err, errlen, "%s: the control socket path %s of %s is too long",
			 prog, t->socket, t->mount);
		return -1;
	}
	memcpy(sa.sun_path, t->socket, strlen(t->socket) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		if (fd >= 0 && (errno == ECONNREFUSED || errno == ENOENT))
			snprintf(err, errlen,
				 "%s: the sbfs daemon for %s is gone (%s at %s); if the mount is dead, clear it with 'fusermount3 -u -z %s'",
				 prog, t->mount, strerror(errno), t->socket, t->mount);
		else
			snprintf(err, errlen,
				 "%s: cannot reach the sbfs daemon for %s at %s: %s (is it still running?)",
				 prog, t->mount, t->socket, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* ---- sbfs status|sync|refresh ---- */

static void human_bytes(json_int_t n, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)n;
	int u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%lld B", (long long)n);
	else
		snprintf(buf, len, "%.1f %s (%lld bytes)", v, units[u], (long long)n);
}

static bool is_known_key(const char *k)
{
	static const char *const known[] = {
		"mount", "backend", "sandbox", "workdir", "state", "reason", "calls",
		"errors", "shell_fallbacks", "bytes_up", "bytes_down",
		"pending_uploads", NULL};
	for (size_t i = 0; known[i]; i++)
		if (!strcmp(k, known[i]))
			return true;
	return false;
}

static void print_value(FILE *out, const char *key, json_t *v)
{
	if (json_is_string(v)) {
		fprintf(out, "%-16s %s\n", key, json_string_value(v));
	} else if (json_is_array(v)) {
		fprintf(out, "%-16s %zu\n", key, json_array_size(v));
		size_t i;
		json_t *e;
		json_array_foreach(v, i, e) {
			if (json_is_string(e))
				fprintf(out, "  %s\n", json_string_value(e));
		}
	} else {
		char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		fprintf(out, "%-16s %s\n", key, s ? s : "?");
		free(s);
	}
}

static void print_status(FILE *out, json_t *o)
{
	const char *str_keys[] = {"mount", "backend", "sandbox", "workdir"};
	for (size_t i = 0; i < sizeof str_keys / sizeof *str_keys; i++) {
		const char *v = json_string_value(json_object_get(o, str_keys[i]));
		if (v)
			fprintf(out, "%-16s %s\n", str_keys[i], v);
	}
	const char *state = json_string_value(json_object_get(o, "state"));
	const char *reason = json_string_value(json_object_get(o, "reason"));
	fprintf(out, "%-16s %s%s%s\n", "state", state ? state : "?",
		reason ? " — " : "", reason ? reason : "");

	json_t *pending = json_object_get(o, "pending_uploads");
	if (json_is_array(pending)) {
		if (json_array_size(pending) == 0) {
			fprintf(out, "%-16s none\n", "pending uploads");
		} else {
			fprintf(out, "%-16s %zu\n", "pending uploads", json_array_size(pending));
			size_t i;
			json_t *e;
			json_array_foreach(pending, i, e) {
				const char *path = json_string_value(json_object_get(e, "path"));
				const char *err = json_string_value(json_object_get(e, "error"));
				if (json_is_string(e))
					path = json_string_value(e);
				json_t *bytes = json_object_get(e, "bytes");
				if (path && bytes)
					fprintf(out, "  %s (%lld bytes%s%s)\n", path,
						(long long)json_integer_value(bytes),
						err ? ", last upload failed: " : "", err ? err : "");
				else if (path)
					fprintf(out, "  %s%s%s\n", path, err ? ": " : "",
						err ? err : "");
			}
		}
	}
	json_t *wb = json_object_get(o, "writeback");
	if (json_is_object(wb))
		fprintf(out, "%-16s %lld queued (%lld bytes), %lld uploading, "
			"%lld failed, %lld uploaded\n", "write-back",
			(long long)json_integer_value(json_object_get(wb, "queued")),
			(long long)json_integer_value(json_object_get(wb, "queued_bytes")),
			(long long)json_integer_value(json_object_get(wb, "in_flight")),
			(long long)json_integer_value(json_object_get(wb, "failed")),
			(long long)json_integer_value(json_object_get(wb, "uploaded")));
	json_t *rmq = json_is_object(wb) ? json_object_get(wb, "removes_queued") : NULL;
	if (rmq) {
		fprintf(out, "%-16s %lld queued, %lld done, %lld failed\n", "removes",
			(long long)json_integer_value(rmq),
			(long long)json_integer_value(json_object_get(wb, "removes_done")),
			(long long)json_integer_value(json_object_get(wb, "removes_failed")));
		size_t i;
		json_t *e;
		json_array_foreach(json_object_get(wb, "failed_removes"), i, e)
			fprintf(out, "  failed remove: %s: %s (kept in the sandbox)\n",
				json_string_value(json_object_get(e, "path")),
				json_string_value(json_object_get(e, "error")));
	}

	json_t *calls = json_object_get(o, "calls"), *errors = json_object_get(o, "errors");
	bool any = false;
	const char *k;
	json_t *v;
	json_object_foreach(calls, k, v) {
		json_int_t n = json_integer_value(v);
		json_int_t e = json_integer_value(json_object_get(errors, k));
		if (!n && !e)
			continue;
		if (!any)
			fprintf(out, "%-16s %10s %8s\n", "calls", "count", "errors");
		any = true;
		fprintf(out, "  %-14s %10lld %8lld\n", k, (long long)n, (long long)e);
	}
	if (!any)
		fprintf(out, "%-16s none yet\n", "calls");

	fprintf(out, "%-16s %lld\n", "shell fallbacks",
		(long long)json_integer_value(json_object_get(o, "shell_fallbacks")));
	char buf[64];
	human_bytes(json_integer_value(json_object_get(o, "bytes_up")), buf, sizeof buf);
	fprintf(out, "%-16s %s\n", "bytes up", buf);
	human_bytes(json_integer_value(json_object_get(o, "bytes_down")), buf, sizeof buf);
	fprintf(out, "%-16s %s\n", "bytes down", buf);

	/* Whatever else the fs core reports, shown as is. */
	json_object_foreach(o, k, v) {
		if (!is_known_key(k))
			print_value(out, k, v);
	}
}

/* Resolves a refresh path to an absolute physical one even when the file
 * no longer exists locally (it may be gone from a stale cache). */
static int resolve_path(const char *path, char *out)
{
	if (realpath(path, out))
		return 0;
	char *copy = strdup(path);
	if (!copy)
		return -1;
	char *slash = strrchr(copy, '/');
	const char *base = slash ? slash + 1 : copy;
	const char *parent = slash ? (slash == copy ? "/" : copy) : ".";
	if (slash)
		*slash = '\0';
	char real[PATH_MAX];
	int rc = -1;
	if (*base && strcmp(base, ".") && strcmp(base, "..") && realpath(parent, real)) {
		int n = snprintf(out, PATH_MAX, "%s%s%s", real,
				 strcmp(real, "/") ? "/" : "", base);
		rc = n > 0 && n < PATH_MAX ? 0 : -1;
	}
	free(copy);
	return rc;
}

json_t *control_request(const struct control_target *t, const char *op,
			const char *rel, int *fdp, struct frame *f, char *err,
			size_t errlen)
{
	*fdp = -1;
	int fd = control_connect("sbfs", t, err, errlen);
	if (fd < 0)
		return NULL;
	struct frame_writer w;
	frame_writer_init(&w, fd);
	json_t *h = json_pack("{s:s}", "op", op);
	int rc = h ? frame_write_json(&w, FRAME_HEADER, h) : -ENOMEM;
	json_decref(h);
	if (rc == 0 && rel)
		rc = frame_write_str(&w, FRAME_CWD, rel);
	if (rc == 0)
		rc = frame_write(&w, FRAME_GO, NULL, 0);
	frame_writer_destroy(&w);
	if (rc == 0 && t->reply_timeout_s > 0) {
		struct timeval tv = {.tv_sec = t->reply_timeout_s};
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	}
	if (rc == 0)
		rc = frame_read(fd, f);
	json_t *reply = NULL;
	if (rc == -EAGAIN || rc == -EWOULDBLOCK) {
		snprintf(err, errlen,
			 "sbfs: the sbfs daemon for %s did not answer within %d s (is it stopped or stuck?)",
			 t->mount, t->reply_timeout_s);
	} else if (rc <= 0 || f->type != FRAME_JSON) {
		snprintf(err, errlen, "sbfs: the sbfs daemon for %s %s", t->mount,
			 rc < 0	  ? "sent a garbled reply (is it a different version?)"
			 : rc == 0 ? "closed the connection without answering"
				   : "answered with an unexpected message");
	} else {
		json_error_t jerr;
		reply = json_loadb(f->data ? f->data : "", f->len, 0, &jerr);
		if (!json_is_object(reply)) {
			snprintf(err, errlen,
				 "sbfs: the sbfs daemon for %s sent a reply that is not JSON",
				 t->mount);
		} else if (json_object_get(reply, "error")) {
			const char *e = json_string_value(json_object_get(reply, "error"));
			snprintf(err, errlen, "sbfs: %s", e ? e : "the daemon reported an error");
		} else {
			*fdp = fd;
			return reply;
		}
		json_decref(reply);
	}
	close(fd);
	return NULL;
}

int control_client_command(const char *mount, const char *op,
			   const char *path, bool json, FILE *out)
{
	char err[PATH_MAX * 2 + 256];
	char abspath[PATH_MAX];
	if (path) {
		if (resolve_path(path, abspath) < 0) {
			fprintf(stderr, "sbfs: %s: %s\n", path, strerror(errno));
			return 1;
		}
	}
	struct control_target t;
	if (control_find_mount("sbfs", mount, path ? abspath : NULL, &t, err,
			       sizeof err) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	const char *rest = "";
	if (path && !control_path_within(t.mount, abspath, &rest)) {
		fprintf(stderr, "sbfs: %s is not inside the mount %s\n", path, t.mount);
		return 1;
	}
	if (!strcmp(op, "status"))
		t.reply_timeout_s = CONTROL_STATUS_TIMEOUT_S;
	struct frame f = {0};
	int fd = -1;
	json_t *reply = control_request(&t, op, path ? rest : NULL, &fd, &f, err,
					sizeof err);
	int status = reply ? 0 : 1;
	if (!reply)
		fprintf(stderr, "%s\n", err);
	if (reply && json)
		fprintf(out, "%.*s\n", (int)f.len, f.data ? f.data : "");
	else if (reply && !strcmp(op, "status"))
		print_status(out, reply);
	json_decref(reply);
	frame_free(&f);
	if (fd >= 0)
		close(fd);
	return status;
}
