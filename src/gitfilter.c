/* SPDX-License-Identifier: Apache-2.0
 * gitfilter.c - the git binding in the HTTP exchange.
 *
 * DOC: Theory of Operation
 *
 * The agent holds no SCM credential. On the hosts of git.hosts (smart
 * HTTP, LFS) and git.api_hosts (REST) every request goes through
 * gitrules.c, which names the repository and the operation, and through
 * this filter, which acts on the answer:
 *
 *  - Refused (a repository out of scope, a sibling's push, an ambiguous
 *    path, an endpoint that is no git operation): git.block (point git,
 *    with repo and operation), 403 in enforce mode. In shadow mode the
 *    exchange forwards it as a would_block, unchanged and without the
 *    credential: what shadow mode teaches never needs the token.
 *  - Allowed: git.allow (repo, operation). An SCM request goes upstream
 *    with the request-target gitrules.c wrote ("/owner/repo.git/...",
 *    lowercase, one slash between segments), never the client's
 *    spelling, so that what was decided is what the server reads. The
 *    agent's own Authorization is dropped and the credential injected
 *    proactively (Basic x-access-token:TOKEN: no 401 round trip). On an
 *    API host the placeholder the agent holds is replaced by the token in
 *    Authorization; an Authorization without it is the agent's own and
 *    passes unchanged.
 *  - The credential is given only inside intercepted TLS, where the proxy
 *    verified the upstream's certificate for this host, on a connection
 *    to its port 443 (the tunnel's real port, never the Host header's).
 *  - Every token set is registered with the response scrubber
 *    (registry.h), so that an upstream that echoes it (a header, a body,
 *    a Location) hands the agent its placeholder, never the token. Over plain http
 *    the rules apply all the same, but nothing is injected (a network in
 *    between would read it); a git host reached over http therefore
 *    answers 401, which is the intended outcome.
 *  - Allowed inside TLS with no valid token (a mint failed and the
 *    previous token has expired): 502, git.token, nothing forwarded.
 *
 * An LFS batch names its operation in the body: the filter asks the
 * exchange for the whole body (at most GITRULES_LFS_BODY_MAX, more is 413)
 * and decides once it is in; the head, whose headers it may then still
 * edit, is sent only after that.
 *
 * Mustn't: inject on a refused or would_block request; inject outside
 * TLS; forward the client's target for an SCM request it allowed; keep a
 * credential in memory it frees without wiping it.
 */
#include "gitfilter.h"

#include <assert.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "gitcred.h"
#include "gitprov.h"
#include "msg.h"
#include "policy.h"
#include "registry.h"
#include "util.h"

struct gitfilter {
	receipt_record_fn record;
	void *record_arg;
	char *token;            /* wiped when replaced */
	size_t token_len;
	time_t expires_at;      /* 0: no expiry */
	char *placeholder;
	size_t placeholder_len;
	struct registry *reg;   /* every token set is registered there, to be
				   scrubbed from answers (or NULL) */
};

/* What a token is replaced by in answers when the agent holds no
 * placeholder for it. */
#define SCRUBBED_TOKEN "airlock-scrubbed-git-token"

/* One request's state. */
struct gstate {
	struct gitfilter *g;
	const struct policy *p;
	struct filter_request *rq; /* the exchange's, valid until done */
	bool api;                  /* decided as an API request */
	struct gitrules_verdict v;
};

static const char *const cred_names[] = {
	[GITFILTER_CRED_NONE] = "none",
	[GITFILTER_CRED_INJECT] = "inject",
	[GITFILTER_CRED_SUBST] = "subst",
	[GITFILTER_CRED_MISSING] = "missing",
};
static_assert(ARRAY_SIZE(cred_names) == GITFILTER_CRED_COUNT,
	      "cred_names out of sync with enum gitfilter_cred");

const char *gitfilter_cred_to_string(enum gitfilter_cred c)
{
	return (unsigned int)c < GITFILTER_CRED_COUNT ? cred_names[c] : "unknown";
}

static void wipe_free(char *s, size_t n)
{
	if (s) {
		explicit_bzero(s, n);
		free(s);
	}
}

struct gitfilter *gitfilter_new(receipt_record_fn record, void *record_arg)
{
	struct gitfilter *g = util_xcalloc(1, sizeof(*g));

	g->record = record;
	g->record_arg = record_arg;
	return g;
}

void gitfilter_free(struct gitfilter *g)
{
	if (!g)
		return;
	wipe_free(g->token, g->token_len);
	wipe_free(g->placeholder, g->placeholder_len);
	free(g);
}

