/* Which CAs a TLS client of ours trusts, found as OpenSSL-based tools find
 * them: a CA file named by the user (-o ca_file=), else SSL_CERT_FILE; and
 * SSL_CERT_DIR, a directory (or a colon-separated list) of hashed CA
 * certificates. libcurl reads neither variable itself, so we do. Each one
 * replaces libcurl's default of its kind, as in OpenSSL; verification is
 * never turned off by any of them. */
#ifndef SBFS_TRANSPORT_TLS_TRUST_H
#define SBFS_TRANSPORT_TLS_TRUST_H

#include <curl/curl.h>
#include <stddef.h>

struct tls_trust {
	char ca_file[1024]; /* "" = libcurl's default bundle */
	char ca_dir[1024];  /* "" = libcurl's default directory */
};

/* ca_file_opt: the user's -o ca_file= value, or NULL. whose: what the CA
 * signs, for the fix in a message ("your cluster's CA"). 0, or -1 with one
 * line in err naming where the path came from and what to do. */
int tls_trust_load(struct tls_trust *t, const char *ca_file_opt,
		   const char *whose, char *err, size_t errlen);
/* Sets CURLOPT_CAINFO/CURLOPT_CAPATH for what t names. */
void tls_trust_apply(CURL *h, const struct tls_trust *t);

#endif
