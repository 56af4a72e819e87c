/* SPDX-License-Identifier: Apache-2.0
 * bodysubst.c - placeholders in request bodies (see bodysubst.h).
 *
 * DOC: Theory of Operation
 *
 * A secret may list body fields (`body`): "form:NAME", a field of an
 * application/x-www-form-urlencoded body, and "json:/POINTER", a string
 * member of a JSON body (RFC 6901). On a request to a host where such a
 * secret is bound, the proxy reads the whole body before anything is
 * forwarded, and:
 *
 *  - form: each field's name and value are decoded (percent escapes, '+'
 *    as space). A placeholder in a value is substituted when the secret
 *    lists "form:NAME" and is bound to this request (verified TLS, host,
 *    path, method, checked in that order as for a header); the field is
 *    written back percent-encoded, every other field byte for byte;
 *  - JSON: the body is parsed (a duplicate member is refused: servers
 *    disagree on which one counts); a placeholder in a string member is
 *    substituted when the secret lists its pointer and is bound; the body
 *    is written back compact. Escapes (\u0041) are decoded by the parse,
 *    so an escaped placeholder is seen, and a placeholder in a member
 *    name is refused;
 *  - anywhere else -- a field not listed, another Content-Type, the raw
 *    bytes of the body after substitution -- a placeholder is refused.
 *
 * The caller re-frames the body (its length changes). Only placeholders
 * are searched for; values are only copied into the new body, which
 * bodysubst_result_free() wipes (the JSON tree that held them is made
 * with a wiping allocator).
 */
#include "bodysubst.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "ghapp.h"
#include "util.h"

struct ctx {
	const struct subst_set *set;
	const struct bodysubst_request *q;
	struct bodysubst_result *r;
	bool refused;
};

bool bodysubst_wanted(const struct subst_set *set, const struct host_target *host,
		      uint16_t port)
{
	size_t k;

	for (k = 0; k < set->n; k++) {
		struct subst_set one = { &set->secrets[k], 1, set->ports, set->nports };

		if (set->secrets[k].body && subst_host_bound(&one, host, port))
			return true;
	}
	return false;
}

static bool holds(const char *text, size_t n, const struct subst_secret *s)
{
	return s->placeholder_len <= n && memmem(text, n, s->placeholder, s->placeholder_len);
}

/* NULL when @s may be substituted in @field of this request, else why
 * not: the binding first (as for a header), then the field. */
static const char *binding(const struct ctx *c, const struct subst_secret *s,
			   const char *field)
{
	struct subst_set one = { s, 1, c->set->ports, c->set->nports };
	size_t i;
	bool ok;

	if (!c->q->tls_verified)
		return "plain-http";
	if (!subst_host_bound(&one, c->q->host, c->q->port))
		return "host";
	if (s->paths) {
		for (ok = false, i = 0; i < s->npaths && !ok; i++)
			ok = subst_path_under(c->q->path, strlen(c->q->path), s->paths[i]);
		if (!ok)
			return "path";
	}
	if (s->methods) {
		for (ok = false, i = 0; i < s->nmethods && !ok; i++)
			ok = strcmp(s->methods[i], c->q->method) == 0;
		if (!ok)
			return "method";
	}
	for (i = 0; field && i < s->nbody; i++)
		if (strcmp(s->body[i], field) == 0)
			return NULL;
	return "body";
}

static void refuse(struct ctx *c, size_t k, const char *why, const char *field)
{
	if (c->refused)
		return;
	c->refused = true;
	c->r->verdict = SUBST_REFUSE;
	c->r->secret = k;
	c->r->why = why;
	c->r->field = field ? util_xstrdup(field) : NULL;
}

static void inject(struct ctx *c, size_t k, const char *field)
{
	const struct subst_secret *s = &c->set->secrets[k];
	size_t i;

	for (i = 0; i < s->nbody; i++)
		if (strcmp(s->body[i], field) == 0)
			break;
	ASSERT(i < s->nbody);
	c->r->inj = util_xrealloc(c->r->inj, (c->r->ninj + 1) * sizeof(*c->r->inj));
	c->r->inj[c->r->ninj++] = (struct bodysubst_inject){ k, s->body[i] };
}

/* Checks @text (a decoded value at @field) and, when every placeholder
 * in it may be substituted there, returns a malloc'd copy with the
 * values in (NULL: nothing to do, or refused). */