static bool token_ok(const char *t, size_t len)
{
	size_t i;

	if (!t || len < 1 || len > GITRULES_TOKEN_MAX)
		return false;
	for (i = 0; i < len; i++)
		if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
			return false;
	return true;
}

/* Registers @token with the agent's placeholder for it. */
static bool register_token(struct gitfilter *g, const char *token, size_t len)
{
	const char *ph = g->placeholder ? g->placeholder : SCRUBBED_TOKEN;
	size_t phlen = g->placeholder ? g->placeholder_len : strlen(SCRUBBED_TOKEN);

	return !g->reg || !token || registry_add(g->reg, "git.token", token, len, ph, phlen) >= 0;
}

bool gitfilter_set_registry(struct gitfilter *g, struct registry *reg)
{
	g->reg = reg;
	return register_token(g, g->token, g->token_len);
}

bool gitfilter_set_token(struct gitfilter *g, const char *token, size_t len,
			 time_t expires_at)
{
	if (token && !token_ok(token, len))
		return false;
	/* a token that cannot be scrubbed is not injected */
	if (!register_token(g, token, len))
		return false;
	wipe_free(g->token, g->token_len);
	g->token = token ? util_xstrndup(token, len) : NULL;
	g->token_len = token ? len : 0;
	g->expires_at = token ? expires_at : 0;
	return true;
}

void gitfilter_set_placeholder(struct gitfilter *g, const char *ph, size_t len)
{
	wipe_free(g->placeholder, g->placeholder_len);
	g->placeholder = ph && len ? util_xstrndup(ph, len) : NULL;
	g->placeholder_len = g->placeholder ? len : 0;
}

static bool have_token(const struct gitfilter *g)
{
	return g->token && (g->expires_at == 0 || time(NULL) < g->expires_at);
}

enum gitfilter_cred gitfilter_cred_plan(enum gitrules_decision d, bool api, bool tls,
					bool have)
{
	if (d != GITRULES_ALLOW || !tls)
		return GITFILTER_CRED_NONE;
	if (!have)
		return GITFILTER_CRED_MISSING;
	return api ? GITFILTER_CRED_SUBST : GITFILTER_CRED_INJECT;
}

/* --- the API placeholder ------------------------------------------------------ */

static bool ct_equal(const char *a, size_t alen, const char *b, size_t blen)
{
	return alen == blen && CRYPTO_memcmp(a, b, alen) == 0;
}

/* "Basic base64(USER:PH)" -> "Basic base64(USER:TOKEN)", or NULL. */
static char *subst_basic(const char *b64, const char *ph, size_t phlen, const char *token,
			 size_t toklen)
{
	size_t n = strlen(b64), plen, ulen, outlen;
	unsigned char *plain = NULL, *fresh = NULL;
	const char *colon;
	char *out = NULL;
	int dn;

	if (n == 0 || n % 4 != 0 || n > (size_t)4 * ((GITRULES_TOKEN_MAX + 512) / 3))
		goto out;
	plain = util_xmalloc(n);
	dn = EVP_DecodeBlock(plain, (const unsigned char *)b64, (int)n);
	if (dn < 0)
		goto out;
	plen = (size_t)dn;
	/* EVP_DecodeBlock counts the padding as zero bytes */
	if (b64[n - 1] == '=')
		plen--;
	if (b64[n - 2] == '=')
		plen--;
	colon = memchr(plain, ':', plen);
	if (!colon)
		goto out;
	ulen = (size_t)(colon - (const char *)plain);
	if (!ct_equal((const char *)plain + ulen + 1, plen - ulen - 1, ph, phlen))
		goto out;
	fresh = util_xmalloc(ulen + 1 + toklen);
	memcpy(fresh, plain, ulen + 1);
	memcpy(fresh + ulen + 1, token, toklen);
	outlen = 6 + 4 * ((ulen + 1 + toklen + 2) / 3);
	out = util_xmalloc(outlen + 1);
	memcpy(out, "Basic ", 6);
	ASSERT((size_t)EVP_EncodeBlock((unsigned char *)out + 6, fresh,
				       (int)(ulen + 1 + toklen)) == outlen - 6);
	out[outlen] = '\0';
out:
	if (plain) {
		explicit_bzero(plain, n);
		free(plain);
	}
	if (fresh) {
		explicit_bzero(fresh, ulen + 1 + toklen);
		free(fresh);
	}
	return out;
}

