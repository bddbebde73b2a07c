/* Credentials and endpoints as E2B's SDKs take them: E2B_API_KEY,
 * E2B_DOMAIN (the self-hosting switch), the internal overrides E2B_API_URL
 * and E2B_SANDBOX_URL, E2B_DEBUG for a bare local envd. TLS is always
 * verified: against the system store, or a self-hosted cluster's own CA
 * from -o ca_file=, SSL_CERT_FILE or SSL_CERT_DIR (transport/tls_trust.c). */
#include "e2b.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *env_or(const char *name, const char *dflt)
{
	const char *v = getenv(name);
	return v && *v ? v : dflt;
}

static void strip_slash(char *s)
{
	size_t n = strlen(s);
	while (n && s[n - 1] == '/')
		s[--n] = '\0';
}

int e2b_config_load(struct e2b_config *c, const struct sb_spec *spec,
		    char *err, size_t errlen)
{
	memset(c, 0, sizeof(*c));
	const char *key = env_or("E2B_API_KEY", NULL);
	if (!key) {
		snprintf(err, errlen, "E2B_API_KEY is not set: set it to your E2B API key (e2b.dev dashboard, or your self-hosted cluster's key)");
		return -1;
	}
	if (strlen(key) >= sizeof(c->api_key) || strpbrk(key, "\r\n")) {
		snprintf(err, errlen, "E2B_API_KEY is not a valid key (too long or multi-line): set it to your E2B API key");
		return -1;
	}
	snprintf(c->api_key, sizeof(c->api_key), "%s", key);
	snprintf(c->domain, sizeof(c->domain), "%s", env_or("E2B_DOMAIN", E2B_DEFAULT_DOMAIN));
	bool debug = !strcmp(env_or("E2B_DEBUG", ""), "true");
	const char *api = env_or("E2B_API_URL", NULL);
	if (api)
		snprintf(c->api_url, sizeof(c->api_url), "%s", api);
	else if (debug)
		snprintf(c->api_url, sizeof(c->api_url), "http://localhost:3000");
	else
		snprintf(c->api_url, sizeof(c->api_url), "https://api.%s", c->domain);
	const char *sbx = env_or("E2B_SANDBOX_URL", NULL);
	if (sbx)
		snprintf(c->sandbox_url, sizeof(c->sandbox_url), "%s", sbx);
	else if (debug)
		snprintf(c->sandbox_url, sizeof(c->sandbox_url), "http://localhost:%d", E2B_ENVD_PORT);
	strip_slash(c->api_url);
	strip_slash(c->sandbox_url);
	if (tls_trust_load(&c->trust, spec ? sb_spec_option(spec, "ca_file") : NULL,
			   "your cluster's CA", err, errlen) < 0)
		return -1;
	return 0;
}

void e2b_envd_url(const struct e2b_config *c, const char *sandbox_id,
		  const char *domain, char *out, size_t n)
{
	if (c->sandbox_url[0])
		snprintf(out, n, "%s", c->sandbox_url);
	else
		snprintf(out, n, "https://%d-%s.%s", E2B_ENVD_PORT, sandbox_id,
			 domain && *domain ? domain : c->domain);
}

int e2b_endpoint(struct http_endpoint *ep, const struct e2b_config *c,
		 const char *base_url)
{
	memset(ep, 0, sizeof(*ep));
	if (http_endpoint_init(ep) < 0)
		return -ENOMEM;
	ep->base_url = strdup(base_url);
	/* never off: a self-hosted CA is added with ca_file, not by trusting all */
	ep->verify_peer = true;
	if (c->trust.ca_file[0])
		ep->ca_file = strdup(c->trust.ca_file);
	if (c->trust.ca_dir[0])
		ep->ca_dir = strdup(c->trust.ca_dir);
	if (!ep->base_url || (c->trust.ca_file[0] && !ep->ca_file) ||
	    (c->trust.ca_dir[0] && !ep->ca_dir))
		return -ENOMEM;
	return 0;
}
