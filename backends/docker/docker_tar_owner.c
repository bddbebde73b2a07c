/* The owner of an archive's first entry; see docker_tar.h. The engine's
 * path stat (X-Docker-Container-Path-Stat) has no owner, the archive's
 * tar header does: dockerd and Podman write Go's archive/tar, ustar with
 * pax extended headers where a name, an id or an xattr needs one. */
#include "docker_tar.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* An octal field (NUL or space ended) or GNU base-256 (first byte 0x80). */
static bool number(const char *f, size_t width, uint64_t *out)
{
	uint64_t v = 0;
	if ((unsigned char)f[0] & 0x80) {
		for (size_t i = 1; i < width; i++) {
			if (v >> 56)
				return false;
			v = v << 8 | (unsigned char)f[i];
		}
		*out = v;
		return true;
	}
	size_t i = 0;
	while (i < width && f[i] == ' ')
		i++;
	bool any = false;
	for (; i < width && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 60)
			return false;
		v = v * 8 + (uint64_t)(f[i] - '0');
		any = true;
	}
	if (i < width && f[i] != '\0' && f[i] != ' ')
		return false;
	*out = v;
	return any;
}

static bool checksum_ok(const char *h)
{
	uint64_t want;
	if (!number(h + 148, 8, &want))
		return false;
	unsigned sum = 0;
	for (size_t i = 0; i < DK_TAR_BLOCK; i++)
		sum += (i >= 148 && i < 156) ? ' ' : (unsigned char)h[i];
	return want == sum;
}

/* A pax record's decimal id ("uid" or "gid"), if this is one. */
static void pax_id(const char *key, size_t klen, const char *val, size_t vlen,
		   const char *name, long long *out)
{
	if (klen != strlen(name) || memcmp(key, name, klen) != 0 || !vlen ||
	    vlen > 10)
		return;
	long long v = 0;
	for (size_t i = 0; i < vlen; i++) {
		if (val[i] < '0' || val[i] > '9')
			return;
		v = v * 10 + (val[i] - '0');
	}
	if (v < (long long)DK_TAR_ID_UNTOLD)
		*out = v;
}

/* "LEN key=value\n" records: the ids they name, -EPROTO if malformed. */
static int pax_records(const char *p, size_t len, long long *uid, long long *gid)
{
	size_t off = 0;
	while (off < len) {
		size_t rlen = 0, i = off;
		while (i < len && p[i] >= '0' && p[i] <= '9' && rlen < len)
			rlen = rlen * 10 + (size_t)(p[i++] - '0');
		if (i == off || i >= len || p[i] != ' ' || rlen > len - off ||
		    rlen < i - off + 3 || p[off + rlen - 1] != '\n')
			return -EPROTO;
		const char *key = p + i + 1, *end = p + off + rlen - 1;
		const char *eq = memchr(key, '=', (size_t)(end - key));
		if (!eq)
			return -EPROTO;
		size_t klen = (size_t)(eq - key), vlen = (size_t)(end - eq - 1);
		pax_id(key, klen, eq + 1, vlen, "uid", uid);
		pax_id(key, klen, eq + 1, vlen, "gid", gid);
		off += rlen;
	}
	return 0;
}

int dk_tar_first_owner(const char *buf, size_t len, unsigned *uid, unsigned *gid)
{
	long long pax_uid = -1, pax_gid = -1;
	size_t off = 0;
	for (;;) {
		if (off >= DK_TAR_OWNER_MAX)
			return -E2BIG;
		if (len < off + DK_TAR_BLOCK)
			return 0;
		const char *h = buf + off;
		if (!checksum_ok(h))
			return -EPROTO;
		char type = h[156];
		if (type != 'x' && type != 'g' && type != 'L' && type != 'K') {
			uint64_t u, g;
			if (!number(h + 108, 8, &u) || !number(h + 116, 8, &g))
				return -EPROTO;
			*uid = pax_uid >= 0 ? (unsigned)pax_uid
			       : u < DK_TAR_ID_UNTOLD ? (unsigned)u : 0;
			*gid = pax_gid >= 0 ? (unsigned)pax_gid
			       : g < DK_TAR_ID_UNTOLD ? (unsigned)g : 0;
			return 1;
		}
		uint64_t size;
		if (!number(h + 124, 12, &size))
			return -EPROTO;
		if (size > DK_TAR_OWNER_MAX)
			return -E2BIG;
		size_t data = off + DK_TAR_BLOCK;
		if (len < data + size)
			return 0;
		if (type == 'x' && pax_records(buf + data, size, &pax_uid, &pax_gid) < 0)
			return -EPROTO;
		off = data + (size_t)size + dk_tar_pad(size);
	}
}
