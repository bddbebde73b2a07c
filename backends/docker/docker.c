/* The `docker` backend: a sandbox is a container on a Docker Engine API
 * (dockerd, Podman's service, a remote engine over TCP+TLS).
 *
 * The container runs a do-nothing keeper as its entrypoint (POSIX sh and
 * sleep, which minimal images have), is labelled so that `sbfs sweep` can
 * find it when its daemon is gone, and is watched by a thread that
 * long-polls the engine's wait endpoint: a container killed or removed
 * from outside marks the backend dead within moments, and the sandbox
 * lifetime (sandbox_timeout) is enforced here, with the keeper exiting a
 * little later as a backstop should this daemon be gone. */
#include "docker.h"
#include "backends/guest_watch.h"
#include "backends/lifetime.h"
#include "util/call_deadline.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WAIT_SLICE_MS 30000L
#define LIFETIME_SLACK_S 10 /* the keeper's own exit, after ours */
#define DEFAULT_PIDS 4096

static const char *const docker_option_keys[] = {"pull", "docker_host",
						 "pids", NULL};

/* $1 = lifetime in seconds (0 = none). `sleep & wait` so that TERM is
 * handled at once; exits 0 on TERM like a well-behaved init. */
static const char keeper[] =
	"trap 'exit 0' TERM INT\n"
	"if [ \"$1\" -gt 0 ]; then sleep \"$1\" & wait $!; exit 0; fi\n"
	"while :; do sleep 3600 & wait $!; done\n";

/* ---- our own identity, for labels and sweep ---- */

/* Start time (field 22 of /proc/PID/stat) of a live process; 0 when it
 * is gone or a zombie (a killed daemon nobody reaped yet is gone). */
static unsigned long long proc_starttime(pid_t pid)
{
	char p[64], buf[1024];
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *s = strrchr(buf, ')');
	if (!s)
		return 0;
	if (s[1] == ' ' && (s[2] == 'Z' || s[2] == 'X'))
		return 0;
	/* field 22; s points at the end of field 2 */
	unsigned long long v = 0;
	int field = 2;
	for (char *t = s + 1; *t && field < 22; t++)
		if (*t == ' ' && ++field == 22)
			v = strtoull(t + 1, NULL, 10);
	return v;
}

static void host_name(char *out, size_t n)
{
	if (gethostname(out, n) < 0 || !out[0])
		snprintf(out, n, "unknown");
	out[n - 1] = '\0';
}

/* ---- create ---- */

static int refuse(struct sb_backend *b)
{
	const struct sb_spec *s = &b->spec;
	const char *why = NULL;
	if (s->allow_egress_to && s->allow_egress_to[0])
		why = "backend 'docker' cannot enforce allow_egress_to (the engine has no egress filter); keep the default (no network) or use -o network";
	else if (!s->attach_id && (!s->image || !*s->image))
		why = "backend 'docker' needs an image: -o image=NAME (for example python:3.12-slim)";
	else if (!s->workdir || s->workdir[0] != '/')
		why = "backend 'docker' needs an absolute workdir";
	else if (s->disk_mb && s->attach_id)
		why = "disk= sizes a new container; an attached one keeps the size it was made with: drop disk=";
	for (size_t i = 0; !why && s->env && s->env[i]; i++)
		if (!strchr(s->env[i], '=') || s->env[i][0] == '=')
			why = "environment entries must be K=V";
	for (size_t i = 0; !why && s->tags && s->tags[i]; i++)
		if (!strncmp(s->tags[i], "sbfs", 4))
			why = "tags starting with 'sbfs' are reserved for sbfs's own labels";
	if (why)
		dk_error(b, "%s", why);
	return why ? -EINVAL : 0;
}

