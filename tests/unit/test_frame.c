/* The control protocol: the frame codec over real sockets, the mountinfo
 * helpers, and a real control server driven by a fake backend. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control/client.h"
#include "control/frame.h"
#include "control/server.h"
#include "tests/unit/unit.h"

static void pair(int sv[2])
{
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
		perror("socketpair");
		exit(2);
	}
}

static void raw_header(unsigned char *h, uint32_t total, char type)
{
	h[0] = (unsigned char)(total >> 24);
	h[1] = (unsigned char)(total >> 16);
	h[2] = (unsigned char)(total >> 8);
	h[3] = (unsigned char)total;
	h[4] = (unsigned char)type;
}

/* ---- codec ---- */

static void test_round_trip(void)
{
	int sv[2];
	pair(sv);
	struct frame_writer w;
	frame_writer_init(&w, sv[0]);
	const char bin[] = {'a', '\0', (char)0xff, '\n'};
	CHECK_INT(frame_write(&w, FRAME_ARG, bin, sizeof bin), 0);
	CHECK_INT(frame_write(&w, FRAME_GO, NULL, 0), 0);
	CHECK_INT(frame_write_str(&w, FRAME_CWD, ""), 0);
	CHECK_INT(frame_write(&w, FRAME_STDOUT, "x", FRAME_MAX_PAYLOAD + 1), -EMSGSIZE);

	struct frame f;
	CHECK_INT(frame_read(sv[1], &f), 1);
	CHECK_INT(f.type, 'A');
	CHECK_MEM(f.data, f.len, bin, sizeof bin);
	frame_free(&f);
	CHECK_INT(frame_read(sv[1], &f), 1);
	CHECK_INT(f.type, 'G');
	CHECK_INT(f.len, 0);
	CHECK(f.data == NULL);
	CHECK_INT(frame_read(sv[1], &f), 1);
	CHECK_INT(f.type, 'C');
	CHECK_INT(f.len, 0);
	frame_free(&f);

	/* the largest payload allowed goes through whole, from a thread so
	 * the socket buffer cannot deadlock us */
	char *big = malloc(FRAME_MAX_PAYLOAD);
	for (size_t i = 0; i < FRAME_MAX_PAYLOAD; i++)
		big[i] = (char)(i * 7);
	pid_t pid = fork();
	if (pid == 0) {
		_exit(frame_write(&w, FRAME_STDIN, big, FRAME_MAX_PAYLOAD) ? 1 : 0);
	}
	CHECK_INT(frame_read(sv[1], &f), 1);
	CHECK_MEM(f.data, f.len, big, FRAME_MAX_PAYLOAD);
	frame_free(&f);
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	free(big);

	close(sv[0]);
	CHECK_INT(frame_read(sv[1], &f), 0); /* clean end of stream */
	close(sv[1]);
	frame_writer_destroy(&w);
}

struct dribble {
	int fd;
	const unsigned char *p;
	size_t len;
};

static void *dribble_main(void *arg)
{
	struct dribble *d = arg;
	for (size_t i = 0; i < d->len; i++) {
		if (write(d->fd, d->p + i, 1) != 1)
			break;
		if (i % 3 == 0)
			usleep(200);
	}
	return NULL;
}

static void test_split_reads(void)
{
	int sv[2];
	pair(sv);
	unsigned char buf[64];
	raw_header(buf, 6, 'O');
	memcpy(buf + 5, "hello", 5);
	raw_header(buf + 10, 1, 'E');
	struct dribble d = {sv[0], buf, 15};
	pthread_t t;
	pthread_create(&t, NULL, dribble_main, &d);
	struct frame f;
	CHECK_INT(frame_read(sv[1], &f), 1);
	CHECK_INT(f.type, 'O');
	CHECK_MEM(f.data, f.len, "hello", 5);
	frame_free(&f);
	CHECK_INT(frame_read(sv[1], &f), 1);
	CHECK_INT(f.type, 'E');
	pthread_join(t, NULL);
	close(sv[0]);
	close(sv[1]);
}

static void test_bad_streams(void)
{
	struct frame f;
	int sv[2];
	unsigned char h[5];

	/* a hostile length is refused from the header alone */
	pair(sv);
	raw_header(h, 0xffffffffu, 'O');
	CHECK_INT(write(sv[0], h, 5), 5);
	CHECK_INT(frame_read(sv[1], &f), -EPROTO);
	CHECK(f.data == NULL);
	close(sv[0]);
	close(sv[1]);

	pair(sv);
	raw_header(h, FRAME_MAX_PAYLOAD + 2, 'O');
	CHECK_INT(write(sv[0], h, 5), 5);
	CHECK_INT(frame_read(sv[1], &f), -EPROTO);
	close(sv[0]);
	close(sv[1]);

	/* length 0 cannot even hold the type byte */
	pair(sv);
	raw_header(h, 0, 'O');
	CHECK_INT(write(sv[0], h, 4), 4);
	close(sv[0]);
	CHECK_INT(frame_read(sv[1], &f), -EPROTO);
	close(sv[1]);

	/* truncated header */
	pair(sv);
	CHECK_INT(write(sv[0], "\0\0", 2), 2);
	close(sv[0]);
	CHECK_INT(frame_read(sv[1], &f), -EPROTO);
	close(sv[1]);

	/* truncated payload */
	pair(sv);
	raw_header(h, 11, 'O');
	CHECK_INT(write(sv[0], h, 5), 5);
	CHECK_INT(write(sv[0], "abc", 3), 3);
	close(sv[0]);
	CHECK_INT(frame_read(sv[1], &f), -EPROTO);
	CHECK(f.data == NULL);
	close(sv[1]);
}