static char *substitute(struct ctx *c, const char *text, size_t n, const char *field,
			size_t *outlen)
{
	struct buf out = { 0 };
	bool any = false;
	size_t k, i;

	for (k = 0; k < c->set->n; k++) {
		const char *why;

		if (!holds(text, n, &c->set->secrets[k]))
			continue;
		why = binding(c, &c->set->secrets[k], field);
		if (why) {
			refuse(c, k, why, field);
			return NULL;
		}
		any = true;
		inject(c, k, field);
	}
	if (!any)
		return NULL;
	for (i = 0; i < n;) {
		for (k = 0; k < c->set->n; k++) {
			const struct subst_secret *s = &c->set->secrets[k];

			if (s->placeholder_len <= n - i &&
			    memcmp(text + i, s->placeholder, s->placeholder_len) == 0)
				break;
		}
		if (k < c->set->n) {
			buf_append(&out, c->set->secrets[k].value, c->set->secrets[k].value_len);
			i += c->set->secrets[k].placeholder_len;
		} else {
			buf_append(&out, text + i, 1);
			i++;
		}
	}
	buf_append(&out, "", 1);
	*outlen = out.len - 1;
	return out.data;
}

static bool type_is(const char *ct, const char *want, bool plus_json)
{
	size_t n;

	if (!ct)
		return false;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	n = strcspn(ct, "; \t");
	if (n == strlen(want) && strncasecmp(ct, want, n) == 0)
		return true;
	return plus_json && n > 5 && strncasecmp(ct + n - 5, "+json", 5) == 0 &&
	       memchr(ct, '/', n);
}

/* --- application/x-www-form-urlencoded --------------------------------------- */

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Decodes a form name or value into @out (NUL-terminated); false on a
 * malformed escape. */
static bool form_decode(const char *p, size_t n, struct buf *out)
{
	size_t i;

	out->len = 0;
	for (i = 0; i < n; i++) {
		char ch = p[i];

		if (ch == '+') {
			ch = ' ';
		} else if (ch == '%') {
			int hi, lo;

			if (i + 2 >= n)
				return false;
			hi = hexval(p[i + 1]);
			lo = hexval(p[i + 2]);
			if (hi < 0 || lo < 0)
				return false;
			ch = (char)(hi * 16 + lo);
			i += 2;
		}
		buf_append(out, &ch, 1);
	}
	buf_append(out, "", 1);
	out->len--;
	return true;
}

static void form_encode(const char *p, size_t n, struct buf *out)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)p[i];

		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' ||
		    ch == '~') {
			buf_append(out, p + i, 1);
		} else {
			char e[3] = { '%', hex[ch >> 4], hex[ch & 15] };

			buf_append(out, e, 3);
		}
	}
}

static void wipe_buf(struct buf *b)
{
	if (b->data)
		explicit_bzero(b->data, b->cap);
	buf_free(b);
}

static void do_form(struct ctx *c, const char *body, size_t len)
{
	struct buf out = { 0 }, name = { 0 }, value = { 0 };
	bool changed = false;
	size_t at = 0;

	while (at <= len && !c->refused) {
		const char *pair = body + at, *amp = memchr(pair, '&', len - at), *eq;
		size_t plen = amp ? (size_t)(amp - pair) : len - at, k;
		char *field, *sub;
		size_t sublen = 0;

		eq = memchr(pair, '=', plen);
		if (!form_decode(pair, eq ? (size_t)(eq - pair) : plen, &name) ||
		    (eq && !form_decode(eq + 1, plen - (size_t)(eq + 1 - pair), &value))) {
			/* a malformed escape: a placeholder here is refused */
			for (k = 0; k < c->set->n; k++)
				if (holds(pair, plen, &c->set->secrets[k]))
					refuse(c, k, "unreadable", NULL);
			name.len = value.len = 0;
			if (!eq)
				eq = pair + plen;
		}
		if (!eq)
			value.len = 0;
		for (k = 0; k < c->set->n; k++)
			if (holds(name.data ? name.data : "", name.len, &c->set->secrets[k]))
				refuse(c, k, "body", NULL);
		field = util_xasprintf("form:%.*s", (int)name.len, name.data ? name.data : "");
		sub = c->refused || !eq ? NULL
					: substitute(c, value.data ? value.data : "", value.len,
						     field, &sublen);
		free(field);
		if (out.len || at)
			buf_append(&out, "&", 1);
		if (sub) {
			buf_append(&out, pair, (size_t)(eq - pair) + 1);
			form_encode(sub, sublen, &out);
			explicit_bzero(sub, sublen);
			free(sub);
			changed = true;
		} else {
			buf_append(&out, pair, plen);
		}
		if (!amp)
			break;
		at += plen + 1;
	}
	wipe_buf(&name);
	wipe_buf(&value);
	if (changed && !c->refused) {
		c->r->body = util_xmalloc(out.len + 1);
		memcpy(c->r->body, out.data, out.len);
		c->r->len = out.len;
	}
	wipe_buf(&out);
}

