/* The `modal` backend: a Modal Sandbox driven over Modal's gRPC API
 * (modal-labs/modal-client: modal_proto/api.proto and
 * task_command_router.proto). create = app get-or-create, image from a
 * registry tag (waiting for the build), SandboxCreate (V1), its task id and
 * task-router access; every exec and file operation then goes through the
 * router. destroy = SandboxTerminate without waiting. */
#include "modal.h"
#include "backends/guest_watch.h"
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

#define DEFAULT_APP "sbfs"
#define DEFAULT_IMAGE "python:3.12-slim"
#define DEFAULT_LIFETIME_S 3600
#define TASK_WAIT_S 300.0     /* Go gives up after 600 polls of 500 ms */
#define IMAGE_JOIN_TIMEOUT 55.0f
#define IMAGE_STREAM_ERRORS 3

/* GenericStatus, ObjectCreationType, NetworkAccessType (notes 2.1-2.4) */
enum { GS_UNSPECIFIED = 0, GS_SUCCESS = 1 };
enum { CREATE_IF_MISSING = 1 };
enum { NET_OPEN = 1, NET_BLOCKED = 2, NET_ALLOWLIST = 3 };

static const char *const modal_option_keys[] = {
	"app", "gpu", "region", "cloud", "egress_enforcement", "ca_file", NULL,
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int fail_create(struct sb_backend *b, const char *what,
		       const struct grpc_status *st)
{
	modal_describe(b->error, sizeof(b->error), what, st);
	return -EIO;
}

/* ---- spec checks: refuse what Modal cannot enforce ---- */

/* A bare hostname with at least two labels, or "*." then one. No URL,
 * host:port, IP address or single label. */
static bool egress_host_ok(const char *h)
{
	if (!strncmp(h, "*.", 2))
		h += 2;
	size_t n = strlen(h);
	if (n == 0 || n > 253)
		return false;
	int labels = 0;
	bool all_digits_last = true;
	const char *p = h;
	while (*p) {
		size_t k = strcspn(p, ".");
		if (k == 0 || k > 63 || p[0] == '-' || p[k - 1] == '-')
			return false;
		all_digits_last = true;
		for (size_t i = 0; i < k; i++) {
			unsigned char c = (unsigned char)p[i];
			if (!isalnum(c) && c != '-')
				return false;
			if (!isdigit(c))
				all_digits_last = false;
		}
		labels++;
		p += k;
		if (*p == '.') {
			p++;
			if (!*p)
				return false;
		}
	}
	/* a dotted-quad (or any all-digit top label) is an address */
	return labels >= 2 && !all_digits_last;
}

static int check_spec(struct sb_backend *b)
{
	const struct sb_spec *s = &b->spec;
	char *e = b->error;
	size_t n = sizeof(b->error);
	int r = sb_spec_check_sni_allowlist(
		b, "Modal enforces an egress allowlist only by TLS SNI and leaves DNS open");
	if (r < 0)
		return r;
	if (s->allow_egress_to) {
		for (size_t i = 0; s->allow_egress_to[i]; i++) {
			if (!egress_host_ok(s->allow_egress_to[i])) {
				snprintf(e, n, "allow_egress_to entry '%.200s' is not a bare hostname (no URL, port, address or single label; '*.' may lead)",
					 s->allow_egress_to[i]);
				return -EINVAL;
			}
		}
	}
	if (!s->workdir || s->workdir[0] != '/') {
		snprintf(e, n, "Modal needs an absolute workdir");
		return -EINVAL;
	}
	if (s->disk_mb && s->attach_id) {
		snprintf(e, n, "disk= sizes a new sandbox; an attached one keeps the size it was made with: drop disk=");
		return -EINVAL;
	}
	if (s->disk_mb > UINT32_MAX) {
		snprintf(e, n, "Modal takes disk= up to %u MiB", (unsigned)UINT32_MAX);
		return -EINVAL;
	}
	for (size_t i = 0; s->env && s->env[i]; i++) {
		const char *kv = s->env[i];
		size_t k = strcspn(kv, "=");
		bool ok = k > 0 && kv[k] == '=' && (isalpha((unsigned char)kv[0]) || kv[0] == '_');
		for (size_t j = 1; ok && j < k; j++)
			ok = isalnum((unsigned char)kv[j]) || kv[j] == '_';
		if (!ok) {
			snprintf(e, n, "environment entry '%.100s' must be NAME=VALUE with NAME of letters, digits and _", kv);
			return -EINVAL;
		}
	}
	const char *gpu = sb_spec_option(s, "gpu");
	if (gpu && !*gpu) {
		snprintf(e, n, "-o gpu needs a type, e.g. gpu=A100 or gpu=H100:2");
		return -EINVAL;
	}
	return 0;
}

/* ---- create steps ---- */

/* Calls a unary RPC whose reply names an id in field 1, and copies that id
 * into out ("" when the reply has none). Frees req. Returns the gRPC code,
 * with the status in *st. */
static int call_for_id(struct modal *m, const char *method, struct pb_buf *req,
		       double timeout_s, char *out, size_t outlen,
		       struct grpc_status *st)
{
	struct pb_buf resp = {0};
	int code = modal_api(m, method, req, &resp, timeout_s, st);
	pb_buf_free(req);
	out[0] = '\0';
	if (code == GRPC_OK) {
		struct pb_reader r = pb_reader(resp.data, resp.len);
		struct pb_field f;
		while (pb_next(&r, &f) == 1)
			if (f.num == 1 && f.wt == PB_LEN)
				pb_strcpy(&f, out, outlen);
	}
	pb_buf_free(&resp);
	return code;
}

static int app_get_or_create(struct sb_backend *b, struct modal *m)
{
	const char *app = sb_spec_option(&b->spec, "app");
	if (!app || !*app)
		app = DEFAULT_APP;
	struct pb_buf req = {0};
	pb_string(&req, 1, app);
	pb_string(&req, 2, m->cfg.environment);
	pb_uint(&req, 3, CREATE_IF_MISSING);
	struct grpc_status st;
	int code = call_for_id(m, "AppGetOrCreate", &req, 30, m->app_id,
			       sizeof(m->app_id), &st);
	if (code != GRPC_OK)
		return fail_create(b, "app lookup", &st);
	if (!m->app_id[0]) {
		snprintf(b->error, sizeof(b->error), "Modal returned no app id for '%s'", app);
		return -EIO;
	}
	return 0;
}

/* The builder version: configured, else the environment's setting from
 * EnvironmentGetOrCreate: metadata(2).settings(2).image_builder_version(1). */
static int builder_version(struct sb_backend *b, struct modal *m, char *out, size_t n)
{
	if (m->cfg.image_builder_version[0]) {
		snprintf(out, n, "%s", m->cfg.image_builder_version);
		return 0;
	}
	struct pb_buf req = {0}, resp = {0};
	pb_string(&req, 1, m->cfg.environment);
	struct grpc_status st;
	int code = modal_api(m, "EnvironmentGetOrCreate", &req, &resp, 30, &st);
	pb_buf_free(&req);
	if (code != GRPC_OK) {
		pb_buf_free(&resp);
		return fail_create(b, "environment lookup", &st);
	}
	struct pb_reader r = pb_reader(resp.data, resp.len);
	struct pb_field f, g, h;
	while (pb_next(&r, &f) == 1) {
		if (f.num != 2 || f.wt != PB_LEN)
			continue;
		struct pb_reader r2 = pb_sub(&f);
		while (pb_next(&r2, &g) == 1) {
			if (g.num != 2 || g.wt != PB_LEN)
				continue;
			struct pb_reader r3 = pb_sub(&g);
			while (pb_next(&r3, &h) == 1)
				if (h.num == 1 && h.wt == PB_LEN)
					pb_strcpy(&h, out, n);
		}
	}
	pb_buf_free(&resp);
	return 0;
}

/* GenericResult {status=1, exception=2}: 0 = not finished yet */
static int parse_result(const struct pb_field *f, char *exc, size_t n)
{
	struct pb_reader r = pb_sub(f);
	struct pb_field g;
	int status = 0;
	while (pb_next(&r, &g) == 1) {
		if (g.num == 1 && g.wt == PB_VARINT)
			status = (int)g.u;
		else if (g.num == 2 && g.wt == PB_LEN && exc)
			pb_strcpy(&g, exc, n);
	}
	return status;
}

struct join_state {
	int status;
	char exception[300];
	char last_entry[128];
};

static int on_join(void *arg, const uint8_t *msg, size_t len)
{
	struct join_state *js = arg;
	struct pb_reader r = pb_reader(msg, len);
	struct pb_field f;
	while (pb_next(&r, &f) == 1) {
		if (f.num == 1 && f.wt == PB_LEN) {
			int s = parse_result(&f, js->exception, sizeof(js->exception));
			if (s != GS_UNSPECIFIED)
				js->status = s;
		} else if (f.num == 3 && f.wt == PB_LEN && f.len) {
			pb_strcpy(&f, js->last_entry, sizeof(js->last_entry));
		}
	}
	return 0;
}

static int image_wait(struct sb_backend *b, struct modal *m, const char *image_id,
		      const char *tag)
{
	struct join_state js = {0};
	int errors = 0;
	sb_info("modal: building image %s (%s)", tag, image_id);
	while (js.status == GS_UNSPECIFIED) {
		struct pb_buf req = {0};
		pb_string(&req, 1, image_id);
		pb_float(&req, 2, IMAGE_JOIN_TIMEOUT);
		pb_string(&req, 3, js.last_entry);
		struct grpc_call *c = grpc_call_new(m->api, MODAL_API "ImageJoinStreaming",
						    (const char *const *)m->api_md,
						    req.data, req.len,
						    IMAGE_JOIN_TIMEOUT + 10, on_join, &js);
		pb_buf_free(&req);
		if (!c)
			return -ENOMEM;
		struct grpc_status st;
		grpc_call_run(c, &st);
		grpc_call_free(c);
		if (js.status != GS_UNSPECIFIED)
			break;
		if (st.code == GRPC_OK)
			continue; /* long poll ended without a result: resume */
		if (!grpc_code_retryable(st.code) || ++errors > IMAGE_STREAM_ERRORS)
			return fail_create(b, "image build wait", &st);
		usleep(200000);
	}
	if (js.status != GS_SUCCESS) {
		snprintf(b->error, sizeof(b->error), "Modal image build of '%.100s' %s: %.300s",
			 tag, modal_generic_status(js.status),
			 js.exception[0] ? js.exception : "no details");
		return -EIO;
	}
	return 0;
}

static int image_get(struct sb_backend *b, struct modal *m, char *image_id, size_t n)
{
	const char *tag = b->spec.image ? b->spec.image : DEFAULT_IMAGE;
	char ver[64] = "";
	int rc = builder_version(b, m, ver, sizeof(ver));
	if (rc < 0)
		return rc;
	char from[600];
	snprintf(from, sizeof(from), "FROM %s", tag);
	struct pb_buf image = {0}, req = {0}, resp = {0};
	pb_string_always(&image, 6, from);
	pb_msg(&req, 2, &image);
	pb_string(&req, 4, m->app_id);
	pb_string(&req, 9, ver);
	struct grpc_status st;
	int code = modal_api(m, "ImageGetOrCreate", &req, &resp, 60, &st);
	pb_buf_free(&image);
	pb_buf_free(&req);
	int status = GS_UNSPECIFIED;
	char exc[300] = "";
	if (code == GRPC_OK) {
		struct pb_reader r = pb_reader(resp.data, resp.len);
		struct pb_field f;
		while (pb_next(&r, &f) == 1) {
			if (f.num == 1 && f.wt == PB_LEN)
				pb_strcpy(&f, image_id, n);
			else if (f.num == 2 && f.wt == PB_LEN)
				status = parse_result(&f, exc, sizeof(exc));
		}
	}
	pb_buf_free(&resp);
	if (code != GRPC_OK)
		return fail_create(b, "image lookup", &st);
	if (!image_id[0]) {
		snprintf(b->error, sizeof(b->error), "Modal returned no image id for '%.200s'", tag);
		return -EIO;
	}
	if (status == GS_UNSPECIFIED)
		return image_wait(b, m, image_id, tag);
	if (status != GS_SUCCESS) {
		snprintf(b->error, sizeof(b->error), "Modal image build of '%.100s' %s: %.300s",
			 tag, modal_generic_status(status), exc[0] ? exc : "no details");
		return -EIO;
	}
	return 0;
}

static void add_tag(struct pb_buf *req, const char *name, const char *value)
{
	struct pb_buf t = {0};
	pb_string_always(&t, 1, name);
	pb_string_always(&t, 2, value);
	pb_msg(req, 4, &t);
	pb_buf_free(&t);
}

static void build_definition(struct sb_backend *b, struct modal *m,
			     const char *image_id, struct pb_buf *def)
{
	const struct sb_spec *s = &b->spec;
	(void)m;
	pb_string(def, 3, image_id);
	/* Resources { memory_mb=2, milli_cpu=3, gpu_config=4,
	 * ephemeral_disk_mb=6 } */
	struct pb_buf res = {0}, gpu = {0};
	pb_uint(&res, 2, s->memory_mb);
	pb_uint(&res, 3, (uint64_t)(s->cpu * 1000 + 0.5));
	pb_uint(&res, 6, s->disk_mb);
	const char *g = sb_spec_option(s, "gpu");
	if (g && *g) {
		/* GPUConfig { count=2, gpu_type=4 (uppercased) }: "A100" or "A100:2" */
		char type[64];
		size_t k = strcspn(g, ":");
		if (k >= sizeof(type))
			k = sizeof(type) - 1;
		for (size_t i = 0; i < k; i++)
			type[i] = (char)toupper((unsigned char)g[i]);
		type[k] = '\0';
		unsigned long count = g[k] == ':' ? strtoul(g + k + 1, NULL, 10) : 1;
		pb_uint(&gpu, 2, count ? count : 1);
		pb_string(&gpu, 4, type);
	}
	pb_msg(&res, 4, &gpu); /* Go always sends one, empty without a GPU */
	pb_msg(def, 5, &res);
	pb_buf_free(&res);
	pb_buf_free(&gpu);
	pb_uint(def, 7, m->lifetime_s);
	pb_string_always(def, 8, s->workdir);
	const char *region = sb_spec_option(s, "region");
	if (region && *region) {
		struct pb_buf sp = {0};
		char *copy = strdup(region), *save = NULL;
		for (char *r = copy ? strtok_r(copy, ",", &save) : NULL; r;
		     r = strtok_r(NULL, ",", &save))
			pb_string_always(&sp, 4, r);
		free(copy);
		pb_msg(def, 17, &sp);
		pb_buf_free(&sp);
	}
	struct pb_buf empty = {0};
	pb_msg(def, 20, &empty); /* open_ports: always sent, no ports */
	/* NetworkAccess { type=1, allowed_cidrs=2, allowed_domains=3 }. The
	 * SDKs express block_network this way; field 11 is deprecated. */
	struct pb_buf net = {0};
	bool allow = s->allow_egress_to && s->allow_egress_to[0];
	pb_uint(&net, 1, allow ? NET_ALLOWLIST : s->block_network ? NET_BLOCKED : NET_OPEN);
	for (size_t i = 0; allow && s->allow_egress_to[i]; i++)
		pb_string_always(&net, 3, s->allow_egress_to[i]);
	pb_msg(def, 22, &net);
	pb_buf_free(&net);
	const char *cloud = sb_spec_option(s, "cloud");
	pb_string(def, 26, cloud);
	pb_string_always(def, 30, s->name);
	if (s->idle_timeout_s)
		pb_uint_always(def, 33, s->idle_timeout_s);
}

static int sandbox_create(struct sb_backend *b, struct modal *m, const char *image_id)
{
	struct pb_buf def = {0}, req = {0};
	build_definition(b, m, image_id, &def);
	pb_string(&req, 1, m->app_id);
	pb_msg(&req, 2, &def);
	pb_buf_free(&def);
	char host[256] = "", pid[32], owner[64] = "";
	gethostname(host, sizeof(host) - 1);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	struct passwd *pw = getpwuid(getuid());
	snprintf(owner, sizeof(owner), "%s", pw ? pw->pw_name : "unknown");
	/* what sweep recognises: ours, and whose daemon on which host */
	add_tag(&req, "sbfs", "1");
	add_tag(&req, "sbfs-owner", owner);
	add_tag(&req, "sbfs-host", host);
	add_tag(&req, "sbfs-pid", pid);
	add_tag(&req, "sbfs-name", b->spec.name); /* what `sbfs list` shows */
	if (b->spec.keep)
		add_tag(&req, "sbfs-keep", "1"); /* left on purpose: sweep spares it */
	for (size_t i = 0; b->spec.tags && b->spec.tags[i]; i++) {
		char kv[512];
		snprintf(kv, sizeof(kv), "%s", b->spec.tags[i]);
		char *eq = strchr(kv, '=');
		if (eq)
			*eq = '\0';
		add_tag(&req, kv, eq ? eq + 1 : "");
	}
	struct grpc_status st;
	double started = now_s();
	int code = call_for_id(m, "SandboxCreate", &req, 60, m->sandbox_id,
			       sizeof(m->sandbox_id), &st);
	if (code != GRPC_OK)
		return fail_create(b, "sandbox create", &st);
	if (!m->sandbox_id[0]) {
		snprintf(b->error, sizeof(b->error), "Modal returned no sandbox id");
		return -EIO;
	}
	m->owned = true;
	m->life_end = started + m->lifetime_s;
	return 0;
}

/* SandboxGetTaskId every 500 ms until the task is scheduled. */
static int task_wait(struct sb_backend *b, struct modal *m)
{
	double end = now_s() + TASK_WAIT_S;
	while (now_s() < end) {
		struct pb_buf req = {0}, resp = {0};
		pb_string(&req, 1, m->sandbox_id);
		struct grpc_status st;
		int code = modal_api(m, "SandboxGetTaskId", &req, &resp, 30, &st);
		pb_buf_free(&req);
		int finished = 0;
		char exc[300] = "";
		if (code == GRPC_OK) {
			struct pb_reader r = pb_reader(resp.data, resp.len);
			struct pb_field f;
			while (pb_next(&r, &f) == 1) {
				if (f.num == 1 && f.wt == PB_LEN)
					pb_strcpy(&f, m->task_id, sizeof(m->task_id));
				else if (f.num == 2 && f.wt == PB_LEN)
					finished = parse_result(&f, exc, sizeof(exc)) ? 1 : -1;
			}
		}
		pb_buf_free(&resp);
		if (code != GRPC_OK)
			return fail_create(b, "task lookup", &st);
		if (finished) {
			snprintf(b->error, sizeof(b->error), "the Modal sandbox %s already finished: %.300s",
				 m->sandbox_id, exc[0] ? exc : "no details");
			return -EIO;
		}
		if (m->task_id[0])
			return 0;
		usleep(500000);
	}
	snprintf(b->error, sizeof(b->error), "the Modal sandbox %s was not scheduled within %.0f s; try again later",
		 m->sandbox_id, TASK_WAIT_S);
	return -ETIMEDOUT;
}

/* V1 sandbox ids are sb- and 22 alphanumerics; anything else is taken as
 * a sandbox name in the app (SandboxGetFromName). */
static bool is_sandbox_id(const char *s)
{
	if (strncmp(s, "sb-", 3) != 0 || strlen(s) != 25)
		return false;
	for (const char *p = s + 3; *p; p++)
		if (!isalnum((unsigned char)*p))
			return false;
	return true;
}

static int resolve_attach(struct sb_backend *b, struct modal *m, const char *id)
{
	if (is_sandbox_id(id)) {
		snprintf(m->sandbox_id, sizeof(m->sandbox_id), "%s", id);
		return 0;
	}
	const char *app = sb_spec_option(&b->spec, "app");
	struct pb_buf req = {0};
	pb_string(&req, 1, id);
	pb_string(&req, 2, m->cfg.environment);
	pb_string(&req, 3, app && *app ? app : DEFAULT_APP);
	struct grpc_status st;
	int code = call_for_id(m, "SandboxGetFromName", &req, 30, m->sandbox_id,
			       sizeof(m->sandbox_id), &st);
	if (code == GRPC_NOT_FOUND) {
		snprintf(b->error, sizeof(b->error), "attach: no running Modal sandbox named '%.200s' in app '%s'",
			 id, app && *app ? app : DEFAULT_APP);
		return -ENOENT;
	}
	if (code != GRPC_OK)
		return fail_create(b, "sandbox lookup", &st);
	return m->sandbox_id[0] ? 0 : -ENOENT;
}

static int terminate(struct modal *m, const char *sandbox_id, struct grpc_status *st)
{
	struct pb_buf req = {0}, resp = {0};
	pb_string(&req, 1, sandbox_id);
	int code = modal_api(m, "SandboxTerminate", &req, &resp, 30, st);
	pb_buf_free(&req);
	pb_buf_free(&resp);
	return code == GRPC_OK || code == GRPC_NOT_FOUND ? 0 : -1;
}

/* spec: for -o ca_file= (NULL: none). TLS is always verified; a server
 * with a CA of its own (a proxy, a test server) is trusted by adding that
 * CA, never by turning verification off. */
static int connect_api(struct modal *m, const struct sb_spec *spec,
		       char *err, size_t n)
{
	int rc = modal_config_load(&m->cfg, err, n);
	if (rc < 0)
		return rc == -2 ? -ENOKEY : -EINVAL;
	if (tls_trust_load(&m->trust, spec ? sb_spec_option(spec, "ca_file") : NULL,
			   "the CA that signed the Modal server's certificate",
			   err, n) < 0)
		return -EINVAL;
	m->api = grpc_channel_new(m->cfg.server_url, true, &m->trust, err, n);
	if (!m->api)
		return -EINVAL;
	if (modal_md_init(m) < 0) {
		snprintf(err, n, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

static int modal_create(struct sb_backend *b, const struct sb_spec *spec)
{
	(void)spec; /* b->spec is the same, and owned */
	int rc = check_spec(b);
	if (rc < 0)
		return rc;
	struct modal *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	b->priv = m;
	m->lifetime_s = b->spec.sandbox_timeout_s ? b->spec.sandbox_timeout_s : DEFAULT_LIFETIME_S;
	rc = connect_api(m, &b->spec, b->error, sizeof(b->error));
	if (rc < 0)
		return rc;
	if (b->spec.attach_id) {
		rc = resolve_attach(b, m, b->spec.attach_id);
		if (rc < 0)
			return rc;
		m->owned = false;
	} else {
		char image_id[128] = "";
		rc = app_get_or_create(b, m);
		if (rc == 0)
			rc = image_get(b, m, image_id, sizeof(image_id));
		if (rc == 0)
			rc = sandbox_create(b, m, image_id);
		if (rc < 0)
			return rc;
	}
	rc = task_wait(b, m);
	struct grpc_status st;
	if (rc == 0 && modal_router_refresh(m, &st) < 0)
		rc = fail_create(b, "task router access", &st);
	if (rc < 0) {
		/* a sandbox we made and cannot use is not left running */
		if (m->owned && terminate(m, m->sandbox_id, &st) < 0)
			sb_warn("modal: could not terminate %s: %s", m->sandbox_id, st.message);
		m->owned = false;
		return rc;
	}
	/* the id sbfs shows and `-o attach=` takes: the sandbox's name (the
	 * Modal id works for attach too, and is in the log) */
	snprintf(b->id, sizeof(b->id), "%s", b->spec.attach_id ? b->spec.attach_id : b->spec.name);
	sb_info("modal: sandbox %s is Modal sandbox %s (task %s)", b->id,
		m->sandbox_id, m->task_id);
	return 0;
}

static int modal_destroy(struct sb_backend *b)
{
	struct modal *m = b->priv;
	/* an attached sandbox reaches here only from `sbfs destroy` */
	if (!m || (!m->owned && !b->spec.attach_id) || !m->sandbox_id[0])
		return 0;
	struct grpc_status st;
	if (terminate(m, m->sandbox_id, &st) < 0) {
		char msg[SB_REASON_MAX];
		modal_describe(msg, sizeof(msg), "sandbox terminate", &st);
		sb_err("%s; it ends by itself at its lifetime, or run `sbfs sweep -o backend=modal`", msg);
		return -EIO;
	}
	m->owned = false;
	return 0;
}

static void modal_release(struct sb_backend *b)
{
	struct modal *m = b->priv;
	if (!m)
		return;
	grpc_channel_free(m->router);
	grpc_channel_free(m->api);
	modal_md_free(m);
	pthread_mutex_destroy(&m->lock);
	memset(m->cfg.token_secret, 0, sizeof(m->cfg.token_secret));
	free(m);
	b->priv = NULL;
}

/* ---- sweep ---- */

struct swept {
	char id[128];
	char name[SB_NAME_MAX];
	char host[256];
	int pid;
	bool kept;
	double created;
};


static void parse_info(const struct pb_field *fi, struct swept *s)
{
	memset(s, 0, sizeof(*s));
	struct pb_reader r = pb_sub(fi);
	struct pb_field f;
	while (pb_next(&r, &f) == 1) {
		if (f.num == 1 && f.wt == PB_LEN)
			pb_strcpy(&f, s->id, sizeof(s->id));
		else if (f.num == 3 && f.wt == PB_FIXED64)
			s->created = pb_as_double(&f);
		else if (f.num == 6 && f.wt == PB_LEN) {
			char name[64] = "", value[256] = "";
			struct pb_reader t = pb_sub(&f);
			struct pb_field g;
			while (pb_next(&t, &g) == 1) {
				if (g.num == 1 && g.wt == PB_LEN)
					pb_strcpy(&g, name, sizeof(name));
				else if (g.num == 2 && g.wt == PB_LEN)
					pb_strcpy(&g, value, sizeof(value));
			}
			if (!strcmp(name, "sbfs-host"))
				snprintf(s->host, sizeof(s->host), "%s", value);
			else if (!strcmp(name, "sbfs-pid"))
				s->pid = atoi(value);
			else if (!strcmp(name, "sbfs-keep"))
				s->kept = true;
			else if (!strcmp(name, "sbfs-name"))
				snprintf(s->name, sizeof(s->name), "%s", value);
		}
	}
}

/* Our sandboxes (tag sbfs=1), page by page, judged as list_owned says.
 * The connection stays open in *m for sweep's terminations. */
static int list_sandboxes(struct modal *m, const struct sb_spec *spec,
			  struct sb_owned **out, size_t *nout, char *err, size_t errlen)
{
	*out = NULL;
	*nout = 0;
	int rc = connect_api(m, spec, err, errlen);
	if (rc < 0)
		return rc;
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	double before = 0;
	struct sb_owned *v = NULL;
	size_t n = 0, cap = 0;
	for (;;) {
		struct pb_buf req = {0}, tag = {0}, resp = {0};
		pb_double(&req, 2, before);
		pb_string(&req, 3, m->cfg.environment);
		pb_string_always(&tag, 1, "sbfs");
		pb_string_always(&tag, 2, "1");
		pb_msg(&req, 5, &tag);
		struct grpc_status st;
		int code = modal_api(m, "SandboxList", &req, &resp, 30, &st);
		pb_buf_free(&req);
		pb_buf_free(&tag);
		if (code != GRPC_OK) {
			modal_describe(err, errlen, "sandbox list", &st);
			pb_buf_free(&resp);
			free(v);
			return -EIO;
		}
		int seen = 0;
		double prev = before;
		struct pb_reader r = pb_reader(resp.data, resp.len);
		struct pb_field f;
		while (pb_next(&r, &f) == 1) {
			if (f.num != 1 || f.wt != PB_LEN)
				continue;
			struct swept s;
			parse_info(&f, &s);
			seen++;
			if (s.created > 0 && (before == prev || s.created < before))
				before = s.created;
			if (!s.id[0])
				continue;
			if (n == cap) {
				size_t c = cap ? cap * 2 : 16;
				struct sb_owned *nv = realloc(v, c * sizeof *v);
				if (!nv) {
					pb_buf_free(&resp);
					free(v);
					snprintf(err, errlen, "out of memory");
					return -ENOMEM;
				}
				v = nv;
				cap = c;
			}
			struct sb_owned *o = &v[n++];
			memset(o, 0, sizeof *o);
			/* by its sbfs name, as status shows it (one made
			 * before sbfs tagged names: by its Modal id) */
			snprintf(o->id, sizeof(o->id), "%s", s.name[0] ? s.name : s.id);
			snprintf(o->ref, sizeof(o->ref), "%s", s.id);
			o->created = (time_t)s.created;
			if (strcmp(s.host, host) != 0) {
				o->state = SB_OWNED_IN_USE;
				snprintf(o->why, sizeof(o->why), "mounted from host %.100s",
					 s.host[0] ? s.host : "unknown");
			} else if (s.kept) {
				o->state = SB_OWNED_KEPT;
				snprintf(o->why, sizeof(o->why), "kept with -o keep");
			} else if (!sb_daemon_gone(s.pid)) {
				o->state = SB_OWNED_IN_USE;
				snprintf(o->why, sizeof(o->why), "in use by sbfs pid %d", s.pid);
			} else {
				o->state = SB_OWNED_ORPHAN;
				snprintf(o->why, sizeof(o->why), "daemon pid %d is gone", s.pid);
			}
		}
		pb_buf_free(&resp);
		/* next page: older than the oldest seen; stop when no progress */
		if (seen == 0 || before <= 0 || (prev > 0 && before >= prev))
			break;
	}
	*out = v;
	*nout = n;
	return 0;
}

static void modal_close(struct modal *m)
{
	grpc_channel_free(m->api);
	modal_md_free(m);
	pthread_mutex_destroy(&m->lock);
}

static int modal_list_owned(const struct sb_spec *spec, struct sb_owned **v,
			    size_t *n, char *err, size_t errlen)
{
	struct modal m = {0};
	pthread_mutex_init(&m.lock, NULL);
	int rc = list_sandboxes(&m, spec, v, n, err, errlen);
	modal_close(&m);
	/* no credentials: Modal is not set up here, nothing to say */
	return rc == -ENOKEY ? SB_OWNED_NONE : rc;
}

static int modal_sweep(const struct sb_spec *spec)
{
	struct modal m = {0};
	char err[SB_REASON_MAX];
	pthread_mutex_init(&m.lock, NULL);
	struct sb_owned *v;
	size_t n;
	int rc = list_sandboxes(&m, spec, &v, &n, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "sbfs: %s\n", err);
		modal_close(&m);
		return rc;
	}
	int handled = 0;
	for (size_t i = 0; i < n; i++) {
		struct grpc_status st;
		if (v[i].state != SB_OWNED_ORPHAN) {
			bool elsewhere = !strncmp(v[i].why, "mounted from host", 17);
			printf(elsewhere ? "%s: skipped (%s)\n" : "%s: %s\n", v[i].id, v[i].why);
		} else if (terminate(&m, v[i].ref, &st) < 0) {
			modal_describe(err, sizeof(err), "sandbox terminate", &st);
			printf("%s: %s\n", v[i].id, err);
			rc = -EIO;
		} else {
			printf("%s: terminated (%s)\n", v[i].id, v[i].why);
			handled++;
		}
	}
	free(v);
	if (!handled)
		printf("no orphaned Modal sandboxes\n");
	modal_close(&m);
	return rc;
}

const struct sb_backend_ops sb_modal_ops = {
	.name = "modal",
	.summary = "Modal Sandbox over Modal's gRPC API (credentials: MODAL_TOKEN_ID/SECRET or ~/.modal.toml; -o app=, gpu=, region=, cloud=, ca_file=)",
	.option_keys = modal_option_keys,
	.create = modal_create,
	.exec = modal_exec,
	/* by a second exec that finds the command by its marker
	 * (exec_marker.c: held until the command exists, and what it forks
	 * meanwhile signalled too) */
	.exec_signals = true,
	.exec_tty = true,     /* Modal's pty; its size is set once, at the start */
	/* Modal's SDKs refuse an exec whose arguments pass 64 KiB of text
	 * (modal-client, modal/sandbox.py: ARG_MAX_BYTES = 2**16; gVisor's
	 * runsc takes about twice that) */
	.exec_arg_max = (size_t)64 << 10,
	.exec_arg_text_only = true,
	.exec_arg_max_what = "Modal's exec limit",
	.destroy = modal_destroy,
	.release = modal_release,
	.write_file = modal_write_file,
	.list_dir = modal_list_dir,
	.sweep = modal_sweep,
	.list_owned = modal_list_owned,
	/* a watcher inside the sandbox (guest_watch.h) */
	.watch_start = guest_watch_start,
	.watch_settle = guest_watch_settle,
	.watch_stop = guest_watch_stop,
};