struct hammer {
	struct frame_writer *w;
	char type;
};

static void *hammer_main(void *arg)
{
	struct hammer *h = arg;
	char buf[3000];
	for (int i = 0; i < 300; i++) {
		size_t n = (size_t)(i * 37) % sizeof buf;
		memset(buf, h->type, n);
		if (frame_write(h->w, (uint8_t)h->type, buf, n) < 0)
			break;
	}
	return NULL;
}

/* Two threads on one writer never interleave inside a frame. */
static void test_concurrent_writers(void)
{
	int sv[2];
	pair(sv);
	struct frame_writer w;
	frame_writer_init(&w, sv[0]);
	struct hammer a = {&w, 'O'}, b = {&w, 'R'};
	pthread_t ta, tb;
	pthread_create(&ta, NULL, hammer_main, &a);
	pthread_create(&tb, NULL, hammer_main, &b);
	int count = 0, bad = 0;
	for (int i = 0; i < 600; i++) {
		struct frame f;
		if (frame_read(sv[1], &f) != 1) {
			bad++;
			break;
		}
		for (size_t k = 0; k < f.len; k++)
			if (f.data[k] != (char)f.type)
				bad++;
		count++;
		frame_free(&f);
	}
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	CHECK_INT(count, 600);
	CHECK_INT(bad, 0);
	frame_writer_destroy(&w);
	close(sv[0]);
	close(sv[1]);
}

/* ---- client helpers ---- */

static void test_mountinfo(void)
{
	char s[] = "/home/a\\040b\\134c\\011";
	control_mountinfo_unescape(s);
	CHECK(!strcmp(s, "/home/a b\\c\t"));

	const char *rest;
	CHECK(control_path_within("/m", "/m", &rest) && !strcmp(rest, ""));
	CHECK(control_path_within("/m", "/m/a/b", &rest) && !strcmp(rest, "a/b"));
	CHECK(!control_path_within("/m", "/mm/a", &rest));
	CHECK(control_path_within("/", "/x", &rest) && !strcmp(rest, "x"));

	const char mi[] =
		"22 1 0:21 / / rw - ext4 /dev/sda rw\n"
		"30 22 0:40 / /home/u/my\\040box rw,nosuid shared:5 - fuse.sbfs sbfs:/run/sbfs/a\\040b.sock rw\n"
		"31 30 0:41 / /home/u/my\\040box/inner rw - fuse.sbfs sbfs:/run/sbfs/in.sock rw\n"
		"32 22 0:42 / /home/u/other rw - fuse.sshfs x rw\n"
		"33 30 0:43 / /home/u/my\\040box/tmp rw - tmpfs tmpfs rw\n"
		"34 33 0:44 / /home/u/my\\040box/tmp/deep rw - fuse.sbfs sbfs:/run/sbfs/deep.sock rw\n";
	FILE *f = fmemopen((void *)mi, sizeof mi - 1, "r");
	char out[256], src[256];
	CHECK_INT(control_mountinfo_find(f, "/home/u/my box/src", out, sizeof out, src,
					 sizeof src), 0);
	CHECK(!strcmp(out, "/home/u/my box"));
	CHECK(!strcmp(src, "sbfs:/run/sbfs/a b.sock"));
	rewind(f);
	CHECK_INT(control_mountinfo_find(f, "/home/u/my box/inner/x", out, sizeof out, src,
					 sizeof src), 0);
	CHECK(!strcmp(out, "/home/u/my box/inner"));
	CHECK(!strcmp(src, "sbfs:/run/sbfs/in.sock"));
	rewind(f);
	CHECK_INT(control_mountinfo_find(f, "/home/u/other", out, sizeof out, NULL, 0), -1);
	rewind(f);
	CHECK_INT(control_mountinfo_find(f, "/home/u/my boxes", out, sizeof out, NULL, 0), -1);
	/* a folder mounted over part of an sbfs mount is not in it... */
	rewind(f);
	CHECK_INT(control_mountinfo_find(f, "/home/u/my box/tmp/x", out, sizeof out, NULL, 0),
		  -1);
	/* ...but an sbfs mount inside that folder is its own */
	rewind(f);
	CHECK_INT(control_mountinfo_find(f, "/home/u/my box/tmp/deep", out, sizeof out, src,
					 sizeof src), 0);
	CHECK(!strcmp(out, "/home/u/my box/tmp/deep"));
	CHECK(!strcmp(src, "sbfs:/run/sbfs/deep.sock"));
	/* the daemon's question: is this folder anywhere under an sbfs mount? */
	rewind(f);
	CHECK_INT(control_mountinfo_sbfs_ancestor(f, "/home/u/my box/tmp/x", out, sizeof out),
		  0);
	CHECK(!strcmp(out, "/home/u/my box"));
	rewind(f);
	CHECK_INT(control_mountinfo_sbfs_ancestor(f, "/home/u/other/x", out, sizeof out), -1);
	fclose(f);
}