static int pull_image(struct sb_backend *b)
{
	struct docker *d = b->priv;
	char *img = http_query_escape(b->spec.image);
	if (!img)
		return -ENOMEM;
	struct dk_result r;
	/* the engine streams progress as JSON lines; an error is one of
	 * them, with an "error" key, under a 200 */
	int rc = dk_call(d, "POST", NULL, 30 * 60 * 1000L, &r,
			 "/images/create?fromImage=%s", img);
	free(img);
	if (rc < 0 || r.status != 200) {
		dk_error(b, "cannot pull image '%s' on the Docker engine at %s: %s",
			 b->spec.image, d->where, r.msg);
		dk_result_free(&r);
		return rc < 0 ? rc : -EIO;
	}
	dk_result_free(&r);
	/* check the outcome by looking for the image */
	char *name = http_query_escape(b->spec.image);
	rc = dk_call(d, "GET", NULL, DK_CALL_TIMEOUT_MS, &r, "/images/%s/json", name);
	free(name);
	long st = r.status;
	dk_result_free(&r);
	if (rc < 0 || st != 200) {
		dk_error(b, "pulling image '%s' on the Docker engine at %s did not produce it; check the name and the engine's registry access",
			 b->spec.image, d->where);
		return -EIO;
	}
	return 0;
}

static json_t *labels(struct sb_backend *b)
{
	char host[256], buf[64];
	host_name(host, sizeof(host));
	json_t *l = json_object();
	json_object_set_new(l, "sbfs", json_string("1"));
	snprintf(buf, sizeof(buf), "%u", (unsigned)geteuid());
	json_object_set_new(l, "sbfs.owner.uid", json_string(buf));
	struct passwd *pw = getpwuid(geteuid());
	if (pw && pw->pw_name)
		json_object_set_new(l, "sbfs.owner.user", json_string(pw->pw_name));
	json_object_set_new(l, "sbfs.host", json_string(host));
	snprintf(buf, sizeof(buf), "%d", (int)getpid());
	json_object_set_new(l, "sbfs.pid", json_string(buf));
	snprintf(buf, sizeof(buf), "%llu", proc_starttime(getpid()));
	json_object_set_new(l, "sbfs.pid.start", json_string(buf));
	if (b->spec.sandbox_timeout_s) {
		snprintf(buf, sizeof(buf), "%lld",
			 (long long)time(NULL) + b->spec.sandbox_timeout_s);
		json_object_set_new(l, "sbfs.expires", json_string(buf));
	}
	if (b->spec.keep)
		json_object_set_new(l, "sbfs.keep", json_string("1"));
	for (size_t i = 0; b->spec.tags && b->spec.tags[i]; i++) {
		const char *t = b->spec.tags[i], *eq = strchr(t, '=');
		char *k = eq ? strndup(t, (size_t)(eq - t)) : strdup(t);
		if (k)
			json_object_set_new(l, k, json_string(eq ? eq + 1 : ""));
		free(k);
	}
	return l;
}

static int parse_pids(struct sb_backend *b, long long *pids)
{
	const char *v = sb_spec_option(&b->spec, "pids");
	*pids = DEFAULT_PIDS;
	if (!v)
		return 0;
	char *end;
	errno = 0;
	long long n = strtoll(v, &end, 10);
	if (!*v || *end || errno || n < 0 || n > (1LL << 30)) {
		dk_error(b, "-o pids needs a whole number of processes (0 = no limit), not '%s'", v);
		return -EINVAL;
	}
	*pids = n;
	return 0;
}

/* A limit the engine says it dropped is a limit not enforced: refuse. */
static const char *dropped_limit(json_t *warnings)
{
	for (size_t i = 0; i < json_array_size(warnings); i++) {
		const char *w = json_string_value(json_array_get(warnings, i));
		if (w && (strstr(w, "limit") || strstr(w, "not support") ||
			  strstr(w, "discarded")))
			return w;
	}
	return NULL;
}

static void remove_container(struct docker *d)
{
	struct dk_result r;
	if (dk_call(d, "DELETE", NULL, DK_CALL_TIMEOUT_MS, &r,
		    "/containers/%s?force=true&v=true", d->cid) == 0 &&
	    r.status >= 300 && r.status != 404)
		sb_warn("docker: could not remove container %s: %s", d->cid, r.msg);
	dk_result_free(&r);
}

