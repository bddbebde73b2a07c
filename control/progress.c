#include "progress.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "frame.h"

#define PROGRESS_PERIOD_S 0.5

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static long long field(json_t *o, const char *k)
{
	return (long long)json_integer_value(json_object_get(o, k));
}

void progress_sample(json_t *status, double t, struct progress_sample *s)
{
	json_t *wb = json_object_get(status, "writeback");
	s->t = t;
	s->files = field(wb, "queued") + field(wb, "in_flight");
	s->bytes = field(wb, "queued_bytes") + field(wb, "in_flight_bytes");
	s->failed = field(wb, "failed");
	s->bytes_up = field(status, "bytes_up");
}

static void size_text(double n, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;
	while (n >= 1024 && u < 4) {
		n /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", n, units[u]);
}

void progress_format(const struct progress_sample *prev,
		     const struct progress_sample *cur, char *buf, size_t len)
{
	char size[32], rate[32] = "";
	size_t n;
	if (cur->files == 0)
		n = (size_t)snprintf(buf, len, "nothing pending: every write is uploaded");
	else {
		size_text((double)cur->bytes, size, sizeof size);
		n = (size_t)snprintf(buf, len, "%lld file%s pending, %s", cur->files,
				     cur->files == 1 ? "" : "s", size);
	}
	double dt = prev ? cur->t - prev->t : 0;
	if (cur->files && dt > 0 && n < len) {
		double r = (double)(cur->bytes_up - prev->bytes_up) / dt;
		if (r > 0) {
			size_text(r, rate, sizeof rate);
			double left = (double)cur->bytes / r;
			n += (size_t)snprintf(buf + n, len - n, "; %s/s, about %.0f s left",
					      rate, left < 1 ? 1 : left);
		} else {
			n += (size_t)snprintf(buf + n, len - n, "; waiting for the sandbox");
		}
	}
	if (cur->failed && n < len)
		snprintf(buf + n, len - n, "; %lld failed (sbfs status names them)", cur->failed);
}

/* The sync, run beside the progress lines. */
struct sync_run {
	struct control_target t;
	atomic_bool done;
	int status;
	char err[PATH_MAX * 2 + 256];
};

static void *sync_main(void *arg)
{
	struct sync_run *s = arg;
	struct frame f = {0};
	int fd = -1;
	json_t *reply = control_request(&s->t, "sync", NULL, &fd, &f, s->err, sizeof s->err);
	s->status = reply ? 0 : 1;
	json_decref(reply);
	frame_free(&f);
	if (fd >= 0)
		close(fd);
	atomic_store(&s->done, true);
	return NULL;
}

static void show(FILE *out, bool tty, const char *line)
{
	/* a terminal keeps one line, rewritten; a file or pipe gets each */
	if (tty)
		fprintf(out, "\r%s\033[K", line);
	else
		fprintf(out, "%s\n", line);
	fflush(out);
}

int control_client_progress(const char *mount, bool until_synced, FILE *out)
{
	static struct sync_run s;
	char err[sizeof s.err];
	if (control_find_mount("sbfs", mount, NULL, &s.t, err, sizeof err) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	pthread_t th;
	if (until_synced && pthread_create(&th, NULL, sync_main, &s) != 0) {
		fprintf(stderr, "sbfs: cannot start a thread\n");
		return 1;
	}
	bool tty = isatty(fileno(out));
	struct progress_sample prev, cur;
	bool have_prev = false;
	char line[256];
	for (;;) {
		bool finished = until_synced && atomic_load(&s.done);
		json_t *st = control_mount_status(s.t.mount);
		const char *state = json_string_value(json_object_get(st, "state"));
		if (state && !strcmp(state, "unreachable")) {
			const char *why = json_string_value(json_object_get(st, "reason"));
			if (tty)
				fputc('\n', out);
			fprintf(stderr, "sbfs: %s no longer answers: %s\n", s.t.mount, why ? why : "gone");
			json_decref(st);
			if (until_synced)
				pthread_join(th, NULL);
			return 1;
		}
		progress_sample(st, now(), &cur);
		json_decref(st);
		progress_format(have_prev ? &prev : NULL, &cur, line, sizeof line);
		show(out, tty, line);
		if (finished)
			break;
		prev = cur;
		have_prev = true;
		/* sleep in steps, so that the end of a sync shows at once */
		for (int i = 0; i < 10 && !(until_synced && atomic_load(&s.done)); i++)
			usleep((useconds_t)(PROGRESS_PERIOD_S * 1e6 / 10));
	}
	if (tty)
		fputc('\n', out);
	pthread_join(th, NULL);
	if (s.status != 0)
		fprintf(stderr, "%s\n", s.err);
	return s.status;
}