/* ---- a fake backend ---- */

static atomic_int cancelled_count;

static void say(const struct sb_exec_req *req, const char *s)
{
	if (req->on_stdout)
		req->on_stdout(req->cb_arg, s, strlen(s));
}

static int fake_exec(struct sb_backend *b, const struct sb_exec_req *req,
		     struct sb_exec_result *res)
{
	const char *cmd = req->argv[0];
	char line[8192];
	if (!strcmp(cmd, "echo")) {
		for (size_t i = 1; req->argv[i]; i++) {
			say(req, req->argv[i]);
			say(req, req->argv[i + 1] ? " " : "\n");
		}
		snprintf(line, sizeof line, "cwd=%s\n", req->cwd);
		say(req, line);
		for (size_t i = 0; req->env && req->env[i]; i++) {
			snprintf(line, sizeof line, "env=%s\n", req->env[i]);
			say(req, line);
		}
		res->exit_code = 0;
	} else if (!strcmp(cmd, "cat")) {
		ssize_t n;
		while (req->stdin_fd >= 0 && (n = read(req->stdin_fd, line, sizeof line)) > 0)
			req->on_stdout(req->cb_arg, line, (size_t)n);
	} else if (!strcmp(cmd, "argc")) {
		size_t n = 0;
		while (req->argv[n + 1])
			n++;
		snprintf(line, sizeof line, "%zu\n", n);
		say(req, line);
	} else if (!strcmp(cmd, "exit")) {
		req->on_stderr(req->cb_arg, "err\n", 4);
		res->exit_code = atoi(req->argv[1]);
	} else if (!strcmp(cmd, "big")) {
		size_t total = 3u << 20;
		char *p = malloc(total);
		for (size_t i = 0; i < total; i++)
			p[i] = (char)(i % 251);
		int rc = req->on_stdout(req->cb_arg, p, total);
		free(p);
		if (rc < 0)
			return rc;
	} else if (!strcmp(cmd, "sleep")) {
		struct pollfd pf = {.fd = req->cancel_fd, .events = POLLIN};
		int ms = req->timeout_s > 0 ? (int)(req->timeout_s * 1000) : 10000;
		if (poll(&pf, 1, ms) == 1) {
			res->cancelled = true;
			res->term_signal = SIGKILL;
			atomic_fetch_add(&cancelled_count, 1);
		} else if (req->timeout_s > 0) {
			res->timed_out = true;
			res->term_signal = SIGKILL;
		}
	} else if (!strcmp(cmd, "die")) {
		return sb_backend_fail(b, "fake sandbox vanished");
	} else {
		res->exit_code = 127;
	}
	return 0;
}

static int fake_create(struct sb_backend *b, const struct sb_spec *s)
{
	(void)b;
	(void)s;
	return 0;
}

static int fake_destroy(struct sb_backend *b)
{
	(void)b;
	return 0;
}

static const struct sb_backend_ops fake_ops = {
	.name = "fake",
	.create = fake_create,
	.exec = fake_exec,
	.destroy = fake_destroy,
};

static atomic_int flushes, invalidations;
static atomic_bool flush_fails;

static int hook_flush(void *arg, char *msg, size_t msglen)
{
	(void)arg;
	atomic_fetch_add(&flushes, 1);
	if (atomic_load(&flush_fails)) {
		snprintf(msg, msglen, "disk on fire");
		return -EIO;
	}
	return 0;
}

static void hook_invalidate(void *arg, const char *rel)
{
	(void)arg;
	(void)rel;
	atomic_fetch_add(&invalidations, 1);
}

static void hook_status(void *arg, json_t *o)
{
	(void)arg;
	json_object_set_new(o, "pending_uploads", json_pack("[s]", "notes.txt"));
}

/* ---- a test client ---- */

static char sock_path[100];

static int dial(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		perror("connect");
		exit(2);
	}
	return fd;
}

struct result {
	char out[4u << 20];
	size_t outlen;
	char err[4096];
	size_t errlen;
	json_t *x; /* the X or J object */
	char type;
};

static struct result res1, res2;

static void start(struct frame_writer *w, const char *op, double timeout,
		  bool in, const char *const *argv, const char *cwd,
		  const char *wdir)
{
	json_t *h = json_pack("{s:s,s:f,s:b}", "op", op, "timeout", timeout, "stdin", in);
	frame_write_json(w, FRAME_HEADER, h);
	json_decref(h);
	for (size_t i = 0; argv && argv[i]; i++)
		frame_write_str(w, FRAME_ARG, argv[i]);
	if (cwd)
		frame_write_str(w, FRAME_CWD, cwd);
	if (wdir)
		frame_write_str(w, FRAME_WORKDIR, wdir);
	frame_write(w, FRAME_GO, NULL, 0);
}

