/* Which CAs a TLS backend trusts: -o ca_file= wins over SSL_CERT_FILE,
 * SSL_CERT_DIR is taken beside either, and a path that cannot be read is
 * one line naming where it came from, never a silent fall back to the
 * system store. */
#include "transport/tls_trust.h"
#include "unit.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char err[512];

static int load(struct tls_trust *t, const char *opt)
{
	err[0] = '\0';
	return tls_trust_load(t, opt, "the test CA", err, sizeof(err));
}

int main(void)
{
	char dir[] = "/tmp/sbfs-tls-trust.XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char pem[256], other[256], certs[256];
	snprintf(pem, sizeof(pem), "%s/ca.pem", dir);
	snprintf(other, sizeof(other), "%s/env.pem", dir);
	snprintf(certs, sizeof(certs), "%s/certs", dir);
	FILE *f = fopen(pem, "w");
	CHECK(f && fputs("x\n", f) >= 0 && fclose(f) == 0);
	f = fopen(other, "w");
	CHECK(f && fputs("x\n", f) >= 0 && fclose(f) == 0);
	CHECK(mkdir(certs, 0700) == 0);
	struct tls_trust t;

	unsetenv("SSL_CERT_FILE");
	unsetenv("SSL_CERT_DIR");
	CHECK_INT(load(&t, NULL), 0);
	CHECK(!t.ca_file[0] && !t.ca_dir[0]); /* libcurl's defaults */
	CHECK_INT(load(&t, ""), 0);
	CHECK(!t.ca_file[0]);

	CHECK_INT(load(&t, pem), 0);
	CHECK(!strcmp(t.ca_file, pem));

	setenv("SSL_CERT_FILE", other, 1);
	CHECK_INT(load(&t, NULL), 0);
	CHECK(!strcmp(t.ca_file, other));
	CHECK_INT(load(&t, pem), 0); /* the option wins */
	CHECK(!strcmp(t.ca_file, pem));

	setenv("SSL_CERT_FILE", "", 1); /* empty is unset, as in OpenSSL */
	CHECK_INT(load(&t, NULL), 0);
	CHECK(!t.ca_file[0]);

	setenv("SSL_CERT_FILE", "/nonexistent/ca.pem", 1);
	CHECK_INT(load(&t, NULL), -1);
	CHECK(strstr(err, "SSL_CERT_FILE names '/nonexistent/ca.pem', which cannot be read") != NULL);
	CHECK(strstr(err, "the test CA") != NULL);
	CHECK(!strchr(err, '\n'));
	CHECK_INT(load(&t, "/nonexistent/opt.pem"), -1);
	CHECK(strstr(err, "-o ca_file= names '/nonexistent/opt.pem'") != NULL);
	unsetenv("SSL_CERT_FILE");

	setenv("SSL_CERT_DIR", certs, 1);
	CHECK_INT(load(&t, pem), 0);
	CHECK(!strcmp(t.ca_file, pem) && !strcmp(t.ca_dir, certs));
	char list[600];
	snprintf(list, sizeof(list), "%s:%s", certs, dir);
	setenv("SSL_CERT_DIR", list, 1);
	CHECK_INT(load(&t, NULL), 0);
	CHECK(!strcmp(t.ca_dir, list));
	snprintf(list, sizeof(list), "%s:%s/missing", certs, dir);
	setenv("SSL_CERT_DIR", list, 1);
	CHECK_INT(load(&t, NULL), -1);
	CHECK(strstr(err, "SSL_CERT_DIR names '") != NULL);
	CHECK(strstr(err, "/missing', which is not a readable directory") != NULL);
	setenv("SSL_CERT_DIR", pem, 1); /* a file is not a directory */
	CHECK_INT(load(&t, NULL), -1);
	CHECK(strstr(err, "which is not a readable directory") != NULL);
	unsetenv("SSL_CERT_DIR");

	unlink(pem);
	unlink(other);
	rmdir(certs);
	rmdir(dir);
	return unit_done("tls_trust");
}
