/* `sbx ls --json`, parsed tolerantly (sbx-cli.md, "list"): the shape seen
 * is {"sandboxes":[{"name","status","workspaces":[...]}]}, and a client
 * validated against several versions also meets a bare array, an items,
 * data or results wrapper, "id" for "name" and "state" for "status". A
 * shape none of those is an error, never an empty list: sweep must not
 * take "could not read" for "nothing there". */
#include "sbx.h"
#include "backends/sandbox_limits.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *str_of(const json_t *o, const char *a, const char *b)
{
	const char *s = json_string_value(json_object_get(o, a));
	if (!s && b)
		s = json_string_value(json_object_get(o, b));
	return s;
}

static const json_t *the_array(const json_t *root)
{
	if (json_is_array(root))
		return root;
	static const char *const wrappers[] = {"sandboxes", "items", "data", "results"};
	for (size_t i = 0; json_is_object(root) && i < 4; i++) {
		const json_t *a = json_object_get(root, wrappers[i]);
		if (json_is_array(a))
			return a;
		if (json_is_null(a))
			return json_object_get(root, wrappers[i]); /* "no sandboxes" */
	}
	return NULL;
}

int sbx_ls_parse(const char *text, size_t len, struct sbx_listed **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (len > SB_LIMIT_LIST_JSON_BYTES)
		return -EFBIG;
	json_error_t jerr;
	json_t *root = json_loadb(text, len, JSON_DECODE_ANY, &jerr);
	if (!root)
		return -EPROTO;
	const json_t *arr = the_array(root);
	if (!arr) {
		json_decref(root);
		return -EPROTO;
	}
	size_t total = json_is_array(arr) ? json_array_size(arr) : 0;
	struct sbx_listed *v = total ? calloc(total, sizeof(*v)) : NULL;
	if (total && !v) {
		json_decref(root);
		return -ENOMEM;
	}
	size_t k = 0;
	for (size_t i = 0; i < total; i++) {
		const json_t *e = json_array_get(arr, i);
		const char *name = json_is_string(e) ? json_string_value(e)
						     : str_of(e, "name", "id");
		if (!name || !*name || strlen(name) >= sizeof(v[k].name))
			continue;
		snprintf(v[k].name, sizeof(v[k].name), "%s", name);
		const char *st = json_is_object(e) ? str_of(e, "status", "state") : NULL;
		snprintf(v[k].status, sizeof(v[k].status), "%s", st ? st : "");
		const json_t *ws = json_is_object(e) ? json_object_get(e, "workspaces") : NULL;
		const char *w = json_string_value(json_array_get(ws, 0));
		if (!w && json_is_object(json_array_get(ws, 0)))
			w = str_of(json_array_get(ws, 0), "path", "hostPath");
		snprintf(v[k].workspace, sizeof(v[k].workspace), "%s", w ? w : "");
		k++;
	}
	json_decref(root);
	*out = v;
	*n = k;
	return 0;
}