/* Reads O/R until X or J; 0, or -1 if the stream ended first. */
static int collect(int fd, struct result *r)
{
	r->outlen = r->errlen = 0;
	json_decref(r->x);
	r->x = NULL;
	for (;;) {
		struct frame f;
		if (frame_read(fd, &f) != 1)
			return -1;
		if (f.type == FRAME_STDOUT && r->outlen + f.len <= sizeof r->out) {
			memcpy(r->out + r->outlen, f.data, f.len);
			r->outlen += f.len;
		} else if (f.type == FRAME_STDERR && r->errlen + f.len <= sizeof r->err) {
			memcpy(r->err + r->errlen, f.data, f.len);
			r->errlen += f.len;
		} else if (f.type == FRAME_EXIT || f.type == FRAME_JSON) {
			json_error_t e;
			r->x = json_loadb(f.data, f.len, 0, &e);
			r->type = (char)f.type;
			frame_free(&f);
			return 0;
		}
		frame_free(&f);
	}
}

static int run(const char *const *argv, const char *cwd, const char *wdir,
	       struct result *r)
{
	int fd = dial();
	struct frame_writer w;
	frame_writer_init(&w, fd);
	start(&w, "exec", 0, false, argv, cwd, wdir);
	frame_write(&w, FRAME_STDIN_EOF, NULL, 0);
	int rc = collect(fd, r);
	frame_writer_destroy(&w);
	close(fd);
	return rc;
}

static json_t *simple(const char *op, const char *path)
{
	int fd = dial();
	struct frame_writer w;
	frame_writer_init(&w, fd);
	start(&w, op, 0, false, NULL, path, NULL);
	static struct result r;
	collect(fd, &r);
	frame_writer_destroy(&w);
	close(fd);
	json_t *x = r.x;
	r.x = NULL;
	return x;
}

static const char *xerror(const struct result *r)
{
	const char *e = json_string_value(json_object_get(r->x, "error"));
	return e ? e : "";
}

static long long xint(const struct result *r, const char *k)
{
	return json_integer_value(json_object_get(r->x, k));
}

static bool xtrue(const struct result *r, const char *k)
{
	return json_is_true(json_object_get(r->x, k));
}

static bool out_is(const struct result *r, const char *s)
{
	bool ok = r->outlen == strlen(s) && !memcmp(r->out, s, r->outlen);
	if (!ok)
		fprintf(stderr, "  got stdout: %.*s\n  wanted:     %s\n", (int)r->outlen,
			r->out, s);
	return ok;
}

static void wait_for(atomic_int *v, int want)
{
	for (int i = 0; i < 500 && atomic_load(v) < want; i++)
		usleep(10000);
}

static void test_exec(void)
{
	struct result *r = &res1;
	int f0 = atomic_load(&flushes), i0 = atomic_load(&invalidations);
	const char *echo[] = {"echo", "hello", "w\xffrld", NULL};
	const char *pwd[] = {"echo", NULL};
	CHECK_INT(run(echo, "sub/dir", NULL, r), 0);
	CHECK(out_is(r, "hello w\xffrld\ncwd=/workspace/sub/dir\n"));
	CHECK_INT(r->type, 'X');
	CHECK_INT(xint(r, "exit_code"), 0);
	CHECK(json_object_get(r->x, "error") == NULL);
	CHECK_INT(atomic_load(&flushes), f0 + 1);
	CHECK(atomic_load(&invalidations) > i0);

	CHECK_INT(run(pwd, "", NULL, r), 0);
	CHECK(out_is(r, "cwd=/workspace\n"));
	CHECK_INT(run(pwd, "a/./b/../c/", NULL, r), 0);
	CHECK(out_is(r, "cwd=/workspace/a/c\n"));
	CHECK_INT(run(pwd, "sub", "x/y", r), 0);
	CHECK(out_is(r, "cwd=/workspace/sub/x/y\n"));
	CHECK_INT(run(pwd, "sub", "/tmp", r), 0);
	CHECK(out_is(r, "cwd=/tmp\n"));

	/* a client cannot climb out of the workdir with its cwd */
	CHECK_INT(run(pwd, "a/../..", NULL, r), 0);
	CHECK(strstr(xerror(r), "outside the mount") != NULL);
	CHECK_INT(xint(r, "exit_code"), 125);

	const char *ex[] = {"exit", "3", NULL};
	CHECK_INT(run(ex, NULL, NULL, r), 0);
	CHECK_INT(xint(r, "exit_code"), 3);
	CHECK_MEM(r->err, r->errlen, "err\n", 4);

	/* large output arrives whole, in frames the codec accepts */
	const char *big[] = {"big", NULL};
	CHECK_INT(run(big, NULL, NULL, r), 0);
	CHECK_INT(r->outlen, 3u << 20);
	bool same = true;
	for (size_t i = 0; i < r->outlen; i++)
		if (r->out[i] != (char)(i % 251))
			same = false;
	CHECK(same);

	/* env entries reach the backend as given */
	int fd = dial();
	struct frame_writer w;
	frame_writer_init(&w, fd);
	json_t *h = json_pack("{s:s,s:b}", "op", "exec", "stdin", 0);
	frame_write_json(&w, FRAME_HEADER, h);
	json_decref(h);
	frame_write_str(&w, FRAME_ARG, "echo");
	frame_write_str(&w, FRAME_ENV, "A=1 2");
	frame_write(&w, FRAME_GO, NULL, 0);
	CHECK_INT(collect(fd, r), 0);
	CHECK(out_is(r, "cwd=/workspace\nenv=A=1 2\n"));
	frame_writer_destroy(&w);
	close(fd);

	/* flush failure stops the command before it runs */
	atomic_store(&flush_fails, true);
	CHECK_INT(run(echo, NULL, NULL, r), 0);
	CHECK(!strcmp(xerror(r),
		      "could not upload pending files before the command: disk on fire"));
	CHECK_INT(r->outlen, 0);
	atomic_store(&flush_fails, false);
}

