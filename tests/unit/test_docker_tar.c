/* The docker backend's tar writer: checksums, ustar fields, pax records
 * for long names and sizes past 8 GiB, modes; and a round trip through the
 * system's tar (GNU tar on Debian) when it is installed. */
#include "backends/docker/docker_tar.h"
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static unsigned long octal_field(const char *f, size_t n)
{
	char tmp[16] = "";
	memcpy(tmp, f, n);
	return strtoul(tmp, NULL, 8);
}

static int checksum_ok(const char *h)
{
	unsigned sum = 0;
	for (size_t i = 0; i < 512; i++)
		sum += (i >= 148 && i < 156) ? ' ' : (unsigned char)h[i];
	return octal_field(h + 148, 7) == sum;
}

static void test_plain(void)
{
	char h[DK_TAR_HEADER_MAX];
	ssize_t n = dk_tar_file_header(h, "hello.txt", 0755, 12345, 1700000000, 1000, 100);
	CHECK_INT(n, 512);
	CHECK(checksum_ok(h));
	CHECK(strcmp(h, "hello.txt") == 0);
	CHECK_INT(octal_field(h + 100, 8), 0755);
	CHECK_INT(octal_field(h + 108, 8), 1000);
	CHECK_INT(octal_field(h + 116, 8), 100);
	CHECK_INT(octal_field(h + 124, 12), 12345);
	CHECK_INT(octal_field(h + 136, 12), 1700000000);
	CHECK_INT(h[156], '0');
	CHECK(memcmp(h + 257, "ustar\0" "00", 8) == 0);
	/* type bits never leak into the mode field */
	n = dk_tar_file_header(h, "x", 0100644 | 04000, 0, 0, 0, 0);
	CHECK_INT(octal_field(h + 100, 8), 04644);
	CHECK(checksum_ok(h));
}

static void test_refused(void)
{
	char h[DK_TAR_HEADER_MAX];
	char name[300];
	memset(name, 'a', sizeof(name));
	name[256] = '\0';
	CHECK_INT(dk_tar_file_header(h, name, 0644, 1, 0, 0, 0), -ENAMETOOLONG);
	CHECK_INT(dk_tar_file_header(h, "", 0644, 1, 0, 0, 0), -EINVAL);
	CHECK_INT(dk_tar_file_header(h, "a/b", 0644, 1, 0, 0, 0), -EINVAL);
}

/* finds "key=value\n" in pax data */
static int pax_has(const char *data, size_t len, const char *rec)
{
	char want[400];
	snprintf(want, sizeof(want), "%s\n", rec);
	for (size_t i = 0; i + strlen(want) <= len; i++)
		if (memcmp(data + i, want, strlen(want)) == 0) {
			/* and the record's length prefix is right */
			size_t start = i;
			while (start > 0 && data[start - 1] != '\n')
				start--;
			unsigned long l = strtoul(data + start, NULL, 10);
			return l == i + strlen(want) - start;
		}
	return 0;
}

static void test_pax(void)
{
	char h[DK_TAR_HEADER_MAX];
	char name[256];
	memset(name, 'n', 255);
	name[255] = '\0';
	ssize_t n = dk_tar_file_header(h, name, 0600, 10ULL << 30, 1, 0, 0);
	CHECK(n == 3 * 512);
	CHECK_INT(h[156], 'x');
	CHECK(checksum_ok(h));
	size_t plen = octal_field(h + 124, 12);
	char rec[300];
	snprintf(rec, sizeof(rec), "path=%s", name);
	CHECK(pax_has(h + 512, plen, rec));
	CHECK(pax_has(h + 512, plen, "size=10737418240"));
	const char *u = h + n - 512;
	CHECK(checksum_ok(u));
	CHECK_INT(u[156], '0');
	CHECK_INT((unsigned char)u[124], 0x80); /* base-256 size too */
	/* names of exactly 99 and 100 bytes: the edge of the ustar field */
	name[99] = '\0';
	CHECK_INT(dk_tar_file_header(h, name, 0644, 0, 0, 0, 0), 512);
	name[99] = 'n';
	name[100] = '\0';
	CHECK_INT(dk_tar_file_header(h, name, 0644, 0, 0, 0, 0), 3 * 512);
	CHECK_INT(dk_tar_pad(0), 0);
	CHECK_INT(dk_tar_pad(1), 511);
	CHECK_INT(dk_tar_pad(512), 0);
	CHECK_INT(dk_tar_pad(513), 511);
}

