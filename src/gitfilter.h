/* SPDX-License-Identifier: Apache-2.0
 * gitfilter.h - the git binding as a filter of the HTTP exchange
 * (filter.h): every request to a host of git.hosts or git.api_hosts is
 * decided by gitrules.c, recorded (git.allow, git.block), sent upstream
 * in the form that was decided, and given the session's git credential
 * only when it is allowed and travels inside intercepted TLS.
 *
 * One struct gitfilter per proxy (per worker): it holds the credential
 * (a static git.credential or the latest minted token) and the
 * placeholder the agent holds for it. Calling pattern:
 *
 *	g = gitfilter_new(record, record_arg);
 *	gitfilter_set_placeholder(g, placeholder, len);   (API binding)
 *	gitfilter_set_registry(g, registry);              the secrets'
 *	gitfilter_set_token(g, value, len, expires_at);   (0: no expiry)
 *	reg = (struct filter_reg){ &gitfilter_ops, g };
 *	...gitfilter_set_token() again on every refresh...
 *
 * (A worker does this through gitfilter_def, from the configuration the
 * supervisor sends.)
 *	gitfilter_free(g);
 */
#ifndef AIRLOCK_GITFILTER_H
#define AIRLOCK_GITFILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "filter.h"
#include "gitrules.h"
#include "receipt.h"

struct gitfilter;

/* @record (NULL: none) writes the git.allow receipts; git.block ones go
 * through the exchange's verdicts. */
struct gitfilter *gitfilter_new(receipt_record_fn record, void *record_arg);

/* Wipes the credential and frees @g (NULL is fine). */
void gitfilter_free(struct gitfilter *g);

/* The credential to inject: @len (1..GITRULES_TOKEN_MAX) bytes of visible
 * ASCII, copied (the old one wiped), valid until @expires_at (0: no
 * expiry). @token NULL: none from now on (allowed requests get 502).
 * Returns false, changing nothing, when @token is not a valid token. */
/* Every token set from now on (and the one set already) is registered
 * in @reg (registry.h, under "git.token", with the placeholder of
 * gitfilter_set_placeholder(): set that first), so that the scrubber
 * replaces it in every answer. Returns false when a token cannot be
 * registered (the caller fails closed). */
struct registry;
bool gitfilter_set_registry(struct gitfilter *g, struct registry *reg);

bool gitfilter_set_token(struct gitfilter *g, const char *token, size_t len,
			 time_t expires_at);

/* The placeholder the agent holds for the token (GITHUB_TOKEN, GH_TOKEN,
 * or the git.credential secret's own variable): substituted in the
 * Authorization of allowed API requests. Copied; NULL: none. */
void gitfilter_set_placeholder(struct gitfilter *g, const char *ph, size_t len);

/* What happens to the credential on one request. Keep
 * gitfilter_cred_to_string() in sync (static_assert). */
enum gitfilter_cred {
	GITFILTER_CRED_NONE = 0, /* nothing given: refused, would_block, or
				    plain http (no credential outside TLS) */
	GITFILTER_CRED_INJECT,   /* SCM host: Authorization replaced by
				    Basic x-access-token:TOKEN */
	GITFILTER_CRED_SUBST,    /* API host: the placeholder in
				    Authorization becomes the token */
	GITFILTER_CRED_MISSING,  /* allowed, inside TLS, but no valid token
				    (a mint failed and the last one
				    expired): 502 */
	GITFILTER_CRED_COUNT
};

const char *gitfilter_cred_to_string(enum gitfilter_cred c);

/* The credential step for a request gitrules decided @d (ALLOW or DENY;
 * a DENY that shadow mode lets through is still a DENY here) on a host
 * whose request is an API request (@api) or an SCM one, over intercepted
 * TLS (@tls) or not, with a valid token at hand (@have_token). Pure. */
enum gitfilter_cred gitfilter_cred_plan(enum gitrules_decision d, bool api, bool tls,
					bool have_token);

/* Substitutes @token for @ph in the Authorization value @auth: "Bearer PH",
 * "token PH" (scheme case-insensitive) or "Basic base64(USER:PH)".
 * Returns a new value (a credential: wipe it before free()), or NULL when
 * @auth holds the placeholder in no such form (then the value is not the
 * agent's token and is forwarded as it is: an Authorization of the
 * agent's own is not clobbered). */
char *gitfilter_subst_auth(const char *auth, const char *ph, size_t phlen,
			   const char *token, size_t toklen);

extern const struct filter_ops gitfilter_ops;
/* Its registration (filter.h): configured with the git credential and
 * its placeholder (gitcred.h), again on every refresh; after the secrets
 * filter, whose registry scrubs the token. */
extern const struct filter_def gitfilter_def;

#endif /* AIRLOCK_GITFILTER_H */
