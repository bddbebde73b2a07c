/* The local backend against a real bubblewrap sandbox: exec streams and
 * codes, isolation, native file ops vs the shell fallbacks, capped reads,
 * symlink escapes, a sandbox killed from outside, destroy. */
#include "tests/unit/unit.h"
#include "backends/backend.h"
#include "tests/unit/local_sandbox.h"
#include "backends/shell_ops.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct buf { char d[65536]; size_t n; };
struct out2 { struct buf out, err; };

static int on_out(void *a, const char *d, size_t n)
{
	struct buf *b = &((struct out2 *)a)->out;
	n = n < sizeof(b->d) - 1 - b->n ? n : sizeof(b->d) - 1 - b->n;
	memcpy(b->d + b->n, d, n);
	b->n += n;
	b->d[b->n] = 0;
	return 0;
}

static int on_err(void *a, const char *d, size_t n)
{
	struct buf *b = &((struct out2 *)a)->err;
	n = n < sizeof(b->d) - 1 - b->n ? n : sizeof(b->d) - 1 - b->n;
	memcpy(b->d + b->n, d, n);
	b->n += n;
	b->d[b->n] = 0;
	return 0;
}

static int run(struct sb_backend *b, struct out2 *o, double timeout,
	       struct sb_exec_result *res, const char *script)
{
	const char *argv[] = {"sh", "-c", script, NULL};
	memset(o, 0, sizeof(*o));
	struct sb_exec_req req = {.argv = argv, .stdin_fd = -1, .timeout_s = timeout,
				  .on_stdout = on_out, .on_stderr = on_err,
				  .cb_arg = o, .cancel_fd = -1};
	return sb_exec(b, &req, res);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int tmpfile_with(const char *data, size_t n)
{
	char p[] = "/tmp/sbfs-test-XXXXXX";
	int fd = mkstemp(p);
	unlink(p);
	(void)!write(fd, data, n);
	return fd;
}

static int put(struct sb_backend *b, const char *path, int fd, off_t size,
	       mode_t mode)
{
	struct sb_upload u = {.path = path, .fd = fd, .size = size, .mode = mode,
			      .mtime = {.tv_nsec = UTIME_OMIT}};
	int rc = sb_write_file(b, &u);
	CHECK(!u.mtime_set);
	return rc;
}

/* The same file-op sequence, natively or through shell_ops. */
static void file_ops(struct sb_backend *b, const char *host_ws)
{
	struct out2 o;
	struct sb_exec_result res;
	const char *data = "hello\nworld\n";
	int fd = tmpfile_with(data, strlen(data));
	CHECK_INT(put(b, "/workspace/d1/d2/f.txt", fd, 12, 0640), 0);
	struct stat st;
	char *t = NULL;
	CHECK_INT(sb_stat(b, "/workspace/d1/d2/f.txt", &st, &t), 0);
	CHECK_INT(st.st_size, 12);
	CHECK_INT(st.st_mode & 07777, 0640);
	CHECK(S_ISREG(st.st_mode));

	/* an mtime asked for: given in the same call natively, which says so;
	 * the shell cannot */
	struct sb_upload u = {.path = "/workspace/d1/d2/m.txt", .fd = fd, .size = 12,
			      .mode = 0644, .mtime = {1500000000, 123456789}};
	CHECK_INT(sb_write_file(b, &u), 0);
	CHECK(u.mtime_set == !b->shell_only);
	CHECK_INT(sb_stat(b, "/workspace/d1/d2/m.txt", &st, NULL), 0);
	CHECK_INT(st.st_size, 12);
	if (u.mtime_set)
		CHECK(st.st_mtim.tv_sec == 1500000000 && st.st_mtim.tv_nsec == 123456789);
	CHECK_INT(sb_remove(b, "/workspace/d1/d2/m.txt", false), 0);
	CHECK(t == NULL);
	char hp[4200];
	snprintf(hp, sizeof(hp), "%s/d1/d2/f.txt", host_ws);
	CHECK(access(hp, F_OK) == 0);

	char rbuf[100];
	size_t got = 0;
	CHECK_INT(sb_read(b, "/workspace/d1/d2/f.txt", 0, 65536 > sizeof(rbuf) ? sizeof(rbuf) : 65536, rbuf, &got), 0);
	CHECK_MEM(rbuf, got, data, 12);
	CHECK_INT(sb_read(b, "/workspace/d1/d2/f.txt", 6, 3, rbuf, &got), 0);
	CHECK_MEM(rbuf, got, "wor", 3);

	CHECK_INT(sb_symlink(b, "d2/f.txt", "/workspace/d1/link"), 0);
	CHECK_INT(sb_symlink(b, "x", "/workspace/d1/link"), -EEXIST);
	CHECK_INT(sb_readlink(b, "/workspace/d1/link", &t), 0);
	CHECK(t && strcmp(t, "d2/f.txt") == 0);
	free(t);
	CHECK_INT(sb_readlink(b, "/workspace/d1/d2/f.txt", &t), -EINVAL);
	CHECK_INT(sb_mkdir(b, "/workspace/d1/sub", 0750), 0);
	CHECK_INT(sb_mkdir(b, "/workspace/d1/sub", 0750), -EEXIST);
	CHECK_INT(sb_mkdir(b, "/workspace/nope/sub", 0750), -ENOENT);
	CHECK_INT(sb_stat(b, "/workspace/missing", &st, NULL), -ENOENT);
	/* hostile name created in the guest, then listed */
	CHECK_INT(run(b, &o, 30, &res, "printf x > \"/workspace/d1/$(printf 'new\\nline')\"; : > '/workspace/d1/-rf $(x)'"), 0);

	struct sb_dirlist l = {0};
	CHECK_INT(sb_list_dir(b, "/workspace/d1", &l), 0);
	CHECK_INT(l.n, 5);
	bool saw_link = false, saw_nl = false, saw_dash = false;
	for (size_t i = 0; i < l.n; i++) {
		if (!strcmp(l.v[i].name, "link")) {
			saw_link = S_ISLNK(l.v[i].st.st_mode) && l.v[i].link_target &&
				   !strcmp(l.v[i].link_target, "d2/f.txt");
		}
		if (!strcmp(l.v[i].name, "new\nline"))
			saw_nl = l.v[i].st.st_size == 1;
		if (!strcmp(l.v[i].name, "-rf $(x)"))
			saw_dash = true;
		if (!strcmp(l.v[i].name, "sub"))
			CHECK_INT(l.v[i].st.st_mode & 07777, 0750);
	}
	CHECK(saw_link && saw_nl && saw_dash);
	sb_dirlist_free(&l);
	CHECK_INT(sb_list_dir(b, "/workspace/d1/sub", &l), 0);
	CHECK_INT(l.n, 0);
	CHECK_INT(sb_list_dir(b, "/workspace/nothere", &l), -ENOENT);
	CHECK_INT(sb_list_dir(b, "/workspace/d1/d2/f.txt", &l), -ENOTDIR);

	CHECK_INT(sb_chmod(b, "/workspace/d1/d2/f.txt", 0600), 0);
	CHECK_INT(sb_truncate(b, "/workspace/d1/d2/f.txt", 3), 0);
	struct timespec ts[2] = {{1000000000, 0}, {1200000000, 0}};
	CHECK_INT(sb_utimens(b, "/workspace/d1/d2/f.txt", ts), 0);
	CHECK_INT(sb_stat(b, "/workspace/d1/d2/f.txt", &st, NULL), 0);
	CHECK_INT(st.st_mode & 07777, 0600);
	CHECK_INT(st.st_size, 3);
	CHECK_INT(st.st_mtim.tv_sec, 1200000000);
	CHECK_INT(st.st_atim.tv_sec, 1000000000);

	/* link gives the new name's attributes: the same file, two names;
	 * natively without a stat call of its own */
	struct stat lst, ost;
	uint64_t stats0 = atomic_load(&b->counters.calls[SB_CALL_STAT]);
	CHECK_INT(sb_link(b, "/workspace/d1/d2/f.txt", "/workspace/d1/f2.txt", &lst, &t), 0);
	uint64_t link_stats = atomic_load(&b->counters.calls[SB_CALL_STAT]) - stats0;
	CHECK_INT(link_stats, b->shell_only ? 1 : 0);
	CHECK(t == NULL);
	CHECK_INT(sb_stat(b, "/workspace/d1/d2/f.txt", &ost, NULL), 0);
	CHECK(lst.st_ino == ost.st_ino && lst.st_dev == ost.st_dev);
	CHECK_INT(lst.st_nlink, 2);
	CHECK_INT(lst.st_uid, ost.st_uid);
	CHECK_INT(lst.st_size, 3);
	CHECK_INT(sb_link(b, "/workspace/d1/d2/f.txt", "/workspace/d1/f2.txt", &lst, NULL), -EEXIST);
	CHECK_INT(sb_link(b, "/workspace/d1/link", "/workspace/d1/link2", &lst, &t), 0);
	CHECK(S_ISLNK(lst.st_mode) && t && strcmp(t, "d2/f.txt") == 0);
	free(t);
	CHECK_INT(sb_remove(b, "/workspace/d1/link2", false), 0);
	CHECK_INT(sb_remove(b, "/workspace/d1/f2.txt", false), 0);

	CHECK_INT(sb_rename(b, "/workspace/d1/d2/f.txt", "/workspace/d1/g.txt", false), 0);
	CHECK_INT(put(b, "/workspace/d1/h.txt", fd, 5, 0644), 0);
	CHECK_INT(sb_rename(b, "/workspace/d1/h.txt", "/workspace/d1/g.txt", true), -EEXIST);
	CHECK_INT(sb_rename(b, "/workspace/d1/h.txt", "/workspace/d1/g.txt", false), 0);
	CHECK_INT(sb_stat(b, "/workspace/d1/g.txt", &st, NULL), 0);
	CHECK_INT(st.st_size, 5);
	CHECK_INT(sb_remove(b, "/workspace/d1", true), -ENOTEMPTY);
	CHECK_INT(sb_remove(b, "/workspace/d1/g.txt", true), -ENOTDIR);
	CHECK_INT(sb_remove(b, "/workspace/d1/sub", false), -EISDIR);
	CHECK_INT(sb_remove(b, "/workspace/d1/g.txt", false), 0);
	CHECK_INT(sb_remove(b, "/workspace/d1/sub", true), 0);
	CHECK_INT(sb_remove(b, "/workspace/d1/g.txt", false), -ENOENT);

	struct statvfs sv;
	CHECK_INT(sb_statfs(b, "/workspace", &sv), 0);
	CHECK(sv.f_blocks > 0);

	/* reads of non-regular files: refused, promptly */
	CHECK_INT(run(b, &o, 30, &res, "mkfifo /workspace/fifo"), 0);
	double t0 = now();
	CHECK_INT(sb_read(b, "/workspace/fifo", 0, 65536, rbuf, &got), -EINVAL);
	CHECK(now() - t0 < 10);
	CHECK_INT(sb_read(b, "/dev/zero", 0, 65536, rbuf, &got), -EINVAL);
	CHECK_INT(sb_read(b, "/workspace/d1", 0, 65536, rbuf, &got), -EISDIR);
	CHECK_INT(sb_read(b, "/workspace/none", 0, 65536, rbuf, &got), -ENOENT);
	CHECK_INT(sb_truncate(b, "/workspace/fifo", 0), -EINVAL);

	/* a planted link must not let a write escape the workspace */
	CHECK_INT(run(b, &o, 30, &res, "ln -s /etc /workspace/evil; ln -s /etc/sbfs-x /workspace/evil2"), 0);
	CHECK(put(b, "/workspace/evil/sbfs-x", fd, 12, 0644) < 0);
	CHECK(put(b, "/workspace/evil2", fd, 12, 0644) < 0);
	CHECK(access("/etc/sbfs-x", F_OK) != 0);
	close(fd);
}

/* The first child of pid (from /proc/PID/task/PID/children), or 0. */
static pid_t first_child(pid_t pid)
{
	char path[96];
	snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
	FILE *f = fopen(path, "re");
	int c = 0;
	if (f) {
		if (fscanf(f, "%d", &c) != 1)
			c = 0;
		fclose(f);
	}
	return (pid_t)c;
}

static bool write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	if (!f)
		return false;
	bool ok = fputs(text, f) >= 0;
	return fclose(f) == 0 && ok;
}

