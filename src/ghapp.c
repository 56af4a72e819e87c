/* SPDX-License-Identifier: Apache-2.0
 * ghapp.c - minting a down-scoped GitHub App installation token.
 *
 * DOC: Theory of Operation
 *
 * A GitHub App's installation token is, by default, valid for every
 * repository the App is installed on, with every permission the App has.
 * An agent holding one can push to any of them. airlock never gives the
 * agent the token (the proxy injects it, gitrules.c decides where), and it
 * also mints the token itself so that what leaks, if anything leaks, is
 * worth as little as possible:
 *
 * - The request names the repositories: the session repository and the
 *   git.repos entries of the same owner (an installation token belongs to
 *   one owner), bare names, and the least permissions: contents "write"
 *   only if one of them may be pushed, metadata "read", plus what the
 *   policy adds. Nothing is asked for by default.
 * - The answer is not trusted to have honoured the request. GitHub (or
 *   whatever answers at the API address) may grant more: every
 *   repository ("repository_selection": "all"), other repositories, more
 *   permissions, a higher level. Any of these refuses the token: the
 *   session does not start rather than run with a credential broader than
 *   the policy says. Fewer permissions are accepted (they can only make
 *   operations fail upstream).
 * - The App's key signs a JWT valid for ten minutes (iat 60 s in the past
 *   for clock skew, exp 540 s ahead: GitHub refuses more than ten
 *   minutes). The key is only ever in the key holder, which signs; the
 *   mint process (mintd.c, ghapp_mint_scope) sends the request and
 *   parses the answer, holding no key and no secret value. The JWT and
 *   the token are wiped from every buffer that held them, including
 *   jansson's (the answer is parsed with a wiping allocator) and
 *   OpenSSL's record buffers (SSL_OP_CLEANSE_PLAINTEXT).
 * - The connection is the proxy's, minus the agent: the API's name is
 *   resolved through the policy's resolvers with the same resolver module
 *   (DNS only), every answer passes the special-purpose address check
 *   (a DNS answer pointing the mint at 169.254.169.254 or the LAN is
 *   refused, as it would be for the agent), only a checked address is
 *   connected to, and the certificate must verify for the API's name.
 *   git.github_app.ca, when given, is the only trust anchor (it pins a
 *   GitHub Enterprise Server's CA); otherwise the system store and
 *   egress.upstream_ca, as for the proxy's own upstream connections.
 * - Everything is bounded: the answer's size, the token's length (no
 *   length is assumed: GitHub's token format changes), the whole mint's
 *   time.
 *
 * The mint is blocking: the mint process does it when the supervisor
 * asks, at session start (a failure refuses the session) and before each
 * expiry, never on the proxy's event loop. ghapp_https() is also the
 * supervisor's own client for the GitLab mint and the OAuth refresh.
 */
#include "ghapp.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include "addr.h"
#include "dns.h"
#include "egress.h"
#include "gitrules.h"
#include "tls.h"
#include "http.h"
#include "util.h"

/* The App's private key file may hold no more than this. */
#define KEY_FILE_MAX ((size_t)64 * 1024)
/* Addresses kept for connecting (all of them are checked). */
#define ADDRS_MAX 32

/* Every token a mint accepts can be injected. */
static_assert(GHAPP_TOKEN_MAX <= GITRULES_TOKEN_MAX, "GHAPP_TOKEN_MAX");

static const char *const access_names[] = { "read", "write", "admin" };
static_assert(ARRAY_SIZE(access_names) == POLICY_GH_ACCESS_COUNT, "access_names");

/* ------------------------------------------------------------------ */
/* Scope                                                              */
/* ------------------------------------------------------------------ */

