/* The `e2b` backend: an E2B sandbox over its control-plane REST API and
 * its in-sandbox daemon envd (e2b-dev/E2B: spec/openapi.yml,
 * spec/envd/). create = POST /sandboxes (or /connect to attach), then the
 * workdir and the guest user's ids; while mounted a thread keeps the
 * sandbox's timeout ahead of now; destroy = DELETE, where 404 is success. */
#include "e2b.h"
#include "backends/exec_pump.h"
#include "backends/guest_watch.h"
#include "backends/output_capture.h"
#include "transport/base64.h"
#include "util/log.h"

#include <ctype.h>
#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_TIMEOUT_S 86400u   /* E2B's longest (Pro) lifetime */

static const char *const e2b_option_keys[] = {
	"template", "ca_file", "user", "egress_enforcement", "keepalive_timeout", NULL,
};

/* ---- spec checks: refuse what E2B cannot enforce ---- */

static bool egress_entry_ok(const char *h)
{
	if (!*h || strlen(h) > 253 || strpbrk(h, ":@?#[] \t"))
		return false;
	if (strchr(h, '/')) { /* a CIDR: digits, dots and one /N */
		for (const char *p = h; *p; p++)
			if (!isdigit((unsigned char)*p) && *p != '.' && *p != '/')
				return false;
		return true;
	}
	for (const char *p = h; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr(".-*", *p))
			return false;
	return strchr(h, '.') != NULL;
}

static int check_spec(struct sb_backend *b)
{
	const struct sb_spec *s = &b->spec;
	char *e = b->error;
	size_t n = sizeof(b->error);
	int r = sb_spec_check_sni_allowlist(
		b, "E2B filters egress by domain only for HTTP Host (port 80) and TLS SNI (443), other ports by address, and leaves DNS to 8.8.8.8 open");
	if (r < 0)
		return r;
	if (s->allow_egress_to) {
		for (size_t i = 0; s->allow_egress_to[i]; i++)
			if (!egress_entry_ok(s->allow_egress_to[i])) {
				snprintf(e, n, "allow_egress_to entry '%.200s' is not a hostname, '*.'-domain, address or CIDR E2B takes",
					 s->allow_egress_to[i]);
				return -EINVAL;
			}
	}
	if (!s->workdir || s->workdir[0] != '/') {
		snprintf(e, n, "E2B needs an absolute workdir");
		return -EINVAL;
	}
	if (s->cpu > 0 || s->memory_mb || s->disk_mb) {
		snprintf(e, n, "E2B sizes a sandbox by its template, not per sandbox: drop cpu=/memory=/disk= or pick a template (-o template=) built with them");
		return -EINVAL;
	}
	if (s->idle_timeout_s) {
		snprintf(e, n, "E2B has no idle timeout, only a lifetime: drop idle_timeout= and use sandbox_timeout=");
		return -EINVAL;
	}
	if (s->sandbox_timeout_s > MAX_TIMEOUT_S) {
		snprintf(e, n, "E2B keeps a sandbox at most %u s (24 h, less on some plans): lower sandbox_timeout=", MAX_TIMEOUT_S);
		return -EINVAL;
	}
	for (size_t i = 0; s->env && s->env[i]; i++) {
		const char *kv = s->env[i];
		size_t k = strcspn(kv, "=");
		bool ok = k > 0 && kv[k] == '=' && (isalpha((unsigned char)kv[0]) || kv[0] == '_');
		for (size_t j = 1; ok && j < k; j++)
			ok = isalnum((unsigned char)kv[j]) || kv[j] == '_';
		if (!ok || !exec_utf8_valid(kv)) {
			snprintf(e, n, "environment entry '%.100s' must be NAME=VALUE with NAME of letters, digits and _ (UTF-8)", kv);
			return -EINVAL;
		}
	}
	const char *user = sb_spec_option(s, "user");
	if (user && (!*user || strlen(user) > 32 || strpbrk(user, ":/ \t\r\n&=?%"))) {
		snprintf(e, n, "-o user= needs a Linux user name of the sandbox, e.g. user=root");
		return -EINVAL;
	}
	return 0;
}

/* ---- metadata ---- */

/* The SDKs' advice: keep our own values to [A-Za-z0-9._-], so the list
 * filter's nested escaping cannot misread them. */
