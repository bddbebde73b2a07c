#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static enum sb_log_level log_level = SB_LOG_INFO;
static char log_prefix[64] = "sbfs";

void sb_log_set_level(enum sb_log_level level) { log_level = level; }

void sb_log_set_prefix(const char *prefix)
{
	snprintf(log_prefix, sizeof log_prefix, "%s", prefix);
}

void sb_log(enum sb_log_level level, const char *fmt, ...)
{
	if (level > log_level)
		return;
	static const char *const names[] = {"error", "warning", "info", "debug"};
	/* One fprintf per message so lines from threads do not interleave. */
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (level == SB_LOG_INFO)
		fprintf(stderr, "%s: %s\n", log_prefix, msg);
	else
		fprintf(stderr, "%s: %s: %s\n", log_prefix, names[level], msg);
}