char *gitfilter_subst_auth(const char *auth, const char *ph, size_t phlen,
			   const char *token, size_t toklen)
{
	static const char *const schemes[] = { "Bearer ", "token " };
	size_t i;

	if (!auth || !ph || !phlen)
		return NULL;
	for (i = 0; i < ARRAY_SIZE(schemes); i++) {
		size_t sl = strlen(schemes[i]);

		if (strncasecmp(auth, schemes[i], sl) == 0 &&
		    ct_equal(auth + sl, strlen(auth + sl), ph, phlen)) {
			char *out = util_xmalloc(sl + toklen + 1);

			memcpy(out, auth, sl);
			memcpy(out + sl, token, toklen);
			out[sl + toklen] = '\0';
			return out;
		}
	}
	if (strncasecmp(auth, "Basic ", 6) == 0)
		return subst_basic(auth + 6, ph, phlen, token, toklen);
	return NULL;
}

/* --- the filter ----------------------------------------------------------------- */

static void *g_attach(void *arg, const struct filter_request *rq)
{
	struct gitfilter *g = arg;
	struct gstate *st;

	if (!rq->policy || rq->policy->mode == POLICY_MODE_OFF || rq->host->is_addr ||
	    !gitrules_host_kind(rq->policy, rq->host->name))
		return NULL;
	st = util_xcalloc(1, sizeof(*st));
	st->g = g;
	st->p = rq->policy;
	return st;
}

static struct http_slice slice(const char *s)
{
	struct http_slice sl = { s ? s : "", s ? strlen(s) : 0 };

	return sl;
}

static json_t *git_subject(const struct gstate *st)
{
	const struct filter_request *rq = st->rq;
	json_t *s = json_pack("{s:s, s:s, s:i, s:s, s:s?, s:s, s:s}", "method", rq->method,
			      "host", rq->host->name, "port", (int)rq->port, "path", rq->path,
			      "repo", st->v.repo[0] ? st->v.repo : NULL, "operation",
			      gitrules_op_to_string(st->v.op), "provider",
			      gitprov_get(st->p->git_provider)->name);

	ASSERT(s);
	return s;
}

/* Is @value the placeholder itself (the provider's token header, e.g.
 * GitLab's PRIVATE-TOKEN, carries the token bare)? */
static bool is_placeholder(const struct gitfilter *g, const char *value)
{
	return g->placeholder && ct_equal(value, strlen(value), g->placeholder,
					  g->placeholder_len);
}

/* Does an Authorization of @rq hold the placeholder (in a form that
 * gitfilter_subst_auth() replaces), or the provider's token header
 * (@hdr, NULL: none) the placeholder itself? */
static bool holds_placeholder(const struct gitfilter *g, const struct filter_request *rq,
			      const char *hdr)
{
	int i;

	if (!g->placeholder)
		return false;
	for (i = hdr ? filter_headers_find(&rq->headers, hdr, 0) : -1; i >= 0;
	     i = filter_headers_find(&rq->headers, hdr, (size_t)i + 1))
		if (is_placeholder(g, rq->headers.h[i].value))
			return true;
	for (i = filter_headers_find(&rq->headers, "authorization", 0); i >= 0;
	     i = filter_headers_find(&rq->headers, "authorization", (size_t)i + 1)) {
		char *nv = gitfilter_subst_auth(rq->headers.h[i].value, g->placeholder,
						g->placeholder_len, "x", 1);

		if (nv) {
			free(nv);
			return true;
		}
	}
	return false;
}

/* Does the Host header name the connection's own host and port? */
static bool named_here(const struct filter_request *rq)
{
	return !rq->named_host ||
	       (rq->named_host->is_addr == rq->host->is_addr &&
		strcmp(rq->named_host->name, rq->host->name) == 0 && rq->named_port == rq->port);
}

/* The request is decided (ALLOW or DENY): record, rewrite, inject. */
static enum filter_result conclude(struct gstate *st, struct verdict *v)
{
	struct filter_request *rq = st->rq;
	struct gitfilter *g = st->g;
	const struct gitprov *gp = gitprov_get(st->p->git_provider);
	const char *rule = gitrules_rule_to_string(st->v.rule);
	enum gitfilter_cred cred;

