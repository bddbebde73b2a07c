/* write_file and list_dir through Modal's injected helper
 * `modal-sandbox-fs-tools` (notes 3.1): one exec whose argv[1] is a JSON
 * command, file bytes on stdin for writes, a FileEntry JSON array on stdout
 * for lists, and on failure exit 1 with {"version":1,"error_kind":...} on
 * stderr. Reads never use it: its ReadFile has no length bound. When the
 * helper is missing (an image without Modal's runtime, exit 126/127) the
 * generic shell implementation takes over. */
#include "modal.h"
#include "backends/output_capture.h"
#include "backends/sandbox_limits.h"
#include "backends/shell_ops.h"
#include "util/log.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIST_MAX SB_LIMIT_LIST_JSON_BYTES
#define ERR_MAX 4096
#define FS_TIMEOUT_S 300.0

struct both {
	struct output_capture out, err;
};

static int out_cb(void *arg, const char *d, size_t n)
{
	return output_capture_cb(&((struct both *)arg)->out, d, n);
}

static int err_cb(void *arg, const char *d, size_t n)
{
	return output_capture_cb(&((struct both *)arg)->err, d, n);
}

int modal_fs_errno(const char *stderr_json, size_t len)
{
	json_t *j = json_loadb(stderr_json, len, 0, NULL);
	const char *kind = j ? json_string_value(json_object_get(j, "error_kind")) : NULL;
	static const struct { const char *kind; int err; } map[] = {
		{"NotFound", ENOENT}, {"IsDirectory", EISDIR},
		{"NotDirectory", ENOTDIR}, {"IsFile", ENOTDIR},
		{"AlreadyExists", ENOTDIR}, /* write: a parent is a file */
		{"PathAlreadyExists", EEXIST}, {"PermissionDenied", EACCES},
		{"DirectoryNotEmpty", ENOTEMPTY}, {"FileTooLarge", EFBIG},
		{"NotSupported", ENOTSUP}, {"NoSpace", ENOSPC},
	};
	int e = EIO;
	for (size_t i = 0; kind && i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(kind, map[i].kind))
			e = map[i].err;
	json_decref(j);
	return -e;
}

/* Runs the helper with one JSON command. 1 = helper missing (use the
 * shell), 0 = ok, <0 = errno. */
static int fs_tools(struct sb_backend *b, const char *op, const char *path,
		    json_t *cmd, int fd, off_t size, struct output_capture *out)
{
	struct modal *m = b->priv;
	if (m->fs_tools_missing)
		return 1;
	char *arg = json_dumps(cmd, JSON_COMPACT);
	json_decref(cmd);
	if (!arg)
		return 1; /* a path that is not UTF-8 cannot travel as JSON */
	const char *argv[] = {MODAL_FS_TOOLS, arg, NULL};
	struct both io = {
		.out = {.limit = LIST_MAX},
		.err = {.limit = ERR_MAX, .keep_head = true},
	};
	struct modal_run r = {
		.argv = argv, .timeout_s = FS_TIMEOUT_S,
		.stdin_fd = fd, .stdin_size = fd >= 0 ? size : -1,
		.on_stdout = out ? out_cb : NULL, .on_stderr = err_cb,
		.cb_arg = &io, .cancel_fd = -1,
	};
	struct sb_exec_result res;
	int rc = modal_run(b, &r, &res);
	free(arg);
	if (rc == 0 && (res.timed_out || res.term_signal)) {
		sb_warn("modal: %s %s: the file helper %s", op, path,
			res.timed_out ? "timed out" : "was killed");
		rc = -EIO;
	} else if (rc == 0 && (res.exit_code == 126 || res.exit_code == 127)) {
		sb_warn("modal: %s is not in the sandbox image; file operations use the shell", MODAL_FS_TOOLS);
		m->fs_tools_missing = true;
		rc = 1;
	} else if (rc == 0 && res.exit_code != 0) {
		rc = modal_fs_errno(io.err.data ? io.err.data : "", io.err.len);
		if (rc == -EIO)
			sb_warn("modal: %s %s failed (exit %d): %.300s", op, path,
				res.exit_code, io.err.data ? io.err.data : "");
	}
	if (rc == 0 && out)
		*out = io.out;
	else
		free(io.out.data);
	free(io.err.data);
	return rc;
}

int modal_write_file(struct sb_backend *b, struct sb_upload *u)
{
	const char *path = u->path;
	int fd = u->fd;
	off_t size = u->size;
	mode_t mode = u->mode;
	json_t *cmd = json_pack("{s:{s:s}}", "WriteFile", "path", path);
	int rc = cmd ? fs_tools(b, "write", path, cmd, fd, size, NULL) : 1;
	if (rc == 1)
		return shell_write_file(b, path, fd, size, mode);
	/* the helper creates files 0644; another mode asked for is applied */
	mode &= 07777;
	if (rc == 0 && mode && mode != 0644)
		rc = shell_chmod(b, path, mode);
	return rc;
}

