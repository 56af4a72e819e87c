/* SPDX-License-Identifier: Apache-2.0
 * test_ghapp.c - the GitHub App mint: the scope a policy asks for, the
 * request body, key loading, the JWT, the answer's validation, the
 * refresh schedule and the receipt subject; and the GitLab project token
 * mint (glmint.c, git.gitlab_mint): its scope and which answers it
 * accepts. The client itself is tested
 * against the stand-in API in tests/integration/65-git-servers.t.
 */
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ghapp.h"
#include "glmint.h"
#include "policy.h"
#include "tap.h"
#include "util.h"

#define NOW ((time_t)1800000000) /* 2027-01-15T08:00:00Z */

static char tmpdir[64];

static struct policy *load(const char *json)
{
	struct policy_errors errs = { 0 };
	struct policy *p = policy_parse(json, strlen(json), NULL, &errs);

	if (!p)
		tap_diag("policy: %s: %s", errs.count ? errs.items[0].path : "?",
			 errs.count ? errs.items[0].message : "?");
	policy_errors_free(&errs);
	ASSERT(p);
	return p;
}

static const char *const POLICY =
	"{\"version\":1,\"session\":{\"repo\":\"github.com/Acme/API\"},"
	"\"git\":{\"hosts\":[\"github.com\",\"gitlab.com\"],"
	"\"repos\":{\"acme/shared-lib\":[\"fetch\"],\"Acme/Tools.git\":[\"fetch\",\"push\"],"
	"\"github.com/acme/docs\":[\"fetch\"],\"gitlab.com/acme/mirror\":[\"fetch\"],"
	"\"other/lib\":[\"fetch\"],\"acme/api\":[\"fetch\"]},"
	"\"github_app\":{\"app_id\":\"Iv23liExample\",\"installation_id\":4242,"
	"\"private_key_file\":\"/etc/airlock/app.pem\","
	"\"permissions\":{\"issues\":\"write\",\"metadata\":\"write\",\"contents\":\"read\","
	"\"pull_requests\":\"read\"}}}}";

static void test_scope(void)
{
	struct policy *p = load(POLICY);
	struct ghapp_scope s;
	char err[256], *body;
	json_t *subj;
	char *text;

	tap_is_int(ghapp_scope_from_policy(p, &s, err, sizeof(err)), 0, "scope: made");
	tap_is_str(s.owner, "acme", "scope: the session repository's owner, lowercase");
	body = ghapp_request_body(&s);
	/* gitlab.com/acme/mirror is another host, other/lib another owner;
	 * acme/api is the session repository again. */
	tap_is_str(body,
		   "{\"repositories\":[\"api\",\"docs\",\"shared-lib\",\"tools\"],"
		   "\"permissions\":{\"contents\":\"write\",\"issues\":\"write\","
		   "\"metadata\":\"write\",\"pull_requests\":\"read\"}}",
		   "request body: bare names of the owner's repositories in scope, the "
		   "higher level of each permission");
	free(body);
	subj = ghapp_subject(p, &s, NULL);
	text = json_dumps(subj, JSON_COMPACT | JSON_SORT_KEYS);
	tap_is_str(text,
		   "{\"host\":\"api.github.com\",\"installation_id\":4242,\"owner\":\"acme\","
		   "\"permissions\":{\"contents\":\"write\",\"issues\":\"write\",\"metadata\":"
		   "\"write\",\"pull_requests\":\"read\"},\"repositories\":[\"api\",\"docs\","
		   "\"shared-lib\",\"tools\"]}",
		   "subject of a failed mint: what was asked, no expiry");
	free(text);
	json_decref(subj);
	ghapp_scope_free(&s);
	policy_free(p);

	p = load("{\"version\":1,\"session\":{\"repo\":\"github.com/acme/api\"},"
		 "\"git\":{\"hosts\":[\"github.com\"],"
		 "\"github_app\":{\"app_id\":123,\"installation_id\":1,"
		 "\"private_key_file\":\"/k.pem\"}}}");
	tap_is_int(ghapp_scope_from_policy(p, &s, err, sizeof(err)), 0, "minimal scope: made");
	body = ghapp_request_body(&s);
	tap_is_str(body,
		   "{\"repositories\":[\"api\"],\"permissions\":{\"contents\":\"write\","
		   "\"metadata\":\"read\"}}",
		   "minimal request: the session repository, contents write (it may be "
		   "pushed), metadata read");
	free(body);
	ghapp_scope_free(&s);
	subj = ghapp_subject(p, NULL, NULL);
	text = json_dumps(subj, JSON_COMPACT | JSON_SORT_KEYS);
	tap_is_str(text,
		   "{\"host\":\"api.github.com\",\"installation_id\":1,\"owner\":\"acme\","
		   "\"permissions\":{\"contents\":\"write\",\"metadata\":\"read\"},"
		   "\"repositories\":[\"api\"]}",
		   "subject with neither scope nor token: the policy's scope");
	free(text);
	json_decref(subj);
	policy_free(p);
}

