/* Header blocks for a single-file tar stream; see docker_tar.h. */
#include "docker_tar.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define USTAR_NAME 100
#define USTAR_SIZE_MAX 077777777777ULL /* 11 octal digits: 8 GiB - 1 */
#define USTAR_ID_MAX 07777777U         /* 7 octal digits */

/* width-1 octal digits and a NUL, as every tar reader accepts. */
static void octal(char *f, size_t width, uint64_t v)
{
	char tmp[32];
	snprintf(tmp, sizeof(tmp), "%0*llo", (int)(width - 1),
		 (unsigned long long)v);
	memcpy(f, tmp, width - 1);
	f[width - 1] = '\0';
}

/* GNU base-256: readers that ignore the pax size (none we know of) still
 * get the right size. */
static void base256(char *f, size_t width, uint64_t v)
{
	for (size_t i = width; i-- > 1;) {
		f[i] = (char)(v & 0xff);
		v >>= 8;
	}
	f[0] = (char)0x80;
}

static void checksum(char *h)
{
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (size_t i = 0; i < DK_TAR_BLOCK; i++)
		sum += (unsigned char)h[i];
	char tmp[16];
	snprintf(tmp, sizeof(tmp), "%06o", sum & 0777777);
	memcpy(h + 148, tmp, 6);
	h[154] = '\0';
	h[155] = ' ';
}

static void ustar(char *h, const char *name, size_t name_len, mode_t mode,
		  uint64_t size, time_t mtime, unsigned uid, unsigned gid,
		  char type)
{
	memset(h, 0, DK_TAR_BLOCK);
	memcpy(h, name, name_len < USTAR_NAME ? name_len : USTAR_NAME);
	octal(h + 100, 8, mode & 07777);
	octal(h + 108, 8, uid <= USTAR_ID_MAX ? uid : 0);
	octal(h + 116, 8, gid <= USTAR_ID_MAX ? gid : 0);
	if (size <= USTAR_SIZE_MAX)
		octal(h + 124, 12, size);
	else
		base256(h + 124, 12, size);
	octal(h + 136, 12, mtime > 0 ? (uint64_t)mtime : 0);
	h[156] = type;
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	checksum(h);
}

/* Appends one "LEN key=value\n" record, LEN counting the whole record. */
static size_t pax_record(char *out, size_t off, size_t cap, const char *key,
			 const char *val)
{
	size_t base = strlen(key) + strlen(val) + 3, len = base + 1;
	while (snprintf(NULL, 0, "%zu", len) + base != len)
		len++;
	if (off + len + 1 > cap)
		return off;
	snprintf(out + off, cap - off, "%zu %s=%s\n", len, key, val);
	return off + len;
}

static ssize_t entry_header(char *out, const char *name, mode_t mode,
			    uint64_t size, time_t mtime, unsigned uid,
			    unsigned gid);

ssize_t dk_tar_file_header(char *out, const char *name, mode_t mode,
			   uint64_t size, time_t mtime, unsigned uid,
			   unsigned gid)
{
	size_t nlen = strlen(name);
	if (nlen == 0 || strchr(name, '/'))
		return -EINVAL;
	if (nlen > DK_TAR_NAME_MAX)
		return -ENAMETOOLONG;
	return entry_header(out, name, mode, size, mtime, uid, gid);
}

ssize_t dk_tar_path_header(char *out, const char *relpath, mode_t mode,
			   uint64_t size, time_t mtime, unsigned uid,
			   unsigned gid)
{
	size_t nlen = strlen(relpath);
	if (nlen == 0 || relpath[0] == '/' || relpath[nlen - 1] == '/')
		return -EINVAL;
	if (nlen > DK_TAR_PATH_MAX)
		return -ENAMETOOLONG;
	/* Every component a plain name: nothing may land outside the
	 * directory the archive is extracted in. */
	for (const char *c = relpath; *c;) {
		size_t len = strcspn(c, "/");
		if (len == 0 || (len == 1 && c[0] == '.') ||
		    (len == 2 && c[0] == '.' && c[1] == '.'))
			return -EINVAL;
		c += len;
		if (*c == '/')
			c++;
	}
	return entry_header(out, relpath, mode, size, mtime, uid, gid);
}

static ssize_t entry_header(char *out, const char *name, mode_t mode,
			    uint64_t size, time_t mtime, unsigned uid,
			    unsigned gid)
{
	size_t nlen = strlen(name);
	char pax[2 * DK_TAR_BLOCK];
	size_t plen = 0;
	char num[32];
	if (nlen > USTAR_NAME - 1)
		plen = pax_record(pax, plen, sizeof(pax), "path", name);
	if (size > USTAR_SIZE_MAX) {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)size);
		plen = pax_record(pax, plen, sizeof(pax), "size", num);
	}
	if (uid > USTAR_ID_MAX) {
		snprintf(num, sizeof(num), "%u", uid);
		plen = pax_record(pax, plen, sizeof(pax), "uid", num);
	}
	if (gid > USTAR_ID_MAX) {
		snprintf(num, sizeof(num), "%u", gid);
		plen = pax_record(pax, plen, sizeof(pax), "gid", num);
	}
	size_t off = 0;
	if (plen) {
		/* the extended header's own name is informational only */
		ustar(out, "PaxHeader", 9, 0644, plen, mtime, 0, 0, 'x');
		off += DK_TAR_BLOCK;
		memset(out + off, 0, plen + dk_tar_pad(plen));
		memcpy(out + off, pax, plen);
		off += plen + dk_tar_pad(plen);
	}
	/* a name too long for ustar is cut here; the pax path wins */
	ustar(out + off, name, nlen, mode, size, mtime, uid, gid, '0');
	return (ssize_t)(off + DK_TAR_BLOCK);
}

size_t dk_tar_pad(uint64_t size)
{
	return (size_t)((DK_TAR_BLOCK - size % DK_TAR_BLOCK) % DK_TAR_BLOCK);
}