void ghapp_scope_free(struct ghapp_scope *s)
{
	size_t i;

	if (!s)
		return;
	free(s->owner);
	for (i = 0; i < s->nrepos; i++)
		free(s->repos[i]);
	free(s->repos);
	for (i = 0; i < s->nperms; i++)
		free(s->perms[i].name);
	free(s->perms);
	memset(s, 0, sizeof(*s));
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_perm(const void *a, const void *b)
{
	return strcmp(((const struct ghapp_perm *)a)->name,
		      ((const struct ghapp_perm *)b)->name);
}

/* Adds @name at @level, or raises an existing entry to @level. */
static void perm_add(struct ghapp_scope *s, const char *name, enum policy_gh_access level)
{
	size_t i;

	for (i = 0; i < s->nperms; i++) {
		if (strcmp(s->perms[i].name, name) == 0) {
			if (level > s->perms[i].level)
				s->perms[i].level = level;
			return;
		}
	}
	s->perms = util_xrealloc(s->perms, (s->nperms + 1) * sizeof(*s->perms));
	s->perms[s->nperms].name = util_xstrdup(name);
	s->perms[s->nperms].level = level;
	s->nperms++;
}

static void repo_add(struct ghapp_scope *s, const char *name)
{
	size_t i;

	for (i = 0; i < s->nrepos; i++)
		if (strcmp(s->repos[i], name) == 0)
			return;
	s->repos = util_xrealloc(s->repos, (s->nrepos + 1) * sizeof(*s->repos));
	s->repos[s->nrepos++] = util_xstrdup(name);
}

/* Splits session.repo "host/owner/repo" (lowercase, validated by the
 * policy) into its parts. */
static void session_parts(const struct policy *p, char *host, size_t hlen, char *owner,
			  size_t olen, const char **repo)
{
	const char *s = p->session_repo, *a, *b;

	ASSERT(s);
	a = strchr(s, '/');
	ASSERT(a);
	b = strchr(a + 1, '/');
	ASSERT(b && (size_t)(a - s) < hlen && (size_t)(b - a - 1) < olen);
	memcpy(host, s, (size_t)(a - s));
	host[a - s] = '\0';
	memcpy(owner, a + 1, (size_t)(b - a - 1));
	owner[b - a - 1] = '\0';
	*repo = b + 1;
}

int ghapp_scope_from_policy(const struct policy *p, struct ghapp_scope *out, char *err,
			    size_t errlen)
{
	char host[HOSTNAME_MAX + 1], owner[256];
	const char *repo;
	bool push = false;
	size_t i;

	memset(out, 0, sizeof(*out));
	ASSERT(p->git_github_app && p->session_repo);
	session_parts(p, host, sizeof(host), owner, sizeof(owner), &repo);
	out->owner = util_xstrdup(owner);
	repo_add(out, repo);
	for (i = 0; i < p->ngit_repos; i++) {
		const struct policy_git_repo *g = &p->git_repos[i];

		if (strcmp(g->owner, owner) != 0 || (g->host && strcmp(g->host, host) != 0))
			continue;
		repo_add(out, g->repo);
	}
	if (out->nrepos > GHAPP_REPOS_MAX) {
		snprintf(err, errlen, "a token can be minted for at most %d repositories, "
				      "the policy names %zu of %s", GHAPP_REPOS_MAX, out->nrepos, owner);
		ghapp_scope_free(out);
		return -1;
	}
	/* The session repository may always be pushed, so this is "write"
	 * today; the rule is written out so that it stays the contract's. */
	for (i = 0; i < out->nrepos; i++)
		if (policy_git_repo_ops(p, host, owner, out->repos[i]) & POLICY_GIT_PUSH)
			push = true;
	perm_add(out, "contents", push ? POLICY_GH_WRITE : POLICY_GH_READ);
	perm_add(out, "metadata", POLICY_GH_READ);
	for (i = 0; i < p->git_github_app->npermissions; i++)
		perm_add(out, p->git_github_app->permissions[i].name,
			 p->git_github_app->permissions[i].level);
	qsort(out->repos, out->nrepos, sizeof(*out->repos), cmp_str);
	qsort(out->perms, out->nperms, sizeof(*out->perms), cmp_perm);
	return 0;
}

static json_t *scope_repos_json(const struct ghapp_scope *s)
{
	json_t *a = json_array();
	size_t i;

	ASSERT(a);
	for (i = 0; i < s->nrepos; i++)
		ASSERT(json_array_append_new(a, json_string(s->repos[i])) == 0);
	return a;
}

static json_t *scope_perms_json(const struct ghapp_scope *s)
{
	json_t *o = json_object();
	size_t i;

	ASSERT(o);
	for (i = 0; i < s->nperms; i++)
		ASSERT(json_object_set_new(o, s->perms[i].name,
					   json_string(access_names[s->perms[i].level])) == 0);
	return o;
}

char *ghapp_request_body(const struct ghapp_scope *s)
{
	json_t *o = json_pack("{s:o,s:o}", "repositories", scope_repos_json(s),
			      "permissions", scope_perms_json(s));
	char *text;

	ASSERT(o);
	text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	ASSERT(text);
	json_decref(o);
	return text;
}

/* ------------------------------------------------------------------ */
/* Key and JWT                                                        */
/* ------------------------------------------------------------------ */

/* Refuses encrypted keys: nothing may prompt. */
static int no_password(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

EVP_PKEY *ghapp_key_load(const char *path, char *err, size_t errlen)
{
	char warn[PATH_MAX + 64];
	EVP_PKEY *key = ghapp_key_load_quiet(path, warn, sizeof(warn), err, errlen);

	if (warn[0])
		util_warn("%s", warn);
	return key;
}

EVP_PKEY *ghapp_key_load_quiet(const char *path, char *warn, size_t warnlen, char *err,
			       size_t errlen)
{
	EVP_PKEY *key = NULL;

	warn[0] = '\0';
	BIO *bio = NULL;
	struct stat st;
	char *text = NULL;
	size_t len = 0;

	text = util_read_file(path, KEY_FILE_MAX, &len);
	if (!text) {
		snprintf(err, errlen, "%s: %s", path,
			 errno == EFBIG ? "too large for a private key" : strerror(errno));
		goto out;
	}
	warn[0] = '\0';
	if (stat(path, &st) == 0 && (st.st_mode & 077))
		snprintf(warn, warnlen, "%s: the GitHub App key is readable by group or others",
			 path);
	bio = BIO_new_mem_buf(text, (int)len);
	ASSERT(bio);
	key = PEM_read_bio_PrivateKey(bio, NULL, no_password, NULL);
	ERR_clear_error();
	if (!key) {
		snprintf(err, errlen, "%s: not a PEM private key (or an encrypted one)", path);
		goto out;
	}
	if (!EVP_PKEY_is_a(key, "RSA")) {
		snprintf(err, errlen, "%s: not an RSA key (GitHub Apps sign with RS256)", path);
		EVP_PKEY_free(key);
		key = NULL;
		goto out;
	}
	if (EVP_PKEY_get_bits(key) < 2048) {
		snprintf(err, errlen, "%s: an RSA key of %d bits; at least 2048 are needed",
			 path, EVP_PKEY_get_bits(key));
		EVP_PKEY_free(key);
		key = NULL;
		goto out;
	}
out:
	BIO_free(bio);
	if (text) {
		explicit_bzero(text, len);
		free(text);
	}
	return key;
}

/* base64url of @n bytes without padding, NUL-terminated, into a new
 * buffer. */
static char *b64url(const unsigned char *in, size_t n)
{
	size_t cap = 4 * ((n + 2) / 3) + 1, i, len;
	char *out = util_xmalloc(cap);

	ASSERT(n <= INT_MAX);
	len = (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)n);
	ASSERT(len < cap);
	while (len > 0 && out[len - 1] == '=')
		len--;
	out[len] = '\0';
	for (i = 0; i < len; i++) {
		if (out[i] == '+')
			out[i] = '-';
		else if (out[i] == '/')
			out[i] = '_';
	}
	return out;
}

static bool app_id_ok(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > 128)
		return false;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

char *ghapp_jwt(EVP_PKEY *key, const char *app_id, time_t now, char *err, size_t errlen)
{
	static const char header[] = "{\"alg\":\"RS256\",\"typ\":\"JWT\"}";
	EVP_MD_CTX *md = NULL;
	unsigned char *sig = NULL;
	size_t siglen = 0;
	char claims[256], *h64 = NULL, *c64 = NULL, *s64 = NULL, *input = NULL, *jwt = NULL;
	int n;

	ASSERT(app_id_ok(app_id));
	if (!EVP_PKEY_is_a(key, "RSA")) {
		snprintf(err, errlen, "the GitHub App key is not an RSA key");
		goto out;
	}
	n = snprintf(claims, sizeof(claims), "{\"iat\":%lld,\"exp\":%lld,\"iss\":\"%s\"}",
		     (long long)now - 60, (long long)now + 540, app_id);
	ASSERT(n > 0 && (size_t)n < sizeof(claims));
	h64 = b64url((const unsigned char *)header, sizeof(header) - 1);
	c64 = b64url((const unsigned char *)claims, (size_t)n);
	input = util_xasprintf("%s.%s", h64, c64);
	md = EVP_MD_CTX_new();
	ASSERT(md);
	if (EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) != 1 ||
	    EVP_DigestSign(md, NULL, &siglen, (const unsigned char *)input, strlen(input)) != 1) {
		snprintf(err, errlen, "signing the GitHub App JWT failed");
		goto out;
	}
	sig = util_xmalloc(siglen);
	if (EVP_DigestSign(md, sig, &siglen, (const unsigned char *)input, strlen(input)) != 1) {
		snprintf(err, errlen, "signing the GitHub App JWT failed");
		goto out;
	}
	s64 = b64url(sig, siglen);
	jwt = util_xasprintf("%s.%s", input, s64);
out:
	ERR_clear_error();
	EVP_MD_CTX_free(md);
	free(sig);
	free(h64);
	free(c64);
	free(input);
	free(s64);
	return jwt;
}

