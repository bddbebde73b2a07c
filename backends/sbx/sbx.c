/* The `sbx` backend: a Docker Sandboxes microVM on this machine, driven
 * by the `sbx` CLI. create = `sbx create ... shell DIR` with a private
 * empty DIR of ours, the network rule applied (sbx_config.c), the guest
 * user learnt and the workdir made; attach = a sandbox `sbx ls` knows;
 * destroy = `sbx rm -f`, where a sandbox already gone is success. sbx has
 * no lifetime of its own: sandbox_timeout= and idle_timeout= are kept
 * here, and `sbfs sweep` finds what a dead daemon left by our records. */
#include "sbx.h"
#include "backends/lifetime.h"
#include "util/call_deadline.h"
#include "util/log.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const sbx_option_keys[] = {
	"sbx_path", "host_network_policy", "create_timeout", NULL,
};

/* ---- lifecycle calls ---- */

/* One CLI call whose failure is described by its stderr; *out (may be
 * NULL) gets its stdout; *why (may be NULL) what kind of failure it was.
 * 0, or a negative errno with b->error set. */
static int lifecycle_why(struct sb_backend *b, const char *what,
			 const char *const *args, double timeout_s, char **out,
			 enum sbx_failure *why)
{
	struct sbx *s = b->priv;
	struct sbx_outcome o;
	char *sout = NULL, *serr = NULL;
	int rc = sbx_cli_capture(s->cfg.cli, args, timeout_s, 1u << 20, &o, &sout, &serr);
	if (rc < 0) {
		snprintf(b->error, sizeof(b->error), "cannot run %.200s: %s", s->cfg.cli, strerror(-rc));
	} else if (o.timed_out) {
		snprintf(b->error, sizeof(b->error), "sbx %s did not finish within %.0f s (is the sbx daemon stuck? `sbx diagnose` says more)%s",
			 what, timeout_s, strcmp(what, "create") ? "" : ": pass -o create_timeout= to wait longer");
		rc = -ETIMEDOUT;
	} else if (o.status != 0) {
		sbx_describe(b->error, sizeof(b->error), what, serr, o.status);
		if (why)
			*why = sbx_classify(serr);
		rc = -EIO;
	}
	if (rc == 0 && out)
		*out = sout;
	else
		free(sout);
	free(serr);
	return rc;
}

static int lifecycle(struct sb_backend *b, const char *what,
		     const char *const *args, double timeout_s, char **out)
{
	return lifecycle_why(b, what, args, timeout_s, out, NULL);
}

/* The user commands run as, for ownership. */
static int learn_user(struct sb_backend *b)
{
	struct sbx *s = b->priv;
	const char *args[] = {"exec", s->name, "sh", "-c", "id -u; id -g", NULL};
	char *out = NULL;
	int rc = lifecycle(b, "exec (id)", args, SBX_QUICK_TIMEOUT_S, &out);
	unsigned long u, g;
	if (rc == 0 && (!out || sscanf(out, "%lu %lu", &u, &g) != 2)) {
		snprintf(b->error, sizeof(b->error), "sbx sandbox %s: cannot tell its user's ids from `id`", s->name);
		rc = -EIO;
	}
	if (rc == 0) {
		b->guest_uid = (uid_t)u;
		b->guest_gid = (gid_t)g;
	}
	free(out);
	return rc;
}

/* The workdir, owned by the user commands run as. The VM's user is an
 * unprivileged agent user: a workdir it may not make (the default
 * /workspace) is made as root (docker exec's -u), then given to it. */
