/* The Connect protocol's envelope framing and the protojson shapes of
 * envd's messages (notes 1.4-1.6). Pure functions over bytes, so the unit
 * tests can feed them split, truncated and hostile input. */
#include "e2b.h"
#include "transport/base64.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

char *connect_envelope(const char *json, size_t json_len, size_t *len)
{
	if (json_len > UINT32_MAX)
		return NULL;
	char *out = malloc(json_len + 5);
	if (!out)
		return NULL;
	out[0] = 0;
	out[1] = (char)(json_len >> 24 & 0xff);
	out[2] = (char)(json_len >> 16 & 0xff);
	out[3] = (char)(json_len >> 8 & 0xff);
	out[4] = (char)(json_len & 0xff);
	memcpy(out + 5, json, json_len);
	*len = json_len + 5;
	return out;
}

int connect_reader_feed(struct connect_reader *r, const char *data, size_t len,
			connect_msg_fn fn, void *arg)
{
	while (len) {
		if (r->ended)
			return -EPROTO; /* nothing may follow the end-stream envelope */
		if (!r->in_payload) {
			size_t k = 5 - r->hdr_got;
			if (k > len)
				k = len;
			memcpy(r->hdr + r->hdr_got, data, k);
			r->hdr_got += k;
			data += k;
			len -= k;
			if (r->hdr_got < 5)
				return 0;
			unsigned flags = r->hdr[0];
			/* compression was never negotiated; unknown bits are not ours */
			if (flags & ~(unsigned)CONNECT_FLAG_END)
				return -EPROTO;
			uint32_t n = (uint32_t)r->hdr[1] << 24 | (uint32_t)r->hdr[2] << 16 |
				     (uint32_t)r->hdr[3] << 8 | r->hdr[4];
			if (n > CONNECT_MAX_MESSAGE)
				return -EPROTO;
			r->need = n;
			r->got = 0;
			r->in_payload = true;
			free(r->payload);
			r->payload = malloc((size_t)n + 1);
			if (!r->payload)
				return -ENOMEM;
		}
		size_t k = r->need - r->got;
		if (k > len)
			k = len;
		memcpy(r->payload + r->got, data, k);
		r->got += k;
		data += k;
		len -= k;
		if (r->got < r->need)
			return 0;
		r->payload[r->need] = '\0';
		unsigned flags = r->hdr[0];
		r->in_payload = false;
		r->hdr_got = 0;
		if (flags & CONNECT_FLAG_END)
			r->ended = true;
		int rc = fn(arg, flags, r->payload, r->need);
		free(r->payload);
		r->payload = NULL;
		if (rc < 0)
			return rc;
	}
	return 0;
}

bool connect_reader_at_boundary(const struct connect_reader *r)
{
	return !r->in_payload && r->hdr_got == 0;
}

void connect_reader_free(struct connect_reader *r)
{
	free(r->payload);
	memset(r, 0, sizeof(*r));
}

void e2b_event_free(struct e2b_event *ev)
{
	free(ev->data);
	memset(ev, 0, sizeof(*ev));
}

static int b64_field(const json_t *o, const char *key, struct e2b_event *ev)
{
	const json_t *v = json_object_get(o, key);
	if (!json_is_string(v))
		return -EPROTO;
	ev->data = base64_decode(json_string_value(v), &ev->len);
	return ev->data ? 0 : -EPROTO;
}

int e2b_parse_event(const char *json, size_t len, struct e2b_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	json_t *root = json_loadb(json, len, 0, NULL);
	if (!json_is_object(root)) {
		json_decref(root);
		return -EPROTO;
	}
	int rc = 0;
	json_t *e = json_object_get(root, "event");
	json_t *v;
	if (!json_is_object(e)) {
		rc = -EPROTO;
	} else if ((v = json_object_get(e, "start"))) {
		ev->kind = EV_START;
		if (!json_is_object(v) || pj_int64(json_object_get(v, "pid"), &ev->pid) < 0)
			rc = -EPROTO;
	} else if ((v = json_object_get(e, "data"))) {
		if (!json_is_object(v))
			rc = -EPROTO;
		else if (json_object_get(v, "stdout")) {
			ev->kind = EV_STDOUT;
			rc = b64_field(v, "stdout", ev);
		} else if (json_object_get(v, "stderr")) {
			ev->kind = EV_STDERR;
			rc = b64_field(v, "stderr", ev);
		} else if (json_object_get(v, "pty")) {
			ev->kind = EV_STDOUT; /* never asked for; shown as output */
			rc = b64_field(v, "pty", ev);
		} else {
			ev->kind = EV_KEEPALIVE; /* an empty data event carries nothing */
		}
	} else if ((v = json_object_get(e, "end"))) {
		ev->kind = EV_END;
		if (!json_is_object(v)) {
			rc = -EPROTO;
		} else {
			/* protojson drops zero values: no exitCode means 0 */
			json_t *c = json_object_get(v, "exitCode");
			int64_t code = 0;
			if (c && pj_int64(c, &code) < 0)
				rc = -EPROTO;
			if (code < INT32_MIN || code > INT32_MAX)
				rc = -EPROTO;
			ev->exit_code = (int)code;
			ev->exited = json_is_true(json_object_get(v, "exited"));
			const char *s = json_string_value(json_object_get(v, "status"));
			snprintf(ev->status, sizeof(ev->status), "%s", s ? s : "");
		}
	} else if (json_object_get(e, "keepalive")) {
		ev->kind = EV_KEEPALIVE;
	} else {
		ev->kind = EV_NONE; /* a newer event kind: skipped */
	}
	json_decref(root);
	if (rc < 0)
		e2b_event_free(ev);
	return rc;
}