/* ------------------------------------------------------------------ */
/* The answer                                                         */
/* ------------------------------------------------------------------ */

void ghapp_token_clear(struct ghapp_token *t)
{
	if (!t)
		return;
	if (t->value) {
		explicit_bzero(t->value, t->len);
		free(t->value);
	}
	ghapp_scope_free(&t->granted);
	memset(t, 0, sizeof(*t));
}

/* jansson allocates through these while an answer is parsed, so that the
 * token's copies (the lexer's buffer, the string value) are wiped when
 * freed. Each block records its size before the pointer returned. */
#define WIPE_HDR 16
static_assert(WIPE_HDR >= sizeof(size_t), "WIPE_HDR");

static void *wipe_malloc(size_t n)
{
	unsigned char *p;

	if (n > SIZE_MAX - WIPE_HDR)
		return NULL;
	p = malloc(n + WIPE_HDR);
	if (!p)
		return NULL;
	memcpy(p, &n, sizeof(n));
	return p + WIPE_HDR;
}

static void wipe_free(void *q)
{
	unsigned char *p;
	size_t n;

	if (!q)
		return;
	p = (unsigned char *)q - WIPE_HDR;
	memcpy(&n, p, sizeof(n));
	explicit_bzero(p, n + WIPE_HDR);
	free(p);
}

void ghapp_json_wipe_begin(struct ghapp_json_alloc *saved)
{
	json_get_alloc_funcs(&saved->m, &saved->f);
	json_set_alloc_funcs(wipe_malloc, wipe_free);
}

void ghapp_json_wipe_end(const struct ghapp_json_alloc *saved)
{
	json_set_alloc_funcs(saved->m, saved->f);
}

/* Parses "YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)" (RFC 3339). */
bool ghapp_parse_rfc3339(const char *s, time_t *out)
{
	struct tm tm, back;
	int v[6], i, off = 0;
	static const int width[6] = { 4, 2, 2, 2, 2, 2 };
	static const char sep[6] = { '-', '-', 'T', ':', ':', '\0' };
	const char *p = s;
	time_t t;

	for (i = 0; i < 6; i++) {
		int k;

		v[i] = 0;
		for (k = 0; k < width[i]; k++, p++) {
			if (*p < '0' || *p > '9')
				return false;
			v[i] = v[i] * 10 + (*p - '0');
		}
		if (sep[i] == 'T') {
			if (*p != 'T' && *p != 't')
				return false;
			p++;
		} else if (sep[i]) {
			if (*p != sep[i])
				return false;
			p++;
		}
	}
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return false;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if ((*p == 'Z' || *p == 'z') && p[1] == '\0') {
		off = 0;
	} else if ((*p == '+' || *p == '-') && p[1] >= '0' && p[1] <= '9' && p[2] >= '0' &&
		   p[2] <= '9' && p[3] == ':' && p[4] >= '0' && p[4] <= '9' && p[5] >= '0' &&
		   p[5] <= '9' && p[6] == '\0') {
		int hh = (p[1] - '0') * 10 + (p[2] - '0'), mm = (p[4] - '0') * 10 + (p[5] - '0');

		if (hh > 23 || mm > 59)
			return false;
		off = (hh * 60 + mm) * 60 * (*p == '+' ? 1 : -1);
	} else {
		return false;
	}
	if (v[0] < 1970 || v[1] < 1 || v[1] > 12 || v[2] < 1 || v[2] > 31 || v[3] > 23 ||
	    v[4] > 59 || v[5] > 60)
		return false;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = v[0] - 1900;
	tm.tm_mon = v[1] - 1;
	tm.tm_mday = v[2];
	tm.tm_hour = v[3];
	tm.tm_min = v[4];
	tm.tm_sec = v[5] == 60 ? 59 : v[5];
	t = timegm(&tm);
	if (t == (time_t)-1 || !gmtime_r(&t, &back) || back.tm_mday != v[2] ||
	    back.tm_mon != v[1] - 1)
		return false; /* February 30th and friends */
	*out = t - off;
	return true;
}

static bool access_from_string(const char *s, enum policy_gh_access *out)
{
	int i;

	for (i = 0; i < POLICY_GH_ACCESS_COUNT; i++) {
		if (strcmp(s, access_names[i]) == 0) {
			*out = (enum policy_gh_access)i;
			return true;
		}
	}
	return false;
}

/* Copies at most @max printable ASCII bytes of @s into @out (for GitHub's
 * error message in a reason). */
