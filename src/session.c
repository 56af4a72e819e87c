/* SPDX-License-Identifier: Apache-2.0
 * session.c - see session.h.
 */
#include "session.h"

#include <errno.h>
#include <string.h>
#include <sys/wait.h>

#include "util.h"
#include "feed.h"
#include "witness_client.h"

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

void session_open(struct session *s, const char *events, const char *signing_key,
		  const struct policy *p, const char *id, const char *argv0)
{
	session_open_ca(s, events, signing_key, p, id, argv0, NULL);
}

static char *witness_url;
static EVP_PKEY *witness_key;

void session_set_witness(const char *spec)
{
	char err[512];

	EVP_PKEY_free(witness_key);
	free(witness_url);
	witness_key = witness_spec_parse(spec, &witness_url, err, sizeof(err));
	if (!witness_key)
		util_die(EXIT_AIRLOCK_FAILURE, "run: %s", err);
}

static const char *feed_url;
static unsigned feed_queue;

bool session_events_option(const char *cmd, const char *dest, const char **events)
{
	struct feed_url u;
	char err[768];

	if (!feed_is_url(dest)) {
		*events = dest;
		return false;
	}
	if (feed_url_parse(dest, &u, err, sizeof(err)) < 0)
		util_die(EXIT_AIRLOCK_FAILURE, "%s: %s", cmd, err);
	if (feed_url)
		util_die(EXIT_AIRLOCK_FAILURE, "%s: --events names one feed at most", cmd);
	feed_url = dest;
	return true;
}

void session_feed_queue_option(const char *cmd, const char *arg)
{
	unsigned long n;

	if (!util_parse_uint(arg, 1, FEED_QUEUE_MAX, &n))
		util_die(EXIT_AIRLOCK_FAILURE, "%s: --feed-queue must be a number of lines "
			 "from 1 to %u", cmd, FEED_QUEUE_MAX);
	feed_queue = (unsigned)n;
}

void session_feed_check(const char *cmd, const char *events)
{
	if (feed_url && (!events || feed_is_url(events)))
		util_die(EXIT_AIRLOCK_FAILURE,
			 "%s: --events %s needs the local stream too (--events FILE, '-' or "
			 "fd:N): the feed is a copy, the stream the record", cmd, feed_url);
	if (feed_queue && !feed_url)
		util_die(EXIT_AIRLOCK_FAILURE, "%s: --feed-queue needs --events otlp+http://...",
			 cmd);
}

void session_open_ca(struct session *s, const char *events, const char *signing_key,
		     const struct policy *p, const char *id, const char *argv0,
		     const struct session_ca *ca)
{
	struct keeper_config kc;
	char err[512];

	memset(&kc, 0, sizeof(kc));

	memset(s, 0, sizeof(*s));
	s->events = events;
	s->p = p;
	s->id = id;
	s->argv0 = argv0;
	s->k.pid = -1;
	s->k.link.fd = -1;
	if (events) {
		kc.events = events;
		kc.signing_key = signing_key;
		kc.session = id;
		kc.policy_digest = p->digest;
		kc.sign_checkpoint = p->receipts_checkpoint;
		kc.witness_url = witness_url;
		kc.witness_key = witness_key;
		kc.feed_url = feed_url;
		kc.feed_queue = feed_queue;
		kc.checkpoint_ms = (unsigned)p->receipts_checkpoint_ms;
		kc.github_app_key = p->git_github_app && p->mode != POLICY_MODE_OFF
					    ? p->git_github_app->private_key_file
					    : NULL;
		kc.github_app_id = p->git_github_app ? p->git_github_app->app_id : NULL;
		if (ca) {
			kc.ca = true;
			kc.ca_cert = ca->cert;
			kc.ca_key = ca->key;
			kc.ca_lifetime = ca->lifetime;
			kc.ca_policy = p;
		}
		if (keeper_start(&kc, &s->k, err, sizeof(err)) < 0)
			util_die(EXIT_AIRLOCK_FAILURE, "%s", err);
		s->open = true;
	}
	/* The key holder loads the key and opens the stream meanwhile. */
	doctor_probe(&s->caps);
	if (s->open && keeper_wait_ready(&s->k, err, sizeof(err)) < 0)
		util_die(EXIT_AIRLOCK_FAILURE, "%s", err);
}