int e2b_parse_end_stream(const char *json, size_t len, char *code, size_t codelen,
			 char *msg, size_t msglen)
{
	code[0] = msg[0] = '\0';
	json_t *root = json_loadb(json, len, 0, NULL);
	if (!json_is_object(root)) {
		json_decref(root);
		return -EPROTO;
	}
	json_t *err = json_object_get(root, "error");
	if (err) {
		const char *c = json_string_value(json_object_get(err, "code"));
		const char *m = json_string_value(json_object_get(err, "message"));
		snprintf(code, codelen, "%s", c && *c ? c : "unknown");
		snprintf(msg, msglen, "%s", m ? m : "");
	}
	json_decref(root);
	return 0;
}

int pj_int64(const json_t *v, int64_t *out)
{
	if (json_is_integer(v)) {
		*out = (int64_t)json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v))
		return -EPROTO;
	const char *s = json_string_value(v);
	/* strtoll would also take blanks and a plus sign */
	if (!(*s == '-' || (*s >= '0' && *s <= '9')))
		return -EPROTO;
	char *end;
	errno = 0;
	long long n = strtoll(s, &end, 10);
	if (errno || *end)
		return -EPROTO;
	*out = n;
	return 0;
}

static int digits(const char **p, int n, int *out)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		char c = (*p)[i];
		if (c < '0' || c > '9')
			return -1;
		v = v * 10 + (c - '0');
	}
	*p += n;
	*out = v;
	return 0;
}

int pj_time(const char *s, struct timespec *ts)
{
	struct tm tm = {0};
	int y, mo, d, h, mi, se;
	const char *p = s;
	if (digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' ||
	    digits(&p, 2, &d) || (*p != 'T' && *p != 't') || !*p++ ||
	    digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi) || *p++ != ':' ||
	    digits(&p, 2, &se))
		return -EPROTO;
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
		return -EPROTO;
	long nsec = 0;
	if (*p == '.') {
		p++;
		int n = 0;
		while (*p >= '0' && *p <= '9') {
			if (n < 9)
				nsec = nsec * 10 + (*p - '0');
			n++;
			p++;
		}
		if (n == 0)
			return -EPROTO;
		for (; n < 9; n++)
			nsec *= 10;
	}
	long off = 0;
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int sign = *p++ == '-' ? -1 : 1, oh, om;
		if (digits(&p, 2, &oh) || *p++ != ':' || digits(&p, 2, &om))
			return -EPROTO;
		off = sign * (oh * 3600L + om * 60L);
	} else {
		return -EPROTO;
	}
	if (*p)
		return -EPROTO;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = se;
	ts->tv_sec = timegm(&tm) - off;
	ts->tv_nsec = nsec;
	return 0;
}

int pj_mode_string(const char *s, mode_t *mode)
{
	size_t n = strlen(s);
	if (n < 10)
		return -EPROTO;
	mode_t m = 0, type = S_IFREG;
	size_t nlead = n - 9;
	for (size_t i = 0; i < nlead; i++) {
		switch (s[i]) {
		case '-': break;
		case 'd': type = S_IFDIR; break;
		case 'L': type = S_IFLNK; break;
		case 'p': type = S_IFIFO; break;
		case 'S': type = S_IFSOCK; break;
		case 'D': type = type == S_IFCHR ? S_IFCHR : S_IFBLK; break;
		case 'c': type = S_IFCHR; break;
		case 'u': m |= S_ISUID; break;
		case 'g': m |= S_ISGID; break;
		case 't': m |= S_ISVTX; break;
		case 'a': case 'l': case 'T': case '?': break;
		default: return -EPROTO;
		}
	}
	static const char rwx[] = "rwxrwxrwx";
	for (size_t i = 0; i < 9; i++) {
		char c = s[nlead + i];
		if (c == rwx[i])
			m |= (mode_t)(0400 >> i);
		else if (c != '-')
			return -EPROTO;
	}
	*mode = type | m;
	return 0;
}