static void printable(const char *s, char *out, size_t outlen, size_t max)
{
	size_t i, k = 0;

	for (i = 0; s[i] && k + 1 < outlen && k < max; i++)
		out[k++] = (char)((s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?');
	out[k] = '\0';
}

static bool media_is_json(const char *ct)
{
	size_t n;

	if (!ct)
		return false;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	n = strcspn(ct, "; \t");
	return n == strlen("application/json") && strncasecmp(ct, "application/json", n) == 0;
}

json_t *ghapp_answer_object(unsigned int status, const char *content_type, const char *body,
			    size_t len, char *err, size_t errlen)
{
	json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
	const char *msg = json_string_value(json_object_get(root, "message"));

	if (status != 201 && msg) {
		char shown[160];

		printable(msg, shown, sizeof(shown), 120);
		snprintf(err, errlen, "the mint answered HTTP %u: %s", status, shown);
	} else if (status != 201) {
		snprintf(err, errlen, "the mint answered HTTP %u", status);
	} else if (!media_is_json(content_type)) {
		snprintf(err, errlen, "the answer is not application/json");
	} else if (!json_is_object(root)) {
		snprintf(err, errlen, "the answer is not a JSON object");
	} else {
		return root;
	}
	json_decref(root);
	return NULL;
}

static const struct ghapp_perm *find_perm(const struct ghapp_scope *s, const char *name)
{
	size_t i;

	for (i = 0; i < s->nperms; i++)
		if (strcmp(s->perms[i].name, name) == 0)
			return &s->perms[i];
	return NULL;
}

/* Checks "repositories" against @asked; fills @g->repos. */
static bool check_repos(const struct ghapp_scope *asked, json_t *repos, struct ghapp_scope *g,
			char *err, size_t errlen)
{
	bool *seen = NULL, ok = false;
	json_t *el;
	size_t i, j;

	if (!json_is_array(repos)) {
		snprintf(err, errlen, "the answer has no \"repositories\" list");
		return false;
	}
	seen = util_xcalloc(asked->nrepos + 1, sizeof(*seen));
	json_array_foreach(repos, i, el) {
		const char *name = json_string_value(json_object_get(el, "name"));
		const char *full = json_string_value(json_object_get(el, "full_name"));
		const char *login = json_string_value(
			json_object_get(json_object_get(el, "owner"), "login"));
		char shown[80];

		if (!name) {
			snprintf(err, errlen, "repositories[%zu] has no \"name\"", i);
			goto out;
		}
		printable(name, shown, sizeof(shown), 64);
		for (j = 0; j < asked->nrepos; j++)
			if (strcasecmp(name, asked->repos[j]) == 0)
				break;
		if (j == asked->nrepos) {
			snprintf(err, errlen, "the mint granted more than asked: repository \"%s\"",
				 shown);
			goto out;
		}
		if (seen[j]) {
			snprintf(err, errlen, "the answer lists repository \"%s\" twice", shown);
			goto out;
		}
		seen[j] = true;
		if ((login && strcasecmp(login, asked->owner) != 0) ||
		    (full && (strncasecmp(full, asked->owner, strlen(asked->owner)) != 0 ||
			      full[strlen(asked->owner)] != '/' ||
			      strcasecmp(full + strlen(asked->owner) + 1, name) != 0))) {
			snprintf(err, errlen,
				 "the mint granted a repository \"%s\" of another owner", shown);
			goto out;
		}
		repo_add(g, asked->repos[j]);
	}
	for (j = 0; j < asked->nrepos; j++) {
		if (!seen[j]) {
			snprintf(err, errlen, "the mint did not grant repository \"%s\"",
				 asked->repos[j]);
			goto out;
		}
	}
	if (g->nrepos > 1)
		qsort(g->repos, g->nrepos, sizeof(*g->repos), cmp_str);
	ok = true;
out:
	free(seen);
	return ok;
}

static bool check_perms(const struct ghapp_scope *asked, json_t *perms, struct ghapp_scope *g,
			char *err, size_t errlen)
{
	const char *name;
	json_t *val;

	if (!json_is_object(perms)) {
		snprintf(err, errlen, "the answer has no \"permissions\" object");
		return false;
	}
	json_object_foreach(perms, name, val) {
		const struct ghapp_perm *want = find_perm(asked, name);
		enum policy_gh_access level;
		char shown[80];

		printable(name, shown, sizeof(shown), 64);
		if (!json_is_string(val) || !access_from_string(json_string_value(val), &level)) {
			snprintf(err, errlen, "permission \"%s\" has no level read, write or admin",
				 shown);
			return false;
		}
		if (!want) {
			snprintf(err, errlen, "the mint granted more than asked: permission \"%s\"",
				 shown);
			return false;
		}
		if (level > want->level) {
			snprintf(err, errlen,
				 "the mint granted more than asked: %s \"%s\" (asked \"%s\")",
				 want->name, access_names[level], access_names[want->level]);
			return false;
		}
		perm_add(g, want->name, level);
	}
	if (g->nperms > 1)
		qsort(g->perms, g->nperms, sizeof(*g->perms), cmp_perm);
	return true;
}

bool ghapp_token_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > GHAPP_TOKEN_MAX)
		return false;
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return false;
	return true;
}

int ghapp_check_answer(const struct ghapp_scope *asked, unsigned int status,
		       const char *content_type, const char *body, size_t len, time_t now,
		       struct ghapp_token *out, char *err, size_t errlen)
{
	json_malloc_t old_malloc;
	json_free_t old_free;
	json_t *root = NULL, *tok, *sel;
	const char *exp_text;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	json_get_alloc_funcs(&old_malloc, &old_free);
	json_set_alloc_funcs(wipe_malloc, wipe_free);
	root = ghapp_answer_object(status, content_type, body, len, err, errlen);
	if (!root)
		goto out;
	tok = json_object_get(root, "token");
	if (!json_is_string(tok) || !ghapp_token_ok(json_string_value(tok), json_string_length(tok))) {
		snprintf(err, errlen, "the answer's \"token\" is missing, empty, longer than %d "
				      "bytes or not visible ASCII", GHAPP_TOKEN_MAX);
		goto out;
	}
	exp_text = json_string_value(json_object_get(root, "expires_at"));
	if (!exp_text || !ghapp_parse_rfc3339(exp_text, &out->expires_at)) {
		snprintf(err, errlen, "the answer's \"expires_at\" is not an RFC 3339 time");
		goto out;
	}
	if (out->expires_at < now + GHAPP_MIN_LIFETIME_S) {
		snprintf(err, errlen, "the token expires in %lld s (less than %d)",
			 (long long)(out->expires_at - now), GHAPP_MIN_LIFETIME_S);
		goto out;
	}
	sel = json_object_get(root, "repository_selection");
	if (!json_is_string(sel) || strcmp(json_string_value(sel), "selected") != 0) {
		snprintf(err, errlen, "the mint granted more than asked: repository_selection "
				      "is not \"selected\"%s",
			 json_is_string(sel) && strcmp(json_string_value(sel), "all") == 0
				 ? " but \"all\"" : "");
		goto out;
	}
	out->granted.owner = util_xstrdup(asked->owner);
	if (!check_repos(asked, json_object_get(root, "repositories"), &out->granted, err,
			 errlen) ||
	    !check_perms(asked, json_object_get(root, "permissions"), &out->granted, err,
			 errlen))
		goto out;
	out->len = json_string_length(tok);
	out->value = util_xmalloc(out->len + 1);
	memcpy(out->value, json_string_value(tok), out->len);
	out->value[out->len] = '\0';
	out->issued_at = now;
	rc = 0;
out:
	json_decref(root);
	json_set_alloc_funcs(old_malloc, old_free);
	if (rc != 0)
		ghapp_token_clear(out);
	return rc;
}