static void meta_value(char *out, size_t n, const char *v)
{
	snprintf(out, n, "%s", v && *v ? v : "unknown");
	for (char *p = out; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
			*p = '_';
}

static json_t *metadata(struct sb_backend *b)
{
	char host[256] = "", pid[32], owner[64], v[256];
	gethostname(host, sizeof(host) - 1);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	struct passwd *pw = getpwuid(getuid());
	meta_value(owner, sizeof(owner), pw ? pw->pw_name : NULL);
	json_t *m = json_object();
	/* what sweep recognises: ours, and whose daemon on which host */
	json_object_set_new(m, "sbfs", json_string("1"));
	json_object_set_new(m, "sbfs-owner", json_string(owner));
	meta_value(v, sizeof(v), host);
	json_object_set_new(m, "sbfs-host", json_string(v));
	json_object_set_new(m, "sbfs-pid", json_string(pid));
	json_object_set_new(m, "sbfs-name", json_string(b->spec.name));
	if (b->spec.keep)
		json_object_set_new(m, "sbfs-keep", json_string("1"));
	for (size_t i = 0; b->spec.tags && b->spec.tags[i]; i++) {
		char kv[512];
		snprintf(kv, sizeof(kv), "%s", b->spec.tags[i]);
		char *eq = strchr(kv, '=');
		if (eq)
			*eq = '\0';
		if (exec_utf8_valid(kv) && (!eq || exec_utf8_valid(eq + 1)))
			json_object_set_new(m, kv, json_string(eq ? eq + 1 : ""));
	}
	return m;
}

/* ---- create ---- */

static int take_sandbox(struct sb_backend *b, struct e2b *e, const json_t *j)
{
	const char *id = json_string_value(json_object_get(j, "sandboxID"));
	const char *tok = json_string_value(json_object_get(j, "envdAccessToken"));
	const char *dom = json_string_value(json_object_get(j, "domain"));
	if (!id || !*id || strlen(id) >= sizeof(e->sandbox_id) || strpbrk(id, "/?#%& ")) {
		snprintf(b->error, sizeof(b->error), "E2B answered the create without a usable sandboxID");
		return -EIO;
	}
	snprintf(e->sandbox_id, sizeof(e->sandbox_id), "%s", id);
	snprintf(e->access_token, sizeof(e->access_token), "%s", tok ? tok : "");
	snprintf(e->domain, sizeof(e->domain), "%s", dom ? dom : "");
	return 0;
}

static int create_sandbox(struct sb_backend *b, struct e2b *e)
{
	const struct sb_spec *s = &b->spec;
	const char *tmpl = sb_spec_option(s, "template");
	if (!tmpl || !*tmpl)
		tmpl = s->image && *s->image ? s->image : E2B_DEFAULT_TEMPLATE;
	json_t *env = json_object();
	for (size_t i = 0; s->env && s->env[i]; i++) {
		const char *eq = strchr(s->env[i], '=');
		char *k = strndup(s->env[i], (size_t)(eq - s->env[i]));
		if (k)
			json_object_set_new(env, k, json_string(eq + 1));
		free(k);
	}
	json_t *body = json_pack("{s:s,s:I,s:b,s:o,s:o,s:b}",
				 "templateID", tmpl,
				 "timeout", (json_int_t)e->timeout_s,
				 "secure", 1,
				 "envVars", env,
				 "metadata", metadata(b),
				 "allow_internet_access", !s->block_network);
	if (!body)
		return -ENOMEM;
	if (s->allow_egress_to && s->allow_egress_to[0]) {
		json_t *allow = json_array();
		for (size_t i = 0; s->allow_egress_to[i]; i++)
			json_array_append_new(allow, json_string(s->allow_egress_to[i]));
		/* allow beats deny: everything else stays blocked */
		json_object_set_new(body, "network", json_pack("{s:o,s:[s]}", "allowOut", allow,
								"denyOut", "0.0.0.0/0"));
	}
	struct e2b_reply r;
	int rc = e2b_api_call(e, "POST", "/sandboxes", body, false, 120000, &r);
	json_decref(body);
	if (rc < 0 || (r.status != 201 && r.status != 200)) {
		e2b_describe(e, b->error, sizeof(b->error), "sandbox create", &r);
		if (r.status == 404)
			snprintf(b->error, sizeof(b->error), "E2B has no template '%.200s' (%.200s): pick one with -o template=",
				 tmpl, r.message);
		e2b_reply_free(&r);
		return -EIO;
	}
	rc = take_sandbox(b, e, r.json);
	e2b_reply_free(&r);
	if (rc == 0)
		e->owned = true;
	return rc;
}

static char *metadata_filter(const char *k, const char *v);

/* sbfs's own name for a sandbox (sbfs-<random>, in its metadata) -> the
 * E2B id; anything else is taken as an E2B id. */
static int resolve_name(struct sb_backend *b, struct e2b *e, const char *name,
			char *id, size_t n)
{
	snprintf(id, n, "%s", name);
	if (strncmp(name, "sbfs-", 5) != 0)
		return 0;
	char *f = metadata_filter("sbfs-name", name), path[1024];
	if (!f)
		return -ENOMEM;
	snprintf(path, sizeof(path), "/v2/sandboxes?metadata=%s&limit=2", f);
	free(f);
	struct e2b_reply r;
	int rc = e2b_api_call(e, "GET", path, NULL, true, 30000, &r);
	if (rc < 0 || r.status != 200) {
		e2b_describe(e, b->error, sizeof(b->error), "sandbox lookup", &r);
		e2b_reply_free(&r);
		return -EIO;
	}
	const char *sid = json_string_value(json_object_get(json_array_get(r.json, 0), "sandboxID"));
	if (!sid || json_array_size(r.json) != 1) {
		snprintf(b->error, sizeof(b->error), "attach: %s E2B sandbox named '%.200s' runs: pass its E2B id instead",
			 sid ? "more than one" : "no", name);
		e2b_reply_free(&r);
		return -ENOENT;
	}
	snprintf(id, n, "%s", sid);
	e2b_reply_free(&r);
	return 0;
}

static int attach_sandbox(struct sb_backend *b, struct e2b *e, const char *name)
{
	char id[256];
	int rc0 = resolve_name(b, e, name, id, sizeof(id));
	if (rc0 < 0)
		return rc0;
	char *q = http_query_escape(id), path[400];
	if (!q)
		return -ENOMEM;
	snprintf(path, sizeof(path), "/sandboxes/%s/connect", q);
	free(q);
	/* connect resumes a paused sandbox, and its timeout starts again */
	json_t *body = json_pack("{s:I}", "timeout", (json_int_t)e->timeout_s);
	struct e2b_reply r;
	int rc = e2b_api_call(e, "POST", path, body, true, 120000, &r);
	json_decref(body);
	if (rc == 0 && r.status == 404) {
		snprintf(b->error, sizeof(b->error), "attach: no E2B sandbox '%.200s' (or not yours): check the id with `sbfs status`", id);
		e2b_reply_free(&r);
		return -ENOENT;
	}
	if (rc < 0 || (r.status != 200 && r.status != 201)) {
		e2b_describe(e, b->error, sizeof(b->error), "sandbox connect", &r);
		e2b_reply_free(&r);
		return -EIO;
	}
	rc = take_sandbox(b, e, r.json);
	e2b_reply_free(&r);
	return rc;
}

static int kill_sandbox(struct e2b *e, const char *id, char *err, size_t n)
{
	char *q = http_query_escape(id), path[400];
	if (!q)
		return -ENOMEM;
	snprintf(path, sizeof(path), "/sandboxes/%s", q);
	free(q);
	struct e2b_reply r;
	int rc = e2b_api_call(e, "DELETE", path, NULL, true, 30000, &r);
	/* already gone is what we wanted */
	if (rc == 0 && (r.status == 204 || r.status == 200 || r.status == 404)) {
		e2b_reply_free(&r);
		return 0;
	}
	e2b_describe(e, err, n, "sandbox kill", &r);
	e2b_reply_free(&r);
	return -EIO;
}

/* The user commands run as, for ownership: one command at create. */
static int learn_user(struct sb_backend *b, struct e2b *e)
{
	const char *argv[] = {"sh", "-c", "id -u; id -g; id -un", NULL};
	struct output_capture out = {.limit = 4096};
	struct e2b_run r = {
		.argv = argv, .cwd = "/", .timeout_s = 60, .stdin_fd = -1,
		.cancel_fd = -1, .on_stdout = output_capture_cb, .cb_arg = &out,
	};
	struct sb_exec_result res;
	int rc = e2b_run(b, &r, &res);
	unsigned long u = 0, g = 0;
	char name[64] = "";
	if (rc == 0 && res.exit_code != 0) {
		snprintf(b->error, sizeof(b->error), "E2B sandbox %s: `id` exited %d", e->sandbox_id, res.exit_code);
		rc = -EIO;
	} else if (rc == 0 && (!out.data || sscanf(out.data, "%lu %lu %63s", &u, &g, name) < 2)) {
		snprintf(b->error, sizeof(b->error), "E2B sandbox %s: cannot tell its user's ids", e->sandbox_id);
		rc = -EIO;
	}
	output_capture_free(&out);
	if (rc < 0)
		return rc;
	b->guest_uid = (uid_t)u;
	b->guest_gid = (gid_t)g;
	snprintf(e->guest_name, sizeof(e->guest_name), "%s", name);
	return 0;
}

/* The workdir, owned by the user commands run as. E2B's templates run as
 * an unprivileged user whose home is the only place it may create in: a
 * workdir elsewhere (the default /workspace) is made by envd's root. */
static int make_workdir(struct sb_backend *b, struct e2b *e)
{
	const char *wd = b->spec.workdir;
	json_t *req = json_pack("{s:s}", "path", wd);
	int rc = e2b_rpc(b, "filesystem.Filesystem/MakeDir", req, NULL);
	json_decref(req);
	if (rc == -EEXIST)
		rc = 0;
	if (rc == -EACCES) {
		char uid[24], gid[24];
		snprintf(uid, sizeof(uid), "%u", (unsigned)b->guest_uid);
		snprintf(gid, sizeof(gid), "%u", (unsigned)b->guest_gid);
		const char *argv[] = {"sh", "-c", "mkdir -p -- \"$1\" && chown -- \"$2:$3\" \"$1\"",
				      "sh", wd, uid, gid, NULL};
		struct output_capture err = {.limit = 1024, .keep_head = true};
		struct e2b_run r = {
			.argv = argv, .cwd = "/", .timeout_s = 60, .stdin_fd = -1,
			.cancel_fd = -1, .on_stderr = output_capture_cb, .cb_arg = &err,
			.as_root = true,
		};
		struct sb_exec_result res;
		rc = e2b_run(b, &r, &res);
		if (rc == 0 && res.exit_code != 0) {
			snprintf(b->error, sizeof(b->error), "E2B sandbox %.60s: cannot make the workdir %.150s as root: %.200s",
				 e->sandbox_id, wd, err.data ? err.data : "no message");
			b->error[strcspn(b->error, "\n")] = '\0';
			rc = -EACCES;
		}
		output_capture_free(&err);
	}
	if (rc < 0 && !b->error[0])
		snprintf(b->error, sizeof(b->error), "E2B sandbox %.60s: cannot make the workdir %.150s: %.250s",
			 e->sandbox_id, wd, sb_backend_is_dead(b) ? b->dead_reason : strerror(-rc));
	return rc;
}

/* ---- keepalive: the timeout stays ahead while mounted ---- */

static void *keeper_main(void *arg)
{
	struct sb_backend *b = arg;
	struct e2b *e = b->priv;
	/* a third of the window: two renewals may fail before it runs out */
	unsigned every = e->timeout_s / 3;
	if (every < 1)
		every = 1;
	char path[300];
	snprintf(path, sizeof(path), "/sandboxes/%s/timeout", e->sandbox_id);
	pthread_mutex_lock(&e->lock);
	while (!e->stopping) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += every;
		while (!e->stopping &&
		       pthread_cond_timedwait(&e->cond, &e->lock, &ts) != ETIMEDOUT)
			;
		if (e->stopping || sb_backend_is_dead(b))
			break;
		pthread_mutex_unlock(&e->lock);
		json_t *body = json_pack("{s:I}", "timeout", (json_int_t)e->timeout_s);
		struct e2b_reply r;
		int rc = e2b_api_call(e, "POST", path, body, true, 30000, &r);
		json_decref(body);
		if (rc == 0 && r.status == 404)
			sb_backend_fail(b, "the E2B sandbox %s is gone (killed, or past its timeout)", e->sandbox_id);
		else if (rc == 0 && (r.status == 401 || r.status == 403)) {
			char msg[SB_REASON_MAX];
			e2b_describe(e, msg, sizeof(msg), "timeout extension", &r);
			sb_backend_fail(b, "%s", msg);
		} else if (rc < 0 || (r.status != 204 && r.status != 200))
			sb_warn("e2b: could not extend the timeout of %s (HTTP %ld %s); trying again in %u s",
				e->sandbox_id, r.status, r.message, every);
		e2b_reply_free(&r);
		pthread_mutex_lock(&e->lock);
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

static void keeper_stop(struct e2b *e)
{
	if (!e->keeper_on)
		return;
	pthread_mutex_lock(&e->lock);
	e->stopping = true;
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
	pthread_join(e->keeper, NULL);
	e->keeper_on = false;
}

static int e2b_create(struct sb_backend *b, const struct sb_spec *spec)
{
	(void)spec; /* b->spec is the same, and owned */
	int rc = check_spec(b);
	if (rc < 0)
		return rc;
	struct e2b *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->cond, NULL);
	b->priv = e;
	/* sandbox_timeout= is a lifetime: E2B ends the sandbox then. Without
	 * it the sandbox lives while mounted: its E2B timeout (how long it
	 * outlives a crashed daemon) is renewed before it runs out. */
	e->timeout_s = E2B_DEFAULT_TIMEOUT_S;
	const char *ka = sb_spec_option(&b->spec, "keepalive_timeout");
	if (ka) {
		char *end;
		unsigned long v = strtoul(ka, &end, 10);
		if (!*ka || *end || v < 3 || v > MAX_TIMEOUT_S) {
			snprintf(b->error, sizeof(b->error), "-o keepalive_timeout= takes seconds, 3 to %u", MAX_TIMEOUT_S);
			return -EINVAL;
		}
		e->timeout_s = (unsigned)v;
	}
	e->renew = true;
	if (b->spec.sandbox_timeout_s) {
		e->timeout_s = b->spec.sandbox_timeout_s;
		e->renew = false;
	}
	const char *user = sb_spec_option(&b->spec, "user");
	snprintf(e->user, sizeof(e->user), "%s", user ? user : "");
	if (e2b_config_load(&e->cfg, &b->spec, b->error, sizeof(b->error)) < 0)
		return -EINVAL;
	rc = e2b_api_init(e, b->error, sizeof(b->error));
	if (rc < 0)
		return rc;
	rc = b->spec.attach_id ? attach_sandbox(b, e, b->spec.attach_id)
			       : create_sandbox(b, e);
	if (rc < 0)
		return rc;
	rc = e2b_envd_init(e, e->domain, b->error, sizeof(b->error));
	if (rc == 0)
		rc = learn_user(b, e);
	if (rc == 0)
		rc = make_workdir(b, e);
	if (rc == 0 && e->renew) {
		if (pthread_create(&e->keeper, NULL, keeper_main, b) == 0)
			e->keeper_on = true;
		else
			rc = -ENOMEM;
	}
	if (rc < 0) {
		if (!b->error[0] && sb_backend_is_dead(b))
			snprintf(b->error, sizeof(b->error), "%s", b->dead_reason);
		char err[SB_REASON_MAX];
		/* a sandbox we made and cannot use is not left running */
		if (e->owned && kill_sandbox(e, e->sandbox_id, err, sizeof(err)) < 0)
			sb_warn("e2b: could not kill %s: %s", e->sandbox_id, err);
		e->owned = false;
		return rc < 0 ? rc : -EIO;
	}
	/* the id sbfs shows and -o attach= takes: sbfs's name for it (the E2B
	 * id works for attach too, and is in the log) */
	snprintf(b->id, sizeof(b->id), "%s", b->spec.attach_id ? b->spec.attach_id : b->spec.name);
	sb_info("e2b: sandbox %s is E2B sandbox %s (envd %s, user %s)", b->id,
		e->sandbox_id, e->envd.base_url, e->guest_name);
	return 0;
}

static int e2b_destroy(struct sb_backend *b)
{
	struct e2b *e = b->priv;
	if (!e)
		return 0;
	keeper_stop(e);
	/* an attached sandbox reaches here only from `sbfs destroy` */
	if ((!e->owned && !b->spec.attach_id) || !e->sandbox_id[0])
		return 0;
	char err[SB_REASON_MAX];
	if (kill_sandbox(e, e->sandbox_id, err, sizeof(err)) < 0) {
		sb_err("%s; it ends by itself at its timeout, or run `sbfs sweep -o backend=e2b`", err);
		return -EIO;
	}
	e->owned = false;
	return 0;
}

static void e2b_release(struct sb_backend *b)
{
	struct e2b *e = b->priv;
	if (!e)
		return;
	keeper_stop(e);
	if (e->api_init)
		http_endpoint_free(&e->api);
	if (e->envd_init)
		http_endpoint_free(&e->envd);
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->cond);
	memset(e->cfg.api_key, 0, sizeof(e->cfg.api_key));
	memset(e->api_hdr, 0, sizeof(e->api_hdr));
	memset(e->access_token, 0, sizeof(e->access_token));
	memset(e->hdr_store, 0, sizeof(e->hdr_store));
	free(e);
	b->priv = NULL;
}

