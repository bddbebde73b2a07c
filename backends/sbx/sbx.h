/* Private to the `sbx` backend: a Docker Sandboxes microVM driven by the
 * `sbx` CLI, the only interface it has (its reference: docker/docs, the
 * data/sbx_cli/ YAML pages; Apache Airflow's SbxSandboxBackend for its
 * argv and timeouts).
 *   sbx.c          create or attach, lifetime, destroy, sweep, the ops
 *   sbx_config.c   options, the spec checks and the network-policy rule
 *   sbx_cli.c      one run of the CLI: argv, stdin, both outputs, deadline;
 *                  for exec -t its stdin and stdout on a host pty
 *   sbx_errors.c   what the CLI's stderr says went wrong
 *   sbx_exec.c     a guest command through `sbx exec` (-t: a terminal),
 *                  timeout and Ctrl-C acting inside the guest
 *   sbx_marker.c   tells the guest command's stderr from the CLI's own
 *   sbx_envfile.c  the environment as an --env-file, never in argv
 *   sbx_ls.c       `sbx ls --json`, parsed tolerantly
 *   sbx_record.c   our host-side record of each sandbox (owner, keep) and
 *                  its private empty workspace directory
 * File operations are the shared shell ones (shell_ops.h) over exec: reads
 * capped in the guest, writes streamed on the stdin of `sbx exec -i`. */
#ifndef SBFS_BACKENDS_SBX_H
#define SBFS_BACKENDS_SBX_H

#include "backends/backend.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define SBX_NAME_PREFIX "sbfs-"
#define SBX_DEFAULT_MEMORY_MB 2048
/* Deadlines of the lifecycle calls (the contract's create_timeout and
 * its two minutes for rm); ls and policy are quick local calls. */
#define SBX_CREATE_TIMEOUT_S 600.0
#define SBX_RM_TIMEOUT_S 120.0
#define SBX_QUICK_TIMEOUT_S 60.0
/* `sbx ls` for `sbfs list` (sweep waits SBX_QUICK_TIMEOUT_S) */
#define SBX_LIST_TIMEOUT_S 10.0
/* The guest's `timeout -k`: how long a command ignoring SIGTERM lives. */
#define SBX_KILL_AFTER_S 5
/* What the host waits past the guest's own timeout before it gives up on
 * the CLI (the guest normally ends the command first). */
#define SBX_HOST_GRACE_S 8.0

/* ---- sbx_config.c ---- */

enum sbx_host_policy { SBX_POLICY_UNKNOWN, SBX_POLICY_DENY_ALL, SBX_POLICY_ALLOW_ALL };

/* What create does about the network, decided from the spec and the
 * declared host policy (sbx_network_plan). */
struct sbx_network {
	enum sbx_host_policy policy;
	/* hosts for `sbx policy allow network NAME "h1,h2"`, or "**" to
	 * open a sandbox under deny-all; "" = no rule */
	char allow[1024];
};

struct sbx_config {
	char cli[1024];             /* the sbx executable: absolute path */
	struct sbx_network net;
	char memory[32];            /* --memory value */
	char cpus[16];              /* --cpus value, "" = sbx's default */
	const char *image;          /* -t, NULL = sbx's default */
};

/* -o host_network_policy=: -1 unless one of the three words. */
int sbx_policy_parse(const char *s, enum sbx_host_policy *p);
const char *sbx_policy_name(enum sbx_host_policy p);
/* The network rule (README "sbx"): 0 and plan filled, or -EINVAL with a
 * one-line refusal naming the option to pass. */
int sbx_network_plan(const struct sb_spec *s, enum sbx_host_policy policy,
		     struct sbx_network *plan, char *err, size_t errlen);
/* Finds the CLI: -o sbx_path= (a path, or a name looked up in PATH),
 * else `sbx` in PATH. -ENOENT with a line saying what to install. */
int sbx_find_cli(const struct sb_spec *s, char *out, size_t n, char *err,
		 size_t errlen);
/* Everything create needs from the spec, checked; -EINVAL with a line.
 * attach: an existing sandbox, whose size and network were set when it
 * was made: only what its use needs is checked. */
int sbx_config_load(const struct sb_spec *s, bool attach, struct sbx_config *c,
		    char *err, size_t errlen);