/* A process gone, or a zombie (gone but for its parent's wait). */
static bool process_gone(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return true;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *rp = strrchr(buf, ')');
	return rp && (rp[2] == 'Z' || rp[2] == 'X');
}

/* destroy returns once every process of the sandbox is gone, not once
 * bwrap is: one of them is held in a frozen cgroup (v1 freezer, root
 * only), so the sandbox's pid 1 cannot finish dying until it is thawed,
 * a second after the destroy began. */
static void test_destroy_waits_for_every_process(const char *root)
{
	const char *fz = "/sys/fs/cgroup/freezer";
	if (geteuid() != 0 || access(fz, W_OK) != 0) {
		fprintf(stderr, "local_backend: no cgroup v1 freezer to write: destroy's wait not tested\n");
		return;
	}
	struct sb_backend *b = local_sandbox(root, false);
	CHECK(b != NULL);
	if (!b)
		return;
	/* our only bwrap child: the others were destroyed before */
	pid_t bwrap = 0;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "pgrep -P %d -x bwrap", (int)getpid());
	FILE *p = popen(cmd, "r");
	if (p) {
		int v;
		if (fscanf(p, "%d", &v) == 1)
			bwrap = v;
		pclose(p);
	}
	pid_t init = bwrap > 0 ? first_child(bwrap) : 0;
	pid_t shell = init > 0 ? first_child(init) : 0;
	CHECK(shell > 0);
	char cg[128], file[200], pidtext[32];
	snprintf(cg, sizeof cg, "%s/sbfs-unit-%d", fz, (int)getpid());
	CHECK(mkdir(cg, 0755) == 0);
	snprintf(pidtext, sizeof pidtext, "%d", (int)shell);
	snprintf(file, sizeof file, "%s/tasks", cg);
	CHECK(shell > 0 && write_text(file, pidtext));
	snprintf(file, sizeof file, "%s/freezer.state", cg);
	CHECK(write_text(file, "FROZEN"));
	pid_t thaw = fork();
	if (thaw == 0) {
		sleep(1);
		_exit(write_text(file, "THAWED") ? 0 : 1);
	}
	CHECK_INT(sb_backend_destroy(b), 0);
	/* no wait here: destroyed means gone */
	CHECK(process_gone(shell));
	CHECK(process_gone(init));
	int ws = 0;
	waitpid(thaw, &ws, 0);
	CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	write_text(file, "THAWED");
	CHECK(rmdir(cg) == 0);
}