/* --- JSON ------------------------------------------------------------------ */

static void ptr_push(struct buf *ptr, const char *key)
{
	buf_append(ptr, "/", 1);
	for (; *key; key++) {
		if (*key == '~')
			buf_append(ptr, "~0", 2);
		else if (*key == '/')
			buf_append(ptr, "~1", 2);
		else
			buf_append(ptr, key, 1);
	}
}

static bool walk(struct ctx *c, json_t *v, struct buf *ptr)
{
	size_t mark = ptr->len, i;
	bool changed = false;
	json_t *el;

	if (c->refused)
		return false;
	if (json_is_object(v)) {
		const char *key;
		size_t k;

		json_object_foreach(v, key, el) {
			for (k = 0; k < c->set->n; k++)
				if (holds(key, strlen(key), &c->set->secrets[k]))
					refuse(c, k, "body", NULL);
			ptr_push(ptr, key);
			changed |= walk(c, el, ptr);
			ptr->len = mark;
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, el) {
			char idx[32];

			snprintf(idx, sizeof(idx), "%zu", i);
			ptr_push(ptr, idx);
			changed |= walk(c, el, ptr);
			ptr->len = mark;
		}
	} else if (json_is_string(v)) {
		char *field, *sub;
		size_t sublen = 0;

		buf_append(ptr, "", 1);
		field = util_xasprintf("json:%s", ptr->data);
		ptr->len = mark;
		sub = substitute(c, json_string_value(v), json_string_length(v), field, &sublen);
		free(field);
		if (sub) {
			json_string_setn(v, sub, sublen);
			explicit_bzero(sub, sublen);
			free(sub);
			changed = true;
		}
	}
	return changed;
}

static void do_json(struct ctx *c, const char *body, size_t len)
{
	struct ghapp_json_alloc saved;
	struct buf ptr = { 0 };
	json_error_t jerr;
	json_t *root;

	ghapp_json_wipe_begin(&saved);
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		size_t k;

		for (k = 0; k < c->set->n; k++)
			if (holds(body, len, &c->set->secrets[k]))
				refuse(c, k, "unreadable", NULL);
	} else if (walk(c, root, &ptr) && !c->refused) {
		char *text = json_dumps(root, JSON_COMPACT | JSON_ENCODE_ANY);

		json_malloc_t jm;
		json_free_t jf;

		json_get_alloc_funcs(&jm, &jf);
		if (text) {
			/* jansson's (wiping) allocator made it */
			c->r->len = strlen(text);
			c->r->body = util_xstrndup(text, c->r->len);
			jf(text);
		} else {
			refuse(c, c->r->inj ? c->r->inj[0].secret : 0, "unreadable", NULL);
		}
	}
	json_decref(root);
	ghapp_json_wipe_end(&saved);
	buf_free(&ptr);
}

void bodysubst_decide(const struct subst_set *set, const struct bodysubst_request *req,
		      const char *body, size_t len, struct bodysubst_result *r)
{
	struct ctx c = { set, req, r, false };
	const char *text;
	size_t k, n;

	memset(r, 0, sizeof(*r));
	r->verdict = SUBST_PASS;
	if (type_is(req->content_type, "application/x-www-form-urlencoded", false))
		do_form(&c, body, len);
	else if (type_is(req->content_type, "application/json", true))
		do_json(&c, body, len);
	if (c.refused) {
		char *field = r->field;

		r->field = NULL;
		bodysubst_result_free(r);
		r->field = field;
		return;
	}
	/* whatever is left is outside every listed field */
	text = r->body ? r->body : body;
	n = r->body ? r->len : len;
	for (k = 0; k < set->n; k++)
		if (holds(text, n, &set->secrets[k])) {
			const char *why = binding(&c, &set->secrets[k], NULL);

			bodysubst_result_free(r);
			r->verdict = SUBST_REFUSE;
			r->secret = k;
			r->why = why;
			return;
		}
	if (r->body)
		r->verdict = SUBST_REWRITE;
}

void bodysubst_result_free(struct bodysubst_result *r)
{
	if (r->body) {
		explicit_bzero(r->body, r->len);
		free(r->body);
	}
	free(r->inj);
	free(r->field);
	r->body = NULL;
	r->len = 0;
	r->inj = NULL;
	r->ninj = 0;
	r->field = NULL;
}