time_t ghapp_refresh_at(const struct ghapp_token *t)
{
	time_t life = t->expires_at - t->issued_at;
	time_t margin = GHAPP_REFRESH_MARGIN_S;

	unsigned int test = util_test_ms("git_refresh_margin", UINT_MAX);

	if (life / 2 < margin)
		margin = life / 2;
	/* test-only: a larger margin, so a refresh comes sooner (never later) */
	if (test != UINT_MAX && (time_t)(test / 1000) > margin)
		margin = (time_t)(test / 1000);
	if (margin > life)
		margin = life;
	return t->expires_at - margin;
}

json_t *ghapp_subject(const struct policy *p, const struct ghapp_scope *asked,
		      const struct ghapp_token *t)
{
	const struct ghapp_scope *s = t ? &t->granted : asked;
	struct ghapp_scope mine;
	json_t *o;

	ASSERT(p->git_github_app);
	if (!s) {
		char err[256];

		if (ghapp_scope_from_policy(p, &mine, err, sizeof(err)) != 0)
			return json_pack("{s:s,s:I}", "host", p->git_github_app->api_host,
					 "installation_id",
					 (json_int_t)p->git_github_app->installation_id);
		s = &mine;
	} else {
		memset(&mine, 0, sizeof(mine));
	}
	o = json_pack("{s:s,s:I,s:s,s:o,s:o}", "host", p->git_github_app->api_host,
		      "installation_id", (json_int_t)p->git_github_app->installation_id,
		      "owner", s->owner, "repositories", scope_repos_json(s),
		      "permissions", scope_perms_json(s));
	ASSERT(o);
	if (t) {
		struct tm tm;
		char when[32];

		ASSERT(gmtime_r(&t->expires_at, &tm));
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		ASSERT(json_object_set_new(o, "expires_at", json_string(when)) == 0);
	}
	ghapp_scope_free(&mine);
	return o;
}

/* ------------------------------------------------------------------ */
/* The client                                                         */
/* ------------------------------------------------------------------ */

static int left_ms(long long deadline)
{
	long long l = deadline - (long long)util_now_ms();

	return l <= 0 ? 0 : l > INT_MAX ? INT_MAX : (int)l;
}

/* Waits until @fd is ready for @events. 0, or -ETIMEDOUT, or -errno. */
static int wait_fd(int fd, short events, long long deadline)
{
	struct pollfd pfd = { .fd = fd, .events = events };

	for (;;) {
		int t = left_ms(deadline), n;

		if (t == 0)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, t);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

struct resolved {
	const struct policy *p;
	uint16_t port;
	bool done;
	int status;
	char error[96];
	struct addr addrs[ADDRS_MAX];
	size_t n;
	bool checked;          /* every answer passed the address check */
	char bad[ADDR_STRLEN]; /* the first that did not */
};

static void on_resolved(void *arg, uint64_t cookie, int status, const struct addr *addrs,
			size_t n, const char *error)
{
	struct resolved *r = arg;
	struct verdict v;
	size_t bad = 0;

	(void)cookie;
	r->done = true;
	r->status = status;
	if (status != DNS_OK) {
		util_strlcpy(r->error, error ? error : "failed", sizeof(r->error));
		return;
	}
	/* Every answer is checked here, before any is dropped for space. */
	egress_decide_addrs(r->p, addrs, n, r->port, &v, &bad);
	r->checked = v.action == VERDICT_ALLOW;
	if (!r->checked) {
		addr_format(&addrs[bad], r->bad, sizeof(r->bad));
		return;
	}
	r->n = n < ADDRS_MAX ? n : ADDRS_MAX;
	memcpy(r->addrs, addrs, r->n * sizeof(*addrs));
}

/* The API host's checked addresses into @r. 0, or -1 with @err. */
static int resolve_api(const struct policy *p, const char *host, uint16_t port,
		       long long deadline, struct resolved *r, char *err, size_t errlen)
{
	struct epoll_event evs[8];
	struct verdict v;
	struct dns *d = NULL;
	struct addr a;
	size_t bad = 0;
	int epfd = -1, rc = -1, n, i;

	memset(r, 0, sizeof(*r));
	r->p = p;
	r->port = port;
	if (addr_parse(host, &a)) {
		egress_decide_addrs(p, &a, 1, port, &v, &bad);
		if (v.action != VERDICT_ALLOW) {
			if (strcmp(v.rule, "egress.special-address") == 0)
				snprintf(err, errlen, "%s is a special-purpose address; add "
						      "its range to egress.allow_ranges", host);
			else
				snprintf(err, errlen, "%.64s: %.100s (%.40s)", host, v.reason,
					 v.rule);
			goto out;
		}
		r->addrs[0] = a;
		r->n = 1;
		rc = 0;
		goto out;
	}
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0) {
		snprintf(err, errlen, "epoll: %s", strerror(errno));
		goto out;
	}
	d = dns_new(epfd, (uint64_t)1 << 32, p->resolvers, p->nresolvers,
		    (unsigned int)(left_ms(deadline) > 0 ? left_ms(deadline) : 1), err, errlen);
	if (!d)
		goto out;
	if (dns_resolve(d, host, on_resolved, r, 0) != 0) {
		snprintf(err, errlen, "cannot resolve %s: not a DNS name", host);
		goto out;
	}
	while (!r->done) {
		int t = left_ms(deadline);

		if (t == 0) {
			snprintf(err, errlen, "cannot resolve %s: timeout", host);
			goto out;
		}
		n = epoll_wait(epfd, evs, (int)ARRAY_SIZE(evs), dns_next_timeout_ms(d, t));
		if (n < 0 && errno != EINTR) {
			snprintf(err, errlen, "epoll_wait: %s", strerror(errno));
			goto out;
		}
		for (i = 0; i < n; i++)
			dns_handle(d, (int)(uint32_t)evs[i].data.u64, evs[i].events);
		dns_process_timeouts(d);
	}
	if (r->status != DNS_OK) {
		snprintf(err, errlen, "cannot resolve %s: %s (resolved through "
				      "egress.resolver or resolv.conf only, not /etc/hosts)",
			 host, r->error);
		goto out;
	}
	if (!r->checked) {
		snprintf(err, errlen, "%s resolves to %s, a special-purpose address; add "
				      "its range to egress.allow_ranges", host, r->bad);
		goto out;
	}
	rc = 0;
out:
	dns_free(d);
	if (epfd >= 0)
		close(epfd);
	return rc;
}

