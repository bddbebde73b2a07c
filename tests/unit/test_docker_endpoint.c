/* The docker backend's trust in a verified TLS engine: its own ca.pem
 * (DOCKER_CERT_PATH) first; without one, SSL_CERT_FILE and SSL_CERT_DIR as
 * the docker CLI's Go system pool reads them; with none of them, one line
 * naming all three. No engine is contacted: only the endpoint is set up. */
#include "backends/docker/docker.h"
#include "unit.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char err[512];

static int setup(struct docker *d)
{
	memset(d, 0, sizeof(*d));
	err[0] = '\0';
	return dk_endpoint_setup(d, NULL, err, sizeof(err));
}

static void put(const char *path)
{
	FILE *f = fopen(path, "w");
	CHECK(f && fputs("x\n", f) >= 0 && fclose(f) == 0);
}

int main(void)
{
	char dir[] = "/tmp/sbfs-dk-endpoint.XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char certpath[64], certs[64], bundle[64], ca[128];
	snprintf(certpath, sizeof(certpath), "%s/docker", dir);
	snprintf(certs, sizeof(certs), "%s/certs", dir);
	snprintf(bundle, sizeof(bundle), "%s/bundle.pem", dir);
	snprintf(ca, sizeof(ca), "%s/ca.pem", certpath);
	CHECK(mkdir(certpath, 0700) == 0 && mkdir(certs, 0700) == 0);
	put(bundle);
	setenv("DOCKER_HOST", "tcp://127.0.0.1:2376", 1);
	setenv("DOCKER_TLS_VERIFY", "1", 1);
	setenv("DOCKER_CERT_PATH", certpath, 1);
	unsetenv("SSL_CERT_FILE");
	unsetenv("SSL_CERT_DIR");
	struct docker d;

	/* no CA anywhere: refused, naming every way to give one */
	CHECK_INT(setup(&d), -ENOENT);
	CHECK(strstr(err, "ca.pem is missing or unreadable") != NULL);
	CHECK(strstr(err, "DOCKER_CERT_PATH") && strstr(err, "SSL_CERT_FILE") &&
	      strstr(err, "SSL_CERT_DIR"));
	http_endpoint_free(&d.ep);

	setenv("SSL_CERT_DIR", certs, 1);
	CHECK_INT(setup(&d), 0);
	CHECK(d.ep.verify_peer);
	CHECK(d.ep.ca_dir && !strcmp(d.ep.ca_dir, certs));
	CHECK(d.ep.ca_file == NULL);
	CHECK(d.ep.base_url && !strcmp(d.ep.base_url, "https://127.0.0.1:2376"));
	http_endpoint_free(&d.ep);

	setenv("SSL_CERT_FILE", bundle, 1);
	CHECK_INT(setup(&d), 0);
	CHECK(d.ep.ca_file && !strcmp(d.ep.ca_file, bundle));
	CHECK(d.ep.ca_dir && !strcmp(d.ep.ca_dir, certs));
	http_endpoint_free(&d.ep);

	/* a bad SSL_CERT_DIR is its own one-line error */
	setenv("SSL_CERT_DIR", "/nonexistent/certs", 1);
	CHECK_INT(setup(&d), -EINVAL);
	CHECK(strstr(err, "SSL_CERT_DIR names '/nonexistent/certs'") != NULL);
	http_endpoint_free(&d.ep);
	setenv("SSL_CERT_DIR", certs, 1);

	/* the engine's own ca.pem wins: the variables are not consulted */
	put(ca);
	CHECK_INT(setup(&d), 0);
	CHECK(d.ep.ca_file && !strcmp(d.ep.ca_file, ca));
	CHECK(d.ep.ca_dir == NULL);
	http_endpoint_free(&d.ep);

	unlink(ca);
	unlink(bundle);
	rmdir(certs);
	rmdir(certpath);
	rmdir(dir);
	return unit_done("docker_endpoint");
}