/* ------------------------------------------------------------------ */
/* Keys and the JWT                                                   */
/* ------------------------------------------------------------------ */

static char *b64url_decode(const char *s, size_t n, size_t *outlen)
{
	char *buf = util_xmalloc(n + 4), *out = util_xmalloc(n + 4);
	size_t i, m = n;
	int k;

	for (i = 0; i < n; i++)
		buf[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
	while (m % 4)
		buf[m++] = '=';
	k = EVP_DecodeBlock((unsigned char *)out, (unsigned char *)buf, (int)m);
	ASSERT(k >= 0);
	*outlen = (size_t)k - (m - n);
	out[*outlen] = '\0';
	free(buf);
	return out;
}

static bool verify(EVP_PKEY *key, const char *data, size_t n, const unsigned char *sig,
		   size_t siglen)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	bool ok = EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key) == 1 &&
		  EVP_DigestVerify(md, sig, siglen, (const unsigned char *)data, n) == 1;

	EVP_MD_CTX_free(md);
	return ok;
}

static void test_jwt(EVP_PKEY *rsa)
{
	EVP_PKEY *ed = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	char err[256], *jwt, *dot1, *dot2, *part;
	size_t n, i;
	bool urlsafe = true;

	jwt = ghapp_jwt(rsa, "Iv23liExample", NOW, err, sizeof(err));
	ASSERT(jwt);
	for (i = 0; jwt[i]; i++)
		if (jwt[i] == '=' || jwt[i] == '+' || jwt[i] == '/')
			urlsafe = false;
	tap_ok(urlsafe, "jwt: base64url without padding");
	dot1 = strchr(jwt, '.');
	dot2 = dot1 ? strchr(dot1 + 1, '.') : NULL;
	tap_ok(dot1 && dot2 && !strchr(dot2 + 1, '.'), "jwt: three parts");
	part = b64url_decode(jwt, (size_t)(dot1 - jwt), &n);
	tap_is_str(part, "{\"alg\":\"RS256\",\"typ\":\"JWT\"}", "jwt: header");
	free(part);
	part = b64url_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), &n);
	tap_is_str(part, "{\"iat\":1799999940,\"exp\":1800000540,\"iss\":\"Iv23liExample\"}",
		   "jwt: claims, iat 60 s back, exp 540 s ahead (10 minutes in all)");
	free(part);
	part = b64url_decode(dot2 + 1, strlen(dot2 + 1), &n);
	tap_is_int(n, 256, "jwt: an RSA-2048 signature");
	tap_ok(verify(rsa, jwt, (size_t)(dot2 - jwt), (unsigned char *)part, n),
	       "jwt: RS256 verifies with the App's public key");
	jwt[1] ^= 1;
	tap_ok(!verify(rsa, jwt, (size_t)(dot2 - jwt), (unsigned char *)part, n),
	       "jwt: control: a changed header does not verify");
	free(part);
	explicit_bzero(jwt, strlen(jwt));
	free(jwt);

	err[0] = '\0';
	jwt = ghapp_jwt(ed, "123", NOW, err, sizeof(err));
	tap_ok(!jwt && strstr(err, "RSA"), "jwt: an Ed25519 key is refused (%s)", err);
	free(jwt);
	EVP_PKEY_free(ed);
}

