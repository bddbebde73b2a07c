/* The CAs our TLS clients trust; see tls_trust.h. */
#include "tls_trust.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *env_nonempty(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

/* Every entry of a colon-separated list must be a directory we can list:
 * OpenSSL would skip a bad one silently, and the user would only see a
 * certificate error far from its cause. */
static int check_dirs(const char *list, char *err, size_t errlen)
{
	const char *p = list;
	for (;;) {
		size_t k = strcspn(p, ":");
		char dir[1024];
		if (k && k < sizeof(dir)) {
			memcpy(dir, p, k);
			dir[k] = '\0';
			DIR *d = opendir(dir);
			if (!d) {
				snprintf(err, errlen, "SSL_CERT_DIR names '%.300s', which is not a readable directory (%s): point it at a directory of hashed CA certificates (openssl rehash DIR), or unset it",
					 dir, strerror(errno));
				return -1;
			}
			closedir(d);
		}
		if (!p[k])
			return 0;
		p += k + 1;
	}
}

int tls_trust_load(struct tls_trust *t, const char *ca_file_opt,
		   const char *whose, char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	const char *ca = ca_file_opt && *ca_file_opt ? ca_file_opt : NULL;
	const char *from = "-o ca_file=";
	if (!ca) {
		ca = env_nonempty("SSL_CERT_FILE");
		from = "SSL_CERT_FILE";
	}
	if (ca) {
		if (access(ca, R_OK) < 0) {
			snprintf(err, errlen, "%s names '%.300s', which cannot be read (%s): point it at the PEM file of %s",
				 from, ca, strerror(errno), whose);
			return -1;
		}
		if (strlen(ca) >= sizeof(t->ca_file)) {
			snprintf(err, errlen, "%s is too long a path: move the PEM file of %s to a shorter one",
				 from, whose);
			return -1;
		}
		snprintf(t->ca_file, sizeof(t->ca_file), "%s", ca);
	}
	const char *dir = env_nonempty("SSL_CERT_DIR");
	if (dir) {
		if (check_dirs(dir, err, errlen) < 0)
			return -1;
		if (strlen(dir) >= sizeof(t->ca_dir)) {
			snprintf(err, errlen, "SSL_CERT_DIR is too long: name fewer or shorter directories");
			return -1;
		}
		snprintf(t->ca_dir, sizeof(t->ca_dir), "%s", dir);
	}
	return 0;
}

void tls_trust_apply(CURL *h, const struct tls_trust *t)
{
	if (t->ca_file[0])
		curl_easy_setopt(h, CURLOPT_CAINFO, t->ca_file);
	if (t->ca_dir[0])
		curl_easy_setopt(h, CURLOPT_CAPATH, t->ca_dir);
}
