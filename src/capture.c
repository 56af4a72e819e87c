/* SPDX-License-Identifier: Apache-2.0
 * capture.c - credentials captured from answers (see capture.h).
 *
 * DOC: Theory of Operation
 *
 * A control plane that answers the sandbox with a credential (an SCM
 * token from /sessions/ID/scm-credentials, an OAuth access token) would
 * put a real value inside. A secret with `capture` rules names those
 * answers: host (the connection's), method and path ('*' one whole
 * segment), and where the value is (JSON pointers, header names). The
 * secret filter matches each intercepted exchange against the rules
 * (capture_match), reads the answer's body whole when a rule applies,
 * takes the values (capture_json), makes each a placeholder shaped like
 * it (capture_placeholder), registers the value (registry.c: from then
 * on it is scrubbed from every answer, this one first, so the agent gets
 * the placeholder in its place) and binds it as the secret says (its
 * hosts, headers, paths, methods, body). The other workers learn it
 * through the supervisor before the capturing worker relays the answer
 * (worker.c), so no request the agent makes with the placeholder can
 * reach a worker that does not know it.
 */
#include "capture.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "ghapp.h"
#include "util.h"

bool capture_path_match(const char *pattern, const char *path)
{
	const char *p = pattern, *q = path;

	while (*p && *q) {
		size_t pl, ql;

		if (*p != '/' || *q != '/')
			return false;
		p++;
		q++;
		pl = strcspn(p, "/");
		ql = strcspn(q, "/");
		if (pl == 1 && *p == '*') {
			if (ql == 0)
				return false;
		} else if (pl != ql || memcmp(p, q, pl) != 0) {
			return false;
		}
		p += pl;
		q += ql;
	}
	return !*p && !*q;
}

static bool listed(char *const *v, size_t n, const char *s)
{
	size_t i;

	if (!v)
		return true;
	for (i = 0; i < n; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

const struct policy_capture *capture_match(const struct policy *p,
					   const struct host_target *host, uint16_t port,
					   const char *method, const char *path,
					   const struct policy_secret **secret, size_t *index)
{
	size_t i, j, h;

	for (i = 0; i < p->nsecrets; i++) {
		const struct policy_secret *s = &p->secrets[i];

		for (j = 0; j < s->ncapture; j++) {
			const struct policy_capture *k = &s->capture[j];
			bool ok = false;

			for (h = 0; h < k->nhosts && !ok; h++)
				ok = host_rule_matches(&k->hosts[h], host, port, p->ports, p->nports,
						       false);
			if (!ok || !listed(k->methods, k->nmethods, method))
				continue;
			for (ok = !k->paths, h = 0; h < k->npaths && !ok; h++)
				ok = capture_path_match(k->paths[h], path);
			if (!ok)
				continue;
			*secret = s;
			*index = j;
			return k;
		}
	}
	return NULL;
}

/* The member at RFC 6901 @ptr ("/a/0/b~1c") of @root, or NULL. */
static json_t *pointer_get(json_t *root, const char *ptr)
{
	json_t *v = root;

	while (v && *ptr == '/') {
		size_t n = strcspn(++ptr, "/"), i, o = 0;
		char *key = util_xmalloc(n + 1);

		for (i = 0; i < n; i++) {
			if (ptr[i] == '~' && i + 1 < n && (ptr[i + 1] == '0' || ptr[i + 1] == '1')) {
				key[o++] = ptr[i + 1] == '0' ? '~' : '/';
				i++;
			} else {
				key[o++] = ptr[i];
			}
		}
		key[o] = '\0';
		if (json_is_object(v)) {
			v = json_object_get(v, key);
		} else if (json_is_array(v) && o > 0 && strspn(key, "0123456789") == o &&
			   (o == 1 || key[0] != '0') && o < 10) {
			v = json_array_get(v, strtoul(key, NULL, 10));
		} else {
			v = NULL;
		}
		free(key);
		ptr += n;
	}
	return v;
}

int capture_json(const struct policy_capture *rule, const char *body, size_t len,
		 time_t now, struct capture_value *out, time_t *expires, char *err,
		 size_t errlen)
{
	struct ghapp_json_alloc saved;
	json_error_t jerr;
	json_t *root, *v;
	size_t i;
	int n = 0;

	*expires = 0;
	memset(out, 0, CAPTURE_VALUES_MAX * sizeof(*out));
	ghapp_json_wipe_begin(&saved);
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		snprintf(err, errlen, "the answer is not JSON (%s)", jerr.text);
		n = -1;
		goto out;
	}
	for (i = 0; i < rule->njson && n >= 0; i++) {
		v = pointer_get(root, rule->json[i]);
		if (!v)
			continue;
		if (!json_is_string(v) || json_string_length(v) == 0) {
			snprintf(err, errlen, "%s is not a non-empty string", rule->json[i]);
			n = -1;
		} else if (n >= CAPTURE_VALUES_MAX) {
			snprintf(err, errlen, "more than %d values", CAPTURE_VALUES_MAX);
			n = -1;
		} else {
			out[n].len = json_string_length(v);
			out[n].value = util_xstrndup(json_string_value(v), out[n].len);
			out[n].where = rule->json[i];
			n++;
		}
	}
	v = rule->expires && n > 0 ? pointer_get(root, rule->expires) : NULL;
	if (v && json_is_string(v)) {
		if (!ghapp_parse_rfc3339(json_string_value(v), expires)) {
			snprintf(err, errlen, "%s is not an RFC 3339 time", rule->expires);
			n = -1;
		}
	} else if (v && json_is_number(v) && json_number_value(v) >= 0 &&
		   json_number_value(v) < 1e9) {
		*expires = now + (time_t)json_number_value(v);
	} else if (v) {
		snprintf(err, errlen, "%s is neither a time nor a number of seconds",
			 rule->expires);
		n = -1;
	}
out:
	json_decref(root);
	ghapp_json_wipe_end(&saved);
	if (n < 0) {
		for (i = 0; i < CAPTURE_VALUES_MAX && out[i].value; i++)
			;
		capture_values_free(out, i);
		*expires = 0;
	}
	return n;
}

void capture_values_free(struct capture_value *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (v[i].value) {
			explicit_bzero(v[i].value, v[i].len);
			free(v[i].value);
		}
		v[i].value = NULL;
		v[i].len = 0;
	}
}

char *capture_placeholder(const char *value, size_t len, size_t *phlen)
{
	char prefix[BROKER_PREFIX_MAX + 1], err[128];
	size_t i = 0;

	while (i < len && i < BROKER_PREFIX_MAX - 1 &&
	       ((value[i] >= 'a' && value[i] <= 'z') || (value[i] >= 'A' && value[i] <= 'Z')))
		i++;
	if (i > 0 && i < len && (value[i] == '_' || value[i] == '-'))
		i++;
	else
		i = 0;
	memcpy(prefix, value, i);
	prefix[i] = '\0';
	return broker_placeholder_make(prefix, value, len, phlen, err, sizeof(err));
}