static void write_key(const char *name, EVP_PKEY *key, bool pkcs1, const char *pass)
{
	char path[128];
	BIO *b;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	b = BIO_new_file(path, "w");
	ASSERT(b);
	if (pkcs1)
		ASSERT(PEM_write_bio_PrivateKey_traditional(b, key, NULL, NULL, 0, NULL, NULL) == 1);
	else
		ASSERT(PEM_write_bio_PrivateKey(b, key, pass ? EVP_aes_128_cbc() : NULL, NULL, 0,
						NULL, (void *)pass) == 1);
	BIO_free(b);
	ASSERT(chmod(path, 0600) == 0);
}

static void write_text(const char *name, const char *text, size_t n)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ASSERT(fd >= 0);
	ASSERT(util_write_all(fd, text, n) == 0);
	close(fd);
}

static void test_keys(EVP_PKEY *rsa)
{
	EVP_PKEY *small = EVP_RSA_gen(1024), *ec = EVP_EC_gen("P-256");
	static const struct {
		const char *file;
		bool ok;
		const char *why;
	} cases[] = {
		{ "pkcs8.pem", true, NULL },
		{ "pkcs1.pem", true, NULL },
		{ "small.pem", false, "2048" },
		{ "ec.pem", false, "not an RSA key" },
		{ "encrypted.pem", false, "encrypted" },
		{ "garbage.pem", false, "not a PEM private key" },
		{ "big.pem", false, "too large" },
		{ "missing.pem", false, "No such file" },
	};
	char big[70000], path[128], err[256];
	size_t i;

	ASSERT(small && ec);
	write_key("pkcs8.pem", rsa, false, NULL);
	write_key("pkcs1.pem", rsa, true, NULL);
	write_key("small.pem", small, false, NULL);
	write_key("ec.pem", ec, false, NULL);
	write_key("encrypted.pem", rsa, false, "secret");
	write_text("garbage.pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
		   58);
	memset(big, 'A', sizeof(big));
	write_text("big.pem", big, sizeof(big));
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		EVP_PKEY *k;

		snprintf(path, sizeof(path), "%s/%s", tmpdir, cases[i].file);
		err[0] = '\0';
		k = ghapp_key_load(path, err, sizeof(err));
		if (cases[i].ok)
			tap_ok(k && EVP_PKEY_eq(k, rsa) == 1, "key %s: loaded", cases[i].file);
		else
			tap_ok(!k && strstr(err, cases[i].why) && strstr(err, cases[i].file),
			       "key %s: refused (%s)", cases[i].file, err);
		EVP_PKEY_free(k);
	}
	EVP_PKEY_free(small);
	EVP_PKEY_free(ec);
}

/* ------------------------------------------------------------------ */
/* Answers                                                            */
/* ------------------------------------------------------------------ */

#define TOKEN "ghs_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
#define R(n) "{\"id\":1,\"name\":\"" n "\",\"full_name\":\"acme/" n "\",\"owner\":{\"login\":\"acme\"}}"
#define REPOS "\"repositories\":[" R("api") "," R("shared-lib") "]"
#define PERMS "\"permissions\":{\"contents\":\"write\",\"metadata\":\"read\"}"
#define SEL "\"repository_selection\":\"selected\""
#define EXP "\"expires_at\":\"2027-01-15T09:00:00Z\""
#define TOK "\"token\":\"" TOKEN "\""
#define ANSWER(...) "{" __VA_ARGS__ "}"
#define GOOD ANSWER(TOK "," EXP "," PERMS "," SEL "," REPOS)
#define CT "application/json; charset=utf-8"

struct answer_case {
	const char *what;
	unsigned int status;
	const char *ctype;
	const char *body;
	const char *why; /* NULL: accepted; else a part of the reason */
};