/* ---- sweep ---- */


/* The list filter is URL-decoded three times by the server; escape as the
 * SDKs do: each key and value twice, the whole once more. */
static char *metadata_filter(const char *k, const char *v)
{
	char *k1 = http_query_escape(k), *v1 = http_query_escape(v);
	char *k2 = k1 ? http_query_escape(k1) : NULL, *v2 = v1 ? http_query_escape(v1) : NULL;
	char *inner = NULL, *out = NULL;
	if (k2 && v2 && asprintf(&inner, "%s=%s", k2, v2) >= 0)
		out = http_query_escape(inner);
	free(k1); free(v1); free(k2); free(v2); free(inner);
	return out;
}

/* "2026-12-02T14:05:09.123Z" (startedAt) as a time; 0 if not that. */
static time_t parse_started(const char *s)
{
	struct tm tm = {0};
	if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
		return 0;
	return timegm(&tm);
}

static void judge(const json_t *s, const char *host, struct sb_owned *o)
{
	const char *id = json_string_value(json_object_get(s, "sandboxID"));
	const json_t *md = json_object_get(s, "metadata");
	const char *h = json_string_value(json_object_get(md, "sbfs-host"));
	const char *pid_s = json_string_value(json_object_get(md, "sbfs-pid"));
	const char *name = json_string_value(json_object_get(md, "sbfs-name"));
	int pid = pid_s ? atoi(pid_s) : 0;
	memset(o, 0, sizeof(*o));
	/* by its sbfs name, as status shows it */
	snprintf(o->id, sizeof(o->id), "%s", name && *name ? name : id);
	snprintf(o->ref, sizeof(o->ref), "%s", id);
	o->created = parse_started(json_string_value(json_object_get(s, "startedAt")));
	if (!h || strcmp(h, host) != 0) {
		o->state = SB_OWNED_IN_USE;
		snprintf(o->why, sizeof(o->why), "mounted from host %.100s", h ? h : "unknown");
	} else if (json_object_get(md, "sbfs-keep")) {
		o->state = SB_OWNED_KEPT;
		snprintf(o->why, sizeof(o->why), "kept with -o keep");
	} else if (!sb_daemon_gone(pid)) {
		o->state = SB_OWNED_IN_USE;
		snprintf(o->why, sizeof(o->why), "in use by sbfs pid %d", pid);
	} else {
		o->state = SB_OWNED_ORPHAN;
		snprintf(o->why, sizeof(o->why), "daemon pid %d is gone", pid);
	}
}

