/* SPDX-License-Identifier: Apache-2.0
 * session.c - see session.h.
 */
#include "session.h"

#include <string.h>

#include "util.h"

char *session_choose_id(const char *given, const struct policy *p,
			const char *prefix)
{
	uint8_t rnd[8];
	char hex[17];

	if (given)
		return util_xstrdup(given);
	if (p->session_id)
		return util_xstrdup(p->session_id);
	util_random(rnd, sizeof(rnd));
	util_hex(rnd, sizeof(rnd), hex);
	return util_xasprintf("%s-%s", prefix, hex);
}

void session_die_invalid_policy(const char *path, const struct policy_errors *errs)
{
	if (errs->count == 0)
		util_die(EXIT_AIRLOCK_FAILURE, "policy %s is invalid", path);
	if (errs->count == 1)
		util_die(EXIT_AIRLOCK_FAILURE, "policy %s is invalid: %s: %s", path,
			 errs->items[0].path, errs->items[0].message);
	util_die(EXIT_AIRLOCK_FAILURE,
		 "policy %s is invalid: %s: %s (and %zu more: 'airlock check %s' "
		 "lists them all)",
		 path, errs->items[0].path, errs->items[0].message, errs->count - 1,
		 path);
}

static EVP_PKEY *signing_key(const char *path)
{
	char err[256];
	EVP_PKEY *k;

	if (!path) {
		k = receipt_key_generate();
		if (!k)
			util_die(EXIT_AIRLOCK_FAILURE, "cannot generate a signing key");
		return k;
	}
	k = receipt_key_load(path, err, sizeof(err));
	if (!k)
		util_die(EXIT_AIRLOCK_FAILURE, "--signing-key %s: %s", path, err);
	return k;
}

void session_open(struct session *s, const char *events, const char *signing_key_path,
		  const struct policy *p, const char *id, const char *argv0)
{
	char err[256];
	EVP_PKEY *key;

	memset(s, 0, sizeof(*s));
	s->events = events;
	s->p = p;
	s->id = id;
	s->argv0 = argv0;
	doctor_probe(&s->caps);
	if (!events)
		return;
	key = signing_key(signing_key_path);
	if (!receipt_pubkey_b64(key, s->pubkey, sizeof(s->pubkey)))
		util_die(EXIT_AIRLOCK_FAILURE, "cannot encode the signing public key");
	s->w = receipt_open(events, key, id, p->digest, err, sizeof(err));
	EVP_PKEY_free(key);
	if (!s->w)
		util_die(EXIT_AIRLOCK_FAILURE, "--events %s: %s", events, err);
}

int64_t session_record(struct session *s, const char *type,
		       enum receipt_decision d, enum receipt_point point,
		       const char *rule, json_t *subject, const char *reason)
{
	int64_t seq = session_record_borrowed(s, type, d, point, rule, subject, reason);

	json_decref(subject);
	return seq;
}

int64_t session_record_borrowed(void *arg, const char *type,
				enum receipt_decision d, enum receipt_point point,
				const char *rule, json_t *subject, const char *reason)
{
	struct session *s = arg;
	int64_t seq;

	if (!s->w)
		return -1;
	seq = receipt_append(s->w, type, d, point, rule, subject, reason);
	if (seq < 0)
		util_die(EXIT_AIRLOCK_FAILURE, "--events %s: cannot write a receipt",
			 s->events);
	return seq;
}

void session_begin(struct session *s, const char *type, enum receipt_decision d,
		   const char *rule, const char *reason)
{
	json_t *subject = json_pack("{s:s, s:o, s:s, s:s}", "mode",
				    policy_mode_to_string(s->p->mode), "capabilities",
				    doctor_caps_json(&s->caps), "pubkey", s->pubkey,
				    "argv0", s->argv0);

	ASSERT(subject);
	session_record(s, type, d, RECEIPT_POINT_SUPERVISOR, rule, subject, reason);
}

void session_reload(struct session *s, const struct policy *p)
{
	const char *previous = s->p->digest;

	if (s->w && receipt_set_policy(s->w, p->digest) < 0)
		util_die(EXIT_AIRLOCK_FAILURE, "internal error: bad policy digest");
	session_record(s, "policy.reload", RECEIPT_INFO, RECEIPT_POINT_SUPERVISOR,
		       "policy", json_pack("{s:s, s:s}", "previous", previous, "mode",
					   policy_mode_to_string(p->mode)),
		       "policy reloaded");
	s->p = p;
}

void session_end(struct session *s, int status)
{
	if (s->w && receipt_close(s->w, status) < 0)
		util_warn("--events %s: cannot write session.end", s->events);
	s->w = NULL;
}

void session_refuse(struct session *s, const char *rule, const char *msg)
{
	session_begin(s, "session.refused", RECEIPT_BLOCK, rule, msg);
	session_end(s, EXIT_AIRLOCK_FAILURE);
	util_die(EXIT_AIRLOCK_FAILURE, "%s", msg);
}