/* Writes a one-file archive and lists/extracts it with the system tar. */
static void test_roundtrip(void)
{
	if (system("tar --version >/dev/null 2>&1") != 0) {
		printf("docker_tar: no tar on this host, round trip skipped\n");
		return;
	}
	char dir[] = "/tmp/sbfs-tar-XXXXXX";
	if (!mkdtemp(dir))
		return;
	char name[201];
	memset(name, 'L', 200);
	name[200] = '\0';
	name[0] = '-'; /* a hostile first byte, also for tar */
	const char *names[] = {"plain file.txt", name};
	for (size_t k = 0; k < 2; k++) {
		char path[300];
		snprintf(path, sizeof(path), "%s/a.tar", dir);
		FILE *f = fopen(path, "wb");
		CHECK(f != NULL);
		if (!f)
			return;
		char h[DK_TAR_HEADER_MAX];
		const char data[] = "content\nwith two lines\n";
		size_t size = sizeof(data) - 1;
		ssize_t n = dk_tar_file_header(h, names[k], 0751, size, 1600000000, 0, 0);
		CHECK(n > 0);
		fwrite(h, 1, (size_t)n, f);
		fwrite(data, 1, size, f);
		static const char zeros[1536];
		fwrite(zeros, 1, dk_tar_pad(size), f);
		fwrite(zeros, 1, DK_TAR_TRAILER, f);
		fclose(f);
		char cmd[1200];
		snprintf(cmd, sizeof(cmd), "tar -tvf %s/a.tar > %s/list 2>&1", dir, dir);
		CHECK_INT(system(cmd), 0);
		snprintf(cmd, sizeof(cmd), "grep -q -- '-rwxr-x--x' %s/list && grep -q -- '%.40s' %s/list",
			 dir, names[k], dir);
		CHECK_INT(system(cmd), 0);
		snprintf(cmd, sizeof(cmd), "tar -xOf %s/a.tar > %s/out && printf 'content\\nwith two lines\\n' | cmp -s - %s/out",
			 dir, dir, dir);
		CHECK_INT(system(cmd), 0);
	}
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK_INT(system(cmd), 0);
}

/* Entries of a many-file archive: paths below the extraction directory,
 * never a component that could climb out of it. */
static void test_path_entries(void)
{
	char h[DK_TAR_HEADER_MAX];
	CHECK_INT(dk_tar_path_header(h, "sub/dir/f.c", 0644, 7, 1, 0, 0), 512);
	CHECK(strcmp(h, "sub/dir/f.c") == 0);
	CHECK(checksum_ok(h));
	const char *bad[] = {"", "/abs", "a/../b", "..", "../x", "a/..", "./a",
			     "a/./b", "a//b", "a/", NULL};
	for (size_t i = 0; bad[i]; i++)
		CHECK_INT(dk_tar_path_header(h, bad[i], 0644, 1, 0, 0, 0), -EINVAL);
	/* "..." and ".x" are plain names */
	CHECK_INT(dk_tar_path_header(h, ".../.x", 0644, 1, 0, 0, 0), 512);
	char longp[DK_TAR_PATH_MAX + 2];
	memset(longp, 'a', sizeof longp - 1);
	longp[sizeof longp - 1] = '\0';
	longp[100] = '/';
	CHECK_INT(dk_tar_path_header(h, longp, 0644, 1, 0, 0, 0), -ENAMETOOLONG);
	longp[DK_TAR_PATH_MAX] = '\0'; /* the longest allowed: a pax path */
	ssize_t n = dk_tar_path_header(h, longp, 0644, 1, 0, 0, 0);
	CHECK(n == 3 * 512 || n == 4 * 512);
	CHECK_INT(h[156], 'x');
}

int main(void)
{
	test_plain();
	test_path_entries();
	test_refused();
	test_pax();
	test_roundtrip();
	return unit_done("docker_tar");
}
