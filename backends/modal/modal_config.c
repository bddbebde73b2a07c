/* Modal credentials and settings, found as Modal's CLI finds them (notes
 * 1.4/1.5): MODAL_* environment variables override the profile in
 * MODAL_CONFIG_PATH (default ~/.modal.toml). The profile is MODAL_PROFILE,
 * else the one with `active = true`, else [default] (Python's rule, which
 * matches what `modal token new` writes). Only the file's own shape is
 * understood: [tables], key = "string" | 'literal' | true | false, and
 * comments; anything else in the file is skipped, not an error. */
#include "modal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_CREDS "no Modal credentials: set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET or run `modal token new`"

struct profile {
	char name[128];
	bool active;
	struct modal_config v;
};

static void copy(char *dst, size_t n, const char *s)
{
	size_t k = strnlen(s, n - 1);
	memcpy(dst, s, k);
	dst[k] = '\0';
}

/* Parses a TOML basic or literal string starting at *p (on the quote).
 * Returns 0 and the value in out, -1 if malformed. */
static int parse_string(const char *p, char *out, size_t n)
{
	char q = *p++;
	size_t k = 0;
	while (*p && *p != q && *p != '\n') {
		char c = *p++;
		if (q == '"' && c == '\\') {
			c = *p++;
			switch (c) {
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case 'r': c = '\r'; break;
			case '"': case '\\': break;
			default: return -1; /* \u escapes never occur in tokens */
			}
		}
		if (k + 1 < n)
			out[k++] = c;
	}
	if (*p != q)
		return -1;
	out[k] = '\0';
	return 0;
}

static void set_key(struct profile *pr, const char *key, const char *val)
{
	struct modal_config *v = &pr->v;
	if (!strcmp(key, "token_id"))
		copy(v->token_id, sizeof(v->token_id), val);
	else if (!strcmp(key, "token_secret"))
		copy(v->token_secret, sizeof(v->token_secret), val);
	else if (!strcmp(key, "server_url"))
		copy(v->server_url, sizeof(v->server_url), val);
	else if (!strcmp(key, "environment"))
		copy(v->environment, sizeof(v->environment), val);
	else if (!strcmp(key, "image_builder_version"))
		copy(v->image_builder_version, sizeof(v->image_builder_version), val);
}