static int create_container(struct sb_backend *b)
{
	struct docker *d = b->priv;
	const struct sb_spec *s = &b->spec;
	long long pids;
	if (parse_pids(b, &pids) < 0)
		return -EINVAL;
	char life[32];
	snprintf(life, sizeof(life), "%u",
		 s->sandbox_timeout_s ? s->sandbox_timeout_s + LIFETIME_SLACK_S : 0);
	json_t *env = json_array();
	for (size_t i = 0; s->env && s->env[i]; i++)
		json_array_append_new(env, json_string(s->env[i]));
	json_t *host = json_object();
	if (s->block_network)
		json_object_set_new(host, "NetworkMode", json_string("none"));
	if (s->memory_mb) {
		json_int_t bytes = (json_int_t)s->memory_mb * 1024 * 1024;
		json_object_set_new(host, "Memory", json_integer(bytes));
		json_object_set_new(host, "MemorySwap", json_integer(bytes));
	}
	if (s->cpu > 0)
		json_object_set_new(host, "NanoCpus", json_integer((json_int_t)(s->cpu * 1e9)));
	if (pids > 0)
		json_object_set_new(host, "PidsLimit", json_integer(pids));
	if (s->disk_mb) {
		/* the engine's storage driver enforces it, or refuses the create */
		char size[32];
		snprintf(size, sizeof size, "%lluM", (unsigned long long)s->disk_mb);
		json_object_set_new(host, "StorageOpt", json_pack("{s:s}", "size", size));
	}
	json_t *body = json_pack("{s:s,s:[s,s,s,s,s],s:s,s:o,s:o,s:o,s:b,s:b}",
				 "Image", s->image,
				 "Entrypoint", "/bin/sh", "-c", keeper, "sbfs-keeper", life,
				 "WorkingDir", s->workdir, "Env", env,
				 "Labels", labels(b), "HostConfig", host,
				 "Tty", 0, "OpenStdin", 0);
	if (!body)
		return -ENOMEM;
	struct dk_result r;
	int rc = dk_call(d, "POST", body, DK_CALL_TIMEOUT_MS, &r,
			 "/containers/create?name=%s", s->name);
	json_decref(body);
	if (rc < 0) {
		dk_error(b, "%s", r.msg);
		return rc;
	}
	if (r.status == 404) {
		dk_error(b,
			 "image '%s' not found on the Docker engine at %s; load it (docker load/import) or add -o pull",
			 s->image, d->where);
		dk_result_free(&r);
		return -ENOENT;
	}
	const char *id = json_string_value(json_object_get(r.json, "Id"));
	if (r.status != 201 && s->disk_mb) {
		dk_error(b,
			 "the Docker engine at %s cannot enforce disk= (its storage driver has no size limit here: %s); drop disk= or use an engine that supports --storage-opt size",
			 d->where, r.msg);
		dk_result_free(&r);
		return -EINVAL;
	}
	if (r.status != 201 || !id) {
		dk_error(b, "the Docker engine at %s refused to create the container: %s",
			 d->where, r.msg);
		dk_result_free(&r);
		return -EIO;
	}
	snprintf(d->cid, sizeof(d->cid), "%s", id);
	d->owns = true;
	const char *w = dropped_limit(json_object_get(r.json, "Warnings"));
	if (w) {
		dk_error(b,
			 "the Docker engine at %s cannot enforce a requested limit (%s); drop that limit or use another engine",
			 d->where, w);
		dk_result_free(&r);
		return -EINVAL;
	}
	dk_result_free(&r);
	rc = dk_call(d, "POST", NULL, DK_CALL_TIMEOUT_MS, &r, "/containers/%s/start", d->cid);
	if (rc < 0 || (r.status != 204 && r.status != 304)) {
		dk_error(b,
			 "the container from image '%s' did not start: %s (sbfs needs /bin/sh in the image)",
			 s->image, r.msg);
		dk_result_free(&r);
		return -EIO;
	}
	dk_result_free(&r);
	snprintf(b->id, sizeof(b->id), "%s", s->name);
	return 0;
}