static const struct answer_case answer_cases[] = {
	{ "exact grant", 201, CT, GOOD, NULL },
	{ "content type without parameters", 201, "application/json", GOOD, NULL },
	{ "content type in capitals", 201, "Application/JSON", GOOD, NULL },
	{ "names in another case", 201, CT,
	  ANSWER(TOK "," EXP "," PERMS "," SEL ",\"repositories\":[{\"name\":\"API\"},"
	  "{\"name\":\"Shared-Lib\",\"full_name\":\"ACME/Shared-Lib\"}]"), NULL },
	{ "fewer permissions", 201, CT,
	  ANSWER(TOK "," EXP ",\"permissions\":{\"contents\":\"read\"}," SEL "," REPOS), NULL },
	{ "no permissions at all", 201, CT,
	  ANSWER(TOK "," EXP ",\"permissions\":{}," SEL "," REPOS), NULL },
	{ "a token of 41 characters", 201, CT,
	  ANSWER("\"token\":\"ghs_0123456789abcdef0123456789abcdef01234\"," EXP "," PERMS "," SEL
		 "," REPOS), NULL },
	{ "a token without the ghs_ prefix", 201, CT,
	  ANSWER("\"token\":\"v1.0123456789abcdef\"," EXP "," PERMS "," SEL "," REPOS), NULL },
	{ "an offset time", 201, CT,
	  ANSWER(TOK ",\"expires_at\":\"2027-01-15T10:00:00.123+01:00\"," PERMS "," SEL "," REPOS),
	  NULL },
	{ "extra members", 201, CT,
	  ANSWER(TOK "," EXP "," PERMS "," SEL "," REPOS ",\"single_file\":null"), NULL },
	/* Over-granting. */
	{ "another repository", 201, CT,
	  ANSWER(TOK "," EXP "," PERMS "," SEL ",\"repositories\":[" R("api") "," R("shared-lib")
		 "," R("secrets") "]"), "granted more than asked: repository \"secrets\"" },
	{ "selection all", 201, CT,
	  ANSWER(TOK "," EXP "," PERMS ",\"repository_selection\":\"all\"," REPOS),
	  "repository_selection is not \"selected\" but \"all\"" },
	{ "no selection", 201, CT, ANSWER(TOK "," EXP "," PERMS "," REPOS),
	  "repository_selection" },
	{ "another permission", 201, CT,
	  ANSWER(TOK "," EXP ",\"permissions\":{\"contents\":\"write\",\"metadata\":\"read\","
		 "\"administration\":\"write\"}," SEL "," REPOS),
	  "granted more than asked: permission \"administration\"" },
	{ "a higher level", 201, CT,
	  ANSWER(TOK "," EXP ",\"permissions\":{\"contents\":\"write\",\"metadata\":\"write\"},"
		 SEL "," REPOS), "metadata \"write\" (asked \"read\")" },
	{ "admin", 201, CT,
	  ANSWER(TOK "," EXP ",\"permissions\":{\"contents\":\"admin\"}," SEL "," REPOS),
	  "contents \"admin\"" },
	{ "an unknown level", 201, CT,
	  ANSWER(TOK "," EXP ",\"permissions\":{\"contents\":\"owner\"}," SEL "," REPOS),
	  "no level" },
	{ "a level that is no string", 201, CT,
	  ANSWER(TOK "," EXP ",\"permissions\":{\"contents\":2}," SEL "," REPOS), "no level" },
	{ "permissions not an object", 201, CT,
	  ANSWER(TOK "," EXP ",\"permissions\":[]," SEL "," REPOS), "no \"permissions\"" },
	{ "no permissions member", 201, CT, ANSWER(TOK "," EXP "," SEL "," REPOS),
	  "no \"permissions\"" },
	/* Repositories. */
	{ "a repository missing", 201, CT,
	  ANSWER(TOK "," EXP "," PERMS "," SEL ",\"repositories\":[" R("api") "]"),
	  "did not grant repository \"shared-lib\"" },
	{ "a repository twice", 201, CT,
	  ANSWER(TOK "," EXP "," PERMS "," SEL ",\"repositories\":[" R("api") "," R("api") ","
		 R("shared-lib") "]"), "twice" },
	{ "another owner's full_name", 201, CT,
	  ANSWER(TOK "," EXP "," PERMS "," SEL ",\"repositories\":[" R("api")
		 ",{\"name\":\"shared-lib\",\"full_name\":\"mallory/shared-lib\"}]"),
	  "another owner" },
	{ "a full_name naming another repository", 201, CT,
	  ANSWER(TOK "," EXP "," PERMS "," SEL ",\"repositories\":[" R("api")
		 ",{\"name\":\"shared-lib\",\"full_name\":\"acme/secrets\"}]"), "another owner" },
	{ "another owner's login", 201, CT,
	  ANSWER(TOK "," EXP "," PERMS "," SEL ",\"repositories\":[" R("api")
		 ",{\"name\":\"shared-lib\",\"owner\":{\"login\":\"mallory\"}}]"), "another owner" },
	{ "a repository without a name", 201, CT,
	  ANSWER(TOK "," EXP "," PERMS "," SEL ",\"repositories\":[" R("api")
		 ",{\"full_name\":\"acme/shared-lib\"}]"), "has no \"name\"" },
	{ "no repositories member", 201, CT, ANSWER(TOK "," EXP "," PERMS "," SEL),
	  "no \"repositories\"" },
	/* The token. */
	{ "no token", 201, CT, ANSWER(EXP "," PERMS "," SEL "," REPOS), "\"token\"" },
	{ "an empty token", 201, CT, ANSWER("\"token\":\"\"," EXP "," PERMS "," SEL "," REPOS),
	  "\"token\"" },
	{ "a token with a space", 201, CT,
	  ANSWER("\"token\":\"ghs_a b\"," EXP "," PERMS "," SEL "," REPOS), "\"token\"" },
	{ "a token with a newline", 201, CT,
	  ANSWER("\"token\":\"ghs_a\\r\\nX-Evil: 1\"," EXP "," PERMS "," SEL "," REPOS),
	  "\"token\"" },
	{ "a token with a NUL", 201, CT,
	  ANSWER("\"token\":\"ghs_a\\u0000b\"," EXP "," PERMS "," SEL "," REPOS),
	  "not a JSON object" }, /* jansson refuses \u0000 */
	{ "a token with non-ASCII", 201, CT,
	  ANSWER("\"token\":\"ghs_\\u00e9\"," EXP "," PERMS "," SEL "," REPOS), "\"token\"" },
	{ "a token that is a number", 201, CT,
	  ANSWER("\"token\":12," EXP "," PERMS "," SEL "," REPOS), "\"token\"" },
	/* Expiry. */
	{ "no expiry", 201, CT, ANSWER(TOK "," PERMS "," SEL "," REPOS), "expires_at" },
	{ "an expiry without zone", 201, CT,
	  ANSWER(TOK ",\"expires_at\":\"2027-01-15T09:00:00\"," PERMS "," SEL "," REPOS),
	  "expires_at" },
	{ "an expiry on February 30th", 201, CT,
	  ANSWER(TOK ",\"expires_at\":\"2027-02-30T09:00:00Z\"," PERMS "," SEL "," REPOS),
	  "expires_at" },
	{ "an expiry with junk", 201, CT,
	  ANSWER(TOK ",\"expires_at\":\"2027-01-15T09:00:00Zjunk\"," PERMS "," SEL "," REPOS),
	  "expires_at" },
	{ "an expiry as a number", 201, CT,
	  ANSWER(TOK ",\"expires_at\":1800003600," PERMS "," SEL "," REPOS), "expires_at" },
	{ "an expiry in the past", 201, CT,
	  ANSWER(TOK ",\"expires_at\":\"2027-01-15T07:59:00Z\"," PERMS "," SEL "," REPOS),
	  "expires in -60 s" },
	{ "an expiry too soon", 201, CT,
	  ANSWER(TOK ",\"expires_at\":\"2027-01-15T08:01:00Z\"," PERMS "," SEL "," REPOS),
	  "expires in 60 s" },
	{ "an expiry in an hour, at +01:00 meaning now", 201, CT,
	  ANSWER(TOK ",\"expires_at\":\"2027-01-15T09:00:00+01:00\"," PERMS "," SEL "," REPOS),
	  "expires in 0 s" },
	/* Failures. */
	{ "HTTP 401 with a message", 401, CT,
	  "{\"message\":\"A JSON web token could not be decoded\",\"documentation_url\":\"x\"}",
	  "the mint answered HTTP 401: A JSON web token could not be decoded" },
	{ "HTTP 422", 422, CT, "{\"message\":\"There is at least one repository that does not "
	  "exist or is not accessible to the parent installation.\"}",
	  "HTTP 422: There is at least one repository" },
	{ "HTTP 500 without a body", 500, NULL, "", "the mint answered HTTP 500" },
	{ "HTTP 200 instead of 201", 200, CT, GOOD, "HTTP 200" },
	{ "a message with a newline", 403, CT, "{\"message\":\"a\\nb\"}", "HTTP 403: a?b" },
	{ "not JSON", 201, CT, "{\"token\": \"ghs_x\", \"expires_at\": ", "not a JSON object" },
	{ "a JSON array", 201, CT, "[" GOOD "]", "not a JSON object" },
	{ "a duplicate member", 201, CT,
	  ANSWER(TOK "," EXP "," PERMS "," SEL "," REPOS ",\"repository_selection\":\"all\""),
	  "not a JSON object" },
	{ "trailing bytes", 201, CT, GOOD " x", "not a JSON object" },
	{ "HTML", 201, "text/html", GOOD, "not application/json" },
	{ "no content type", 201, NULL, GOOD, "not application/json" },
	{ "a JSON-ish type", 201, "application/jsonx", GOOD, "not application/json" },
};