/* Our sandboxes (metadata sbfs=1), page by page, judged as list_owned
 * says; *e stays set up for sweep's kills. */
static int list_sandboxes(struct e2b *e, const struct sb_spec *spec,
			  struct sb_owned **out, size_t *nout, char *err, size_t errlen)
{
	*out = NULL;
	*nout = 0;
	if (e2b_config_load(&e->cfg, spec, err, errlen) < 0 || e2b_api_init(e, err, errlen) < 0)
		return -EINVAL;
	char host[256] = "", hv[256];
	gethostname(host, sizeof(host) - 1);
	meta_value(hv, sizeof(hv), host);
	char *filter = metadata_filter("sbfs", "1");
	if (!filter) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	struct sb_owned *v = NULL;
	size_t n = 0;
	int rc = 0;
	char token[512] = "";
	for (int page = 0; page < 1000 && rc == 0; page++) {
		char path[2048];
		char *t = token[0] ? http_query_escape(token) : NULL;
		snprintf(path, sizeof(path), "/v2/sandboxes?metadata=%s&state=running,paused&limit=100%s%s",
			 filter, t ? "&nextToken=" : "", t ? t : "");
		free(t);
		struct e2b_reply r;
		if (e2b_api_call(e, "GET", path, NULL, true, 30000, &r) < 0 || r.status != 200) {
			e2b_describe(e, err, errlen, "sandbox list", &r);
			e2b_reply_free(&r);
			rc = -EIO;
			break;
		}
		struct sb_owned *nv = realloc(v, (n + json_array_size(r.json) + 1) * sizeof(*v));
		if (!nv) {
			snprintf(err, errlen, "out of memory");
			rc = -ENOMEM;
		} else {
			v = nv;
			size_t i;
			json_t *s;
			json_array_foreach(r.json, i, s)
				if (json_string_value(json_object_get(s, "sandboxID")))
					judge(s, hv, &v[n++]);
		}
		snprintf(token, sizeof(token), "%s", r.next_token);
		e2b_reply_free(&r);
		if (!token[0])
			break;
	}
	free(filter);
	if (rc < 0) {
		free(v);
		return rc;
	}
	*out = v;
	*nout = n;
	return 0;
}