/* A connected non-blocking socket to @a:@port, or -errno. */
static int connect_addr(const struct addr *a, uint16_t port, long long deadline)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd, e = 0, rc;
	socklen_t el = sizeof(e);

	sl = (socklen_t)addr_to_sockaddr(a, port, &ss);
	fd = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&ss, sl) == 0)
		return fd;
	if (errno != EINPROGRESS) {
		rc = -errno;
		goto fail;
	}
	rc = wait_fd(fd, POLLOUT, deadline);
	if (rc < 0)
		goto fail;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0) {
		rc = -errno;
		goto fail;
	}
	if (e != 0) {
		rc = -e;
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return rc;
}

static SSL_CTX *client_ctx(const struct policy *p, const char *ca, const char *ca_key,
			   char *err, size_t errlen)
{
	static const unsigned char alpn[] = "\x08" TLS_ALPN_HTTP11;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	ASSERT(ctx);
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_options(ctx, SSL_OP_CLEANSE_PLAINTEXT | SSL_OP_IGNORE_UNEXPECTED_EOF |
					 SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
	ASSERT(SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1) == 0);
	if (ca) {
		if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
			snprintf(err, errlen, "%s %s: no CA certificate could be read", ca_key,
				 ca);
			goto fail;
		}
	} else {
		if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
			snprintf(err, errlen, "the system trust store cannot be read");
			goto fail;
		}
		if (p->upstream_ca && SSL_CTX_load_verify_locations(ctx, p->upstream_ca, NULL) != 1) {
			snprintf(err, errlen,
				 "egress.upstream_ca %s: no CA certificate could be read",
				 p->upstream_ca);
			goto fail;
		}
	}
	ERR_clear_error();
	return ctx;
fail:
	ERR_clear_error();
	SSL_CTX_free(ctx);
	return NULL;
}

/* After SSL_read() or SSL_write() on @ssl returned @ret <= 0: waits for
 * what it needs and returns 0 (call again), 1 at a clean end of stream,
 * or -1 with a reason in @err. (The handshake's failures are read by
 * tls_handshake_error().) */
static int tls_wait(SSL *ssl, int fd, int ret, long long deadline, const char *what, char *err,
		    size_t errlen)
{
	int e = SSL_get_error(ssl, ret), w;
	unsigned long code;

	switch (e) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		w = wait_fd(fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline);
		if (w == 0)
			return 0;
		snprintf(err, errlen, "%s: %s", what,
			 w == -ETIMEDOUT ? "timed out" : strerror(-w));
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		return 1;
	default:
		break;
	}
	if ((code = ERR_peek_last_error()) != 0) {
		char buf[160];

		ERR_error_string_n(code, buf, sizeof(buf));
		snprintf(err, errlen, "%s: %s", what, buf);
	} else if (e == SSL_ERROR_SYSCALL && errno != 0) {
		snprintf(err, errlen, "%s: %s", what, strerror(errno));
	} else {
		snprintf(err, errlen, "%s: the connection was closed", what);
	}
	ERR_clear_error();
	return -1;
}

/* The answer as read: head, then the body (decoded when chunked). */
struct answer {
	char *raw;          /* every byte read (wiped) */
	size_t len, cap;
	size_t head_len;    /* 0 until the final head is parsed */
	enum http_body framing;
	uint64_t clen;
	struct http_chunked ch;
	size_t fed;         /* raw bytes given to the chunked decoder */
	char *body;         /* the decoded chunked body (wiped) */
	size_t blen;
	bool complete;
};

static void answer_free(struct answer *a)
{
	if (a->raw) {
		explicit_bzero(a->raw, a->cap);
		free(a->raw);
	}
	if (a->body) {
		explicit_bzero(a->body, a->blen);
		free(a->body);
	}
	memset(a, 0, sizeof(*a));
}

/* Moves the answer on after new bytes (or the end of stream, @eof).
 * Returns 0, or -1 with @err. */
