/* Private to the `modal` backend:
 *   modal.c        create (app, image, sandbox, task, router), destroy, sweep
 *   modal_config.c credentials and settings, as Modal's own CLI finds them
 *                  (the CAs to trust: transport/tls_trust.c)
 *   modal_rpc.c    metadata, RPC calls with retries, router access, errors
 *   modal_exec.c   exec through the task command router
 *   modal_pty.c    the terminal of an exec (sbexec -t): PTYInfo
 *   modal_files.c  write_file and list_dir through modal-sandbox-fs-tools
 * Everything here follows modal-labs/modal-client's modal_proto/api.proto
 * and task_command_router.proto (V1 sandboxes). */
#ifndef SBFS_BACKENDS_MODAL_H
#define SBFS_BACKENDS_MODAL_H

#include "backends/backend.h"
#include "transport/grpc.h"

#include <pthread.h>
#include <stdbool.h>

#define MODAL_DEFAULT_SERVER "https://api.modal.com:443"
#define MODAL_API "/modal.client.ModalClient/"
#define MODAL_ROUTER "/modal.task_command_router.TaskCommandRouter/"
#define MODAL_FS_TOOLS "/__modal/.bin/modal-sandbox-fs-tools"
/* What libmodal reports, which the server must keep accepting (notes 1.2):
 * client type 9 = LIBMODAL_GO, version 1.0.0. */
#define MODAL_CLIENT_TYPE "9"
#define MODAL_CLIENT_VERSION "1.0.0"

/* ---- modal_config.c ---- */

struct modal_config {
	char token_id[256];
	char token_secret[256];
	char server_url[512];
	char environment[128];
	char image_builder_version[64];
	char profile[128];     /* which ~/.modal.toml profile was used, if any */
};

/* Environment first, then the active profile of MODAL_CONFIG_PATH or
 * ~/.modal.toml. -1 with a one-line message saying how to fix it; -2 when
 * there are no credentials at all (Modal is not set up here). */
int modal_config_load(struct modal_config *c, char *err, size_t errlen);
/* Exposed for tests: parse the TOML text of a config file. */
int modal_config_parse_toml(struct modal_config *c, const char *text,
			    const char *want_profile, char *err, size_t errlen);

/* ---- backend state ---- */

struct modal {
	struct modal_config cfg;
	struct tls_trust trust;  /* -o ca_file=, SSL_CERT_FILE, SSL_CERT_DIR */
	struct grpc_channel *api;
	char *api_md[10];        /* "name: value" lines for control-plane calls */
	bool first_call_done;    /* FAILED_PRECONDITION on the first = too old */

	char app_id[128];
	char sandbox_id[128];
	char task_id[128];
	bool owned;              /* created by us (not attached) */
	double life_end;         /* monotonic time the sandbox's lifetime ends; 0 unknown */
	unsigned lifetime_s;

	pthread_mutex_t lock;    /* guards the router fields below */
	struct grpc_channel *router;
	char router_url[512];
	char jwt[8192];
	unsigned router_gen;     /* bumped on every refresh */
	bool fs_tools_missing;   /* helper absent: file ops use shell_ops */
};

/* ---- modal_rpc.c ---- */

int modal_md_init(struct modal *m);
void modal_md_free(struct modal *m);
/* Control-plane unary call with the SDK retry policy. */
int modal_api(struct modal *m, const char *method, const struct pb_buf *req,
	      struct pb_buf *resp, double timeout_s, struct grpc_status *st);
/* (Re)fetches the router URL and JWT for the task. 0 or -1 (st set). */
int modal_router_refresh(struct modal *m, struct grpc_status *st);
/* Router unary call: retries transient codes (policy), refreshes the JWT
 * once on UNAUTHENTICATED. */
int modal_router(struct modal *m, const char *method, const struct pb_buf *req,
		 struct pb_buf *resp, double timeout_s,
		 const struct grpc_retry *policy, struct grpc_status *st);
/* A new router call for the caller to drive (streams); NULL on OOM. The
 * caller passes the generation it saw to modal_router_refresh_if. */
struct grpc_call *modal_router_call(struct modal *m, const char *method,
				    const struct pb_buf *req, double timeout_s,
				    grpc_msg_fn on_msg, void *arg,
				    unsigned *gen);
/* Refresh unless someone already did since generation gen. */
int modal_router_refresh_if(struct modal *m, unsigned gen,
			    struct grpc_status *st);
/* One clear line for a failed call: what, code, message, and for auth
 * failures how to fix the credentials. */
void modal_describe(char *buf, size_t n, const char *what,
		    const struct grpc_status *st);
bool modal_is_auth_error(int code);
/* GenericResult status -> readable words */
const char *modal_generic_status(int status);

/* ---- modal_exec.c ---- */

struct modal_run {
	const char *const *argv;
	const char *cwd;               /* NULL: spec workdir */
	const char *const *env;        /* on top of the spec env */
	double timeout_s;              /* 0: the sandbox's remaining life */
	int stdin_fd;                  /* -1: none */
	off_t stdin_size;              /* >= 0: pread [0, size) instead of read */
	sb_output_fn on_stdout, on_stderr;
	void *cb_arg;
	int cancel_fd;
	bool killable;                 /* tag the process so it can be killed */
	/* sb_exec_req's: forwarded signals (needs killable), a terminal */
	const int *signal_fd;
	const struct sb_exec_tty *tty;
};

int modal_run(struct sb_backend *b, const struct modal_run *r,
	      struct sb_exec_result *res);
int modal_exec(struct sb_backend *b, const struct sb_exec_req *req,
	       struct sb_exec_result *res);

/* ---- modal_pty.c ---- */

/* A PTYInfo message for a command's terminal of rows x cols (0: the
 * server's default), named by the last TERM= of env, else of spec_env. */
void modal_pty_info(struct pb_buf *out, unsigned short rows, unsigned short cols,
		    const char *const *spec_env, const char *const *env);

/* ---- modal_files.c ---- */

int modal_write_file(struct sb_backend *b, struct sb_upload *u);
int modal_list_dir(struct sb_backend *b, const char *path,
		   struct sb_dirlist *out);
/* Exposed for tests: FileEntry JSON array -> dirlist; fs-tools error -> errno */
int modal_parse_file_list(const char *json, size_t len, struct sb_dirlist *out);
int modal_fs_errno(const char *stderr_json, size_t len);

#endif