	if (st->v.decision != GITRULES_ALLOW) {
		verdict_set(v, VERDICT_DENY, 403, rule, st->v.reason);
		v->type = "git.block";
		v->point = RECEIPT_POINT_GIT;
		v->extra = json_pack("{s:s, s:s, s:s?, s:s, s:s}", "request_method", rq->method,
				     "path", rq->path, "repo", st->v.repo[0] ? st->v.repo : NULL,
				     "operation", gitrules_op_to_string(st->v.op), "provider",
				     gitprov_get(st->p->git_provider)->name);
		return FILTER_VERDICT;
	}
	/* git hosts are bound on port 443 (SPEC §3.5): the connection's
	 * port, never the Host header's, decides; elsewhere (a git host
	 * intercepted on another port by egress.intercept) the rules apply
	 * but no credential is given. A Host header that names another host
	 * or port (a mismatch shadow mode lets through) only narrows: no
	 * credential either. */
	cred = gitfilter_cred_plan(st->v.decision, st->api,
				   rq->client_tls && rq->port == 443 && named_here(rq),
				   have_token(g));
	/* An API request needs the token only when it carries the
	 * placeholder; an SCM request always does. */
	if (cred == GITFILTER_CRED_MISSING &&
	    (!st->api || holds_placeholder(g, rq, gp->api_token_header))) {
		verdict_set(v, VERDICT_FAIL, 502, "git.token",
			    "no valid git token: the last mint failed and the token it "
			    "replaced has expired");
		v->type = "git.block";
		v->point = RECEIPT_POINT_GIT;
		v->extra = json_pack("{s:s, s:s?, s:s, s:s}", "path", rq->path, "repo",
				     st->v.repo[0] ? st->v.repo : NULL, "operation",
				     gitrules_op_to_string(st->v.op), "provider",
				     gitprov_get(st->p->git_provider)->name);
		return FILTER_VERDICT;
	}
	if (g->record)
		(void)g->record(g->record_arg, "git.allow", RECEIPT_ALLOW, RECEIPT_POINT_GIT, rule,
				git_subject(st), st->v.reason);
	if (!st->api && st->v.target[0]) {
		free(rq->target);
		rq->target = util_xstrdup(st->v.target);
	}
	if (cred == GITFILTER_CRED_INJECT) {
		char *h = gitrules_credential_header(gp->git_user, g->token, g->token_len);

		filter_headers_set(&rq->headers, "Authorization", h);
		explicit_bzero(h, strlen(h));
		free(h);
	} else if (cred == GITFILTER_CRED_SUBST && g->placeholder) {
		int i;

		for (i = filter_headers_find(&rq->headers, "authorization", 0); i >= 0;
		     i = filter_headers_find(&rq->headers, "authorization", (size_t)i + 1)) {
			struct filter_header *h = &rq->headers.h[i];
			char *nv = gitfilter_subst_auth(h->value, g->placeholder,
							g->placeholder_len, g->token,
							g->token_len);

			if (!nv)
				continue;
			explicit_bzero(h->value, strlen(h->value));
			free(h->value);
			h->value = nv;
		}
		for (i = gp->api_token_header
				 ? filter_headers_find(&rq->headers, gp->api_token_header, 0)
				 : -1;
		     i >= 0; i = filter_headers_find(&rq->headers, gp->api_token_header,
						     (size_t)i + 1)) {
			struct filter_header *h = &rq->headers.h[i];

			if (!is_placeholder(g, h->value))
				continue;
			explicit_bzero(h->value, strlen(h->value));
			free(h->value);
			h->value = util_xstrndup(g->token, g->token_len);
		}
	}
	return FILTER_CONTINUE;
}

static enum filter_result g_request_head(void *arg, struct filter_request *rq,
					 struct filter_asks *asks, struct filter_ref ref,
					 struct verdict *v)
{
	struct gstate *st = arg;
	struct gitrules_request r;

	(void)ref;
	st->rq = rq;
	r.method = slice(rq->method);
	r.path = slice(rq->path);
	r.query = slice(rq->query);
	r.has_query = rq->query != NULL;
	gitrules_decide_http(st->p, rq->host->name, &r, &st->v);
	/* The API side of a host in both lists is its "/api/" paths. */
	st->api = !(gitrules_host_kind(st->p, rq->host->name) & GITRULES_HOST_SCM) ||
		  ((gitrules_host_kind(st->p, rq->host->name) & GITRULES_HOST_API) &&
		   strncmp(rq->path, "/api/", 5) == 0);
	if (st->v.decision == GITRULES_NEED_BODY) {
		if (rq->body == HTTP_BODY_NONE ||
		    (rq->body == HTTP_BODY_LENGTH && rq->content_length == 0)) {
			gitrules_decide_lfs_batch(&st->v, "", 0);
			return conclude(st, v);
		}
		asks->whole_body = true;
		asks->max_body = GITRULES_LFS_BODY_MAX;
		return FILTER_CONTINUE;
	}
	return conclude(st, v);
}