__attribute__((noreturn)) static void channel_failed(struct session *s, int r);

int session_worker_channel(struct session *s)
{
	int fd, r;

	if (!s->open)
		return -1;
	r = keeper_new_channel(&s->k, &fd);
	if (r < 0)
		channel_failed(s, r);
	return fd;
}

int session_fd(const struct session *s)
{
	return s->open ? s->k.link.fd : -1;
}

void session_forget(struct session *s)
{
	if (s->open)
		keeper_link_close(&s->k.link);
	s->open = false;
}

/* The key holder's channel failed with @r (a send or receive failed: the
 * key holder is exiting): say why, as well as we can. */
__attribute__((noreturn)) static void channel_failed(struct session *s, int r)
{
	char why[512];
	int ws = 0;

	/* The key holder closes its end of the channel only by exiting. */
	if (s->k.pid > 0) {
		while (waitpid(s->k.pid, &ws, 0) < 0 && errno == EINTR)
			;
		session_lost(s, ws);
	}
	(void)snprintf(why, sizeof(why), "%s", strerror(-r));
	util_die(EXIT_AIRLOCK_FAILURE, "--events %s: cannot record the session: the "
		 "key holder's channel failed: %s", s->events, why);
}

void session_record(struct session *s, const char *type, enum receipt_decision d,
		    enum receipt_point point, const char *rule, json_t *subject,
		    const char *reason)
{
	if (s->open) {
		int64_t seq;
		int r = keeper_record(&s->k.link, false, type, d, point, rule, subject,
				  reason, &seq);
		if (r < 0)
			channel_failed(s, r);
	}
	json_decref(subject);
}

void session_begin(struct session *s, const char *type, enum receipt_decision d,
		   const char *rule, const char *reason)
{
	json_t *subject;
	int64_t seq;
	int r;

	if (!s->open)
		return;
	subject = json_pack("{s:s, s:o, s:s, s:s}", "mode",
			    policy_mode_to_string(s->p->mode), "capabilities",
			    doctor_caps_json(&s->caps), "pubkey", s->k.pubkey,
			    "argv0", s->argv0);
	ASSERT(subject);
	/* Awaited: nothing starts before the stream's first line is written. */
	r = keeper_record(&s->k.link, true, type, d, RECEIPT_POINT_SUPERVISOR, rule,
			  subject, reason, &seq);
	json_decref(subject);
	if (r < 0)
		channel_failed(s, r);
	if (seq != 0)
		util_die(EXIT_AIRLOCK_FAILURE, "--events %s: the key holder did not write %s",
			 s->events, type);
}

void session_reload(struct session *s, const struct policy *p)
{
	json_t *subject = json_pack("{s:s, s:s}", "previous", s->p->digest, "mode",
				    policy_mode_to_string(p->mode));
	ASSERT(subject);
	if (s->open) {
		int r = keeper_set_policy(&s->k, p->digest, subject, "policy reloaded");

		if (r < 0)
			channel_failed(s, r);
	}
	json_decref(subject);
	s->p = p;
}

void session_set_spend(struct session *s, int64_t nano)
{
	int r;

	if (!s->open)
		return;
	r = keeper_set_spend(&s->k, nano);
	if (r < 0)
		channel_failed(s, r);
}

void session_end(struct session *s, int status)
{
	char err[512];

	if (s->open && keeper_end(&s->k, status, err, sizeof(err)) < 0)
		util_warn("--events %s: cannot write session.end: %s", s->events, err);
	if (s->open)
		keeper_release(&s->k);
	s->open = false;
}

void session_lost(struct session *s, int wstatus)
{
	char why[512];

	keeper_reaped(&s->k, wstatus);
	keeper_describe_exit(&s->k, why, sizeof(why));
	util_die(EXIT_AIRLOCK_FAILURE, "%s: the session cannot be recorded, so it "
		 "was stopped", why);
}

void session_refuse(struct session *s, const char *rule, const char *msg)
{
	session_begin(s, "session.refused", RECEIPT_BLOCK, rule, msg);
	session_end(s, EXIT_AIRLOCK_FAILURE);
	util_die(EXIT_AIRLOCK_FAILURE, "%s", msg);
}
