/* The sbx CLI has no structured errors: an exit status and text on
 * stderr. This reads the text for the few cases a user must act on
 * differently (sbx-cli.md, "Behaviour a client must handle"); anything
 * else is passed on in the CLI's own words. */
#include "sbx.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define DAEMON_NOTICE "Starting sandboxd daemon"

static bool has(const char *s, const char *word)
{
	return strcasestr(s, word) != NULL;
}

void sbx_stderr_line(const char *err, char *out, size_t n)
{
	size_t k = 0;
	const char *p = err ? err : "";
	while (*p && k + 1 < n) {
		size_t len = strcspn(p, "\n");
		/* the notice the CLI prints when it starts its daemon is not
		 * an error, nor part of one */
		bool notice = strncmp(p, DAEMON_NOTICE, strlen(DAEMON_NOTICE)) == 0;
		for (size_t i = 0; !notice && i < len && k + 1 < n; i++) {
			unsigned char ch = (unsigned char)p[i];
			if (ch == '\r' || ch == '\t')
				ch = ' ';
			if (!isprint(ch) && ch < 0x80)
				continue;
			if (ch == ' ' && (k == 0 || out[k - 1] == ' '))
				continue;
			out[k++] = (char)ch;
		}
		if (!notice && k > 0 && out[k - 1] != ' ' && k + 3 < n && p[len]) {
			out[k++] = ';';
			out[k++] = ' ';
		}
		p += len + (p[len] == '\n');
	}
	while (k > 0 && (out[k - 1] == ' ' || out[k - 1] == ';'))
		k--;
	out[k] = '\0';
	if (k == 0)
		snprintf(out, n, "no message");
}

enum sbx_failure sbx_classify(const char *err)
{
	char line[2048];
	sbx_stderr_line(err, line, sizeof(line));
	if (has(line, "not logged in") || has(line, "unauthorized") ||
	    has(line, "authentication") || has(line, "sbx login"))
		return SBX_FAIL_SIGNED_OUT;
	if (has(line, "kvm") || has(line, "hypervisor") || has(line, "virtualization"))
		return SBX_FAIL_NO_HYPERVISOR;
	if (has(line, "policy init"))
		return SBX_FAIL_NO_POLICY;
	if (has(line, "timed out") || has(line, "timeout") ||
	    has(line, "deadline exceeded"))
		return SBX_FAIL_TRANSIENT;
	if (has(line, "already exists"))
		return SBX_FAIL_EXISTS;
	if (has(line, "not found") || has(line, "no such sandbox"))
		return SBX_FAIL_NOT_FOUND;
	return SBX_FAIL_OTHER;
}

void sbx_describe(char *out, size_t n, const char *what, const char *err,
		  int status)
{
	char line[300];
	sbx_stderr_line(err, line, sizeof(line));
	switch (sbx_classify(err)) {
	case SBX_FAIL_SIGNED_OUT:
		snprintf(out, n, "sbx %s: the sbx CLI is not signed in (%s): run `sbx login`, then mount again", what, line);
		break;
	case SBX_FAIL_NO_HYPERVISOR:
		snprintf(out, n, "sbx %s: this machine cannot run sbx microVMs (%s): sbx needs KVM or nested virtualisation (/dev/kvm)", what, line);
		break;
	case SBX_FAIL_NO_POLICY:
		snprintf(out, n, "sbx %s: no network policy is set (%s): run `sbx policy init deny-all` once (and mount with -o host_network_policy=deny-all)", what, line);
		break;
	case SBX_FAIL_TRANSIENT:
		snprintf(out, n, "sbx %s: the sbx daemon did not answer in time (%s): try again", what, line);
		break;
	default:
		snprintf(out, n, "sbx %s failed (exit %d): %s", what, status, line);
		break;
	}
}