static void test_stdin(void)
{
	struct result *r = &res1;
	int fd = dial();
	struct frame_writer w;
	frame_writer_init(&w, fd);
	const char *cat[] = {"cat", NULL};
	start(&w, "exec", 0, true, cat, NULL, NULL);
	frame_write_str(&w, FRAME_STDIN, "abc");
	frame_write(&w, FRAME_STDIN, "d\0f", 3);
	frame_write(&w, FRAME_STDIN_EOF, NULL, 0);
	CHECK_INT(collect(fd, r), 0);
	CHECK_MEM(r->out, r->outlen, "abcd\0f", 6);
	CHECK_INT(xint(r, "exit_code"), 0);
	frame_writer_destroy(&w);
	close(fd);
}

static void test_kill_and_timeout(void)
{
	struct result *r = &res1;
	const char *sleep_[] = {"sleep", NULL};
	struct frame_writer w;
	int c0 = atomic_load(&cancelled_count);

	/* K */
	int fd = dial();
	frame_writer_init(&w, fd);
	start(&w, "exec", 0, false, sleep_, NULL, NULL);
	frame_write(&w, FRAME_STDIN_EOF, NULL, 0);
	usleep(50000);
	frame_write(&w, FRAME_KILL, NULL, 0);
	CHECK_INT(collect(fd, r), 0);
	CHECK(xtrue(r, "cancelled"));
	CHECK_INT(xint(r, "signal"), SIGKILL);
	frame_writer_destroy(&w);
	close(fd);

	/* a half-close while stdin is stuck behind a command that does not
	 * read it: the way sbexec kills in that state */
	fd = dial();
	frame_writer_init(&w, fd);
	start(&w, "exec", 0, true, sleep_, NULL, NULL);
	static char chunk[FRAME_CHUNK];
	for (int i = 0; i < 3; i++)
		frame_write(&w, FRAME_STDIN, chunk, sizeof chunk);
	usleep(50000);
	shutdown(fd, SHUT_WR);
	CHECK_INT(collect(fd, r), 0);
	CHECK(xtrue(r, "cancelled"));
	frame_writer_destroy(&w);
	close(fd);

	/* a client that vanishes has its command killed */
	fd = dial();
	frame_writer_init(&w, fd);
	start(&w, "exec", 0, false, sleep_, NULL, NULL);
	usleep(50000);
	close(fd);
	frame_writer_destroy(&w);
	wait_for(&cancelled_count, c0 + 3);
	CHECK_INT(atomic_load(&cancelled_count), c0 + 3);

	/* the header's timeout reaches the backend */
	fd = dial();
	frame_writer_init(&w, fd);
	start(&w, "exec", 0.2, false, sleep_, NULL, NULL);
	CHECK_INT(collect(fd, r), 0);
	CHECK(xtrue(r, "timed_out"));
	CHECK(!xtrue(r, "cancelled"));
	frame_writer_destroy(&w);
	close(fd);
}

struct bg {
	int fd;
	struct result *r;
	int rc;
};

static void *collect_main(void *arg)
{
	struct bg *b = arg;
	b->rc = collect(b->fd, b->r);
	return NULL;
}

static void test_concurrent_clients(void)
{
	const char *sleep_[] = {"sleep", NULL};
	int fd = dial();
	struct frame_writer w;
	frame_writer_init(&w, fd);
	start(&w, "exec", 0, false, sleep_, NULL, NULL);
	frame_write(&w, FRAME_STDIN_EOF, NULL, 0);
	struct bg b = {fd, &res2, -2};
	pthread_t t;
	pthread_create(&t, NULL, collect_main, &b);

	/* while the first command runs, a second one completes */
	const char *echo[] = {"echo", "two", NULL};
	CHECK_INT(run(echo, NULL, NULL, &res1), 0);
	CHECK(out_is(&res1, "two\ncwd=/workspace\n"));
	CHECK(res2.x == NULL);

	frame_write(&w, FRAME_KILL, NULL, 0);
	pthread_join(t, NULL);
	CHECK_INT(b.rc, 0);
	CHECK(xtrue(&res2, "cancelled"));
	frame_writer_destroy(&w);
	close(fd);
}

