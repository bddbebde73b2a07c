#include "crash_report.h"

#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "log_syslog.h"

#if defined(__SANITIZE_ADDRESS__)
#define SB_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SB_UNDER_ASAN 1
#endif
#endif

#ifndef SB_UNDER_ASAN
static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

/* Only async-signal-safe calls: write, send, backtrace_symbols_fd (its
 * library was loaded at install time), raise. */
static void put(const char *s) { (void)!write(STDERR_FILENO, s, strlen(s)); }

static void add(char *buf, size_t len, const char *s)
{
	size_t at = strlen(buf);
	while (*s && at + 1 < len)
		buf[at++] = *s++;
	buf[at] = '\0';
}

static void on_fatal(int sig)
{
	char num[12];
	int n = sig, i = sizeof num - 1;
	num[i] = '\0';
	do {
		num[--i] = (char)('0' + n % 10);
		n /= 10;
	} while (n && i > 0);
	char msg[400] = "crashed on signal ";
	add(msg, sizeof msg, num + i);
	add(msg, sizeof msg, " (");
	add(msg, sizeof msg, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
	add(msg, sizeof msg, "); the next 'sbfs status' saves what write-back had not uploaded; "
	    "clear the mount with 'fusermount3 -u MOUNTPOINT' and please report this log");
	put("sbfs: error: ");
	put(msg);
	put("\n");
	/* A daemon without a log file says it to syslog; the backtrace below
	 * reaches only a log file or a terminal. */
	sb_syslog_send_signal_safe(SB_LOG_ERROR, msg);
	void *frames[48];
	int depth = backtrace(frames, 48);
	backtrace_symbols_fd(frames, depth, STDERR_FILENO);
	/* SA_RESETHAND restored the default action: this ends the process. */
	raise(sig);
}
#endif

void sb_crash_report_install(void)
{
#ifndef SB_UNDER_ASAN
	void *warm[1];
	backtrace(warm, 1); /* loads libgcc now, not inside the handler */
	struct sigaction sa = {.sa_handler = on_fatal, .sa_flags = SA_RESETHAND | SA_NODEFER};
	sigemptyset(&sa.sa_mask);
	for (size_t k = 0; k < sizeof fatal_signals / sizeof *fatal_signals; k++)
		sigaction(fatal_signals[k], &sa, NULL);
#endif
}
