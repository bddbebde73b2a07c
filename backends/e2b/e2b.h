/* Private to the `e2b` backend:
 *   e2b.c          create (POST /sandboxes) or attach, keepalive, destroy, sweep
 *   e2b_config.c   credentials, endpoints and TLS, as E2B's SDKs find them
 *   e2b_connect.c  Connect envelopes and the protojson shapes envd speaks
 *   e2b_api.c      control-plane and envd calls, retries, errors by layer
 *   e2b_exec.c     process.Process/Start as a server stream
 *   e2b_proc.c     a running process's input, terminal size and signals
 *   e2b_files.c    upload, list, stat, mkdir, remove, rename
 * Everything follows e2b-dev/E2B's spec/openapi.yml and spec/envd/
 * (envd.yaml, process/process.proto, filesystem/filesystem.proto). */
#ifndef SBFS_BACKENDS_E2B_H
#define SBFS_BACKENDS_E2B_H

#include "backends/backend.h"
#include "transport/http.h"
#include "transport/tls_trust.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define E2B_DEFAULT_DOMAIN "e2b.app"
#define E2B_DEFAULT_TEMPLATE "base"
#define E2B_ENVD_PORT 49983
/* The SDK's default lifetime; the mount keeps pushing it forward. */
#define E2B_DEFAULT_TIMEOUT_S 300

/* ---- e2b_config.c ---- */

struct e2b_config {
	char api_key[512];
	char domain[256];
	char api_url[512];
	char sandbox_url[512]; /* E2B_SANDBOX_URL: one envd URL for all, routed by headers */
	struct tls_trust trust; /* -o ca_file= or SSL_CERT_FILE, SSL_CERT_DIR */
};

/* -1 with a one-line message saying what to set. */
int e2b_config_load(struct e2b_config *c, const struct sb_spec *spec,
		    char *err, size_t errlen);
/* The envd base URL of a sandbox: E2B_SANDBOX_URL, else the host form
 * https://49983-<id>.<domain>. */
void e2b_envd_url(const struct e2b_config *c, const char *sandbox_id,
		  const char *domain, char *out, size_t n);
int e2b_endpoint(struct http_endpoint *ep, const struct e2b_config *c,
		 const char *base_url);

/* ---- e2b_connect.c: wire shapes, no I/O ---- */

#define CONNECT_FLAG_COMPRESSED 0x01
#define CONNECT_FLAG_END 0x02
#define CONNECT_MAX_MESSAGE (16u << 20)

/* One envelope: 5 header bytes then the JSON; malloc'd, *len set. */
char *connect_envelope(const char *json, size_t json_len, size_t *len);

typedef int (*connect_msg_fn)(void *arg, unsigned flags, const char *payload,
			      size_t len);

/* Incremental envelope reader over arbitrary chunks. */
struct connect_reader {
	unsigned char hdr[5];
	size_t hdr_got;
	char *payload;
	size_t need, got;
	bool in_payload;
	bool ended;      /* an end-stream envelope was delivered */
};
/* Feeds bytes; calls fn once per complete envelope. 0, a negative errno
 * for a malformed stream (-EPROTO: compressed flag, oversized length,
 * data after the end-stream envelope), or fn's negative value. */
int connect_reader_feed(struct connect_reader *r, const char *data, size_t len,
			connect_msg_fn fn, void *arg);
/* Whether the stream stopped between envelopes (else it was cut mid-way). */
bool connect_reader_at_boundary(const struct connect_reader *r);
void connect_reader_free(struct connect_reader *r);

enum e2b_event_kind { EV_NONE, EV_START, EV_STDOUT, EV_STDERR, EV_END, EV_KEEPALIVE };
struct e2b_event {
	enum e2b_event_kind kind;
	int64_t pid;
	char *data;       /* stdout/stderr bytes, malloc'd */
	size_t len;
	int exit_code;    /* end: absent means 0 */
	bool exited;
	char status[128]; /* end: "exit status 2", "signal: killed" */
};
/* A StartResponse/ConnectResponse message -> event. -EPROTO if malformed. */
int e2b_parse_event(const char *json, size_t len, struct e2b_event *ev);
void e2b_event_free(struct e2b_event *ev);
/* An end-stream payload: 0 and code[0]=0 on success, else the Connect
 * code and message. -EPROTO if it is not JSON. */
int e2b_parse_end_stream(const char *json, size_t len, char *code, size_t codelen,
			 char *msg, size_t msglen);

/* protojson helpers */
int pj_int64(const json_t *v, int64_t *out);   /* string or number */
int pj_time(const char *rfc3339, struct timespec *ts);
/* Go FileMode.String() ("drwxr-xr-x", "Lrwxrwxrwx", "dtrwxrwxrwt", ...) */
int pj_mode_string(const char *s, mode_t *mode);

struct e2b_ids {
	const char *user;     /* guest user name, maps to uid/gid */
	uid_t uid;
	gid_t gid;
};
/* EntryInfo -> lstat-like attributes; *name (may be NULL) the basename,
 * borrowed from e. -EPROTO if malformed. */