static mode_t type_bits(const char *type)
{
	if (!type)
		return 0;
	if (!strcmp(type, "directory"))
		return S_IFDIR;
	if (!strcmp(type, "symlink"))
		return S_IFLNK;
	if (!strcmp(type, "file"))
		return S_IFREG;
	return 0;
}

static unsigned id_of(json_t *v)
{
	/* owner/group are names or the number as a string: root is 0, and
	 * other names cannot be mapped without the guest's passwd */
	const char *s = json_string_value(v);
	if (s && !strcmp(s, "root"))
		return 0;
	char *end;
	unsigned long n = s ? strtoul(s, &end, 10) : 0;
	return s && *s && !*end && n < SB_ID_UNTOLD ? (unsigned)n : SB_ID_UNTOLD;
}

/* JSON values in text, counted from its structure without parsing it,
 * stopping once past max: a bound on what json_loadb would allocate. */
static size_t json_values_upto(const char *text, size_t len, size_t max)
{
	size_t n = 1;
	bool in_str = false;
	for (size_t i = 0; i < len && n <= max; i++) {
		char c = text[i];
		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = false;
		} else if (c == '"') {
			in_str = true;
		} else if (c == ',' || c == '[' || c == '{' || c == ':') {
			n++;
		}
	}
	return n;
}

int modal_parse_file_list(const char *text, size_t len, struct sb_dirlist *out)
{
	if (json_values_upto(text, len, SB_LIMIT_LIST_JSON_VALUES) >
	    SB_LIMIT_LIST_JSON_VALUES)
		return -EFBIG;
	json_t *j = json_loadb(text, len, 0, NULL);
	if (!json_is_array(j)) {
		json_decref(j);
		return -EPROTO;
	}
	if (json_array_size(j) > SB_LIMIT_LIST_ENTRIES) {
		json_decref(j);
		return -EFBIG;
	}
	size_t i;
	json_t *e;
	int rc = 0;
	json_array_foreach(j, i, e) {
		const char *name = json_string_value(json_object_get(e, "name"));
		if (!name || !*name || !strcmp(name, ".") || !strcmp(name, "..") ||
		    strchr(name, '/') || strlen(name) > SB_LIMIT_NAME)
			continue;
		struct sb_dirent *d = sb_dirlist_add(out, name);
		if (!d) {
			rc = -ENOMEM;
			break;
		}
		mode_t mode = (mode_t)json_integer_value(json_object_get(e, "mode"));
		mode_t t = type_bits(json_string_value(json_object_get(e, "type")));
		if (!(mode & S_IFMT))
			mode |= t ? t : S_IFREG;
		d->st.st_mode = mode;
		d->st.st_nlink = 0; /* not told: the fs core keeps the count it knows */
		json_int_t size = json_integer_value(json_object_get(e, "size"));
		d->st.st_size = size > 0 ? (off_t)size : 0;
		double mt = json_number_value(json_object_get(e, "modified_time"));
		/* Whole seconds, as the shell stat gives them: one file must
		 * not show two mtimes depending on which call saw it last. */
		d->st.st_mtim.tv_sec = (time_t)mt;
		d->st.st_mtim.tv_nsec = 0;
		d->st.st_atim = d->st.st_ctim = d->st.st_mtim;
		d->st.st_uid = id_of(json_object_get(e, "owner"));
		d->st.st_gid = id_of(json_object_get(e, "group"));
		d->st.st_blksize = 4096;
		d->st.st_blocks = (d->st.st_size + 511) / 512;
		const char *target = json_string_value(json_object_get(e, "symlink_target"));
		/* an overlong target is left unknown: readlink asks again,
		 * and that answer is capped too */
		if (S_ISLNK(mode) && target && strlen(target) <= SB_LIMIT_LINK_TARGET &&
		    !(d->link_target = strdup(target))) {
			rc = -ENOMEM;
			break;
		}
	}
	json_decref(j);
	return rc;
}

int modal_list_dir(struct sb_backend *b, const char *path, struct sb_dirlist *out)
{
	json_t *cmd = json_pack("{s:{s:s}}", "ListFiles", "path", path);
	struct output_capture c = {0};
	int rc = cmd ? fs_tools(b, "list", path, cmd, -1, -1, &c) : 1;
	if (rc == 1)
		return shell_list_dir(b, path, out);
	if (rc == 0) {
		rc = modal_parse_file_list(c.data ? c.data : "[]", c.data ? c.len : 2, out);
		if (rc == -EPROTO) {
			/* names that are not UTF-8 cannot come back as JSON
			 * strings: the shell listing carries raw bytes */
			sb_debug("modal: list %s: helper output is not a JSON array of UTF-8 names; using the shell", path);
			free(c.data);
			return shell_list_dir(b, path, out);
		}
	}
	if (rc == -EFBIG) {
		/* too big to hold as JSON: the shell format is compact, and
		 * applies the general listing caps */
		sb_debug("modal: list %s: helper output over the JSON listing cap; using the shell", path);
		sb_dirlist_free(out);
		free(c.data);
		return shell_list_dir(b, path, out);
	}
	free(c.data);
	return rc;
}