/* ---- sbx_cli.c ---- */

struct sbx_call {
	const char *cli;
	const char *const *args;   /* after the executable, NULL-terminated */
	int stdin_fd;              /* fed to the CLI until EOF; -1 = /dev/null */
	double timeout_s;          /* host deadline; 0 = none (call deadline still bounds) */
	int cancel_fd;             /* readable = stop; -1 = none */
	/* readable: a signal for the command (exec_forwarded_signal), given
	 * to on_signal; -1 = none */
	int signal_fd;
	void (*on_signal)(void *arg, int sig);
	sb_output_fn on_stdout, on_stderr;
	void *cb_arg;
	/* sbx exec -t: the CLI's stdin and stdout (and controlling terminal)
	 * are a raw host pty of this size, whose size follows resize_fd; its
	 * stderr stays a pipe; the end of stdin is typed as ^D. NULL = pipes. */
	const struct sb_exec_tty *tty;
	/* NULL, or stdin is held back until it says yes (called with cb_arg) */
	bool (*stdin_ready)(void *arg);
};

struct sbx_outcome {
	int status;        /* exit status; 128+N when killed by signal N */
	bool exited;       /* the CLI ended by itself */
	bool timed_out;    /* we killed it at its deadline */
	bool cancelled;    /* we killed it on cancel_fd */
	int cb_rc;         /* an output callback's abort value */
};

/* Runs the CLI once and waits for it, killing its process group at the
 * deadline, on cancel or when a callback aborts. 0, or a negative errno
 * when it could not be started. */
int sbx_cli_run(const struct sbx_call *c, struct sbx_outcome *o);

/* sbx_cli_run with both outputs kept in memory (stderr up to 8 KiB):
 * *out and *err are malloc'd, NUL-terminated, may be NULL. */
int sbx_cli_capture(const char *cli, const char *const *args, double timeout_s,
		    size_t out_limit, struct sbx_outcome *o, char **out, char **err);

/* ---- sbx_errors.c ---- */

enum sbx_failure {
	SBX_FAIL_OTHER,       /* anything else: the CLI's own words */
	SBX_FAIL_SIGNED_OUT,  /* run sbx login */
	SBX_FAIL_NO_HYPERVISOR,
	SBX_FAIL_TRANSIENT,   /* the local control plane did not answer in time */
	SBX_FAIL_NOT_FOUND,   /* no such sandbox */
	SBX_FAIL_EXISTS,
	SBX_FAIL_NO_POLICY,   /* sbx policy init was never run */
};

/* The CLI's stderr without its "Starting sandboxd daemon..." notices,
 * as one line (at most n-1 bytes, never empty: "no message"). */
void sbx_stderr_line(const char *err, char *out, size_t n);
enum sbx_failure sbx_classify(const char *err);
/* One user-facing line: what failed, the CLI's words, what to do. */
void sbx_describe(char *out, size_t n, const char *what, const char *err,
		  int status);

/* ---- sbx_marker.c ---- */

#define SBX_NONCE_LEN 16

/* The guest wrapper writes "\036<nonce> S\n" to stderr before the
 * command and "\036<nonce> E <status>\n" after it: whatever came before
 * the first is the CLI's (its daemon notice, its errors), whatever came
 * between them is the command's, and the second proves the command ran
 * to its end in a live sandbox. With a terminal (sbx exec -t) the marks
 * come on the terminal, so on stdout, "\r\n" ended (the terminal's
 * ONLCR); the CLI's stderr is then all its own (sbx_marker_keep_cli). */
struct sbx_marker {
	char nonce[SBX_NONCE_LEN + 1];
	enum { MK_BEFORE, MK_RUNNING, MK_AFTER } phase;
	int status;              /* from the end mark */
	char held[64];           /* a possible start of a mark, not passed on yet */
	size_t held_len;
	char *cli;               /* the CLI's own text, before and after */
	size_t cli_len;
};

void sbx_marker_init(struct sbx_marker *m, const char *nonce);
/* Feeds stderr bytes; the command's go to fn (may be NULL). fn's
 * negative value is returned. */
int sbx_marker_feed(struct sbx_marker *m, const char *d, size_t n,
		    sb_output_fn fn, void *arg);