static void test_status_sync_refresh(struct sb_backend *b)
{
	json_t *s = simple("status", NULL);
	CHECK(!strcmp(json_string_value(json_object_get(s, "backend")), "fake"));
	CHECK(!strcmp(json_string_value(json_object_get(s, "sandbox")), "fake-1"));
	CHECK(!strcmp(json_string_value(json_object_get(s, "state")), "running"));
	CHECK(!strcmp(json_string_value(json_object_get(s, "mount")), "/mnt/box"));
	CHECK_INT(json_integer_value(json_object_get(json_object_get(s, "calls"), "exec")),
		  atomic_load(&b->counters.calls[SB_CALL_EXEC]));
	CHECK(json_integer_value(json_object_get(json_object_get(s, "calls"), "exec")) > 0);
	CHECK(json_is_object(json_object_get(s, "errors")));
	CHECK(json_is_integer(json_object_get(s, "bytes_up")));
	CHECK_INT(json_array_size(json_object_get(s, "pending_uploads")), 1);
	json_decref(s);

	int f0 = atomic_load(&flushes);
	s = simple("sync", NULL);
	CHECK(json_is_true(json_object_get(s, "ok")));
	CHECK_INT(atomic_load(&flushes), f0 + 1);
	json_decref(s);
	atomic_store(&flush_fails, true);
	s = simple("sync", NULL);
	CHECK(strstr(json_string_value(json_object_get(s, "error")), "disk on fire") != NULL);
	json_decref(s);
	atomic_store(&flush_fails, false);

	int i0 = atomic_load(&invalidations);
	s = simple("refresh", "some/dir");
	CHECK(json_is_true(json_object_get(s, "ok")));
	CHECK_INT(atomic_load(&invalidations), i0 + 1);
	json_decref(s);

	s = simple("frobnicate", NULL);
	CHECK(strstr(json_string_value(json_object_get(s, "error")), "unknown request") != NULL);
	json_decref(s);
}

/* Every descriptor of the process taken (issue 41: pending files held
 * them all): `sbfs status` and `sbfs umount` are still answered, from the
 * server's reserve, and the unmount report keeps its connection. */