static enum filter_result g_request_body(void *arg, const char *data, size_t len, bool last,
					 struct buf *body, struct filter_ref ref,
					 struct verdict *v)
{
	struct gstate *st = arg;

	(void)data;
	(void)len;
	(void)ref;
	if (st->v.decision != GITRULES_NEED_BODY || !last)
		return FILTER_CONTINUE;
	if (!body) {
		/* asked for the whole body, got slices: never forward it */
		verdict_set(v, VERDICT_FAIL, 502, "git.lfs", "the LFS batch body was not read whole");
		return FILTER_VERDICT;
	}
	gitrules_decide_lfs_batch(&st->v, body->data ? (const char *)body->data : "", body->len);
	return conclude(st, v);
}

static void g_done(void *arg, enum filter_outcome outcome, const struct filter_stats *stats)
{
	(void)outcome;
	(void)stats;
	free(arg);
}

/* git's hosts and its API hosts, on 443. */
static bool git_needs_cleartext(const struct policy *p, const struct host_target *t,
				uint16_t port, bool any_port)
{
	if (!any_port && port != 443)
		return false;
	return filter_host_named(p->git_hosts, p->ngit_hosts, t) ||
	       filter_host_named(p->git_api_hosts, p->ngit_api_hosts, t);
}

const struct filter_ops gitfilter_ops = {
	.name = "git",
	.attach = g_attach,
	.request_head = g_request_head,
	.request_body = g_request_body,
	.done = g_done,
	.needs_cleartext = git_needs_cleartext,
};

/* --- the registration ------------------------------------------------------- */

/* The block: u64 expires_at (0: none), bytes token (empty: none), bytes
 * placeholder (empty: none). Sent again on every refresh. */
static int git_config_put(const struct filter_source *src, struct msg *blk, int *fd,
			  char *err, size_t errlen)
{
	const struct gitcred *g = src->git;

	(void)fd;
	(void)err;
	(void)errlen;
	msg_put_u64(blk, g && g->value ? (uint64_t)gitcred_expires(g) : 0);
	msg_put_bytes(blk, g && g->value ? g->value : "", g && g->value ? g->value_len : 0);
	msg_put_bytes(blk, g && g->placeholder ? g->placeholder : "",
		      g && g->placeholder ? g->placeholder_len : 0);
	return 0;
}

/* Puts the block @blk in force; with @reg, registers with it first. */
static int git_apply(struct gitfilter *g, struct registry *reg, struct msg_reader *blk,
		     int fd, char *err, size_t errlen)
{
	const void *tok = NULL, *ph = NULL;
	size_t toklen = 0, phlen = 0;
	uint64_t expires = 0;

	if (fd >= 0)
		close(fd);
	msg_get_u64(blk, &expires);
	msg_get_bytes(blk, GITRULES_TOKEN_MAX, &tok, &toklen);
	msg_get_bytes(blk, MSG_MAX, &ph, &phlen);
	if (!msg_end(blk) || fd >= 0 || expires > (uint64_t)INT64_MAX) {
		snprintf(err, errlen, "the git configuration is not valid");
		return -1;
	}
	gitfilter_set_placeholder(g, ph, phlen);
	if ((reg && !gitfilter_set_registry(g, reg)) ||
	    !gitfilter_set_token(g, toklen ? tok : NULL, toklen, (time_t)expires)) {
		snprintf(err, errlen, "the git token is not a valid token");
		return -1;
	}
	return 0;
}

static void *git_make(struct filter_env *env, struct msg_reader *blk, int fd, char *err,
		      size_t errlen)
{
	struct gitfilter *g = gitfilter_new(env->record, env->arg);

	/* the values it injects are scrubbed by the secrets' registry, so
	 * secrets come first */
	ASSERT(env->registry);
	if (git_apply(g, env->registry, blk, fd, err, errlen) < 0) {
		gitfilter_free(g);
		return NULL;
	}
	return g;
}

static int git_configure(void *f, struct msg_reader *blk, int fd, char *err, size_t errlen)
{
	return git_apply(f, NULL, blk, fd, err, errlen);
}

const struct filter_def gitfilter_def = {
	.name = "git",
	.ops = &gitfilter_ops,
	.config_put = git_config_put,
	.make = git_make,
	.configure = git_configure,
	.start = NULL,
};
