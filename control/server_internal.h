/* Shared between the control server's accept/dispatch side (server.c)
 * and its exec side (exec_session.c). */
#ifndef SBFS_CONTROL_SERVER_INTERNAL_H
#define SBFS_CONTROL_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include "frame.h"
#include "server.h"

/* A hostile or buggy client must not make the daemon hold unbounded
 * request data: more than any execve can have given sbexec (the kernel
 * passes at most 6 MiB of strings, fs/exec.c). What a command's argv and
 * env may take is the backend's own limit (sb_exec_arg_room), lower. */
#define MAX_REQUEST_BYTES (8u << 20)
/* Seconds a client may take to send its whole request (up to G). */
#define REQUEST_TIMEOUT_S 30

struct conn {
	struct control_server *s;
	int fd;
	pthread_t thread;
	struct frame_writer w;
	/* Readable = kill the running command. Lives as long as the conn, so
	 * control_server_stop can write it at any moment. */
	int cancel[2];
	bool finished; /* under s->mu; the accept thread then joins and frees */
	bool handed_off; /* its socket now carries the unmount report: never shut down */
	struct conn *next;
};

/* One accepted socket and its cancel pipe, and one more. */
#define CONTROL_SPARE_FDS 4

struct control_server {
	int lfd;
	int wake[2]; /* wakes the accept thread's poll on stop */
	pthread_t accept_thread;
	char *path;
	char *mount;
	struct sb_backend *b;
	struct control_hooks hooks;
	pthread_mutex_t mu;
	struct conn *conns;
	bool stopping;
	/* The connection of the last `sbfs umount`, handed off by its
	 * thread: the daemon writes its teardown report there once the
	 * sandbox is gone. -1: none. */
	int unmount_fd;
	/* Descriptors held in reserve (of /dev/null): let go when an accept
	 * meets EMFILE, so that connection and its thread's pipe still get
	 * theirs (`sbfs umount` must always be answered); taken again once
	 * connections end. -1: not held. Accept thread only. */
	int spare[CONTROL_SPARE_FDS];
	time_t started; /* when the mount was made (wall clock), for `sbfs list` */
};

struct request {
	char op[16];
	double timeout;
	bool want_stdin;
	bool tty;                          /* sbexec -t */
	unsigned short tty_rows, tty_cols;
	char **argv; /* NULL-terminated */
	size_t argc;
	char **env;  /* NULL-terminated */
	size_t envc;
	char *cwd;     /* C: mount-relative; NULL = root */
	char *workdir; /* W */
	size_t bytes;
	size_t arg_bytes; /* argv and env as the backend counts them */
	size_t arg_cap;   /* the slots argv and env each have room for */
	size_t env_cap;
};

void control_reply_error(struct conn *c, char frame_type, const char *msg);
void control_cancel_conn(struct conn *c);
int control_flush_all(struct control_server *s, char *msg, size_t msglen);
void control_invalidate(struct control_server *s, const char *relpath);
void control_command_ended(struct control_server *s);
/* Runs one exec request to its end on connection c. */
void control_do_exec(struct conn *c, const struct request *rq);

#endif