static int make_workdir(struct sb_backend *b)
{
	struct sbx *s = b->priv;
	const char *wd = b->spec.workdir;
	const char *args[] = {"exec", s->name, "mkdir", "-p", "--", wd, NULL};
	if (lifecycle(b, "exec (mkdir)", args, SBX_QUICK_TIMEOUT_S, NULL) == 0)
		return 0;
	char ids[48];
	snprintf(ids, sizeof(ids), "%u:%u", (unsigned)b->guest_uid, (unsigned)b->guest_gid);
	const char *as_root[] = {"exec", "-u", "root", s->name, "sh", "-c",
				 "mkdir -p -- \"$1\" && chown -- \"$2\" \"$1\"", "sh", wd, ids, NULL};
	int rc = lifecycle(b, "exec (mkdir as root)", as_root, SBX_QUICK_TIMEOUT_S, NULL);
	if (rc < 0) {
		char why[SB_REASON_MAX];
		snprintf(why, sizeof(why), "%s", b->error);
		snprintf(b->error, sizeof(b->error), "sbx sandbox %.60s: cannot make the workdir %.100s (%.200s): pick one its user may make with -o workdir=",
			 s->name, wd, why);
	}
	return rc;
}

int sbx_remove_sandbox(const char *cli, const char *name, char *err, size_t errlen)
{
	const char *args[] = {"rm", "-f", name, NULL};
	struct sbx_outcome o;
	char *out = NULL, *serr = NULL;
	double prev = call_deadline_suspend();
	int rc = sbx_cli_capture(cli, args, SBX_RM_TIMEOUT_S, 1u << 16, &o, &out, &serr);
	call_deadline_restore(prev);
	if (rc == 0 && o.exited && o.status == 0) {
		free(out);
		free(serr);
		return 0;
	}
	/* rm of a missing sandbox fails: gone is what we wanted */
	int ex = sbx_sandbox_exists(cli, name, err, errlen);
	if (ex == 0)
		rc = 0;
	else if (ex > 0 && o.timed_out)
		snprintf(err, errlen, "`sbx rm -f %s` did not finish within %.0f s", name, SBX_RM_TIMEOUT_S), rc = -EIO;
	else if (ex > 0)
		sbx_describe(err, errlen, "rm", serr, o.status), rc = -EIO;
	else
		rc = -EIO;
	free(out);
	free(serr);
	return rc;
}

/* ---- lifetime and idle timeout ---- */

