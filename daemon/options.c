#include "options.h"

#include "backends/fault_inject.h"
#include "util/log.h"
#include "util/size_parse.h"

#define FUSE_USE_VERSION 314
#include <curl/curl.h>
#include <errno.h>
#include <fuse_lowlevel.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The node cache's default bound: a large source tree (a Linux checkout
 * has about 90,000 files) stays cached for `git status`, while the cache
 * stays near 50 MB (about 550 bytes a node). */
#define MAX_NODES_DEFAULT 100000
#define MAX_NODES_MIN 100

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

static int strv_push(char ***v, const char *s)
{
	size_t n = 0;
	while (*v && (*v)[n])
		n++;
	char **nv = realloc(*v, (n + 2) * sizeof *nv);
	if (!nv)
		return -1;
	nv[n] = strdup(s);
	nv[n + 1] = NULL;
	*v = nv;
	return nv[n] ? 0 : -1;
}

static int parse_seconds(const char *key, const char *val, double *out,
			 char *err, size_t errlen)
{
	char *end;
	errno = 0;
	double d = strtod(val, &end);
	if (errno || end == val || *end || !isfinite(d) || d < 0 || d > 1e7)
		return fail(err, errlen, "-o %s needs a number of seconds, not '%s'",
			    key, val);
	*out = d;
	return 0;
}

static int parse_uint(const char *key, const char *val, unsigned long long max,
		      unsigned long long *out, char *err, size_t errlen)
{
	char *end;
	errno = 0;
	unsigned long long u = strtoull(val, &end, 10);
	if (errno || end == val || *end || val[0] == '-' || u > max)
		return fail(err, errlen, "-o %s needs a whole number up to %llu, not '%s'",
			    key, max, val);
	*out = u;
	return 0;
}

