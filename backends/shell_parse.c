/* Parsers of the shell scripts' output (stat lines, statfs, listings),
 * exposed for unit tests. */
#include "shell_run.h"
#include "sandbox_limits.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int shell_parse_u64(const char **p, const char *end, int base, uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;
	int digits = 0;
	while (s < end) {
		int d;
		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (base == 16 && *s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (base == 16 && *s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			break;
		if (x > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
			return -EPROTO;
		x = x * (uint64_t)base + (uint64_t)d;
		s++;
		digits++;
	}
	if (!digits || digits > 20)
		return -EPROTO;
	*p = s;
	*v = x;
	return 0;
}

/* Fields separated by single spaces, nothing before, nothing after. */
static int parse_fields(const char *line, size_t len, const int *bases,
			uint64_t *v, size_t n)
{
	const char *p = line, *end = line + len;
	for (size_t i = 0; i < n; i++) {
		if (i) {
			if (p >= end || *p != ' ')
				return -EPROTO;
			p++;
		}
		if (shell_parse_u64(&p, end, bases[i], &v[i]) < 0)
			return -EPROTO;
	}
	return p == end ? 0 : -EPROTO;
}

int shell_parse_stat_line(const char *line, size_t len, struct stat *st)
{
	static const int bases[9] = {16, 10, 10, 10, 10, 10, 10, 10, 10};
	uint64_t v[9];
	if (!line || parse_fields(line, len, bases, v, 9) < 0)
		return -EPROTO;
	if (v[0] > 0xffff || v[1] > INT64_MAX || v[2] > INT64_MAX ||
	    v[3] > INT64_MAX || v[4] > INT64_MAX || v[7] > UINT32_MAX ||
	    v[8] > UINT32_MAX)
		return -EPROTO;
	switch (v[0] & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFIFO:
	case S_IFSOCK: case S_IFCHR: case S_IFBLK:
		break;
	default:
		return -EPROTO;
	}
	memset(st, 0, sizeof(*st));
	st->st_mode = (mode_t)v[0];
	st->st_size = (off_t)v[1];
	st->st_mtim.tv_sec = (time_t)v[2];
	st->st_atim.tv_sec = (time_t)v[3];
	st->st_ctim.tv_sec = (time_t)v[4];
	st->st_nlink = (nlink_t)v[5];
	st->st_ino = (ino_t)v[6];
	st->st_uid = (uid_t)v[7];
	st->st_gid = (gid_t)v[8];
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((v[1] + 511) / 512);
	return 0;
}

int shell_parse_statfs(const char *out, size_t len, struct statvfs *st)
{
	static const int bases[7] = {10, 10, 10, 10, 10, 10, 10};
	uint64_t v[7];
	if (!out || len == 0 || out[len - 1] != '\n' ||
	    parse_fields(out, len - 1, bases, v, 7) < 0)
		return -EPROTO;
	if (v[3] == 0 || v[3] > (1u << 30) || v[1] > v[0] || v[2] > v[0])
		return -EPROTO;
	memset(st, 0, sizeof(*st));
	st->f_blocks = v[0];
	st->f_bavail = v[1];
	st->f_bfree = v[2];
	st->f_bsize = st->f_frsize = (unsigned long)v[3];
	st->f_files = v[4];
	st->f_ffree = st->f_favail = v[5];
	st->f_namemax = (unsigned long)v[6];
	return 0;
}

static bool name_ok(const char *s, size_t len)
{
	if (len == 0 || len > SB_LIMIT_NAME || memchr(s, '/', len))
		return false;
	return !(len == 1 && s[0] == '.') &&
	       !(len == 2 && s[0] == '.' && s[1] == '.');
}

/* List framing (all produced by one command):
 *   "<N>\n"
 *   N names, each followed by NUL
 *   N stat lines (STAT_FMT), each followed by "\n", same order
 *   one link target per symlink among them, in order, each followed by NUL
 * and nothing after. */
int shell_parse_list(const char *out, size_t len, struct sb_dirlist *list)
{
	const char *p = out, *end = out + len;
	uint64_t n;
	if (!out || shell_parse_u64(&p, end, 10, &n) < 0 || p >= end || *p++ != '\n')
		return -EPROTO;
	if (n > len)
		return -EPROTO;
	if (n > SB_LIMIT_LIST_ENTRIES)
		return -EFBIG;
	struct sb_dirlist tmp = {0};
	int rc = -EPROTO;
	for (uint64_t i = 0; i < n; i++) {
		const char *nul = memchr(p, '\0', (size_t)(end - p));
		if (!nul || !name_ok(p, (size_t)(nul - p)))
			goto fail;
		if (!sb_dirlist_add(&tmp, p)) {
			rc = -ENOMEM;
			goto fail;
		}
		p = nul + 1;
	}
	for (uint64_t i = 0; i < n; i++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl || shell_parse_stat_line(p, (size_t)(nl - p), &tmp.v[i].st) < 0)
			goto fail;
		p = nl + 1;
	}
	for (uint64_t i = 0; i < n; i++) {
		if (!S_ISLNK(tmp.v[i].st.st_mode))
			continue;
		const char *nul = memchr(p, '\0', (size_t)(end - p));
		if (!nul || nul - p > SB_LIMIT_LINK_TARGET)
			goto fail;
		if (nul > p && !(tmp.v[i].link_target = strdup(p))) {
			rc = -ENOMEM;
			goto fail;
		}
		p = nul + 1;
	}
	if (p != end)
		goto fail;
	for (size_t i = 0; i < tmp.n; i++) {
		struct sb_dirent *e = sb_dirlist_add(list, tmp.v[i].name);
		if (!e) {
			rc = -ENOMEM;
			goto fail;
		}
		e->st = tmp.v[i].st;
		e->link_target = tmp.v[i].link_target;
		tmp.v[i].link_target = NULL;
	}
	sb_dirlist_free(&tmp);
	return 0;
fail:
	sb_dirlist_free(&tmp);
	return rc;
}