/* Text that is the CLI's own whatever the phase (its stderr under -t). */
void sbx_marker_keep_cli(struct sbx_marker *m, const char *d, size_t n);
/* End of stderr: passes on what was held back. */
int sbx_marker_finish(struct sbx_marker *m, sb_output_fn fn, void *arg);
void sbx_marker_free(struct sbx_marker *m);

/* ---- sbx_envfile.c ---- */

/* An entry docker's --env-file format carries as is: NAME=VALUE with a
 * NAME of letters, digits and _, and no newline or NUL in VALUE. */
bool sbx_env_entry_ok(const char *kv);
/* Writes the lists into a new file (O_EXCL, 0600) at path. -EINVAL for an
 * entry sbx_env_entry_ok refuses. */
int sbx_envfile_write(const char *path, const char *const *a,
		      const char *const *b, const char *const *c);

/* ---- sbx_ls.c ---- */

struct sbx_listed {
	char name[SB_NAME_MAX * 2];
	char status[32];         /* "running", "stopped", "" when not given */
	char workspace[1024];    /* the first workspace, "" when not given */
};

/* `sbx ls --json`: {"sandboxes":[...]}, a bare array, or an
 * items/data/results wrapper; "id" for "name", "state" for "status".
 * Entries without a name are skipped. -EPROTO if it is not one of those. */
int sbx_ls_parse(const char *json, size_t len, struct sbx_listed **out,
		 size_t *n);

/* ---- sbx_sweep.c: what sbfs made, by our records ---- */

int sbx_list_owned(const struct sb_spec *spec, struct sb_owned **v, size_t *n,
		   char *err, size_t errlen);
int sbx_sweep(const struct sb_spec *spec);
/* `sbx rm -f NAME`; a sandbox already gone is success */
int sbx_remove_sandbox(const char *cli, const char *name, char *err, size_t errlen);

/* ---- sbx_record.c ---- */

/* Host-side: $XDG_STATE_HOME/sbfs/sbx/NAME holds "pid START HOST KEEP
 * DIR" for the sandbox sbfs made; DIR is its private directory under
 * $TMPDIR, sbfs-sbx-XXXXXX/ (0700), holding ws/ (the empty workspace sbx
 * mounts in the VM) and env/ (the env files of its commands). */
#define SBX_PRIVATE_PREFIX "sbfs-sbx-"
struct sbx_record {
	int pid;
	unsigned long long start;   /* the daemon's start time (boot ticks) */
	char host[256];
	bool keep;
	char dir[1024];
};

int sbx_record_dir(char *out, size_t n);
int sbx_record_write(const char *name, const struct sbx_record *r);
int sbx_record_read(const char *name, struct sbx_record *r);
void sbx_record_remove(const char *name);
/* Our own pid and start time, for a record. */
void sbx_record_self(struct sbx_record *r);
/* Whether the daemon a record names is gone (pid reused counts). */
bool sbx_record_owner_gone(const struct sbx_record *r);
/* A private directory under $TMPDIR (else /tmp; never on a FUSE mount),
 * 0700, with env/ and, with_ws, ws/. */
int sbx_private_make(char *dir, size_t n, bool with_ws, char *err, size_t errlen);
/* Removes a private directory we made (its tree, links not followed). */
void sbx_private_remove(const char *dir);

/* ---- backend state ---- */

struct sbx {
	struct sbx_config cfg;
	char name[SB_NAME_MAX * 2];    /* the sbx sandbox name */
	char dir[1024];                /* our private directory */
	char workspace[1100];          /* dir/ws, "" when attached */
	char tmpdir[1100];             /* dir/env: env files */
	bool owned;                    /* we created it (and it exists) */

	/* lifetime and idle timeout, enforced here (sbx has neither) */
	pthread_t watcher;
	bool watcher_on, stopping;
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

/* ---- sbx_exec.c ---- */

int sbx_exec(struct sb_backend *b, const struct sb_exec_req *req,
	     struct sb_exec_result *res);
/* Whether the sandbox exists (ls --json): 1, 0, or a negative errno. */
int sbx_sandbox_exists(const char *cli, const char *name, char *err,
		       size_t errlen);

#endif