static void *watch(void *arg)
{
	struct sb_backend *b = arg;
	struct sbx *s = b->priv;
	struct sb_lifetime clock;
	sb_lifetime_start(&clock, b);
	pthread_mutex_lock(&s->lock);
	while (!s->stopping && !sb_backend_is_dead(b)) {
		unsigned secs = 0;
		double wait = 1.0;
		const char *why = sb_lifetime_check(&clock, b, call_deadline_now(), &secs, &wait);
		if (why) {
			pthread_mutex_unlock(&s->lock);
			sb_backend_fail(b, "%s (%u s) ended: sbx sandbox %s was removed", why, secs, s->name);
			char err[SB_REASON_MAX];
			if (sbx_remove_sandbox(s->cfg.cli, s->name, err, sizeof(err)) < 0)
				sb_warn("sbx: %s; it stays until `sbfs sweep -o backend=sbx`", err);
			pthread_mutex_lock(&s->lock);
			break;
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		long ns = ts.tv_nsec + (long)(wait * 1e9);
		ts.tv_sec += ns / 1000000000L;
		ts.tv_nsec = ns % 1000000000L;
		pthread_cond_timedwait(&s->cond, &s->lock, &ts);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static void watcher_stop(struct sbx *s)
{
	if (!s->watcher_on)
		return;
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->watcher, NULL);
	s->watcher_on = false;
}

/* ---- create ---- */

static double create_timeout(const struct sb_spec *spec, char *err, size_t n)
{
	const char *v = sb_spec_option(spec, "create_timeout");
	if (!v)
		return SBX_CREATE_TIMEOUT_S;
	char *end;
	double d = strtod(v, &end);
	if (!*v || *end || !(d >= 1 && d <= 86400)) {
		snprintf(err, n, "-o create_timeout= takes seconds, 1 to 86400");
		return -1;
	}
	return d;
}

static int create_sandbox(struct sb_backend *b, double timeout)
{
	struct sbx *s = b->priv;
	/* the record first: a daemon killed during create leaves something
	 * sweep can find */
	struct sbx_record rec = {.keep = b->spec.keep};
	sbx_record_self(&rec);
	snprintf(rec.dir, sizeof(rec.dir), "%s", s->dir);
	int rc = sbx_record_write(s->name, &rec);
	if (rc < 0) {
		snprintf(b->error, sizeof(b->error), "cannot write the sbx sandbox record for sweep: %s", strerror(-rc));
		return rc;
	}
	const char *args[20];
	size_t k = 0;
	args[k++] = "create";
	args[k++] = "--name";
	args[k++] = s->name;
	args[k++] = "-q";
	args[k++] = "--memory";
	args[k++] = s->cfg.memory;
	if (s->cfg.cpus[0]) {
		args[k++] = "--cpus";
		args[k++] = s->cfg.cpus;
	}
	if (s->cfg.image) {
		args[k++] = "-t";
		args[k++] = s->cfg.image;
	}
	args[k++] = "shell";
	args[k++] = s->workspace;
	args[k] = NULL;
	s->owned = true; /* from here on, a failure removes what may exist */
	enum sbx_failure why = SBX_FAIL_OTHER;
	rc = lifecycle_why(b, "create", args, timeout, NULL, &why);
	/* refused before anything was made: nothing to remove (and signed
	 * out, no rm could) */
	if (rc < 0 && (why == SBX_FAIL_SIGNED_OUT || why == SBX_FAIL_NO_POLICY ||
		       why == SBX_FAIL_EXISTS))
		s->owned = false;
	if (rc == 0 && s->cfg.net.allow[0]) {
		const char *pol[] = {"policy", "allow", "network", s->name, s->cfg.net.allow, NULL};
		rc = lifecycle(b, "policy allow network", pol, SBX_QUICK_TIMEOUT_S, NULL);
	}
	return rc;
}

static int attach_sandbox(struct sb_backend *b)
{
	struct sbx *s = b->priv;
	int ex = sbx_sandbox_exists(s->cfg.cli, s->name, b->error, sizeof(b->error));
	if (ex < 0)
		return ex;
	if (ex == 0) {
		snprintf(b->error, sizeof(b->error), "attach: no sbx sandbox '%.200s': `sbx ls` lists them", s->name);
		return -ENOENT;
	}
	/* one we made: this daemon is its user now (its keep flag stays) */
	struct sbx_record rec;
	if (sbx_record_read(s->name, &rec) == 0) {
		sbx_record_self(&rec);
		sbx_record_write(s->name, &rec);
	}
	return 0;
}

static bool name_ok(const char *n)
{
	if (!*n || strlen(n) >= SB_NAME_MAX * 2)
		return false;
	for (const char *p = n; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr("-.+_", *p)))
			return false;
	return n[0] != '-';
}

/* Our traces of a sandbox that is gone: its private directory (with the
 * record's, should a crashed daemon of the same name have left another)
 * and its record. */
static void forget(struct sbx *s)
{
	struct sbx_record rec;
	if (sbx_record_read(s->name, &rec) == 0 && strcmp(rec.dir, s->dir))
		sbx_private_remove(rec.dir);
	sbx_private_remove(s->dir);
	s->dir[0] = s->workspace[0] = s->tmpdir[0] = '\0';
	sbx_record_remove(s->name);
}

static int sbx_create(struct sb_backend *b, const struct sb_spec *spec)
{
	(void)spec; /* b->spec is the same, and owned */
	struct sbx *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	b->priv = s;
	bool attach = b->spec.attach_id != NULL;
	int rc = sbx_config_load(&b->spec, attach, &s->cfg, b->error, sizeof(b->error));
	if (rc < 0)
		return rc;
	double timeout = create_timeout(&b->spec, b->error, sizeof(b->error));
	if (timeout < 0)
		return -EINVAL;
	snprintf(s->name, sizeof(s->name), "%s", attach ? b->spec.attach_id : b->spec.name);
	if (!name_ok(s->name)) {
		snprintf(b->error, sizeof(b->error), "'%.100s' is not an sbx sandbox name (letters, digits, -, ., +)", s->name);
		return -EINVAL;
	}
	rc = sbx_private_make(s->dir, sizeof(s->dir), !attach, b->error, sizeof(b->error));
	if (rc < 0) {
		s->dir[0] = '\0';
		return rc;
	}
	snprintf(s->tmpdir, sizeof(s->tmpdir), "%s/env", s->dir);
	if (!attach)
		snprintf(s->workspace, sizeof(s->workspace), "%s/ws", s->dir);
	rc = attach ? attach_sandbox(b) : create_sandbox(b, timeout);
	if (rc == 0)
		rc = learn_user(b);
	if (rc == 0)
		rc = make_workdir(b);
	if (rc == 0 && (b->spec.sandbox_timeout_s || b->spec.idle_timeout_s)) {
		if (pthread_create(&s->watcher, NULL, watch, b) == 0)
			s->watcher_on = true;
		else
			rc = -ENOMEM;
	}
	if (rc < 0) {
		if (!b->error[0] && sb_backend_is_dead(b))
			snprintf(b->error, sizeof(b->error), "%s", b->dead_reason);
		/* a sandbox we made and cannot use is not left running */
		if (s->owned) {
			char err[SB_REASON_MAX];
			if (sbx_remove_sandbox(s->cfg.cli, s->name, err, sizeof(err)) < 0)
				sb_warn("sbx: could not remove %s: %s; `sbfs sweep -o backend=sbx` will", s->name, err);
			else
				forget(s);
			s->owned = false;
		} else if (!attach) {
			forget(s);
		}
		return rc;
	}
	snprintf(b->id, sizeof(b->id), "%s", s->name);
	if (attach)
		sb_info("sbx: attached to sandbox %s (%s, guest user %u)", s->name,
			s->cfg.cli, (unsigned)b->guest_uid);
	else
		sb_info("sbx: sandbox %s (%s, workspace dir %s, guest user %u, host network policy %s)",
			s->name, s->cfg.cli, s->workspace, (unsigned)b->guest_uid,
			sbx_policy_name(s->cfg.net.policy));
	return 0;
}

static int sbx_destroy(struct sb_backend *b)
{
	struct sbx *s = b->priv;
	if (!s)
		return 0;
	watcher_stop(s);
	/* an attached sandbox reaches here only from `sbfs destroy` */
	if (!s->owned && !b->spec.attach_id)
		return 0;
	char err[SB_REASON_MAX];
	if (sbx_remove_sandbox(s->cfg.cli, s->name, err, sizeof(err)) < 0) {
		sb_err("sbx: %s; remove it with `sbx rm -f %s` or `sbfs sweep -o backend=sbx`", err, s->name);
		return -EIO;
	}
	forget(s);
	s->owned = false;
	return 0;
}

static void sbx_release(struct sb_backend *b)
{
	struct sbx *s = b->priv;
	if (!s)
		return;
	watcher_stop(s);
	/* env files are gone with their execs; a kept sandbox keeps its
	 * workspace (sbx mounts it), an attached one has none */
	if (s->tmpdir[0])
		rmdir(s->tmpdir);
	if (s->dir[0] && !s->workspace[0])
		rmdir(s->dir);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
	b->priv = NULL;
}

const struct sb_backend_ops sb_sbx_ops = {
	.name = "sbx",
	.summary = "Docker Sandboxes microVM on this machine, through the sbx CLI (sbx login; -o host_network_policy=)",
	.option_keys = sbx_option_keys,
	.create = sbx_create,
	.exec = sbx_exec,
	/* signals reach the command's process group, from a second exec */
	.exec_signals = true,
	/* sbx exec -i -t with the CLI on a host pty (sbx_cli.c) */
	.exec_tty = true,
	.destroy = sbx_destroy,
	.list_owned = sbx_list_owned,
	.release = sbx_release,
	.sweep = sbx_sweep,
};