static int attach_container(struct sb_backend *b)
{
	struct docker *d = b->priv;
	struct dk_result r;
	char *q = http_query_escape(b->spec.attach_id);
	if (!q)
		return -ENOMEM;
	int rc = dk_call(d, "GET", NULL, DK_CALL_TIMEOUT_MS, &r, "/containers/%s/json", q);
	free(q);
	json_t *st = json_object_get(r.json, "State");
	const char *id = json_string_value(json_object_get(r.json, "Id"));
	const char *name = json_string_value(json_object_get(r.json, "Name"));
	if (rc < 0 || r.status != 200 || !id || !st) {
		dk_error(b, "attach: no container '%s' on the Docker engine at %s%s%s",
			 b->spec.attach_id, d->where, r.msg[0] ? ": " : "", r.msg);
		dk_result_free(&r);
		return -ENOENT;
	}
	if (!json_is_true(json_object_get(st, "Running"))) {
		dk_error(b, "attach: container '%s' is not running; start it (docker start) first",
			 b->spec.attach_id);
		dk_result_free(&r);
		return -EINVAL;
	}
	snprintf(d->cid, sizeof(d->cid), "%s", id);
	snprintf(b->id, sizeof(b->id), "%s", name && name[0] == '/' ? name + 1 : name ? name : id);
	dk_result_free(&r);
	return 0;
}

struct capture {
	char buf[256];
	size_t len;
};

static int capture_out(void *arg, const char *data, size_t n)
{
	struct capture *c = arg;
	size_t room = sizeof(c->buf) - 1 - c->len;
	if (n > room)
		n = room;
	memcpy(c->buf + c->len, data, n);
	c->len += n;
	c->buf[c->len] = '\0';
	return 0;
}

/* Learns the image user's ids (owner of uploaded files) and makes sure
 * that user can write the workdir, which the engine creates as root. */
static int probe(struct sb_backend *b)
{
	struct docker *d = b->priv;
	static const char script[] =
		"id -u; id -g; if [ -d \"$1\" ] && [ -w \"$1\" ]; then echo w; else echo -; fi\n";
	const char *argv[] = {"sh", "-c", script, "sh", b->spec.workdir, NULL};
	struct capture c = {.len = 0};
	struct sb_exec_req req = {
		.argv = argv, .cwd = "/", .stdin_fd = -1, .timeout_s = 60,
		.cancel_fd = -1, .on_stdout = capture_out, .cb_arg = &c,
	};
	struct sb_exec_result res;
	int rc = docker_exec(b, &req, &res);
	if (rc < 0 || res.timed_out || res.exit_code != 0) {
		if (!b->error[0] || rc == 0)
			dk_error(b,
				 "the container from image '%s' cannot run sh -c (exit %d); sbfs needs a POSIX sh and id in the image",
				 b->spec.image ? b->spec.image : b->spec.attach_id, res.exit_code);
		return rc < 0 ? rc : -EIO;
	}
	char w[4] = "";
	if (sscanf(c.buf, "%u %u %3s", &d->uid, &d->gid, w) != 3) {
		dk_error(b, "unexpected answer from id in the container: %.60s", c.buf);
		return -EPROTO;
	}
	b->guest_uid = d->uid;
	b->guest_gid = d->gid;
	if (w[0] != 'w' && d->uid != 0) {
		char owner[32];
		snprintf(owner, sizeof(owner), "%u:%u", d->uid, d->gid);
		const char *cargv[] = {"chown", "--", owner, b->spec.workdir, NULL};
		struct sb_exec_req creq = {
			.argv = cargv, .cwd = "/", .stdin_fd = -1, .timeout_s = 60,
			.cancel_fd = -1,
		};
		rc = dk_exec_as(b, &creq, &res, "0");
		if (rc < 0 || res.exit_code != 0)
			sb_warn("docker: could not give %s to uid %u in %s", b->spec.workdir,
				d->uid, b->id);
	}
	return 0;
}

/* ---- the watcher ---- */

/* Long-polls POST /containers/{id}/wait in slices (every call has a
 * timeout): it returns when the container stops or is removed. Also the
 * lifetime and idle timers. */