int mount_option_apply(struct mount_options *o, char *opt, char *err,
		       size_t errlen)
{
	char *val = strchr(opt, '=');
	if (val)
		*val++ = '\0';
	const char *key = opt;
	unsigned long long u;
	double d;
	int r;

#define NEED_VALUE()                                                          \
	do {                                                                  \
		if (!val || !*val)                                            \
			return fail(err, errlen, "-o %s needs a value (-o %s=...)", \
				    key, key);                                \
	} while (0)
#define SET_STRING(field)                                                     \
	do {                                                                  \
		NEED_VALUE();                                                 \
		free(field);                                                  \
		field = strdup(val);                                          \
	} while (0)

	if (!strcmp(key, "backend")) {
		NEED_VALUE();
		o->backend = sb_backend_find(val);
		if (!o->backend)
			return fail(err, errlen,
				    "unknown backend '%s' (see sbfs --help for the list)", val);
	} else if (!strcmp(key, "image")) {
		SET_STRING(o->spec.image);
	} else if (!strcmp(key, "workdir")) {
		NEED_VALUE();
		if (val[0] != '/')
			return fail(err, errlen, "-o workdir must be an absolute path in the sandbox, not '%s'", val);
		SET_STRING(o->spec.workdir);
	} else if (!strcmp(key, "env")) {
		NEED_VALUE();
		if (!strchr(val, '=') || val[0] == '=')
			return fail(err, errlen, "-o env needs NAME=VALUE, not '%s'", val);
		strv_push(&o->spec.env, val);
	} else if (!strcmp(key, "tag")) {
		NEED_VALUE();
		strv_push(&o->spec.tags, val);
	} else if (!strcmp(key, "network")) {
		o->spec.block_network = false;
	} else if (!strcmp(key, "block_network")) {
		o->spec.block_network = true;
	} else if (!strcmp(key, "allow_egress_to")) {
		NEED_VALUE();
		char *save = NULL;
		for (char *h = strtok_r(val, ":", &save); h; h = strtok_r(NULL, ":", &save))
			strv_push(&o->spec.allow_egress_to, h);
	} else if (!strcmp(key, "cpu")) {
		NEED_VALUE();
		char *end;
		d = strtod(val, &end);
		if (end == val || *end || !isfinite(d) || d <= 0 || d > 1024)
			return fail(err, errlen, "-o cpu needs a number of cores, not '%s'", val);
		o->spec.cpu = d;
	} else if (!strcmp(key, "memory")) {
		NEED_VALUE();
		if (parse_uint(key, val, 1ULL << 30, &u, err, errlen) < 0)
			return -1;
		o->spec.memory_mb = u;
	} else if (!strcmp(key, "disk")) {
		NEED_VALUE();
		uint64_t mib;
		if (sb_parse_size_mib(val, &mib) < 0)
			return fail(err, errlen, "-o disk needs a size in MiB or with a unit (512, 512M, 2G), not '%s'", val);
		o->spec.disk_mb = mib;
	} else if (!strcmp(key, "max_nodes")) {
		NEED_VALUE();
		if (parse_uint(key, val, 1ULL << 32, &u, err, errlen) < 0)
			return -1;
		if (u < MAX_NODES_MIN)
			return fail(err, errlen, "-o max_nodes must be at least %d, not '%s'", MAX_NODES_MIN, val);
		o->max_nodes = (size_t)u;
	} else if (!strcmp(key, "sandbox_timeout") || !strcmp(key, "idle_timeout")) {
		NEED_VALUE();
		if (parse_uint(key, val, UINT_MAX, &u, err, errlen) < 0)
			return -1;
		if (key[0] == 's')
			o->spec.sandbox_timeout_s = (unsigned)u;
		else
			o->spec.idle_timeout_s = (unsigned)u;
	} else if (!strcmp(key, "keep")) {
		o->spec.keep = true;
	} else if (!strcmp(key, "attach")) {
		SET_STRING(o->spec.attach_id);
	} else if (!strcmp(key, "attr_timeout")) {
		NEED_VALUE();
		if (parse_seconds(key, val, &d, err, errlen) < 0)
			return -1;
		o->attr_timeout = d;
	} else if (!strcmp(key, "dir_timeout")) {
		NEED_VALUE();
		if (parse_seconds(key, val, &d, err, errlen) < 0)
			return -1;
		o->dir_timeout = d;
	} else if (!strcmp(key, "inject_latency_ms")) {
		NEED_VALUE();
		if (parse_uint(key, val, 60000, &u, err, errlen) < 0)
			return -1;
		o->inject_latency_ms = (unsigned)u;
	} else if (!strcmp(key, "inject_faults")) {
		NEED_VALUE();
		struct fault_plan *plan = calloc(1, sizeof *plan);
		if (!plan)
			return fail(err, errlen, "out of memory");
		if (fault_plan_parse(plan, val, err, errlen) < 0) {
			free(plan);
			return -1;
		}
		free(o->inject_faults);
		o->inject_faults = plan;
	} else if (!strcmp(key, "call_timeout")) {
		NEED_VALUE();
		if (parse_seconds(key, val, &d, err, errlen) < 0)
			return -1;
		if (d < 0.1)
			return fail(err, errlen,
				    "-o call_timeout needs at least 0.1 seconds, not '%s'", val);
		o->call_timeout = d;
	} else if (!strcmp(key, "shell_ops")) {
		o->shell_ops = true;
	} else if (!strcmp(key, "spool_dir")) {
		SET_STRING(o->spool_dir);
	} else if (!strcmp(key, "log")) {
		SET_STRING(o->log_path);
	} else if (!strcmp(key, "log_level")) {
		NEED_VALUE();
		enum sb_log_level level;
		if (sb_log_level_parse(val, &level) < 0)
			return fail(err, errlen,
				    "-o log_level takes error, warning, info or debug, not '%s'", val);
		o->log_level = (int)level;
	} else if (!strcmp(key, "idmap")) {
		NEED_VALUE();
		if (strcmp(val, "user") && strcmp(val, "none"))
			return fail(err, errlen,
				    "-o idmap takes 'user' or 'none', not '%s'", val);
		o->idmap_none = !strcmp(val, "none");
	} else if (!strcmp(key, "writeback")) {
		if (val)
			return fail(err, errlen, "-o writeback takes no value (write -o writeback)");
		o->writeback = true;
	} else if (!strcmp(key, "watch") || !strcmp(key, "nowatch")) {
		if (val)
			return fail(err, errlen, "-o %s takes no value (write -o %s)", key, key);
		o->watch = key[0] == 'w' ? WATCH_ON : WATCH_OFF;
	} else if ((r = std_option_apply(o, key, val, err, errlen)) != 0) {
		return r < 0 ? -1 : 0;
	} else {
		/* Backend-specific: sb_backend_create checks it is known. */
		char *kv;
		if (asprintf(&kv, "%s%s%s", key, val ? "=" : "", val ? val : "") < 0)
			return fail(err, errlen, "out of memory");
		strv_push(&o->spec.options, kv);
		free(kv);
	}
	return 0;
#undef NEED_VALUE
#undef SET_STRING
}