int e2b_parse_entry(const json_t *e, const struct e2b_ids *ids,
		    struct stat *st, const char **name);
/* Connect error code and message -> negative errno for a path problem. */
int e2b_connect_errno(const char *code, const char *msg);

/* ---- backend state ---- */

struct e2b {
	struct e2b_config cfg;
	struct http_endpoint api, envd;
	bool api_init, envd_init;
	char api_hdr[600];
	const char *api_hdrs[3];
	char hdr_store[4][600];
	const char *envd_hdrs[6];
	char sandbox_id[128];
	char domain[256];
	char access_token[512];
	char user[64];           /* -o user=: sent as envd's user; "" = its default */
	char guest_name[64];     /* the user commands run as, by name */
	uid_t uid;
	gid_t gid;
	bool owned;
	unsigned timeout_s;       /* the E2B timeout asked at create/connect */
	bool renew;              /* kept ahead while mounted (no sandbox_timeout=) */

	pthread_t keeper;
	bool keeper_on, stopping;
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

/* ---- e2b_api.c ---- */

struct e2b_reply {
	long status;
	json_t *json;          /* parsed body, may be NULL */
	char message[300];     /* the body's message, or the transport error */
	char next_token[512];  /* X-Next-Token */
};
void e2b_reply_free(struct e2b_reply *r);

int e2b_api_init(struct e2b *e, char *err, size_t errlen);
/* Control-plane call: 0 when an answer came (any status), negative errno
 * on transport failure. 429 is retried after Retry-After; 502/503/504 and
 * transport errors only when idempotent. body is borrowed. */
int e2b_api_call(struct e2b *e, const char *method, const char *path,
		 json_t *body, bool idempotent, long timeout_ms,
		 struct e2b_reply *r);
/* One line: what failed and, for a rejected key, what to set. */
void e2b_describe(const struct e2b *e, char *buf, size_t n, const char *what,
		  const struct e2b_reply *r);
int e2b_envd_init(struct e2b *e, const char *domain, char *err, size_t errlen);
/* Unary Connect call to envd: 0 with *resp (may be NULL to discard), or a
 * negative errno: path problems as such, the sandbox gone or the token
 * rejected mark the backend dead (-EIO). */
int e2b_rpc(struct sb_backend *b, const char *procedure, json_t *req,
	    json_t **resp);
/* Maps an envd answer that is not a success (plain HTTP from the proxy or
 * envd's middleware) to an errno, failing the backend when terminal. */
int e2b_envd_status(struct sb_backend *b, long status, const char *body,
		    size_t len, const char *what);
double e2b_retry_after(const char *value);

/* ---- e2b_exec.c ---- */

struct e2b_run {
	const char *const *argv;
	const char *cwd;
	const char *const *env;
	double timeout_s;
	int stdin_fd;
	sb_output_fn on_stdout, on_stderr;
	void *cb_arg;
	int cancel_fd;
	bool as_root;       /* as envd's root user, whatever -o user= says */
	/* a PTY of this size for the command (sbexec -t): its output comes
	 * as stdout, its input is typed */
	const struct sb_exec_tty *tty;
	/* a user's command: EXEC_MARKER_VAR=marker in its environment, so
	 * that forwarded signals and a kill reach everything it started;
	 * NULL for our own commands */
	const char *marker;
	/* sbexec's signals for the command (exec_signal_fd); a pointer, so
	 * that a run that never sets it has none */
	const int *signal_fd;
};
int e2b_run(struct sb_backend *b, const struct e2b_run *r,
	    struct sb_exec_result *res);
int e2b_exec(struct sb_backend *b, const struct sb_exec_req *req,
	     struct sb_exec_result *res);

/* ---- e2b_proc.c ---- */

/* SendInput: bytes for the process's stdin, or typed into its PTY. */
int e2b_proc_input(struct sb_backend *b, int64_t pid, bool pty,
		   const char *buf, size_t len);
/* The end of its input: CloseStdin, or for a PTY a typed ^D. */
int e2b_proc_end_input(struct sb_backend *b, int64_t pid, bool pty);
/* Update: a new size for its PTY; a failure only leaves the old one. */
void e2b_proc_resize(struct sb_backend *b, int64_t pid, unsigned short rows,
		     unsigned short cols);
/* SendSignal SIGKILL: the process itself, not what it started. */
void e2b_proc_kill(struct sb_backend *b, int64_t pid);
/* Every process holding marker: killed with its group, or sent sig. */
void e2b_marker_kill(struct sb_backend *b, const char *marker);
void e2b_marker_signal(struct sb_backend *b, const char *marker, int sig);

/* ---- e2b_files.c ---- */

int e2b_write_file(struct sb_backend *b, struct sb_upload *file);
int e2b_list_dir(struct sb_backend *b, const char *path, struct sb_dirlist *out);
int e2b_stat(struct sb_backend *b, const char *path, struct stat *st,
	     char **link_target);
int e2b_mkdir(struct sb_backend *b, const char *path, mode_t mode);
int e2b_remove(struct sb_backend *b, const char *path, bool is_dir);
int e2b_rename(struct sb_backend *b, const char *from, const char *to,
	       bool noreplace);

#endif