static void test_out_of_descriptors(struct control_server *s)
{
	struct rlimit old, low;
	CHECK_INT(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = old.rlim_cur < 256 ? old.rlim_cur : 256;
	CHECK_INT(setrlimit(RLIMIT_NOFILE, &low), 0);
	int fill[4096], n = 0;
	const char *ops[] = {"status", "unmount"};
	for (size_t k = 0; k < 2; k++) {
		/* Taken again each time: the server lets go of the last
		 * connection's only when it accepts the next. */
		while (n < (int)(sizeof fill / sizeof fill[0]) &&
		       (fill[n] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
			n++;
		CHECK(n > 0 && n < (int)(sizeof fill / sizeof fill[0]));
		close(fill[--n]); /* the client's own socket */
		int fd = dial();
		struct timeval tv = {.tv_sec = 5}; /* the old server never accepted */
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		struct frame_writer w;
		frame_writer_init(&w, fd);
		start(&w, ops[k], 0, false, NULL, NULL, NULL);
		static struct result r;
		CHECK_INT(collect(fd, &r), 0);
		CHECK(json_is_object(r.x) && !json_object_get(r.x, "error"));
		json_decref(r.x);
		r.x = NULL;
		frame_writer_destroy(&w);
		close(fd);
	}
	int report = control_server_take_unmount_fd(s);
	CHECK(report >= 0);
	if (report >= 0)
		close(report);
	while (n > 0)
		close(fill[--n]);
	setrlimit(RLIMIT_NOFILE, &old);
}

/* Garbage gets an error reply, never a crash, and the server lives on. */
static void test_malformed(void)
{
	struct result *r = &res1;
	unsigned char h[5];

	int fd = dial();
	raw_header(h, 0x7fffffffu, 'H');
	CHECK_INT(write(fd, h, 5), 5);
	CHECK_INT(collect(fd, r), 0);
	CHECK_INT(r->type, 'J');
	CHECK(strstr(xerror(r), "protocol error") != NULL);
	close(fd);

	fd = dial();
	struct frame_writer w;
	frame_writer_init(&w, fd);
	frame_write_str(&w, FRAME_ARG, "ls");
	CHECK_INT(collect(fd, r), 0);
	CHECK(strstr(xerror(r), "header") != NULL);
	close(fd);

	fd = dial();
	w.fd = fd;
	frame_write_str(&w, FRAME_HEADER, "{not json");
	CHECK_INT(collect(fd, r), 0);
	CHECK(strstr(xerror(r), "JSON") != NULL);
	close(fd);

	fd = dial();
	w.fd = fd;
	frame_write_str(&w, FRAME_HEADER, "{\"op\":\"exec\",\"timeout\":-1}");
	CHECK_INT(collect(fd, r), 0);
	CHECK(strstr(xerror(r), "timeout") != NULL);
	close(fd);

	/* a long command line, as `sh -c 'echo $#' x $(seq 10000)`: the
	 * daemon took at most 4,096 arguments */
	fd = dial();
	w.fd = fd;
	frame_write_str(&w, FRAME_HEADER, "{\"op\":\"exec\"}");
	frame_write_str(&w, FRAME_ARG, "argc");
	for (int i = 1; i <= 10000; i++) {
		char num[16];
		snprintf(num, sizeof num, "%d", i);
		frame_write_str(&w, FRAME_ARG, num);
	}
	frame_write(&w, FRAME_GO, NULL, 0);
	CHECK_INT(collect(fd, r), 0);
	CHECK(out_is(r, "10000\n"));
	close(fd);

	/* an argument list beyond what the sandbox can pass: refused with its
	 * limit named, while the client is still sending */
	fd = dial();
	w.fd = fd;
	frame_write_str(&w, FRAME_HEADER, "{\"op\":\"exec\"}");
	int sent = 0;
	for (; sent < 400000; sent++)
		if (frame_write_str(&w, FRAME_ARG, "x") < 0)
			break;
	CHECK(sent < 400000);
	CHECK_INT(collect(fd, r), 0);
	CHECK(strstr(xerror(r), "argument list too long") != NULL);
	CHECK(strstr(xerror(r), "ARG_MAX") != NULL);
	close(fd);

	/* an empty argv */
	fd = dial();
	w.fd = fd;
	start(&w, "exec", 0, false, NULL, NULL, NULL);
	CHECK_INT(collect(fd, r), 0);
	CHECK(strstr(xerror(r), "no command") != NULL);
	close(fd);

	/* a NUL inside an argument would silently cut it */
	fd = dial();
	w.fd = fd;
	frame_write_str(&w, FRAME_HEADER, "{\"op\":\"exec\"}");
	frame_write(&w, FRAME_ARG, "a\0b", 3);
	CHECK_INT(collect(fd, r), 0);
	CHECK(strstr(xerror(r), "NUL") != NULL);
	close(fd);
	frame_writer_destroy(&w);

	json_t *s = simple("status", NULL);
	CHECK(json_is_object(s) && json_object_get(s, "backend"));
	json_decref(s);
}

/* Only the daemon's own uid (and root) may talk to it, even if the file
 * permissions were loosened. Needs root to act as someone else. */
static void test_peer_uid(const char *dir)
{
	if (geteuid() != 0)
		return;
	chmod(dir, 0755);
	chmod(sock_path, 0666);
	pid_t pid = fork();
	if (pid == 0) {
		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(3);
		int fd = dial();
		struct frame_writer w;
		frame_writer_init(&w, fd);
		start(&w, "status", 0, false, NULL, NULL, NULL);
		struct result *r = &res1;
		if (collect(fd, r) < 0)
			_exit(4);
		_exit(strstr(xerror(r), "permission denied") ? 0 : 5);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st));
	CHECK_INT(WEXITSTATUS(st), 0);
	chmod(dir, 0700);
	chmod(sock_path, 0600);
}

/* The client half, reaching the server the way it finds a mount: a
 * mountinfo whose fuse.sbfs line (a folder standing in for the mount)
 * names the socket in its source. */
static void test_client_command(const char *dir)
{
	char fake_mount[300], mountinfo[300];
	snprintf(fake_mount, sizeof fake_mount, "%s/mnt", dir);
	mkdir(fake_mount, 0700);
	snprintf(mountinfo, sizeof mountinfo, "%s/mountinfo", dir);
	FILE *mi = fopen(mountinfo, "w");
	CHECK(mi != NULL);
	if (!mi)
		return;
	fprintf(mi, "22 1 0:21 / / rw - ext4 /dev/sda rw\n"
		    "30 22 0:40 / %s rw,nosuid - fuse.sbfs %s%s rw\n",
		fake_mount, SBFS_MOUNT_SOURCE_PREFIX, sock_path);
	fclose(mi);
	const char *saved_mountinfo = control_mountinfo_path;
	control_mountinfo_path = mountinfo;
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	CHECK_INT(control_client_command(fake_mount, "status", NULL, true, out), 0);
	fflush(out);
	json_error_t e;
	json_t *s = json_loads(buf, 0, &e);
	CHECK(json_is_object(s));
	json_decref(s);
	fclose(out);
	free(buf);

	out = open_memstream(&buf, &len);
	CHECK_INT(control_client_command(fake_mount, "status", NULL, false, out), 0);
	fclose(out);
	CHECK(strstr(buf, "backend") && strstr(buf, "fake") && strstr(buf, "notes.txt") &&
	      strstr(buf, "exec"));
	free(buf);

	out = open_memstream(&buf, &len);
	CHECK_INT(control_client_command(fake_mount, "sync", NULL, false, out), 0);
	fclose(out);
	free(buf);

	char other[300];
	snprintf(other, sizeof other, "%s/nothing", dir);
	mkdir(other, 0700);
	struct control_target t;
	char err[512];
	CHECK_INT(control_find_mount("sbexec", other, NULL, &t, err, sizeof err), -1);
	CHECK(strstr(err, "is not an sbfs mount") != NULL);

	CHECK_INT(control_find_mount("sbexec", fake_mount, NULL, &t, err, sizeof err), 0);
	CHECK(!strcmp(t.socket, sock_path));
	control_mountinfo_path = saved_mountinfo;
}

static void test_socket_path(const char *dir)
{
	char old[512] = "";
	const char *x = getenv("XDG_RUNTIME_DIR");
	if (x)
		snprintf(old, sizeof old, "%s", x);
	setenv("XDG_RUNTIME_DIR", dir, 1);
	char path[256], want[512];
	CHECK_INT(control_socket_path("sbfs-abc", path, sizeof path), 0);
	snprintf(want, sizeof want, "%s/sbfs/sbfs-abc.sock", dir);
	CHECK(!strcmp(path, want));
	struct stat st;
	snprintf(want, sizeof want, "%s/sbfs", dir);
	CHECK(stat(want, &st) == 0 && (st.st_mode & 0777) == 0700);
	chmod(want, 0777);
	CHECK_INT(control_socket_path("sbfs-abc", path, sizeof path), -EPERM);
	rmdir(want);
	CHECK_INT(control_socket_path("a/b", path, sizeof path), -EINVAL);
	if (old[0])
		setenv("XDG_RUNTIME_DIR", old, 1);
	else
		unsetenv("XDG_RUNTIME_DIR");
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_server(void)
{
	char dir[] = "/tmp/sbfs-test-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(2);
	}
	test_socket_path(dir);
	snprintf(sock_path, sizeof sock_path, "%s/ctl.sock", dir);

	struct sb_backend *b = calloc(1, sizeof *b);
	b->ops = &fake_ops;
	b->spec.workdir = (char *)"/workspace";
	snprintf(b->id, sizeof b->id, "fake-1");
	struct control_hooks hooks = {.flush_all = hook_flush,
				      .invalidate = hook_invalidate,
				      .status = hook_status};
	char err[256];
	struct control_server *s =
		control_server_start(sock_path, "/mnt/box", b, &hooks, err, sizeof err);
	CHECK(s != NULL);
	if (!s) {
		fprintf(stderr, "%s\n", err);
		return;
	}
	struct stat st;
	CHECK(stat(sock_path, &st) == 0 && (st.st_mode & 0777) == 0600);

	/* a second daemon on the same socket is refused, the first unharmed */
	struct control_server *s2 =
		control_server_start(sock_path, "/mnt/box", b, &hooks, err, sizeof err);
	CHECK(s2 == NULL);
	CHECK(strstr(err, "already listening") != NULL);

	test_exec();
	test_stdin();
	test_kill_and_timeout();
	test_concurrent_clients();
	test_status_sync_refresh(b);
	test_out_of_descriptors(s);
	test_malformed();
	test_peer_uid(dir);

	/* a dead sandbox is reported as such */
	const char *die[] = {"die", NULL};
	CHECK_INT(run(die, NULL, NULL, &res1), 0);
	CHECK(!strcmp(xerror(&res1), "sandbox is unusable: fake sandbox vanished"));
	const char *echo[] = {"echo", NULL};
	CHECK_INT(run(echo, NULL, NULL, &res1), 0);
	CHECK(strstr(xerror(&res1), "sandbox is unusable") != NULL);
	json_t *js = simple("status", NULL);
	CHECK(!strcmp(json_string_value(json_object_get(js, "state")), "dead"));
	CHECK(!strcmp(json_string_value(json_object_get(js, "reason")), "fake sandbox vanished"));
	json_decref(js);
	atomic_store(&b->dead, false);

	/* stop kills running commands and returns promptly */
	const char *sleep_[] = {"sleep", NULL};
	int fd = dial();
	struct frame_writer w;
	frame_writer_init(&w, fd);
	start(&w, "exec", 0, false, sleep_, NULL, NULL);
	int idle = dial(); /* connected, never sends anything */
	usleep(50000);
	double t0 = now();
	test_client_command(dir);
	control_server_stop(s);
	CHECK(now() - t0 < 3);
	CHECK(access(sock_path, F_OK) != 0);
	close(fd);
	close(idle);
	frame_writer_destroy(&w);

	struct control_target t;
	snprintf(t.mount, sizeof t.mount, "/mnt/box");
	snprintf(t.socket, sizeof t.socket, "%s", sock_path);
	CHECK_INT(control_connect("sbexec", &t, err, sizeof err), -1);
	/* its socket went with it: the daemon is gone, and the line says how
	 * to clear what it may have left */
	CHECK(strstr(err, "sbexec: the sbfs daemon for /mnt/box is gone (No such file or directory at ") != NULL);
	CHECK(strstr(err, "clear it with 'fusermount3 -u -z /mnt/box'") != NULL);

	json_decref(res1.x);
	json_decref(res2.x);
	free(b);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	test_round_trip();
	test_split_reads();
	test_bad_streams();
	test_concurrent_writers();
	test_mountinfo();
	test_server();
	return unit_done("frame");
}