/* Splits an -o argument on commas; "\," is a literal comma. */
static int apply_option_list(struct mount_options *o, const char *list,
			     char *err, size_t errlen)
{
	char *buf = malloc(strlen(list) + 1);
	if (!buf)
		return fail(err, errlen, "out of memory");
	const char *p = list;
	int r = 0;
	while (r == 0 && *p) {
		size_t n = 0;
		while (*p && *p != ',') {
			if (p[0] == '\\' && p[1] == ',')
				p++;
			buf[n++] = *p++;
		}
		buf[n] = '\0';
		if (*p == ',')
			p++;
		if (n)
			r = mount_option_apply(o, buf, err, errlen);
	}
	free(buf);
	return r;
}

/* sbfs --version: what a bug report needs. */
static void print_version(FILE *out)
{
	fprintf(out, "sbfs %s\nbackends:", SBFS_VERSION);
	for (const struct sb_backend_ops *const *b = sb_backend_all(); *b; b++)
		fprintf(out, " %s", (*b)->name);
	fprintf(out, "\nlibfuse %s, libcurl %s, jansson %s\n", fuse_pkgversion(),
		curl_version_info(CURLVERSION_NOW)->version, jansson_version_str());
}

void mount_options_usage(FILE *out)
{
	fprintf(out,
		"usage: sbfs [-f] [-d] [-o OPTION[,OPTION...]] [SOURCE] MOUNTPOINT\n"
		"       sbfs status [--json | --watch] [MOUNTPOINT]\n"
		"       sbfs sync [--json | --progress] [MOUNTPOINT]\n"
		"       sbfs refresh [MOUNTPOINT [PATH]]\n"
		"       sbfs umount [-l] [--json] [MOUNTPOINT]\n"
		"       sbfs list [--json] [-o backend=NAME]\n"
		"       sbfs destroy [-o backend=NAME] ID\n"
		"       sbfs sweep [-o backend=NAME]\n"
		"\n"
		"Provisions a sandbox and mounts its workspace at MOUNTPOINT; unmount\n"
		"(sbfs umount MOUNTPOINT) destroys it. Run commands in it with sbexec.\n"
		"\n"
		"  -f                  stay in the foreground\n"
		"  -d                  foreground with debug output\n"
		"  -o backend=NAME     sandbox backend (default: local, or $SBFS_BACKEND)\n"
		"  -o image=IMAGE      sandbox image (backends that have images)\n"
		"  -o workdir=DIR      sandbox directory shown at the mount (default /workspace)\n"
		"  -o env=NAME=VALUE   environment of every command (repeatable)\n"
		"  -o network          allow network access (default: none)\n"
		"  -o allow_egress_to=HOST[:HOST...]  egress allowlist, where enforceable\n"
		"  -o cpu=N, memory=MB resource limits, where enforceable\n"
		"  -o disk=SIZE        size limit of the workspace (MiB, or 512M, 2G),\n"
		"                      where enforceable\n"
		"  -o sandbox_timeout=S  lifetime of the sandbox; idle_timeout=S\n"
		"  -o tag=KEY=VALUE    label the sandbox (repeatable)\n"
		"  -o keep             leave the sandbox after unmount and print its id\n"
		"  -o attach=ID        mount an existing sandbox (kept after unmount)\n"
		"  -o attr_timeout=S   cache attributes for S seconds (default 5;\n"
		"                      30 with writeback; with watch, until changed)\n"
		"  -o dir_timeout=S    cache listings for S seconds (defaults as above)\n"
		"  -o watch            watch the sandbox for changes (the default where the\n"
		"                      backend can: local, with inotify): what is cached\n"
		"                      stays until it changes, and sbexec forgets only what\n"
		"                      its command changed; -o nowatch: the timeouts\n"
		"  -o max_nodes=N      bound of the cached nodes (default 100000): past it,\n"
		"                      what the kernel has forgotten is dropped\n"
		"  -o spool_dir=DIR    local spool for open files (default $TMPDIR or /var/tmp)\n"
		"  -o log=FILE         daemon log (default: syslog, the journal on systemd:\n"
		"                      journalctl -t sbfs; with -f, stderr)\n"
		"  -o log_level=L      error, warning, info (default) or debug\n"
		"  -o writeback        close() returns once the data is safe in the local\n"
		"                      spool; uploads run in the background, batched;\n"
		"                      fsync, sbexec, `sbfs sync` and unmount wait for them\n"
		"  -o idmap=user|none  user (default): the sandbox's user shows as you and a\n"
		"                      chown to you is a chown to it; none: the sandbox's ids\n"
		"  -o shell_ops        testing aid: use the generic shell file operations\n"
		"  -o call_timeout=S   deadline of each file call to the sandbox (default 60)\n"
		"  -o inject_latency_ms=N  testing/benchmark aid: delay every backend call\n"
		"  -o inject_faults=SPEC   testing aid: fail, stall or kill chosen backend\n"
		"                          calls, or hold back their answers\n"
		"\nStandard mount options: ro, rw, noexec, noatime (and the other atime\n"
		"options), sync, dirsync, allow_other, auto_unmount go to the kernel;\n"
		"uid=N, gid=N show the sandbox's user as N; nonempty mounts over a\n"
		"directory with files (hidden until unmount); defaults, noauto, user,\n"
		"_netdev, nofail, x-* are mount(8)'s. The mount is always nosuid,nodev.\n"
		"SOURCE (as mount -t fuse.sbfs and fstab give it): BACKEND, or BACKEND:ID\n"
		"to attach a kept sandbox.\n"
		"\nBackends:\n");
	for (const struct sb_backend_ops *const *b = sb_backend_all(); *b; b++)
		fprintf(out, "  %-10s %s\n", (*b)->name, (*b)->summary ? (*b)->summary : "");
}