static void *watch(void *arg)
{
	struct sb_backend *b = arg;
	struct docker *d = b->priv;
	struct sb_lifetime clock;
	sb_lifetime_start(&clock, b);
	int failures = 0;
	while (!atomic_load(&d->stopping) && !sb_backend_is_dead(b)) {
		unsigned secs = 0;
		double slice = WAIT_SLICE_MS / 1000.0;
		const char *why = sb_lifetime_check(&clock, b, call_deadline_now(), &secs, &slice);
		if (why) {
			dk_fail(b, "%s (%u s) ended: container %s was removed", why, secs, b->id);
			remove_container(d);
			break;
		}
		char path[256];
		snprintf(path, sizeof(path), "/%s/containers/%s/wait?condition=not-running",
			 d->api, d->cid);
		struct http_req req = {
			.method = "POST", .path = path, .max_response = 64 * 1024,
			.timeout_ms = (long)(slice * 1000) + 50,
			.abort_flag = &d->stopping,
		};
		struct http_resp resp;
		int rc = http_request(&d->ep, &req, &resp);
		long status = resp.status;
		char err[sizeof(resp.error)];
		snprintf(err, sizeof(err), "%s", resp.error);
		http_resp_free(&resp);
		if (atomic_load(&d->stopping))
			break;
		if (rc == -ETIMEDOUT) {
			failures = 0;
			continue;
		}
		if (rc < 0 || status >= 500) {
			/* the engine itself: tolerate a restart, not an outage */
			if (++failures >= 10) {
				dk_fail(b, "lost the Docker engine at %s: %s", d->where,
					rc < 0 ? err : "it keeps failing");
				break;
			}
			sleep(1);
			continue;
		}
		failures = 0;
		char reason[300];
		int running = dk_container_running(d, reason, sizeof(reason));
		if (running == 0) {
			dk_fail(b, "container %s %s; unmount and mount again for a new sandbox",
				b->id, reason);
			break;
		}
		if (running > 0 && status != 200)
			sleep(1); /* the wait was refused yet the container runs */
	}
	return NULL;
}

/* ---- lifecycle ---- */

static void stop_watcher(struct docker *d)
{
	atomic_store(&d->stopping, true);
	if (d->watcher_started) {
		pthread_join(d->watcher, NULL);
		d->watcher_started = false;
	}
}

static int docker_create(struct sb_backend *b, const struct sb_spec *spec)
{
	(void)spec; /* b->spec is the same, and owned */
	int rc = refuse(b);
	if (rc < 0)
		return rc;
	struct docker *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->dead_pipe[0] = d->dead_pipe[1] = -1;
	pthread_mutex_init(&d->lock, NULL);
	atomic_init(&d->stopping, false);
	b->priv = d;
	if (pipe2(d->dead_pipe, O_CLOEXEC) < 0)
		return -errno;
	char err[SB_REASON_MAX];
	rc = dk_endpoint_setup(d, &b->spec, err, sizeof(err));
	if (rc == 0)
		rc = dk_negotiate(d, err, sizeof(err));
	if (rc < 0) {
		dk_error(b, "%s", err);
		return rc;
	}
	/* found, not named, it may be a context or a rootless socket */
	snprintf(b->endpoint, sizeof b->endpoint, "%s", d->where);
	if (b->spec.attach_id) {
		rc = attach_container(b);
	} else {
		if (sb_spec_option(&b->spec, "pull"))
			rc = pull_image(b);
		if (rc == 0)
			rc = create_container(b);
	}
	if (rc == 0)
		rc = probe(b);
	if (rc == 0) {
		int e = pthread_create(&d->watcher, NULL, watch, b);
		d->watcher_started = e == 0;
		rc = -e;
	}
	if (rc < 0 && d->owns) {
		remove_container(d);
		d->owns = false;
	}
	return rc;
}

/* Idempotent: a container that is already gone is success. */
static int docker_destroy(struct sb_backend *b)
{
	struct docker *d = b->priv;
	if (!d || !d->cid[0])
		return 0; /* never created */
	/* the removal also ends the watcher's wait at once */
	atomic_store(&d->stopping, true);
	struct dk_result r;
	int rc = dk_call(d, "DELETE", NULL, DK_CALL_TIMEOUT_MS, &r,
			 "/containers/%s?force=true&v=true", d->cid);
	stop_watcher(d);
	long st = r.status;
	char msg[sizeof(r.msg)];
	snprintf(msg, sizeof(msg), "%s", r.msg);
	dk_result_free(&r);
	/* The id stays: a call racing with or following the removal then
	 * gets the engine's 404 and reports the container gone, and a second
	 * destroy gets a 404 too, which is success. */
	if (rc == 0 && (st < 300 || st == 404))
		return 0;
	sb_err("docker: could not remove container %s: %s; remove it with: docker rm -f %s",
	       b->id, msg, b->id);
	return rc < 0 ? rc : -EIO;
}