static int answer_step(struct answer *a, bool eof, char *err, size_t errlen)
{
	struct http_response resp;

	while (!a->head_len) {
		enum http_result hr = http_parse_response(a->raw, a->len, &resp, NULL, false);
		if (hr == HTTP_INCOMPLETE) {
			if (eof) {
				snprintf(err, errlen, "the connection closed before an answer");
				return -1;
			}
			return 0;
		}
		if (hr != HTTP_OK) {
			snprintf(err, errlen, "malformed answer: %s", resp.error ? resp.error : "?");
			return -1;
		}
		if (resp.status < 200) { /* interim: the final head follows */
			memmove(a->raw, a->raw + resp.head_len, a->len - resp.head_len);
			a->len -= resp.head_len;
			continue;
		}
		a->head_len = resp.head_len;
		a->framing = resp.body;
		a->clen = resp.content_length;
		a->fed = a->head_len;
		if (a->framing == HTTP_BODY_LENGTH && a->clen > GHAPP_ANSWER_MAX) {
			snprintf(err, errlen, "the answer is larger than %zu bytes", GHAPP_ANSWER_MAX);
			return -1;
		}
		if (a->framing == HTTP_BODY_CHUNKED)
			http_chunked_init(&a->ch, NULL);
	}
	switch (a->framing) {
	case HTTP_BODY_NONE:
		a->complete = true;
		return 0;
	case HTTP_BODY_LENGTH:
		if (a->len - a->head_len >= a->clen)
			a->complete = true;
		break;
	case HTTP_BODY_UNTIL_CLOSE:
		if (eof)
			a->complete = true;
		return 0;
	case HTTP_BODY_CHUNKED:
		while (a->fed < a->len) {
			struct http_slice data;
			size_t used = 0;
			enum http_chunked_result cr = http_chunked_feed(
				&a->ch, a->raw + a->fed, a->len - a->fed, &used, &data);

			a->fed += used;
			if (cr == HTTP_CHUNKED_DATA) {
				a->body = util_xrealloc(a->body, a->blen + data.len + 1);
				memcpy(a->body + a->blen, data.ptr, data.len);
				a->blen += data.len;
				continue;
			}
			if (cr == HTTP_CHUNKED_DONE) {
				a->complete = true;
				break;
			}
			if (cr == HTTP_CHUNKED_BAD) {
				snprintf(err, errlen, "malformed chunked answer: %s", a->ch.error);
				return -1;
			}
			break; /* MORE */
		}
		break;
	}
	if (!a->complete && eof) {
		snprintf(err, errlen, "the connection closed in the middle of the answer");
		return -1;
	}
	return 0;
}

/* Reads the whole answer on @ssl into @a. */
static int read_answer(SSL *ssl, int fd, long long deadline, struct answer *a, char *err,
		       size_t errlen)
{
	const size_t limit = GHAPP_ANSWER_MAX + (size_t)64 * 1024; /* body + a head */

	while (!a->complete) {
		int n, w;

		if (a->len == a->cap) {
			size_t cap = a->cap ? a->cap * 2 : 16384;
			char *raw;

			if (a->cap >= limit) {
				snprintf(err, errlen, "the answer is larger than %zu bytes",
					 GHAPP_ANSWER_MAX);
				return -1;
			}
			if (cap > limit)
				cap = limit;
			/* Grown by hand so that the old copy is wiped. */
			raw = util_xmalloc(cap);
			if (a->raw) {
				memcpy(raw, a->raw, a->len);
				explicit_bzero(a->raw, a->cap);
				free(a->raw);
			}
			a->raw = raw;
			a->cap = cap;
		}
		n = SSL_read(ssl, a->raw + a->len, (int)(a->cap - a->len));
		if (n > 0) {
			a->len += (size_t)n;
			if (answer_step(a, false, err, errlen) != 0)
				return -1;
			continue;
		}
		w = tls_wait(ssl, fd, n, deadline, "reading the answer", err, errlen);
		if (w < 0)
			return -1;
		/* The end of the stream: answer_step() refuses an answer it
		 * leaves incomplete. */
		if (w == 1 && answer_step(a, true, err, errlen) != 0)
			return -1;
	}
	return 0;
}

/* The request: the head and the body, in one buffer (wiped: it carries
 * the JWT). */
static char *build_request(const struct policy *p, uint64_t installation_id, const char *jwt,
			   const char *body)
{
	const struct policy_github_app *app = p->git_github_app;
	char host[HOSTNAME_MAX + 16];
	struct addr a;
	bool v6 = addr_parse(app->api_host, &a) && a.family == AF_INET6;

	if (app->api_port == 443)
		snprintf(host, sizeof(host), v6 ? "[%s]" : "%s", app->api_host);
	else
		snprintf(host, sizeof(host), v6 ? "[%s]:%u" : "%s:%u", app->api_host,
			 (unsigned int)app->api_port);
	return util_xasprintf("POST %s/app/installations/%llu/access_tokens HTTP/1.1\r\n"
			      "Host: %s\r\n"
			      "Accept: application/vnd.github+json\r\n"
			      "Authorization: Bearer %s\r\n"
			      "X-GitHub-Api-Version: 2022-11-28\r\n"
			      "User-Agent: airlock\r\n"
			      "Content-Type: application/json\r\n"
			      "Content-Length: %zu\r\n"
			      "Connection: close\r\n"
			      "\r\n%s",
			      app->api_path, (unsigned long long)installation_id, host, jwt,
			      strlen(body), body);
}

static void wipe_str(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

/* Connects to the first checked address that answers: IPv4 first. */
static int connect_any(const struct resolved *r, uint16_t port, long long deadline,
		       const char *host, char *err, size_t errlen)
{
	int pass, fd = -ECONNREFUSED;
	size_t i;

	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < r->n; i++) {
			char text[ADDR_STRLEN];

			if ((r->addrs[i].family == AF_INET) != (pass == 0))
				continue;
			fd = connect_addr(&r->addrs[i], port, deadline);
			if (fd >= 0)
				return fd;
			addr_format(&r->addrs[i], text, sizeof(text));
			snprintf(err, errlen, "cannot connect to %s (%s port %u): %s", host, text,
				 (unsigned int)port,
				 fd == -ETIMEDOUT ? "timed out" : strerror(-fd));
			if (fd == -ETIMEDOUT)
				return -1;
		}
	}
	return -1;
}

int ghapp_mint(const struct policy *p, EVP_PKEY *key, unsigned int timeout_ms,
	       struct ghapp_token *out, char *err, size_t errlen)
{
	char why[256];
	char *jwt;
	int rc;

	ASSERT(p->git_github_app);
	memset(out, 0, sizeof(*out));
	jwt = ghapp_jwt(key, p->git_github_app->app_id, time(NULL), why, sizeof(why));
	if (!jwt) {
		snprintf(err, errlen, "token mint at %s: %s", p->git_github_app->api_host, why);
		return -1;
	}
	rc = ghapp_mint_jwt(p, jwt, timeout_ms, out, err, errlen);
	wipe_str(jwt);
	return rc;
}