/* The source of `mount -t fuse.sbfs SOURCE DIR` and of an fstab line:
 * BACKEND, or BACKEND:ID to attach an existing sandbox. */
static int apply_source(struct mount_options *o, const char *source,
			char *err, size_t errlen)
{
	const char *colon = strchr(source, ':');
	size_t len = colon ? (size_t)(colon - source) : strlen(source);
	const struct sb_backend_ops *b = NULL;
	for (const struct sb_backend_ops *const *p = sb_backend_all(); *p; p++)
		if (strlen((*p)->name) == len && !strncmp((*p)->name, source, len))
			b = *p;
	if (!b)
		return fail(err, errlen,
			    "unknown source '%s': give a backend (local, docker, ...) or BACKEND:ID to attach a sandbox",
			    source);
	if (o->backend && o->backend != b)
		return fail(err, errlen, "the source '%s' and -o backend=%s disagree",
			    source, o->backend->name);
	o->backend = b;
	if (colon && colon[1]) {
		if (o->spec.attach_id && strcmp(o->spec.attach_id, colon + 1))
			return fail(err, errlen, "the source '%s' and -o attach=%s disagree",
				    source, o->spec.attach_id);
		free(o->spec.attach_id);
		o->spec.attach_id = strdup(colon + 1);
	}
	return 0;
}

static void options_init(struct mount_options *o)
{
	memset(o, 0, sizeof *o);
	sb_spec_init(&o->spec);
	o->owner_uid = o->owner_gid = -1;
	o->log_level = -1;
	o->attr_timeout = o->dir_timeout = -1; /* unset: defaults at the end */
	o->max_nodes = MAX_NODES_DEFAULT;
}

/* The command line over what o holds already. 0, 1 after --help or
 * --version, -1 with err. */