static void test_answers(void)
{
	struct policy *p = load("{\"version\":1,\"session\":{\"repo\":\"github.com/acme/api\"},"
				"\"git\":{\"hosts\":[\"github.com\"],"
				"\"repos\":{\"acme/shared-lib\":[\"fetch\"]},"
				"\"github_app\":{\"app_id\":123,\"installation_id\":1,"
				"\"private_key_file\":\"/k.pem\"}}}");
	json_malloc_t m;
	json_free_t f;
	struct ghapp_scope asked;
	char err[512];
	size_t i;

	ASSERT(ghapp_scope_from_policy(p, &asked, err, sizeof(err)) == 0);
	for (i = 0; i < ARRAY_SIZE(answer_cases); i++) {
		const struct answer_case *c = &answer_cases[i];
		struct ghapp_token t;
		int rc;

		memset(&t, 0x5a, sizeof(t));
		err[0] = '\0';
		rc = ghapp_check_answer(&asked, c->status, c->ctype, c->body, strlen(c->body), NOW,
					&t, err, sizeof(err));
		if (!c->why) {
			tap_ok(rc == 0 && t.value && t.len == strlen(t.value) && t.len > 0 &&
				       strstr(c->body, t.value) && t.issued_at == NOW &&
				       t.expires_at == NOW + 3600 && t.granted.nrepos == 2,
			       "answer: %s: accepted%s%s", c->what, rc ? ": " : "", rc ? err : "");
		} else {
			tap_ok(rc == -1 && strstr(err, c->why) && !strstr(err, TOKEN) && !t.value &&
				       t.len == 0,
			       "answer: %s: refused (%s)", c->what, err);
		}
		ghapp_token_clear(&t);
	}
	json_get_alloc_funcs(&m, &f);
	tap_ok(m == malloc && f == free, "answer: jansson's allocator is restored");
	ghapp_scope_free(&asked);
	policy_free(p);
}

