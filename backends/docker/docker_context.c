#include "docker_context.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *env_nonempty(const char *k)
{
	const char *v = getenv(k);
	return v && *v ? v : NULL;
}

/* $DOCKER_CONFIG, else ~/.docker: where the CLI keeps config.json and
 * contexts/. */
static int config_dir(char *out, size_t n)
{
	const char *d = env_nonempty("DOCKER_CONFIG");
	if (d)
		return snprintf(out, n, "%s", d) < (int)n ? 0 : -ENAMETOOLONG;
	const char *home = env_nonempty("HOME");
	return snprintf(out, n, "%s/.docker", home ? home : "/root") < (int)n ? 0 : -ENAMETOOLONG;
}

/* The context to use: DOCKER_CONTEXT, else config.json's currentContext;
 * NULL for the default one. */
static char *context_name(const char *dir)
{
	const char *e = env_nonempty("DOCKER_CONTEXT");
	if (e)
		return strdup(e);
	char path[4200];
	snprintf(path, sizeof path, "%s/config.json", dir);
	json_t *cfg = json_load_file(path, 0, NULL);
	const char *cur = json_string_value(json_object_get(cfg, "currentContext"));
	char *name = cur && *cur ? strdup(cur) : NULL;
	json_decref(cfg);
	return name;
}

/* contexts/meta/<digest>/meta.json whose Name is name: the digest names
 * the folder of its TLS files too. Read by name, so no digest is
 * computed here. */
static int find_meta(const char *dir, const char *name, struct dk_context *c)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/contexts/meta", dir);
	DIR *d = opendir(path);
	if (!d)
		return -ENOENT;
	struct dirent *e;
	int rc = -ENOENT;
	while (rc == -ENOENT && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char meta[4600];
		snprintf(meta, sizeof meta, "%s/%s/meta.json", path, e->d_name);
		json_t *m = json_load_file(meta, 0, NULL);
		const char *n = json_string_value(json_object_get(m, "Name"));
		if (n && !strcmp(n, name)) {
			json_t *ep = json_object_get(json_object_get(m, "Endpoints"), "docker");
			const char *host = json_string_value(json_object_get(ep, "Host"));
			c->skip_verify = json_is_true(json_object_get(ep, "SkipTLSVerify"));
			c->host = host ? strdup(host) : NULL;
			char tls[4600];
			snprintf(tls, sizeof tls, "%s/contexts/tls/%s/docker", dir, e->d_name);
			struct stat st;
			if (stat(tls, &st) == 0 && S_ISDIR(st.st_mode))
				c->tls_dir = strdup(tls);
			rc = host ? 0 : -EINVAL;
		}
		json_decref(m);
	}
	closedir(d);
	return rc;
}

/* The first engine socket there is: a rootless docker's (the user's own
 * engine), the system's, then Podman's rootless and system services. */
static char *default_socket(void)
{
	const char *xdg = env_nonempty("XDG_RUNTIME_DIR");
	char cand[4][4200];
	int n = 0;
	if (xdg)
		snprintf(cand[n++], sizeof cand[0], "%s/docker.sock", xdg);
	snprintf(cand[n++], sizeof cand[0], "/var/run/docker.sock");
	if (xdg)
		snprintf(cand[n++], sizeof cand[0], "%s/podman/podman.sock", xdg);
	snprintf(cand[n++], sizeof cand[0], "/run/podman/podman.sock");
	for (int i = 0; i < n; i++) {
		struct stat st;
		if (stat(cand[i], &st) == 0 && S_ISSOCK(st.st_mode)) {
			char *h = NULL;
			return asprintf(&h, "unix://%s", cand[i]) < 0 ? NULL : h;
		}
	}
	/* none: the system's, so the error names where docker looks */
	return strdup("unix:///var/run/docker.sock");
}

int dk_context_find(struct dk_context *c, char *err, size_t errlen)
{
	memset(c, 0, sizeof *c);
	char dir[4096];
	if (config_dir(dir, sizeof dir) < 0) {
		snprintf(err, errlen, "the docker config directory path is too long; set DOCKER_HOST");
		return -ENAMETOOLONG;
	}
	char *name = context_name(dir);
	if (name && strcmp(name, "default") != 0) {
		snprintf(c->name, sizeof c->name, "%s", name);
		int rc = find_meta(dir, name, c);
		if (rc < 0) {
			snprintf(err, errlen,
				 rc == -EINVAL ? "docker context '%s' has no docker endpoint; see `docker context inspect %s`, or set DOCKER_HOST"
					       : "docker context '%s' (from %s) is not in %s/contexts; see `docker context ls`, or set DOCKER_HOST",
				 name, rc == -EINVAL ? name : env_nonempty("DOCKER_CONTEXT") ? "DOCKER_CONTEXT" : "config.json", dir);
			free(name);
			dk_context_free(c);
			return rc;
		}
		free(name);
		return 0;
	}
	free(name);
	c->host = default_socket();
	return c->host ? 0 : -ENOMEM;
}

void dk_context_free(struct dk_context *c)
{
	free(c->host);
	free(c->tls_dir);
	c->host = c->tls_dir = NULL;
}
