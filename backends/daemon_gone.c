/* Whether the sbfs daemon that made a sandbox is gone, for the sweeps of
 * backends that record its pid with the sandbox. */
#include "backend.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

bool sb_daemon_gone(int pid)
{
	if (pid <= 0)
		return true;
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return true;
	char p[64], comm[64] = "", st[512] = "";
	snprintf(p, sizeof(p), "/proc/%d/stat", pid);
	FILE *sf = fopen(p, "re");
	if (sf) {
		size_t n = fread(st, 1, sizeof(st) - 1, sf);
		st[n] = '\0';
		fclose(sf);
		const char *rp = strrchr(st, ')');
		if (rp && (rp[2] == 'Z' || rp[2] == 'X'))
			return true;
	}
	snprintf(p, sizeof(p), "/proc/%d/comm", pid);
	FILE *f = fopen(p, "re");
	if (!f)
		return false;
	if (fgets(comm, sizeof(comm), f))
		comm[strcspn(comm, "\n")] = '\0';
	fclose(f);
	return strcmp(comm, "sbfs") != 0;
}
