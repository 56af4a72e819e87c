/* SPDX-License-Identifier: Apache-2.0
 * secretfilter.h - the secret broker as a filter of the HTTP exchange:
 * placeholders substituted or refused in requests (subst.h), real values
 * scrubbed from responses (scrub.h), and their receipts.
 */
#ifndef AIRLOCK_SECRETFILTER_H
#define AIRLOCK_SECRETFILTER_H

#include <stdint.h>
#include <time.h>

#include "broker.h"
#include "filter.h"
#include "policy.h"
#include "receipt.h"

/* The filter's operations: register them with the argument that
 * secretfilter_new() returns. */
extern const struct filter_ops secretfilter_ops;
/* Its registration (filter.h): configured with every brokered secret;
 * makes the registry of injected values (filter_env.registry). */
extern const struct filter_def secretfilter_def;

/* Builds the filter's tables from @b (borrowed: values and placeholders,
 * valid until secretfilter_free()) and @p (the policy the secrets come
 * from); receipts go to @record. Never NULL. */
struct secretfilter *secretfilter_new(const struct broker *b, const struct policy *p,
				      receipt_record_fn record, void *record_arg);
void secretfilter_free(struct secretfilter *f);

/* The registry of every value the proxy injects (registry.h): the
 * filter's own, holding the brokered secrets; the git filter adds its
 * token (gitfilter_set_registry()). Valid until secretfilter_free(). */
struct registry;
struct registry *secretfilter_registry(struct secretfilter *f);

/* The scrubber's set of the values registered so far, or NULL when none
 * (tests and the fuzz target compare against it). */
struct scrub_set;
const struct scrub_set *secretfilter_scrub_set(const struct secretfilter *f);

/* Captured values (capture.h). The capturing worker announces each new
 * one to the supervisor, which hands it to every other worker and then
 * answers (secretfilter_answered()); the call only sends, and returns 0,
 * or -1 when it cannot (the answer is then cut: fail closed). The
 * exchange that captured it waits (FILTER_PENDING) for the answer before
 * the agent gets the answer's head or end, bounded by @capture_ms of
 * secretfilter_start(). @sync makes the worker read what the supervisor
 * queued for it, before a request is decided. */
typedef int (*secretfilter_announce_fn)(void *arg, const char *secret, time_t expires,
					const char *value, size_t len, const char *ph,
					size_t phlen);
typedef void (*secretfilter_sync_fn)(void *arg);
void secretfilter_set_capture_hooks(struct secretfilter *f, secretfilter_announce_fn announce,
				    secretfilter_sync_fn sync, void *arg);

/* A value another worker captured for @secret (which must have capture
 * rules), with the placeholder the agent got for it. Returns 0, or -1 when
 * it cannot be registered. */
int secretfilter_add_captured(struct secretfilter *f, const char *secret, const char *value,
			      size_t len, const char *ph, size_t phlen, time_t expires);

/* OAuth secrets (oauth.h): their access token arrives like a captured
 * value (secretfilter_add_captured, the same placeholder every time; the
 * newest value is the one in force, a known value again changes its
 * expiry). A 401 from an upstream to a request the token was injected
 * into calls @fn with the secret and that token, to ask the supervisor
 * for a refresh (the hook_arg of the capture hooks); it only sends
 * (0, or -1 when it cannot). With @wait (the exchange can send the
 * request again) the supervisor answers once it is done, the refreshed
 * token sent before (secretfilter_answered()); the exchange waits for
 * that answer, bounded by @oauth_ms of secretfilter_start(), then goes
 * again, once, with the new token. */
typedef int (*secretfilter_oauth401_fn)(void *arg, const char *secret, const char *value,
					size_t len, bool wait);
void secretfilter_set_oauth_hook(struct secretfilter *f, secretfilter_oauth401_fn fn);

/* How long an exchange that captured a value waits for the supervisor
 * to have told every other worker (it is then answered 502). */
#define SECRETFILTER_CAPTURE_WAIT_MS 5000
/* How long an exchange waits for the supervisor's refresh after a 401
 * to an OAuth token before it is answered 502: within the proxy's bound
 * on any pending exchange (its head timeout, 10 s). A slower refresh
 * still ends in the supervisor (its own bound: GHAPP_TIMEOUT_MS), and
 * the next request gets the new token. */
#define SECRETFILTER_OAUTH_WAIT_MS 8000

/* The exchanges that wait for the supervisor are resumed from @loop's
 * tick (the worker's proxy), and given up on after @capture_ms (a
 * capture: 502) or @oauth_ms (a refresh: 502). The filter's start hook
 * (secretfilter_def) calls it with the bounds above (tests may shorten
 * them: AIRLOCK_TEST_TIMEOUTS capture_wait, oauth_wait). */
void secretfilter_start(struct secretfilter *f, const struct filter_loop *loop,
			uint64_t capture_ms, uint64_t oauth_ms);

/* The supervisor answered this worker's oldest question that asked for
 * an answer (a capture announced, a refresh with @wait): it answers
 * them in the order they came. Marks the exchange waiting on it to be
 * resumed at the loop's next turn (safe to call while another request
 * is being decided). */
void secretfilter_answered(struct secretfilter *f);

#endif /* AIRLOCK_SECRETFILTER_H */