static void owner_id(const json_t *v, const struct e2b_ids *ids, bool group,
		     unsigned *out)
{
	const char *s = json_string_value(v);
	/* an envd that names no owner: what the user's uploads make */
	*out = group ? ids->gid : ids->uid;
	if (!s || !*s)
		return;
	*out = SB_ID_UNTOLD; /* a name only the guest's passwd maps */
	if (!strcmp(s, "root")) {
		*out = 0;
		return;
	}
	if (ids->user && !strcmp(s, ids->user)) {
		*out = group ? ids->gid : ids->uid;
		return;
	}
	char *end;
	unsigned long n = strtoul(s, &end, 10);
	if (!*end && n < SB_ID_UNTOLD)
		*out = (unsigned)n;
}

int e2b_parse_entry(const json_t *e, const struct e2b_ids *ids,
		    struct stat *st, const char **name)
{
	memset(st, 0, sizeof(*st));
	if (!json_is_object(e))
		return -EPROTO;
	const char *nm = json_string_value(json_object_get(e, "name"));
	if (!nm || !*nm || strchr(nm, '/'))
		return -EPROTO;
	if (name)
		*name = nm;
	const char *perms = json_string_value(json_object_get(e, "permissions"));
	const char *type = json_string_value(json_object_get(e, "type"));
	bool is_link = json_object_get(e, "symlinkTarget") != NULL;
	mode_t m = 0;
	if (perms && pj_mode_string(perms, &m) < 0)
		return -EPROTO;
	if (!perms) {
		/* older envd: the type field and the permission bits only */
		json_int_t bits = json_integer_value(json_object_get(e, "mode"));
		m = (mode_t)(bits & 07777);
		m |= type && !strcmp(type, "FILE_TYPE_DIRECTORY") ? S_IFDIR : S_IFREG;
	}
	/* a symlink's type and mode describe its target: the link itself is
	 * told by symlinkTarget or the L of its permissions */
	if (is_link || S_ISLNK(m))
		m = S_IFLNK | 0777;
	st->st_mode = m;
	int64_t size = 0;
	json_t *sz = json_object_get(e, "size");
	if (sz && pj_int64(sz, &size) < 0)
		return -EPROTO;
	if (size < 0)
		return -EPROTO;
	st->st_size = (off_t)size;
	const char *mt = json_string_value(json_object_get(e, "modifiedTime"));
	if (mt && pj_time(mt, &st->st_mtim) < 0)
		return -EPROTO;
	st->st_atim = st->st_ctim = st->st_mtim;
	unsigned u, g;
	owner_id(json_object_get(e, "owner"), ids, false, &u);
	owner_id(json_object_get(e, "group"), ids, true, &g);
	st->st_uid = u;
	st->st_gid = g;
	st->st_nlink = 0; /* not told: the fs core keeps the count it knows */
	st->st_blksize = 4096;
	st->st_blocks = (st->st_size + 511) / 512;
	return 0;
}

static bool has(const char *msg, const char *what)
{
	return msg && strcasestr(msg, what);
}

int e2b_connect_errno(const char *code, const char *msg)
{
	if (!strcmp(code, "not_found"))
		return -ENOENT;
	if (!strcmp(code, "already_exists"))
		return -EEXIST;
	if (!strcmp(code, "permission_denied"))
		return -EACCES;
	if (!strcmp(code, "deadline_exceeded"))
		return -ETIMEDOUT;
	if (!strcmp(code, "unavailable"))
		return -ECONNRESET;
	if (!strcmp(code, "resource_exhausted"))
		return has(msg, "space") || has(msg, "quota") ? -ENOSPC : -EAGAIN;
	if (!strcmp(code, "failed_precondition"))
		return has(msg, "cycle") || has(msg, "symlink") ? -ELOOP : -EINVAL;
	/* the rest carry an os error in words */
	if (has(msg, "not a directory"))
		return -ENOTDIR;
	if (has(msg, "is a directory"))
		return -EISDIR;
	if (has(msg, "not empty"))
		return -ENOTEMPTY;
	if (has(msg, "cross-device"))
		return -EXDEV;
	if (has(msg, "no space"))
		return -ENOSPC;
	if (has(msg, "permission denied"))
		return -EACCES;
	if (has(msg, "file exists"))
		return -EEXIST;
	if (has(msg, "no such file") || has(msg, "does not exist"))
		return -ENOENT;
	if (has(msg, "name too long"))
		return -ENAMETOOLONG;
	if (!strcmp(code, "invalid_argument"))
		return -EINVAL;
	return -EIO;
}