static void docker_release(struct sb_backend *b)
{
	struct docker *d = b->priv;
	if (!d)
		return;
	stop_watcher(d);
	for (int i = 0; i < 2; i++)
		if (d->dead_pipe[i] >= 0)
			close(d->dead_pipe[i]);
	http_endpoint_free(&d->ep);
	pthread_mutex_destroy(&d->lock);
	free(d);
	b->priv = NULL;
}

/* ---- sweep ---- */

static const char *label(json_t *labels, const char *k)
{
	return json_string_value(json_object_get(labels, k));
}

/* Why the container is an orphan, or NULL if its owner still lives. */
static const char *orphan(json_t *labels, const char *host, char *why,
			  size_t n)
{
	const char *exp = label(labels, "sbfs.expires");
	if (exp && strtoll(exp, NULL, 10) > 0 && strtoll(exp, NULL, 10) < (long long)time(NULL)) {
		snprintf(why, n, "its lifetime ended");
		return why;
	}
	if (label(labels, "sbfs.keep"))
		return NULL; /* -o keep: left on purpose */
	const char *h = label(labels, "sbfs.host"), *p = label(labels, "sbfs.pid"),
		   *ps = label(labels, "sbfs.pid.start");
	if (!h || strcmp(h, host) != 0 || !p)
		return NULL; /* another machine's daemon: cannot tell */
	pid_t pid = (pid_t)strtol(p, NULL, 10);
	if (pid <= 0)
		return NULL;
	unsigned long long now = proc_starttime(pid);
	bool alive = now != 0;
	if (alive && ps && strtoull(ps, NULL, 10) != now)
		alive = false; /* the pid was reused */
	if (alive)
		return NULL;
	snprintf(why, n, "its sbfs daemon (pid %d) is gone", (int)pid);
	return why;
}

/* Our containers (label sbfs=1, this user's) as list_owned gives them.
 * The engine's connection stays open in *d for sweep's removals. */