static void e2b_close(struct e2b *e)
{
	if (e->api_init)
		http_endpoint_free(&e->api);
	memset(e->cfg.api_key, 0, sizeof(e->cfg.api_key));
	memset(e->api_hdr, 0, sizeof(e->api_hdr));
	free(e);
}

static int e2b_list_owned(const struct sb_spec *spec, struct sb_owned **v, size_t *n,
			  char *err, size_t errlen)
{
	/* no API key: E2B is not set up here, nothing to say */
	const char *key = getenv("E2B_API_KEY");
	if (!key || !*key)
		return SB_OWNED_NONE;
	struct e2b *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	int rc = list_sandboxes(e, spec, v, n, err, errlen);
	e2b_close(e);
	return rc;
}

static int e2b_sweep(const struct sb_spec *spec)
{
	struct e2b *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	char err[SB_REASON_MAX];
	struct sb_owned *v;
	size_t n;
	int rc = list_sandboxes(e, spec, &v, &n, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "sbfs: %s\n", err);
		e2b_close(e);
		return rc;
	}
	int handled = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].state != SB_OWNED_ORPHAN) {
			bool elsewhere = !strncmp(v[i].why, "mounted from host", 17);
			printf(elsewhere ? "%s: skipped (%s)\n" : "%s: %s\n", v[i].id, v[i].why);
		} else if (kill_sandbox(e, v[i].ref, err, sizeof(err)) < 0) {
			printf("%s: %s\n", v[i].id, err);
			rc = -EIO;
		} else {
			printf("%s: killed (%s)\n", v[i].id, v[i].why);
			handled++;
		}
	}
	free(v);
	if (!handled)
		printf("no orphaned E2B sandboxes\n");
	e2b_close(e);
	return rc;
}

const struct sb_backend_ops sb_e2b_ops = {
	.name = "e2b",
	.summary = "E2B sandbox over its REST and Connect APIs, hosted or self-hosted (E2B_API_KEY, E2B_DOMAIN)",
	.option_keys = e2b_option_keys,
	.create = e2b_create,
	.exec = e2b_exec,
	/* by the command's marker, from a second process (e2b_proc.c) */
	.exec_signals = true,
	/* envd's own PTY process */
	.exec_tty = true,
	.destroy = e2b_destroy,
	.release = e2b_release,
	.write_file = e2b_write_file,
	.list_dir = e2b_list_dir,
	.stat = e2b_stat,
	.mkdir = e2b_mkdir,
	.remove = e2b_remove,
	.rename = e2b_rename,
	.sweep = e2b_sweep,
	.list_owned = e2b_list_owned,
	/* a watcher inside the sandbox (guest_watch.h) */
	.watch_start = guest_watch_start,
	.watch_settle = guest_watch_settle,
	.watch_stop = guest_watch_stop,
};
