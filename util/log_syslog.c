#include "log_syslog.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

/* ---- formatting: by hand, so the crash handler can use it too ---- */

static size_t put(char *buf, size_t len, size_t at, const char *s)
{
	while (*s && at + 1 < len)
		buf[at++] = *s++;
	buf[at < len ? at : len - 1] = '\0';
	return at;
}

static size_t put_num(char *buf, size_t len, size_t at, unsigned long v, int width)
{
	char d[24];
	int i = sizeof d - 1;
	d[i] = '\0';
	do {
		d[--i] = (char)('0' + v % 10);
		v /= 10;
		width--;
	} while ((v || width > 0) && i > 0);
	return put(buf, len, at, d + i);
}

int sb_syslog_priority(enum sb_log_level level)
{
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
	unsigned l = (unsigned)level < 4 ? (unsigned)level : SB_LOG_DEBUG;
	return LOG_DAEMON | prio[l];
}

size_t sb_syslog_format(char *buf, size_t len, enum sb_log_level level,
			const struct tm *when, int pid, const char *tag,
			const char *msg)
{
	static const char *const month[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
					    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
	static const char *const word[] = {"error: ", "warning: ", "", "debug: "};
	if (!len)
		return 0;
	buf[0] = '\0';
	size_t at = put(buf, len, 0, "<");
	at = put_num(buf, len, at, (unsigned long)sb_syslog_priority(level), 1);
	at = put(buf, len, at, ">");
	if (when) {
		/* RFC 3164's TIMESTAMP, as syslog(3) writes it: "Dec  2 14:05:09" */
		at = put(buf, len, at, month[(unsigned)when->tm_mon % 12]);
		at = put(buf, len, at, when->tm_mday < 10 ? "  " : " ");
		at = put_num(buf, len, at, (unsigned long)when->tm_mday, 1);
		at = put(buf, len, at, " ");
		at = put_num(buf, len, at, (unsigned long)when->tm_hour, 2);
		at = put(buf, len, at, ":");
		at = put_num(buf, len, at, (unsigned long)when->tm_min, 2);
		at = put(buf, len, at, ":");
		at = put_num(buf, len, at, (unsigned long)when->tm_sec, 2);
		at = put(buf, len, at, " ");
	}
	at = put(buf, len, at, "sbfs[");
	at = put_num(buf, len, at, (unsigned long)pid, 1);
	at = put(buf, len, at, "]: ");
	if (tag && *tag) {
		at = put(buf, len, at, tag);
		at = put(buf, len, at, ": ");
	}
	at = put(buf, len, at, word[(unsigned)level < 4 ? (unsigned)level : 3]);
	return put(buf, len, at, msg);
}

/* ---- the socket ---- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct sockaddr_un addr;
static volatile int sock = -1;
static bool opened;
static char line_tag[4096];

/* socket, connect, a bounded send: all async-signal-safe. */
static int connect_socket(void)
{
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	/* A wedged syslog daemon (a full queue) delays a line by at most
	 * this, never the file system. */
	struct timeval tv = {.tv_sec = 1};
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

void sb_syslog_open(const char *tag)
{
	/* Test hook: the e2e suite points the daemon at a socket of its own,
	 * since /dev/log is one fixed path for the whole machine. */
	const char *path = getenv("SBFS_SYSLOG_SOCKET");
	if (!path || !*path)
		path = "/dev/log";
	pthread_mutex_lock(&lock);
	addr.sun_family = AF_UNIX;
	strncpy(addr.sun_path, path, sizeof addr.sun_path - 1);
	strncpy(line_tag, tag ? tag : "", sizeof line_tag - 1);
	opened = true;
	pthread_mutex_unlock(&lock);
}

void sb_syslog_send(enum sb_log_level level, const char *msg)
{
	char line[8192];
	time_t now = time(NULL);
	struct tm tm;
	localtime_r(&now, &tm);
	size_t n = sb_syslog_format(line, sizeof line, level, &tm, (int)getpid(),
				    line_tag, msg);
	pthread_mutex_lock(&lock);
	/* Twice at most: a syslog daemon that restarted refuses the old
	 * connection once, then takes a new one. */
	for (int attempt = 0; opened && attempt < 2; attempt++) {
		if (sock < 0)
			sock = connect_socket();
		if (sock < 0)
			break; /* none there: dropped, the next line tries again */
		if (send(sock, line, n, MSG_NOSIGNAL) >= 0)
			break;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			break; /* full for a second: this line is dropped */
		close(sock);
		sock = -1;
	}
	pthread_mutex_unlock(&lock);
}

void sb_syslog_send_signal_safe(enum sb_log_level level, const char *msg)
{
	if (!opened)
		return;
	char line[1024];
	size_t n = sb_syslog_format(line, sizeof line, level, NULL, (int)getpid(),
				    line_tag, msg);
	int fd = sock;
	bool own = fd < 0;
	if (own)
		fd = connect_socket();
	if (fd >= 0 && send(fd, line, n, MSG_NOSIGNAL) < 0) {
		/* nowhere left to say it */
	}
	if (own && fd >= 0)
		close(fd);
}