static int list_containers(struct docker *d, const struct sb_spec *spec,
			   struct sb_owned **out, size_t *nout, char *err, size_t errlen)
{
	*out = NULL;
	*nout = 0;
	int rc = dk_endpoint_setup(d, spec, err, errlen);
	if (rc == 0)
		rc = dk_negotiate(d, err, errlen);
	if (rc < 0)
		return rc;
	struct dk_result r;
	rc = dk_call(d, "GET", NULL, DK_LIST_TIMEOUT_MS, &r,
		     "/containers/json?all=true&filters=%s",
		     "%7B%22label%22%3A%5B%22sbfs%3D1%22%5D%7D");
	if (rc < 0 || r.status != 200 || !json_is_array(r.json)) {
		snprintf(err, errlen, "cannot list containers on the Docker engine at %s: %s",
			 d->where, r.msg);
		dk_result_free(&r);
		return rc < 0 ? rc : -EIO;
	}
	char host[256];
	host_name(host, sizeof(host));
	uid_t me = geteuid();
	struct sb_owned *v = calloc(json_array_size(r.json) + 1, sizeof *v);
	size_t n = 0, i;
	json_t *c;
	if (!v) {
		dk_result_free(&r);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	json_array_foreach(r.json, i, c) {
		json_t *labels = json_object_get(c, "Labels");
		const char *id = json_string_value(json_object_get(c, "Id"));
		const char *name = json_string_value(json_array_get(json_object_get(c, "Names"), 0));
		const char *owner = label(labels, "sbfs.owner.uid");
		if (!id || (me != 0 && (!owner || strtoul(owner, NULL, 10) != me)))
			continue; /* not ours to judge */
		struct sb_owned *o = &v[n++];
		snprintf(o->id, sizeof(o->id), "%s", name ? (name[0] == '/' ? name + 1 : name) : id);
		o->created = (time_t)json_integer_value(json_object_get(c, "Created"));
		if (orphan(labels, host, o->why, sizeof(o->why)))
			o->state = SB_OWNED_ORPHAN;
		else
			o->state = label(labels, "sbfs.keep") ? SB_OWNED_KEPT : SB_OWNED_IN_USE;
	}
	dk_result_free(&r);
	*out = v;
	*nout = n;
	return 0;
}

static int docker_list_owned(const struct sb_spec *spec, struct sb_owned **v,
			     size_t *n, char *err, size_t errlen)
{
	struct docker d = {.dead_pipe = {-1, -1}};
	int rc = list_containers(&d, spec, v, n, err, errlen);
	http_endpoint_free(&d.ep);
	/* No engine named anywhere and none at the default socket: Docker is
	 * not set up here, which is no news for `sbfs list` to print. */
	const char *named = sb_spec_option(spec, "docker_host");
	if (rc == -ENOENT && !(named && *named) && !getenv("DOCKER_HOST") &&
	    !getenv("DOCKER_CONTEXT"))
		return SB_OWNED_NONE;
	return rc;
}

static int docker_sweep(const struct sb_spec *spec)
{
	struct docker d = {.dead_pipe = {-1, -1}};
	char err[SB_REASON_MAX];
	struct sb_owned *v;
	size_t n;
	int rc = list_containers(&d, spec, &v, &n, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "sbfs: sweep: %s\n", err);
		http_endpoint_free(&d.ep);
		return rc;
	}
	int status = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].state != SB_OWNED_ORPHAN) {
			printf("kept %s: in use (or kept with -o keep)\n", v[i].id);
			continue;
		}
		snprintf(d.cid, sizeof(d.cid), "%.127s", v[i].id); /* names and ids fit */
		struct dk_result del;
		int e = dk_call(&d, "DELETE", NULL, DK_CALL_TIMEOUT_MS, &del,
				"/containers/%s?force=true&v=true", v[i].id);
		if (e == 0 && (del.status < 300 || del.status == 404)) {
			printf("removed %s: %s\n", v[i].id, v[i].why);
		} else {
			printf("failed %s: %s\n", v[i].id, del.msg);
			status = -EIO;
		}
		dk_result_free(&del);
	}
	fflush(stdout);
	free(v);
	http_endpoint_free(&d.ep);
	return status;
}

/* The engine still takes an archive into a stopped container, so an
 * upload's 200 does not prove the sandbox ran: one inspect after it does.
 * A connection error is returned as such (the dispatcher repeats the
 * upload), and so is an engine too slow to answer within the call's
 * deadline (the upload fails and stays pending; a slow engine is no
 * proof of a dead sandbox); any other doubt counts as the sandbox gone. */
static int docker_confirm_alive(struct sb_backend *b)
{
	char why[300];
	int running = dk_container_running(b->priv, why, sizeof why);
	if (running > 0)
		return 0;
	if (sb_error_is_transient(running) || running == -ETIMEDOUT)
		return running;
	if (running == 0)
		return dk_fail(b, "container %s %s while an upload was in flight; "
			       "unmount and mount again for a new sandbox", b->id, why);
	return dk_fail(b, "container %s could not be checked after an upload (%s)",
		       b->id, why);
}

const struct sb_backend_ops sb_docker_ops = {
	.name = "docker",
	.summary = "a container on a Docker Engine API: dockerd, Podman, DOCKER_HOST (-o image=, pull, pids=)",
	.option_keys = docker_option_keys,
	.create = docker_create,
	.exec = docker_exec,
	.exec_signals = true,
	.exec_tty = true,
	.destroy = docker_destroy,
	.release = docker_release,
	.write_file = docker_write_file,
	.write_files = docker_write_files,
	.stat = docker_stat,
	.sweep = docker_sweep,
	.list_owned = docker_list_owned,
	.confirm_alive = docker_confirm_alive,
	/* a watcher inside the container (guest_watch.h) */
	.watch_start = guest_watch_start,
	.watch_settle = guest_watch_settle,
	.watch_stop = guest_watch_stop,
};