/* A long token and what the answer granted. */
static void test_granted(void)
{
	struct policy *p = load("{\"version\":1,\"session\":{\"repo\":\"github.com/acme/api\"},"
				"\"git\":{\"hosts\":[\"github.com\"],"
				"\"github_app\":{\"app_id\":123,\"installation_id\":7,"
				"\"private_key_file\":\"/k.pem\",\"permissions\":{\"issues\":\"write\"}}}}");
	char tok[GHAPP_TOKEN_MAX + 2], *body, err[512], *text;
	struct ghapp_scope asked;
	struct ghapp_token t;
	json_t *subj;
	int rc;

	ASSERT(ghapp_scope_from_policy(p, &asked, err, sizeof(err)) == 0);
	memset(tok, 'x', sizeof(tok));
	tok[GHAPP_TOKEN_MAX] = '\0';
	body = util_xasprintf("{\"token\":\"%s\",\"expires_at\":\"2027-01-15T09:00:00Z\","
			      "\"permissions\":{\"issues\":\"read\",\"metadata\":\"read\"},"
			      "\"repository_selection\":\"selected\",\"repositories\":[{\"name\":\"api\"}]}",
			      tok);
	rc = ghapp_check_answer(&asked, 201, CT, body, strlen(body), NOW, &t, err, sizeof(err));
	tap_ok(rc == 0 && t.len == GHAPP_TOKEN_MAX, "a token of %d bytes is accepted",
	       GHAPP_TOKEN_MAX);
	subj = ghapp_subject(p, &asked, rc == 0 ? &t : NULL);
	text = json_dumps(subj, JSON_COMPACT | JSON_SORT_KEYS);
	tap_is_str(text,
		   "{\"expires_at\":\"2027-01-15T09:00:00Z\",\"host\":\"api.github.com\","
		   "\"installation_id\":7,\"owner\":\"acme\",\"permissions\":{\"issues\":\"read\","
		   "\"metadata\":\"read\"},\"repositories\":[\"api\"]}",
		   "subject of a mint: what was granted and the expiry, never the token");
	tap_ok(!strstr(text, "xxxx"), "the subject holds no token");
	free(text);
	json_decref(subj);
	tap_is_int(ghapp_refresh_at(&t), NOW + 3000, "refresh 10 minutes before an hour's expiry");
	t.expires_at = NOW + 600;
	tap_is_int(ghapp_refresh_at(&t), NOW + 300, "refresh half way through a 10-minute token");
	ghapp_token_clear(&t);
	tap_ok(!t.value && t.len == 0 && t.granted.nrepos == 0, "ghapp_token_clear zeroes");
	ghapp_token_clear(&t);
	free(body);

	tok[GHAPP_TOKEN_MAX] = 'x';
	tok[GHAPP_TOKEN_MAX + 1] = '\0';
	body = util_xasprintf("{\"token\":\"%s\",\"expires_at\":\"2027-01-15T09:00:00Z\","
			      "\"permissions\":{},\"repository_selection\":\"selected\","
			      "\"repositories\":[{\"name\":\"api\"}]}", tok);
	rc = ghapp_check_answer(&asked, 201, CT, body, strlen(body), NOW, &t, err, sizeof(err));
	tap_ok(rc == -1 && strstr(err, "token") && !strstr(err, "xxxx"),
	       "a token of %d bytes is refused (%s)", GHAPP_TOKEN_MAX + 1, err);
	free(body);
	ghapp_scope_free(&asked);
	policy_free(p);
}