static int parse_argv(int argc, char **argv, struct mount_options *o,
		      char *err, size_t errlen)
{
	char *positional[2] = {NULL, NULL};
	int npos = 0;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			mount_options_usage(stdout);
			return 1;
		} else if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
			print_version(stdout);
			return 1;
		} else if (!strcmp(a, "-f")) {
			o->foreground = true;
		} else if (!strcmp(a, "-d")) {
			o->foreground = o->debug = true;
		} else if (!strcmp(a, "-o")) {
			if (i + 1 >= argc)
				return fail(err, errlen, "-o needs a list of options");
			if (apply_option_list(o, argv[++i], err, errlen) < 0)
				return -1;
		} else if (!strncmp(a, "-o", 2)) {
			if (apply_option_list(o, a + 2, err, errlen) < 0)
				return -1;
		} else if (a[0] == '-' && a[1]) {
			return fail(err, errlen, "unknown option '%s' (see sbfs --help)", a);
		} else if (npos == 2) {
			return fail(err, errlen, "too many arguments: '%s' after the source '%s' and the mountpoint '%s'",
				    a, positional[0], positional[1]);
		} else {
			positional[npos++] = argv[i];
		}
	}
	if (npos == 0)
		return fail(err, errlen, "no mountpoint given (usage: sbfs [-o OPTIONS] MOUNTPOINT)");
	/* mount(8)'s form, as mount.fuse3 calls it: SOURCE MOUNTPOINT */
	if (npos == 2 && apply_source(o, positional[0], err, errlen) < 0)
		return -1;
	free(o->mountpoint);
	o->mountpoint = strdup(positional[npos - 1]);
	return 0;
}

int mount_options_parse(int argc, char **argv, struct mount_options *o,
			char *err, size_t errlen)
{
	/* Which backend: the command line's, else $SBFS_BACKEND, else the
	 * config file's, else local. A first pass learns the command line's
	 * (and reports its errors before the config file is read). */
	options_init(o);
	int r = parse_argv(argc, argv, o, err, errlen);
	const struct sb_backend_ops *backend = o->backend;
	mount_options_free(o);
	options_init(o);
	if (r != 0)
		return r;
	/* Then the config file's defaults, and the command line over them. */
	if (config_file_apply(o, NULL, err, errlen) < 0)
		return -1;
	const char *env = getenv("SBFS_BACKEND");
	if (!backend && env && *env) {
		backend = sb_backend_find(env);
		if (!backend)
			return fail(err, errlen,
				    "SBFS_BACKEND names an unknown backend '%s' (see sbfs --help)", env);
	}
	if (!backend)
		backend = o->backend ? o->backend : sb_backend_find("local");
	if (config_file_apply(o, backend->name, err, errlen) < 0)
		return -1;
	o->backend = NULL; /* the command line's source may name it again */
	if ((r = parse_argv(argc, argv, o, err, errlen)) != 0)
		return r;
	o->backend = backend;
	/* a usage error like any other (exit 2), before anything is made */
	for (size_t i = 0; o->spec.options && o->spec.options[i]; i++)
		if (!sb_backend_option_known(backend, o->spec.options[i]))
			return fail(err, errlen, "unknown option '%.*s' for backend '%s' (see sbfs --help)",
				    (int)strcspn(o->spec.options[i], "="), o->spec.options[i],
				    backend->name);
	if (o->watch == WATCH_ON && !backend->watch_start)
		return fail(err, errlen,
			    "-o watch: the %s backend cannot report the sandbox's changes (local can); leave it out",
			    backend->name);
	/* The watch tells the mount's own calls by what they left, which
	 * only the native calls tell it: the shell's would all look like the
	 * sandbox's changes. */
	if (o->watch == WATCH_ON && o->shell_ops)
		return fail(err, errlen, "-o watch: not with the testing aid shell_ops; leave one out");
	if (o->watch == WATCH_DEFAULT)
		o->watch = backend->watch_start && !o->shell_ops ? WATCH_ON : WATCH_OFF;
	if (o->spec.attach_id)
		o->spec.keep = true; /* an attached sandbox is not ours to destroy */
	/* Write-back trades freshness for round trips already; longer caches
	 * keep a long job (git add of a tree) from re-asking the sandbox for
	 * what it was told moments ago. sbexec and refresh still invalidate. */
	double cache_default = o->writeback ? 30 : 5;
	o->timeouts_set = o->attr_timeout >= 0 || o->dir_timeout >= 0;
	if (o->attr_timeout < 0)
		o->attr_timeout = cache_default;
	if (o->dir_timeout < 0)
		o->dir_timeout = cache_default;
	return 0;
}

void mount_options_free(struct mount_options *o)
{
	sb_spec_free(&o->spec);
	free(o->mountpoint);
	free(o->spool_dir);
	free(o->log_path);
	free(o->inject_faults);
	free(o->fuse_opts);
}
