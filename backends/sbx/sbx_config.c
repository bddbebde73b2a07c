/* The sbx backend's options and what it refuses. The network rule: the
 * sbx policy is global, set once by the machine's owner, and cannot be
 * read back, so the user declares it (-o host_network_policy=) and every
 * network request is accepted only where that declaration proves it:
 *   block_network (the default)   only under deny-all;
 *   allow_egress_to=H1:H2         only under deny-all, as this sandbox's
 *                                 narrowing of it (`sbx policy allow
 *                                 network NAME "H1,H2"`);
 *   -o network                    open egress: under deny-all this
 *                                 sandbox is opened ("**"); otherwise the
 *                                 owner's policy applies as it is. */
#include "sbx.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int sbx_policy_parse(const char *s, enum sbx_host_policy *p)
{
	if (!s || !strcmp(s, "unknown"))
		*p = SBX_POLICY_UNKNOWN;
	else if (!strcmp(s, "deny-all"))
		*p = SBX_POLICY_DENY_ALL;
	else if (!strcmp(s, "allow-all"))
		*p = SBX_POLICY_ALLOW_ALL;
	else
		return -1;
	return 0;
}

const char *sbx_policy_name(enum sbx_host_policy p)
{
	return p == SBX_POLICY_DENY_ALL ? "deny-all" :
	       p == SBX_POLICY_ALLOW_ALL ? "allow-all" : "unknown";
}

/* host, *.host, host:port: what sbx takes as one resource of its
 * comma-separated list (a comma would split it). */
static bool resource_ok(const char *h)
{
	if (!*h || strlen(h) > 253)
		return false;
	for (const char *p = h; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr(".-*:", *p))
			return false;
	return true;
}

int sbx_network_plan(const struct sb_spec *s, enum sbx_host_policy policy,
		     struct sbx_network *plan, char *err, size_t errlen)
{
	memset(plan, 0, sizeof(*plan));
	plan->policy = policy;
	bool deny = policy == SBX_POLICY_DENY_ALL;
	const char *pname = sbx_policy_name(policy);
	if (s->allow_egress_to && s->allow_egress_to[0]) {
		if (!s->block_network) {
			snprintf(err, errlen, "allow_egress_to with the network open (-o network) is contradictory: drop one of them");
			return -EINVAL;
		}
		if (!deny) {
			snprintf(err, errlen, "sbx: an allow_egress_to list only narrows a deny-all sbx policy, and host_network_policy is %s: run `sbx policy init deny-all` once and mount with -o host_network_policy=deny-all",
				 pname);
			return -EINVAL;
		}
		size_t k = 0;
		for (size_t i = 0; s->allow_egress_to[i]; i++) {
			const char *h = s->allow_egress_to[i];
			if (!resource_ok(h)) {
				snprintf(err, errlen, "allow_egress_to entry '%.200s' is not a host, *.domain or host:port sbx takes", h);
				return -EINVAL;
			}
			int w = snprintf(plan->allow + k, sizeof(plan->allow) - k, "%s%s",
					 k ? "," : "", h);
			if (w < 0 || (size_t)w >= sizeof(plan->allow) - k) {
				snprintf(err, errlen, "allow_egress_to is too long for one sbx policy rule: list fewer hosts");
				return -EINVAL;
			}
			k += (size_t)w;
		}
		return 0;
	}
	if (s->block_network) {
		if (!deny) {
			snprintf(err, errlen, "sbx: the network is blocked (the default) only under a deny-all sbx policy, and host_network_policy is %s: run `sbx policy init deny-all` once and mount with -o host_network_policy=deny-all, or pass -o network to accept open egress",
				 pname);
			return -EINVAL;
		}
		return 0;
	}
	if (deny)
		snprintf(plan->allow, sizeof(plan->allow), "**");
	return 0;
}