static void cleanup(void)
{
	static const char *const files[] = { "pkcs8.pem", "pkcs1.pem", "small.pem", "ec.pem",
					      "encrypted.pem", "garbage.pem", "big.pem" };
	char path[128];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(files); i++) {
		snprintf(path, sizeof(path), "%s/%s", tmpdir, files[i]);
		unlink(path);
	}
	rmdir(tmpdir);
}

/* ---- GitLab: glmint.c --------------------------------------------------- */

#define GL_POLICY(api_hosts, minutes)                                                           \
	"{\"version\":1,\"session\":{\"repo\":\"gitlab.test/acme/platform/api\"},"            \
	"\"git\":{\"provider\":\"gitlab\",\"hosts\":[\"gitlab.test\"],\"api_hosts\":" api_hosts \
	",\"gitlab_mint\":{\"token_env\":\"GL_ADMIN\",\"expires_minutes\":" minutes "}}}"

/* 2026-12-07T17:00:00Z */
#define GL_NOW ((time_t)1796662800)

static void test_gl_scope(void)
{
	struct glmint_scope s;
	struct policy *p = load(GL_POLICY("[\"gitlab.test\"]", "90"));

	glmint_scope_from_policy(p, GL_NOW, &s);
	tap_is_str(s.project, "acme/platform/api", "scope: the session's project, nested");
	tap_ok(s.nscopes == 3 && strcmp(s.scopes[0], "read_repository") == 0 &&
		       strcmp(s.scopes[1], "write_repository") == 0 &&
		       strcmp(s.scopes[2], "api") == 0,
	       "scope: read/write_repository, api with an API host");
	tap_is_int(s.access_level, GLMINT_DEVELOPER, "scope: Developer");
	tap_is_str(s.expires_at, "2026-12-09", "scope: 90 minutes: at the earliest tomorrow, rounded up to a date");
	policy_free(p);
	p = load(GL_POLICY("[]", "4320"));
	glmint_scope_from_policy(p, GL_NOW, &s);
	tap_ok(s.nscopes == 2, "scope: no api scope without an API host");
	tap_is_str(s.expires_at, "2026-12-11", "scope: three days, rounded up");
	policy_free(p);
}