int modal_config_parse_toml(struct modal_config *c, const char *text,
			    const char *want_profile, char *err, size_t errlen)
{
	struct profile *profs = NULL;
	size_t np = 0;
	struct profile *cur = NULL;
	const char *line = text;
	int rc = 0;
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char buf[2048];
		if (len >= sizeof(buf))
			len = sizeof(buf) - 1;
		memcpy(buf, line, len);
		buf[len] = '\0';
		line = nl ? nl + 1 : NULL;
		char *s = buf;
		while (isspace((unsigned char)*s))
			s++;
		if (!*s || *s == '#')
			continue;
		if (*s == '[') {
			char *e = strchr(s, ']');
			if (!e)
				continue;
			*e = '\0';
			s++;
			while (isspace((unsigned char)*s))
				s++;
			size_t k = strlen(s);
			while (k && isspace((unsigned char)s[k - 1]))
				s[--k] = '\0';
			if (k >= 2 && (s[0] == '"' || s[0] == '\'') && s[k - 1] == s[0]) {
				s[k - 1] = '\0';
				s++;
			}
			struct profile *np2 = realloc(profs, (np + 1) * sizeof(*profs));
			if (!np2) {
				rc = -1;
				snprintf(err, errlen, "out of memory");
				break;
			}
			profs = np2;
			cur = &profs[np++];
			memset(cur, 0, sizeof(*cur));
			copy(cur->name, sizeof(cur->name), s);
			continue;
		}
		char *eq = strchr(s, '=');
		if (!eq || !cur)
			continue;
		*eq = '\0';
		char *key = s, *val = eq + 1;
		size_t k = strlen(key);
		while (k && isspace((unsigned char)key[k - 1]))
			key[--k] = '\0';
		while (isspace((unsigned char)*val))
			val++;
		char v[1024];
		if (*val == '"' || *val == '\'') {
			if (parse_string(val, v, sizeof(v)) < 0)
				continue;
			set_key(cur, key, v);
		} else if (!strcmp(key, "active")) {
			cur->active = !strncmp(val, "true", 4);
		}
	}
	if (rc < 0) {
		free(profs);
		return rc;
	}
	struct profile *pick = NULL;
	if (want_profile && *want_profile) {
		for (size_t i = 0; i < np; i++)
			if (!strcmp(profs[i].name, want_profile))
				pick = &profs[i];
		if (!pick) {
			snprintf(err, errlen, "Modal profile '%.100s' (MODAL_PROFILE) is not in the config file: run `modal profile list`", want_profile);
			free(profs);
			return -1;
		}
	} else {
		for (size_t i = 0; i < np; i++) {
			if (!profs[i].active)
				continue;
			if (pick) {
				snprintf(err, errlen, "more than one Modal profile is active in the config file: run `modal profile activate NAME`");
				free(profs);
				return -1;
			}
			pick = &profs[i];
		}
		for (size_t i = 0; !pick && i < np; i++)
			if (!strcmp(profs[i].name, "default"))
				pick = &profs[i];
	}
	if (pick) {
		*c = pick->v;
		copy(c->profile, sizeof(c->profile), pick->name);
	}
	free(profs);
	return 0;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	size_t cap = 4096, len = 0;
	char *s = malloc(cap);
	while (s) {
		size_t n = fread(s + len, 1, cap - len - 1, f);
		len += n;
		if (n == 0)
			break;
		if (len + 1 == cap) {
			if (cap > (1u << 20))
				break; /* a config file is small */
			char *t = realloc(s, cap * 2);
			if (!t) {
				free(s);
				s = NULL;
				break;
			}
			s = t;
			cap *= 2;
		}
	}
	fclose(f);
	if (s)
		s[len] = '\0';
	return s;
}

static void env_override(char *dst, size_t n, const char *name)
{
	const char *v = getenv(name);
	if (v)
		copy(dst, n, v);
}

int modal_config_load(struct modal_config *c, char *err, size_t errlen)
{
	memset(c, 0, sizeof(*c));
	char path[4096];
	const char *cfg = getenv("MODAL_CONFIG_PATH");
	const char *home = getenv("HOME");
	if (cfg && *cfg)
		copy(path, sizeof(path), cfg);
	else
		snprintf(path, sizeof(path), "%s/.modal.toml", home ? home : "");
	char *text = slurp(path);
	if (text) {
		int rc = modal_config_parse_toml(c, text, getenv("MODAL_PROFILE"), err, errlen);
		free(text);
		if (rc < 0)
			return -1;
	} else if (errno != ENOENT && cfg && *cfg) {
		snprintf(err, errlen, "cannot read the Modal config file %.300s (MODAL_CONFIG_PATH): %s",
			 path, strerror(errno));
		return -1;
	}
	env_override(c->token_id, sizeof(c->token_id), "MODAL_TOKEN_ID");
	env_override(c->token_secret, sizeof(c->token_secret), "MODAL_TOKEN_SECRET");
	env_override(c->server_url, sizeof(c->server_url), "MODAL_SERVER_URL");
	env_override(c->environment, sizeof(c->environment), "MODAL_ENVIRONMENT");
	env_override(c->image_builder_version, sizeof(c->image_builder_version),
		     "MODAL_IMAGE_BUILDER_VERSION");
	if (!c->server_url[0])
		copy(c->server_url, sizeof(c->server_url), MODAL_DEFAULT_SERVER);
	/* Python's default is a comma-separated fallback list: use the first */
	c->server_url[strcspn(c->server_url, ",")] = '\0';
	if (!c->token_id[0] || !c->token_secret[0]) {
		snprintf(err, errlen, "%s", NO_CREDS);
		return -2;
	}
	return 0;
}