static bool executable_file(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

int sbx_find_cli(const struct sb_spec *s, char *out, size_t n, char *err,
		 size_t errlen)
{
	const char *want = sb_spec_option(s, "sbx_path");
	if (want && !*want) {
		snprintf(err, errlen, "-o sbx_path= needs the path of the sbx executable");
		return -EINVAL;
	}
	const char *name = want ? want : "sbx";
	if (strchr(name, '/')) {
		char abs[PATH_MAX];
		if (executable_file(name) && realpath(name, abs) && strlen(abs) < n) {
			snprintf(out, n, "%s", abs);
			return 0;
		}
		snprintf(err, errlen, "-o sbx_path=%.200s is not an executable file: point it at the sbx CLI of Docker Sandboxes",
			 name);
		return -ENOENT;
	}
	const char *path = getenv("PATH");
	char *copy = strdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
	if (!copy)
		return -ENOMEM;
	int rc = -ENOENT;
	char *save = NULL;
	for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		char cand[PATH_MAX];
		if (snprintf(cand, sizeof(cand), "%s/%s", *d ? d : ".", name) >= (int)sizeof(cand))
			continue;
		char abs[PATH_MAX];
		if (executable_file(cand) && realpath(cand, abs) && strlen(abs) < n) {
			snprintf(out, n, "%s", abs);
			rc = 0;
			break;
		}
	}
	free(copy);
	if (rc < 0)
		snprintf(err, errlen, "the sbx CLI ('%.100s') is not in PATH: install Docker Sandboxes (https://docs.docker.com/ai/sandboxes/), run `sbx login` and `sbx policy init deny-all`, or pass -o sbx_path=",
			 name);
	return rc;
}

int sbx_config_load(const struct sb_spec *s, bool attach, struct sbx_config *c,
		    char *err, size_t errlen)
{
	memset(c, 0, sizeof(*c));
	enum sbx_host_policy policy;
	if (sbx_policy_parse(sb_spec_option(s, "host_network_policy"), &policy) < 0) {
		snprintf(err, errlen, "-o host_network_policy= takes deny-all, allow-all or unknown: the policy you set with `sbx policy init`");
		return -EINVAL;
	}
	for (size_t i = 0; s->env && s->env[i]; i++)
		if (!sbx_env_entry_ok(s->env[i])) {
			snprintf(err, errlen, "environment entry '%.100s' must be NAME=VALUE with NAME of letters, digits and _ and no line break in VALUE (sbx's env file carries one line each)",
				 s->env[i]);
			return -EINVAL;
		}
	if (!s->workdir || s->workdir[0] != '/' || !s->workdir[1]) {
		snprintf(err, errlen, "sbx needs an absolute workdir other than /");
		return -EINVAL;
	}
	/* an existing sandbox was made as it was: only its use is checked */
	if (attach)
		return sbx_find_cli(s, c->cli, sizeof(c->cli), err, errlen);
	if (s->disk_mb) {
		snprintf(err, errlen, "sbx has no disk size per sandbox: drop disk=");
		return -EINVAL;
	}
	if (s->tags && s->tags[0]) {
		snprintf(err, errlen, "sbx has no labels on a sandbox: drop tag=");
		return -EINVAL;
	}
	if (s->cpu > 0 && (s->cpu != floor(s->cpu) || s->cpu > 1024)) {
		snprintf(err, errlen, "sbx gives a sandbox whole CPUs: -o cpu= takes a whole number");
		return -EINVAL;
	}
	if (s->memory_mb && s->memory_mb < 1024) {
		snprintf(err, errlen, "sbx needs at least 1024 MiB for a sandbox: raise -o memory=");
		return -EINVAL;
	}
	int rc = sbx_network_plan(s, policy, &c->net, err, errlen);
	if (rc < 0)
		return rc;
	snprintf(c->memory, sizeof(c->memory), "%llum",
		 (unsigned long long)(s->memory_mb ? s->memory_mb : SBX_DEFAULT_MEMORY_MB));
	if (s->cpu > 0)
		snprintf(c->cpus, sizeof(c->cpus), "%d", (int)s->cpu);
	c->image = s->image && *s->image ? s->image : NULL;
	return sbx_find_cli(s, c->cli, sizeof(c->cli), err, errlen);
}