static const char *const GL_ANSWER_OK =
	"{\"id\":42,\"name\":\"airlock-s\",\"scopes\":[\"read_repository\",\"write_repository\"],"
	"\"access_level\":30,\"expires_at\":\"2026-12-09\",\"token\":\"glpat-abcdef\","
	"\"active\":true,\"revoked\":false}";

static void test_gl_answer(void)
{
	struct policy *p = load(GL_POLICY("[]", "90"));
	struct glmint_scope s;
	struct glmint_token t;
	char err[256];
	static const struct {
		unsigned int status;
		const char *ct, *body, *why;
	} bad[] = {
		{ 401, "application/json", "{\"message\":\"401 Unauthorized\"}", "HTTP 401: 401 Unauthorized" },
		{ 201, "text/html", "{}", "not application/json" },
		{ 201, "application/json", "[1]", "not a JSON object" },
		{ 201, "application/json", "{\"id\":1,\"scopes\":[],\"access_level\":30,\"expires_at\":\"2026-12-09\"}",
		  "no valid \"token\"" },
		{ 201, "application/json", "{\"token\":\"a b\",\"id\":1}", "no valid \"token\"" },
		{ 201, "application/json", "{\"token\":\"t\",\"scopes\":[]}", "no token \"id\"" },
		{ 201, "application/json",
		  "{\"token\":\"t\",\"id\":1,\"scopes\":[\"read_repository\",\"sudo\"],\"access_level\":30,"
		  "\"expires_at\":\"2026-12-09\"}", "scope \"sudo\"" },
		{ 201, "application/json",
		  "{\"token\":\"t\",\"id\":1,\"scopes\":[\"api\"],\"access_level\":30,"
		  "\"expires_at\":\"2026-12-09\"}", "scope \"api\"" },
		{ 201, "application/json",
		  "{\"token\":\"t\",\"id\":1,\"scopes\":[],\"access_level\":40,\"expires_at\":\"2026-12-09\"}",
		  "access_level 40" },
		{ 201, "application/json",
		  "{\"token\":\"t\",\"id\":1,\"scopes\":[],\"access_level\":30,\"expires_at\":\"2026-12-10\"}",
		  "later than asked" },
		{ 201, "application/json",
		  "{\"token\":\"t\",\"id\":1,\"scopes\":[],\"access_level\":30,\"expires_at\":null}",
		  "later than asked" },
		{ 201, "application/json",
		  "{\"token\":\"t\",\"id\":1,\"scopes\":[],\"access_level\":30,\"expires_at\":\"2026-12-09\","
		  "\"revoked\":true}", "revoked" },
	};
	size_t i;

	glmint_scope_from_policy(p, GL_NOW, &s);
	tap_is_int(glmint_check_answer(&s, 201, "application/json; charset=utf-8", GL_ANSWER_OK,
				       strlen(GL_ANSWER_OK), &t, err, sizeof(err)),
		   0, "answer: the exact grant is accepted");
	tap_ok(t.value && strcmp(t.value, "glpat-abcdef") == 0 && t.len == 12 && t.id == 42 &&
		       t.granted.nscopes == 2 && t.granted.access_level == 30 &&
		       t.expires_at == (time_t)1796774400,
	       "answer: token, id, scopes, role, expiry");
	glmint_token_clear(&t);
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		int rc = glmint_check_answer(&s, bad[i].status, bad[i].ct, bad[i].body,
					     strlen(bad[i].body), &t, err, sizeof(err));

		tap_ok(rc == -1 && strstr(err, bad[i].why) && !t.value && !strstr(err, "glpat"),
		       "answer refused: %s (%s)", bad[i].why, err);
	}
	policy_free(p);
}

int main(void)
{
	EVP_PKEY *rsa;

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_ghapp.XXXXXX");
	ASSERT(mkdtemp(tmpdir));
	rsa = EVP_RSA_gen(2048);
	ASSERT(rsa);
	test_scope();
	test_jwt(rsa);
	test_keys(rsa);
	test_answers();
	test_granted();
	test_gl_scope();
	test_gl_answer();
	EVP_PKEY_free(rsa);
	cleanup();
	return tap_done();
}