/* What a read handed on, and a change made to the host file at the
 * moment the read reported its identity: before any byte of it was read. */
struct seen {
	char ident[SB_IDENT_MAX];
	off_t size;
	off_t past;    /* the end of the furthest byte handed on */
	bool wrong;    /* a byte that is not of the first version */
	char want;     /* what every byte of the first version is */
	const char *host;  /* the file, on the host */
	enum { KEEP, GROW, REWRITE, REPLACE } change;
};

static int seen_ident(void *arg, const char *ident, off_t size)
{
	struct seen *v = arg;
	snprintf(v->ident, sizeof v->ident, "%s", ident);
	v->size = size;
	if (v->change == KEEP)
		return 0;
	char other[4300];
	snprintf(other, sizeof other, "%s.new", v->host);
	int fd = v->change == GROW ? open(v->host, O_WRONLY | O_APPEND)
	       : v->change == REWRITE ? open(v->host, O_WRONLY)
	       : open(other, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	static char more[4 << 20];
	memset(more, 'N', sizeof more);
	size_t n = v->change == GROW ? sizeof more : (size_t)size;
	CHECK_INT(write(fd, more, n), (ssize_t)n);
	close(fd);
	if (v->change == REPLACE)
		CHECK_INT(rename(other, v->host), 0);
	return 0;
}

static int seen_data(void *arg, off_t off, const char *d, size_t n)
{
	struct seen *v = arg;
	if (off + (off_t)n > v->past)
		v->past = off + (off_t)n;
	for (size_t i = 0; i < n; i++)
		v->wrong |= d[i] != v->want;
	return 0;
}

static int read_seen(struct sb_backend *b, const char *path, size_t len,
		     struct seen *v, size_t *got)
{
	struct sb_read_sink sink = {.ident = seen_ident, .data = seen_data, .arg = v};
	return sb_read_stream(b, path, 0, len, &sink, got);
}

/* A read of a FIFO a writer waits on must not open it: that would let
 * the writer's open return (and its write fail). The writer is a child
 * of ours on the host, blocked in open(2) until a reader comes; after the
 * read, we are the first reader, and get its byte. */
static void fifo_left_closed(struct sb_backend *b, const char *host_ws)
{
	char fifo[4300];
	snprintf(fifo, sizeof fifo, "%s/pipe", host_ws);
	pid_t w = fork();
	if (w == 0) {
		int fd = open(fifo, O_WRONLY);
		_exit(fd >= 0 && write(fd, "x", 1) == 1 ? 0 : 1);
	}
	CHECK(w > 0);
	/* until it waits in open(2) ("wait_for_partner"), where the kernel
	 * tells; else the read may come first, which proves nothing */
	char wchan[600], state[64] = "";
	snprintf(wchan, sizeof wchan, "/proc/%d/wchan", (int)w);
	for (double t0 = now(); now() - t0 < 10 && strcmp(state, "wait_for_partner");) {
		FILE *f = fopen(wchan, "r");
		if (f) {
			if (!fgets(state, sizeof state, f))
				state[0] = '\0';
			fclose(f);
		}
		usleep(1000);
	}
	char rbuf[16];
	size_t got = 0;
	CHECK_INT(sb_read(b, "/workspace/pipe", 0, 65536, rbuf, &got), -EINVAL);
	/* not blocking: a writer released before would have gone */
	int fd = open(fifo, O_RDONLY | O_NONBLOCK);
	CHECK(fd >= 0);
	struct pollfd pf = {.fd = fd, .events = POLLIN};
	CHECK_INT(poll(&pf, 1, 10000), 1);
	char c = 0;
	CHECK_INT(read(fd, &c, 1), 1);
	CHECK(c == 'x');
	close(fd);
	int st = -1;
	CHECK_INT(waitpid(w, &st, 0), w);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The reads that must never bring what they should not: through a
 * symlink to a device or out of the workspace, past a growing file's
 * size, or bytes of two versions. In the guest or natively, the same
 * answers; natively without a command in the guest. */
static void read_guards(struct sb_backend *b, const char *host_ws,
			const char *outside)
{
	struct out2 o;
	struct sb_exec_result res;
	char rbuf[65536];
	size_t got = 0;
	char cmd[1200];
	snprintf(cmd, sizeof cmd,
		 "head -c 100000 /dev/zero | tr '\\0' A > /workspace/r1; "
		 "ln -s /dev/zero /workspace/zero; mkfifo /workspace/pipe; "
		 "ln -s %s/secret /workspace/esc; ln -s %s /workspace/escdir; "
		 "mkdir /workspace/rd", outside, outside);
	CHECK_INT(run(b, &o, 30, &res, cmd), 0);
	CHECK_INT(res.exit_code, 0);

	uint64_t reads0 = atomic_load(&b->counters.calls[SB_CALL_READ]);
	uint64_t shell0 = atomic_load(&b->counters.shell_fallbacks);
	CHECK_INT(sb_read(b, "/workspace/r1", 99990, 65536, rbuf, &got), 0);
	CHECK_MEM(rbuf, got, "AAAAAAAAAA", 10);
	/* one call each, as the latency injected per call counts it; the
	 * native one runs nothing in the guest */
	CHECK_INT(atomic_load(&b->counters.calls[SB_CALL_READ]) - reads0, 1);
	CHECK_INT(atomic_load(&b->counters.shell_fallbacks) - shell0,
		  b->shell_only ? 1 : 0);

	double t0 = now();
	CHECK_INT(sb_read(b, "/workspace/pipe", 0, 65536, rbuf, &got), -EINVAL);
	CHECK(now() - t0 < 10);
	fifo_left_closed(b, host_ws);
	CHECK_INT(sb_read(b, "/workspace/zero", 0, 65536, rbuf, &got), -EINVAL);
	CHECK_INT(got, 0);
	CHECK_INT(sb_read(b, "/workspace/rd", 0, 65536, rbuf, &got), -EISDIR);
	CHECK_INT(sb_read(b, "/workspace/r1/x", 0, 65536, rbuf, &got), -ENOTDIR);
	/* the host's files outside the workspace are not the sandbox's: to
	 * it the link dangles */
	CHECK_INT(sb_read(b, "/workspace/esc", 0, 65536, rbuf, &got), -EINVAL);
	CHECK_INT(got, 0);
	CHECK_INT(sb_read(b, "/workspace/escdir/secret", 0, 65536, rbuf, &got), -ENOENT);
	CHECK_INT(got, 0);
	if (b->shell_only)
		return; /* the seams below act before the guest's first byte */

	/* grows by 4 MiB after its identity: nothing past the size that
	 * identity gave, and the read fails as changed */
	char host[4300];
	snprintf(host, sizeof host, "%s/r1", host_ws);
	struct seen v = {.want = 'A', .host = host, .change = GROW};
	CHECK_INT(read_seen(b, "/workspace/r1", 64 << 20, &v, &got), -EAGAIN);
	CHECK_INT(v.size, 100000);
	CHECK(v.past <= 100000);
	CHECK(!v.wrong);
	CHECK_INT(got, 0);

	/* rewritten in place between its identity and its bytes: -EAGAIN,
	 * never the new bytes as the old version's */
	CHECK_INT(run(b, &o, 30, &res, "head -c 100000 /dev/zero | tr '\\0' A > /workspace/r1"), 0);
	struct seen w = {.want = 'A', .host = host, .change = REWRITE};
	int rc = read_seen(b, "/workspace/r1", 1 << 20, &w, &got);
	CHECK_INT(rc, -EAGAIN);
	CHECK_INT(got, 0);

	/* replaced by a rename between the stat and the read, once the read
	 * has opened it: the file it holds lost its name (its ctime moved),
	 * so the read fails as changed; the next one is of the new file,
	 * under another identity */
	CHECK_INT(run(b, &o, 30, &res, "head -c 100000 /dev/zero | tr '\\0' A > /workspace/r1"), 0);
	struct stat st;
	CHECK_INT(sb_stat(b, "/workspace/r1", &st, NULL), 0);
	struct seen x = {.want = 'A', .host = host, .change = REPLACE};
	CHECK_INT(read_seen(b, "/workspace/r1", 1 << 20, &x, &got), -EAGAIN);
	CHECK_INT(got, 0);
	CHECK_INT(strtoull(strchr(x.ident, ' ') + 1, NULL, 10), st.st_ino);
	struct seen y = {.want = 'N'};
	CHECK_INT(read_seen(b, "/workspace/r1", 1 << 20, &y, &got), 0);
	CHECK(!y.wrong && got == 100000);
	CHECK(strtoull(strchr(y.ident, ' ') + 1, NULL, 10) != st.st_ino);
}

int main(void)
{
	char root[] = "/tmp/sbfs-local-test-XXXXXX";
	CHECK(mkdtemp(root) != NULL);
	setenv("SBFS_TEST_SECRET", "leak", 1);

	struct sb_spec bad;
	sb_spec_init(&bad);
	bad.options = calloc(2, sizeof(char *));
	bad.options[0] = strdup("bogus=1");
	char err[512] = "";
	CHECK(sb_backend_create(sb_backend_find("local"), &bad, false, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "unknown option 'bogus'") != NULL);
	sb_spec_init(&bad);
	bad.allow_egress_to = calloc(2, sizeof(char *));
	bad.allow_egress_to[0] = strdup("example.com");
	CHECK(sb_backend_create(sb_backend_find("local"), &bad, false, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "allow_egress_to") != NULL);

	struct sb_backend *b = local_sandbox(root, false);
	CHECK(b != NULL);
	if (!b)
		return unit_done("local_backend");
	/* the id is the sandbox name; its workspace is <local_root>/<id> */
	char ws[600];
	snprintf(ws, sizeof(ws), "%s/%s", root, b->id);
	struct out2 o;
	struct sb_exec_result res;
	CHECK_INT(run(b, &o, 30, &res, "echo out; echo err >&2; exit 3"), 0);
	CHECK(strcmp(o.out.d, "out\n") == 0);
	CHECK(strcmp(o.err.d, "err\n") == 0);
	CHECK_INT(res.exit_code, 3);
	CHECK(!res.timed_out);

	double t0 = now();
	CHECK_INT(run(b, &o, 0.5, &res, "sleep 30"), 0);
	CHECK(res.timed_out);
	CHECK(now() - t0 < 5);

	CHECK_INT(run(b, &o, 30, &res, "echo \"[$SBFS_TEST_SECRET]\"; pwd; ls /home 2>&1; cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '"), 0);
	CHECK(strstr(o.out.d, "[]\n/workspace\n") == o.out.d);
	CHECK(strstr(o.out.d, "No such file") != NULL);
	CHECK(strstr(o.out.d, "\nlo\n") != NULL);
	CHECK(strstr(o.out.d, "eth") == NULL);

	const char *nf[] = {"no-such-command-sbfs", NULL};
	struct sb_exec_req req = {.argv = nf, .stdin_fd = -1, .on_stderr = on_err,
				  .cb_arg = &o, .cancel_fd = -1};
	memset(&o, 0, sizeof(o));
	CHECK_INT(sb_exec(b, &req, &res), 0);
	CHECK_INT(res.exit_code, 127);

	int in = tmpfile_with("abc", 3);
	lseek(in, 0, SEEK_SET);
	const char *cat[] = {"cat", NULL};
	struct sb_exec_req creq = {.argv = cat, .stdin_fd = in, .on_stdout = on_out,
				   .cb_arg = &o, .cancel_fd = -1};
	memset(&o, 0, sizeof(o));
	CHECK_INT(sb_exec(b, &creq, &res), 0);
	CHECK(strcmp(o.out.d, "abc") == 0);
	close(in);

	CHECK_INT(run(b, &o, 30, &res, "mount -o remount,rw,bind /usr 2>/dev/null && echo BAD; touch /usr/sbfs-x 2>/dev/null && echo BAD2; kill -9 $$"), 0);
	CHECK(strstr(o.out.d, "BAD") == NULL);
	CHECK_INT(res.term_signal, 9);

	file_ops(b, ws);
	char secret[700];
	snprintf(secret, sizeof secret, "%s/secret", root);
	FILE *sf = fopen(secret, "w");
	CHECK(sf && fputs("host secret\n", sf) >= 0);
	if (sf)
		fclose(sf);
	read_guards(b, ws, root);

	/* the same through the shell fallbacks */
	struct sb_backend *s = local_sandbox(root, true);
	CHECK(s != NULL);
	if (s) {
		char sws[600];
		snprintf(sws, sizeof(sws), "%s/%s", root, s->id);
		file_ops(s, sws);
		read_guards(s, sws, root);
		CHECK(atomic_load(&s->counters.shell_fallbacks) > 20);
		CHECK_INT(sb_backend_destroy(s), 0);
		CHECK(access(sws, F_OK) != 0);
	}

	/* killed from outside: calls fail fast, exec in flight returns */
	char pidfile[700];
	snprintf(pidfile, sizeof(pidfile), "%s/box", ws);
	pid_t box = 0;
	{
		/* bwrap is our only child with the sandbox's workspace bound */
		char cmd[600];
		snprintf(cmd, sizeof(cmd), "pgrep -P %d -x bwrap", (int)getpid());
		FILE *p = popen(cmd, "r");
		if (p) {
			int v;
			if (fscanf(p, "%d", &v) == 1)
				box = v;
			pclose(p);
		}
	}
	CHECK(box > 0);
	if (box > 0) {
		pid_t killer = fork();
		if (killer == 0) {
			usleep(300000);
			kill(box, SIGKILL);
			_exit(0);
		}
		t0 = now();
		int rc = run(b, &o, 60, &res, "sleep 50");
		CHECK_INT(rc, -EIO);
		CHECK(res.sandbox_terminated);
		CHECK(now() - t0 < 5);
		waitpid(killer, NULL, 0);
		usleep(100000);
		struct stat st;
		CHECK_INT(sb_stat(b, "/workspace", &st, NULL), -EIO);
		CHECK(sb_backend_is_dead(b));
		CHECK(strstr(b->dead_reason, "sandbox") != NULL);
	}
	CHECK_INT(sb_backend_destroy(b), 0);
	CHECK(access(ws, F_OK) != 0);

	/* lifetime */
	struct sb_spec spec;
	sb_spec_init(&spec);
	spec.sandbox_timeout_s = 1;
	spec.options = calloc(2, sizeof(char *));
	snprintf(pidfile, sizeof(pidfile), "local_root=%s", root);
	spec.options[0] = strdup(pidfile);
	b = sb_backend_create(sb_backend_find("local"), &spec, false, err, sizeof(err));
	CHECK(b != NULL);
	if (b) {
		usleep(1600000);
		CHECK(sb_backend_is_dead(b));
		CHECK(strstr(b->dead_reason, "lifetime (1 s) ended") != NULL);
		CHECK_INT(sb_backend_destroy(b), 0);
	}
	test_destroy_waits_for_every_process(root);
	unlink(secret);
	rmdir(root);
	return unit_done("local_backend");
}
