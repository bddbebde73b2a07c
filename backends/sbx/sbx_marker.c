/* Tells the guest command's stderr from the CLI's own (sbx.h, struct
 * sbx_marker). The marks begin with \036 (record separator), which text
 * on stderr does not contain; only bytes that could be the start of a
 * mark are held back, so a prompt on stderr is passed on at once. */
#include "sbx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RS '\036'
#define CLI_TEXT_MAX 8192

void sbx_marker_init(struct sbx_marker *m, const char *nonce)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->nonce, sizeof(m->nonce), "%s", nonce);
	m->phase = MK_BEFORE;
	m->status = -1;
}

void sbx_marker_free(struct sbx_marker *m)
{
	free(m->cli);
	m->cli = NULL;
	m->cli_len = 0;
}

void sbx_marker_keep_cli(struct sbx_marker *m, const char *d, size_t n)
{
	if (m->cli_len + n > CLI_TEXT_MAX)
		n = CLI_TEXT_MAX - m->cli_len;
	if (!n)
		return;
	char *p = realloc(m->cli, m->cli_len + n + 1);
	if (!p)
		return;
	memcpy(p + m->cli_len, d, n);
	m->cli = p;
	m->cli_len += n;
	m->cli[m->cli_len] = '\0';
}

/* How the held bytes compare with a mark of this kind ('S' or 'E'):
 * 1 a whole mark (its end at *end), 0 could still become one, -1 not. */
static int match_mark(const struct sbx_marker *m, const char *h, size_t n,
		      char kind, size_t *end)
{
	char want[SBX_NONCE_LEN + 8];
	int wl = snprintf(want, sizeof(want), "%c%s %c", RS, m->nonce, kind);
	size_t cmp = n < (size_t)wl ? n : (size_t)wl;
	if (memcmp(h, want, cmp) != 0)
		return -1;
	if (n < (size_t)wl)
		return 0;
	const char *nl = memchr(h + wl, '\n', n - (size_t)wl);
	if (!nl)
		return n - (size_t)wl > 9 ? -1 : 0;
	/* on a terminal the line ends "\r\n" */
	const char *stop = nl > h + wl && nl[-1] == '\r' ? nl - 1 : nl;
	if (kind == 'E') {
		/* " <status>" */
		const char *p = h + wl;
		if (p == stop || *p != ' ')
			return -1;
		for (p++; p < stop; p++)
			if (*p < '0' || *p > '9')
				return -1;
	} else if (h + wl != stop) {
		return -1;
	}
	*end = (size_t)(nl - h) + 1;
	return 1;
}

static int emit(struct sbx_marker *m, const char *d, size_t n, sb_output_fn fn,
		void *arg)
{
	if (!n)
		return 0;
	if (m->phase == MK_RUNNING)
		return fn ? fn(arg, d, n) : 0;
	sbx_marker_keep_cli(m, d, n);
	return 0;
}

int sbx_marker_feed(struct sbx_marker *m, const char *d, size_t n,
		    sb_output_fn fn, void *arg)
{
	while (n > 0) {
		if (m->held_len == 0) {
			const char *rs = m->phase == MK_AFTER ? NULL : memchr(d, RS, n);
			size_t plain = rs ? (size_t)(rs - d) : n;
			int rc = emit(m, d, plain, fn, arg);
			if (rc < 0)
				return rc;
			d += plain;
			n -= plain;
			if (!n)
				return 0;
		}
		/* d[0] is held (or the held bytes go on): one byte at a time
		 * until it is a mark or cannot be one */
		m->held[m->held_len++] = *d++;
		n--;
		char kind = m->phase == MK_BEFORE ? 'S' : 'E';
		size_t end = 0;
		int r = match_mark(m, m->held, m->held_len, kind, &end);
		if (r == 0 && m->held_len < sizeof(m->held))
			continue;
		if (r == 1) {
			if (kind == 'S') {
				m->phase = MK_RUNNING;
			} else {
				m->status = atoi(m->held + 1 + SBX_NONCE_LEN + 3);
				m->phase = MK_AFTER;
			}
			m->held_len = 0;
			continue;
		}
		/* not a mark: pass on the first held byte, look again at the rest */
		char again[sizeof(m->held)];
		size_t len = m->held_len;
		memcpy(again, m->held, len);
		m->held_len = 0;
		int rc = emit(m, again, 1, fn, arg);
		if (rc == 0 && len > 1)
			rc = sbx_marker_feed(m, again + 1, len - 1, fn, arg);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int sbx_marker_finish(struct sbx_marker *m, sb_output_fn fn, void *arg)
{
	size_t len = m->held_len;
	m->held_len = 0;
	return emit(m, m->held, len, fn, arg);
}