void ghapp_reply_free(struct ghapp_reply *r)
{
	if (r->body) {
		explicit_bzero(r->body, r->len);
		free(r->body);
	}
	memset(r, 0, sizeof(*r));
}

int ghapp_https(const struct policy *p, const char *host, uint16_t port, const char *ca,
		const char *ca_key, const char *request, long long deadline,
		struct ghapp_reply *out, char *why, size_t whylen)
{
	struct resolved r;
	struct answer a;
	struct http_response resp;
	SSL_CTX *ctx = NULL;
	SSL *ssl = NULL;
	char errbuf[200];
	const char *abody;
	size_t alen, off = 0, reqlen = strlen(request);
	int fd = -1, rc = -1, ret, hi;

	memset(out, 0, sizeof(*out));
	memset(&a, 0, sizeof(a));
	ctx = client_ctx(p, ca, ca_key, why, whylen);
	if (!ctx)
		goto out;
	if (resolve_api(p, host, port, deadline, &r, why, whylen) != 0)
		goto out;
	fd = connect_any(&r, port, deadline, host, why, whylen);
	if (fd < 0)
		goto out;
	ssl = SSL_new(ctx);
	ASSERT(ssl);
	SSL_set_fd(ssl, fd);
	if (tls_client_prepare(ssl, host, why, whylen) != 0)
		goto out;
	while ((ret = SSL_connect(ssl)) != 1) {
		int e = SSL_get_error(ssl, ret), w;

		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
			w = wait_fd(fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline);
			if (w == 0)
				continue;
			snprintf(why, whylen, "TLS: %s",
				 w == -ETIMEDOUT ? "timed out" : strerror(-w));
			goto out;
		}
		snprintf(why, whylen, "TLS: %s",
			 tls_handshake_error(ssl, ret, errbuf, sizeof(errbuf)));
		goto out;
	}
	while (off < reqlen) {
		size_t chunk = reqlen - off > INT_MAX ? INT_MAX : reqlen - off;

		ret = SSL_write(ssl, request + off, (int)chunk);
		if (ret > 0) {
			off += (size_t)ret;
			continue;
		}
		if (tls_wait(ssl, fd, ret, deadline, "sending the request", why, whylen) != 0)
			goto out;
	}
	if (read_answer(ssl, fd, deadline, &a, why, whylen) != 0)
		goto out;
	ASSERT(http_parse_response(a.raw, a.head_len, &resp, NULL, false) == HTTP_OK);
	out->status = resp.status;
	hi = http_header_find(&resp.headers, "content-type", 0);
	if (hi >= 0) {
		struct http_slice v = resp.headers.h[hi].value;
		size_t n = v.len < sizeof(out->content_type) - 1 ? v.len
								 : sizeof(out->content_type) - 1;

		memcpy(out->content_type, v.ptr, n);
		out->content_type[n] = '\0';
		out->has_content_type = true;
	}
	if (a.framing == HTTP_BODY_CHUNKED) {
		abody = a.body ? a.body : "";
		alen = a.blen;
	} else {
		abody = a.raw + a.head_len;
		alen = a.framing == HTTP_BODY_LENGTH ? (size_t)a.clen : a.len - a.head_len;
	}
	if (alen > GHAPP_ANSWER_MAX) {
		snprintf(why, whylen, "the answer is larger than %zu bytes", GHAPP_ANSWER_MAX);
		goto out;
	}
	out->body = util_xmalloc(alen + 1);
	memcpy(out->body, abody, alen);
	out->body[alen] = '\0';
	out->len = alen;
	rc = 0;
out:
	if (rc != 0 && !why[0] && (long long)util_now_ms() >= deadline)
		snprintf(why, whylen, "timed out");
	if (ssl) {
		SSL_shutdown(ssl);
		SSL_free(ssl);
	}
	SSL_CTX_free(ctx);
	if (fd >= 0)
		close(fd);
	ERR_clear_error();
	answer_free(&a);
	return rc;
}

long long ghapp_deadline(unsigned int timeout_ms)
{
	return (long long)util_now_ms() + (timeout_ms ? timeout_ms : GHAPP_TIMEOUT_MS);
}

int ghapp_mint_scope(const struct policy *p, uint64_t installation_id,
		     const struct ghapp_scope *asked, const char *jwt, unsigned int timeout_ms,
		     struct ghapp_token *out, char *err, size_t errlen)
{
	const struct policy_github_app *app = p->git_github_app;
	long long deadline = ghapp_deadline(timeout_ms);
	struct ghapp_reply reply;
	char *body = NULL, *req = NULL, why[256];
	int rc = -1;

	memset(out, 0, sizeof(*out));
	memset(&reply, 0, sizeof(reply));
	why[0] = '\0';
	ASSERT(app);
	body = ghapp_request_body(asked);
	req = build_request(p, installation_id, jwt, body);
	if (ghapp_https(p, app->api_host, app->api_port, app->ca, "git.github_app.ca", req,
			deadline, &reply, why, sizeof(why)) != 0)
		goto out;
	if (ghapp_check_answer(asked, reply.status,
			       reply.has_content_type ? reply.content_type : NULL, reply.body,
			       reply.len, time(NULL), out, why, sizeof(why)) != 0)
		goto out;
	rc = 0;
out:
	if (rc != 0)
		snprintf(err, errlen, "token mint at %s: %s", app->api_host,
			 why[0] ? why : "failed");
	ghapp_reply_free(&reply);
	wipe_str(req);
	free(body);
	return rc;
}

int ghapp_mint_jwt(const struct policy *p, const char *jwt, unsigned int timeout_ms,
		   struct ghapp_token *out, char *err, size_t errlen)
{
	struct ghapp_scope asked;
	char why[256];
	int rc;

	memset(out, 0, sizeof(*out));
	ASSERT(p->git_github_app);
	if (ghapp_scope_from_policy(p, &asked, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "token mint at %s: %s", p->git_github_app->api_host, why);
		return -1;
	}
	rc = ghapp_mint_scope(p, p->git_github_app->installation_id, &asked, jwt, timeout_ms,
			      out, err, errlen);
	ghapp_scope_free(&asked);
	return rc;
}
